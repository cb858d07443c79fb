//! Plan triggering rules. The `u..` tests restate, one per case, the behaviour pinned by KUDO's
//! `pkg/webhook/instance_admission_test.go` (`TestValidateUpdate` and `Test_triggeredPlan`); the
//! rest cover creation, parameter validation and the deletion helpers.

use std::collections::BTreeMap;

use kudo_api::{
    ExecutionStatus, Instance, InstanceSpec, InstanceStatus, ObjectMeta, ObjectReference, OperatorVersion,
    OperatorVersionSpec, Parameter, Plan, PlanExecution, PlanStatus,
};
use kudo_engine::triggers::{
    self, Admission, Decision, InstanceChange, ScheduleReason, decide, triggered_by_parameter_update,
};

const UUID: &str = "5b1c7d5e-0000-4000-8000-000000000001";

fn param(name: &str, trigger: &str) -> Parameter {
    Parameter {
        name: name.into(),
        trigger: trigger.into(),
        ..Default::default()
    }
}

fn immutable(mut p: Parameter) -> Parameter {
    p.immutable = Some(true);
    p
}

fn ov_named(name: &str, plans: &[&str], params: Vec<Parameter>) -> OperatorVersion {
    OperatorVersion {
        api_version: "kudo.dev/v1beta1".into(),
        kind: "OperatorVersion".into(),
        metadata: ObjectMeta {
            name: name.into(),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: OperatorVersionSpec {
            plans: plans.iter().map(|p| (p.to_string(), Plan::default())).collect(),
            parameters: params,
            ..Default::default()
        },
        status: None,
    }
}

/// KUDO's fixture: plans deploy/update/cleanup/backup and parameters with various triggers.
fn ov() -> OperatorVersion {
    ov_named(
        "foo-operator",
        &["deploy", "update", "cleanup", "backup"],
        vec![
            param("foo", "deploy"),
            param("other-foo", "deploy"),
            param("bar", "update"),
            param("backup", "backup"),
            param("invalid", "missing"),
            immutable(param("readonly", "deploy")),
            param("unnamed", "deploy"),
        ],
    )
}

fn new_ov() -> OperatorVersion {
    let mut o = ov();
    o.metadata.name = "foo-operator-2.0".into();
    o
}

fn idle() -> Instance {
    Instance {
        api_version: "kudo.dev/v1beta1".into(),
        kind: "Instance".into(),
        metadata: ObjectMeta {
            name: "test".into(),
            namespace: Some("test".into()),
            ..Default::default()
        },
        spec: InstanceSpec {
            operator_version: ObjectReference {
                name: "foo-operator".into(),
                ..Default::default()
            },
            parameters: [
                ("foo".to_string(), "foo".to_string()),
                ("readonly".to_string(), "oldvalue".to_string()),
            ]
            .into(),
            plan_execution: PlanExecution::default(),
            service_account_name: String::new(),
            ..Default::default()
        },
        status: None,
    }
}

fn with_plan(mut i: Instance, plan: &str, uid: &str) -> Instance {
    i.spec.plan_execution = PlanExecution {
        plan_name: plan.into(),
        uid: uid.into(),
        status: None,
    };
    i
}

fn scheduled() -> Instance {
    with_plan(idle(), "deploy", UUID)
}

fn upgraded() -> Instance {
    let mut i = idle();
    i.spec.operator_version.name = "foo-operator-2.0".into();
    i
}

fn with_params(mut i: Instance, params: &[(&str, &str)]) -> Instance {
    i.spec.parameters = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    i
}

fn admit(
    old: &Instance,
    new: &Instance,
    ov: &OperatorVersion,
    old_ov: &OperatorVersion,
    deleting: bool,
) -> Admission {
    decide(&InstanceChange {
        old: Some(old),
        new,
        old_ov,
        new_ov: ov,
        deleting,
    })
}

/// Shorthand for KUDO's `(want *string, wantErr bool)`: `Some("")` = clear, `Some(plan)` = schedule,
/// `None` = no change; `Err` = deny.
fn outcome(a: &Admission) -> Result<Option<String>, String> {
    match &a.decision {
        Decision::Schedule { plan, .. } => Ok(Some(plan.clone())),
        Decision::ClearTerminal => Ok(Some(String::new())),
        Decision::Cancel { plan, .. } => Ok(Some(format!("cancel {plan}"))),
        Decision::NoChange => Ok(None),
        Decision::Deny { message } => Err(message.clone()),
    }
}

fn denied(a: &Admission) -> String {
    outcome(a).expect_err("expected a denial")
}

fn some(s: &str) -> Result<Option<String>, String> {
    Ok(Some(s.to_string()))
}

// ------------------------------------------------------------------ TestValidateUpdate

#[test]
fn u01_no_change_is_a_noop() {
    assert_eq!(outcome(&admit(&idle(), &idle(), &ov(), &ov(), false)), Ok(None));
}

#[test]
fn u02_label_change_triggers_nothing() {
    let mut new = scheduled();
    new.metadata.labels.insert("label".into(), "label2".into());
    assert_eq!(outcome(&admit(&scheduled(), &new, &ov(), &ov(), false)), Ok(None));
}

#[test]
fn u03_direct_trigger_allowed_when_idle() {
    let a = admit(&idle(), &scheduled(), &ov(), &ov(), false);
    assert_eq!(
        a.decision,
        Decision::Schedule {
            plan: "deploy".into(),
            reason: ScheduleReason::DirectTrigger
        }
    );
}

#[test]
fn u04_same_plan_retriggered_with_new_uid() {
    let a = admit(
        &scheduled(),
        &with_plan(idle(), "deploy", "foo"),
        &ov(),
        &ov(),
        false,
    );
    assert_eq!(
        a.decision,
        Decision::Schedule {
            plan: "deploy".into(),
            reason: ScheduleReason::Retrigger
        }
    );
}

#[test]
fn u05_overriding_a_scheduled_plan_is_denied() {
    let m = denied(&admit(
        &scheduled(),
        &with_plan(idle(), "update", ""),
        &ov(),
        &ov(),
        false,
    ));
    assert_eq!(
        m,
        "failed to update Instance test/test: overriding currently scheduled (or running) plan 'deploy' with 'update' is not supported"
    );
}

fn deleted() -> Instance {
    let mut i = scheduled();
    i.metadata.finalizers = vec![kudo_api::CLEANUP_FINALIZER.into()];
    i
}

fn uninstalling() -> Instance {
    with_plan(deleted(), "cleanup", UUID)
}

#[test]
fn u06_cleanup_may_override_while_deleting() {
    assert_eq!(
        outcome(&admit(&deleted(), &uninstalling(), &ov(), &ov(), true)),
        Ok(None)
    );
}

#[test]
fn u07_cleanup_cannot_be_overridden_while_deleting() {
    let m = denied(&admit(
        &uninstalling(),
        &with_plan(deleted(), "deploy", ""),
        &ov(),
        &ov(),
        true,
    ));
    assert!(m.contains("'cleanup' plan can not be cancelled or overridden by another plan since the instance is being deleted"), "{m}");
}

#[test]
fn u08_cleanup_cannot_be_cancelled_while_deleting() {
    let m = denied(&admit(
        &uninstalling(),
        &with_plan(deleted(), "", ""),
        &ov(),
        &ov(),
        true,
    ));
    assert!(m.contains("can not be cancelled or overridden"), "{m}");
}

#[test]
fn u09_terminal_plan_execution_is_cleared() {
    let mut new = scheduled();
    new.spec.plan_execution.status = Some(ExecutionStatus::Complete);
    assert_eq!(
        admit(&scheduled(), &new, &ov(), &ov(), false).decision,
        Decision::ClearTerminal
    );
    // FATAL_ERROR and our CANCELLED are terminal too
    new.spec.plan_execution.status = Some(ExecutionStatus::FatalError);
    assert_eq!(
        admit(&scheduled(), &new, &ov(), &ov(), false).decision,
        Decision::ClearTerminal
    );
    // ... but CANCELLED on the scheduled run is a cancel request (kudo-rs extension)
    new.spec.plan_execution.status = Some(ExecutionStatus::Cancelled);
    assert_eq!(
        admit(&scheduled(), &new, &ov(), &ov(), false).decision,
        Decision::Cancel {
            plan: "deploy".into(),
            uid: UUID.into()
        }
    );
    // a non-terminal status is no change
    new.spec.plan_execution.status = Some(ExecutionStatus::InProgress);
    assert_eq!(
        admit(&scheduled(), &new, &ov(), &ov(), false).decision,
        Decision::NoChange
    );
}

#[test]
fn u10_user_cannot_trigger_cleanup() {
    let m = denied(&admit(
        &idle(),
        &with_plan(idle(), "cleanup", ""),
        &ov(),
        &ov(),
        false,
    ));
    assert_eq!(
        m,
        "failed to update Instance test/test: only the controller schedules the 'cleanup' plan when the instance is deleted"
    );
}

#[test]
fn u11_parameter_updates_denied_while_deleting() {
    let m = denied(&admit(
        &deleted(),
        &with_params(deleted(), &[("foo", "newFoo")]),
        &ov(),
        &ov(),
        true,
    ));
    assert_eq!(
        m,
        "failed to update Instance test/test: parameter update and/or upgrade is not allowed when an instance is being deleted"
    );
}

#[test]
fn u12_upgrades_denied_while_deleting() {
    let mut new = deleted();
    new.spec.operator_version.name = "foo-operator-2.0".into();
    let m = denied(&admit(&deleted(), &new, &new_ov(), &ov(), true));
    assert!(
        m.contains("parameter update and/or upgrade is not allowed when an instance is being deleted"),
        "{m}"
    );
}

#[test]
fn u13_cancelling_a_scheduled_plan_is_accepted() {
    // KUDO denied this; kudo-rs accepts a cleared planName as a cancellation of the scheduled run.
    let a = admit(&scheduled(), &with_plan(idle(), "", ""), &ov(), &ov(), false);
    assert_eq!(
        a.decision,
        Decision::Cancel {
            plan: "deploy".into(),
            uid: UUID.into()
        }
    );
    // Applying it marks the scheduled run CANCELLED (same plan and uid).
    let mut i = with_plan(idle(), "", "");
    assert!(a.apply(&mut i, "ignored"));
    assert_eq!(i.spec.plan_execution.plan_name, "deploy");
    assert_eq!(i.spec.plan_execution.uid, UUID);
    assert_eq!(i.spec.plan_execution.status, Some(ExecutionStatus::Cancelled));
}

#[test]
fn u13b_cancel_is_accepted_with_a_denied_parameter_change_still_stored() {
    // An unknown parameter would be denied on its own; together with a cancel request the cancel
    // wins (the parameter change is judged again once the plan is unscheduled).
    let mut new = scheduled();
    new.spec.plan_execution.status = Some(ExecutionStatus::Cancelled);
    new.spec.parameters.insert("NOT_DECLARED".into(), "x".into());
    assert!(
        outcome(&admit(
            &scheduled(),
            &{
                let mut n = scheduled();
                n.spec.parameters.insert("NOT_DECLARED".into(), "x".into());
                n
            },
            &ov(),
            &ov(),
            false
        ))
        .is_err()
    );
    assert_eq!(
        outcome(&admit(&scheduled(), &new, &ov(), &ov(), false)),
        some("cancel deploy")
    );
    // A CANCELLED status naming another run (different uid) is not a cancel of this one.
    let mut other = scheduled();
    other.spec.plan_execution.uid = "another-uid".into();
    other.spec.plan_execution.status = Some(ExecutionStatus::Cancelled);
    assert_ne!(
        outcome(&admit(&scheduled(), &other, &ov(), &ov(), false)),
        some("cancel deploy")
    );
}

#[test]
fn u14_upgrade_of_idle_instance_falls_back_to_update() {
    let a = admit(&idle(), &upgraded(), &ov(), &ov(), false);
    assert_eq!(
        a.decision,
        Decision::Schedule {
            plan: "update".into(),
            reason: ScheduleReason::Upgrade
        }
    );
}

#[test]
fn u15_upgrade_while_plan_scheduled_is_denied() {
    let m = denied(&admit(&scheduled(), &upgraded(), &ov(), &ov(), false));
    assert_eq!(
        m,
        "failed to update Instance test/test: upgrade to new OperatorVersion foo-operator-2.0 while a plan 'deploy' is scheduled (or running) is not allowed"
    );
}

#[test]
fn u16_upgrade_with_direct_trigger_is_denied() {
    let m = denied(&admit(
        &idle(),
        &with_plan(upgraded(), "deploy", ""),
        &ov(),
        &ov(),
        false,
    ));
    assert!(
        m.contains(
            "upgrade to new OperatorVersion foo-operator-2.0 and triggering new plan 'deploy' is not allowed"
        ),
        "{m}"
    );
}

#[test]
fn u17_parameter_update_on_idle_instance() {
    let a = admit(
        &idle(),
        &with_params(idle(), &[("foo", "newFoo")]),
        &ov(),
        &ov(),
        false,
    );
    // foo changed, readonly's value removed: both trigger deploy
    assert_eq!(
        a.decision,
        Decision::Schedule {
            plan: "deploy".into(),
            reason: ScheduleReason::ParameterUpdate(vec!["foo".into(), "readonly".into()])
        }
    );
}

#[test]
fn u18_multiple_parameters_same_plan() {
    let a = admit(
        &idle(),
        &with_params(idle(), &[("foo", "newFoo"), ("other-foo", "newOtherFoo")]),
        &ov(),
        &ov(),
        false,
    );
    assert_eq!(outcome(&a), some("deploy"));
}

#[test]
fn u19_parameter_update_restarts_the_same_scheduled_plan() {
    let a = admit(
        &scheduled(),
        &with_params(scheduled(), &[("foo", "newFoo")]),
        &ov(),
        &ov(),
        false,
    );
    assert_eq!(outcome(&a), some("deploy"));
}

#[test]
fn u20_parameter_update_triggering_other_plan_while_scheduled_is_denied() {
    // only bar changes (trigger: update) while deploy is scheduled
    let new = with_params(
        scheduled(),
        &[("foo", "foo"), ("readonly", "oldvalue"), ("bar", "newBar")],
    );
    let m = denied(&admit(&scheduled(), &new, &ov(), &ov(), false));
    assert_eq!(
        m,
        "failed to update Instance test/test: plan 'deploy' is scheduled (or running) and an update would trigger a different plan 'update'"
    );
    // KUDO's own fixture (all other values dropped) is denied as well
    assert!(
        outcome(&admit(
            &scheduled(),
            &with_params(scheduled(), &[("bar", "newBar")]),
            &ov(),
            &ov(),
            false
        ))
        .is_err()
    );
}

#[test]
fn u21_parameters_triggering_distinct_plans_are_denied() {
    let new = with_params(
        idle(),
        &[("foo", "newFoo"), ("readonly", "oldvalue"), ("bar", "newBar")],
    );
    let m = denied(&admit(&idle(), &new, &ov(), &ov(), false));
    assert_eq!(
        m,
        "failed to update Instance test/test: triggering multiple plans: [update deploy] at once is not allowed"
    );
}

#[test]
fn u22_undeclared_parameter_is_denied() {
    let mut new = idle();
    new.spec.parameters.insert("bazz".into(), "newBazz".into());
    let m = denied(&admit(&idle(), &new, &ov(), &ov(), false));
    assert_eq!(
        m,
        "failed to update Instance test/test: failed to find parameter \"bazz\" in the OperatorVersion"
    );
}

#[test]
fn u23_parameter_triggering_missing_plan_is_denied() {
    let mut new = idle();
    new.spec.parameters.insert("invalid".into(), "invalid".into());
    let m = denied(&admit(&idle(), &new, &ov(), &ov(), false));
    assert_eq!(
        m,
        "failed to update Instance test/test: param invalid defined trigger plan missing, but plan not defined in operatorversion"
    );
}

#[test]
fn u24_upgrade_with_parameter_update_triggering_non_deploy_is_denied() {
    let new = with_params(
        upgraded(),
        &[("foo", "foo"), ("readonly", "oldvalue"), ("backup", "back")],
    );
    let m = denied(&admit(&idle(), &new, &ov(), &ov(), false));
    assert_eq!(
        m,
        "failed to update Instance test/test: upgrade to new OperatorVersion foo-operator-2.0 together with a parameter update triggering 'backup' is not allowed"
    );
}

#[test]
fn u25_upgrade_with_parameter_update_triggering_deploy_is_allowed() {
    let a = admit(
        &idle(),
        &with_params(upgraded(), &[("foo", "newFoo")]),
        &ov(),
        &ov(),
        false,
    );
    assert_eq!(
        a.decision,
        Decision::Schedule {
            plan: "update".into(),
            reason: ScheduleReason::Upgrade
        }
    );
}

#[test]
fn u26_upgrade_removing_parameter_unknown_to_new_ov() {
    let mut o = ov();
    o.spec.parameters.retain(|p| p.name != "backup");
    let mut old = idle();
    old.spec.parameters.insert("backup".into(), "b".into());
    let new = with_params(upgraded(), &[("foo", "foo"), ("readonly", "oldvalue")]);
    assert_eq!(outcome(&admit(&old, &new, &o, &o, false)), some("update"));
}

#[test]
fn u27_parameter_update_with_direct_trigger_is_denied() {
    let m = denied(&admit(
        &idle(),
        &with_params(scheduled(), &[("foo", "newFoo"), ("readonly", "oldvalue")]),
        &ov(),
        &ov(),
        false,
    ));
    assert_eq!(
        m,
        "failed to update Instance test/test: triggering one plan 'deploy' directly and through parameter update 'deploy' is not allowed"
    );
}

#[test]
fn u28_changing_an_immutable_parameter_is_denied() {
    // KUDO's fixture also triggers a plan directly; either way it is denied
    assert!(
        outcome(&admit(
            &idle(),
            &with_params(scheduled(), &[("readonly", "newFoo")]),
            &ov(),
            &ov(),
            false
        ))
        .is_err()
    );
    let m = denied(&admit(
        &idle(),
        &with_params(idle(), &[("foo", "foo"), ("readonly", "newFoo")]),
        &ov(),
        &ov(),
        false,
    ));
    assert_eq!(
        m,
        "failed to check immutable parameters for Instance test/test: parameter 'readonly' is immutable but was changed from 'oldvalue' to 'newFoo'"
    );
}

fn upgraded_with(params: &[(&str, &str)]) -> Instance {
    with_params(upgraded(), params)
}

#[test]
fn u29_upgrade_adding_immutable_parameter_without_value_is_denied() {
    let mut n = new_ov();
    n.spec.parameters.push(immutable(param("newImmutable", "deploy")));
    let m = denied(&admit(&idle(), &upgraded_with(&[]), &n, &ov(), false));
    assert_eq!(
        m,
        "failed to check immutable parameters for Instance test/test: parameter 'newImmutable' was added in operator version foo-operator-2.0, but no value was provided"
    );
    // with a default, KUDO still requires an explicit value and says what the default would be
    n.spec.parameters.last_mut().unwrap().default = Some("d".into());
    let m = denied(&admit(&idle(), &upgraded_with(&[]), &n, &ov(), false));
    assert!(
        m.ends_with("but no value was provided (default would be d)"),
        "{m}"
    );
}

#[test]
fn u30_upgrade_adding_immutable_parameter_with_value_is_allowed() {
    let mut n = new_ov();
    n.spec.parameters.push(immutable(param("newImmutable", "deploy")));
    let a = admit(
        &idle(),
        &upgraded_with(&[("newImmutable", "someValue")]),
        &n,
        &ov(),
        false,
    );
    assert_eq!(outcome(&a), some("update"));
}

#[test]
fn u31_upgrade_removing_immutable_parameter_is_allowed_and_drops_its_value() {
    let mut n = new_ov();
    n.spec.parameters.retain(|p| p.name != "readonly");
    assert_eq!(
        outcome(&admit(&idle(), &upgraded_with(&[]), &n, &ov(), false)),
        some("update")
    );
    // the removed parameter's value is dropped from the spec
    let a = admit(
        &idle(),
        &upgraded_with(&[("foo", "foo"), ("readonly", "oldvalue")]),
        &n,
        &ov(),
        false,
    );
    assert_eq!(outcome(&a), some("update"));
    assert_eq!(a.remove_parameters, ["readonly"]);
}

#[test]
fn u32_upgrade_making_parameter_with_value_immutable_is_allowed() {
    let mut n = new_ov();
    n.spec
        .parameters
        .iter_mut()
        .find(|p| p.name == "foo")
        .unwrap()
        .immutable = Some(true);
    let a = admit(
        &idle(),
        &upgraded_with(&[("foo", "foo"), ("readonly", "oldvalue")]),
        &n,
        &ov(),
        false,
    );
    assert_eq!(outcome(&a), some("update"));
}

#[test]
fn u33_upgrade_making_parameter_without_value_immutable_is_denied() {
    let mut n = new_ov();
    n.spec
        .parameters
        .iter_mut()
        .find(|p| p.name == "unnamed")
        .unwrap()
        .immutable = Some(true);
    let m = denied(&admit(&idle(), &upgraded_with(&[]), &n, &ov(), false));
    assert_eq!(
        m,
        "failed to check immutable parameters for Instance test/test: parameter 'unnamed' was changed to immutable in operator version foo-operator-2.0 but no value was provided"
    );
}

#[test]
fn u34_upgrade_making_parameter_immutable_with_value_provided_is_allowed() {
    let mut n = new_ov();
    n.spec
        .parameters
        .iter_mut()
        .find(|p| p.name == "unnamed")
        .unwrap()
        .immutable = Some(true);
    assert_eq!(
        outcome(&admit(
            &idle(),
            &upgraded_with(&[("unnamed", "newValue")]),
            &n,
            &ov(),
            false
        )),
        some("update")
    );
}

#[test]
fn u35_upgrade_making_parameter_mutable_is_allowed() {
    let mut n = new_ov();
    n.spec
        .parameters
        .iter_mut()
        .find(|p| p.name == "readonly")
        .unwrap()
        .immutable = None;
    assert_eq!(
        outcome(&admit(&idle(), &upgraded_with(&[]), &n, &ov(), false)),
        some("update")
    );
}

#[test]
fn u36_scheduling_a_missing_plan_is_denied() {
    let m = denied(&admit(
        &idle(),
        &with_plan(idle(), "nonexistingplan", ""),
        &ov(),
        &ov(),
        false,
    ));
    assert_eq!(m, "plan nonexistingplan does not exist");
}

// ------------------------------------------------------------------ Test_triggeredPlan

fn trigger_ov() -> OperatorVersion {
    let mut p = param("param", "");
    p.default = Some("default".into());
    ov_named("t", &["deploy", "update", "backup"], vec![p])
}

#[test]
fn u37_no_changed_parameter_triggers_nothing() {
    assert_eq!(triggered_by_parameter_update(&[], &trigger_ov()), Ok(None));
}

#[test]
fn u38_parameter_without_trigger_triggers_update() {
    assert_eq!(
        triggered_by_parameter_update(&[&param("foo", "")], &trigger_ov()),
        Ok(Some("update".into()))
    );
    // without an update plan: deploy; without both: error
    let only_deploy = ov_named("t", &["deploy"], vec![]);
    assert_eq!(
        triggered_by_parameter_update(&[&param("foo", "")], &only_deploy),
        Ok(Some("deploy".into()))
    );
    let none = ov_named("t", &["backup"], vec![]);
    assert_eq!(
        triggered_by_parameter_update(&[&param("foo", "")], &none).map_err(|e| e.to_string()),
        Err("couldn't find any plans that would be triggered by the update".into())
    );
}

#[test]
fn u39_explicit_trigger() {
    assert_eq!(
        triggered_by_parameter_update(&[&param("foo", "backup")], &trigger_ov()),
        Ok(Some("backup".into()))
    );
}

#[test]
fn u40_two_parameters_same_trigger() {
    assert_eq!(
        triggered_by_parameter_update(&[&param("foo", "deploy"), &param("bar", "deploy")], &trigger_ov()),
        Ok(Some("deploy".into()))
    );
}

#[test]
fn u41_conflicting_triggers_are_an_error() {
    assert_eq!(
        triggered_by_parameter_update(&[&param("foo", "deploy"), &param("bar", "update")], &trigger_ov())
            .map_err(|e| e.to_string()),
        Err("triggering multiple plans: [deploy update] at once is not allowed".into())
    );
}

#[test]
fn u42_trigger_of_missing_plan_is_an_error() {
    assert!(triggered_by_parameter_update(&[&param("foo", "fake")], &trigger_ov()).is_err());
}

// ------------------------------------------------------------------ more update rules

#[test]
fn parameters_added_by_an_upgrade_do_not_count_as_changes() {
    // #1780: a value for a parameter the old OV did not declare is not a "change"
    let mut n = new_ov();
    n.spec.parameters.push(param("fresh", "backup"));
    let a = admit(
        &idle(),
        &upgraded_with(&[("foo", "foo"), ("readonly", "oldvalue"), ("fresh", "x")]),
        &n,
        &ov(),
        false,
    );
    assert_eq!(outcome(&a), some("update"));
}

#[test]
fn upgrade_prefers_upgrade_plan_then_update_then_deploy() {
    let with = |plans: &[&str]| {
        let mut n = new_ov();
        n.spec.plans = plans.iter().map(|p| (p.to_string(), Plan::default())).collect();
        outcome(&admit(&idle(), &upgraded(), &n, &ov(), false))
    };
    assert_eq!(with(&["deploy", "update", "upgrade"]), some("upgrade"));
    assert_eq!(with(&["deploy", "update"]), some("update"));
    assert_eq!(with(&["deploy"]), some("deploy"));
    assert!(
        with(&["backup"]).unwrap_err().contains(
            "couldn't find any suitable plan that would be triggered by an OperatorVersion upgrade"
        )
    );
}

#[test]
fn invalid_value_on_update_is_denied() {
    let mut o = ov();
    o.spec
        .parameters
        .iter_mut()
        .find(|p| p.name == "foo")
        .unwrap()
        .value_type = "integer".into();
    let m = denied(&admit(
        &idle(),
        &with_params(idle(), &[("foo", "abc"), ("readonly", "oldvalue")]),
        &o,
        &o,
        false,
    ));
    assert!(m.starts_with("failed to validate parameters for Instance test/test: parameter \"foo\" has an invalid value \"abc\": type is \"integer\""), "{m}");
}

#[test]
fn status_change_alone_is_no_change_unless_terminal() {
    let mut new = scheduled();
    new.status = Some(InstanceStatus {
        plan_status: BTreeMap::from([("deploy".to_string(), PlanStatus::default())]),
        conditions: vec![],
        ..Default::default()
    });
    assert_eq!(
        admit(&scheduled(), &new, &ov(), &ov(), false).decision,
        Decision::NoChange
    );
}

// ------------------------------------------------------------------ create

fn create(new: &Instance, ov: &OperatorVersion) -> Admission {
    decide(&InstanceChange {
        old: None,
        new,
        old_ov: ov,
        new_ov: ov,
        deleting: false,
    })
}

#[test]
fn create_schedules_deploy_and_adds_cleanup_finalizer() {
    let a = create(&idle(), &ov());
    assert_eq!(
        a.decision,
        Decision::Schedule {
            plan: "deploy".into(),
            reason: ScheduleReason::Install
        }
    );
    assert!(a.add_cleanup_finalizer);
    let no_cleanup = ov_named("x", &["deploy"], vec![]);
    assert!(!create(&idle(), &no_cleanup).add_cleanup_finalizer);
}

#[test]
fn create_without_deploy_plan_is_denied() {
    let m = denied(&create(&idle(), &ov_named("x", &["update"], vec![])));
    assert_eq!(
        m,
        "failed to create an Instance test/test: couldn't find 'deploy' plan in the operatorVersion"
    );
}

#[test]
fn create_copies_defaults_of_immutable_parameters() {
    let mut imm = immutable(param("IMM", ""));
    imm.default = Some("d".into());
    let mut imm_set = immutable(param("IMM2", ""));
    imm_set.default = Some("d2".into());
    let mut mutable = param("MUT", "");
    mutable.default = Some("m".into());
    let o = ov_named("x", &["deploy"], vec![imm, imm_set, mutable]);
    let a = create(&with_params(idle(), &[("IMM2", "given")]), &o);
    assert_eq!(
        a.set_parameters,
        BTreeMap::from([("IMM".to_string(), "d".to_string())])
    );
}

#[test]
fn create_validates_parameters() {
    let mut req = param("REQ", "");
    req.required = Some(true);
    let o = ov_named("x", &["deploy"], vec![req]);
    let m = denied(&create(&idle(), &o));
    assert_eq!(
        m,
        "failed to create an Instance test/test: parameters are not valid: parameter \"REQ\" is required but has no value set"
    );
    assert!(outcome(&create(&with_params(idle(), &[("REQ", "v")]), &o)).is_ok());
}

/// schema keywords and package-level rules are Judged by the manager's admission too.
/// Needs the validator of `kudo-schema` (stubbed until its core and CEL commits are merged).
#[test]
fn create_and_update_judge_schema_keywords_and_package_rules() {
    let mut replicas = param("REPLICAS", "deploy");
    replicas.value_type = "integer".into();
    replicas.default = Some("3".into());
    replicas.schema.maximum = Some(9.into());
    let mut o = ov_named("x", &["deploy"], vec![replicas]);
    o.spec.parameter_validations = vec![kudo_api::ValidationRule {
        rule: "self.REPLICAS % 2 == 1".into(),
        message: "REPLICAS must be odd".into(),
    }];
    assert_eq!(
        denied(&create(&with_params(idle(), &[("REPLICAS", "12")]), &o)),
        "failed to create an Instance test/test: parameters are not valid: parameter REPLICAS: 12 is greater than the maximum of 9"
    );
    assert_eq!(
        denied(&create(&with_params(idle(), &[("REPLICAS", "4")]), &o)),
        "failed to create an Instance test/test: parameters are not valid: parameters do not satisfy the rule \"self.REPLICAS % 2 == 1\": REPLICAS must be odd"
    );
    let running = with_params(idle(), &[("REPLICAS", "5")]);
    assert!(outcome(&create(&running, &o)).is_ok());
    let m = denied(&admit(
        &running,
        &with_params(idle(), &[("REPLICAS", "12")]),
        &o,
        &o,
        false,
    ));
    assert_eq!(
        m,
        "failed to validate parameters for Instance test/test: parameter REPLICAS: 12 is greater than the maximum of 9"
    );
}

// ------------------------------------------------------------------ value validation

fn typed(t: &str) -> Parameter {
    Parameter {
        name: "P".into(),
        value_type: t.into(),
        required: Some(false),
        ..Default::default()
    }
}

#[test]
fn value_validation_by_type() {
    let ok = |t: &str, v: &str| triggers::validate_value(&typed(t), v).is_ok();
    assert!(
        ok("integer", "42")
            && ok("integer", "-7")
            && ok("integer", "+3")
            && ok("integer", "9223372036854775807")
    );
    assert!(
        !ok("integer", "4.2")
            && !ok("integer", "abc")
            && !ok("integer", "9223372036854775808")
            && !ok("integer", " 1")
            && !ok("integer", "1_000")
    );
    assert!(
        ok("number", "4.2")
            && ok("number", "1e5")
            && ok("number", "-0.5")
            && ok("number", "7")
            && ok("number", "Inf")
            && ok("number", "NaN")
    );
    assert!(!ok("number", "abc") && !ok("number", "1e400") && !ok("number", "1,5"));
    for b in [
        "1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False",
    ] {
        assert!(ok("boolean", b), "{b}");
    }
    for b in ["yes", "no", "on", "tRUE", "2"] {
        assert!(!ok("boolean", b), "{b}");
    }
    assert!(
        ok("array", "[80, 443]") && ok("array", "- a\n- b\n") && ok("array", "[]") && ok("array", "null")
    );
    assert!(!ok("array", "a: b") && !ok("array", "just a string") && !ok("array", "[unclosed"));
    assert!(
        ok("map", "a: b")
            && ok("map", "{a: 1, b: [1, 2]}")
            && ok("map", "{}")
            && ok("map", "nested:\n  x: 1\n")
    );
    assert!(!ok("map", "[1, 2]") && !ok("map", "scalar") && !ok("map", "{a: "));
    // string and unknown types accept anything
    assert!(ok("string", "anything") && ok("", "anything") && ok("float", "abc"));
    // empty values are never type-checked
    assert!(ok("integer", ""));
}

#[test]
fn value_validation_required_and_enum() {
    let mut p = typed("string");
    p.required = Some(true);
    assert_eq!(
        triggers::validate_value(&p, "").map_err(|e| e.to_string()),
        Err("parameter \"P\" is required but has no value set".into())
    );
    p.default = Some("x".into());
    assert!(triggers::validate_value(&p, "").is_ok());
    // absent `required` in a stored OV means not required (KUDO CRD semantics)
    assert!(
        triggers::validate_value(
            &Parameter {
                name: "P".into(),
                ..Default::default()
            },
            ""
        )
        .is_ok()
    );

    let mut e = typed("integer");
    e.r#enum = Some(vec!["1".into(), "2".into()]);
    assert!(triggers::validate_value(&e, "2").is_ok());
    assert_eq!(
        triggers::validate_value(&e, "02").map_err(|e| e.to_string()),
        Err(
            "parameter \"P\" has an invalid value \"02\": value is \"02\", but only allowed values are [1 2]"
                .into()
        )
    );
    // type is checked before enum membership
    assert!(
        triggers::validate_value(&e, "x")
            .unwrap_err()
            .to_string()
            .contains("type is \"integer\"")
    );
}

#[test]
fn validate_parameters_checks_every_declared_parameter() {
    let mut req = typed("string");
    req.name = "A".into();
    req.required = Some(true);
    let mut num = typed("integer");
    num.name = "B".into();
    let values = BTreeMap::from([
        ("A".to_string(), "x".to_string()),
        ("B".to_string(), "nope".to_string()),
        ("UNDECLARED".to_string(), "y".to_string()),
    ]);
    let err = kudo_engine::validate_parameters(&[req.clone(), num.clone()], &values)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("parameter \"B\""), "{err}");
    let good = BTreeMap::from([
        ("A".to_string(), "x".to_string()),
        ("B".to_string(), "3".to_string()),
    ]);
    assert!(kudo_engine::validate_parameters(&[req, num], &good).is_ok());
}

// ------------------------------------------------------------------ deletion helpers

#[test]
fn cleanup_scheduling_on_delete() {
    let o = ov();
    let mut i = scheduled();
    assert!(!triggers::should_schedule_cleanup(&i, &o, false));
    assert!(triggers::should_schedule_cleanup(&i, &o, true));
    i.status = Some(InstanceStatus {
        plan_status: BTreeMap::from([(
            "cleanup".to_string(),
            PlanStatus {
                status: ExecutionStatus::NeverRun,
                ..Default::default()
            },
        )]),
        conditions: vec![],
        ..Default::default()
    });
    assert!(triggers::should_schedule_cleanup(&i, &o, true));
    i.status
        .as_mut()
        .unwrap()
        .plan_status
        .get_mut("cleanup")
        .unwrap()
        .status = ExecutionStatus::InProgress;
    assert!(!triggers::should_schedule_cleanup(&i, &o, true));
    assert!(!triggers::should_schedule_cleanup(&uninstalling(), &o, true));
    assert!(!triggers::should_schedule_cleanup(
        &scheduled(),
        &ov_named("x", &["deploy"], vec![]),
        true
    ));
}

#[test]
fn cleanup_finalizer_removal() {
    let o = ov();
    let mut i = uninstalling();
    assert!(!triggers::cleanup_finalizer_removable(&i, &o));
    i.status = Some(InstanceStatus {
        plan_status: BTreeMap::from([(
            "cleanup".to_string(),
            PlanStatus {
                status: ExecutionStatus::FatalError,
                ..Default::default()
            },
        )]),
        conditions: vec![],
        ..Default::default()
    });
    assert!(
        !triggers::cleanup_finalizer_removable(&i, &o),
        "a failed cleanup keeps the finalizer"
    );
    i.status
        .as_mut()
        .unwrap()
        .plan_status
        .get_mut("cleanup")
        .unwrap()
        .status = ExecutionStatus::Complete;
    assert!(triggers::cleanup_finalizer_removable(&i, &o));
    assert!(triggers::cleanup_finalizer_removable(
        &scheduled(),
        &ov_named("x", &["deploy"], vec![])
    ));
}

#[test]
fn parameter_diff_names_changed_added_removed() {
    let a = BTreeMap::from([
        ("x".to_string(), "1".to_string()),
        ("y".to_string(), "2".to_string()),
    ]);
    let b = BTreeMap::from([
        ("x".to_string(), "1".to_string()),
        ("y".to_string(), "3".to_string()),
        ("z".to_string(), "4".to_string()),
    ]);
    let d: Vec<_> = triggers::parameter_diff(&a, &b).into_iter().collect();
    assert_eq!(d, ["y", "z"]);
}

// ------------------------------------------------------------------ applying an admission

#[test]
fn apply_patches_the_spec_like_the_webhook() {
    // create: deploy scheduled, immutable default copied, finalizer added
    let mut imm = immutable(param("IMM", ""));
    imm.default = Some("d".into());
    let o = ov_named("x", &["deploy", "cleanup"], vec![imm]);
    let mut i = idle();
    let a = create(&i, &o);
    assert!(a.apply(&mut i, "uid-new"));
    assert_eq!(
        i.spec.plan_execution,
        PlanExecution {
            plan_name: "deploy".into(),
            uid: "uid-new".into(),
            status: Some(ExecutionStatus::NeverRun)
        }
    );
    assert_eq!(i.spec.parameters.get("IMM").map(String::as_str), Some("d"));
    assert_eq!(i.metadata.finalizers, [kudo_api::CLEANUP_FINALIZER]);
    // applying again changes nothing but the uid it is given
    assert!(!a.apply(&mut i, "uid-new"));

    // terminal → cleared
    let mut new = scheduled();
    new.spec.plan_execution.status = Some(ExecutionStatus::Complete);
    let a = admit(&scheduled(), &new, &ov(), &ov(), false);
    assert!(a.apply(&mut new, "unused"));
    assert_eq!(new.spec.plan_execution, PlanExecution::default());

    // denial → untouched
    let mut new = with_plan(idle(), "cleanup", "");
    let a = admit(&idle(), &new, &ov(), &ov(), false);
    let before = new.clone();
    assert!(!a.apply(&mut new, "u"));
    assert_eq!(new, before);

    // upgrade removing a parameter drops its value
    let mut n = new_ov();
    n.spec.parameters.retain(|p| p.name != "readonly");
    let mut new = upgraded_with(&[("foo", "foo"), ("readonly", "oldvalue")]);
    let a = admit(&idle(), &new, &n, &ov(), false);
    assert!(a.apply(&mut new, "u2"));
    assert!(!new.spec.parameters.contains_key("readonly"));
    assert_eq!(new.spec.plan_execution.plan_name, "update");
}

#[test]
fn a_bad_value_has_one_wording_kudos_in_the_engine_and_the_package() {
    // KUDO's message is Go's strconv error inside its ValidateValue wording.
    let want = "parameter \"P\" has an invalid value \"abc\": type is \"integer\" but format of \"abc\" is invalid: strconv.ParseInt: parsing \"abc\": invalid syntax";
    let p = typed("integer");
    assert_eq!(triggers::validate_value(&p, "abc").unwrap_err().to_string(), want);
    assert_eq!(
        kudo_package::params::validate_value(&p, "abc")
            .unwrap_err()
            .to_string(),
        want
    );
}

#[test]
fn cleanup_run_judges_the_spec_about_to_be_executed() {
    let o = ov();
    let exec = scheduled().spec;
    let pe = triggers::cleanup_run(&uninstalling(), &exec, &o, true, || "u".into()).unwrap();
    assert_eq!(
        (pe.plan_name.as_str(), pe.uid.as_str(), pe.status),
        ("cleanup", "u", Some(ExecutionStatus::NeverRun))
    );
    // the spec to execute already runs cleanup, or the instance is not being deleted: nothing
    let running_cleanup = uninstalling().spec;
    assert_eq!(
        triggers::cleanup_run(&scheduled(), &running_cleanup, &o, true, || unreachable!()),
        None
    );
    assert_eq!(
        triggers::cleanup_run(&scheduled(), &exec, &o, false, || unreachable!()),
        None
    );
}

// ------------------------------------------------------------------ parameterSources (kudo-rs)

fn sourced(mut i: Instance, name: &str, secret: &str, key: &str) -> Instance {
    i.spec
        .parameter_sources
        .insert(name.into(), kudo_api::ParameterSource::secret(secret, key));
    i
}

fn sensitive_ov() -> OperatorVersion {
    let mut pw = param("PASSWORD", "update");
    pw.required = Some(true);
    pw.value_type = "integer".into();
    ov_named(
        "foo-operator",
        &["deploy", "update"],
        vec![pw, param("A", "deploy")],
    )
}

#[test]
fn a_sourced_required_parameter_satisfies_install_and_is_validated_at_render_time() {
    let ov = sensitive_ov();
    let plain = idle();
    assert!(denied(&create(&plain, &ov)).contains("\"PASSWORD\" is required"));
    let inst = sourced(idle(), "PASSWORD", "db", "pw");
    assert_eq!(outcome(&create(&inst, &ov)), some("deploy"));
}

#[test]
fn a_changed_source_triggers_its_parameters_plan() {
    let ov = sensitive_ov();
    let old = sourced(idle(), "PASSWORD", "db", "pw");
    let same = sourced(idle(), "PASSWORD", "db", "pw");
    assert_eq!(outcome(&admit(&old, &same, &ov, &ov, false)), Ok(None));
    let moved = sourced(idle(), "PASSWORD", "db2", "pw");
    assert_eq!(outcome(&admit(&old, &moved, &ov, &ov, false)), some("update"));
    let other_key = sourced(idle(), "PASSWORD", "db", "pw2");
    assert_eq!(outcome(&admit(&old, &other_key, &ov, &ov, false)), some("update"));
    let unknown = sourced(old.clone(), "NOPE", "db", "x");
    assert!(denied(&admit(&old, &unknown, &ov, &ov, false)).contains("\"NOPE\""));
}

#[test]
fn source_markers_name_the_source_never_a_value() {
    let i = with_params(sourced(idle(), "PASSWORD", "db", "pw"), &[("A", "1")]);
    let m = triggers::with_sources(&i.spec);
    assert_eq!(m["A"], "1");
    assert_eq!(m["PASSWORD"], "\u{0}secretKeyRef:db/pw");
}

// --- Initiations by the manager (autopilot rules, kudo-rs extension): admitted like a user's
// `update -p` followed by `plan trigger`.

fn autopilot(plan: &str, set: &[(&str, &str)]) -> kudo_engine::initiate::Initiation {
    kudo_engine::initiate::Initiation {
        plan: plan.into(),
        set_parameters: set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        origin: kudo_engine::initiate::Origin::Autopilot {
            rule: format!("{plan}/0"),
            observed: String::new(),
        },
    }
}

#[test]
fn an_initiation_schedules_its_plan_with_the_parameters_set() {
    let (new, a) = kudo_engine::initiate::admit(&idle(), &ov(), &autopilot("backup", &[("bar", "2")]));
    assert_eq!(
        a.decision,
        Decision::Schedule {
            plan: "backup".into(),
            reason: ScheduleReason::DirectTrigger
        }
    );
    assert_eq!(new.spec.parameters["bar"], "2");
    assert_eq!(new.spec.plan_execution.plan_name, "backup");
    // The rule's plan runs, not the parameter's own trigger plan (`update`).
    let mut applied = new.clone();
    assert!(a.apply(&mut applied, UUID));
    assert_eq!(applied.spec.plan_execution.plan_name, "backup");
    assert_eq!(applied.spec.plan_execution.uid, UUID);
}

#[test]
fn an_initiation_setting_an_immutable_or_unknown_parameter_is_denied_as_for_a_user() {
    let (_, a) = kudo_engine::initiate::admit(&idle(), &ov(), &autopilot("backup", &[("readonly", "x")]));
    let Decision::Deny { message } = a.decision else {
        panic!("{a:?}")
    };
    assert!(message.contains("parameter 'readonly' is immutable"), "{message}");
    let (_, a) = kudo_engine::initiate::admit(&idle(), &ov(), &autopilot("backup", &[("nope", "x")]));
    let Decision::Deny { message } = a.decision else {
        panic!("{a:?}")
    };
    assert!(message.contains("failed to find parameter \"nope\""), "{message}");
}

#[test]
fn an_initiation_of_an_unknown_plan_is_denied() {
    let (_, a) = kudo_engine::initiate::admit(&idle(), &ov(), &autopilot("heal", &[]));
    assert_eq!(
        a.decision,
        Decision::Deny {
            message: "plan heal does not exist".into()
        }
    );
}
