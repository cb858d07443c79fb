//! Objects of API versions the cluster no longer serves (a catalog package's `policy/v1beta1`
//! PodDisruptionBudget on Kubernetes ≥ 1.25…) are converted to the served replacement before they
//! are applied, with [`kudo_package::translate`], by the live render
//! ([`kudo_package::live::render_live`]). Only versions discovery reports as not served are
//! translated: an older cluster that still serves them gets the object as written. What is kept
//! here is what the manager says about each translation (an Event per plan run).

use std::collections::HashSet;
use std::sync::Mutex;

/// Event reason published when an object was translated.
pub const API_VERSION_TRANSLATED: &str = "APIVersionTranslated";

/// One translation made for a plan run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Translation {
    /// `Kind namespace/name` of the object.
    pub object: String,
    pub from: String,
    pub to: String,
    /// Adjustments that keep the object's meaning (old defaults written out…).
    pub notes: Vec<String>,
}

impl Translation {
    /// The Event note: which object, from → to, and how its meaning was kept.
    pub fn message(&self) -> String {
        let mut s = format!(
            "{}: {} is not served by this cluster; applied as {} instead",
            self.object, self.from, self.to
        );
        if !self.notes.is_empty() {
            s.push_str(" (");
            s.push_str(&self.notes.join("; "));
            s.push(')');
        }
        s
    }
}

/// Which (plan run, object) translations were already announced by an Event, so that each is
/// announced once per plan run although the plan is rendered at every reconcile.
#[derive(Default)]
pub struct Announced(Mutex<HashSet<(String, String)>>);

impl Announced {
    /// Bound on remembered translations; beyond it the set starts over (an Event may repeat).
    const MAX_ENTRIES: usize = 10_000;

    /// True the first time this plan run translates this object.
    pub fn first(&self, plan_uid: &str, t: &Translation) -> bool {
        let mut set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if set.len() >= Self::MAX_ENTRIES {
            set.clear();
        }
        set.insert((plan_uid.to_string(), format!("{} {}", t.from, t.object)))
    }
}
