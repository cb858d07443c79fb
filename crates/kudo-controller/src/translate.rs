//! Objects of API versions the cluster no longer serves (a catalog package's `policy/v1beta1`
//! PodDisruptionBudget on Kubernetes ≥ 1.25…) are converted to the served replacement before they
//! are applied, with [`kudo_package::translate`]. Only versions discovery reports as not served
//! are translated: an older cluster that still serves them gets the object as written.

use std::collections::HashSet;
use std::sync::Mutex;

use kudo_package::render::RenderedObject;
use kudo_package::translate::{mapping, translate};

use kudo_kube::discovery::{self, Resolved};

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

/// Translates every rendered object whose apiVersion has a known replacement and is not served.
/// Returns the translations made and, per object index, the error of an object that cannot be
/// translated without losing a field (the caller fails that object's task). An object whose
/// version cannot be looked up right now is left as is: applying it reports the lookup failure.
pub async fn translate_unserved(
    discovery: &discovery::Cache,
    objects: &mut [RenderedObject],
) -> (Vec<Translation>, Vec<(usize, String)>) {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for (i, o) in objects.iter_mut().enumerate() {
        let av = o.object["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = o.object["kind"].as_str().unwrap_or_default().to_string();
        if mapping(&av, &kind).is_none() {
            continue;
        }
        match discovery.resolve(&av, &kind).await {
            Ok(Resolved::Unknown(_)) => {}
            Ok(Resolved::Found { .. }) | Err(_) => continue,
        }
        match translate(&o.object) {
            Ok(t) => {
                done.push(Translation {
                    object: kudo_engine::waiting::describe(&o.object),
                    from: t.from,
                    to: t.to,
                    notes: t.notes,
                });
                o.object = t.object;
            }
            Err(e) => failed.push((i, e.to_string())),
        }
    }
    (done, failed)
}
