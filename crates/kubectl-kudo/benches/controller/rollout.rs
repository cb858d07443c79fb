//! `rollout [N]`: N `examples/first-operator` Instances deployed as `scale N` deploys them, then
//! one Rollout carries all of them to the package's next OperatorVersion (the same package as
//! 0.3.0: its deploy plan runs again). The deploy of the same Instances, in the same run, is the
//! reference: the rollout's time, manager CPU and writes per Instance are printed beside it.

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

use super::{
    Cluster, NS, Shape, cpu_seconds, metrics_page, repo, requests, spawn_manager, wait_all_complete,
};

/// The waves of the bench's Rollout: a canary of one, 10 % and 40 % of the Instances, then the
/// rest; at most 100 Instances change at once.
fn rollout_object(name: &str, to: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kudo-rs.dev/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": name},
        "spec": {
            "target": {"operatorVersion": to},
            "selector": {"matchLabels": {"kudo.dev/operator": "first-operator"}},
            "namespaces": [NS],
            "canary": 1,
            "waves": [{"size": "10%"}, {"size": "40%"}],
            "maxConcurrent": 100,
        },
    }))
    .expect("a Rollout")
}

/// What one phase of the run cost the manager: seconds, CPU seconds, and write requests
/// (create, update, patch, delete; Events and the Rollout's status included).
#[derive(Clone, Copy, Default)]
struct Cost {
    secs: f64,
    cpu: f64,
    writes: f64,
}

async fn writes_so_far(addr: std::net::SocketAddr) -> f64 {
    let page = metrics_page(addr).await.expect("the manager's metrics");
    ["create", "update", "patch", "delete"]
        .iter()
        .map(|v| requests(&page, v))
        .sum()
}

/// Polls the Rollout until its phase is `Complete` (one GET every 500 ms) or `deadline`; its
/// status then.
async fn wait_rollout(c: &Cluster, name: &str, deadline: Instant) -> serde_json::Value {
    let api: Api<DynamicObject> = Api::all_with(
        c.client.clone(),
        &kudo_kube::known_resource(kudo_api::rollout::GROUP, kudo_api::rollout::KIND),
    );
    loop {
        let r = api.get(name).await.expect("the Rollout");
        if r.data["status"]["phase"] == "Complete" || Instant::now() >= deadline {
            return r.data["status"].clone();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub(super) async fn rollout(n: usize, deadline: Duration) {
    let c = super::cluster().await;
    let fo = repo().join("examples/first-operator");
    let res = c.install_operator(&fo).await;
    let next = super::resources(&fo, Some("0.3.0"));
    c.create(&next.operator_version).await;
    let to = next.operator_version.metadata.name.clone();
    let home = tempfile::tempdir().unwrap();
    let shape = Shape {
        n,
        concurrency: 4,
        debounce_ms: 0,
        replicas: 1,
        shards: 1,
        deadline,
    };
    let mut m = spawn_manager(&c, &shape, 0, home.path());
    let start = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let (c, res) = (&c, &res);
            async move { c.create_instance(res, &format!("r-{i:05}"), &[]).await }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    let deployed = wait_all_complete(&c, n, start, deadline, &[m.pid]).await;
    assert_eq!(deployed, n, "not every Instance deployed");
    let deploy = Cost {
        secs: start.elapsed().as_secs_f64(),
        cpu: cpu_seconds(m.pid),
        writes: writes_so_far(m.metrics).await,
    };
    let start = Instant::now();
    Api::<DynamicObject>::all_with(
        c.client.clone(),
        &kudo_kube::known_resource(kudo_api::rollout::GROUP, kudo_api::rollout::KIND),
    )
    .create(&PostParams::default(), &rollout_object("bench", &to))
    .await
    .expect("create the Rollout");
    let status = wait_rollout(&c, "bench", start + deadline).await;
    let rolled = Cost {
        secs: start.elapsed().as_secs_f64(),
        cpu: cpu_seconds(m.pid) - deploy.cpu,
        writes: writes_so_far(m.metrics).await - deploy.writes,
    };
    let _ = m.child.start_kill();
    let _ = m.child.wait().await;
    c.stop().await;
    report(n, deploy, rolled);
    println!("  waves: {}", wave_times(&status));
    assert_eq!(status["phase"], "Complete", "the rollout did not complete");
}

fn report(n: usize, deploy: Cost, rolled: Cost) {
    let per = |x: f64| x / n as f64;
    println!(
        "rollout: {n} first-operator Instances to the next OperatorVersion (canary 1, 10 %, 40 %, the rest; 100 at once): {:.1} s, manager {:.1} CPU-s ({:.2} ms per Instance), {:.1} writes per Instance",
        rolled.secs,
        rolled.cpu,
        per(rolled.cpu) * 1000.0,
        per(rolled.writes)
    );
    println!(
        "  their deploy (scale {n}, the reference): {:.1} s, {:.1} CPU-s ({:.2} ms per Instance), {:.1} writes per Instance; rollout ÷ deploy: time {:.2}×, CPU {:.2}×, writes {:.2}×",
        deploy.secs,
        deploy.cpu,
        per(deploy.cpu) * 1000.0,
        per(deploy.writes),
        rolled.secs / deploy.secs,
        rolled.cpu / deploy.cpu,
        rolled.writes / deploy.writes
    );
}

/// Each wave's Instances and seconds from its start to its completion, from the Rollout's status.
fn wave_times(status: &serde_json::Value) -> String {
    let at = |v: &serde_json::Value| v.as_str().and_then(|s| kudo_engine::Timestamp::parse(s).ok());
    let empty = Vec::new();
    let entries = status["instances"].as_array().unwrap_or(&empty);
    let waves = status["waves"].as_array().unwrap_or(&empty);
    waves
        .iter()
        .map(|w| {
            let n = entries.iter().filter(|e| e["wave"] == w["name"]).count();
            let secs = match (at(&w["startedAt"]), at(&w["completedAt"])) {
                (Some(a), Some(b)) => format!("{} s", b.seconds_since(a)),
                _ => "not completed".into(),
            };
            format!("{} ({n}) {secs}", w["name"].as_str().unwrap_or("?"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}
