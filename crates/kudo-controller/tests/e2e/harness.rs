//! Test environment, and helpers to install packages and wait for outcomes. Two targets run the
//! same scenarios:
//! - embedded ([`Env::start`]): an API server + simulator + controller per test, namespace
//!   [`NS`];
//! - real ([`Env::real`]): the real control plane of `../shared/real-cluster`, in a namespace of
//!   the test's own, reconciled by the one cluster-wide manager `scripts/real-cluster-stage.sh`
//!   runs (the test starts no controller). Such tests are named `real_cluster_*` and ignored.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kudo_apiserver::{ApiServer, Config, RunningServer};
use kudo_controller::ControllerConfig;
use kudo_package::resources::{ConvertOptions, Resources, to_resources};
use serde_json::Value;

pub const NS: &str = "default";
/// Upper bound for any awaited outcome; generous because two cores are shared by parallel tests.
pub const TIMEOUT: Duration = Duration::from_secs(120);

pub struct Env {
    /// The embedded API server; `None` on the real cluster.
    server: Option<RunningServer>,
    pub client: kube::Client,
    /// The namespace the test works in: [`NS`] embedded, a fresh one on the real cluster.
    pub ns: String,
    /// The real cluster's kubeconfig (`None` when embedded).
    real_kubeconfig: Option<PathBuf>,
    sim: Option<kudo_sim::SimHandle>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    controller: Option<tokio::task::JoinHandle<Result<(), kudo_controller::Error>>>,
    pub dir: tempfile::TempDir,
}

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KUDO_TEST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// The resource of a kind the tests use (plural: the kind lower-cased plus `s`, KUDO's own).
pub fn ar(api_version: &str, kind: &str) -> ApiResource {
    let (g, v) = api_version.split_once('/').unwrap_or(("", api_version));
    let plural = match kind {
        "Instance" => "instances".to_string(),
        "OperatorVersion" => "operatorversions".to_string(),
        "Operator" => "operators".to_string(),
        k => format!("{}s", k.to_lowercase()),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, kind), &plural)
}

pub fn condition<'v>(obj: &'v Value, type_: &str) -> Option<&'v Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// A package directory read and converted for `instance` in namespace `ns`.
pub fn resources(dir: &Path, ns: &str, instance: &str, params: BTreeMap<String, String>) -> Resources {
    let pkg = kudo_package::read_path(dir).expect("package reads");
    to_resources(
        &pkg,
        &ConvertOptions {
            instance_name: Some(instance.to_string()),
            namespace: Some(ns.to_string()),
            parameters: params,
            ..Default::default()
        },
    )
    .expect("package converts")
}

impl Env {
    pub async fn start() -> Env {
        Env::start_with(kudo_sim::SimConfig::default()).await
    }

    pub async fn start_with(sim_config: kudo_sim::SimConfig) -> Env {
        let mut env = Env::start_bare(sim_config).await;
        env.start_controller();
        env
    }

    /// API server, CRDs and simulator, but no controller: the test starts its own with
    /// [`Env::spawn_controller`].
    pub async fn start_bare(sim_config: kudo_sim::SimConfig) -> Env {
        init_tracing();
        let server = ApiServer::start(Config::default())
            .await
            .expect("api server starts");
        let cfg = kube::Config::new(server.url().parse().expect("url"));
        let client = kube::Client::try_from(cfg).expect("client");
        kudo_controller::install_crds(&client, "e2e", Duration::from_secs(30))
            .await
            .expect("CRDs installed");
        // Wait until the Instance resource is served.
        let iapi: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), NS, &ar("kudo.dev/v1beta1", "Instance"));
        wait_for("instances served", || async {
            iapi.list(&ListParams::default()).await.ok().map(|_| ())
        })
        .await;
        server.set_pod_runtime(std::sync::Arc::new(sim_config.runtime.clone()));
        let sim = kudo_sim::spawn(client.clone(), sim_config);
        Env {
            server: Some(server),
            client,
            ns: NS.to_string(),
            real_kubeconfig: None,
            sim: Some(sim),
            stop: None,
            controller: None,
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// The real control plane (`kudo_testkit::real_cluster`), in a new namespace of the test's
    /// own. No controller is started: the stage's cluster-wide manager reconciles. The kudo CRDs
    /// must be installed (the stage does it).
    pub async fn real() -> Env {
        use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
        init_tracing();
        let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
        let client = kudo_testkit::real_cluster::client().await;
        let ns = kudo_testkit::real_cluster::unique_namespace("e2e");
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let obj: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).expect("namespace");
        namespaces
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create namespace {ns}: {e}"));
        let iapi: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &ar("kudo.dev/v1beta1", "Instance"));
        iapi.list(&ListParams::default()).await.unwrap_or_else(|e| {
            panic!(
                "the kudo CRDs are not served by the real cluster ({e}): run scripts/real-cluster-stage.sh"
            )
        });
        // Pods are refused until the namespace's default ServiceAccount exists (~1 s).
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
        wait_for("default ServiceAccount", || async {
            sas.get_opt("default").await.ok().flatten().map(|_| ())
        })
        .await;
        Env {
            server: None,
            client,
            ns,
            real_kubeconfig: Some(kubeconfig),
            sim: None,
            stop: None,
            controller: None,
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// The embedded API server (fault injection and the like exist only there).
    pub fn server(&self) -> &RunningServer {
        self.server
            .as_ref()
            .expect("this test needs the embedded API server, not the real cluster")
    }

    /// Starts a controller with `config` (any number may run against one server); with
    /// `metrics`, its /metrics, /healthz and /readyz are served on a free loopback port.
    pub async fn spawn_controller(&self, config: ControllerConfig, metrics: bool) -> Controller {
        self.spawn_controller_with(self.client.clone(), config, metrics)
            .await
    }

    /// [`Env::spawn_controller`] talking through `client` (e.g. one that records its requests).
    pub async fn spawn_controller_with(
        &self,
        client: kube::Client,
        config: ControllerConfig,
        metrics: bool,
    ) -> Controller {
        let ops = if metrics {
            Some(
                kudo_controller::OpsServer::bind("127.0.0.1:0".parse().unwrap())
                    .await
                    .expect("metrics port binds"),
            )
        } else {
            None
        };
        let metrics_addr = ops.as_ref().map(|o| o.local_addr());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(kudo_controller::run_with(client, config, ops, async move {
            let _ = rx.await;
        }));
        Controller {
            stop: Some(tx),
            task: Some(task),
            metrics_addr,
        }
    }

    /// Creates only the Operator and OperatorVersion of a package, as `kubectl kudo install`
    /// leaves a dependency (or `--skip-instance` a package).
    pub async fn install_operator(&self, dir: &Path) {
        let res = resources(dir, &self.ns, "unused", BTreeMap::new());
        self.create(serde_json::to_value(&res.operator).unwrap()).await;
        self.create(serde_json::to_value(&res.operator_version).unwrap())
            .await;
    }

    /// Creates only the Instance of a package whose Operator and OperatorVersion exist already.
    pub async fn install_instance(&self, dir: &Path, instance: &str, params: BTreeMap<String, String>) {
        let res = resources(dir, &self.ns, instance, params);
        self.create(serde_json::to_value(&res.instance).unwrap()).await;
    }

    /// (reason, reportingInstance) of the events.k8s.io Events regarding the named Instance.
    pub async fn event_reporters(&self, instance: &str) -> Vec<(String, String)> {
        self.instance_events(instance)
            .await
            .into_iter()
            .map(|e| {
                (
                    e.reason.unwrap_or_default(),
                    e.reporting_instance.unwrap_or_default(),
                )
            })
            .collect()
    }

    pub fn start_controller(&mut self) {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        self.controller = Some(tokio::spawn(kudo_controller::run(
            self.client.clone(),
            ControllerConfig::default(),
            async move {
                let _ = rx.await;
            },
        )));
        self.stop = Some(tx);
    }

    /// Stops the controller (as a crash or rollout of the manager would).
    pub async fn stop_controller(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(c) = self.controller.take() {
            let r = tokio::time::timeout(Duration::from_secs(10), c).await;
            assert!(matches!(r, Ok(Ok(Ok(())))), "controller stops cleanly: {r:?}");
        }
    }

    /// Kills the controller task without a graceful shutdown: the reconcile in flight is dropped
    /// at its current await point, like a SIGKILL of the manager process (all progress of a run
    /// lives in the Instance, nothing in memory survives either way).
    pub async fn kill_controller(&mut self) {
        self.stop = None;
        if let Some(c) = self.controller.take() {
            c.abort();
            let _ = c.await;
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(c) = self.controller.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), c).await;
        }
        if let Some(s) = self.sim.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), s.shutdown()).await;
        }
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
        if self.real_kubeconfig.is_some() {
            // The namespace goes with everything in it (the manager's finalizer-free objects and
            // the real garbage collector take care of the rest).
            use k8s_openapi::api::core::v1::Namespace;
            let namespaces: Api<Namespace> = Api::all(self.client.clone());
            let _ = namespaces.delete(&self.ns, &DeleteParams::background()).await;
        }
    }

    fn api(&self, api_version: &str, kind: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.ns, &ar(api_version, kind))
    }

    pub async fn create(&self, obj: Value) {
        let av = obj["apiVersion"].as_str().unwrap().to_string();
        let kind = obj["kind"].as_str().unwrap().to_string();
        let d: DynamicObject = serde_json::from_value(obj).expect("dynamic object");
        self.api(&av, &kind)
            .create(&PostParams::default(), &d)
            .await
            .expect("object created");
    }

    /// Reads a package directory, converts it and creates Operator, OperatorVersion and Instance.
    pub async fn install(&self, dir: &Path, instance: &str, params: BTreeMap<String, String>) {
        let res = resources(dir, &self.ns, instance, params);
        self.create(serde_json::to_value(&res.operator).unwrap()).await;
        self.create(serde_json::to_value(&res.operator_version).unwrap())
            .await;
        self.create(serde_json::to_value(&res.instance).unwrap()).await;
    }

    /// [`Env::install`] that reports a refused create instead of panicking (for faulty servers);
    /// objects already created by an earlier attempt are left as they are.
    pub async fn try_install(&self, dir: &Path, instance: &str, params: BTreeMap<String, String>) -> bool {
        let res = resources(dir, &self.ns, instance, params);
        for obj in [
            serde_json::to_value(&res.operator).unwrap(),
            serde_json::to_value(&res.operator_version).unwrap(),
            serde_json::to_value(&res.instance).unwrap(),
        ] {
            let av = obj["apiVersion"].as_str().unwrap().to_string();
            let kind = obj["kind"].as_str().unwrap().to_string();
            let d: DynamicObject = serde_json::from_value(obj).expect("dynamic object");
            match self.api(&av, &kind).create(&PostParams::default(), &d).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// GET of one object; errors a faulty server injects (500, 429, 409) are retried, so tests
    /// can observe a cluster while `kudo_apiserver::faults` are active.
    pub async fn get(&self, api_version: &str, kind: &str, name: &str) -> Option<Value> {
        let api = self.api(api_version, kind);
        let mut attempts = 0;
        loop {
            match api.get_opt(name).await {
                Ok(o) => return o.map(|o| serde_json::to_value(o).unwrap()),
                Err(kube::Error::Api(s)) if [500, 429, 409].contains(&s.code) && attempts < 50 => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("get {kind} {name}: {e}"),
            }
        }
    }

    pub async fn patch_instance(&self, name: &str, patch: Value) {
        self.api("kudo.dev/v1beta1", "Instance")
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("instance patched");
    }

    pub async fn delete_instance(&self, name: &str) {
        self.api("kudo.dev/v1beta1", "Instance")
            .delete(name, &DeleteParams::background())
            .await
            .expect("instance deleted");
    }

    pub async fn wait_instance(&self, name: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let what = format!("instance {name}: {what}");
        let last = std::sync::Mutex::new(Value::Null);
        let res = wait_for_opt(TIMEOUT, || async {
            let i = self.get("kudo.dev/v1beta1", "Instance", name).await?;
            *last.lock().unwrap() = i.clone();
            pred(&i).then_some(i)
        })
        .await;
        match res {
            Some(v) => v,
            None => panic!(
                "timed out waiting for {what}; last seen:\n{}",
                serde_json::to_string_pretty(&*last.lock().unwrap()).unwrap()
            ),
        }
    }

    pub async fn wait_plan(&self, name: &str, plan: &str, status: &str) -> Value {
        self.wait_instance(name, &format!("plan {plan} {status}"), |i| {
            i["status"]["planStatus"][plan]["status"] == status
        })
        .await
    }

    pub async fn wait_ready_replicas(&self, api_version: &str, kind: &str, name: &str, n: i64) -> Value {
        wait_for(&format!("{kind} {name} with {n} ready replicas"), || async {
            let o = self.get(api_version, kind, name).await?;
            (o["spec"]["replicas"] == n && o["status"]["readyReplicas"] == n).then_some(o)
        })
        .await
    }

    pub async fn wait_gone(&self, api_version: &str, kind: &str, name: &str) {
        wait_for(&format!("{kind} {name} to be gone"), || async {
            self.get(api_version, kind, name).await.is_none().then_some(())
        })
        .await
    }

    /// The events.k8s.io Events regarding the named Instance.
    pub async fn instance_events(&self, instance: &str) -> Vec<k8s_openapi::api::events::v1::Event> {
        let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(self.client.clone(), &self.ns);
        api.list(&ListParams::default())
            .await
            .expect("events list")
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some("Instance") && r.name.as_deref() == Some(instance)
                })
            })
            .collect()
    }

    /// The occurrences of each Event with `reason` regarding the named Instance: 1, or its
    /// `series.count` when it was repeated (one entry per Event object).
    pub async fn event_occurrences(&self, instance: &str, reason: &str) -> Vec<i32> {
        self.instance_events(instance)
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .map(|e| e.series.as_ref().map_or(1, |s| s.count))
            .collect()
    }

    /// (reason, note) of the events.k8s.io Events regarding the named Instance.
    pub async fn events(&self, instance: &str) -> Vec<(String, String)> {
        self.instance_events(instance)
            .await
            .into_iter()
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }

    pub async fn event_reasons(&self, instance: &str) -> Vec<String> {
        self.events(instance).await.into_iter().map(|(r, _)| r).collect()
    }

    /// Runs the real kubectl against the server with an isolated HOME; `None` (with a note) when
    /// kubectl is not installed.
    pub fn kubectl(&self, args: &[&str]) -> Option<String> {
        let out = self.kubectl_output(args)?;
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// [`Env::kubectl`] for commands that may fail: the whole output, `None` when kubectl is not
    /// installed.
    pub fn kubectl_output(&self, args: &[&str]) -> Option<std::process::Output> {
        let kubeconfig = match &self.real_kubeconfig {
            Some(k) => k.clone(),
            None => {
                let k = self.dir.path().join("kubeconfig");
                self.server().write_kubeconfig(&k).expect("kubeconfig");
                k
            }
        };
        match Command::new("kubectl")
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", self.dir.path())
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .arg("--namespace")
            .arg(&self.ns)
            .args(args)
            .output()
        {
            Ok(o) => Some(o),
            Err(e) => {
                eprintln!("SKIPPED kubectl {args:?}: kubectl is not runnable: {e}");
                None
            }
        }
    }
}

pub async fn wait_for_opt<T, F, Fut>(timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if start.elapsed() > timeout {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn wait_for<T, F, Fut>(what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match wait_for_opt(TIMEOUT, f).await {
        Some(v) => v,
        None => panic!("timed out waiting for {what}"),
    }
}

/// A package directory written from strings.
pub struct Pkg {
    root: PathBuf,
    files: Vec<(String, String)>,
}

impl Pkg {
    pub fn new(dir: &Path, name: &str) -> Pkg {
        Pkg {
            root: dir.join(name),
            files: Vec::new(),
        }
    }
    pub fn operator(mut self, text: &str) -> Pkg {
        self.files.push(("operator.yaml".into(), text.into()));
        self
    }
    pub fn params(mut self, text: &str) -> Pkg {
        self.files.push(("params.yaml".into(), text.into()));
        self
    }
    pub fn template(mut self, name: &str, text: &str) -> Pkg {
        self.files.push((format!("templates/{name}"), text.into()));
        self
    }
    pub fn write(self) -> PathBuf {
        std::fs::create_dir_all(self.root.join("templates")).expect("mkdir");
        for (p, t) in &self.files {
            std::fs::write(self.root.join(p), t).expect("write package file");
        }
        self.root
    }
}

/// A controller started by [`Env::spawn_controller`]. Dropping it aborts the controller.
pub struct Controller {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), kudo_controller::Error>>>,
    /// Where its /metrics, /healthz and /readyz answer (when started with metrics).
    pub metrics_addr: Option<std::net::SocketAddr>,
}

impl Controller {
    /// Clean shutdown (with leader election: releases the lease).
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let r = tokio::time::timeout(Duration::from_secs(15), t).await;
            assert!(matches!(r, Ok(Ok(Ok(())))), "controller stops cleanly: {r:?}");
        }
    }

    /// Simulated crash: the task is aborted, nothing is released.
    pub async fn kill(mut self) {
        self.stop = None;
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = t.await;
        }
    }

    /// GET `path` from this controller's metrics server: (status, body).
    pub async fn get(&self, path: &str) -> (u16, String) {
        http_get(self.metrics_addr.expect("started with metrics"), path).await
    }

    /// The current /metrics exposition.
    pub async fn metrics(&self) -> String {
        let (code, body) = self.get("/metrics").await;
        assert_eq!(code, 200, "{body}");
        body
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// One HTTP/1.1 GET over a fresh loopback connection (hyper client): (status, body).
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use http_body_util::{BodyExt, Empty};
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .expect("http handshake");
    let conn = tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header(hyper::header::HOST, addr.to_string())
        .body(Empty::<hyper::body::Bytes>::new())
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    drop(sender);
    let _ = conn.await;
    (code, String::from_utf8_lossy(&body).into_owned())
}

/// The value of one series (`name{labels}` exactly as exposed, labels in declaration order) in an
/// OpenMetrics text exposition.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .find(|(s, _)| *s == series)
        .and_then(|(_, v)| v.parse().ok())
}
