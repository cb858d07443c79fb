//! Sharded managers (`shards` > 1): replicas share the Instances by shard Leases, a newcomer gets
//! its fair share, a dead replica's shards move to the survivor — and no Instance is ever written
//! by two replicas at once. Every Instance write of each replica is recorded by a client wrapper,
//! so the proof does not rely on anything the manager says about itself.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use kudo_controller::shard::{LEASE_GROUP_LABEL, SHARD_LABEL};
use kudo_controller::{ControllerConfig, LeaderElection};

use crate::first_operator;
use crate::harness::{self, Controller, Env, metric};

const SHARDS: u32 = 4;

fn sharded(identity: &str) -> ControllerConfig {
    ControllerConfig {
        leader_election: Some(LeaderElection {
            lease_name: "kudo-manager".into(),
            namespace: harness::NS.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(3),
        }),
        shards: SHARDS,
        ..ControllerConfig::default()
    }
}

/// Instance writes in the order the API server was asked: (replica, Instance name).
type Writes = Arc<Mutex<Vec<(&'static str, String)>>>;

/// Watches opened, in order: (replica, resource plural, label selector).
type Watched = Arc<Mutex<Vec<(&'static str, String, String)>>>;

/// A query parameter's value, decoded (`+` and `%XX`).
fn query_param(query: &str, key: &str) -> Option<String> {
    let raw = query
        .split('&')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))?;
    let bytes = raw.replace('+', " ").into_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// `inner`, recording every write it sends to an Instance (the object or its status) and every
/// watch it opens as `who`.
fn recording(inner: kube::Client, who: &'static str, writes: Writes, watched: Watched) -> kube::Client {
    let ns = inner.default_namespace().to_string();
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let query = req.uri().query().unwrap_or_default();
        if req.method() == http::Method::GET && query_param(query, "watch").as_deref() == Some("true") {
            let plural = req
                .uri()
                .path()
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string();
            let selector = query_param(query, "labelSelector").unwrap_or_default();
            watched.lock().unwrap().push((who, plural, selector));
        }
        if req.method() != http::Method::GET
            && let Some(rest) = req.uri().path().split("/instances/").nth(1)
            && req.uri().path().starts_with("/apis/kudo.dev/")
        {
            let name = rest.split('/').next().unwrap_or_default().to_string();
            writes.lock().unwrap().push((who, name));
        }
        let inner = inner.clone();
        async move { inner.send(req).await }
    });
    kube::Client::new(svc, ns)
}

/// Waits until `ctl` acts on `n` shards and, holding any, says it is ready (not `standby`).
async fn wait_shards(ctl: &Controller, who: &str, n: f64) {
    harness::wait_for(&format!("{who} to hold {n} shards"), || async {
        (metric(&ctl.metrics().await, "kudo_shards_held") == Some(n)).then_some(())
    })
    .await;
    let want = if n > 0.0 { "ok\n" } else { "standby\n" };
    harness::wait_for(&format!("{who} to answer /readyz {want:?}"), || async {
        (ctl.get("/readyz").await == (200, want.to_string())).then_some(())
    })
    .await;
}

/// Holder of each shard Lease.
async fn holders(env: &Env) -> BTreeMap<String, Option<String>> {
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), harness::NS);
    let lp = ListParams::default().labels(&format!("{LEASE_GROUP_LABEL}=kudo-manager,{SHARD_LABEL}"));
    leases
        .list(&lp)
        .await
        .expect("list leases")
        .items
        .into_iter()
        .map(|l| {
            (
                l.metadata.name.unwrap_or_default(),
                l.spec.and_then(|s| s.holder_identity),
            )
        })
        .collect()
}

/// Each Instance's writers in order, consecutive writes by one replica counted once.
fn writer_runs(writes: &Writes) -> BTreeMap<String, Vec<&'static str>> {
    let mut runs: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    for (who, name) in writes.lock().unwrap().iter() {
        let r = runs.entry(name.clone()).or_default();
        if r.last() != Some(who) {
            r.push(who);
        }
    }
    runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_split_the_shards_take_over_a_dead_ones_and_never_write_one_instance_together() {
    let mut sim = kudo_sim::SimConfig::default();
    // Plans take a while, so some are in flight when a replica joins or dies.
    sim.delays.running_to_ready = Duration::from_millis(1500);
    let env = Env::start_bare(sim).await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = first_operator(dir.path());
    let writes: Writes = Arc::default();
    let watched: Watched = Arc::default();
    let client = |who| recording(env.client.clone(), who, writes.clone(), watched.clone());

    // One replica alone holds every shard.
    let a = env
        .spawn_controller_with(client("a"), sharded("manager-a"), true)
        .await;
    wait_shards(&a, "a", 4.0).await;
    env.install(&pkg, "sh-0", BTreeMap::new()).await;
    for i in 1..8 {
        env.install_instance(&pkg, &format!("sh-{i}"), BTreeMap::new())
            .await;
    }

    // A second replica joins while those run: a releases half, b takes them.
    let b = env
        .spawn_controller_with(client("b"), sharded("manager-b"), true)
        .await;
    wait_shards(&a, "a", 2.0).await;
    wait_shards(&b, "b", 2.0).await;
    let split = holders(&env).await;
    let by = |who: &str| split.values().filter(|h| h.as_deref() == Some(who)).count();
    assert_eq!((by("manager-a"), by("manager-b")), (2, 2), "{split:?}");
    for i in 0..8 {
        env.wait_plan(&format!("sh-{i}"), "deploy", "COMPLETE").await;
    }

    // More Instances, then a dies mid-plan without releasing anything: b takes its shards once
    // their Leases expire and finishes every plan.
    for i in 8..16 {
        env.install_instance(&pkg, &format!("sh-{i}"), BTreeMap::new())
            .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    a.kill().await;
    wait_shards(&b, "b", 4.0).await;
    for i in 0..16 {
        env.wait_plan(&format!("sh-{i}"), "deploy", "COMPLETE").await;
    }

    // b acts on a's former shards: an update of an Instance only a ever wrote is b's to run.
    let only_a: Vec<String> = writer_runs(&writes)
        .into_iter()
        .filter(|(_, s)| s.as_slice() == ["a"])
        .map(|(n, _)| n)
        .collect();
    assert!(
        !only_a.is_empty(),
        "a kept two shards, so some Instances were a's alone"
    );
    for n in &only_a {
        env.patch_instance(n, serde_json::json!({"spec": {"parameters": {"REPLICAS": "3"}}}))
            .await;
    }
    for n in &only_a {
        env.wait_ready_replicas("apps/v1", "Deployment", &format!("{n}-nginx"), 3)
            .await;
    }

    let runs = writer_runs(&writes);
    assert_eq!(runs.len(), 16, "{runs:?}");
    for n in &only_a {
        assert_eq!(runs[n], ["a", "b"], "{n} was updated by b");
    }
    for (name, seq) in &runs {
        // Handed over at most once, and only from a to b: never back, never interleaved.
        assert!(
            matches!(seq.as_slice(), ["a"] | ["b"] | ["a", "b"]),
            "{name} was written by {seq:?}"
        );
    }
    let only = |who| runs.values().filter(|s| s.as_slice() == [who]).count();
    assert!(only("b") >= 1, "b reconciled nothing of its own shards: {runs:?}");
    let touched_by_a: BTreeSet<_> = runs.iter().filter(|(_, s)| s[0] == "a").map(|(n, _)| n).collect();
    assert!(!touched_by_a.is_empty(), "{runs:?}");

    labelled_and_watched_by_bucket(&env, &watched).await;

    // A clean shutdown frees every shard and the member Lease.
    b.stop().await;
    let after = holders(&env).await;
    assert!(after.values().all(Option::is_none), "{after:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharding_needs_leader_election_and_at_least_one_shard() {
    let env = Env::start_bare(kudo_sim::SimConfig::default()).await;
    for config in [
        ControllerConfig {
            shards: 2,
            ..ControllerConfig::default()
        },
        ControllerConfig {
            shards: 0,
            ..sharded("x")
        },
        ControllerConfig {
            shards: 1025,
            ..sharded("x")
        },
    ] {
        let err = kudo_controller::run(env.client.clone(), config, std::future::pending::<()>())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("shard"), "{err}");
    }
    env.stop().await;
}

/// Every Instance, its Deployment's pod template and its pods carry the Instance's bucket; each
/// replica watched Pods through the unlabelled view and the buckets of the shards it held (b:
/// first its two shards, then all four).
async fn labelled_and_watched_by_bucket(env: &Env, watched: &Watched) {
    use kudo_engine::shard::{BUCKET_LABEL, bucket_of};
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.client.clone(), harness::NS);
    for i in 0..16 {
        let name = format!("sh-{i}");
        let bucket = bucket_of(harness::NS, &name).to_string();
        let inst = env
            .get("kudo.dev/v1beta1", "Instance", &name)
            .await
            .expect("instance");
        assert_eq!(
            inst["metadata"]["labels"][BUCKET_LABEL],
            bucket.as_str(),
            "{name}"
        );
        let dep = env
            .get("apps/v1", "Deployment", &format!("{name}-nginx"))
            .await
            .expect("deployment");
        assert_eq!(dep["metadata"]["labels"][BUCKET_LABEL], bucket.as_str(), "{name}");
        assert_eq!(
            dep["spec"]["template"]["metadata"]["labels"][BUCKET_LABEL],
            bucket.as_str()
        );
        let lp = ListParams::default().labels(&format!("kudo.dev/instance={name}"));
        let listed = pods.list(&lp).await.expect("pods").items;
        assert!(!listed.is_empty(), "{name} has pods");
        for p in listed {
            assert_eq!(
                p.metadata.labels.unwrap_or_default().get(BUCKET_LABEL),
                Some(&bucket)
            );
        }
    }
    let pod_selectors = |who: &str| -> Vec<String> {
        let w = watched.lock().unwrap();
        w.iter()
            .filter(|(by, plural, _)| *by == who && plural == "pods")
            .map(|(_, _, sel)| sel.clone())
            .collect()
    };
    let buckets = |sel: &str| -> Option<Vec<u32>> {
        let list = sel
            .split_once(&format!("{BUCKET_LABEL} in ("))?
            .1
            .trim_end_matches(')');
        Some(list.split(',').filter_map(|b| b.parse().ok()).collect())
    };
    let b = pod_selectors("b");
    assert!(
        b.iter().any(|s| s == &format!("heritage=kudo,!{BUCKET_LABEL}")),
        "{b:?}"
    );
    let held: Vec<Vec<u32>> = b.iter().filter_map(|s| buckets(s)).collect();
    assert!(
        held.iter().any(|l| l.len() == 512),
        "b watched its two shards' buckets: {held:?}"
    );
    assert_eq!(
        held.last().map(Vec::len),
        Some(1024),
        "b watched all four shards at last"
    );
    for l in &held {
        let shards: BTreeSet<u32> = l.iter().map(|b| b % SHARDS).collect();
        assert_eq!(l.len(), shards.len() * 256, "whole shards only: {shards:?}");
    }
}
