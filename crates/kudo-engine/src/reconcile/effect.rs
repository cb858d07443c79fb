//! What a reconcile's decisions ask the manager to do besides storing the admission
//! ([`Effect`]), and how the requeues they ask for fold into one ([`Requeue`]).

use std::collections::BTreeMap;
use std::time::Duration;

use kudo_api::{AutopilotRuleStatus, InstanceStatus, ScheduleStatus};

use crate::pass::EventType;
use crate::readiness::{CHANGE_DENIED, record_admission};
use crate::time::Timestamp;

/// What the manager does, besides storing the admission, in the order the decisions produced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Publish an Event on the Instance. `action` separates Event series (the recorder merges
    /// Events of one reason and action, keeping the first note).
    Event {
        /// Normal or Warning.
        type_: EventType,
        /// The Event's reason, e.g. `PlanStarted`.
        reason: String,
        /// The Event's action; Events of one reason and action form a series.
        action: String,
        /// The Event's note.
        message: String,
        /// `Some(key)`: an occurrence that happens once per key (a run's start or end), published
        /// at most once per key instead of counted into a series. A pass publishes its Events
        /// before its status write, so a pass repeated after a kill or a refused write announces
        /// the same start again; the key makes the second announcement a no-op.
        once: Option<String>,
    },
    /// A log line of the reconcile (decisions are logged where they are executed).
    Log {
        /// How severe the line is.
        level: LogLevel,
        /// The log line.
        message: String,
    },
    /// A change of the Instance's status, written with this reconcile's status write.
    Status(StatusChange),
    /// Look at the Instance again within this long even without a watch event.
    Requeue(Duration),
}

/// Level of an [`Effect::Log`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Detail for debugging the manager's decisions.
    Debug,
    /// A decision or action worth knowing in normal operation.
    Info,
    /// Something wrong that the reconcile carries on past.
    Warn,
}

/// A change of the Instance's status a decision asks for ([`Effect::Status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusChange {
    /// `status.schedules`: every scheduled plan's last and next occurrence.
    Schedules(BTreeMap<String, ScheduleStatus>),
    /// `status.autopilot`: every rule's state (empty: the rules went, e.g. with an upgrade).
    Autopilot(BTreeMap<String, AutopilotRuleStatus>),
    /// The `ChangeAccepted` condition of this reconcile's admission: `False` with a denial's
    /// message, removed when the change was admitted.
    Admission {
        /// The refused change's message; `None`: the change was admitted.
        denial: Option<String>,
    },
}

impl StatusChange {
    /// Applies the change to `status`; a condition says it observed `generation` (the one the
    /// admission write left) and changed at `now`.
    pub fn apply(&self, status: &mut InstanceStatus, generation: Option<i64>, now: Timestamp) {
        match self {
            StatusChange::Schedules(s) => status.schedules = s.clone(),
            StatusChange::Autopilot(a) => status.autopilot = a.clone(),
            StatusChange::Admission { denial } => {
                record_admission(&mut status.conditions, denial.as_deref(), generation, now)
            }
        }
    }
}

impl Effect {
    /// An [`Effect::Event`].
    pub fn event(type_: EventType, reason: &str, action: &str, message: &str) -> Effect {
        Effect::Event {
            type_,
            reason: reason.to_string(),
            action: action.to_string(),
            message: message.to_string(),
            once: None,
        }
    }

    /// An [`Effect::Event`] published at most once per `key` (see its `once`).
    pub fn event_once(type_: EventType, reason: &str, action: &str, message: &str, key: String) -> Effect {
        Effect::Event {
            type_,
            reason: reason.to_string(),
            action: action.to_string(),
            message: message.to_string(),
            once: Some(key),
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

/// The effects of this reconcile's admission outcome: its `ChangeAccepted` condition and, for a
/// denial, a warning and an Event (repeated at every reconcile while the change stays denied, as
/// KUDO's webhook answered every such request).
pub(super) fn admission_effects(denial: Option<&str>) -> Vec<Effect> {
    let mut out = vec![Effect::Status(StatusChange::Admission {
        denial: denial.map(str::to_string),
    })];
    if let Some(msg) = denial {
        out.push(Effect::log(
            LogLevel::Warn,
            format!("spec change not admitted: {msg}"),
        ));
        out.push(Effect::event(EventType::Warning, CHANGE_DENIED, "Admission", msg));
    }
    out
}

/// When a reconcile looks at the Instance again without a watch event: the soonest of what its
/// decisions asked for.
///
/// ```
/// # use std::time::Duration;
/// let mut r = kudo_engine::reconcile::Requeue::default();
/// r.within(Some(Duration::from_secs(60)));
/// r.within(None);
/// r.within(Some(Duration::from_secs(5)));
/// assert_eq!(r.or(Duration::from_secs(300)), Duration::from_secs(5));
/// let nothing = kudo_engine::reconcile::Requeue::default();
/// assert_eq!(nothing.or(Duration::from_secs(300)), Duration::from_secs(300));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requeue(Option<Duration>);

impl Requeue {
    /// Asks for another look within `d` (`None`: nothing asked).
    pub fn within(&mut self, d: Option<Duration>) {
        if let Some(d) = d {
            self.0 = Some(self.0.map_or(d, |r| r.min(d)));
        }
    }

    /// The delay asked for, or `default` when nothing asked for a shorter one.
    pub fn or(self, default: Duration) -> Duration {
        self.0.map_or(default, |r| r.min(default))
    }
}
