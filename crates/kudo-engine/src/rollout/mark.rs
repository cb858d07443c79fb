//! The mark a rollout leaves on each Instance it changes: how the rollout knows, from the Instance
//! alone, that it changed it (so a restarted or another manager never changes it twice) and which
//! plan run is its own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Written by the rollout with its change of the Instance (`{"name":…,"uid":…,"at":…}`); the
/// manager adds `run`, the uid of the run it admitted for that change.
pub const ROLLOUT_ANNOTATION: &str = "kudo-rs.dev/rollout";

/// The value of [`ROLLOUT_ANNOTATION`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutMark {
    /// The Rollout's name and uid (a Rollout deleted and created again is another one).
    pub name: String,
    /// The Rollout's uid: the mark is the rollout's own only while this matches.
    pub uid: String,
    /// When the change was written (RFC 3339): the progress deadline counts from here.
    pub at: String,
    /// The run the manager admitted for the change; absent until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

impl RolloutMark {
    /// The mark on an Instance with these annotations, if it has a readable one.
    pub fn of(annotations: &BTreeMap<String, String>) -> Option<RolloutMark> {
        serde_json::from_str(annotations.get(ROLLOUT_ANNOTATION)?).ok()
    }

    /// The mark of a change not admitted yet: the next run the manager admits is the rollout's.
    pub fn pending(annotations: &BTreeMap<String, String>) -> Option<RolloutMark> {
        RolloutMark::of(annotations).filter(|m| m.run.is_none())
    }

    /// The mark as the annotation's JSON value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_round_trips_and_is_pending_until_stamped() {
        let m = RolloutMark {
            name: "r".into(),
            uid: "u".into(),
            at: "2026-01-01T00:00:00Z".into(),
            run: None,
        };
        let mut a = BTreeMap::from([(ROLLOUT_ANNOTATION.to_string(), m.to_annotation())]);
        assert_eq!(RolloutMark::of(&a), Some(m.clone()));
        assert_eq!(RolloutMark::pending(&a), Some(m.clone()));
        let stamped = RolloutMark {
            run: Some("p".into()),
            ..m
        };
        a.insert(ROLLOUT_ANNOTATION.into(), stamped.to_annotation());
        assert_eq!(RolloutMark::pending(&a), None);
        assert_eq!(RolloutMark::of(&a), Some(stamped));
        a.insert(ROLLOUT_ANNOTATION.into(), "garbage".into());
        assert_eq!(RolloutMark::of(&a), None);
    }
}
