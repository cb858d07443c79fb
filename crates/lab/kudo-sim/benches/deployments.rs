//! Benchmark: N Deployments of 3 replicas each, created through the HTTP API, until every
//! one reports `Available=True` — on the embedded API server with the simulator, both in this
//! process. Prints the wall time and this process's peak RSS (server + simulator + client).
//!
//! Run: `cargo bench -p kudo-sim --bench deployments -- 1000`

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams, PostParams};

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn deployment(i: usize) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("bench-{i:04}")},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": format!("bench-{i:04}")}},
            "template": {
                "metadata": {"labels": {"app": format!("bench-{i:04}")}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}
            }
        }
    }))
    .expect("valid deployment")
}

fn available(d: &Deployment) -> bool {
    d.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True"))
        })
        && d.status.as_ref().and_then(|s| s.available_replicas) == Some(3)
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let server = kudo_apiserver::ApiServer::start(kudo_apiserver::Config::default()).await.expect("server");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let kc = kube::config::Kubeconfig::read_from(&kubeconfig).expect("read kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.expect("config");
        let client = kube::Client::try_from(config).expect("client");
        let sim = kudo_sim::spawn(client.clone(), kudo_sim::SimConfig::default());
        let api: Api<Deployment> = Api::namespaced(client, "default");

        let start = Instant::now();
        for i in 0..n {
            api.create(&PostParams::default(), &deployment(i)).await.expect("create");
        }
        let created = start.elapsed();
        let deadline = start + Duration::from_secs(1800);
        let ready = loop {
            let list = api.list(&ListParams::default()).await.expect("list");
            let ready = list.items.iter().filter(|d| available(d)).count();
            if ready == n || Instant::now() > deadline {
                break ready;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let total = start.elapsed();
        println!(
            "deployments: {n} x 3 replicas; created in {:.2}s; {ready}/{n} Available after {:.2}s; peak RSS {:.1} MiB",
            created.as_secs_f64(),
            total.as_secs_f64(),
            peak_rss_kib() as f64 / 1024.0
        );
        let _ = sim.shutdown().await;
        server.shutdown().await;
        assert_eq!(ready, n, "not every Deployment became Available within 30 minutes");
    });
}
