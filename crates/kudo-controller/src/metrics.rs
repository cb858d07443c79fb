//! Prometheus metrics of the manager (OpenMetrics text at `/metrics`, see [`crate::ops`]).
//!
//! Every metric is prefixed `kudo_`. The registry lives in the shared reconcile context so that
//! the code paths that do something worth counting need one call each:
//!
//! | metric | type | labels | meaning |
//! | --- | --- | --- | --- |
//! | `kudo_reconciles_total` | counter | `result` = `success`/`error` | finished Instance reconciles |
//! | `kudo_reconciles_in_flight` | gauge | | reconciles executing right now (kube-runtime exposes no queue depth; this is the honest proxy: it reaches the configured concurrency when work piles up) |
//! | `kudo_plan_runs_total` | counter | `operator`, `plan`, `result` | plan runs that reached a terminal status (`COMPLETE`, `FATAL_ERROR`, `CANCELLED`) |
//! | `kudo_plan_duration_seconds` | histogram | `operator`, `plan`, `result` | first IN_PROGRESS to terminal status of those runs (sub-second: measured by this process when it saw the run start, else from the run's timing annotation) |
//! | `kudo_task_errors_total` | counter | `reason` | failed task executions: the fatal Event reason, or `Transient` for an error that is retried |
//! | `kudo_objects_applied_total` | counter | | successful server-side applies of plan objects |
//! | `kudo_drift_detected_total` | counter | | objects found changed or deleted outside a plan |
//! | `kudo_drift_repaired_total` | counter | | of those, objects a re-apply actually changed |
//! | `kudo_leader` | gauge | | 1 while this process acts (holds the lease, or leader election is off), 0 on standby |
//! | `kudo_shards_held` | gauge | | with `--shards N` > 1: how many shard Leases this replica holds and acts on (see `shard`) |
//! | `kudo_api_requests_total` | counter | `verb` = `get`/`list`/`watch`/`create`/`update`/`patch`/`delete` | requests the manager's client sent to the API server (leader election and Events included) |

use std::collections::BTreeMap;

use kudo_api::OperatorVersion;
use kudo_engine::{PassSummary, TIMING_ANNOTATION, TaskOutcome, Timestamp, Timing};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PlanLabels {
    operator: String,
    plan: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

fn plan_histogram() -> Histogram {
    // 0.1 s … ~4 h: plans range from a ConfigMap apply to a large rolling upgrade.
    Histogram::new(exponential_buckets(0.1, 2.5, 14))
}

/// The manager's metrics. One instance per process, shared by every controller incarnation
/// (leader election may start and stop the controller several times), so counters never reset
/// while the process lives.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabels, Counter>,
    in_flight: Gauge,
    plan_runs: Family<PlanLabels, Counter>,
    plan_duration: Family<PlanLabels, Histogram, fn() -> Histogram>,
    task_errors: Family<ReasonLabels, Counter>,
    objects_applied: Counter,
    drift_detected: Counter,
    drift_repaired: Counter,
    leader: Gauge,
    shards_held: Gauge,
    api_requests: Family<VerbLabels, Counter>,
    /// When this process first saw each unfinished run (by plan uid), for sub-second durations.
    run_started: std::sync::Mutex<BTreeMap<String, std::time::Instant>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with every metric registered (at zero).
    pub fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::with_prefix("kudo"),
            reconciles: Family::default(),
            in_flight: Gauge::default(),
            plan_runs: Family::default(),
            plan_duration: Family::new_with_constructor(plan_histogram as fn() -> Histogram),
            task_errors: Family::default(),
            objects_applied: Counter::default(),
            drift_detected: Counter::default(),
            drift_repaired: Counter::default(),
            leader: Gauge::default(),
            shards_held: Gauge::default(),
            api_requests: Family::default(),
            run_started: std::sync::Mutex::new(BTreeMap::new()),
        };
        {
            let r = &mut m.registry;
            r.register(
                "reconciles",
                "Instance reconciles finished, by result",
                m.reconciles.clone(),
            );
            r.register(
                "api_requests",
                "Requests the manager sent to the API server, by verb",
                m.api_requests.clone(),
            );
            r.register(
                "reconciles_in_flight",
                "Instance reconciles executing right now (proxy for the work queue depth)",
                m.in_flight.clone(),
            );
            r.register(
                "plan_runs",
                "Plan runs that reached a terminal status, by operator, plan and status",
                m.plan_runs.clone(),
            );
            r.register(
                "plan_duration_seconds",
                "Time from a plan run's start to its terminal status",
                m.plan_duration.clone(),
            );
            r.register(
                "task_errors",
                "Failed task executions by reason (Transient for retried errors)",
                m.task_errors.clone(),
            );
            r.register(
                "objects_applied",
                "Plan objects applied with server-side apply",
                m.objects_applied.clone(),
            );
            r.register(
                "drift_detected",
                "Objects found changed or deleted outside a plan",
                m.drift_detected.clone(),
            );
            r.register(
                "drift_repaired",
                "Drifted objects that a re-apply changed back",
                m.drift_repaired.clone(),
            );
            r.register(
                "leader",
                "1 while this manager acts (holds the lease or runs without leader election)",
                m.leader.clone(),
            );
            r.register(
                "shards_held",
                "Shard Leases this replica holds and acts on (sharded managers only)",
                m.shards_held.clone(),
            );
        }
        m
    }

    /// The OpenMetrics text exposition of every metric (ends with `# EOF`).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Marks one reconcile as running until the returned guard is dropped (also when the
    /// reconcile future is cancelled), then counts it by `result`.
    pub(crate) fn reconcile_started(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight {
            metrics: self,
            result: "error",
        }
    }

    /// Counts a plan pass whose status became terminal in this pass (a pass over an already
    /// terminal run counts nothing). The duration comes from the run's timing annotation (the
    /// Instance annotations as the pass started).
    pub(crate) fn plan_pass(
        &self,
        ov: &OperatorVersion,
        plan_uid: &str,
        annotations: &BTreeMap<String, String>,
        summary: &PassSummary,
        now: Timestamp,
    ) {
        if !summary.status.is_terminal() {
            let mut started = self.run_started.lock().unwrap_or_else(|e| e.into_inner());
            started
                .entry(plan_uid.to_string())
                .or_insert_with(std::time::Instant::now);
            // Runs abandoned without a terminal pass (deleted Instances) must not pile up.
            if started.len() > 10_000 {
                started.retain(|_, t| t.elapsed() < std::time::Duration::from_secs(24 * 3600));
            }
            return;
        }
        let seen = self
            .run_started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(plan_uid);
        if summary.status_before.is_terminal() {
            return;
        }
        let labels = PlanLabels {
            operator: ov.spec.operator.name.clone(),
            plan: summary.plan.clone(),
            result: summary.status.to_string(),
        };
        self.plan_runs.get_or_create(&labels).inc();
        let timing = Timing::from_annotation(annotations.get(TIMING_ANNOTATION).map(String::as_str));
        let started = timing
            .plan_started
            .filter(|_| timing.uid == plan_uid)
            .and_then(|t| Timestamp::parse(&t).ok())
            .unwrap_or(now);
        // Measured here when possible: whole seconds would hide every plan under a second.
        let secs = match seen {
            Some(t) => t.elapsed().as_secs_f64(),
            None => now.seconds_since(started).max(0) as f64,
        };
        self.plan_duration.get_or_create(&labels).observe(secs);
    }

    /// Counts a task outcome that is an error (fatal by reason, or transient).
    pub(crate) fn task_outcome(&self, outcome: &TaskOutcome) {
        let reason = match outcome {
            TaskOutcome::Fatal { reason, .. } => reason.as_str(),
            TaskOutcome::Transient(_) => "Transient",
            _ => return,
        };
        self.task_errors
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
    }

    /// One plan object was applied.
    pub(crate) fn object_applied(&self) {
        self.objects_applied.inc();
    }

    /// The result of one drift check: how many objects it found drifted, and how many of those a
    /// re-apply changed.
    pub(crate) fn drift(&self, detected: usize, repaired: usize) {
        self.drift_detected.inc_by(detected as u64);
        self.drift_repaired.inc_by(repaired as u64);
    }

    /// Whether this process currently acts as the leader.
    pub(crate) fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// How many shards this replica acts on now.
    pub(crate) fn set_shards_held(&self, n: usize) {
        self.shards_held.set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

/// A running reconcile (see [`Metrics::reconcile_started`]).
pub(crate) struct InFlight<'m> {
    metrics: &'m Metrics,
    result: &'static str,
}

impl InFlight<'_> {
    /// Records the reconcile's result (a dropped guard without a result counts as `error`).
    pub(crate) fn finish(mut self, ok: bool) {
        self.result = if ok { "success" } else { "error" };
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.metrics.in_flight.dec();
        self.metrics
            .reconciles
            .get_or_create(&ResultLabels {
                result: self.result.to_string(),
            })
            .inc();
    }
}

/// The Kubernetes verb of a request: `watch` and `list` are GETs of a collection (with and
/// without `watch=true`), `get` a GET of one object (or of discovery); `delete` includes
/// deletecollection.
pub fn request_verb(method: &http::Method, path: &str, query: Option<&str>) -> &'static str {
    match *method {
        http::Method::POST => return "create",
        http::Method::PUT => return "update",
        http::Method::PATCH => return "patch",
        http::Method::DELETE => return "delete",
        _ => {}
    }
    let watching = query.is_some_and(|q| {
        q.split('&')
            .any(|kv| kv == "watch=true" || kv == "watch=1" || kv == "watch")
    });
    if watching {
        return "watch";
    }
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    // /api/v1/... or /apis/GROUP/VERSION/...; anything else (/version, /openapi) is a get.
    let rest = match segs.first() {
        Some(&"api") if segs.len() >= 2 => &segs[2..],
        Some(&"apis") if segs.len() >= 3 => &segs[3..],
        _ => return "get",
    };
    let rest = match rest {
        // A namespace itself, or its status/finalize subresource.
        ["namespaces", _] | ["namespaces", _, "status" | "finalize"] => return "get",
        ["namespaces", _, tail @ ..] => tail,
        r => r,
    };
    match rest {
        [] => "get",
        [_collection] => "list",
        _ => "get",
    }
}

/// A client that counts every request by verb in `kudo_api_requests_total` before handing it to
/// `inner` (which keeps its authentication, base URL and timeouts).
pub(crate) fn counting_client(inner: kube::Client, metrics: std::sync::Arc<Metrics>) -> kube::Client {
    crate::hook::with_request_hook(inner, move |req| {
        let verb = request_verb(req.method(), req.uri().path(), req.uri().query());
        metrics.api_requests.get_or_create(&VerbLabels { verb }).inc();
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_verbs_follow_kubernetes() {
        use http::Method;
        let v = |m: Method, p: &str, q: Option<&str>| request_verb(&m, p, q);
        assert_eq!(
            v(
                Method::GET,
                "/apis/kudo.dev/v1beta1/namespaces/a/instances/i",
                None
            ),
            "get"
        );
        assert_eq!(
            v(Method::GET, "/apis/kudo.dev/v1beta1/namespaces/a/instances", None),
            "list"
        );
        assert_eq!(
            v(
                Method::GET,
                "/apis/kudo.dev/v1beta1/instances",
                Some("labelSelector=x")
            ),
            "list"
        );
        assert_eq!(
            v(
                Method::GET,
                "/apis/kudo.dev/v1beta1/instances",
                Some("watch=true&resourceVersion=5")
            ),
            "watch"
        );
        assert_eq!(v(Method::GET, "/api/v1/namespaces/a/pods", None), "list");
        assert_eq!(v(Method::GET, "/api/v1/namespaces/a/pods/p/log", None), "get");
        assert_eq!(v(Method::GET, "/api/v1/namespaces", None), "list");
        assert_eq!(v(Method::GET, "/api/v1/namespaces/a", None), "get");
        assert_eq!(v(Method::GET, "/api/v1/namespaces/a/status", None), "get");
        assert_eq!(v(Method::GET, "/api/v1/nodes/n", None), "get");
        assert_eq!(v(Method::GET, "/apis/apps/v1", None), "get");
        assert_eq!(v(Method::GET, "/version", None), "get");
        assert_eq!(
            v(Method::PATCH, "/apis/apps/v1/namespaces/a/deployments/d", None),
            "patch"
        );
        assert_eq!(v(Method::POST, "/api/v1/namespaces/a/configmaps", None), "create");
        assert_eq!(
            v(Method::PUT, "/api/v1/namespaces/a/configmaps/c", None),
            "update"
        );
        assert_eq!(
            v(Method::DELETE, "/api/v1/namespaces/a/configmaps", None),
            "delete"
        );
    }

    #[test]
    fn encodes_prefixed_metrics_and_counts_reconciles() {
        let m = Metrics::new();
        m.reconcile_started().finish(true);
        drop(m.reconcile_started());
        m.task_outcome(&TaskOutcome::Fatal {
            reason: "ResourceApplyError".into(),
            message: "x".into(),
        });
        m.task_outcome(&TaskOutcome::Done);
        m.set_leader(true);
        let text = m.encode();
        assert!(
            text.contains("kudo_reconciles_total{result=\"success\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("kudo_reconciles_total{result=\"error\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("kudo_reconciles_in_flight 0\n"), "{text}");
        assert!(
            text.contains("kudo_task_errors_total{reason=\"ResourceApplyError\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("kudo_leader 1\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
