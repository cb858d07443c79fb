//! The decisions of one reconcile of an Instance, kept pure (observe → decide → effect).
//!
//! The manager reads what it needs ([`Observed`]), runs every [`Initiator`] of
//! [`initiators::INITIATORS`] in order over it, and then executes what they decided: the spec
//! and annotations to store and to execute ([`Admitted`]), and [`Effect`]s (Events, log lines),
//! in the order they were produced. No initiator performs IO; an initiator that needs something
//! read first says so ([`Initiator::needs`]) and the manager reads it before calling it (lazily,
//! so a reconcile reads nothing no decision needs — the request budget per Instance counts).
//!
//! Run ids: the engine draws no random numbers; the caller hands a generator of fresh run uids.

mod admitted;
mod drift;
pub mod initiators;
mod patch;
mod settle;
mod start;

use std::collections::BTreeMap;
use std::time::Duration;

use kudo_api::{Instance, InstanceSpec, OperatorVersion, ScheduleStatus};

use crate::initiate::Initiation;
use crate::pass::EventType;
use crate::rotation::Fingerprints;
use crate::time::Timestamp;

pub use admitted::{Admitted, started_by_user};
pub use drift::{DRIFT_DETECTED, DRIFTED, DriftFound, drift_condition};
pub use initiators::{INITIATORS, Initiator, Needs};
pub use patch::{
    Stored, autopilot_patch, bumps_generation, cancel_patch, spec_patch, spec_patch_along, status_patch,
    trigger_patch,
};
pub use settle::{
    CLUSTER_OBJECTS_ANNOTATION, CLUSTER_OBJECTS_FINALIZER, ClusterObject, Settle, Settled, settle,
    stored_cluster_objects,
};
pub use start::{Starting, start_unwritten};

/// Annotation holding the Instance spec the manager last admitted (JSON). It replaces the
/// "old object" an admission webhook would have seen.
pub const ADMITTED_SPEC_ANNOTATION: &str = "kudo-rs.dev/admitted-spec";

/// Annotation written by `kubectl kudo plan retry` together with its plan trigger:
/// `"<plan>/<uid of the failed run>"` ([`crate::retry::annotation_value`]). The run the trigger
/// starts keeps the COMPLETE steps of exactly that failed run.
pub const RETRY_ANNOTATION: &str = "kudo-rs.dev/retry";

/// Instance annotation holding the fingerprints of the sourced values last acted on (JSON map,
/// see [`crate::rotation::Fingerprints`]).
pub const FINGERPRINTS_ANNOTATION: &str = "kudo-rs.dev/parameter-fingerprints";

/// The last spec the manager admitted (annotation [`ADMITTED_SPEC_ANNOTATION`]); `None` before the
/// first admission or when the annotation does not decode. The manager's admission and the CLI's
/// pre-check of a change both start from it.
pub fn admitted_spec(inst: &Instance) -> Option<InstanceSpec> {
    inst.metadata
        .annotations
        .get(ADMITTED_SPEC_ANNOTATION)
        .and_then(|s| serde_json::from_str(s).ok())
}

/// Everything the initiators of one reconcile decide from.
#[derive(Debug, Clone)]
pub struct Observed<'a> {
    /// The Instance as stored.
    pub inst: &'a Instance,
    /// The OperatorVersion `inst.spec` names.
    pub ov: &'a OperatorVersion,
    /// The OperatorVersion of the last admitted spec when it names another one (an upgrade);
    /// `None` when it is `ov`, or was not found (then `ov` stands in, as KUDO's webhook did).
    pub admitted_ov: Option<&'a OperatorVersion>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    pub now: Timestamp,
    /// The autopilot rule that fired in this reconcile's evaluation (the manager evaluates the
    /// rules: it reads the objects they look at).
    pub autopilot_fire: Option<&'a Initiation>,
    /// The sensitive parameters of the spec this reconcile executes; filled for initiators with
    /// [`Needs::sensitive`].
    pub sensitive: Sensitive,
}

/// The state of the sensitive parameters (`spec.parameterSources`) of the executed spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Sensitive {
    /// Not read (no initiator needed it yet).
    #[default]
    NotRead,
    /// The executed spec has no parameter sources.
    NoSources,
    /// The values or the fingerprint key could not be read: rotation is not checked.
    Unknown,
    /// Fingerprints of the current values; `fresh_key`: the key was created just now, so
    /// recorded fingerprints (made with a lost key) mean nothing.
    Current {
        fingerprints: Fingerprints,
        fresh_key: bool,
    },
}

/// What the manager does, besides storing the admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Publish an Event on the Instance. `action` separates Event series (the recorder merges
    /// Events of one reason and action, keeping the first note).
    Event {
        type_: EventType,
        reason: String,
        action: String,
        message: String,
    },
    /// A log line of the reconcile (decisions are logged where they are executed).
    Log { level: LogLevel, message: String },
}

/// Level of an [`Effect::Log`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
}

impl Effect {
    /// An [`Effect::Event`].
    pub fn event(type_: EventType, reason: &str, action: &str, message: &str) -> Effect {
        Effect::Event {
            type_,
            reason: reason.to_string(),
            action: action.to_string(),
            message: message.to_string(),
        }
    }

    /// An [`Effect::Log`].
    pub fn log(level: LogLevel, message: impl Into<String>) -> Effect {
        Effect::Log {
            level,
            message: message.into(),
        }
    }
}

/// The outcome of the schedule check of one reconcile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scheduled {
    /// The new `status.schedules`.
    pub statuses: BTreeMap<String, ScheduleStatus>,
    /// When the next occurrence is due (the reconcile's requeue is shortened to it).
    pub wake: Option<Duration>,
}

impl Scheduled {
    /// Records a plan's occurrences in `status.schedules` and wakes the Instance for the next.
    pub fn record(&mut self, plan: &str, last: Option<Timestamp>, next: Option<Timestamp>, now: Timestamp) {
        self.statuses.insert(
            plan.to_string(),
            ScheduleStatus {
                last_schedule_time: last.map(|t| t.to_string()),
                next_schedule_time: next.map(|t| t.to_string()),
            },
        );
        if let Some(n) = next {
            self.wake_in(Duration::from_secs(n.seconds_since(now).max(1) as u64));
        }
    }

    /// Shortens the reconcile's requeue to `d`.
    pub fn wake_in(&mut self, d: Duration) {
        self.wake = Some(self.wake.map_or(d, |w| w.min(d)));
    }
}

/// What the initiators decided so far in one reconcile.
#[derive(Debug, Default)]
pub struct Admitting {
    /// The admission to persist; `None` until an initiator admitted something (the user-change
    /// initiator always does).
    pub admitted: Option<Admitted>,
    /// The autopilot firing admitted by this reconcile, if any.
    pub fired: Option<Initiation>,
    /// Why the autopilot firing was not admitted (becomes the rule's error).
    pub autopilot_denial: Option<String>,
    /// The schedule check (`None` while deleting).
    pub scheduled: Option<Scheduled>,
    /// Effects, in order.
    pub effects: Vec<Effect>,
}

/// Generator of fresh run uids, handed in by the caller (the engine draws no random numbers).
pub type Uids<'u> = &'u mut (dyn FnMut() -> String + Send);

/// The initiators of one reconcile as a pull-based state machine (like [`crate::PlanPass`]): the
/// manager calls [`Self::advance`] until it returns `None`, reading what an initiator needs in
/// between ([`Self::provide`]), then takes the result with [`Self::finish`].
pub struct Initiating<'a> {
    obs: Observed<'a>,
    adm: Admitting,
    next: usize,
}

impl<'a> Initiating<'a> {
    pub fn new(obs: Observed<'a>) -> Self {
        Initiating {
            obs,
            adm: Admitting::default(),
            next: 0,
        }
    }

    /// Runs initiators in order until one needs something not read yet (returned; provide it
    /// and call again) or all ran (`None`).
    pub fn advance(&mut self, uids: Uids<'_>) -> Option<Needs> {
        while let Some(init) = INITIATORS.get(self.next) {
            let needs = init.needs(&self.obs);
            if needs.sensitive && self.obs.sensitive == Sensitive::NotRead {
                return Some(needs);
            }
            init.initiate(&self.obs, &mut self.adm, uids);
            self.next += 1;
        }
        None
    }

    /// The spec admitted so far: what [`Needs::sensitive`] asks about.
    pub fn exec(&self) -> Option<&InstanceSpec> {
        self.adm.admitted.as_ref().and_then(|a| a.exec.as_ref())
    }

    /// What the manager read for the last [`Needs`].
    pub fn provide(&mut self, sensitive: Sensitive) {
        self.obs.sensitive = sensitive;
    }

    pub fn finish(self) -> Admitting {
        self.adm
    }
}

/// Drives [`Initiating`] to the end with a synchronous `observe` (tests; the manager's reads are
/// async and drive it themselves).
pub fn initiate_all(
    obs: Observed<'_>,
    mut observe: impl FnMut(Option<&InstanceSpec>) -> Sensitive,
    uids: Uids<'_>,
) -> Admitting {
    let mut run = Initiating::new(obs);
    while run.advance(uids).is_some() {
        let s = observe(run.exec());
        run.provide(s);
    }
    run.finish()
}
