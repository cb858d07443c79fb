//! What a reconcile stores besides the status once its pass ran: the finalizers (the cleanup
//! finalizer goes once cleanup completed, the cluster-objects finalizer comes with the first
//! cluster-scoped object) and the bookkeeping annotations (plan timing, a spent retry mark, the
//! cluster-scoped objects to delete on uninstall, the record of a run the write unschedules).
//!
//! The plan timing is stored on its own only when the run's plan has a timeout (losing it would
//! make the timeout later): otherwise it rides along with the next write of the spec or metadata
//! ([`Settled::lazy`]) and the manager keeps it in memory meanwhile. A step start alone used to
//! cost an Instance write (and its echo) per step.

use std::collections::{BTreeMap, BTreeSet};

use kudo_api::{CLEANUP_FINALIZER, Instance, InstanceStatus, OperatorVersion};

use super::annotations::RETRY_ANNOTATION;
use super::ended::{ENDED_RUN_ANNOTATION, ended_record};
use crate::pass::{TIMING_ANNOTATION, Timing};
use crate::retry;
use crate::triggers::cleanup_finalizer_removable;

/// Annotation listing the cluster-scoped objects the Instance's plans applied (JSON list of
/// `[apiVersion, kind, name]`): the garbage collector cannot delete them (a namespaced owner
/// cannot own them), so uninstall does.
pub const CLUSTER_OBJECTS_ANNOTATION: &str = "kudo-rs.dev/cluster-objects";

/// Finalizer holding an Instance until its recorded cluster-scoped objects are deleted.
pub const CLUSTER_OBJECTS_FINALIZER: &str = "kudo-rs.dev/cluster-objects";

/// A cluster-scoped object applied by a plan: (apiVersion, kind, name). Serialised as the
/// three-element array the Instance annotation has always held.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(from = "(String, String, String)", into = "(String, String, String)")]
pub struct ClusterObject {
    /// `apiVersion` of the object, e.g. `rbac.authorization.k8s.io/v1`.
    pub api_version: String,
    /// `kind` of the object, e.g. `ClusterRole`.
    pub kind: String,
    /// Name of the object (cluster-scoped, so no namespace).
    pub name: String,
}

impl From<(String, String, String)> for ClusterObject {
    fn from((api_version, kind, name): (String, String, String)) -> Self {
        ClusterObject {
            api_version,
            kind,
            name,
        }
    }
}

impl From<ClusterObject> for (String, String, String) {
    fn from(o: ClusterObject) -> Self {
        (o.api_version, o.kind, o.name)
    }
}

/// What the pass left to settle.
#[derive(Debug, Clone)]
pub struct Settle<'a> {
    /// The Instance as stored before the pass.
    pub inst: &'a Instance,
    /// The OperatorVersion that ran.
    pub ov: &'a OperatorVersion,
    /// The status after the pass.
    pub status: &'a InstanceStatus,
    /// `metadata.deletionTimestamp` is set: the cleanup finalizer may be released.
    pub deleting: bool,
    /// The timing annotation the pass produced (`None`: remove).
    pub timing: Option<String>,
    /// Cluster-scoped objects the pass applied.
    pub applied: &'a BTreeSet<ClusterObject>,
}

/// The finalizers and annotations to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The finalizers to store (the cleanup finalizer released, the cluster-objects one added).
    pub finalizers: Vec<String>,
    /// `None`: remove the annotation.
    pub annotations: BTreeMap<&'static str, Option<String>>,
    /// Annotations stored only together with another change of the spec or metadata (`None`:
    /// remove): the plan timing of a run without timeouts.
    pub lazy: BTreeMap<&'static str, Option<String>>,
    /// The cleanup finalizer was released (cleanup completed, or there is none to run).
    pub cleanup_released: bool,
}

/// Settles `finalizers` (those the pass started from) and the annotations (see the module docs).
pub fn settle(s: &Settle<'_>, mut finalizers: Vec<String>) -> Settled {
    let mut cleanup_released = false;
    if s.deleting {
        let mut probe = s.inst.clone();
        probe.status = Some(s.status.clone());
        if cleanup_finalizer_removable(&probe, s.ov) && finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.retain(|f| f != CLEANUP_FINALIZER);
            cleanup_released = true;
        }
    }
    let timing = BTreeMap::from([(TIMING_ANNOTATION, s.timing.clone())]);
    let (mut annotations, lazy) = if timing_is_durable(s) {
        (timing, BTreeMap::new())
    } else {
        (BTreeMap::new(), timing)
    };
    let marked = s.inst.metadata.annotations.get(RETRY_ANNOTATION);
    if marked.is_some_and(|a| retry::is_spent(a, s.status)) {
        annotations.insert(RETRY_ANNOTATION, None);
    }
    if crate::ownership::is_spent(s.inst, s.status) {
        annotations.insert(crate::ownership::TAKE_OWNERSHIP_ANNOTATION, None);
    }
    if let Some(record) = ended_record(s.inst, s.status) {
        annotations.insert(ENDED_RUN_ANNOTATION, Some(record));
    }
    if let Some(recorded) = record_cluster_objects(s.inst, s.applied, s.deleting, &mut finalizers) {
        annotations.insert(CLUSTER_OBJECTS_ANNOTATION, Some(recorded));
    }
    Settled {
        finalizers,
        annotations,
        lazy,
        cleanup_released,
    }
}

/// Whether the timing must be stored now: its run's plan (found by the run uid in the status) has
/// a plan or step timeout.
fn timing_is_durable(s: &Settle<'_>) -> bool {
    let Some(timing) = s.timing.as_deref().map(|t| Timing::from_annotation(Some(t))) else {
        return false;
    };
    s.status
        .plan_status
        .iter()
        .filter(|(_, ps)| !timing.uid.is_empty() && ps.uid == timing.uid)
        .filter_map(|(name, _)| s.ov.spec.plans.get(name))
        .any(|plan| {
            plan.timeout.is_some()
                || plan
                    .phases
                    .iter()
                    .flat_map(|ph| &ph.steps)
                    .any(|st| st.timeout.is_some())
        })
}

/// Adds the cluster-scoped objects a pass applied to those recorded on the Instance: returns the
/// new annotation value when the set grew, and adds the finalizer that releases them on uninstall
/// (Kubernetes forbids adding finalizers to an Instance being deleted).
fn record_cluster_objects(
    inst: &Instance,
    applied: &BTreeSet<ClusterObject>,
    deleting: bool,
    finalizers: &mut Vec<String>,
) -> Option<String> {
    let stored = stored_cluster_objects(inst);
    let mut recorded = stored.clone();
    recorded.extend(applied.iter().cloned());
    if !recorded.is_empty() && !deleting && !finalizers.iter().any(|f| f == CLUSTER_OBJECTS_FINALIZER) {
        finalizers.push(CLUSTER_OBJECTS_FINALIZER.to_string());
    }
    (recorded != stored).then(|| serde_json::to_string(&recorded).unwrap_or_default())
}

/// The cluster-scoped objects recorded on the Instance (see [`CLUSTER_OBJECTS_ANNOTATION`]).
pub fn stored_cluster_objects(inst: &Instance) -> BTreeSet<ClusterObject> {
    inst.metadata
        .annotations
        .get(CLUSTER_OBJECTS_ANNOTATION)
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}
