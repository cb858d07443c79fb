//! Echoes: the watch events of this manager's own Instance writes.
//!
//! A reconcile that writes an Instance's status, or admits a change and runs the pass on what it
//! admitted, has already acted on what it wrote (the write is the outcome of its pass, and the
//! requeue it returns covers the time-driven work), so the watch event of that write only woke
//! the same Instance again to find nothing to do — about a third of the reconciles of a deploy.
//! The manager remembers the resourceVersions those writes produced and the Instance
//! watch does not wake an Instance for an event carrying one of them. The spec write that ends a
//! reconcile (unscheduling a finished run) is not an echo: a change that waited for the run is
//! admissible now, and the next reconcile admits it.
//! A change by anyone else has another resourceVersion and wakes it as before; deletions and
//! (re)lists always wake; a child Instance's parent is woken by every event of the child.
//!
//! The same goes for the objects a plan applies: the pass judged each from the apply's answer, so
//! the watch event of that apply does not wake the Instance (a separate map, keyed by
//! [`child_key`]).
//!
//! Bounded: a few versions per object, and at most [`CAP`] objects (beyond that, echoes wake
//! their Instance again, which is only the cost this module saves).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// The key of a child object (the manager's own applies are echoes too, see
/// `execute::applied_echo`) in the namespace's map: kind and name.
pub(crate) fn child_key(kind: &str, name: &str) -> String {
    format!("{kind}/{name}")
}

/// Instances whose written versions are remembered.
const CAP: usize = 200_000;
/// Versions remembered per Instance: the writes of one reconcile (admission, status, spec).
const PER_INSTANCE: usize = 4;

/// The resourceVersions this manager's Instance writes produced, per `(namespace, name)`.
#[derive(Default)]
pub(crate) struct Echoes {
    written: Mutex<HashMap<(String, String), VecDeque<String>>>,
}

impl Echoes {
    /// Notes that a write of ours produced version `rv` of the Instance.
    pub fn wrote(&self, ns: &str, name: &str, rv: &str) {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let key = (ns.to_string(), name.to_string());
        if !written.contains_key(&key) && written.len() >= CAP {
            return;
        }
        let versions = written.entry(key).or_default();
        if versions.len() == PER_INSTANCE {
            versions.pop_front();
        }
        versions.push_back(rv.to_string());
    }

    /// Whether version `rv` of the Instance is one of our writes; it is forgotten then (each
    /// version has one watch event), with the older ones.
    pub fn is_echo(&self, ns: &str, name: &str, rv: &str) -> bool {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let key = (ns.to_string(), name.to_string());
        let Some(versions) = written.get_mut(&key) else {
            return false;
        };
        let Some(at) = versions.iter().position(|v| v == rv) else {
            return false;
        };
        versions.drain(..=at);
        if versions.is_empty() {
            written.remove(&key);
        }
        true
    }

    /// Forgets an Instance (deleted).
    pub fn forget(&self, ns: &str, name: &str) {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written.remove(&(ns.to_string(), name.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_versions_we_wrote_are_echoes_and_each_once() {
        let e = Echoes::default();
        e.wrote("ns", "a", "10");
        e.wrote("ns", "a", "12");
        assert!(!e.is_echo("ns", "a", "11"), "a foreign write in between");
        assert!(!e.is_echo("ns", "b", "10"), "another Instance");
        assert!(e.is_echo("ns", "a", "10"));
        assert!(!e.is_echo("ns", "a", "10"), "one event per version");
        assert!(e.is_echo("ns", "a", "12"));
        e.wrote("ns", "a", "20");
        e.forget("ns", "a");
        assert!(!e.is_echo("ns", "a", "20"));
    }

    #[test]
    fn a_later_echo_forgets_the_older_versions() {
        let e = Echoes::default();
        for rv in ["1", "2", "3", "4", "5"] {
            e.wrote("ns", "a", rv);
        }
        assert!(!e.is_echo("ns", "a", "1"), "only the newest few are kept");
        assert!(e.is_echo("ns", "a", "4"));
        assert!(!e.is_echo("ns", "a", "2"));
        assert!(e.is_echo("ns", "a", "5"));
    }
}
