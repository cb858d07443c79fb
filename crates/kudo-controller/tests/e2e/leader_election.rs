//! Leader election: two managers against one embedded cluster, only the Lease holder acts.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kudo_controller::{ControllerConfig, LeaderElection};

use crate::first_operator;
use crate::harness::{self, Controller, Env, metric};

fn elected(identity: &str, lease_duration: Duration) -> ControllerConfig {
    ControllerConfig {
        leader_election: Some(LeaderElection {
            lease_name: "kudo-manager".into(),
            namespace: harness::NS.into(),
            identity: identity.into(),
            lease_duration,
        }),
        ..ControllerConfig::default()
    }
}

async fn wait_leader(ctl: &Controller, who: &str) {
    harness::wait_for(&format!("{who} to lead"), || async {
        (metric(&ctl.metrics().await, "kudo_leader") == Some(1.0)).then_some(())
    })
    .await;
}

async fn holder(env: &Env) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), harness::NS);
    leases
        .get_opt("kudo-manager")
        .await
        .expect("lease get")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

/// Every kudo Event about `instance` was published by `identity`.
async fn assert_events_from(env: &Env, instance: &str, identity: &str) {
    let events = env.event_reporters(instance).await;
    assert!(
        events
            .iter()
            .any(|(r, _)| r == "PlanFinished" || r == "PlanStarted"),
        "{events:?}"
    );
    assert!(events.iter().all(|(_, by)| by == identity), "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_reconciles_and_a_standby_takes_over_after_a_crash() {
    let env = Env::start_bare(kudo_sim::SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = first_operator(dir.path());
    // Short, but with a 2 s renewal margin so a loaded test machine does not flap the lease.
    let lease = Duration::from_secs(6);

    let a = env.spawn_controller(elected("manager-a", lease), true).await;
    wait_leader(&a, "manager-a").await;
    let b = env.spawn_controller(elected("manager-b", lease), true).await;
    // The standby is alive and ready (it is ready to take over), but does not lead.
    assert_eq!(b.get("/healthz").await.0, 200);
    assert_eq!(b.get("/readyz").await, (200, "standby\n".to_string()));

    env.install(&pkg, "le1", BTreeMap::new()).await;
    env.wait_plan("le1", "deploy", "COMPLETE").await;
    env.wait_ready_replicas("apps/v1", "Deployment", "le1-nginx", 2)
        .await;
    // The leader keeps its lease across a renewal: the standby stays out.
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), harness::NS);
    harness::wait_for("a lease renewal", || async {
        let spec = leases.get("kudo-manager").await.ok()?.spec?;
        (spec.renew_time? != spec.acquire_time?).then_some(())
    })
    .await;
    assert_eq!(holder(&env).await.as_deref(), Some("manager-a"));
    let text_b = b.metrics().await;
    assert_eq!(metric(&text_b, "kudo_leader"), Some(0.0), "{text_b}");
    for result in ["success", "error"] {
        let series = format!("kudo_reconciles_total{{result=\"{result}\"}}");
        assert_eq!(metric(&text_b, &series).unwrap_or(0.0), 0.0, "{text_b}");
    }
    let text_a = a.metrics().await;
    assert!(
        metric(&text_a, "kudo_reconciles_total{result=\"success\"}").unwrap_or(0.0) >= 1.0,
        "{text_a}"
    );
    assert_events_from(&env, "le1", "manager-a").await;

    // The leader crashes without releasing the lease: the standby takes over once it expires.
    a.kill().await;
    env.install_instance(&pkg, "le2", BTreeMap::new()).await;
    env.wait_plan("le2", "deploy", "COMPLETE").await;
    assert_eq!(holder(&env).await.as_deref(), Some("manager-b"));
    let text_b = b.metrics().await;
    assert_eq!(metric(&text_b, "kudo_leader"), Some(1.0), "{text_b}");
    assert!(
        metric(&text_b, "kudo_reconciles_total{result=\"success\"}").unwrap_or(0.0) >= 1.0,
        "{text_b}"
    );
    assert_events_from(&env, "le2", "manager-b").await;
    assert_eq!(b.get("/readyz").await, (200, "ok\n".to_string()));

    // A clean shutdown releases the lease.
    b.stop().await;
    assert_eq!(holder(&env).await, None);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_shutdown_hands_the_lease_over_without_waiting_for_expiry() {
    let env = Env::start_bare(kudo_sim::SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = first_operator(dir.path());
    // A lease far longer than the wait below: only a release lets the standby in that fast.
    let lease = Duration::from_secs(120);

    let a = env.spawn_controller(elected("manager-a", lease), true).await;
    wait_leader(&a, "manager-a").await;
    let b = env.spawn_controller(elected("manager-b", lease), true).await;
    // b has seen the lease held by a before a leaves.
    harness::wait_for("b to see the lease", || async {
        (b.get("/readyz").await.1 == "standby\n").then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.stop().await;

    let took_over = harness::wait_for_opt(Duration::from_secs(40), || async {
        (metric(&b.metrics().await, "kudo_leader") == Some(1.0)).then_some(())
    })
    .await;
    assert!(
        took_over.is_some(),
        "the standby did not take over a released lease (holder {:?})",
        holder(&env).await
    );
    env.install(&pkg, "ho", BTreeMap::new()).await;
    env.wait_plan("ho", "deploy", "COMPLETE").await;
    assert_events_from(&env, "ho", "manager-b").await;
    b.stop().await;
    env.stop().await;
}
