//! Benchmarks of the KUDO manager on the embedded cluster (API server + simulator in this
//! process):
//!
//! * `latency [N]` — how long after a step's Deployment turns healthy the next step's object is
//!   created (the reaction time of the watch-driven controller; KUDO polled every 1–60 s). The
//!   controller runs in this process; both moments are taken from the server's own change feed.
//! * `writes` — API writes the controller makes for one deploy run of `examples/first-operator`
//!   and of `examples/galera`, by kind of write, against the minimum: one apply per object plus
//!   the status transitions of the plan (one per step start/finish pair collapsed: start + every
//!   step end). Beside them, the reads (GET of one object, discovery included, and LIST; watches
//!   are not counted) of the same run, classified as the manager's `kudo_api_requests_total`.
//! * `scale [N]` — N first-operator Instances (default parameters) created at once until every
//!   deploy plan is COMPLETE: wall time, and the peak RSS of the manager, which runs as a separate
//!   `kubectl-kudo manager` process so that its memory is not mixed with the server's.
//!
//!   With `shards N replicas R` (R ≥ 1), R manager processes share N shard Leases (`--shards`):
//!   each replica's CPU, RSS and the Instances in its shards are printed.
//!
//! Run: `cargo bench -p kubectl-kudo --bench controller -- [latency [N]] [writes] [scale [N]]
//! [concurrency N] [debounce MS] [shards N] [replicas R] [deadline S]` (`concurrency`,
//! `debounce`: the manager's `--concurrency`, default 4, and `--debounce-ms`, default 0;
//! `deadline`: how long `scale` waits, default 1800 s; a long run prints its progress and the
//! managers' CPU and peak RSS so far on stderr every 30 s)
//! (no argument: all three, latency 30, scale 1000). Results go to docs/benchmarks.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kudo_apiserver::{ApiServer, Config, EventType, RunningServer};
use kudo_package::resources::{ConvertOptions, to_resources};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-kudo");
const NS: &str = "default";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn kudo_ar(kind: &str) -> ApiResource {
    kudo_kube::known_resource(kudo_api::GROUP, kind)
}

struct Cluster {
    server: RunningServer,
    client: kube::Client,
    sim: kudo_sim::SimHandle,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

async fn cluster() -> Cluster {
    let server = ApiServer::start(Config::default()).await.expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client =
        kube::Client::try_from(kube::Config::new(server.url().parse().expect("url"))).expect("client");
    kudo_controller::install_crds(&client, "bench", Duration::from_secs(30))
        .await
        .expect("crds");
    let sim = kudo_sim::spawn(client.clone(), kudo_sim::SimConfig::default());
    Cluster {
        server,
        client,
        sim,
        _dir: dir,
        kubeconfig,
    }
}

impl Cluster {
    async fn stop(self) {
        let _ = self.sim.shutdown().await;
        self.server.shutdown().await;
    }

    async fn create(&self, obj: &impl serde::Serialize) {
        let v = serde_json::to_value(obj).expect("json");
        let kind = v["kind"].as_str().expect("kind").to_string();
        let d: DynamicObject = serde_json::from_value(v).expect("dynamic");
        Api::<DynamicObject>::namespaced_with(self.client.clone(), NS, &kudo_ar(&kind))
            .create(&PostParams::default(), &d)
            .await
            .expect("create");
    }

    /// Creates the Operator and OperatorVersion of a package directory; returns the converted
    /// resources (for Instances).
    async fn install_operator(&self, dir: &Path) -> kudo_package::resources::Resources {
        let pkg = kudo_package::read_path(dir).expect("package");
        let res = to_resources(
            &pkg,
            &ConvertOptions {
                namespace: Some(NS.into()),
                ..Default::default()
            },
        )
        .expect("convert");
        self.create(&res.operator).await;
        self.create(&res.operator_version).await;
        res
    }

    async fn create_instance(
        &self,
        res: &kudo_package::resources::Resources,
        name: &str,
        params: &[(&str, &str)],
    ) {
        let mut inst = res.instance.clone();
        inst.metadata.name = name.to_string();
        inst.spec.parameters = params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.create(&inst).await;
    }

    async fn wait_complete(&self, name: &str) {
        let api = Api::<DynamicObject>::namespaced_with(self.client.clone(), NS, &kudo_ar("Instance"));
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            if let Some(i) = api.get_opt(name).await.expect("get") {
                let s = &i.data["status"]["planStatus"]["deploy"]["status"];
                if s == "COMPLETE" {
                    return;
                }
                assert!(
                    s != "FATAL_ERROR",
                    "{name}: deploy failed: {:?}",
                    i.data["status"]
                );
            }
            assert!(Instant::now() < deadline, "{name} did not complete");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn spawn_controller(client: kube::Client) -> tokio::sync::oneshot::Sender<()> {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(kudo_controller::run(
        client,
        kudo_controller::ControllerConfig::default(),
        async move {
            let _ = rx.await;
        },
    ));
    tx
}

// ---------------------------------------------------------------- latency

fn two_step_package(dir: &Path) -> PathBuf {
    let root = dir.join("two-step");
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::write(
        root.join("operator.yaml"),
        r#"apiVersion: kudo.dev/v1beta1
name: two-step
operatorVersion: 0.1.0
tasks:
  - name: app
    kind: Apply
    spec: {resources: [deploy.yaml]}
  - name: after
    kind: Apply
    spec: {resources: [cm.yaml]}
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: app
            tasks: [app]
          - name: after
            tasks: [after]
"#,
    )
    .unwrap();
    std::fs::write(
        root.join("params.yaml"),
        "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
    )
    .unwrap();
    std::fs::write(
        root.join("templates/deploy.yaml"),
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}-app
spec:
  replicas: 1
  selector: {matchLabels: {app: {{ .Name }}}}
  template:
    metadata: {labels: {app: {{ .Name }}}}
    spec:
      containers: [{name: app, image: nginx}]
"#,
    )
    .unwrap();
    std::fs::write(
        root.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-after\ndata: {}\n",
    )
    .unwrap();
    root
}

/// The engine's Deployment health rule, as the controller applies it.
fn deployment_healthy(d: &Value) -> bool {
    kudo_engine::health(d) == kudo_engine::Health::Healthy
}

async fn latency(n: usize) {
    let c = cluster().await;
    let stop = spawn_controller(c.client.clone());
    let dir = tempfile::tempdir().unwrap();
    let res = c.install_operator(&two_step_package(dir.path())).await;
    let mut samples = Vec::new();
    for i in 0..n {
        let name = format!("lat-{i}");
        let store = c.server.store();
        let (_, mut rx) = store.subscribe(store.current_rv()).expect("subscribe");
        c.create_instance(&res, &name, &[]).await;
        let (deploy, cm) = (format!("{name}-app"), format!("{name}-after"));
        let mut healthy_at = None;
        let created_at = loop {
            let ev = match tokio::time::timeout(Duration::from_secs(60), rx.recv()).await {
                Ok(Ok(ev)) => ev,
                Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => continue,
                other => panic!("change feed ended: {other:?}"),
            };
            if ev.key.namespace != NS {
                continue;
            }
            let now = Instant::now();
            if ev.key.gr.resource == "deployments"
                && ev.key.name == deploy
                && healthy_at.is_none()
                && deployment_healthy(&ev.object)
            {
                healthy_at = Some(now);
            }
            if ev.key.gr.resource == "configmaps" && ev.key.name == cm && ev.type_ == EventType::Added {
                break now;
            }
        };
        let healthy_at = healthy_at.expect("the Deployment turned healthy before the next step");
        samples.push(created_at.duration_since(healthy_at));
        c.wait_complete(&name).await;
    }
    let _ = stop.send(());
    c.stop().await;
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "latency: child healthy → next step's object created, {n} runs: min {:.1} ms, p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms (KUDO's fastest requeue: 1000 ms → p50 ratio {:.0}×)",
        ms(samples[0]),
        ms(p(0.5)),
        ms(p(0.9)),
        ms(samples[samples.len() - 1]),
        1000.0 / ms(p(0.5)).max(0.001)
    );
}

// ---------------------------------------------------------------- writes

#[derive(Default)]
struct Writes {
    applies: AtomicU64,
    deletes: AtomicU64,
    instance: AtomicU64,
    status: AtomicU64,
    events: AtomicU64,
    /// The revision history (`kudo_controller::revisions`): a ControllerRevision created when a run
    /// is admitted, its outcome patched when it ends; bookkeeping beside the run, like Events.
    revisions: AtomicU64,
    other: AtomicU64,
    /// Reads: GETs of one object (discovery included) and LISTs; watches are not reads here.
    gets: AtomicU64,
    lists: AtomicU64,
}

impl Writes {
    fn count(&self, method: &http::Method, path: &str, query: Option<&str>) {
        if matches!(
            *method,
            http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
        ) {
            // The manager's own classification (`kudo_api_requests_total{verb}`).
            match kudo_controller::metrics::request_verb(method, path, query) {
                "get" => self.gets.fetch_add(1, Ordering::Relaxed),
                "list" => self.lists.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
            return;
        }
        if std::env::var_os("KUDO_BENCH_TRACE").is_some() {
            eprintln!("write: {method} {path}");
        }
        let c = if path.contains("/events") {
            &self.events
        } else if path.contains("/controllerrevisions") {
            &self.revisions
        } else if path.contains("/instances/") && path.ends_with("/status") {
            &self.status
        } else if path.contains("/instances") {
            &self.instance
        } else if *method == http::Method::PATCH {
            &self.applies
        } else if *method == http::Method::DELETE {
            &self.deletes
        } else {
            &self.other
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn take(&self) -> [u64; 9] {
        [
            &self.applies,
            &self.deletes,
            &self.instance,
            &self.status,
            &self.events,
            &self.revisions,
            &self.other,
            &self.gets,
            &self.lists,
        ]
        .map(|a| a.swap(0, Ordering::Relaxed))
    }
}

/// A client whose every request is counted by method and path.
fn counting_client(url: &str, writes: Arc<Writes>) -> kube::Client {
    let config = kube::Config::new(url.parse().expect("url"));
    let layer = tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
        writes.count(req.method(), req.uri().path(), req.uri().query());
        req
    });
    kube::client::ClientBuilder::try_from(config)
        .expect("builder")
        .with_layer(&layer)
        .build()
}

async fn writes() {
    let c = cluster().await;
    let counts = Arc::new(Writes::default());
    let stop = spawn_controller(counting_client(&c.server.url(), counts.clone()));
    for (example, params) in [("first-operator", vec![]), ("galera", vec![])] {
        let dir = repo().join("examples").join(example);
        let res = c.install_operator(&dir).await;
        let rendered = kudo_package::render::render_plan(
            &res.operator_version,
            "deploy",
            &kudo_package::render::RenderContext::offline("w", NS, BTreeMap::new()),
        )
        .expect("render");
        let to_apply = rendered
            .iter()
            .filter(|o| o.action != kudo_package::render::Action::Delete)
            .count() as u64;
        let to_delete = rendered.len() as u64 - to_apply;
        let steps: u64 = res.operator_version.spec.plans["deploy"]
            .phases
            .iter()
            .map(|p| p.steps.len() as u64)
            .sum();
        tokio::time::sleep(Duration::from_millis(200)).await;
        counts.take();
        c.create_instance(&res, &format!("w-{example}"), &params).await;
        c.wait_complete(&format!("w-{example}")).await;
        // let trailing writes of the run (readiness condition, unscheduling) land
        tokio::time::sleep(Duration::from_secs(2)).await;
        let [
            applies,
            deletes,
            instance,
            status,
            events,
            revisions,
            other,
            gets,
            lists,
        ] = counts.take();
        let total = applies + deletes + instance + status;
        let minimum = to_apply + to_delete + steps + 1;
        println!(
            "writes: {example} deploy ({to_apply} objects applied, {to_delete} deleted, {steps} steps): {total} writes = {applies} applies + {deletes} deletes + {instance} instance spec/metadata + {status} status; minimum {minimum} (one per object + one status write per step + the start) → {:.2}×; plus {events} Events, {revisions} revision history, {other} other",
            total as f64 / minimum as f64
        );
        println!(
            "reads: {example} deploy: {} reads = {gets} get + {lists} list (target for first-operator: ≤ 12), beside {total} writes",
            gets + lists
        );
    }
    let _ = stop.send(());
    c.stop().await;
}

// ---------------------------------------------------------------- scale

fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// User + system CPU seconds a process has used so far (`/proc/PID/stat`, clock ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // fields after the parenthesised command name; utime and stime are fields 14 and 15
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some((f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?) / 100.0)
        })
        .unwrap_or(0.0)
}

/// The scale bench's shape: Instances, the managers' `--concurrency`, and (sharded) how many
/// manager processes share how many shards.
struct Shape {
    n: usize,
    concurrency: usize,
    /// `manager --debounce-ms`.
    debounce_ms: usize,
    replicas: usize,
    shards: u32,
    /// How long to wait for every Instance to complete (`deadline S`, default 1800 s); a run
    /// cut short still prints its figures, then fails.
    deadline: Duration,
}

/// One manager process of the bench (killed when dropped).
struct Manager {
    child: tokio::process::Child,
    pid: u32,
    identity: String,
    /// Where its `/metrics` are served.
    metrics: std::net::SocketAddr,
}

fn spawn_manager(c: &Cluster, shape: &Shape, r: usize, home: &Path) -> Manager {
    let identity = format!("bench-{r}");
    // A free loopback port for its metrics (taken back by the manager a moment later).
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(manager_args(shape.shards, metrics))
        .args(["--concurrency", &shape.concurrency.to_string()])
        .args(["--debounce-ms", &shape.debounce_ms.to_string()])
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .env("HOME", home)
        .env("KUDO_POD_NAME", &identity)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let child = cmd.spawn().expect("start kubectl-kudo manager");
    let pid = child.id().expect("pid");
    Manager {
        child,
        pid,
        identity,
        metrics,
    }
}

/// The manager's reconciles and API requests by verb, from its `/metrics` (a plain HTTP/1.0 GET:
/// the bench needs no HTTP client for one page).
async fn reconciles_and_requests(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut conn) = tokio::net::TcpStream::connect(addr).await else {
        return "metrics unreachable".into();
    };
    let mut page = String::new();
    let asked = conn
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await;
    if asked.is_err() || conn.read_to_string(&mut page).await.is_err() {
        return "metrics unreadable".into();
    }
    let sum = |prefix: &str| -> f64 {
        page.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .fold(0.0, |a, b| a + b)
    };
    let verbs = ["get", "list", "watch", "create", "patch", "delete"]
        .map(|v| format!("{v} {}", sum(&format!("kudo_api_requests_total{{verb=\"{v}\""))));
    format!(
        "{} reconciles; requests {}",
        sum("kudo_reconciles_total{"),
        verbs.join(", ")
    )
}

async fn scale(shape: Shape) {
    let n = shape.n;
    let c = cluster().await;
    let res = c.install_operator(&repo().join("examples/first-operator")).await;
    let home = tempfile::tempdir().unwrap();
    let mut managers: Vec<Manager> = (0..shape.replicas)
        .map(|r| spawn_manager(&c, &shape, r, home.path()))
        .collect();
    let start = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let c = &c;
            let res = &res;
            async move { c.create_instance(res, &format!("s-{i:05}"), &[]).await }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    let created = start.elapsed();
    let pids: Vec<u32> = managers.iter().map(|m| m.pid).collect();
    let done = wait_all_complete(&c, n, start, shape.deadline, &pids).await;
    let total = start.elapsed();
    let split = shard_split(&c, &shape).await;
    let mut cpu_total = 0.0;
    let mut lines = Vec::new();
    for m in &mut managers {
        let (rss, cpu) = (peak_rss_kib(m.pid), cpu_seconds(m.pid));
        cpu_total += cpu;
        let mine = split.get(&m.identity).copied().unwrap_or(0);
        let work = reconciles_and_requests(m.metrics).await;
        lines.push(format!(
            "  {}: peak RSS {:.1} MiB, {cpu:.1} CPU-s ({:.2} ms per Instance), {mine} Instances in its shards; {work}",
            m.identity,
            rss as f64 / 1024.0,
            cpu * 1000.0 / n as f64
        ));
        let _ = m.child.start_kill();
        let _ = m.child.wait().await;
    }
    c.stop().await;
    println!(
        "scale: {done}/{n} first-operator Instances COMPLETE in {:.1} s (created in {:.1} s); {} manager(s), --shards {}, --concurrency {}, --debounce-ms {}: {cpu_total:.1} CPU-s in all ({:.2} ms per Instance)",
        total.as_secs_f64(),
        created.as_secs_f64(),
        shape.replicas,
        shape.shards,
        shape.concurrency,
        shape.debounce_ms,
        cpu_total * 1000.0 / n as f64
    );
    println!("{}", lines.join("\n"));
    assert_eq!(done, n, "not every Instance completed");
}

/// Watches the Instances until every one's deploy plan is COMPLETE (or the deadline passes): how
/// many are. A watch, not a poll: listing 10,000 Instances (large objects) every few seconds was a
/// sixth of the embedded server's time in `scale 10000`, which is what the bench measures.
async fn wait_all_complete(c: &Cluster, n: usize, start: Instant, wait: Duration, managers: &[u32]) -> usize {
    use kube::runtime::{WatchStreamExt, watcher};
    let api = Api::<DynamicObject>::namespaced_with(c.client.clone(), NS, &kudo_ar("Instance"));
    let deadline = start + wait;
    let mut complete = std::collections::HashSet::new();
    let events = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects();
    let mut events = std::pin::pin!(events);
    let mut told = Instant::now();
    while complete.len() < n && Instant::now() < deadline {
        // A long run says how far it is every 30 s (on stderr, apart from the results).
        if told.elapsed() >= Duration::from_secs(30) {
            let cpu: f64 = managers.iter().map(|p| cpu_seconds(*p)).sum();
            let rss = managers.iter().map(|p| peak_rss_kib(*p)).max().unwrap_or(0);
            eprintln!(
                "scale: {}/{n} COMPLETE after {:.0} s; manager(s) {cpu:.1} CPU-s, peak RSS {:.1} MiB",
                complete.len(),
                start.elapsed().as_secs_f64(),
                rss as f64 / 1024.0
            );
            told = Instant::now();
        }
        let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(1), events.next()).await else {
            continue;
        };
        let Ok(i) = ev else { continue };
        if i.data["status"]["planStatus"]["deploy"]["status"] == "COMPLETE" {
            complete.insert(i.metadata.name.unwrap_or_default());
        } else {
            complete.remove(i.metadata.name.as_deref().unwrap_or_default());
        }
    }
    complete.len()
}

/// Sharded runs: how many of the bench's Instances fall in the shards each replica holds now.
async fn shard_split(c: &Cluster, shape: &Shape) -> BTreeMap<String, usize> {
    let mut split = BTreeMap::new();
    if shape.shards < 2 {
        return split;
    }
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(c.client.clone(), NS);
    use kudo_controller::shard::{LEASE_GROUP_LABEL, SHARD_LABEL};
    let lp = ListParams::default().labels(&format!("{LEASE_GROUP_LABEL}=kudo-manager,{SHARD_LABEL}"));
    let mut holder = BTreeMap::new();
    for l in leases.list(&lp).await.expect("list leases").items {
        let shard = l
            .metadata
            .labels
            .unwrap_or_default()
            .get(SHARD_LABEL)
            .and_then(|s| s.parse::<u32>().ok());
        let who = l.spec.and_then(|s| s.holder_identity);
        if let (Some(s), Some(w)) = (shard, who) {
            holder.insert(s, w);
        }
    }
    for i in 0..shape.n {
        let s = kudo_engine::shard::shard_of(NS, &format!("s-{i:05}"), shape.shards);
        if let Some(w) = holder.get(&s) {
            *split.entry(w.clone()).or_default() += 1;
        }
    }
    split
}

/// `kubectl-kudo manager` flags for a bench run: metrics on a free loopback port; one shard: no
/// leader election (a single manager); more: shard Leases in the bench namespace. More flags come
/// from `$KUDO_BENCH_MANAGER_ARGS`, split on spaces (e.g. `--worker-threads 2`, for A/B runs).
fn manager_args(shards: u32, metrics: std::net::SocketAddr) -> Vec<String> {
    let mut args: Vec<String> = ["manager", "--metrics-address", &metrics.to_string()]
        .map(String::from)
        .to_vec();
    if shards > 1 {
        let sharded = ["--shards", &shards.to_string(), "--lease-namespace", NS].map(String::from);
        args.extend(sharded);
    } else {
        args.push("--leader-elect=false".into());
    }
    let extra = std::env::var("KUDO_BENCH_MANAGER_ARGS").unwrap_or_default();
    args.extend(extra.split_whitespace().map(String::from));
    args
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let arg_n = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let all = !args
        .iter()
        .any(|a| ["latency", "writes", "scale"].contains(&a.as_str()));
    // `RUST_LOG=kudo_controller=debug` shows the manager's log (e.g. each Instance write's body).
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        if all || args.iter().any(|a| a == "latency") {
            latency(arg_n("latency", 30)).await;
        }
        if all || args.iter().any(|a| a == "writes") {
            writes().await;
        }
        if all || args.iter().any(|a| a == "scale") {
            scale(Shape {
                n: arg_n("scale", 1000),
                concurrency: arg_n("concurrency", 4),
                debounce_ms: arg_n("debounce", 0),
                replicas: arg_n("replicas", 1).max(1),
                shards: u32::try_from(arg_n("shards", 1).max(1)).unwrap_or(1),
                deadline: Duration::from_secs(arg_n("deadline", 1800) as u64),
            })
            .await;
        }
    });
}
