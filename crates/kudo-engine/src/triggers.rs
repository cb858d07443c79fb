//! Which plan a change of an Instance schedules — KUDO's admission-webhook rules
//! (`instance_admission.go`) as a pure function.
//!
//! KUDO ran these rules in a mutating webhook, so a change it disliked was rejected before it was
//! stored. kudo-rs has no webhook: the controller compares the Instance it sees with the last spec
//! it admitted and calls [`decide`]. A change KUDO would have denied is therefore already stored;
//! the controller reports the [`Decision::Deny`] message (event/condition) and does not execute it.
//!
//! Rules (in KUDO's order):
//! * Create: the OV needs a `deploy` plan; defaults of immutable parameters are written into the
//!   spec; all values are validated; `deploy` is scheduled; the cleanup finalizer is added when the
//!   OV has a `cleanup` plan.
//! * Update: a cancellation of the scheduled plan (see [`Decision::Cancel`]) is accepted before
//!   anything else is looked at (kudo-rs extension; KUDO denied it); a scheduled plan must exist; changed/added values must be declared parameters (only
//!   those declared in the *old* OV count as changes, #1780); immutability (see
//!   [`decide`]); values are validated; the changed parameters' `trigger`s select one plan.
//! * While deleting only `cleanup` may be scheduled (by the controller), nothing else changes.
//! * Otherwise the decision table of kudo-behaviour.md §4.3 (deny cases first).

use std::collections::{BTreeMap, BTreeSet};

use kudo_api::{CLEANUP_FINALIZER, ExecutionStatus, Instance, OperatorVersion, Parameter, PlanExecution};
use kudo_package::params::ParamValueError;

/// Plan names with a special meaning.
pub const DEPLOY: &str = "deploy";
pub const UPDATE: &str = "update";
pub const UPGRADE: &str = "upgrade";
pub const CLEANUP: &str = "cleanup";

/// Why a plan is scheduled (for events/logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleReason {
    /// The Instance was created.
    Install,
    /// `spec.operatorVersion` changed.
    Upgrade,
    /// These parameters changed (or were removed).
    ParameterUpdate(Vec<String>),
    /// The user set `spec.planExecution.planName` with no plan scheduled (`kubectl kudo plan trigger`).
    DirectTrigger,
    /// The scheduled plan got a new uid: run it again from scratch.
    Retrigger,
}

/// What the change means for plan execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Schedule `plan` with a fresh uid (planExecution = {plan, new uid, NEVER_RUN}); restarts it
    /// if it is the plan already scheduled.
    Schedule { plan: String, reason: ScheduleReason },
    /// KUDO would have rejected the change; `message` is KUDO's wording.
    Deny { message: String },
    /// The user asked to stop the scheduled plan `plan` (run `uid`): set
    /// `spec.planExecution.status: CANCELLED` on that run, or cleared `spec.planExecution.planName`.
    /// The controller stops the run at the next task boundary (status CANCELLED) and unschedules
    /// it. Evaluated before the parameter diff, so a denied parameter change still stored does not
    /// block the cancellation (kudo-rs extension; KUDO denied every cancellation).
    Cancel { plan: String, uid: String },
    /// `spec.planExecution.status` became terminal: clear `spec.planExecution`.
    ClearTerminal,
    /// Nothing to do for plan execution.
    NoChange,
}

/// The result of admitting a change: the decision plus the spec edits KUDO's webhook made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    pub decision: Decision,
    /// Values to write into `spec.parameters` (defaults of immutable parameters on create).
    pub set_parameters: BTreeMap<String, String>,
    /// Parameters to drop from `spec.parameters` (declared by the old OV, gone in the new one).
    pub remove_parameters: Vec<String>,
    /// Add the `kudo.dev.instance.cleanup` finalizer (create, when the OV has a cleanup plan).
    pub add_cleanup_finalizer: bool,
}

impl Admission {
    /// Applies the admission to the Instance spec the way KUDO's webhook patched it: a scheduled
    /// plan gets `planExecution = {plan, new_uid, NEVER_RUN}`, a terminal one is cleared, parameter
    /// edits and the finalizer are applied. A denial changes nothing. `new_uid` is only used when a
    /// plan is scheduled (the engine does not generate uids: no randomness in here). Returns
    /// whether the Instance changed.
    pub fn apply(&self, instance: &mut Instance, new_uid: &str) -> bool {
        let before = instance.clone();
        match &self.decision {
            Decision::Deny { .. } => return false,
            Decision::NoChange => {}
            Decision::Cancel { plan, uid } => {
                instance.spec.plan_execution = PlanExecution {
                    plan_name: plan.clone(),
                    uid: uid.clone(),
                    status: Some(ExecutionStatus::Cancelled),
                };
            }
            Decision::ClearTerminal => instance.spec.plan_execution = PlanExecution::default(),
            Decision::Schedule { plan, .. } => {
                instance.spec.plan_execution = PlanExecution {
                    plan_name: plan.clone(),
                    uid: new_uid.to_string(),
                    status: Some(ExecutionStatus::NeverRun),
                };
            }
        }
        for (k, v) in &self.set_parameters {
            instance.spec.parameters.insert(k.clone(), v.clone());
        }
        for k in &self.remove_parameters {
            instance.spec.parameters.remove(k);
        }
        if self.add_cleanup_finalizer
            && !instance
                .metadata
                .finalizers
                .iter()
                .any(|f| f == CLEANUP_FINALIZER)
        {
            instance.metadata.finalizers.push(CLEANUP_FINALIZER.to_string());
        }
        *instance != before
    }

    fn only(decision: Decision) -> Admission {
        Admission {
            decision,
            set_parameters: BTreeMap::new(),
            remove_parameters: Vec::new(),
            add_cleanup_finalizer: false,
        }
    }
    fn deny(message: String) -> Admission {
        Admission::only(Decision::Deny { message })
    }
}

/// A change of an Instance to admit.
#[derive(Debug, Clone, Copy)]
pub struct InstanceChange<'a> {
    /// The previously admitted Instance; `None` for a creation.
    pub old: Option<&'a Instance>,
    pub new: &'a Instance,
    /// The OperatorVersion `old` references (same as `new_ov` unless this is an upgrade; ignored
    /// on create).
    pub old_ov: &'a OperatorVersion,
    /// The OperatorVersion `new` references.
    pub new_ov: &'a OperatorVersion,
    /// `metadata.deletionTimestamp` is set on `new`.
    pub deleting: bool,
}

fn ns_name(i: &Instance) -> String {
    format!(
        "{}/{}",
        i.metadata.namespace.as_deref().unwrap_or(""),
        i.metadata.name
    )
}

fn plan_exists(ov: &OperatorVersion, plan: &str) -> bool {
    ov.spec.plans.contains_key(plan)
}

fn select_plan(ov: &OperatorVersion, candidates: &[&str]) -> Option<String> {
    candidates
        .iter()
        .find(|p| plan_exists(ov, p))
        .map(|p| p.to_string())
}

fn find_param<'o>(ov: &'o OperatorVersion, name: &str) -> Option<&'o Parameter> {
    ov.spec.parameters.iter().find(|p| p.name == name)
}

/// Admits a creation or update of an Instance (see the module docs).
pub fn decide(change: &InstanceChange<'_>) -> Admission {
    match change.old {
        None => admit_create(change.new, change.new_ov),
        Some(old) => admit_update(old, change.new, change.old_ov, change.new_ov, change.deleting),
    }
}

fn admit_create(new: &Instance, ov: &OperatorVersion) -> Admission {
    let who = ns_name(new);
    let add_cleanup_finalizer = plan_exists(ov, CLEANUP);
    if !plan_exists(ov, DEPLOY) {
        return Admission::deny(format!(
            "failed to create an Instance {who}: couldn't find '{DEPLOY}' plan in the operatorVersion"
        ));
    }
    let mut params = new.spec.parameters.clone();
    let mut set_parameters = BTreeMap::new();
    for p in &ov.spec.parameters {
        if p.is_immutable()
            && let Some(d) = &p.default
            && !params.contains_key(&p.name)
            && !new.spec.parameter_sources.contains_key(&p.name)
        {
            params.insert(p.name.clone(), d.clone());
            set_parameters.insert(p.name.clone(), d.clone());
        }
    }
    if let Err(e) = validate_parameters(&unsourced(&ov.spec.parameters, &new.spec), &params) {
        return Admission::deny(format!(
            "failed to create an Instance {who}: parameters are not valid: {e}"
        ));
    }
    Admission {
        decision: Decision::Schedule {
            plan: DEPLOY.into(),
            reason: ScheduleReason::Install,
        },
        set_parameters,
        remove_parameters: Vec::new(),
        add_cleanup_finalizer,
    }
}

fn admit_update(
    old: &Instance,
    new: &Instance,
    old_ov: &OperatorVersion,
    ov: &OperatorVersion,
    deleting: bool,
) -> Admission {
    if old.spec == new.spec && old.status == new.status {
        return Admission::only(Decision::NoChange);
    }
    let who = ns_name(old);
    let new_plan = new.spec.plan_execution.plan_name.as_str();
    let old_plan = old.spec.plan_execution.plan_name.as_str();
    let had_plan = !old_plan.is_empty();
    let is_upgrade = old.spec.operator_version != new.spec.operator_version;
    let is_novel_plan = !had_plan && !new_plan.is_empty();
    let is_plan_override = had_plan && !new_plan.is_empty() && new_plan != old_plan;
    let is_plan_retriggered =
        had_plan && new_plan == old_plan && new.spec.plan_execution.uid != old.spec.plan_execution.uid;
    let is_plan_cancellation = had_plan && new_plan.is_empty();
    let is_plan_terminal = new.spec.plan_execution.status.is_some_and(|s| s.is_terminal());
    let is_cancel_request = had_plan
        && new_plan == old_plan
        && new.spec.plan_execution.uid == old.spec.plan_execution.uid
        && new.spec.plan_execution.status == Some(ExecutionStatus::Cancelled);

    // --- cancellation first: it must not depend on whatever else the change contains (a
    // parameter change denied earlier is typically still stored while the plan runs). While the
    // instance is being deleted the uninstall rules below apply instead.
    // A cleared planName counts only without an upgrade (a whole new spec without planExecution,
    // e.g. from `kubectl replace`, keeps KUDO's upgrade denial); an explicit CANCELLED always does.
    let is_upgrade_early = old.spec.operator_version != new.spec.operator_version;
    if !deleting && ((is_plan_cancellation && !is_upgrade_early) || is_cancel_request) {
        return Admission::only(Decision::Cancel {
            plan: old_plan.to_string(),
            uid: old.spec.plan_execution.uid.clone(),
        });
    }

    if !new_plan.is_empty() && !plan_exists(ov, new_plan) {
        return Admission::deny(format!("plan {new_plan} does not exist"));
    }

    // --- parameter diff: changed/added values (must be declared in the new OV; only those declared
    // in the old OV count as changes) and removed values
    let old_params = &with_sources(&old.spec);
    let mut new_params = with_sources(&new.spec);
    let mut changed_defs: Vec<&Parameter> = Vec::new();
    for (k, v) in &new_params {
        if old_params.get(k) == Some(v) {
            continue;
        }
        let Some(def) = find_param(ov, k) else {
            return Admission::deny(format!(
                "failed to update Instance {who}: failed to find parameter {k:?} in the OperatorVersion"
            ));
        };
        if find_param(old_ov, k).is_some() {
            changed_defs.push(def);
        }
    }
    let removed_defs: Vec<&Parameter> = old_params
        .keys()
        .filter(|k| !new_params.contains_key(*k))
        .filter_map(|k| find_param(ov, k))
        .collect();

    // --- immutability
    let mut remove_parameters = Vec::new();
    if !is_upgrade {
        if let Some(p) = changed_defs.iter().find(|p| p.is_immutable()) {
            return Admission::deny(format!(
                "failed to check immutable parameters for Instance {who}: parameter '{}' is immutable but was changed from '{}' to '{}'",
                p.name,
                old_params.get(&p.name).map_or("", String::as_str),
                new_params.get(&p.name).map_or("", String::as_str)
            ));
        }
    } else {
        let ov_name = &ov.metadata.name;
        for np in &ov.spec.parameters {
            if let Some(op) = find_param(old_ov, &np.name)
                && np.is_immutable()
                && !op.is_immutable()
                && !new_params.contains_key(&np.name)
            {
                return Admission::deny(format!(
                    "failed to check immutable parameters for Instance {who}: parameter '{}' was changed to immutable in operator version {ov_name} but no value was provided",
                    np.name
                ));
            }
        }
        for op in &old_ov.spec.parameters {
            if find_param(ov, &op.name).is_none() && new_params.remove(&op.name).is_some() {
                remove_parameters.push(op.name.clone());
            }
        }
        for np in &ov.spec.parameters {
            if find_param(old_ov, &np.name).is_none()
                && np.is_immutable()
                && !new_params.contains_key(&np.name)
            {
                let tail = match &np.default {
                    Some(d) => format!(" (default would be {d})"),
                    None => String::new(),
                };
                return Admission::deny(format!(
                    "failed to check immutable parameters for Instance {who}: parameter '{}' was added in operator version {ov_name}, but no value was provided{tail}",
                    np.name
                ));
            }
        }
    }
    if let Err(e) = validate_parameters(&unsourced(&ov.spec.parameters, &new.spec), &new_params) {
        return Admission::deny(format!(
            "failed to validate parameters for Instance {}: {e}",
            ns_name(new)
        ));
    }

    let mut updated: Vec<&Parameter> = changed_defs;
    updated.extend(removed_defs);
    let triggered = match triggered_by_parameter_update(&updated, ov) {
        Ok(t) => t,
        Err(e) => return Admission::deny(format!("failed to update Instance {who}: {e}")),
    };
    let mut changed_names: Vec<String> = updated.iter().map(|p| p.name.clone()).collect();
    changed_names.sort();
    changed_names.dedup();
    let is_parameter_update = triggered.is_some();
    let update_incompatible_with_upgrade = triggered.as_deref().is_some_and(|t| t != DEPLOY);

    let with_removals = |decision: Decision| Admission {
        decision,
        set_parameters: BTreeMap::new(),
        remove_parameters: remove_parameters.clone(),
        add_cleanup_finalizer: false,
    };

    // --- uninstall phase
    if deleting {
        if old_plan == CLEANUP && new_plan != old_plan {
            return Admission::deny(format!(
                "failed to update Instance {who}: '{old_plan}' plan can not be cancelled or overridden by another plan since the instance is being deleted"
            ));
        }
        if is_parameter_update || is_upgrade {
            return Admission::deny(format!(
                "failed to update Instance {who}: parameter update and/or upgrade is not allowed when an instance is being deleted"
            ));
        }
        if !new_plan.is_empty() && new_plan != CLEANUP {
            return Admission::deny(format!(
                "failed to update Instance {who}: only '{CLEANUP}' plan can be scheduled when an instance is being deleted"
            ));
        }
        return with_removals(Decision::NoChange);
    }

    // --- normal life-cycle: deny cases first
    let ov_ref = &new.spec.operator_version.name;
    if let Some(t) = &triggered
        && had_plan
        && t != old_plan
    {
        return Admission::deny(format!(
            "failed to update Instance {who}: plan '{old_plan}' is scheduled (or running) and an update would trigger a different plan '{t}'"
        ));
    }
    if is_upgrade && had_plan {
        return Admission::deny(format!(
            "failed to update Instance {who}: upgrade to new OperatorVersion {ov_ref} while a plan '{old_plan}' is scheduled (or running) is not allowed"
        ));
    }
    if is_upgrade && is_novel_plan {
        return Admission::deny(format!(
            "failed to update Instance {who}: upgrade to new OperatorVersion {ov_ref} and triggering new plan '{new_plan}' is not allowed"
        ));
    }
    if is_upgrade && update_incompatible_with_upgrade {
        return Admission::deny(format!(
            "failed to update Instance {who}: upgrade to new OperatorVersion {ov_ref} together with a parameter update triggering '{}' is not allowed",
            triggered.as_deref().unwrap_or("")
        ));
    }
    if is_plan_override {
        return Admission::deny(format!(
            "failed to update Instance {who}: overriding currently scheduled (or running) plan '{old_plan}' with '{new_plan}' is not supported"
        ));
    }
    if is_parameter_update && is_novel_plan {
        return Admission::deny(format!(
            "failed to update Instance {who}: triggering one plan '{new_plan}' directly and through parameter update '{}' is not allowed",
            triggered.as_deref().unwrap_or("")
        ));
    }
    if new_plan == CLEANUP {
        return Admission::deny(format!(
            "failed to update Instance {who}: only the controller schedules the '{CLEANUP}' plan when the instance is deleted"
        ));
    }

    // --- which plan to trigger
    if is_upgrade {
        return match select_plan(ov, &[UPGRADE, UPDATE, DEPLOY]) {
            Some(plan) => with_removals(Decision::Schedule {
                plan,
                reason: ScheduleReason::Upgrade,
            }),
            None => Admission::deny(format!(
                "failed to update Instance {who}: couldn't find any suitable plan that would be triggered by an OperatorVersion upgrade"
            )),
        };
    }
    if let Some(plan) = triggered {
        return with_removals(Decision::Schedule {
            plan,
            reason: ScheduleReason::ParameterUpdate(changed_names),
        });
    }
    if is_novel_plan {
        return with_removals(Decision::Schedule {
            plan: new_plan.to_string(),
            reason: ScheduleReason::DirectTrigger,
        });
    }
    if is_plan_terminal {
        return with_removals(Decision::ClearTerminal);
    }
    if is_plan_retriggered {
        return with_removals(Decision::Schedule {
            plan: new_plan.to_string(),
            reason: ScheduleReason::Retrigger,
        });
    }
    with_removals(Decision::NoChange)
}

/// What KUDO's admission webhook would have answered to a client (the CLI) writing `proposed`
/// over the Instance `stored`: `Err(message)` with KUDO's wording when the change would be
/// denied, so the client can refuse it before writing anything (KUDO's webhook refused such a
/// change synchronously; kudo-rs's controller only reports it after the fact).
///
/// The change is judged against what the controller will compare it with: the spec it last
/// admitted (`admitted`, from its annotation) when known, else the stored spec. `old_ov` is the
/// OperatorVersion `stored` runs, `new_ov` the one `proposed` references (the same object unless
/// this is an upgrade).
pub fn judge_client_change(
    stored: &Instance,
    admitted: Option<&kudo_api::InstanceSpec>,
    proposed: &kudo_api::InstanceSpec,
    old_ov: &OperatorVersion,
    new_ov: &OperatorVersion,
) -> Result<Decision, ChangeDenied> {
    let mut old = stored.clone();
    if let Some(spec) = admitted {
        old.spec = spec.clone();
    }
    let mut new = stored.clone();
    new.spec = proposed.clone();
    let deleting = stored.metadata.other.contains_key("deletionTimestamp");
    match decide(&InstanceChange {
        old: Some(&old),
        new: &new,
        old_ov,
        new_ov,
        deleting,
    })
    .decision
    {
        Decision::Deny { message } => Err(ChangeDenied(message)),
        d => Ok(d),
    }
}

/// A change KUDO's admission webhook would have refused ([`judge_client_change`]); the text is
/// KUDO's wording of the denial.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ChangeDenied(pub String);

/// Why changed parameters cannot select a plan ([`triggered_by_parameter_update`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TriggerError {
    #[error("param {param} defined trigger plan {plan}, but plan not defined in operatorversion")]
    UndefinedPlan { param: String, plan: String },
    #[error("couldn't find any plans that would be triggered by the update")]
    NoPlan,
    #[error("triggering multiple plans: [{}] at once is not allowed", .0.join(" "))]
    MultiplePlans(Vec<String>),
}

/// The plan a set of changed parameters triggers: their `trigger`s (each must name an existing
/// plan); none → `update`, else `deploy`; more than one distinct plan is an error. `Ok(None)` when
/// no parameter changed.
pub fn triggered_by_parameter_update(
    params: &[&Parameter],
    ov: &OperatorVersion,
) -> Result<Option<String>, TriggerError> {
    if params.is_empty() {
        return Ok(None);
    }
    let mut plans: Vec<&str> = Vec::new();
    for p in params {
        if p.trigger.is_empty() {
            continue;
        }
        if !plan_exists(ov, &p.trigger) {
            return Err(TriggerError::UndefinedPlan {
                param: p.name.clone(),
                plan: p.trigger.clone(),
            });
        }
        if !plans.contains(&p.trigger.as_str()) {
            plans.push(&p.trigger);
        }
    }
    match plans.as_slice() {
        [] => select_plan(ov, &[UPDATE, DEPLOY])
            .map(Some)
            .ok_or(TriggerError::NoPlan),
        [one] => Ok(Some(one.to_string())),
        many => Err(TriggerError::MultiplePlans(
            many.iter().map(|p| p.to_string()).collect(),
        )),
    }
}

/// The Instance's parameters with each `spec.parameterSources` entry stood in by a marker naming
/// its source (never a value): the manager reads and validates sourced values at render time, and
/// a changed source counts as a change of its parameter.
pub fn with_sources(spec: &kudo_api::InstanceSpec) -> BTreeMap<String, String> {
    let mut out = spec.parameters.clone();
    for (name, src) in &spec.parameter_sources {
        let marker = match &src.secret_key_ref {
            Some(s) => format!("\u{0}secretKeyRef:{}/{}", s.name, s.key),
            None => "\u{0}source".to_string(),
        };
        out.insert(name.clone(), marker);
    }
    out
}

/// The declarations of the parameters that are not sourced (their values are validated here; the
/// sourced ones by the manager when it reads them).
fn unsourced(defs: &[Parameter], spec: &kudo_api::InstanceSpec) -> Vec<Parameter> {
    defs.iter()
        .filter(|p| !spec.parameter_sources.contains_key(&p.name))
        .cloned()
        .collect()
}

/// Validates instance values against the OV's parameter declarations (KUDO's
/// `Parameter.ValidateValue`): a required parameter without default needs a non-empty value; a
/// non-empty value must match the declared type and, for enums, be one of the listed strings.
/// Values of undeclared parameters are not looked at here.
pub fn validate_parameters(
    defs: &[Parameter],
    values: &BTreeMap<String, String>,
) -> Result<(), ParamValueError> {
    for p in defs {
        let v = values.get(&p.name).map_or("", String::as_str);
        validate_value(p, v)?;
    }
    Ok(())
}

/// Validates one value (see [`validate_parameters`]) with the one definition of KUDO's rule and
/// wording that `package verify`, `install` and the CLI use too
/// ([`kudo_package::params::validate_value`]: Go's `strconv` messages and quoting).
pub fn validate_value(p: &Parameter, v: &str) -> Result<(), ParamValueError> {
    kudo_package::params::validate_value(p, v)
}

/// Go's `strconv.ParseBool` (one definition: [`kudo_package::params::parse_bool`]).
pub fn parse_go_bool(v: &str) -> Option<bool> {
    kudo_package::params::parse_bool(v)
}

/// KUDO's controller-side special case for deletes: an Instance being deleted whose OV has a
/// `cleanup` plan that has never run and is not scheduled gets `cleanup` scheduled (with a fresh
/// uid), overriding any running plan.
pub fn should_schedule_cleanup(instance: &Instance, ov: &OperatorVersion, deleting: bool) -> bool {
    if !deleting || !plan_exists(ov, CLEANUP) || instance.spec.plan_execution.plan_name == CLEANUP {
        return false;
    }
    instance
        .status
        .as_ref()
        .and_then(|s| s.plan_status.get(CLEANUP))
        .is_none_or(|ps| ps.status == ExecutionStatus::NeverRun)
}

/// The `cleanup` run to schedule for an Instance being deleted, given the spec `exec` about to be
/// executed: a NeverRun execution under a fresh `uid()` when [`should_schedule_cleanup`] says so,
/// else `None`.
pub fn cleanup_run(
    instance: &Instance,
    exec: &kudo_api::InstanceSpec,
    ov: &OperatorVersion,
    deleting: bool,
    uid: impl FnOnce() -> String,
) -> Option<PlanExecution> {
    let mut probe = instance.clone();
    probe.spec = exec.clone();
    should_schedule_cleanup(&probe, ov, deleting).then(|| PlanExecution {
        plan_name: CLEANUP.into(),
        uid: uid(),
        status: Some(ExecutionStatus::NeverRun),
    })
}

/// Whether the cleanup finalizer may be removed: the OV has no `cleanup` plan (any more), or the
/// cleanup plan COMPLETED. On FATAL_ERROR the finalizer stays and a human must intervene (KUDO).
pub fn cleanup_finalizer_removable(instance: &Instance, ov: &OperatorVersion) -> bool {
    if !plan_exists(ov, CLEANUP) {
        return true;
    }
    instance
        .status
        .as_ref()
        .and_then(|s| s.plan_status.get(CLEANUP))
        .is_some_and(|ps| ps.status == ExecutionStatus::Complete)
}

/// Names of the parameters whose values differ between two parameter maps (changed, added or
/// removed) — handy for events.
pub fn parameter_diff(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> BTreeSet<String> {
    old.keys()
        .chain(new.keys())
        .filter(|k| old.get(*k) != new.get(*k))
        .cloned()
        .collect()
}
