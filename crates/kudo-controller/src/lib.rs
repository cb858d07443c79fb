//! The KUDO manager: turns `kudo.dev/v1beta1` Instances into running resources by executing their
//! OperatorVersion's plans, with KUDO v0.19 semantics and these deliberate differences:
//!
//! * **No admission webhook.** The controller remembers the last Instance spec it admitted (the
//!   annotation [`ADMITTED_SPEC_ANNOTATION`]) and runs KUDO's webhook rules
//!   ([`kudo_engine::decide`]) against it. A change KUDO would have rejected is already stored, so
//!   it is reported (condition `ChangeAccepted=False` plus a Warning Event on every reconcile) and
//!   not executed until it becomes admissible (e.g. once the running plan ends).
//! * **Server-side apply** with field manager `kudo` instead of a client-side three-way merge; no
//!   `last-applied-configuration` annotation.
//! * Objects are applied **in declaration order** (task resources in list order, documents in file
//!   order).
//! * Requests the API server rejects as invalid (400/403/422, e.g. an immutable field) fail the plan
//!   at once (FATAL_ERROR with the server's message) instead of being retried forever.
//! * Health is **watched**, not polled: the controller watches the child kinds KUDO creates
//!   (label `heritage=kudo`) and re-reconciles the owning Instance when one changes; the timed
//!   requeue is only a backstop (a plan waiting only for watched objects is not polled; other
//!   waits keep KUDO's 1–60 s backoff). The same watches feed caches the reconciles read Instances,
//!   OperatorVersions and managed objects from (see `cache`: a GET only where a cached copy
//!   could be stale in a way that matters); writes are unchanged.
//!
//! * **Plan control** (KUDO had none): a running or scheduled plan is cancelled by setting
//!   `spec.planExecution.status: CANCELLED` on the Instance (the merge patch [`kudo_engine::reconcile::cancel_patch`], which
//!   `kubectl kudo plan cancel` sends) or by clearing `spec.planExecution.planName`. The controller
//!   stops the run at the next task boundary — tasks already applied stay applied, nothing after
//!   them runs — marks the plan, its running phases and steps CANCELLED, publishes a
//!   `PlanCancelled` Event and unschedules the plan. A cancellation is accepted even while a
//!   denied parameter change is stored (that change is judged again once the plan is
//!   unscheduled). Triggering the same plan again (`kubectl kudo plan trigger`, or a new
//!   `planExecution.uid`) restarts it from the beginning. Plans and steps may declare a `timeout`
//!   (e.g. `10m`); exceeding it ends the run in FATAL_ERROR with a `PlanTimeout`/`StepTimeout`
//!   Event.
//!
//! * **Drift repair** (KUDO had none): while no plan runs, the objects of the last completed
//!   deploy/update/upgrade runs are compared with the cluster whenever a watched child changes
//!   (and at every idle resync). A deleted object, or a field we applied that was changed by
//!   someone else (e.g. `kubectl scale`), is applied again with a `DriftRepaired` Event. The
//!   Instance annotation `kudo.dev/drift-policy` (or `kudo-rs.dev/drift-policy`) selects
//!   `repair` (default), `report` (Warning Event `DriftDetected` and condition `Drifted=True`,
//!   nothing changed) or `ignore`. Objects of plans that never completed are not touched. See
//!   [`drift`].
//!
//! Everything about a run lives in the Instance (`status.planStatus`, `spec.planExecution`, the
//! timing annotation), so a restarted controller resumes where the previous one stopped.
//!
//! **Operations:** with [`ControllerConfig::metrics_addr`] set, one HTTP server serves
//! `/metrics` (Prometheus/OpenMetrics, see [`metrics`]), `/healthz` and `/readyz` (see [`ops`]).
//! With [`ControllerConfig::leader_election`] set, only the replica holding the Lease reconciles
//! (see [`leader`]).

mod applied;
mod apply;
mod autopilot;
mod cache;
mod child_store;
mod dependencies;
pub mod drift;
mod echoes;
mod events;
mod gate;
pub mod impersonation;
pub mod leader;
mod lean;
pub mod metrics;
pub mod ops;
pub mod param_sources;
mod pipe;
mod reasons;
mod reconcile;
mod render;
pub mod revisions;
mod running;
pub mod shard;
mod stepper;
mod task;
mod timings;
mod translate;
mod typed;
mod views;
mod watches;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use tracing::Instrument;

pub use leader::LeaderElection;
pub use metrics::Metrics;
pub use ops::OpsServer;
pub use reconcile::ReconcileError;
pub use stepper::Stepper;

pub use kudo_engine::reconcile::{ADMITTED_SPEC_ANNOTATION, RETRY_ANNOTATION, admitted_spec};

pub use kudo_engine::reconcile::{CLUSTER_OBJECTS_ANNOTATION, CLUSTER_OBJECTS_FINALIZER};

/// Reporting controller name of the Events we publish (KUDO's manager name).
pub const REPORTER: &str = "kudo-manager";

/// Installs the global log subscriber of the manager: one JSON object per line (`json = true`,
/// for log collectors) or human-readable text. Reconcile logs carry the span fields `instance`,
/// `plan`, `uid`, `phase`, `step` and `task`, so one plan run can be followed across lines. The
/// filter comes from `RUST_LOG` (default `info`). Returns an error when a subscriber is already
/// installed (e.g. called twice).
pub fn init_tracing(json: bool) -> Result<(), Error> {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only on a terminal: in files, pipes and log collectors escape codes are noise
    // (issue 14, bug 7). The log goes to stdout, so that is the stream that decides.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi);
    let res = if json {
        builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .try_init()
    } else {
        builder.try_init()
    };
    res.map_err(|e| Error::Logging(e.to_string()))
}

/// Tunables of the controller. The defaults suit both tests and a real cluster.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Field manager for server-side apply and for our own writes: the owner of every field the
    /// operator's templates set, so SSA conflicts with other managers are resolved in our favour.
    pub field_manager: String,
    /// Longest time a running plan waits before the controller looks again without any watch event.
    /// A plan waiting only for watched objects of its Instance is looked at again after this
    /// long unless an event comes first; other waits keep KUDO's 1–60 s backoff, capped by this.
    /// Five minutes, like [`Self::idle_resync`]: the watches re-list after any break, so the timer
    /// only guards against a wake rule that missed a change; at 60 s a rollout of a few minutes on
    /// a busy cluster got a pass each minute that found nothing new (issue 28: ~3 of 7.8
    /// reconciles per Instance in the real-cluster bench).
    pub requeue_backstop: Duration,
    /// How often idle Instances re-check their readiness without a watch event.
    pub idle_resync: Duration,
    /// Delay before retrying after a reconcile failed with an unexpected (non-plan) error.
    pub error_requeue: Duration,
    /// Maximum number of Instances reconciled at the same time (0 = unbounded). One Instance is
    /// never reconciled concurrently with itself.
    pub concurrency: u16,
    /// How long a triggered reconcile waits for more triggers of the same Instance (each one
    /// restarts the wait; kube-runtime's debounce). Zero runs at once.
    pub debounce: Duration,
    /// Address of the `/metrics`, `/healthz`, `/readyz` server; `None` serves nothing (the
    /// in-process `kubectl kudo dev` manager and most tests). Use [`run_with`] and an
    /// [`OpsServer`] bound beforehand to learn the address of port 0.
    pub metrics_addr: Option<SocketAddr>,
    /// Compete for a Lease and reconcile only while holding it; `None` always reconciles (one
    /// replica, or the in-process manager).
    pub leader_election: Option<LeaderElection>,
    /// Watch and reconcile only Instances (and their children) in this namespace; `None` watches
    /// the whole cluster. Lets several managers share one cluster without fighting over the same
    /// Instances (tests on a shared real control plane, one manager per team namespace).
    pub namespace: Option<String>,
    /// The ServiceAccount (in each Instance's own namespace) impersonated for an Instance without
    /// `spec.serviceAccountName`; `None` applies such Instances with the manager's own identity
    /// (KUDO's behaviour). See [`impersonation`].
    pub default_service_account: Option<String>,
    /// How many revisions (`kubectl kudo history`) are kept per Instance; older ones are deleted
    /// when a new run is recorded. See [`revisions`].
    pub revision_history_limit: usize,
    /// Split the Instances into this many shards, each a Lease (see [`shard`]); replicas share
    /// them fairly. 1 (the default) is one acting replica, elected by [`Self::leader_election`]
    /// if set. More than 1 needs [`Self::leader_election`] (its lease name, namespace, identity
    /// and duration are the shard Leases').
    pub shards: u32,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            field_manager: "kudo".to_string(),
            requeue_backstop: Duration::from_secs(300),
            idle_resync: Duration::from_secs(300),
            error_requeue: Duration::from_secs(5),
            concurrency: 4,
            debounce: Duration::ZERO,
            metrics_addr: None,
            leader_election: None,
            namespace: None,
            default_service_account: None,
            revision_history_limit: kudo_engine::revision::DEFAULT_HISTORY_LIMIT,
            shards: 1,
        }
    }
}

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration cannot work.
    #[error("invalid controller configuration: {0}")]
    InvalidConfig(String),
    /// The global log subscriber could not be installed (one is already set).
    #[error("cannot install the log subscriber: {0}")]
    Logging(String),
    /// The `kudo.dev` CRDs could not be installed or did not become Established.
    #[error("cannot install the KUDO CRDs: {0}")]
    Crds(String),
    /// The metrics/health server could not listen.
    #[error("metrics server: {0}")]
    Metrics(String),
}

/// Installs (server-side apply, idempotent) the three `kudo.dev/v1beta1` CRDs the manager serves and
/// waits until each is Established, so Instances can be created right after. Used wherever a
/// cluster is started together with the manager (`kubectl kudo dev`, `kubectl kudo test`, tests);
/// `kubectl kudo init` installs them as part of its own manifests.
pub async fn install_crds(
    client: &kube::Client,
    field_manager: &str,
    timeout: Duration,
) -> Result<(), Error> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams};
    use kube::runtime::wait::{await_condition, conditions::is_crd_established};

    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for text in kudo_api::crd_manifests() {
        let crd: CustomResourceDefinition = serde_saphyr::from_str(text)
            .map_err(|e| Error::Crds(format!("built-in CRD manifest does not parse: {e}")))?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(
            &name,
            &PatchParams::apply(field_manager).force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(|e| Error::Crds(format!("{name}: {e}")))?;
        names.push(name);
    }
    for name in names {
        tokio::time::timeout(timeout, await_condition(api.clone(), &name, is_crd_established()))
            .await
            .map_err(|_| Error::Crds(format!("{name} did not become Established within {timeout:?}")))?
            .map_err(|e| Error::Crds(format!("{name}: {e}")))?;
    }
    Ok(())
}

/// `inner` (keeping its authentication, base URL and timeouts) with `hook` run on every request
/// before it is sent: how the manager counts its requests and impersonates accounts.
pub(crate) fn with_request_hook(
    inner: kube::Client,
    hook: impl Fn(&mut http::Request<kube::client::Body>) + Clone + Send + Sync + 'static,
) -> kube::Client {
    let ns = inner.default_namespace().to_string();
    let svc = tower::service_fn(move |mut req: http::Request<kube::client::Body>| {
        hook(&mut req);
        let inner = inner.clone();
        async move { inner.send(req).await }
    });
    kube::Client::new(svc, ns)
}

/// The `kudo.dev/v1beta1` resources as dynamic API resources (the kudo-api types are plain serde
/// structs, converted with serde_json).
pub(crate) fn instance_resource() -> ApiResource {
    // Every watch event of a child names its Instance with one: looked up once.
    static INSTANCE: std::sync::OnceLock<ApiResource> = std::sync::OnceLock::new();
    INSTANCE
        .get_or_init(|| kudo_kube::known_resource(kudo_api::GROUP, "Instance"))
        .clone()
}

pub(crate) fn operator_version_resource() -> ApiResource {
    kudo_kube::known_resource(kudo_api::GROUP, "OperatorVersion")
}

/// Shared state of all reconciles.
pub(crate) struct Context {
    /// Watch-fed caches of Instances, OperatorVersions and managed objects (see [`cache`]).
    pub caches: cache::Caches,
    pub client: kube::Client,
    pub config: ControllerConfig,
    pub recorder: events::Recorder,
    pub discovery: kudo_kube::discovery::Cache,
    pub metrics: Arc<Metrics>,
    pub applied: applied::AppliedCache,
    /// Translations of removed API versions already announced by an Event.
    pub translations: translate::Announced,
    /// Watches of the objects autopilot rules look at (see [`autopilot`]).
    pub autopilot: autopilot::Watches,
    /// The ServiceAccounts Instances are applied as (see [`impersonation`]).
    pub identities: impersonation::Identities,
    /// Which Instances this replica reconciles (see [`shard`]).
    pub shards: Arc<gate::ShardGate>,
    /// The revision recorded for each run still going (see [`revisions`]).
    pub revisions: revisions::Recorded,
    /// The versions of this manager's own Instance writes (see [`echoes`]).
    pub echoes: Arc<echoes::Echoes>,
    /// The versions of the objects plans applied (see [`echoes`]).
    pub child_echoes: Arc<echoes::Echoes>,
    /// Plan timing not yet stored in the Instances (see [`timings`]).
    pub timings: timings::Timings,
    /// Rendered texts parsed before: a running plan renders the same text at every pass.
    pub parse_memo: Arc<kudo_package::split::ParseMemo>,
}

impl Context {
    /// The client for requests made *for* the Instance being reconciled: impersonating its
    /// ServiceAccount when it has one (see [`impersonation`]), else the manager's own.
    pub fn acting_client(&self) -> kube::Client {
        impersonation::current().map_or_else(|| self.client.clone(), |a| a.client)
    }
}

/// Runs the manager until `shutdown` completes: the controller (while holding the lease, with
/// leader election) and, with [`ControllerConfig::metrics_addr`], the metrics/health server. The
/// KUDO CRDs must already be installed (by `kubectl kudo init` or a test); nothing is created
/// here except what plans apply, Events and the leader election Lease.
pub async fn run(client: kube::Client, config: ControllerConfig, shutdown: impl Future) -> Result<(), Error> {
    validate(&config)?;
    let ops = match config.metrics_addr {
        Some(addr) => Some(OpsServer::bind(addr).await?),
        None => None,
    };
    run_with(client, config, ops, shutdown).await
}

fn validate(config: &ControllerConfig) -> Result<(), Error> {
    if config.field_manager.is_empty() {
        return Err(Error::InvalidConfig("field_manager must not be empty".into()));
    }
    if let Some(le) = &config.leader_election {
        le.validate().map_err(|e| Error::InvalidConfig(e.to_string()))?;
    }
    if config.shards == 0 {
        return Err(Error::InvalidConfig("shards must be at least 1".into()));
    }
    if config.shards > kudo_engine::shard::BUCKETS {
        return Err(Error::InvalidConfig(format!(
            "shards must be at most {} (a shard is a set of the Instances' hash buckets)",
            kudo_engine::shard::BUCKETS
        )));
    }
    if config.shards > 1 && config.leader_election.is_none() {
        return Err(Error::InvalidConfig(
            "shards above 1 need leader election: each shard is a Lease".into(),
        ));
    }
    Ok(())
}

/// [`run`] with the metrics/health server on an already bound socket (`None`: no server;
/// [`ControllerConfig::metrics_addr`] is not looked at). Binding first lets a caller use port 0
/// and still know where to scrape.
pub async fn run_with(
    client: kube::Client,
    config: ControllerConfig,
    ops: Option<OpsServer>,
    shutdown: impl Future,
) -> Result<(), Error> {
    validate(&config)?;
    let metrics = Arc::new(Metrics::new());
    // Every request the manager sends is counted by verb (`kudo_api_requests_total`).
    let client = metrics::counting_client(client, metrics.clone());
    let health = Arc::new(ops::Health::new(metrics, config.leader_election.is_some()));
    let (ops_stop, ops_stop_rx) = tokio::sync::oneshot::channel::<()>();
    // Aborted if this future is dropped (a killed manager serves nothing any more).
    let mut ops_task = ops.map(|server| {
        ops::AbortOnDrop(Some(tokio::spawn(ops::serve(
            server,
            health.clone(),
            async move {
                let _ = ops_stop_rx.await;
            },
        ))))
    });
    let res = match config.leader_election.clone() {
        None => {
            health.set_acting(true);
            run_controller(client, config, gate::Sharding::none(), health.clone(), shutdown).await;
            health.set_acting(false);
            Ok(())
        }
        Some(le) if config.shards > 1 => shard::run(client, config, le, health.clone(), shutdown).await,
        Some(le) => leader::run(client, config, le, health.clone(), shutdown).await,
    };
    let _ = ops_stop.send(());
    if let Some(t) = ops_task.as_mut().and_then(|t| t.0.take()) {
        let _ = t.await;
    }
    res
}

/// One controller incarnation: watches, caches and reconciles until `shutdown` completes
/// (graceful: running reconciles finish, no new ones start). The watches are declared in
/// [`watches`]: which kinds, in which scope, and which Instances an event of each wakes.
pub(crate) async fn run_controller(
    client: kube::Client,
    config: ControllerConfig,
    sharding: gate::Sharding,
    health: Arc<ops::Health>,
    shutdown: impl Future,
) {
    let mut watches = watches::Watches::new(client.clone(), config.namespace.clone(), &sharding.gate);
    let echoes = Arc::new(echoes::Echoes::default());
    let child_echoes = Arc::new(echoes::Echoes::default());
    let running = Arc::new(running::Running::default());
    let instances = watches.instances(echoes.clone(), running.clone());
    if let Some(granted) = sharding.granted {
        watches.shards_granted(&instances, granted, sharding.gate.count());
    }
    let operator_versions = watches.operator_versions(&instances);
    watches.secrets(&instances);
    let children = watches.children(running, child_echoes.clone());
    let autopilot = watches.autopilot();
    let caches = cache::Caches::new(instances.clone(), operator_versions, children);
    let (client_for_typed, namespace_for_typed) = (client.clone(), config.namespace.clone());
    let gate = sharding.gate;
    let ctx = context(
        client,
        config,
        (caches, echoes, child_echoes),
        autopilot,
        gate.clone(),
        &health,
    );
    tracing::info!("kudo controller started");
    // Typed APIs (issue 26): their own controllers, for as long as this incarnation runs.
    let typed = tokio::spawn(typed::run(client_for_typed, namespace_for_typed, gate));
    reconcile_until(watches.triggers, instances, ctx, &health, shutdown).await;
    typed.abort();
    tracing::info!("kudo controller stopped");
}

/// The state every reconcile shares. Events name the replica that acted: its leader election
/// identity (the pod name in a cluster), else the pod name from the environment.
fn context(
    client: kube::Client,
    config: ControllerConfig,
    (caches, echoes, child_echoes): (cache::Caches, Arc<echoes::Echoes>, Arc<echoes::Echoes>),
    autopilot: autopilot::Watches,
    shards: Arc<gate::ShardGate>,
    health: &ops::Health,
) -> Arc<Context> {
    let instance = config
        .leader_election
        .as_ref()
        .map(|le| le.identity.clone())
        .or_else(|| std::env::var("KUDO_POD_NAME").ok());
    let recorder = events::Recorder::new(client.clone(), REPORTER, instance);
    Arc::new(Context {
        caches,
        discovery: kudo_kube::discovery::Cache::new(client.clone()),
        identities: impersonation::Identities::new(client.clone()),
        client,
        config,
        recorder,
        metrics: health.metrics.clone(),
        applied: Default::default(),
        translations: Default::default(),
        autopilot,
        shards,
        revisions: Default::default(),
        echoes,
        child_echoes,
        timings: Default::default(),
        parse_memo: Default::default(),
    })
}

/// Reconciles the Instances the triggers name until `shutdown` completes, `concurrency` at a
/// time, each after `debounce` without a further trigger (both from the context's config); ready
/// once the first list of Instances is in `store`.
async fn reconcile_until(
    triggers: Vec<watches::Trigger>,
    store: Store<DynamicObject>,
    ctx: Arc<Context>,
    health: &ops::Health,
    shutdown: impl Future,
) {
    // The caller's shutdown future need not be Send: it is awaited here, and a oneshot relays it
    // to kube-runtime's graceful shutdown (running reconciles finish, no new ones start).
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let limits = kube::runtime::controller::Config::default()
        .concurrency(ctx.config.concurrency)
        .debounce(ctx.config.debounce);
    // kube-runtime's applier (what `Controller::run` is built on) with our own trigger streams:
    // each reconcile runs on its own task, cancelled if this future is dropped.
    let queue = futures::stream::select_all(triggers).take_until(async move {
        let _ = stop_rx.await;
    });
    let mut stream = std::pin::pin!(
        kube::runtime::applier(
            |obj, ctx: Arc<Context>| {
                kube::runtime::utils::CancelableJoinHandle::spawn(
                    async move {
                        // Another replica's shard: nothing to do until this one holds it.
                        let ns = obj.namespace().unwrap_or_default();
                        let Some(pass) = ctx.shards.enter(&ns, &obj.name_any()) else {
                            return Ok(kube::runtime::controller::Action::await_change());
                        };
                        let metrics = ctx.metrics.clone();
                        let in_flight = metrics.reconcile_started();
                        let res = pass.run(reconcile::reconcile(obj, ctx)).await;
                        in_flight.finish(!matches!(res, Some(Err(_))));
                        // Cancelled: the shard went to another replica.
                        res.unwrap_or_else(|| Ok(kube::runtime::controller::Action::await_change()))
                    }
                    .in_current_span(),
                    &tokio::runtime::Handle::current(),
                )
            },
            reconcile::error_policy,
            ctx,
            store.clone(),
            queue,
            limits,
        )
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => tracing::trace!(instance = %obj, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "reconcile failed"),
            }
        })
    );
    // Ready once the first list of Instances is in the cache (the store is fed by the stream).
    let synced = async {
        if store.wait_until_ready().await.is_ok() {
            health.set_synced();
        }
        std::future::pending::<()>().await
    };
    tokio::select! {
        _ = &mut stream => {}
        _ = synced => {}
        _ = shutdown => {
            let _ = stop_tx.send(());
            stream.await;
        }
    }
}

/// Maps a child object back to its Instance through the `kudo.dev/instance` label (namespaced
/// children live in the Instance's namespace).
pub(crate) fn owner_of<K: Resource>(obj: &K) -> Option<ObjectRef<DynamicObject>> {
    let name = obj.labels().get(kudo_api::labels::INSTANCE)?.clone();
    let ns = obj.namespace()?;
    Some(ObjectRef::new_with(&name, instance_resource()).within(&ns))
}
