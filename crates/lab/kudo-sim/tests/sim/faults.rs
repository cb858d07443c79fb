//! The simulator under an unreliable API server: injected 500s on every verb and watches cut
//! every second. Its writes are level-triggered and retried on the next pass and its watches
//! are re-established by kube-rs, so workloads must still converge.

use std::time::Duration;

use kudo_apiserver::FaultConfig;
use kudo_sim::SimConfig;
use serde_json::{Value, json};

use crate::{Env, eventually};

fn available(d: &Value, want: i64) -> bool {
    let ready = d
        .pointer("/status/readyReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let cond = d
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Available" && c["status"] == "True")
        });
    cond && ready == want && d.pointer("/spec/replicas").and_then(Value::as_i64) == Some(want)
}

/// Waits until at least `n` more watch streams have been cut than `before`.
async fn cuts_after(server: &kudo_apiserver::RunningServer, before: u64, n: u64) -> u64 {
    let faults = server.faults().clone();
    eventually("watch streams are cut", || {
        let faults = faults.clone();
        async move {
            let now = faults.counters().watch_cuts;
            (now >= before + n).then_some(now)
        }
    })
    .await
}

async fn wait_available(store: &kudo_apiserver::Store, want: i64) {
    eventually(
        &format!("the Deployment is Available with {want} ready replicas"),
        || {
            let store = store.clone();
            async move {
                let d = store
                    .get_obj("apps/v1", "Deployment", "default", "sturdy")
                    .ok()??;
                available(&d, want).then_some(())
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_becomes_available_despite_errors_and_watch_cuts() {
    let env = Env::start(SimConfig::default()).await;
    let server = env.server.as_ref().expect("server");
    server
        .faults()
        .set(FaultConfig {
            errors: vec!["*:500:0.1".parse().expect("rule")],
            watch_cut: Some(Duration::from_secs(1)),
            seed: Some(11),
            ..Default::default()
        })
        .expect("valid faults");
    // Every watch of the simulator (one per kind) has been cut and re-established at least
    // once before the workload exists, so it is seen through resumed watches.
    let cut = cuts_after(server, 0, 13).await;
    // Created and checked through the in-process store, which is not faulted: only the
    // simulator's HTTP traffic is.
    let store = server.store().clone();
    store
        .create_obj(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "sturdy", "namespace": "default"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "sturdy"}},
                "template": {
                    "metadata": {"labels": {"app": "sturdy"}},
                    "spec": {"containers": [{"name": "c", "image": "sturdy:1"}]}
                }
            }
        }))
        .expect("deployment created");
    wait_available(&store, 3).await;
    // Another round of cuts, then a scale-up must be noticed as well.
    cuts_after(server, cut, 13).await;
    store
        .merge_patch_obj(
            "apps/v1",
            "Deployment",
            "default",
            "sturdy",
            kudo_apiserver::Subresource::Main,
            &json!({"spec": {"replicas": 5}}),
        )
        .expect("scaled");
    wait_available(&store, 5).await;
    let counters = server.faults().counters();
    assert!(counters.internal_errors > 0, "{counters:?}");
    env.stop().await;
}
