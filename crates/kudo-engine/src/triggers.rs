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
/// The plan a parameter change runs when no changed parameter names a `trigger` (else `deploy`).
pub const UPDATE: &str = "update";
/// The plan an upgrade to another OperatorVersion runs (falling back to `update`, then `deploy`).
pub const UPGRADE: &str = "upgrade";
/// The plan the manager runs when an Instance is deleted, before its finalizer is released.
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
    Schedule {
        /// The plan to schedule.
        plan: String,
        /// Why it is scheduled.
        reason: ScheduleReason,
    },
    /// KUDO would have rejected the change; `message` is KUDO's wording.
    Deny {
        /// KUDO's wording of the refusal.
        message: String,
    },
    /// The user asked to stop the scheduled plan `plan` (run `uid`): set
    /// `spec.planExecution.status: CANCELLED` on that run, or cleared `spec.planExecution.planName`.
    /// The controller stops the run at the next task boundary (status CANCELLED) and unschedules
    /// it. Evaluated before the parameter diff, so a denied parameter change still stored does not
    /// block the cancellation (kudo-rs extension; KUDO denied every cancellation).
    Cancel {
        /// The plan to stop.
        plan: String,
        /// `planExecution.uid` of the run to stop.
        uid: String,
    },
    /// `spec.planExecution.status` became terminal: clear `spec.planExecution`.
    ClearTerminal,
    /// Nothing to do for plan execution.
    NoChange,
}

/// The result of admitting a change: the decision plus the spec edits KUDO's webhook made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// What the change means for plan execution.
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
    /// The Instance as changed.
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
    if let Err(e) = validate_parameters(&unsourced(&ov.spec.parameters, &new.spec), &params)
        .and_then(|()| validate_rules(ov, &new.spec, &params))
    {
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

/// What kind of change an update of the Instance spec is, as KUDO's webhook classified it.
struct UpdateKind<'a> {
    new_plan: &'a str,
    old_plan: &'a str,
    had_plan: bool,
    is_upgrade: bool,
    is_novel_plan: bool,
    is_plan_override: bool,
    is_plan_retriggered: bool,
    is_plan_terminal: bool,
    /// A cleared `planName` (without an upgrade) or an explicit `CANCELLED`.
    is_cancellation: bool,
}

impl<'a> UpdateKind<'a> {
    fn of(old: &'a Instance, new: &'a Instance) -> UpdateKind<'a> {
        let (old_pe, new_pe) = (&old.spec.plan_execution, &new.spec.plan_execution);
        let new_plan = new_pe.plan_name.as_str();
        let old_plan = old_pe.plan_name.as_str();
        let had_plan = !old_plan.is_empty();
        let is_upgrade = old.spec.operator_version != new.spec.operator_version;
        let is_cancel_request = had_plan
            && new_plan == old_plan
            && new_pe.uid == old_pe.uid
            && new_pe.status == Some(ExecutionStatus::Cancelled);
        // A cleared planName counts only without an upgrade (a whole new spec without
        // planExecution, e.g. from `kubectl replace`, keeps KUDO's upgrade denial); an explicit
        // CANCELLED always does.
        let is_plan_cancellation = had_plan && new_plan.is_empty();
        UpdateKind {
            new_plan,
            old_plan,
            had_plan,
            is_upgrade,
            is_novel_plan: !had_plan && !new_plan.is_empty(),
            is_plan_override: had_plan && !new_plan.is_empty() && new_plan != old_plan,
            is_plan_retriggered: had_plan && new_plan == old_plan && new_pe.uid != old_pe.uid,
            is_plan_terminal: new_pe.status.is_some_and(|s| s.is_terminal()),
            is_cancellation: (is_plan_cancellation && !is_upgrade) || is_cancel_request,
        }
    }
}

/// The parameters an update changes: changed or added values (which must be declared in the new
/// OV; only those declared in the old OV count as changes), and removed values.
fn changed_parameters<'a>(
    who: &str,
    old_params: &BTreeMap<String, String>,
    new_params: &BTreeMap<String, String>,
    old_ov: &OperatorVersion,
    ov: &'a OperatorVersion,
) -> Result<(Vec<&'a Parameter>, Vec<&'a Parameter>), String> {
    let mut changed: Vec<&Parameter> = Vec::new();
    for (k, v) in new_params {
        if old_params.get(k) == Some(v) {
            continue;
        }
        let Some(def) = find_param(ov, k) else {
            return Err(format!(
                "failed to update Instance {who}: failed to find parameter {k:?} in the OperatorVersion"
            ));
        };
        if find_param(old_ov, k).is_some() {
            changed.push(def);
        }
    }
    let removed = old_params
        .keys()
        .filter(|k| !new_params.contains_key(*k))
        .filter_map(|k| find_param(ov, k))
        .collect();
    Ok((changed, removed))
}

/// KUDO's immutability rules. Without an upgrade a changed immutable parameter is refused; on an
/// upgrade a parameter that became immutable, or was added as immutable, needs a value, and the
/// values of parameters the new OV no longer declares are dropped from `new_params` (returned as
/// the names to remove).
fn check_immutability(
    who: &str,
    upgrade: bool,
    changed: &[&Parameter],
    old_params: &BTreeMap<String, String>,
    new_params: &mut BTreeMap<String, String>,
    old_ov: &OperatorVersion,
    ov: &OperatorVersion,
) -> Result<Vec<String>, String> {
    let prefix = format!("failed to check immutable parameters for Instance {who}");
    if !upgrade {
        if let Some(p) = changed.iter().find(|p| p.is_immutable()) {
            return Err(format!(
                "{prefix}: parameter '{}' is immutable but was changed from '{}' to '{}'",
                p.name,
                old_params.get(&p.name).map_or("", String::as_str),
                new_params.get(&p.name).map_or("", String::as_str)
            ));
        }
        return Ok(Vec::new());
    }
    let ov_name = &ov.metadata.name;
    for np in &ov.spec.parameters {
        if let Some(op) = find_param(old_ov, &np.name)
            && np.is_immutable()
            && !op.is_immutable()
            && !new_params.contains_key(&np.name)
        {
            return Err(format!(
                "{prefix}: parameter '{}' was changed to immutable in operator version {ov_name} but no value was provided",
                np.name
            ));
        }
    }
    let mut remove = Vec::new();
    for op in &old_ov.spec.parameters {
        if find_param(ov, &op.name).is_none() && new_params.remove(&op.name).is_some() {
            remove.push(op.name.clone());
        }
    }
    for np in &ov.spec.parameters {
        if find_param(old_ov, &np.name).is_none() && np.is_immutable() && !new_params.contains_key(&np.name) {
            let tail = match &np.default {
                Some(d) => format!(" (default would be {d})"),
                None => String::new(),
            };
            return Err(format!(
                "{prefix}: parameter '{}' was added in operator version {ov_name}, but no value was provided{tail}",
                np.name
            ));
        }
    }
    Ok(remove)
}

/// While the Instance is being deleted only `cleanup` may be scheduled, and nothing else changed.
fn deny_while_deleting(who: &str, k: &UpdateKind, parameter_update: bool) -> Option<String> {
    let (old_plan, new_plan) = (k.old_plan, k.new_plan);
    if old_plan == CLEANUP && new_plan != old_plan {
        return Some(format!(
            "failed to update Instance {who}: '{old_plan}' plan can not be cancelled or overridden by another plan since the instance is being deleted"
        ));
    }
    if parameter_update || k.is_upgrade {
        return Some(format!(
            "failed to update Instance {who}: parameter update and/or upgrade is not allowed when an instance is being deleted"
        ));
    }
    if !new_plan.is_empty() && new_plan != CLEANUP {
        return Some(format!(
            "failed to update Instance {who}: only '{CLEANUP}' plan can be scheduled when an instance is being deleted"
        ));
    }
    None
}

/// The combinations KUDO's webhook refused in the normal life-cycle (`triggered`: the plan a
/// parameter update triggers).
fn deny_in_lifecycle(who: &str, k: &UpdateKind, triggered: Option<&str>, ov_ref: &str) -> Option<String> {
    let (old_plan, new_plan) = (k.old_plan, k.new_plan);
    let fail = |m: String| Some(format!("failed to update Instance {who}: {m}"));
    if let Some(t) = triggered
        && k.had_plan
        && t != old_plan
    {
        return fail(format!(
            "plan '{old_plan}' is scheduled (or running) and an update would trigger a different plan '{t}'"
        ));
    }
    if k.is_upgrade && k.had_plan {
        return fail(format!(
            "upgrade to new OperatorVersion {ov_ref} while a plan '{old_plan}' is scheduled (or running) is not allowed"
        ));
    }
    if k.is_upgrade && k.is_novel_plan {
        return fail(format!(
            "upgrade to new OperatorVersion {ov_ref} and triggering new plan '{new_plan}' is not allowed"
        ));
    }
    if k.is_upgrade && triggered.is_some_and(|t| t != DEPLOY) {
        return fail(format!(
            "upgrade to new OperatorVersion {ov_ref} together with a parameter update triggering '{}' is not allowed",
            triggered.unwrap_or("")
        ));
    }
    if k.is_plan_override {
        return fail(format!(
            "overriding currently scheduled (or running) plan '{old_plan}' with '{new_plan}' is not supported"
        ));
    }
    if triggered.is_some() && k.is_novel_plan {
        return fail(format!(
            "triggering one plan '{new_plan}' directly and through parameter update '{}' is not allowed",
            triggered.unwrap_or("")
        ));
    }
    if new_plan == CLEANUP {
        return fail(format!(
            "only the controller schedules the '{CLEANUP}' plan when the instance is deleted"
        ));
    }
    None
}

/// Which plan an admitted update runs (`changed`: the names of the changed parameters).
fn update_decision(
    who: &str,
    k: &UpdateKind,
    triggered: Option<String>,
    changed: Vec<String>,
    ov: &OperatorVersion,
) -> Result<Decision, String> {
    if k.is_upgrade {
        return match select_plan(ov, &[UPGRADE, UPDATE, DEPLOY]) {
            Some(plan) => Ok(Decision::Schedule {
                plan,
                reason: ScheduleReason::Upgrade,
            }),
            None => Err(format!(
                "failed to update Instance {who}: couldn't find any suitable plan that would be triggered by an OperatorVersion upgrade"
            )),
        };
    }
    let schedule = |plan: &str, reason| Decision::Schedule {
        plan: plan.to_string(),
        reason,
    };
    Ok(if let Some(plan) = triggered {
        schedule(&plan, ScheduleReason::ParameterUpdate(changed))
    } else if k.is_novel_plan {
        schedule(k.new_plan, ScheduleReason::DirectTrigger)
    } else if k.is_plan_terminal {
        Decision::ClearTerminal
    } else if k.is_plan_retriggered {
        schedule(k.new_plan, ScheduleReason::Retrigger)
    } else {
        Decision::NoChange
    })
}

/// The parameters an update changes or removes (judged immutable where they must not change) and
/// the parameters to drop, with the new values validated; `Err` is KUDO's denial message.
fn judge_parameters<'a>(
    who: &str,
    k: &UpdateKind<'_>,
    old: &Instance,
    new: &Instance,
    old_ov: &OperatorVersion,
    ov: &'a OperatorVersion,
) -> Result<(Vec<&'a Parameter>, Vec<String>), String> {
    let old_params = &with_sources(&old.spec);
    let mut new_params = with_sources(&new.spec);
    let (changed, removed) = changed_parameters(who, old_params, &new_params, old_ov, ov)?;
    // Only changed values are judged immutable; removed ones still trigger their plans.
    let removals = check_immutability(
        who,
        k.is_upgrade,
        &changed,
        old_params,
        &mut new_params,
        old_ov,
        ov,
    )?;
    validate_parameters(&unsourced(&ov.spec.parameters, &new.spec), &new_params)
        .and_then(|()| validate_rules(ov, &new.spec, &new_params))
        .map_err(|e| format!("failed to validate parameters for Instance {}: {e}", ns_name(new)))?;
    Ok(([changed, removed].concat(), removals))
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
    let k = UpdateKind::of(old, new);
    // Cancellation first: it must not depend on whatever else the change contains (a parameter
    // change denied earlier is typically still stored while the plan runs). While the instance
    // is being deleted the uninstall rules below apply instead.
    if !deleting && k.is_cancellation {
        return Admission::only(Decision::Cancel {
            plan: k.old_plan.to_string(),
            uid: old.spec.plan_execution.uid.clone(),
        });
    }
    if !k.new_plan.is_empty() && !plan_exists(ov, k.new_plan) {
        return Admission::deny(format!("plan {} does not exist", k.new_plan));
    }
    let (updated, remove_parameters) = match judge_parameters(&who, &k, old, new, old_ov, ov) {
        Ok(c) => c,
        Err(message) => return Admission::deny(message),
    };
    let triggered = match triggered_by_parameter_update(&updated, ov) {
        Ok(t) => t,
        Err(e) => return Admission::deny(format!("failed to update Instance {who}: {e}")),
    };
    let mut changed_names: Vec<String> = updated.iter().map(|p| p.name.clone()).collect();
    changed_names.sort();
    changed_names.dedup();
    let denied = if deleting {
        deny_while_deleting(&who, &k, triggered.is_some())
    } else {
        deny_in_lifecycle(&who, &k, triggered.as_deref(), &new.spec.operator_version.name)
    };
    if let Some(message) = denied {
        return Admission::deny(message);
    }
    let decision = if deleting {
        Ok(Decision::NoChange)
    } else {
        update_decision(&who, &k, triggered, changed_names, ov)
    };
    match decision {
        Ok(decision) => Admission {
            decision,
            set_parameters: BTreeMap::new(),
            remove_parameters,
            add_cleanup_finalizer: false,
        },
        Err(message) => Admission::deny(message),
    }
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
    /// A changed parameter's `trigger` names a plan the OperatorVersion does not have.
    #[error("param {param} defined trigger plan {plan}, but plan not defined in operatorversion")]
    UndefinedPlan {
        /// The parameter.
        param: String,
        /// The plan its `trigger` names.
        plan: String,
    },
    /// No parameter names a `trigger` and the OperatorVersion has neither `update` nor `deploy`.
    #[error("couldn't find any plans that would be triggered by the update")]
    NoPlan,
    /// The changed parameters name different trigger plans (holds them).
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

/// The package-level rules of the OperatorVersion (the cross-parameter CEL rules of
/// `params.yaml`'s root `x-kubernetes-validations`) over the Instance's values. With sourced
/// parameters the values are not all known here: the rules are then judged when the manager
/// renders, where the sourced values are read ([`kudo_package::render::validate_parameters`]).
pub fn validate_rules(
    ov: &OperatorVersion,
    spec: &kudo_api::InstanceSpec,
    values: &BTreeMap<String, String>,
) -> Result<(), ParamValueError> {
    if !spec.parameter_sources.is_empty() {
        return Ok(());
    }
    let s = &ov.spec;
    kudo_package::params::check_rules(&s.parameters, &s.parameter_validations, values)
        .into_iter()
        .next()
        .map_or(Ok(()), Err)
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
