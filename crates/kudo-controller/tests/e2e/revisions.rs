//! Revision history from the manager's side: every admitted run is recorded as
//! a ControllerRevision owned by the Instance with who started it and its outcome, and only the
//! newest `revision_history_limit` are kept.

use kube::api::{Api, DynamicObject, ListParams};
use kudo_controller::ControllerConfig;

use crate::harness::{self, Env, wait_for};

async fn revisions(env: &Env, instance: &str) -> Vec<kudo_engine::revision::Revision> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        harness::NS,
        &kudo_kube::known_resource("apps", "ControllerRevision"),
    );
    let items = api
        .list(&ListParams::default().labels(&format!("kudo.dev/instance={instance}")))
        .await
        .expect("list controllerrevisions");
    let values: Vec<serde_json::Value> = items
        .items
        .iter()
        .map(|o| serde_json::to_value(o).unwrap())
        .collect();
    let inst = env
        .get("kudo.dev/v1beta1", "Instance", instance)
        .await
        .expect("instance");
    let uid = inst["metadata"]["uid"].as_str().unwrap();
    kudo_engine::revision::history(&values, uid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_runs_are_recorded_and_only_the_newest_revisions_are_kept() {
    let env = Env::start_bare(kudo_sim::SimConfig::default()).await;
    let config = ControllerConfig {
        revision_history_limit: 3,
        ..Default::default()
    };
    let controller = env.spawn_controller(config, false).await;
    let dir = tempfile::tempdir().unwrap();
    crate::schedule::install(&env, dir.path(), "rev", "@every 1s").await;
    env.wait_plan("rev", "deploy", "COMPLETE").await;
    // The install plus at least four scheduled backups: the first ones are pruned.
    let revs = wait_for("five revisions recorded, three kept", || async {
        let revs = revisions(&env, "rev").await;
        let newest = revs.last().map_or(0, |r| r.number);
        (newest >= 5 && revs.iter().all(|r| r.number > 1)).then_some(revs)
    })
    .await;
    assert!(revs.len() <= 3, "{revs:#?}");
    let numbers: Vec<u64> = revs.iter().map(|r| r.number).collect();
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
    for r in &revs {
        assert_eq!(r.data.plan, "backup", "{r:#?}");
        assert_eq!(r.data.started_by.word(), "schedule", "{r:#?}");
        assert!(r.data.change.starts_with("scheduled ("), "{r:#?}");
    }
    // Every finished run has its outcome; at most the newest may still run.
    let finished = wait_for("outcomes recorded", || async {
        let revs = revisions(&env, "rev").await;
        let done = revs.iter().filter(|r| r.outcome.is_some()).count();
        (done + 1 >= revs.len()).then_some(revs)
    })
    .await;
    assert!(
        finished
            .iter()
            .filter_map(|r| r.outcome)
            .all(|o| o == kudo_engine::revision::Outcome::Complete),
        "{finished:#?}"
    );
    controller.stop().await;
    env.stop().await;
}
