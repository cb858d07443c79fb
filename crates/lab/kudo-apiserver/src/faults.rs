//! Fault injection: make the embedded server misbehave the way a loaded or flaky kube-apiserver
//! does, so controllers and the simulator can be tested against errors they must survive.
//!
//! Everything is off by default. Faults are set through [`Faults`] (see
//! [`crate::RunningServer::faults`]), or over HTTP on the server's own listener at
//! `/kudo-admin/faults` (a path Kubernetes never uses): `GET` returns `{"config": …, "counters": …}`,
//! `PUT` with a [`FaultConfig`] JSON body replaces the configuration (and restarts the random
//! sequence), `DELETE` switches everything off and resets the counters. Admin requests are never
//! faulted.
//!
//! # What is faulted
//! Only resource requests (`/api/v1/…` and `/apis/GROUP/VERSION/…` naming a resource). Exempt:
//! `/version`, `/healthz`, `/readyz`, `/livez`, discovery (`/api`, `/apis`, `/apis/GROUP`,
//! `/api/v1`, `/apis/GROUP/VERSION`), OpenAPI (`/openapi/v3…`) and `/kudo-admin/…`.
//! Each resource request has one Kubernetes verb: `get` (GET of a named object or of its
//! `status`/`scale`), `list`, `watch`, `create` (POST, including `pods/NAME/binding`), `update`
//! (PUT), `patch`, `delete` (DELETE of one object), `deletecollection`.
//!
//! # The knobs, in the order they apply to a request
//! 1. **Latency**: the request waits `latency` ± a uniformly drawn `jitter` (never below zero)
//!    before anything else happens. A watch waits before its stream starts.
//! 2. **Error rules** ([`ErrorRule`]): rules whose verb matches are tried in order; the first
//!    that fires (probability `rate`) answers the request with a `Status` body *without
//!    executing it*: 500 `InternalError`; 429 `TooManyRequests` with a `Retry-After: 1` header
//!    and `details.retryAfterSeconds: 1` (client-go and kubectl retry these by themselves);
//!    409 `Conflict` worded exactly as a real resourceVersion conflict
//!    (`Operation cannot be fulfilled on … the object has been modified; …`).
//! 3. **Lost writes** (`lostWriteRate`): a write (create, update, patch, delete,
//!    deletecollection) that no error rule failed is drawn with probability `lostWriteRate`. If
//!    drawn, it is executed normally; if it then *succeeded* (stored, or for a dry run
//!    validated), its acknowledgement is replaced by a 500 `InternalError` whose message says the
//!    write may have been applied. The client cannot tell that from a failure, which is what
//!    exercises idempotency: a retried create meets `AlreadyExists`, a retried update with the
//!    old resourceVersion meets a conflict, a retried delete meets `NotFound`. A write that
//!    failed on its own (validation, conflict, …) returns its own error and is not counted.
//! 4. **Watch cuts** (`watchCutMs`): every watch ends its stream cleanly (last chunk, no error
//!    event) once it has streamed that long, as kube-apiserver does when a watch's timeout
//!    expires; clients must watch again from the last resourceVersion they saw. A shorter
//!    `timeoutSeconds` asked by the client still wins (and is not counted as a cut). Setting or
//!    changing the cut applies to open watches too (measured from their start, so a watch older
//!    than the new cut ends at once).
//!
//! 5. **Stale replays** (`staleReplayRate`): after a MODIFIED event a watch may send the object's
//!    previous state again, as another MODIFIED carrying that state's older resourceVersion, the
//!    way Sieve (OSDI '22) shows a controller a view that went back in time. A client's cache
//!    then holds an older copy than the server until the next event of that object; a
//!    controller must not act on it as if the cluster had changed back. `staleReplayAgent` aims
//!    them at one client (by its User-Agent).
//!
//! # Determinism
//! Random draws come from one generator (SplitMix64) seeded with `seed` when given (a clock
//! otherwise). Each request draws in a fixed order — jitter (when non-zero), each matching error
//! rule with a non-zero rate, then the lost-write draw — so the same seed and the same sequence
//! of requests give the same faults. Setting a configuration restarts the sequence.
//!
//! # Counters
//! [`FaultCounters`] counts every injected fault by kind since the start or the last `DELETE`
//! ([`Faults::clear`]).

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::{ApiError, qualified};

/// The path of the admin endpoint on the server's listener.
pub const ADMIN_PATH: &str = "/kudo-admin/faults";

/// The Kubernetes verb of a resource request, as RBAC and audit logs name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// GET of one object (or of its `status`/`scale`).
    Get,
    /// GET of a collection.
    List,
    /// GET with `watch`.
    Watch,
    /// POST (including subresources such as `binding`).
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl Verb {
    /// Every verb, in the order used by help texts.
    pub const ALL: [Verb; 8] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
    ];

    /// The lowercase name (`deletecollection` for [`Verb::DeleteCollection`]).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    /// Whether the verb changes stored state (and so can be a lost write).
    pub fn is_write(self) -> bool {
        !matches!(self, Verb::Get | Verb::List | Verb::Watch)
    }

    /// The verb of a request from its method and shape.
    pub(crate) fn of(method: &http::Method, named: bool, watch: bool) -> Option<Verb> {
        use http::Method;
        Some(match *method {
            Method::GET if watch => Verb::Watch,
            Method::GET if named => Verb::Get,
            Method::GET => Verb::List,
            Method::POST => Verb::Create,
            Method::PUT => Verb::Update,
            Method::PATCH => Verb::Patch,
            Method::DELETE if named => Verb::Delete,
            Method::DELETE => Verb::DeleteCollection,
            _ => return None,
        })
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which verbs an [`ErrorRule`] applies to: one, or all (`*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum VerbFilter {
    /// Every verb.
    Any,
    /// One verb.
    Only(Verb),
}

impl VerbFilter {
    /// Whether `verb` is selected.
    pub fn matches(self, verb: Verb) -> bool {
        match self {
            VerbFilter::Any => true,
            VerbFilter::Only(v) => v == verb,
        }
    }
}

impl FromStr for VerbFilter {
    type Err = FaultError;
    fn from_str(s: &str) -> Result<Self, FaultError> {
        let s = s.trim();
        if s == "*" {
            return Ok(VerbFilter::Any);
        }
        Verb::ALL
            .iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(s))
            .map(|v| VerbFilter::Only(*v))
            .ok_or_else(|| FaultError::Verb(s.to_string()))
    }
}

impl TryFrom<String> for VerbFilter {
    type Error = FaultError;
    fn try_from(s: String) -> Result<Self, FaultError> {
        s.parse()
    }
}

impl From<VerbFilter> for String {
    fn from(v: VerbFilter) -> String {
        v.to_string()
    }
}

impl fmt::Display for VerbFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerbFilter::Any => f.write_str("*"),
            VerbFilter::Only(v) => f.write_str(v.as_str()),
        }
    }
}

/// One error rule: answer requests of `verb` with `status` with probability `rate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorRule {
    /// The verbs the rule applies to.
    pub verb: VerbFilter,
    /// 500, 429 or 409.
    pub status: u16,
    /// Probability in `0.0..=1.0`.
    pub rate: f64,
}

/// Parses `VERB:STATUS:RATE`, e.g. `get:500:0.05` or `*:429:1`.
impl FromStr for ErrorRule {
    type Err = FaultError;
    fn from_str(s: &str) -> Result<Self, FaultError> {
        let parts: Vec<&str> = s.split(':').collect();
        let [verb, status, rate] = parts.as_slice() else {
            return Err(FaultError::RuleSyntax(s.to_string()));
        };
        let rule = ErrorRule {
            verb: verb.parse()?,
            status: status
                .trim()
                .parse()
                .map_err(|_| FaultError::Status(status.trim().to_string()))?,
            rate: rate
                .trim()
                .parse()
                .map_err(|_| FaultError::Rate(rate.trim().to_string()))?,
        };
        rule.validate()?;
        Ok(rule)
    }
}

impl ErrorRule {
    fn validate(&self) -> Result<(), FaultError> {
        if ![500, 429, 409].contains(&self.status) {
            return Err(FaultError::Status(self.status.to_string()));
        }
        check_rate(self.rate)
    }
}

fn check_rate(rate: f64) -> Result<(), FaultError> {
    if (0.0..=1.0).contains(&rate) {
        Ok(())
    } else {
        Err(FaultError::Rate(rate.to_string()))
    }
}

/// The whole fault configuration; the default injects nothing. As JSON (admin endpoint):
/// `{"errors": [{"verb": "get", "status": 500, "rate": 0.05}], "latencyMs": 50, "jitterMs": 20,
/// "watchCutMs": 2000, "lostWriteRate": 0.01, "seed": 42}` (every field optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultConfig {
    /// Error rules, tried in order.
    #[serde(default)]
    pub errors: Vec<ErrorRule>,
    /// Fixed delay before every faultable request.
    #[serde(default, rename = "latencyMs", with = "millis")]
    pub latency: Duration,
    /// Uniform jitter around `latency` (`latency ± jitter`, never below zero).
    #[serde(default, rename = "jitterMs", with = "millis")]
    pub jitter: Duration,
    /// End every watch stream after this long.
    #[serde(
        default,
        rename = "watchCutMs",
        with = "opt_millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub watch_cut: Option<Duration>,
    /// Probability that a successful write's acknowledgement is replaced by a 500.
    #[serde(default)]
    pub lost_write_rate: f64,
    /// Probability that a watch, right after a MODIFIED event, sends the object's previous state
    /// again as another MODIFIED (with its older resourceVersion): a view going back in time.
    #[serde(default)]
    pub stale_replay_rate: f64,
    /// Only watches of this client get stale replays: the product of its User-Agent (before
    /// the `/`), e.g. `kudo-manager`; `None`: every watch. A stale view aimed at the controller
    /// under test, not at the simulated cluster components beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_replay_agent: Option<String>,
    /// Seed of the random draws; `None` seeds from the clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl FaultConfig {
    /// Whether any fault can happen with this configuration.
    pub fn is_active(&self) -> bool {
        self.errors.iter().any(|r| r.rate > 0.0)
            || !self.latency.is_zero()
            || !self.jitter.is_zero()
            || self.watch_cut.is_some()
            || self.lost_write_rate > 0.0
            || self.stale_replay_rate > 0.0
    }

    /// Rejects statuses other than 500/429/409, rates outside `0..=1` and a zero watch cut.
    pub fn validate(&self) -> Result<(), FaultError> {
        for r in &self.errors {
            r.validate()?;
        }
        check_rate(self.lost_write_rate)?;
        check_rate(self.stale_replay_rate)?;
        if self.watch_cut.is_some_and(|d| d.is_zero()) {
            return Err(FaultError::Duration(
                "0 (a watch cut must be longer than zero)".into(),
            ));
        }
        Ok(())
    }
}

impl fmt::Display for FaultConfig {
    /// One line for startup banners, e.g. `errors get:500:0.05; latency 50ms±20ms; watch cut 2s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.errors.is_empty() {
            let rules: Vec<String> = self
                .errors
                .iter()
                .map(|r| format!("{}:{}:{}", r.verb, r.status, r.rate))
                .collect();
            parts.push(format!("errors {}", rules.join(",")));
        }
        if !self.latency.is_zero() || !self.jitter.is_zero() {
            let mut l = format!("latency {:?}", self.latency);
            if !self.jitter.is_zero() {
                l.push_str(&format!("±{:?}", self.jitter));
            }
            parts.push(l);
        }
        if let Some(c) = self.watch_cut {
            parts.push(format!("watch cut every {c:?}"));
        }
        if self.lost_write_rate > 0.0 {
            parts.push(format!("lost-write rate {}", self.lost_write_rate));
        }
        if self.stale_replay_rate > 0.0 {
            parts.push(format!("stale-replay rate {}", self.stale_replay_rate));
        }
        if let Some(s) = self.seed {
            parts.push(format!("seed {s}"));
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

/// How many faults of each kind were injected.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultCounters {
    /// Requests answered 500 by an error rule.
    pub internal_errors: u64,
    /// Requests answered 429 by an error rule.
    pub too_many_requests: u64,
    /// Requests answered 409 by an error rule.
    pub conflicts: u64,
    /// Requests delayed by latency (a non-zero wait).
    pub delayed_requests: u64,
    /// Watch streams ended by the watch cut.
    pub watch_cuts: u64,
    /// Writes executed whose acknowledgement was replaced by a 500.
    pub lost_writes: u64,
    /// Previous states sent again after a MODIFIED watch event.
    pub stale_replays: u64,
}

/// Bad fault settings (CLI values or admin JSON).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultError {
    /// Not `VERB:STATUS:RATE`.
    #[error("invalid error rule {0:?}: expected VERB:STATUS:RATE, e.g. get:500:0.05")]
    RuleSyntax(String),
    /// Unknown verb.
    #[error(
        "unknown verb {0:?}: expected one of get, list, watch, create, update, patch, delete, deletecollection or *"
    )]
    Verb(String),
    /// Unsupported status.
    #[error("unsupported status {0}: expected 500, 429 or 409")]
    Status(String),
    /// Rate outside `0..=1`.
    #[error("invalid rate {0}: expected a number from 0.0 to 1.0")]
    Rate(String),
    /// Unparsable duration.
    #[error("invalid duration {0}: expected a number with a unit, e.g. 50ms, 1.5s, 2m")]
    Duration(String),
}

/// A latency or jitter: a Go duration ([`kudo_api::duration::parse`]: `50ms`, `1.5s`, `2m`, a
/// unit required except for `0`), surrounding whitespace ignored, not negative (a delay cannot
/// be).
pub fn parse_duration(s: &str) -> Result<Duration, FaultError> {
    let bad = || FaultError::Duration(format!("{s:?}"));
    let nanos = kudo_api::duration::parse(s.trim()).map_err(|_| bad())?;
    u64::try_from(nanos).map(Duration::from_nanos).map_err(|_| bad())
}

/// Parses `50ms` or `50ms±20ms` (also `50ms+-20ms`) into (latency, jitter).
pub fn parse_latency(s: &str) -> Result<(Duration, Duration), FaultError> {
    let (fixed, jitter) = match s.split_once('±').or_else(|| s.split_once("+-")) {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let fixed = parse_duration(fixed)?;
    let jitter = match jitter {
        Some(j) => parse_duration(j)?,
        None => Duration::ZERO,
    };
    Ok((fixed, jitter))
}

/// Durations as whole milliseconds in JSON.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

/// Optional durations as whole milliseconds in JSON.
mod opt_millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

/// SplitMix64: tiny, fast and good enough for fault draws; reproducible from a seed.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn seeded(seed: Option<u64>) -> Rng {
        Rng(seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x9e37_79b9_7f4a_7c15)
        }))
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn fires(&mut self, rate: f64) -> bool {
        rate > 0.0 && self.unit() < rate
    }
}

#[derive(Debug)]
struct State {
    config: FaultConfig,
    rng: Rng,
    counters: FaultCounters,
}

#[derive(Debug)]
struct Inner {
    /// Fast path: false while nothing can be injected, so requests skip the lock.
    active: AtomicBool,
    state: Mutex<State>,
    /// The current watch cut, observed by open watches so a change applies to them at once.
    watch_cut: tokio::sync::watch::Sender<Option<Duration>>,
}

/// The live fault settings of one server, shared by its request handlers. Cloning shares them.
#[derive(Debug, Clone)]
pub struct Faults {
    inner: Arc<Inner>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            inner: Arc::new(Inner {
                active: AtomicBool::new(false),
                state: Mutex::new(State {
                    config: FaultConfig::default(),
                    rng: Rng::seeded(Some(0)),
                    counters: FaultCounters::default(),
                }),
                watch_cut: tokio::sync::watch::Sender::new(None),
            }),
        }
    }
}

/// What to do with one request, decided before it runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Decision {
    /// Wait this long first.
    pub delay: Duration,
    /// Answer with this status instead of executing.
    pub fail: Option<u16>,
    /// Execute, then replace a successful answer with a 500.
    pub lose_write: bool,
}

impl Decision {
    const NONE: Decision = Decision {
        delay: Duration::ZERO,
        fail: None,
        lose_write: false,
    };
}

impl Faults {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the configuration (validated first) and restarts the random sequence from its
    /// seed. Counters are kept.
    pub fn set(&self, config: FaultConfig) -> Result<(), FaultError> {
        config.validate()?;
        let mut st = self.lock();
        st.rng = Rng::seeded(config.seed);
        self.inner.active.store(config.is_active(), Ordering::SeqCst);
        self.inner.watch_cut.send_replace(config.watch_cut);
        st.config = config;
        Ok(())
    }

    /// Switches every fault off and resets the counters.
    pub fn clear(&self) {
        let mut st = self.lock();
        st.config = FaultConfig::default();
        st.counters = FaultCounters::default();
        self.inner.active.store(false, Ordering::SeqCst);
        self.inner.watch_cut.send_replace(None);
    }

    /// The current configuration.
    pub fn config(&self) -> FaultConfig {
        self.lock().config.clone()
    }

    /// Faults injected so far.
    pub fn counters(&self) -> FaultCounters {
        self.lock().counters.clone()
    }

    /// Whether any fault can currently be injected.
    pub fn is_active(&self) -> bool {
        self.inner.active.load(Ordering::SeqCst)
    }

    /// The admin endpoint's JSON view: `{"config": …, "counters": …}`.
    pub fn to_json(&self) -> serde_json::Value {
        let st = self.lock();
        json!({"config": st.config, "counters": st.counters})
    }

    /// Draws the faults of one request (see the module doc for the order of the draws).
    pub(crate) fn decide(&self, verb: Verb) -> Decision {
        if !self.is_active() {
            return Decision::NONE;
        }
        let mut st = self.lock();
        let st = &mut *st;
        let cfg = &st.config;
        let mut d = Decision::NONE;
        let mut delay = cfg.latency.as_secs_f64();
        if !cfg.jitter.is_zero() {
            let j = cfg.jitter.as_secs_f64();
            delay += (st.rng.unit() * 2.0 - 1.0) * j;
        }
        d.delay = Duration::try_from_secs_f64(delay.max(0.0)).unwrap_or(Duration::ZERO);
        if !d.delay.is_zero() {
            st.counters.delayed_requests += 1;
        }
        for r in cfg.errors.iter().filter(|r| r.verb.matches(verb)) {
            if st.rng.fires(r.rate) {
                d.fail = Some(r.status);
                match r.status {
                    500 => st.counters.internal_errors += 1,
                    429 => st.counters.too_many_requests += 1,
                    _ => st.counters.conflicts += 1,
                }
                return d;
            }
        }
        if verb.is_write() && st.rng.fires(cfg.lost_write_rate) {
            d.lose_write = true;
        }
        d
    }

    /// The watch cut, current and future values: a watch streams at most this long from its
    /// start, re-evaluated whenever the setting changes.
    pub(crate) fn watch_cut(&self) -> tokio::sync::watch::Receiver<Option<Duration>> {
        self.inner.watch_cut.subscribe()
    }

    pub(crate) fn count_watch_cut(&self) {
        self.lock().counters.watch_cuts += 1;
    }

    /// Whether the watch of client `agent` that just sent a MODIFIED event sends the object's
    /// previous state after it (drawn with `staleReplayRate`, counted when drawn).
    pub(crate) fn stale_replay(&self, agent: &str) -> bool {
        if !self.is_active() {
            return false;
        }
        let mut st = self.lock();
        let st = &mut *st;
        if st
            .config
            .stale_replay_agent
            .as_deref()
            .is_some_and(|a| a != agent)
        {
            return false;
        }
        let fires = st.rng.fires(st.config.stale_replay_rate);
        if fires {
            st.counters.stale_replays += 1;
        }
        fires
    }

    pub(crate) fn count_lost_write(&self) {
        self.lock().counters.lost_writes += 1;
    }
}

/// The `Status` an error rule answers with. `name` may be empty (lists, creates without a name).
pub(crate) fn injected_error(status: u16, verb: Verb, group: &str, resource: &str, name: &str) -> ApiError {
    let what = if name.is_empty() {
        qualified(group, resource)
    } else {
        format!("{} \"{name}\"", qualified(group, resource))
    };
    match status {
        429 => {
            let mut e = ApiError::too_many_requests("Too many requests, please try again later.");
            e.details = Some(Box::new(json!({"retryAfterSeconds": 1})));
            e
        }
        409 => ApiError::stale(group, resource, name),
        _ => ApiError::internal(format!("Internal error occurred: injected fault: {verb} {what}")),
    }
}

/// The 500 that replaces a lost write's acknowledgement.
pub(crate) fn lost_write_error(verb: Verb, group: &str, resource: &str) -> ApiError {
    ApiError::internal(format!(
        "Internal error occurred: injected fault: the {verb} of {} lost its acknowledgement (it may have been applied)",
        qualified(group, resource)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cli_values() {
        let r: ErrorRule = "get:500:0.05".parse().unwrap();
        assert_eq!(
            r,
            ErrorRule {
                verb: VerbFilter::Only(Verb::Get),
                status: 500,
                rate: 0.05
            }
        );
        let r: ErrorRule = "*:429:1".parse().unwrap();
        assert_eq!(r.verb, VerbFilter::Any);
        assert!(matches!(
            "get:404:1".parse::<ErrorRule>(),
            Err(FaultError::Status(_))
        ));
        assert!(matches!(
            "get:500:1.5".parse::<ErrorRule>(),
            Err(FaultError::Rate(_))
        ));
        assert!(matches!(
            "fetch:500:1".parse::<ErrorRule>(),
            Err(FaultError::Verb(_))
        ));
        assert!(matches!(
            "get:500".parse::<ErrorRule>(),
            Err(FaultError::RuleSyntax(_))
        ));
        assert_eq!(parse_duration("50ms").unwrap(), Duration::from_millis(50));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("50").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("-1s").is_err());
        assert_eq!(parse_duration(" 0 ").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(
            parse_latency("50ms±20ms").unwrap(),
            (Duration::from_millis(50), Duration::from_millis(20))
        );
        assert_eq!(
            parse_latency("1s+-5ms").unwrap(),
            (Duration::from_secs(1), Duration::from_millis(5))
        );
    }

    #[test]
    fn json_round_trip_and_validation() {
        let v = json!({"errors": [{"verb": "*", "status": 409, "rate": 0.5}], "latencyMs": 5,
            "watchCutMs": 1000, "lostWriteRate": 0.1, "staleReplayRate": 0.2, "seed": 3});
        let c: FaultConfig = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(c.watch_cut, Some(Duration::from_secs(1)));
        let mut back = serde_json::to_value(&c).unwrap();
        back.as_object_mut().unwrap().remove("jitterMs");
        assert_eq!(back, v);
        let bad: FaultConfig =
            serde_json::from_value(json!({"errors": [{"verb": "get", "status": 503, "rate": 1}]})).unwrap();
        assert!(Faults::default().set(bad).is_err());
        assert!(serde_json::from_value::<FaultConfig>(json!({"latency": 5})).is_err());
    }

    #[test]
    fn seeded_draws_repeat() {
        let f = Faults::default();
        let cfg = FaultConfig {
            errors: vec!["get:500:0.5".parse().unwrap()],
            seed: Some(9),
            ..Default::default()
        };
        let run = |f: &Faults| -> Vec<bool> { (0..64).map(|_| f.decide(Verb::Get).fail.is_some()).collect() };
        f.set(cfg.clone()).unwrap();
        let a = run(&f);
        f.set(cfg).unwrap();
        assert_eq!(a, run(&f));
        let fails = a.iter().filter(|x| **x).count();
        assert!(fails > 0 && fails < 64, "{fails} of 64");
        assert_eq!(f.counters().internal_errors, 2 * fails as u64);
        assert_eq!(f.decide(Verb::List), Decision::NONE);
        f.clear();
        assert!(!f.is_active());
        assert_eq!(f.counters(), FaultCounters::default());
    }
}
