//! Plan timing between reconciles, in memory.
//!
//! The pass measures timeouts, the waiting grace and the plan duration from start times
//! ([`kudo_engine::Timing`]). They are stored in the Instance's timing annotation only when the
//! run's plan has a timeout, or along with another spec or metadata write
//! ([`kudo_engine::reconcile::Settled::lazy`]); in between, the manager keeps the newest here and
//! the next pass reads it instead of the annotation. A restarted manager (or another replica)
//! starts from the annotation, which holds at least the plan start (written with the admission):
//! step clocks restart then, which only makes a waiting line or the step's duration later.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use kudo_engine::{TIMING_ANNOTATION, Timing};

/// Instances whose timing is kept (beyond that, the annotation is what the pass reads).
const CAP: usize = 200_000;

/// `(namespace, name)` → the timing annotation value the last pass produced.
#[derive(Default)]
pub(crate) struct Timings {
    kept: Mutex<HashMap<(String, String), String>>,
}

impl Timings {
    /// Puts the kept timing of run `uid` into `annotations` (the pass's view of the Instance)
    /// when it is newer than what the Instance stores, i.e. when it belongs to that run.
    pub fn overlay(&self, ns: &str, name: &str, uid: &str, annotations: &mut BTreeMap<String, String>) {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = kept.get(&(ns.to_string(), name.to_string()))
            && !uid.is_empty()
            && Timing::from_annotation(Some(t)).uid == uid
        {
            annotations.insert(TIMING_ANNOTATION.to_string(), t.clone());
        }
    }

    /// Keeps the timing a pass produced (`None`: the run ended, nothing to keep).
    pub fn keep(&self, ns: &str, name: &str, timing: Option<&str>) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let key = (ns.to_string(), name.to_string());
        match timing {
            Some(t) if kept.contains_key(&key) || kept.len() < CAP => {
                kept.insert(key, t.to_string());
            }
            Some(_) => {}
            None => {
                kept.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_timing_of_the_run_overrides_the_annotation() {
        let t = Timings::default();
        let mine = r#"{"uid":"u1","planStarted":"2026-01-01T00:00:00Z"}"#;
        t.keep("ns", "a", Some(mine));
        let mut ann = BTreeMap::from([(TIMING_ANNOTATION.to_string(), r#"{"uid":"u1"}"#.to_string())]);
        t.overlay("ns", "a", "u1", &mut ann);
        assert_eq!(ann[TIMING_ANNOTATION], mine);
        // another run: the annotation (or nothing) stands
        let mut other = BTreeMap::new();
        t.overlay("ns", "a", "u2", &mut other);
        assert!(other.is_empty());
        t.keep("ns", "a", None);
        let mut gone = BTreeMap::new();
        t.overlay("ns", "a", "u1", &mut gone);
        assert!(gone.is_empty());
    }
}
