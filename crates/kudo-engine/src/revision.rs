//! Revision history of an Instance and what a rollback restores (kudo-rs extension; KUDO kept no
//! history).
//!
//! Every run the manager admits (a user's change or trigger, a schedule, a Secret rotation, an
//! autopilot rule, a rollback, a retry) is recorded as a numbered revision: an apps/v1
//! `ControllerRevision` owned by the Instance, the kind Kubernetes itself uses for the history of
//! StatefulSets and DaemonSets, so `kubectl get controllerrevisions` lists it and the garbage
//! collector removes it with the Instance. Its immutable `data` holds what was admitted
//! ([`RevisionData`]: parameters without sensitive values, OperatorVersion, plan, who started
//! it, the change in words); the run's outcome is only known later, so it lives in an annotation
//! ([`OUTCOME_ANNOTATION`]), which Kubernetes lets us change.
//!
//! This module is pure: it builds and reads those objects as JSON values and makes the rollback
//! decisions; the controller and the CLI do the requests.

use std::collections::{BTreeMap, BTreeSet};

use kudo_api::{InstanceSpec, OperatorVersion, ParameterSource, labels};
use serde::{Deserialize, Serialize};

/// The run's outcome on its revision: `COMPLETE`, `FATAL_ERROR`, `CANCELLED`, or `REPLACED` (a
/// newer run of the Instance started before this one ended). No annotation: still running.
pub const OUTCOME_ANNOTATION: &str = "kudo-rs.dev/outcome";
/// When the outcome was recorded (RFC 3339).
pub const FINISHED_ANNOTATION: &str = "kudo-rs.dev/finished";
/// The plan run (`planExecution.uid`) a revision records, as a label so it can be selected.
pub const RUN_LABEL: &str = "kudo-rs.dev/plan-uid";
/// Written by `kubectl kudo rollback` on the Instance with the rolled-back spec
/// (`{"from":N,"to":M}`); the manager adds the uid of the run it admitted for it.
pub const ROLLBACK_ANNOTATION: &str = "kudo-rs.dev/rollback";
/// The optional plan a package runs for a rollback (instead of the plan KUDO's trigger rules
/// choose for the change).
pub const ROLLBACK_PLAN: &str = "rollback";
/// How many revisions the manager keeps per Instance unless told otherwise.
pub const DEFAULT_HISTORY_LIMIT: usize = 10;

/// Who started a recorded run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "camelCase")]
pub enum StartedBy {
    /// A change or trigger written by a user (`install`, `update`, `upgrade`, `plan trigger`,
    /// `kubectl apply`).
    User,
    /// A plan's `schedule:` came due.
    Schedule {
        /// The occurrence that came due, RFC 3339 UTC.
        due: String,
    },
    /// Sensitive parameters' values changed in their Secret.
    Rotation {
        /// Names of the rotated parameters, comma-separated.
        parameters: String,
    },
    /// An autopilot rule fired.
    Autopilot {
        /// The rule's key, `PLAN/INDEX`.
        rule: String,
    },
    /// `kubectl kudo rollback` from revision `from` to revision `to`.
    Rollback {
        /// The revision the Instance was at.
        from: u64,
        /// The revision whose spec was restored.
        to: u64,
    },
    /// `kubectl kudo plan retry` of the failed run `of`.
    Retry {
        /// `planExecution.uid` of the failed run.
        of: String,
    },
    /// The fleet rollout `name` (a `kudo-rs.dev` Rollout) changed the Instance.
    Rollout {
        /// The Rollout's name.
        name: String,
    },
}

impl StartedBy {
    /// The word `history` prints in its BY column.
    pub fn word(&self) -> &'static str {
        match self {
            StartedBy::User => "user",
            StartedBy::Schedule { .. } => "schedule",
            StartedBy::Rotation { .. } => "rotation",
            StartedBy::Autopilot { .. } => "autopilot",
            StartedBy::Rollback { .. } => "rollback",
            StartedBy::Retry { .. } => "retry",
            StartedBy::Rollout { .. } => "rollout",
        }
    }

    /// Who started a plan the manager started on its own.
    pub fn from_origin(origin: &crate::Origin) -> StartedBy {
        match origin {
            crate::Origin::Schedule { due } => StartedBy::Schedule { due: due.clone() },
            crate::Origin::Autopilot { rule, .. } => StartedBy::Autopilot { rule: rule.clone() },
            crate::Origin::Rotation { parameters } => StartedBy::Rotation {
                parameters: parameters.clone(),
            },
        }
    }
}

/// What a revision records (the `data` of its ControllerRevision; immutable once written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionData {
    /// The OperatorVersion's name (`spec.operatorVersion.name`).
    pub operator_version: String,
    /// Its `spec.version`, for the CHANGE column.
    #[serde(default)]
    pub version: String,
    /// The plan the run executes.
    pub plan: String,
    /// The run's `planExecution.uid` (also the [`RUN_LABEL`]).
    pub plan_uid: String,
    /// `spec.parameters` without the values of parameters the OperatorVersion marks sensitive.
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    /// `spec.parameterSources`: where sensitive values come from (references only).
    #[serde(default)]
    pub parameter_sources: BTreeMap<String, ParameterSource>,
    /// Who started the run.
    pub started_by: StartedBy,
    /// The change in words: `NODE_COUNT: 3 → 5`, `upgrade 0.1.0 → 0.2.0`, `install`.
    #[serde(default)]
    pub change: String,
}

/// A run's outcome as recorded on its revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The run completed.
    Complete,
    /// The run ended in FATAL_ERROR.
    FatalError,
    /// The run was cancelled.
    Cancelled,
    /// A newer run of the Instance started before this one ended.
    Replaced,
}

impl Outcome {
    /// The spelling in [`OUTCOME_ANNOTATION`] and the STATUS column.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Complete => "COMPLETE",
            Outcome::FatalError => "FATAL_ERROR",
            Outcome::Cancelled => "CANCELLED",
            Outcome::Replaced => "REPLACED",
        }
    }

    fn parse(s: &str) -> Option<Outcome> {
        [
            Outcome::Complete,
            Outcome::FatalError,
            Outcome::Cancelled,
            Outcome::Replaced,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }

    /// The outcome of a run whose plan status became terminal.
    pub fn of(status: kudo_api::ExecutionStatus) -> Option<Outcome> {
        match status {
            kudo_api::ExecutionStatus::Complete => Some(Outcome::Complete),
            kudo_api::ExecutionStatus::FatalError => Some(Outcome::FatalError),
            kudo_api::ExecutionStatus::Cancelled => Some(Outcome::Cancelled),
            _ => None,
        }
    }
}

/// One revision as read back from its ControllerRevision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// The revision number (the ControllerRevision's `revision`), the first run being 1.
    pub number: u64,
    /// The ControllerRevision's name.
    pub name: String,
    /// When the revision was recorded (the ControllerRevision's `creationTimestamp`).
    pub created: String,
    /// When the outcome was recorded.
    pub finished: Option<String>,
    /// `None` while the run goes on.
    pub outcome: Option<Outcome>,
    /// What the revision records.
    pub data: RevisionData,
}

impl Revision {
    /// The STATUS column: the outcome, or `IN_PROGRESS`.
    pub fn status(&self) -> &'static str {
        self.outcome.map_or("IN_PROGRESS", Outcome::as_str)
    }

    /// The UPDATED column: when the outcome was recorded, else when the run was admitted.
    pub fn updated(&self) -> &str {
        self.finished.as_deref().unwrap_or(&self.created)
    }
}

/// The parameter values a revision records: `spec.parameters` without those `ov` marks sensitive
/// (their values never leave the Secret; `parameterSources` says where they are).
pub fn recorded_parameters(spec: &InstanceSpec, ov: &OperatorVersion) -> BTreeMap<String, String> {
    let sensitive = sensitive_names(ov);
    spec.parameters
        .iter()
        .filter(|(k, _)| !sensitive.contains(k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn sensitive_names(ov: &OperatorVersion) -> BTreeSet<&str> {
    ov.spec
        .parameters
        .iter()
        .filter(|p| p.is_sensitive())
        .map(|p| p.name.as_str())
        .collect()
}

/// What to record for the run `spec.planExecution` names, admitted against `ov`; `previous` is
/// the newest recorded revision (the CHANGE is relative to it).
pub fn snapshot(
    spec: &InstanceSpec,
    ov: &OperatorVersion,
    started_by: StartedBy,
    previous: Option<&RevisionData>,
) -> RevisionData {
    let mut data = RevisionData {
        operator_version: spec.operator_version.name.clone(),
        version: ov.spec.version.clone(),
        plan: spec.plan_execution.plan_name.clone(),
        plan_uid: spec.plan_execution.uid.clone(),
        parameters: recorded_parameters(spec, ov),
        parameter_sources: spec.parameter_sources.clone(),
        started_by,
        change: String::new(),
    };
    data.change = change_summary(previous, &data, &defaults(ov));
    data
}

/// The parameters' default values in `ov` (what a value not set on an Instance is).
pub fn defaults(ov: &OperatorVersion) -> BTreeMap<String, String> {
    ov.spec
        .parameters
        .iter()
        .filter_map(|p| Some((p.name.clone(), p.default.clone()?)))
        .collect()
}

/// How one revision's values differ from another's: the CHANGE column in words
/// ([`change_summary`]) and the diff of two chosen revisions `kubectl kudo ui` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Differences {
    /// The versions of the OperatorVersions (before, after), when the OperatorVersions differ.
    pub version: Option<(String, String)>,
    /// The parameter values that differ, by name.
    pub values: Vec<ValueChange>,
    /// The parameters whose Secret reference differs (their values are never recorded).
    pub sources: Vec<String>,
}

/// One parameter's value in two revisions: a value not set is its default, else `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueChange {
    /// The parameter.
    pub name: String,
    /// Its value in the older revision.
    pub before: Option<String>,
    /// Its value in the newer revision.
    pub after: Option<String>,
}

/// How `next` differs from `prev`; a value not set is taken from `defaults`, so a change between
/// a default and the same value set explicitly is no difference.
pub fn differences(
    prev: &RevisionData,
    next: &RevisionData,
    defaults: &BTreeMap<String, String>,
) -> Differences {
    let version = (prev.operator_version != next.operator_version)
        .then(|| (version_of(prev).to_string(), version_of(next).to_string()));
    let values = changed_keys(&prev.parameters, &next.parameters)
        .into_iter()
        .filter_map(|k| {
            let value = |m: &BTreeMap<String, String>| m.get(k).or_else(|| defaults.get(k)).cloned();
            let (before, after) = (value(&prev.parameters), value(&next.parameters));
            (before != after).then(|| ValueChange {
                name: k.to_string(),
                before,
                after,
            })
        })
        .collect();
    let sources = changed_keys(&prev.parameter_sources, &next.parameter_sources)
        .into_iter()
        .map(str::to_string)
        .collect();
    Differences {
        version,
        values,
        sources,
    }
}

/// The CHANGE column: how `next` differs from `previous` in words; a value not set is shown as
/// its default from `defaults` (the OperatorVersion's), else `(unset)`.
pub fn change_summary(
    previous: Option<&RevisionData>,
    next: &RevisionData,
    defaults: &BTreeMap<String, String>,
) -> String {
    let Some(prev) = previous else {
        return "install".to_string();
    };
    let mut parts = Vec::new();
    if let StartedBy::Rollback { to, .. } = &next.started_by {
        parts.push(format!("rollback to {to}"));
    }
    let diff = differences(prev, next, defaults);
    if let Some((before, after)) = &diff.version {
        let word = if matches!(next.started_by, StartedBy::Rollback { .. }) {
            "operator"
        } else {
            "upgrade"
        };
        parts.push(format!("{word} {before} → {after}"));
    }
    let unset = || "(unset)".to_string();
    for c in &diff.values {
        let (before, after) = (c.before.as_deref().map(shorten), c.after.as_deref().map(shorten));
        parts.push(format!(
            "{}: {} → {}",
            c.name,
            before.unwrap_or_else(unset),
            after.unwrap_or_else(unset)
        ));
    }
    for k in &diff.sources {
        parts.push(format!("{k}: source changed"));
    }
    if parts.is_empty() {
        parts.push(started_words(next));
    }
    parts.join(", ")
}

fn version_of(d: &RevisionData) -> &str {
    if d.version.is_empty() {
        &d.operator_version
    } else {
        &d.version
    }
}

fn changed_keys<'m, V: PartialEq>(
    old: &'m BTreeMap<String, V>,
    new: &'m BTreeMap<String, V>,
) -> Vec<&'m str> {
    let keys: BTreeSet<&str> = old.keys().chain(new.keys()).map(String::as_str).collect();
    keys.into_iter().filter(|k| old.get(*k) != new.get(*k)).collect()
}

fn shorten(v: &str) -> String {
    const MAX: usize = 32;
    let one_line = v.replace('\n', "\\n");
    match one_line.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// A run that changed nothing: who or what started it.
fn started_words(d: &RevisionData) -> String {
    match &d.started_by {
        StartedBy::User => format!("plan {} triggered", d.plan),
        StartedBy::Schedule { due } => format!("scheduled ({due})"),
        StartedBy::Rotation { parameters } => format!("{parameters} rotated in their Secret"),
        StartedBy::Autopilot { rule } => format!("autopilot rule {rule}"),
        StartedBy::Rollback { to, .. } => format!("rollback to {to}"),
        StartedBy::Retry { of } => format!("retry of run {of}"),
        StartedBy::Rollout { name } => format!("rollout {name}"),
    }
}

/// The ControllerRevision recording revision `number` of Instance `namespace/instance` (uid
/// `instance_uid`): named `<instance>-<number>` (shortened to stay a valid name), labelled with
/// the Instance and the run, owned (controller) by the Instance.
pub fn manifest(
    namespace: &str,
    instance: &str,
    instance_uid: &str,
    number: u64,
    data: &RevisionData,
) -> serde_json::Value {
    let suffix = format!("-{number}");
    let mut base = instance.to_string();
    base.truncate(253 - suffix.len());
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": format!("{}{suffix}", base.trim_end_matches(['-', '.'])),
            "namespace": namespace,
            "labels": {
                labels::INSTANCE: label_value(instance),
                RUN_LABEL: label_value(&data.plan_uid),
            },
            "ownerReferences": [{
                "apiVersion": kudo_api::API_VERSION,
                "kind": "Instance",
                "name": instance,
                "uid": instance_uid,
                "controller": true,
            }],
        },
        "revision": number,
        "data": data,
    })
}

/// A label value (≤ 63 characters); Instance names longer than that are matched by their owner
/// reference too (see [`owned_by`]).
pub fn label_value(s: &str) -> String {
    let mut v: String = s.chars().take(63).collect();
    while v.ends_with(['-', '.', '_']) {
        v.pop();
    }
    v
}

/// Whether the ControllerRevision `cr` records a run of the Instance with uid `instance_uid`.
pub fn owned_by(cr: &serde_json::Value, instance_uid: &str) -> bool {
    cr["metadata"]["ownerReferences"].as_array().is_some_and(|refs| {
        refs.iter()
            .any(|r| r["uid"] == instance_uid && r["kind"] == "Instance")
    })
}

/// Reads a revision back; `None` for a ControllerRevision that is not one of ours.
pub fn parse(cr: &serde_json::Value) -> Option<Revision> {
    let data: RevisionData = serde_json::from_value(cr.get("data")?.clone()).ok()?;
    let meta = &cr["metadata"];
    let annotation = |k: &str| meta["annotations"][k].as_str().map(str::to_string);
    Some(Revision {
        number: cr["revision"].as_u64()?,
        name: meta["name"].as_str()?.to_string(),
        created: meta["creationTimestamp"].as_str().unwrap_or_default().to_string(),
        finished: annotation(FINISHED_ANNOTATION),
        outcome: annotation(OUTCOME_ANNOTATION).as_deref().and_then(Outcome::parse),
        data,
    })
}

/// The revisions among `items` (ControllerRevisions as JSON) that belong to the Instance with
/// uid `instance_uid`, oldest first.
pub fn history(items: &[serde_json::Value], instance_uid: &str) -> Vec<Revision> {
    let mut revs: Vec<Revision> = items
        .iter()
        .filter(|cr| owned_by(cr, instance_uid))
        .filter_map(parse)
        .collect();
    revs.sort_by_key(|r| r.number);
    revs
}

/// Whether the Instance whose status is `status` has no run before the one just admitted (no plan
/// status carries a run uid yet): its revision is number 1 and no earlier revision is to be marked
/// or pruned, so recording it needs no LIST of the history (each LIST scans every revision of the
/// namespace on the server). Should a revision of this uid exist after
/// all (a run admitted while the status write of an earlier one had failed), its create answers
/// 409 and the manager records the run the long way.
pub fn first_run(status: Option<&kudo_api::InstanceStatus>) -> bool {
    status.is_none_or(|s| s.plan_status.values().all(|p| p.uid.is_empty()))
}

/// The number the next revision gets.
pub fn next_number(revs: &[Revision]) -> u64 {
    revs.iter().map(|r| r.number).max().unwrap_or(0) + 1
}

/// The names of the oldest revisions beyond `limit` (the newest `limit` are kept; at least one).
pub fn to_prune(revs: &[Revision], limit: usize) -> Vec<String> {
    let keep = limit.max(1);
    let mut sorted: Vec<&Revision> = revs.iter().collect();
    sorted.sort_by_key(|r| r.number);
    let excess = sorted.len().saturating_sub(keep);
    sorted[..excess].iter().map(|r| r.name.clone()).collect()
}

/// The merge patch recording a run's outcome at `now` on its revision.
pub fn outcome_patch(outcome: Outcome, now: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": {
        OUTCOME_ANNOTATION: outcome.as_str(),
        FINISHED_ANNOTATION: now,
    }}})
}

/// Revisions whose run never ended although a newer run (`current_uid`) started: they were
/// replaced (a restart with new values, a cancellation written over, a rollback with --force).
pub fn replaced<'r>(revs: &'r [Revision], current_uid: &str) -> Vec<&'r Revision> {
    revs.iter()
        .filter(|r| r.outcome.is_none() && r.data.plan_uid != current_uid)
        .collect()
}

/// The outcome of the run `uid` of `plan` when its status became terminal between `old` and
/// `new` (the status a reconcile read and the one it wrote).
pub fn ended(
    old: &kudo_api::InstanceStatus,
    new: &kudo_api::InstanceStatus,
    plan: &str,
    uid: &str,
) -> Option<Outcome> {
    let now = new.plan_status.get(plan).filter(|p| p.uid == uid)?;
    let before = old.plan_status.get(plan).filter(|p| p.uid == uid);
    if before.is_some_and(|p| p.status.is_terminal()) {
        return None;
    }
    Outcome::of(now.status)
}
