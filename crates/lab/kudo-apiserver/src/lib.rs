//! An embedded, single-process, Kubernetes-compatible API server.
//!
//! No real cluster can run where kudo-rs is tested, so every end-to-end test stands on this server
//! instead: the real `kubectl` and kube-rs talk to it over HTTP on loopback and should not be able to
//! tell it from kube-apiserver for the features they use (discovery, OpenAPI v3, CRUD, watch with
//! bookmarks and streaming lists, the four patch types, status/scale subresources, finalizers,
//! garbage collection, CRDs). In-process users (simulated kubelet and controllers) use [`Store`]
//! directly and get identical semantics.
//!
//! Off by default, the server can also misbehave on purpose — error rates per verb, latency,
//! cut watch streams, lost write acknowledgements — to test clients against a flaky cluster:
//! see [`faults`] and [`RunningServer::faults`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use kudo_apiserver::{ApiServer, Config};
//! let server = ApiServer::start(Config::default()).await?; // 127.0.0.1, ephemeral port
//! server.write_kubeconfig(std::path::Path::new("/tmp/kubeconfig"))?; // for kubectl
//! let store = server.store();
//! let (_replay, mut changes) = store.subscribe(store.current_rv())?; // every later change
//! store.create_obj(serde_json::json!({
//!     "apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "demo", "namespace": "default"},
//! }))?;
//! let ev = changes.recv().await?;
//! assert_eq!(ev.key.name, "demo");
//! server.shutdown().await;
//! # Ok(()) }
//! ```

mod admission;
pub mod backend;
mod crd;
mod discovery;
pub mod error;
mod events;
pub mod exec;
pub mod faults;
mod gc;
mod http;
mod jsonpath;
pub mod meta;
mod openapi;
mod patch;
mod proto;
pub mod rbac;
pub mod registry;
pub mod selector;
pub mod store;
mod table;
mod validate;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use backend::{Backend, BackendError, FileBackend, MemoryBackend, ObjKey, SyncMode};
pub use error::ApiError;
pub use exec::{ExecOutput, PodRuntime};
pub use faults::{ErrorRule, FaultConfig, FaultCounters, FaultError, Faults, Verb, VerbFilter};
pub use registry::{GroupResource, Registry, ResourceDef};
pub use store::{DeleteOptions, EventType, Propagation, Store, Subresource, WatchEvent, WriteOptions};

/// The `gitVersion` reported by `/version`.
pub const GIT_VERSION: &str = "v1.37.1-kudo";

/// How to start a server.
#[derive(Debug, Clone)]
pub struct Config {
    /// Port on 127.0.0.1; 0 picks an ephemeral port.
    pub port: u16,
    /// Directory for durable storage; `None` keeps everything in memory.
    pub data_dir: Option<PathBuf>,
    /// With `data_dir`: whether a write is acknowledged only once `fsync`ed ([`SyncMode::Always`],
    /// the default: survives power loss) or as soon as the OS has it ([`SyncMode::Never`]: survives
    /// the process being killed only, and is faster; see `docs/benchmarks.md`).
    pub data_dir_sync: SyncMode,
    /// How many past changes are kept for watches resuming from an older resourceVersion.
    pub history_capacity: usize,
    /// Faults injected from the start (none by default); see [`faults`]. They can be changed
    /// later through [`RunningServer::faults`] or the admin endpoint.
    pub faults: FaultConfig,
    /// How long a deleted namespace stays `Terminating` with its contents before the namespace
    /// controller starts deleting them. A real cluster's controller needs a few moments too, and
    /// `kubectl delete -f` of a manifest that lists a namespace before its objects relies on that
    /// (each object is still found and reported deleted). Zero empties namespaces at once.
    pub namespace_termination_delay: std::time::Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 0,
            data_dir: None,
            data_dir_sync: SyncMode::Always,
            history_capacity: 10_000,
            faults: FaultConfig::default(),
            namespace_termination_delay: std::time::Duration::from_secs(1),
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Binding the listening socket failed.
    #[error("binding 127.0.0.1:{port}: {source}")]
    Bind {
        /// Requested port.
        port: u16,
        /// Cause.
        source: std::io::Error,
    },
    /// The storage backend could not be opened or loaded.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The initial fault configuration is invalid.
    #[error("invalid fault configuration: {0}")]
    Faults(#[from] FaultError),
}

/// Entry point.
#[derive(Debug)]
pub struct ApiServer;

impl ApiServer {
    /// Bind, load storage and start serving (plus the garbage collector) on the current tokio runtime.
    pub async fn start(config: Config) -> Result<RunningServer, StartError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.port))
            .await
            .map_err(|source| StartError::Bind {
                port: config.port,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| StartError::Bind {
            port: config.port,
            source,
        })?;
        let parts = Parts::new(&config, addr.to_string())?;
        let mut stop_serve = parts.stop.subscribe();
        let app = parts.router.clone();
        let serve = tokio::spawn(async move {
            let r = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop_serve.wait_for(|v| *v).await;
                })
                .await;
            if let Err(e) = r {
                tracing::error!("api server stopped: {e}");
            }
        });
        Ok(parts.running(addr, serve))
    }

    /// The same server without a socket: requests go straight to its handler as a tower
    /// `Service` ([`InProcess::service`]; a kube-rs `Client::new(service, ns)` talks to it), with
    /// the garbage collector and RBAC aggregation running as with [`ApiServer::start`]. For tests
    /// that step a controller one reconcile at a time: every request is a function call, the
    /// semantics are the server's own (a fake would be more lenient than the real one).
    pub fn in_process(config: Config) -> Result<InProcess, StartError> {
        let parts = Parts::new(&config, "127.0.0.1:0".to_string())?;
        Ok(InProcess {
            router: parts.router.clone(),
            store: parts.store.clone(),
            faults: parts.faults.clone(),
            stop: parts.stop,
            tasks: parts.tasks,
        })
    }
}

/// Storage, handler and background tasks of a server, before it serves anywhere.
struct Parts {
    store: Store,
    faults: Faults,
    runtime: exec::RuntimeSlot,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    router: axum::Router,
}

impl Parts {
    /// Opens the storage and starts the garbage collector and RBAC aggregation; `addr` is what
    /// discovery reports as the server's address.
    fn new(config: &Config, addr: String) -> Result<Parts, StartError> {
        let backend: Box<dyn Backend> = match &config.data_dir {
            Some(d) => Box::new(FileBackend::open_with(d, config.data_dir_sync)?),
            None => Box::new(MemoryBackend),
        };
        let faults = Faults::default();
        faults.set(config.faults.clone())?;
        let store = Store::open(Registry::new(), backend, config.history_capacity)?;
        gc::ensure_namespace_defaults(&store);
        rbac::ensure_bootstrap(&store);
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let runtime: exec::RuntimeSlot = Default::default();
        let state = Arc::new(http::AppState {
            store: store.clone(),
            addr,
            shutdown: stop_rx.clone(),
            faults: faults.clone(),
            runtime: runtime.clone(),
        });
        let router = axum::Router::new().fallback(http::handle).with_state(state);
        let gc = tokio::spawn(gc::run(
            store.clone(),
            config.namespace_termination_delay,
            stop_rx,
        ));
        let aggregation = tokio::spawn(rbac::aggregate::run(store.clone(), stop.subscribe()));
        Ok(Parts {
            store,
            faults,
            runtime,
            stop,
            tasks: vec![gc, aggregation],
            router,
        })
    }

    fn running(mut self, addr: SocketAddr, serve: tokio::task::JoinHandle<()>) -> RunningServer {
        self.tasks.insert(0, serve);
        RunningServer {
            addr,
            store: self.store,
            faults: self.faults,
            runtime: self.runtime,
            stop: self.stop,
            tasks: self.tasks,
        }
    }
}

/// A server without a socket ([`ApiServer::in_process`]). Dropping it without
/// [`InProcess::shutdown`] leaves its background tasks running until the runtime ends.
#[derive(Debug)]
pub struct InProcess {
    router: axum::Router,
    store: Store,
    faults: Faults,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl InProcess {
    /// The server's handler as a tower `Service` of HTTP requests (paths as a client sends
    /// them, e.g. `/api/v1/namespaces`).
    pub fn service(&self) -> axum::Router {
        self.router.clone()
    }

    /// The store behind it (see [`RunningServer::store`]).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The live fault-injection settings (see [`faults`]).
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Ends open watches and the background tasks, and waits for them.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// A started server. Dropping it without [`RunningServer::shutdown`] leaves the tasks running until
/// the runtime ends.
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    store: Store,
    faults: Faults,
    runtime: exec::RuntimeSlot,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningServer {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The in-process store, for simulated controllers and tests.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The live fault-injection settings (shared with the admin endpoint at
    /// [`RunningServer::faults_url`]); see [`faults`].
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Registers the containers behind `pods/exec` and `pods/log` (the simulated kubelet's
    /// runtime). Without one, both fail as on a cluster whose kubelet does not answer.
    pub fn set_pod_runtime(&self, runtime: std::sync::Arc<dyn PodRuntime>) {
        *self.runtime.write().unwrap_or_else(|p| p.into_inner()) = Some(runtime);
    }

    /// `http://127.0.0.1:PORT/kudo-admin/faults`, where the fault settings can be read (`GET`),
    /// replaced (`PUT`) and switched off (`DELETE`).
    pub fn faults_url(&self) -> String {
        format!("{}{}", self.url(), faults::ADMIN_PATH)
    }

    /// A kubeconfig pointing at this server without authentication.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kudo\n  cluster:\n    server: {}\ncontexts:\n- name: kudo\n  context:\n    cluster: kudo\n    user: kudo\n    namespace: default\ncurrent-context: kudo\nusers:\n- name: kudo\n  user: {{}}\npreferences: {{}}\n",
            self.url()
        )
    }

    /// Write [`RunningServer::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig())
    }

    /// Stop accepting requests, end open watches and the garbage collector, and wait for them.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}
