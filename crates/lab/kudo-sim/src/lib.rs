//! Simulated nodes, kubelet, scheduler and workload controllers for clusters without any.
//!
//! Our embedded API server (and envtest-like setups) store objects but run nothing, so a
//! Deployment would never become Available and KUDO plans would wait forever. This crate plays
//! the parts of kube-scheduler, the kubelet and kube-controller-manager that KUDO's health rules
//! and `kubectl rollout status` / `kubectl wait` observe — without running containers.
//!
//! Like KWOK, it is an ordinary API client: it watches through kube-rs reflectors and writes
//! through the HTTP API (create, merge patch, `status` merge patch, delete), so it works against
//! our server or any real cluster and does not depend on the server's internals.
//!
//! What it simulates:
//! * **Nodes** `kudo-node-0..N-1` (label `kudo.dev/simulated-node=true`), Ready, with capacity,
//!   kept Ready by heartbeats.
//! * **Scheduler**: unscheduled pods are bound round-robin (binding subresource, falling back to
//!   setting `spec.nodeName`), with a `Scheduled` event.
//! * **Kubelet** for pods on the simulated nodes: Pending (ContainerCreating) → init containers
//!   completed in order → Running → Ready, with container statuses, pod IPs `10.244.<node>.<n>`,
//!   events (Scheduled, Pulled, Created, Started, Killing). Pods controlled by a Job then
//!   terminate with their commands' exit codes (0 unless a command fails) and become
//!   `Succeeded` or `Failed`. Deleted pods are killed (preStop hooks are
//!   noted as events) and removed with a zero grace period.
//! * **ReplicaSets, Deployments (RollingUpdate/Recreate), StatefulSets (OrderedReady/Parallel,
//!   RollingUpdate with partition/OnDelete, volumeClaimTemplates), DaemonSets, Jobs, CronJobs**,
//!   writing the same status fields and conditions as the real controllers.
//! * **Endpoints and EndpointSlices** for Services with selectors (ready pod IPs under
//!   `addresses`; one `discovery.k8s.io/v1` slice per Service with readiness conditions, owned
//!   by the Service), removed when their Service goes.
//! * **Volumes**: a default StorageClass `standard`; every unbound PVC is bound to a generated PV
//!   `pvc-<uid>`.
//!
//! # Simulated commands
//! Containers run their command lines in a shell interpreter over an in-memory filesystem per
//! pod (see [`shell`] for the exact rules; [`Runtime`] holds the filesystems, logs and the
//! stand-ins of servers, and serves `pods/exec` and `pods/log` once registered with the API
//! server). A program the interpreter does not implement exits 127 with the reason on stderr; a
//! server program, a long-running container's image entrypoint, or the start script of a known
//! server image in a long-running container becomes a stand-in that runs until stopped and
//! answers the simulated clients (`nc`, `zkCli.sh`, `redis-cli`, `mysql`) on its ports, reached
//! through cluster DNS and Services ([`network`]). The exit code decides the container's state,
//! as the real-cluster kit's fake kubelet does: in a Job-controlled pod or a pod with
//! `restartPolicy: Never` a failing container is terminated with its code and the pod becomes
//! `Failed` (a `Never` pod whose commands all end with 0 becomes `Succeeded`, a Job's pod after
//! its longest `sleep`; one whose process does not end keeps running); otherwise the container
//! sits in `CrashLoopBackOff` (restartCount 1, not ready, `lastState.terminated.exitCode` N). A
//! container whose commands end with 0 outside those pods, or whose process keeps running, runs
//! and is ready. An init container that fails keeps its pod from starting (`Init:Error`, or
//! `Init:CrashLoopBackOff` when the pod restarts it); one that does not end keeps it
//! initializing.
//!
//! # Failure convention
//! A container (or init container) whose image, command or args contain the word `fail`
//! (a whole word, case-insensitive: `busybox:fail`, `sh -c "fail"`, `--mode=fail`) exits with
//! code 1 whatever its command.
//!
//! # Determinism
//! No randomness: generated names derive from owner uids and counters through a fixed hash,
//! objects are processed ordered by namespace and name, and all timing comes from [`Delays`]
//! (all zero by default) measured on the configurable [`Clock`].
//!
//! Known simplifications: a StatefulSet's `currentRevision` advances once every pod runs the
//! update revision for OnDelete as well as RollingUpdate; Job pods that fail count as failed
//! whatever their `restartPolicy` (no in-place restarts under `OnFailure`); Job success and
//! failure conditions (`SuccessCriteriaMet`+`Complete`, `FailureTarget`+`Failed`) are written
//! together; CronJob `timeZone` values other than UTC are treated as UTC (with a warning event);
//! every unbound PVC is provisioned, whatever its class.
//!
//! Not simulated: probes (pods are ready after a delay), resource accounting, taints and
//! affinity, pod disruption budgets, Job pod failure and success policies, proportional scaling
//! of Deployments in the middle of a rollout, container restarts beyond the first.

mod cron;
mod endpoints;
mod engine;
mod kubelet;
mod loadbalancer;
pub mod network;
mod rollout;
mod runtime;
pub mod shell;
mod util;
mod volume_files;
mod volumes;
mod workloads;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

pub use cron::{CronError, Schedule};
pub use loadbalancer::LoadBalancerConfig;
pub use runtime::{Backend, ExecError, PodRuns, Runtime, command_line, long_running, view as container_view};
pub use volume_files::{VolumeData, volume_trees};

/// Errors that stop the simulator. Individual failed writes do not: they are logged and retried
/// on the next pass, because a controller must survive a flaky or partial API server.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The configuration cannot work (for example zero nodes).
    #[error("invalid simulator configuration: {0}")]
    InvalidConfig(String),
    /// The simulator task panicked or was cancelled.
    #[error("simulator task ended abnormally: {0}")]
    Task(String),
}

/// How long each simulated step takes. All zero by default so tests converge as fast as the
/// API round-trips allow; non-zero values make intermediate states observable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delays {
    /// Pod created → bound to a node.
    pub scheduling: Duration,
    /// Pod bound → containers running (the time spent in ContainerCreating / init containers).
    pub pending_to_running: Duration,
    /// Containers running → pod Ready.
    pub running_to_ready: Duration,
    /// Ready → containers exited, for pods controlled by a Job.
    pub job_completion: Duration,
    /// Deletion requested → pod removed (capped by the pod's own grace period).
    pub termination: Duration,
    /// PVC created → bound.
    pub volume_binding: Duration,
}

/// Source of "now" for delays, timestamps and CronJob schedules; replaceable so tests can step
/// through schedules without waiting for the wall clock.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The system wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to, for testing CronJobs and deadlines. The simulator
/// notices changes at its next resync (see [`SimConfig::resync`]).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock standing at `ms` since the Unix epoch.
    pub fn new(ms: i64) -> Self {
        ManualClock(AtomicI64::new(ms))
    }

    /// Moves the clock to `ms`.
    pub fn set(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }

    /// Moves the clock forward.
    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Milliseconds since the epoch for a UTC date and time, handy with [`ManualClock`].
pub fn utc_ms(year: i64, month: u32, day: u32, hour: u32, minute: u32) -> i64 {
    cron::utc_ms(year, month, day, hour, minute)
}

/// Simulator settings.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Step durations.
    pub delays: Delays,
    /// Number of simulated nodes (`kudo-node-0..N-1`); at least 1.
    pub nodes: u32,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Upper bound between two reconcile passes even when nothing changed; this is how a
    /// [`ManualClock`] being moved is noticed.
    pub resync: Duration,
    /// How often node Ready conditions get a fresh `lastHeartbeatTime`.
    pub node_heartbeat: Duration,
    /// Name of the default StorageClass created at start and used for PVCs without a class.
    pub storage_class: String,
    /// The simulated containers' filesystems and logs; share a clone with the API server
    /// ([`kudo_apiserver::RunningServer::set_pod_runtime`]) to serve `exec` and `logs`.
    pub runtime: Runtime,
    /// Load balancers for `type: LoadBalancer` Services on loopback addresses (see
    /// `loadbalancer`); `None` (the default): such Services get no ingress address, as on a
    /// cluster without a load balancer.
    pub load_balancer: Option<LoadBalancerConfig>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            delays: Delays::default(),
            nodes: 1,
            clock: Arc::new(SystemClock),
            resync: Duration::from_secs(1),
            node_heartbeat: Duration::from_secs(30),
            storage_class: "standard".to_string(),
            runtime: Runtime::new(),
            load_balancer: None,
        }
    }
}

/// Runs the simulator until `shutdown` completes. Returns an error only for an unusable
/// configuration; API errors are retried.
pub async fn run(
    client: kube::Client,
    config: SimConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), SimError> {
    if config.nodes == 0 {
        return Err(SimError::InvalidConfig("nodes must be at least 1".into()));
    }
    if config.nodes > 250 {
        return Err(SimError::InvalidConfig(
            "at most 250 simulated nodes are supported".into(),
        ));
    }
    engine::run(client, config, shutdown).await;
    Ok(())
}

/// A simulator running on its own task.
#[derive(Debug)]
pub struct SimHandle {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), SimError>>,
}

/// Starts the simulator on a background task (needs a Tokio runtime).
pub fn spawn(client: kube::Client, config: SimConfig) -> SimHandle {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run(client, config, async move {
        let _ = rx.await;
    }));
    SimHandle { stop: Some(tx), task }
}

impl SimHandle {
    /// Stops the simulator and waits for it to finish its current pass.
    pub async fn shutdown(mut self) -> Result<(), SimError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match (&mut self.task).await {
            Ok(r) => r,
            Err(e) => Err(SimError::Task(e.to_string())),
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        if self.stop.is_some() {
            self.task.abort();
        }
    }
}
