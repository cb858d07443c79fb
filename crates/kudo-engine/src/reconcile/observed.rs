//! What the initiators of one reconcile decide from ([`Observed`]), what they ask the manager to
//! read ([`Observation`]), and what they decide ([`Admitting`]).

use std::collections::BTreeMap;
use std::time::Duration;

use kudo_api::{Instance, OperatorVersion, ScheduleStatus};

use super::admitted::Admitted;
use super::effect::Effect;
use crate::autopilot::Evaluation;
use crate::initiate::Initiation;
use crate::rotation::Fingerprints;
use crate::time::Timestamp;

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
    /// The manager's clock at this reconcile.
    pub now: Timestamp,
    /// The autopilot rules' evaluation; filled for initiators that need
    /// [`Observation::Autopilot`].
    pub autopilot: Autopilot,
    /// The sensitive parameters of the spec this reconcile executes; filled for initiators that
    /// need [`Observation::Sensitive`].
    pub sensitive: Sensitive,
}

impl<'a> Observed<'a> {
    /// What the manager read before any initiator asked for more.
    pub fn new(
        inst: &'a Instance,
        ov: &'a OperatorVersion,
        admitted_ov: Option<&'a OperatorVersion>,
        deleting: bool,
        now: Timestamp,
    ) -> Self {
        Observed {
            inst,
            ov,
            admitted_ov,
            deleting,
            now,
            autopilot: Autopilot::NotRead,
            sensitive: Sensitive::NotRead,
        }
    }

    /// Whether `o` was read already.
    pub(super) fn has(&self, o: &Observation) -> bool {
        match o {
            Observation::Sensitive => self.sensitive != Sensitive::NotRead,
            Observation::Autopilot(_) => self.autopilot != Autopilot::NotRead,
        }
    }
}

/// The autopilot rules of the Instance as this reconcile evaluated them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Autopilot {
    /// Not read (no initiator needed it yet).
    #[default]
    NotRead,
    /// No rule was evaluated ([`AutopilotRead::None`]).
    NotEvaluated,
    /// The evaluation of every rule (the manager read the objects they look at).
    Evaluated(Evaluation),
}

/// What the manager read for one [`Observation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provided {
    /// The state of the sensitive parameters ([`Observation::Sensitive`]).
    Sensitive(Sensitive),
    /// The autopilot rules' evaluation ([`Observation::Autopilot`]).
    Autopilot(Autopilot),
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
        /// Fingerprint of each sensitive parameter's current value, by parameter name.
        fingerprints: Fingerprints,
        /// Whether the fingerprint key was created in this reconcile.
        fresh_key: bool,
    },
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
    /// Effects, in order, executed at once (before the admission is stored).
    pub effects: Vec<Effect>,
    /// Effects, in order, executed once the admission is stored: what this admission means for the
    /// status (`ChangeAccepted`, schedules, autopilot rule states), the Events that report a run it
    /// started, and when to look again.
    pub stored: Vec<Effect>,
}

/// One thing an initiator needs read before it decides ([`super::Initiator::needs`]). The manager
/// reads every one an [`super::Initiating`] asks for in one `observe` and hands each back with
/// [`super::Initiating::provide`]; a new kind of reading is a new variant here, its field in
/// [`Observed`] and its branch in the manager's `observe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    /// The sensitive parameters of the spec admitted so far ([`Observed::sensitive`]).
    Sensitive,
    /// The autopilot rules evaluated over the objects they look at ([`Observed::autopilot`]).
    Autopilot(AutopilotRead),
}

/// What the manager reads for [`Observation::Autopilot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutopilotRead {
    /// No rule is evaluated (the OperatorVersion has none, or the Instance is being deleted): no
    /// object is read or watched for the Instance any more.
    None,
    /// Every rule, reading (and watching) the objects they name. `waiting`: a plan is scheduled
    /// or running, or a change of the spec is not admitted yet; rules then wait (their windows
    /// keep counting, nothing fires).
    Rules {
        /// Whether rules must wait (a plan is scheduled or running, or a change is unadmitted).
        waiting: bool,
    },
}

/// What an initiator needs read before it decides: none, one or several [`Observation`]s.
pub type Needs = Vec<Observation>;
