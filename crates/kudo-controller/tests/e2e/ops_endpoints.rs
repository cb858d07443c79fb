//! The manager's /metrics, /healthz and /readyz, scraped over HTTP while a real deploy runs.

use std::collections::BTreeMap;

use kudo_controller::ControllerConfig;
use kudo_package::render::{Action, RenderContext, render_plan};

use crate::galera_dir;
use crate::harness::{self, Env, metric};

/// Number of objects the galera deploy plan applies (rendered offline from the package).
fn galera_deploy_objects(instance: &str) -> usize {
    let pkg = kudo_package::read_path(&galera_dir()).expect("package reads");
    let res = kudo_package::resources::to_resources(&pkg, &Default::default()).expect("package converts");
    let ctx = RenderContext {
        instance_name: instance.to_string(),
        namespace: harness::NS.to_string(),
        parameters: BTreeMap::new(),
        plan_uid: "u".into(),
        instance_uid: "i".into(),
        is_namespaced: None,
        live_dependency: None,
        rollback: None,
        parse_memo: None,
    };
    render_plan(&res.operator_version, "deploy", &ctx)
        .expect("deploy renders")
        .iter()
        .filter(|o| o.action == Action::Apply)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_readiness_over_http_during_a_galera_deploy() {
    let env = Env::start_bare(kudo_sim::SimConfig::default()).await;
    let ctl = env.spawn_controller(ControllerConfig::default(), true).await;

    assert_eq!(ctl.get("/healthz").await, (200, "ok\n".to_string()));
    // Ready once the Instance watch has listed (no leader election: this manager acts).
    harness::wait_for("readyz 200", || async {
        (ctl.get("/readyz").await.0 == 200).then_some(())
    })
    .await;

    env.install(&galera_dir(), "mg", BTreeMap::new()).await;
    env.wait_plan("mg", "deploy", "COMPLETE").await;

    let text = ctl.metrics().await;
    let series = "kudo_plan_runs_total{operator=\"galera\",plan=\"deploy\",result=\"COMPLETE\"}";
    assert_eq!(metric(&text, series), Some(1.0), "{text}");
    let hist = "kudo_plan_duration_seconds_count{operator=\"galera\",plan=\"deploy\",result=\"COMPLETE\"}";
    assert_eq!(metric(&text, hist), Some(1.0), "{text}");
    // measured Below the second (whole seconds before).
    let sum = "kudo_plan_duration_seconds_sum{operator=\"galera\",plan=\"deploy\",result=\"COMPLETE\"}";
    let secs = metric(&text, sum).expect("duration sum");
    assert!(secs > 0.0 && secs.fract() != 0.0, "{secs}: {text}");
    let objects = galera_deploy_objects("mg");
    assert!(objects >= 8, "galera's deploy applies {objects} objects");
    let applied = metric(&text, "kudo_objects_applied_total").unwrap_or(0.0);
    assert!(
        applied >= objects as f64,
        "applied {applied} < {objects} objects:\n{text}"
    );
    assert!(
        metric(&text, "kudo_reconciles_total{result=\"success\"}").unwrap_or(0.0) >= 1.0,
        "{text}"
    );
    assert_eq!(metric(&text, "kudo_leader"), Some(1.0), "{text}");
    // Requests by verb, counted at the manager's client: it watches, reads and applies.
    let requests =
        |verb: &str| metric(&text, &format!("kudo_api_requests_total{{verb=\"{verb}\"}}")).unwrap_or(0.0);
    assert!(requests("watch") >= 1.0, "{text}");
    assert!(requests("list") >= 1.0, "{text}");
    assert!(requests("get") >= 1.0, "{text}");
    assert!(requests("patch") >= objects as f64, "{text}");
    assert_eq!(
        metric(&text, "kudo_reconciles_in_flight").map(|v| v >= 0.0),
        Some(true),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");

    assert_eq!(ctl.get("/healthz").await.0, 200);
    assert_eq!(ctl.get("/readyz").await, (200, "ok\n".to_string()));
    assert_eq!(ctl.get("/nothing-here").await.0, 404);
    ctl.stop().await;
    env.stop().await;
}
