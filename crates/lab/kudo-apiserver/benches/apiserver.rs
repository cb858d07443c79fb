//! Throughput and latency of the embedded API server over HTTP with kube-rs as the client.
//!
//! Run: `cargo bench -p kudo-apiserver --bench apiserver`. Prints a Markdown table.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kudo_apiserver::{ApiServer, Config};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"bench": "yes"}}, "data": {"k": "v"}}),
    )
    .expect("valid ConfigMap")
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let server = ApiServer::start(Config {
        history_capacity: 100_000,
        ..Default::default()
    })
    .await
    .expect("server starts");
    let client =
        kube::Client::try_from(kube::Config::new(server.url().parse().expect("url"))).expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut rows: Vec<(String, String)> = Vec::new();

    // 1. Sequential creates over HTTP.
    let n = 2000;
    let t = Instant::now();
    for i in 0..n {
        api.create(&PostParams::default(), &cm(&format!("seq-{i}")))
            .await
            .expect("create");
    }
    let el = t.elapsed();
    rows.push((
        format!("creates/s, 1 client, sequential ({n} ConfigMaps)"),
        format!("{:.0}", n as f64 / el.as_secs_f64()),
    ));

    // 2. Concurrent creates over HTTP.
    let tasks = 16;
    let per = 250;
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
    let el = t.elapsed();
    rows.push((
        format!(
            "creates/s, {tasks} concurrent clients ({} ConfigMaps)",
            tasks * per
        ),
        format!("{:.0}", (tasks * per) as f64 / el.as_secs_f64()),
    ));

    // Fill up to 10,000 objects in the namespace through the in-process store.
    let existing = api.list(&ListParams::default()).await.expect("list").items.len();
    for i in existing..10_000 {
        server
            .store()
            .create_obj(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("fill-{i}"), "namespace": "default", "labels": {"bench": "yes"}},
                "data": {"k": "v"}}))
            .expect("fill");
    }

    // 3. List latency with 10,000 objects.
    let mut full = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let l = api.list(&ListParams::default()).await.expect("list");
        full.push(t.elapsed());
        assert_eq!(l.items.len(), 10_000);
    }
    full.sort();
    rows.push((
        "list 10,000 ConfigMaps, one page (p50)".into(),
        ms(pct(&full, 0.5)),
    ));
    let mut paged = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let l = api.list(&ListParams::default().limit(500)).await.expect("list");
        paged.push(t.elapsed());
        assert_eq!(l.items.len(), 500);
    }
    paged.sort();
    rows.push((
        "list first page of 500 of 10,000 (p50)".into(),
        ms(pct(&paged, 0.5)),
    ));
    let mut sel = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        api.list(
            &ListParams::default()
                .labels("bench=yes")
                .fields("metadata.name=fill-5000"),
        )
        .await
        .expect("list");
        sel.push(t.elapsed());
    }
    sel.sort();
    rows.push((
        "list with label+field selector over 10,000 (p50)".into(),
        ms(pct(&sel, 0.5)),
    ));

    // 4. Watch delivery latency with 100 watchers.
    let watchers = 100;
    let events = 50;
    let rv = api
        .list(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let sent: Arc<std::sync::Mutex<Vec<Option<Instant>>>> =
        Arc::new(std::sync::Mutex::new(vec![None; events]));
    let mut hs = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(watchers);
    for _ in 0..watchers {
        let api = api.clone();
        let rv = rv.clone();
        let sent = sent.clone();
        let ready = ready_tx.clone();
        hs.push(tokio::spawn(async move {
            let mut s = api
                .watch(&WatchParams::default().labels("watch=me").timeout(120), &rv)
                .await
                .expect("watch")
                .boxed();
            ready.send(()).await.expect("ready");
            let mut lat = Vec::new();
            while lat.len() < events {
                match s.try_next().await.expect("event") {
                    Some(WatchEvent::Added(o)) => {
                        let at = Instant::now();
                        let idx: usize = o
                            .metadata
                            .name
                            .as_deref()
                            .and_then(|n| n.strip_prefix("w-"))
                            .and_then(|n| n.parse().ok())
                            .expect("index");
                        let start = sent.lock().expect("lock")[idx].expect("sent time");
                        lat.push(at - start);
                    }
                    Some(_) => {}
                    None => break,
                }
            }
            lat
        }));
    }
    for _ in 0..watchers {
        ready_rx.recv().await.expect("watcher ready");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    for i in 0..events {
        sent.lock().expect("lock")[i] = Some(Instant::now());
        let c: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("w-{i}"), "labels": {"watch": "me"}}}),
        )
        .expect("cm");
        api.create(&PostParams::default(), &c).await.expect("create");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut all = Vec::new();
    for h in hs {
        all.extend(h.await.expect("watcher"));
    }
    all.sort();
    rows.push((
        format!("watch delivery latency, {watchers} watchers x {events} events (p50)"),
        ms(pct(&all, 0.5)),
    ));
    rows.push((
        format!("watch delivery latency, {watchers} watchers x {events} events (p99)"),
        ms(pct(&all, 0.99)),
    ));

    println!("| measurement | result |\n|---|---|");
    for (k, v) in rows {
        println!("| {k} | {v} |");
    }
    server.shutdown().await;
}
