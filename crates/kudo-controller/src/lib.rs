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

// The manager's entry points below start one of three loops (unsharded, leader election,
// shards), each running controller incarnations (`controllers`).
mod config;
mod controllers;
mod error;
mod gate;
mod incarnation;
pub mod leader;
pub mod ops;
pub mod shard;

// The controllers, each with its watches.
mod instances;
mod rollouts;
mod sources;
mod typed;
mod views;
mod watches;

// What a controller's reconciles share.
mod applied;
mod autopilot;
mod cache;
mod child_store;
mod context;
mod echoes;
mod events;
mod forward;
pub use kudo_kube::failpoint;
mod hook;
pub mod impersonation;
mod lean;
pub mod metrics;
mod resources;
pub mod revisions;
mod running;
mod timings;

// One reconcile of an Instance and the IO it performs.
mod apply;
mod dependencies;
pub mod drift;
mod ownership;
pub mod param_sources;
mod pipe;
mod reasons;
mod reconcile;
mod render;
mod stepper;
mod task;
mod translate;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;

pub use config::LeaderConfigError;
pub use config::{ControllerConfig, LeaderElection};
pub use error::Error;
pub use events::REPORTER;
pub use metrics::Metrics;
pub use ops::OpsServer;
pub use reconcile::ReconcileError;
pub use stepper::Stepper;

pub use kudo_engine::reconcile::{
    ADMITTED_SPEC_ANNOTATION, CLUSTER_OBJECTS_ANNOTATION, CLUSTER_OBJECTS_FINALIZER, RETRY_ANNOTATION,
    admitted_spec,
};

/// Installs the global log subscriber of the manager: one JSON object per line (`json = true`,
/// for log collectors) or human-readable text. Reconcile logs carry the span fields `instance`,
/// `plan`, `uid`, `phase`, `step` and `task`, so one plan run can be followed across lines. The
/// filter comes from `RUST_LOG` (default `info`). Returns an error when a subscriber is already
/// installed (e.g. called twice).
pub fn init_tracing(json: bool) -> Result<(), Error> {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only on a terminal: in files, pipes and log collectors escape codes are noise. The
    // log goes to stdout, so that is the stream that decides.
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

/// Runs the manager until `shutdown` completes: the controller (while holding the lease, with
/// leader election) and, with [`ControllerConfig::metrics_addr`], the metrics/health server. The
/// KUDO CRDs must already be installed (by `kubectl kudo init` or a test); nothing is created
/// here except what plans apply, Events and the leader election Lease.
pub async fn run(client: kube::Client, config: ControllerConfig, shutdown: impl Future) -> Result<(), Error> {
    config.validate()?;
    let ops = match config.metrics_addr {
        Some(addr) => Some(OpsServer::bind(addr).await?),
        None => None,
    };
    run_with(client, config, ops, shutdown).await
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
    config.validate()?;
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
            let sharding = gate::Sharding::none(config.ignored_namespaces.clone());
            controllers::run(client, config, sharding, health.clone(), shutdown).await;
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
