//! What `--data-dir-sync always` (fsync before acknowledging) costs against `--data-dir-sync never`
//! and against no data directory: ConfigMap creates over HTTP with kube-rs, sequential and concurrent.
//!
//! Run: `cargo bench -p kudo-apiserver --bench durability [-- N]` (N creates per case, default
//! 1000). The data directory is a temporary directory under `$KUDO_BENCH_DIR` (default: the system
//! temp dir), so the disk measured is the one that directory is on. Prints a Markdown table.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kudo_apiserver::{ApiServer, Config, SyncMode};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v".repeat(200)}}))
        .expect("valid ConfigMap")
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

struct Figures {
    seq_per_s: f64,
    p50: Duration,
    p99: Duration,
    par_per_s: f64,
}

/// Creates `n` ConfigMaps one after another (latencies), then `n` more from `tasks` clients at once.
async fn measure(data_dir: Option<(&std::path::Path, SyncMode)>, n: usize, tasks: usize) -> Figures {
    let server = ApiServer::start(Config {
        data_dir: data_dir.map(|(d, _)| d.to_path_buf()),
        data_dir_sync: data_dir.map(|(_, m)| m).unwrap_or_default(),
        ..Default::default()
    })
    .await
    .expect("server starts");
    let client =
        kube::Client::try_from(kube::Config::new(server.url().parse().expect("url"))).expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    // Warm up the connection pool and the log file.
    for i in 0..20 {
        api.create(&PostParams::default(), &cm(&format!("warm-{i}")))
            .await
            .expect("create");
    }
    let mut lat = Vec::with_capacity(n);
    let t = Instant::now();
    for i in 0..n {
        let s = Instant::now();
        api.create(&PostParams::default(), &cm(&format!("seq-{i}")))
            .await
            .expect("create");
        lat.push(s.elapsed());
    }
    let seq = t.elapsed();
    lat.sort();
    let per = n.div_ceil(tasks);
    let t = Instant::now();
    let mut handles = Vec::new();
    for w in 0..tasks {
        let api = api.clone();
        handles.push(tokio::spawn(async move {
            for i in 0..per {
                api.create(&PostParams::default(), &cm(&format!("par-{w}-{i}")))
                    .await
                    .expect("create");
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    let par = t.elapsed();
    server.shutdown().await;
    Figures {
        seq_per_s: n as f64 / seq.as_secs_f64(),
        p50: pct(&lat, 0.5),
        p99: pct(&lat, 0.99),
        par_per_s: (per * tasks) as f64 / par.as_secs_f64(),
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let tasks = 16;
    let base = std::env::var_os("KUDO_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let memory = measure(None, n, tasks).await;
    let never_dir = tempfile::tempdir_in(&base).expect("temp dir");
    let never = measure(Some((never_dir.path(), SyncMode::Never)), n, tasks).await;
    let always_dir = tempfile::tempdir_in(&base).expect("temp dir");
    let always = measure(Some((always_dir.path(), SyncMode::Always)), n, tasks).await;
    println!(
        "data directory under {}; {n} creates per case, {tasks} concurrent clients\n",
        base.display()
    );
    println!("| mode | creates/s sequential | p50 | p99 | creates/s, {tasks} clients |");
    println!("|---|---|---|---|---|");
    for (name, f) in [
        ("in memory", &memory),
        ("--data-dir, --data-dir-sync never", &never),
        ("--data-dir, --data-dir-sync always", &always),
    ] {
        println!(
            "| {name} | {:.0} | {} | {} | {:.0} |",
            f.seq_per_s,
            ms(f.p50),
            ms(f.p99),
            f.par_per_s
        );
    }
    println!(
        "\nsync always / never: sequential throughput {:.2}×, p50 latency {:.2}×, concurrent throughput {:.2}×",
        always.seq_per_s / never.seq_per_s,
        always.p50.as_secs_f64() / never.p50.as_secs_f64(),
        always.par_per_s / never.par_per_s
    );
}
