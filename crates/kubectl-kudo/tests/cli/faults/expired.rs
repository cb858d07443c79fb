//! Watches that expire: the manager is stopped (SIGSTOP: its state and connections kept, nothing
//! read) while the cluster moves on — in a first gap a child is deleted, in a second the
//! Instance's spec is changed — and in each gap etcd is compacted to its newest revision and the
//! API server restarted, so that a watch resumed from the resourceVersion the manager last saw is
//! answered 410 Gone (the test checks that answer itself before the manager goes on). The manager
//! must list again and miss nothing: the deleted child repaired without a plan run, the changed
//! spec's plan run to COMPLETE, and the same checker as the kill rounds judges the history.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ListParams, WatchEvent, WatchParams};
use serde_json::Value;

use super::invariants::Checker;
use super::lab::{INSTANCE, Lab};
use super::manager;
use super::outage::{restart_api_server, wait_for};

/// The child the first gap deletes.
const DELETED: &str = "f-settings";

/// One request to etcd's v3 JSON gateway on the fault cluster (plain HTTP on loopback).
fn etcd(path: &str, body: &Value) -> Value {
    let dir = PathBuf::from(std::env::var("KUDO_FAULTS_CLUSTER_DIR").expect("KUDO_FAULTS_CLUSTER_DIR"));
    let ports = std::fs::read_to_string(dir.join("ports.env")).expect("the kit's ports.env");
    let port = ports
        .lines()
        .find_map(|l| l.strip_prefix("ETCD_PORT="))
        .expect("ETCD_PORT in ports.env");
    let out = std::process::Command::new("curl")
        .args([
            "-sf",
            "-X",
            "POST",
            &format!("http://127.0.0.1:{port}{path}"),
            "-d",
        ])
        .arg(body.to_string())
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "etcd {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("etcd answers JSON")
}

/// Compacts etcd to its newest revision (every older one gone); that revision.
fn compact_etcd() -> i64 {
    // A range of one absent key ("\0") answers with the store's revision in its header.
    let head = etcd("/v3/kv/range", &serde_json::json!({"key": "AA=="}));
    let rev: i64 = head["header"]["revision"]
        .as_str()
        .and_then(|r| r.parse().ok())
        .expect("a revision");
    etcd(
        "/v3/kv/compaction",
        &serde_json::json!({"revision": rev.to_string(), "physical": true}),
    );
    rev
}

/// Whether a watch of the lab's ConfigMaps from `rv` is answered 410 Gone.
async fn expired(lab: &Lab, rv: &str) -> bool {
    let api: Api<ConfigMap> = Api::namespaced(lab.client.clone(), &lab.ns);
    match api.watch(&WatchParams::default().timeout(5), rv).await {
        Err(kube::Error::Api(s)) => s.code == 410,
        Err(_) => false,
        Ok(stream) => {
            let mut stream = std::pin::pin!(stream);
            matches!(stream.next().await, Some(Ok(WatchEvent::Error(e))) if e.code == 410)
        }
    }
}

/// The resourceVersion of a list of the lab's ConfigMaps: where a watch would resume.
async fn current_rv(lab: &Lab) -> String {
    let api: Api<ConfigMap> = Api::namespaced(lab.client.clone(), &lab.ns);
    let list = api.list(&ListParams::default()).await.expect("list ConfigMaps");
    list.metadata.resource_version.expect("a list resourceVersion")
}

/// The end of a gap: etcd compacted, the API server restarted; whether a watch from `rv` (from
/// before the gap) is now answered 410.
async fn expire(lab: &Lab, rv: &str) -> bool {
    compact_etcd();
    restart_api_server().await;
    expired(lab, rv).await
}

/// Waits (at most `limit`) until the deleted child exists again; how long that took.
async fn repaired(lab: &Lab, limit: Duration) -> Option<Duration> {
    let api: Api<ConfigMap> = Api::namespaced(lab.client.clone(), &lab.ns);
    let at = Instant::now();
    while at.elapsed() < limit {
        if api.get_opt(DELETED).await.ok().flatten().is_some() {
            return Some(at.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "fault cluster: run by scripts/faults-stage.sh"]
async fn faults_watches_expired_while_the_manager_was_away_are_listed_again_without_missing_a_change() {
    let _turn = super::ONE_AT_A_TIME.lock().await;
    let mut lab = Lab::new("faults-410").await;
    let mut checker = Checker::start(&lab.client, &lab.ns, INSTANCE);
    lab.install(&[]).await;
    let mut m = lab.manager(None, None);
    let mut runs = Vec::new();
    let first = wait_for(&lab, &runs, "COMPLETE", Duration::from_secs(90)).await;
    runs.push(first.expect("the deploy completes"));
    // Let the manager's watches catch up with the end of its own run.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let rv = current_rv(&lab).await;
    m.signal("STOP");
    let cms: Api<ConfigMap> = Api::namespaced(lab.client.clone(), &lab.ns);
    cms.delete(DELETED, &DeleteParams::default())
        .await
        .expect("delete the child");
    let gone_1 = expire(&lab, &rv).await;
    m.signal("CONT");
    let took_1 = repaired(&lab, Duration::from_secs(90)).await;

    let rv = current_rv(&lab).await;
    m.signal("STOP");
    lab.kudo(&["update", "--instance", INSTANCE, "-p", "ROUND=gap"])
        .await;
    let gone_2 = expire(&lab, &rv).await;
    m.signal("CONT");
    let back = Instant::now();
    let second = wait_for(&lab, &runs, "COMPLETE", Duration::from_secs(120)).await;
    let took_2 = back.elapsed();
    println!(
        "=== expired watches: 410 for a watch from before each gap: {gone_1}, {gone_2}; \
         deleted child repaired {:.1} s after; changed spec COMPLETE {:.1} s after",
        took_1.unwrap_or_default().as_secs_f64(),
        took_2.as_secs_f64()
    );
    assert!(!m.exited(), "the manager lived through both gaps");
    m.kill().await;
    assert!(
        gone_1 && gone_2,
        "a watch from before the gap was not answered 410"
    );
    assert!(
        took_1.is_some(),
        "{DELETED}, deleted while the manager was away, was not repaired"
    );
    runs.push(second.expect("the spec changed while the manager was away runs its plan"));

    let inst = lab.instance().await.expect("the Instance");
    checker.snapshot(&inst, "after the expired watches");
    let recreated: Vec<String> = checker
        .recreated("after the expired watches")
        .into_iter()
        .filter(|v| !v.contains(&format!("ConfigMap/{DELETED} ")))
        .collect();
    checker
        .check_history(inst["metadata"]["uid"].as_str().unwrap(), runs.len())
        .await;
    checker.stop();
    lab.finish().await;
    assert!(recreated.is_empty(), "{recreated:#?}");
    assert!(
        manager::bad_lines(&lab.logs).is_empty(),
        "{:#?}",
        manager::bad_lines(&lab.logs)
    );
    assert!(checker.violations.is_empty(), "{:#?}", checker.violations);
}
