//! What one Instance says about the rollout's change: whether it carries the rollout's mark and
//! how the marked run went ([`view`]), whether it is healthy for the gate ([`health`]), whether
//! another plan keeps it busy ([`busy`]), and what changing it would do ([`judge`]).

use std::collections::BTreeMap;

use kudo_api::rollout::Target;
use kudo_api::{ExecutionStatus, Instance, InstanceSpec, OperatorVersion};

use super::mark::RolloutMark;
use crate::readiness::READY;
use crate::revision::recorded_parameters;
use crate::rollback::RollbackMark;
use crate::triggers::{Decision, judge_client_change};

/// How the rollout's change of an Instance stands, read from the Instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    /// No mark of this rollout.
    Untouched,
    /// Marked; the manager has not admitted the change yet.
    Admitting {
        /// When the change was written (RFC 3339, from the mark).
        at: String,
    },
    /// The rollout's run goes on.
    Running {
        /// When the change was written (RFC 3339, from the mark).
        at: String,
        /// The uid of the run the manager admitted for the change.
        run: String,
        /// The plan that run executes.
        plan: String,
    },
    /// The rollout's run ended with this status (COMPLETE, FATAL_ERROR or CANCELLED), or another
    /// run replaced it (`None`).
    Ended {
        /// When the change was written (RFC 3339, from the mark).
        at: String,
        /// The uid of the run the manager admitted for the change.
        run: String,
        /// The plan that run executed.
        plan: String,
        /// Its final status; `None`: another run replaced it before one was recorded.
        status: Option<ExecutionStatus>,
    },
}

impl View {
    /// When the change was written, once it is.
    pub fn at(&self) -> Option<&str> {
        match self {
            View::Untouched => None,
            View::Admitting { at } | View::Running { at, .. } | View::Ended { at, .. } => Some(at),
        }
    }

    /// The rollout's run of it and that run's plan, once the manager admitted the change.
    pub fn run(&self) -> Option<(&str, &str)> {
        match self {
            View::Running { run, plan, .. } | View::Ended { run, plan, .. } => Some((run, plan)),
            _ => None,
        }
    }
}

/// The view of `inst` for the rollout with uid `rollout_uid`.
pub fn view(inst: &Instance, rollout_uid: &str) -> View {
    let Some(mark) = RolloutMark::of(&inst.metadata.annotations).filter(|m| m.uid == rollout_uid) else {
        return View::Untouched;
    };
    let Some(run) = mark.run else {
        return View::Admitting { at: mark.at };
    };
    let pe = &inst.spec.plan_execution;
    let statuses = inst.status.as_ref().map(|s| &s.plan_status);
    // Between the write that unschedules a run and the one that stores its final status, the
    // run's end is only in the ended-run record (a quick run may not be in the status at all).
    let ended = ended_record_of(inst).filter(|p| p.uid == run);
    let recorded = statuses
        .and_then(|s| s.values().find(|p| p.uid == run))
        .filter(|p| p.status.is_terminal() || ended.is_none())
        .or(ended.as_ref());
    let at = mark.at;
    if pe.uid == run && !pe.status.is_some_and(ExecutionStatus::is_terminal) {
        let plan = pe.plan_name.clone();
        if let Some(p) = recorded.filter(|p| p.status.is_terminal()) {
            // Ended in the status; the spec is unscheduled a moment later.
            return View::Ended {
                at,
                run,
                plan,
                status: Some(p.status),
            };
        }
        return View::Running { at, run, plan };
    }
    match recorded {
        Some(p) if p.status.is_terminal() => View::Ended {
            at,
            run,
            plan: p.name.clone(),
            status: Some(p.status),
        },
        Some(p) => View::Running {
            at,
            run,
            plan: p.name.clone(),
        },
        None => View::Ended {
            at,
            run,
            plan: pe.plan_name.clone(),
            status: None,
        },
    }
}

/// The final plan status of the run the manager unscheduled last (`kudo-rs.dev/ended-run`).
fn ended_record_of(inst: &Instance) -> Option<kudo_api::PlanStatus> {
    let record = inst
        .metadata
        .annotations
        .get(crate::reconcile::ENDED_RUN_ANNOTATION)?;
    serde_json::from_str::<kudo_api::PlanStatus>(record)
        .ok()
        .filter(|p| p.status.is_terminal())
}

/// Whether the Instance is healthy for the gate: its `Ready` condition is True for its current
/// generation, no plan is scheduled, and every rule holds (`rules`: name and CEL condition over
/// the Instance, with its non-sensitive parameters). `Err` says why not.
pub fn health(
    inst: &Instance,
    ov: Option<&OperatorVersion>,
    rules: &[(String, String)],
) -> Result<(), String> {
    if let Some(plan) = scheduled(&inst.spec) {
        return Err(format!("plan {plan} is running"));
    }
    let generation = inst.metadata.other.get("generation").and_then(|v| v.as_i64());
    let ready = inst
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == READY));
    match ready {
        Some(c)
            if c.status == "True"
                && (c.observed_generation.is_none() || c.observed_generation >= generation) => {}
        Some(c) if c.status == "True" => return Err("Ready is not yet for its current spec".into()),
        Some(c) => return Err(format!("Ready is {} ({}: {})", c.status, c.reason, c.message)),
        None => return Err("no Ready condition yet".into()),
    }
    if rules.is_empty() {
        return Ok(());
    }
    let object = serde_json::to_value(inst).map_err(|e| e.to_string())?;
    let params = match ov {
        Some(ov) => recorded_parameters(&inst.spec, ov),
        None => inst.spec.parameters.clone(),
    };
    for (name, condition) in rules {
        match crate::autopilot::evaluate(condition, &object, &params) {
            Ok(true) => {}
            Ok(false) => return Err(format!("gate rule {name} is false")),
            Err(e) => return Err(format!("gate rule {name}: {e}")),
        }
    }
    Ok(())
}

/// The plan scheduled or running by `spec`, if any.
fn scheduled(spec: &InstanceSpec) -> Option<&str> {
    let pe = &spec.plan_execution;
    (!pe.plan_name.is_empty() && !pe.status.is_some_and(ExecutionStatus::is_terminal))
        .then_some(pe.plan_name.as_str())
}

/// Why the rollout must not change the Instance now (it waits; it never cancels): a plan is
/// scheduled or running, a change of someone else's waits for admission, or a rollback or retry
/// was asked for and not started yet.
pub fn busy(inst: &Instance) -> Option<String> {
    if let Some(plan) = scheduled(&inst.spec) {
        return Some(format!("plan {plan} is running"));
    }
    let a = &inst.metadata.annotations;
    if RollbackMark::pending(a).is_some() {
        return Some("a rollback waits to be admitted".into());
    }
    if let Some(admitted) = crate::reconcile::admitted_spec(inst) {
        let values = |s: &InstanceSpec| {
            (
                s.operator_version.name.clone(),
                s.parameters.clone(),
                s.parameter_sources.clone(),
            )
        };
        if values(&admitted) != values(&inst.spec) {
            return Some("a change waits to be admitted by the manager".into());
        }
    }
    None
}

/// The spec the rollout's change gives `inst`: the target OperatorVersion and parameter values.
pub fn proposed(inst: &Instance, target: &Target) -> InstanceSpec {
    let mut spec = inst.spec.clone();
    if let Some(ov) = target.operator_version.as_deref().filter(|o| !o.is_empty()) {
        spec.operator_version.name = ov.to_string();
    }
    spec.parameters
        .extend(target.parameters.iter().map(|(k, v)| (k.clone(), v.clone())));
    spec
}

/// What changing an Instance would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// It has the target already: nothing would run.
    AtTarget,
    /// KUDO's admission rules refuse the change, or it cannot be made (the message says why).
    Refused(String),
    /// The change runs this plan.
    Runs(String),
}

/// Judges the change of `inst` (running `current`) to the target (`target_ov`: the target
/// OperatorVersion, `None` when it does not exist where the Instance looks) by KUDO's rules.
pub fn judge(
    inst: &Instance,
    current: &OperatorVersion,
    target_ov: Option<&OperatorVersion>,
    target: &Target,
) -> Judged {
    let proposed = proposed(inst, target);
    if proposed == inst.spec {
        return Judged::AtTarget;
    }
    let Some(new_ov) = target_ov else {
        let ns = inst
            .spec
            .operator_version_namespace(inst.metadata.namespace.as_deref().unwrap_or_default());
        return Judged::Refused(format!(
            "OperatorVersion {} not found in namespace {ns}",
            proposed.operator_version.name
        ));
    };
    if let Some(p) = sensitive(new_ov, &target.parameters) {
        return Judged::Refused(format!(
            "parameter {p} is sensitive: a rollout does not set sensitive values"
        ));
    }
    if new_ov.spec.operator.name != current.spec.operator.name {
        return Judged::Refused(format!(
            "it runs operator {}, not {}",
            current.spec.operator.name, new_ov.spec.operator.name
        ));
    }
    let admitted = crate::reconcile::admitted_spec(inst);
    match judge_client_change(inst, admitted.as_ref(), &proposed, current, new_ov) {
        Ok(Decision::Schedule { plan, .. }) => Judged::Runs(plan),
        Ok(_) => Judged::AtTarget,
        Err(denied) => Judged::Refused(denied.0),
    }
}

fn sensitive<'p>(ov: &OperatorVersion, params: &'p BTreeMap<String, String>) -> Option<&'p str> {
    params
        .keys()
        .find(|k| {
            ov.spec
                .parameters
                .iter()
                .any(|p| &p.name == *k && p.is_sensitive())
        })
        .map(String::as_str)
}

/// Where a rollback of `inst` to the values of revision data `data` stands, when its current values
/// are those (`None` otherwise): `Ok(true)` rolled back (its rollback run, if one ran, completed),
/// `Ok(false)` still running, `Err` the rollback run failed.
pub fn rolled_back(
    inst: &Instance,
    ov: &OperatorVersion,
    data: &crate::revision::RevisionData,
) -> Option<Result<bool, String>> {
    if !crate::rollback::restores(data, &inst.spec, ov) {
        return None;
    }
    if scheduled(&inst.spec).is_some() {
        return Some(Ok(false));
    }
    let uid = RollbackMark::of_any(&inst.metadata.annotations).and_then(|m| m.uid);
    let run = uid.and_then(|u| {
        inst.status
            .as_ref()
            .and_then(|s| s.plan_status.values().find(|p| p.uid == u).cloned())
    });
    Some(match run {
        Some(p) if p.status == ExecutionStatus::Complete || !p.status.is_terminal() => {
            Ok(p.status == ExecutionStatus::Complete)
        }
        Some(p) => Err(format!("its rollback plan {} ended {}", p.name, p.status)),
        None => Ok(true),
    })
}
