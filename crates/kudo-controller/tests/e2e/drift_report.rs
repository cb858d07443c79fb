//! Drift policies `report` (drift is announced with a Warning Event and a condition, and left in
//! place) and `ignore` (nothing is compared).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::first_operator;
use crate::harness::{self, Env};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_is_reported_and_left_alone_with_policy_report() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = first_operator(dir.path());
    env.install(&pkg, "rp", BTreeMap::new()).await;
    env.wait_plan("rp", "deploy", "COMPLETE").await;
    env.wait_ready_replicas("apps/v1", "Deployment", "rp-nginx", 2)
        .await;
    let deps: Api<Deployment> = Api::namespaced(env.client.clone(), harness::NS);
    let kubectl = PatchParams {
        field_manager: Some("kubectl".into()),
        ..Default::default()
    };
    let scale = |n: i64| Patch::Merge(json!({"spec": {"replicas": n}}));

    // Default policy first: the scale is reverted. Its pods keep the controller busy while the
    // policy changes below, which is what used to let a stale reconcile repair the next scale.
    deps.patch("rp-nginx", &kubectl, &scale(5)).await.unwrap();
    harness::wait_for("DriftRepaired event", || async {
        env.event_reasons("rp")
            .await
            .contains(&"DriftRepaired".to_string())
            .then_some(())
    })
    .await;

    env.patch_instance(
        "rp",
        json!({"metadata": {"annotations": {"kudo.dev/drift-policy": "report"}}}),
    )
    .await;
    deps.patch("rp-nginx", &kubectl, &scale(3)).await.unwrap();
    let inst = env
        .wait_instance("rp", "Drifted=True", |i| {
            harness::condition(i, "Drifted").is_some_and(|c| c["status"] == "True")
        })
        .await;
    let cond = harness::condition(&inst, "Drifted").unwrap();
    assert_eq!(cond["reason"], "DriftDetected", "{cond}");
    assert!(
        cond["message"]
            .as_str()
            .unwrap()
            .contains("Deployment default/rp-nginx (changed)"),
        "{cond}"
    );
    let events = env.events("rp").await;
    let detected: Vec<_> = events.iter().filter(|(r, _)| r == "DriftDetected").collect();
    assert!(!detected.is_empty(), "{events:?}");
    assert!(detected[0].1.contains("rp-nginx"), "{events:?}");

    // Not repaired: the scale stands, also after further idle reconciles (an Instance label
    // change triggers one).
    env.wait_ready_replicas("apps/v1", "Deployment", "rp-nginx", 3)
        .await;
    env.patch_instance("rp", json!({"metadata": {"labels": {"touch": "1"}}}))
        .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let d = env.get("apps/v1", "Deployment", "rp-nginx").await.unwrap();
    assert_eq!(d["spec"]["replicas"], 3, "{d}");
    let inst = env.get("kudo.dev/v1beta1", "Instance", "rp").await.unwrap();
    assert_eq!(
        harness::condition(&inst, "Drifted").unwrap()["status"],
        "True",
        "{inst}"
    );

    // Policy `ignore`: nothing is compared, so nothing is repaired or reported.
    // Occurrences, not Event objects: repeats of an Event are counted in its series.
    let drift_events = || async {
        env.event_occurrences("rp", "DriftDetected")
            .await
            .iter()
            .sum::<i32>()
    };
    let reported = drift_events().await;
    env.patch_instance(
        "rp",
        json!({"metadata": {"annotations": {"kudo.dev/drift-policy": "ignore"}}}),
    )
    .await;
    env.wait_instance("rp", "Drifted condition cleared", |i| {
        harness::condition(i, "Drifted").is_none_or(|c| c["status"] != "True")
    })
    .await;
    deps.patch("rp-nginx", &kubectl, &scale(4)).await.unwrap();
    env.wait_ready_replicas("apps/v1", "Deployment", "rp-nginx", 4)
        .await;
    env.patch_instance("rp", json!({"metadata": {"labels": {"touch": "2"}}}))
        .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let d = env.get("apps/v1", "Deployment", "rp-nginx").await.unwrap();
    assert_eq!(d["spec"]["replicas"], 4, "{d}");
    assert_eq!(
        drift_events().await,
        reported,
        "no DriftDetected with policy ignore"
    );
    env.stop().await;
}
