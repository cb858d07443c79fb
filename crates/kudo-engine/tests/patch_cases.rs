//! The merge patches a reconcile sends (`kudo_engine::reconcile::{status_patch, spec_patch}`):
//! what a merge patch must say explicitly (nulls) so the server ends up with exactly the status
//! and spec the reconcile decided.

use std::collections::BTreeMap;

use kudo_api::{
    AutopilotRuleStatus, ExecutionStatus, Instance, InstanceSpec, InstanceStatus, PlanExecution, PlanStatus,
    ScheduleStatus,
};
use kudo_engine::reconcile::{
    ADMITTED_SPEC_ANNOTATION, Stored, autopilot_patch, bumps_generation, spec_patch, spec_patch_along,
    status_patch,
};
use serde_json::{Value, json};

fn ps(name: &str, status: ExecutionStatus, message: &str) -> PlanStatus {
    PlanStatus {
        name: name.into(),
        status,
        message: message.into(),
        ..PlanStatus::default()
    }
}

fn inst() -> Instance {
    serde_json::from_value(json!({
        "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
        "metadata": {"name": "db", "namespace": "ns", "finalizers": ["a"]},
        "spec": {"operatorVersion": {"name": "op-0.1.0"}, "parameters": {"A": "1", "B": "2"}}
    }))
    .unwrap()
}

fn store(i: &Instance, spec: &InstanceSpec, annotations: &BTreeMap<&str, Option<String>>) -> Option<Value> {
    let stored = Stored {
        spec,
        finalizers: &i.metadata.finalizers,
        remember: None,
        annotations,
    };
    spec_patch(i, &stored, Some("7".into()))
}

#[test]
fn an_unchanged_status_is_not_written() {
    let mut st = InstanceStatus::default();
    st.plan_status
        .insert("deploy".into(), ps("deploy", ExecutionStatus::Complete, ""));
    assert_eq!(status_patch(&st, &st.clone()), None);
}

/// a merge patch Keeps keys it does not mention, so a cleared plan message must
/// be sent as null.
#[test]
fn a_cleared_plan_message_is_patched_as_null() {
    let old = InstanceStatus::default();
    let mut st = InstanceStatus::default();
    st.plan_status
        .insert("deploy".into(), ps("deploy", ExecutionStatus::InProgress, ""));
    st.plan_status.insert(
        "backup".into(),
        ps("backup", ExecutionStatus::FatalError, "broken"),
    );
    let patch = status_patch(&old, &st).unwrap();
    let plans = &patch["status"]["planStatus"];
    assert_eq!(plans["deploy"]["message"], Value::Null);
    assert!(plans["deploy"].as_object().unwrap().contains_key("message"));
    assert_eq!(plans["backup"]["message"], "broken");
    assert_eq!(plans["deploy"]["status"], "IN_PROGRESS");
}

#[test]
fn schedules_of_plans_no_longer_scheduled_are_nulled() {
    let mut old = InstanceStatus::default();
    old.schedules.insert("backup".into(), ScheduleStatus::default());
    let mut new = InstanceStatus::default();
    new.schedules.insert(
        "compact".into(),
        ScheduleStatus {
            next_schedule_time: Some("2026-01-01T00:00:00Z".into()),
            ..Default::default()
        },
    );
    let patch = status_patch(&old, &new).unwrap();
    assert_eq!(patch["status"]["schedules"]["backup"], Value::Null);
    assert_eq!(
        patch["status"]["schedules"]["compact"]["nextScheduleTime"],
        "2026-01-01T00:00:00Z"
    );
    assert!(patch["status"].get("autopilot").is_none(), "unchanged: not sent");
}

#[test]
fn autopilot_rule_states_that_went_away_are_nulled() {
    let old = BTreeMap::from([
        (
            "a/0".to_string(),
            AutopilotRuleStatus {
                holding_since: Some("2026-01-01T00:00:00Z".into()),
                ..Default::default()
            },
        ),
        ("b/0".to_string(), AutopilotRuleStatus::default()),
    ]);
    let new = BTreeMap::from([(
        "a/0".to_string(),
        AutopilotRuleStatus {
            last_fired: Some("2026-01-01T00:00:05Z".into()),
            ..Default::default()
        },
    )]);
    assert_eq!(
        autopilot_patch(&old, &new),
        json!({
            "a/0": {"holdingSince": null, "lastFired": "2026-01-01T00:00:05Z", "lastError": null},
            "b/0": null
        })
    );
}

#[test]
fn an_unchanged_spec_is_not_written() {
    let i = inst();
    assert_eq!(store(&i, &i.spec, &BTreeMap::new()), None);
}

#[test]
fn changed_and_removed_parameters_and_a_cleared_run_are_patched_under_the_read_version() {
    let mut i = inst();
    i.spec.plan_execution = PlanExecution {
        plan_name: "deploy".into(),
        uid: "u1".into(),
        status: Some(ExecutionStatus::Complete),
    };
    let mut to = i.spec.clone();
    to.parameters = BTreeMap::from([("A".into(), "9".into())]);
    to.plan_execution = PlanExecution::default();
    let patch = store(&i, &to, &BTreeMap::new()).unwrap();
    assert_eq!(
        patch,
        json!({
            "spec": {"planExecution": null, "parameters": {"A": "9", "B": null}},
            "metadata": {"resourceVersion": "7"}
        })
    );
}

#[test]
fn annotations_are_set_and_removed_only_when_they_differ() {
    let mut i = inst();
    i.metadata.annotations.insert("keep".into(), "same".into());
    i.metadata.annotations.insert("drop".into(), "x".into());
    let ann = BTreeMap::from([
        ("keep", Some("same".to_string())),
        ("drop", None),
        ("new", Some("v".into())),
    ]);
    let patch = store(&i, &i.spec, &ann).unwrap();
    assert_eq!(
        patch["metadata"]["annotations"],
        json!({"drop": null, "new": "v"})
    );
}

#[test]
fn the_admitted_spec_is_compared_as_a_spec_not_as_text() {
    let mut i = inst();
    // Same spec, other key order and whitespace: no write.
    let text = serde_json::to_string_pretty(&i.spec).unwrap();
    i.metadata
        .annotations
        .insert(ADMITTED_SPEC_ANNOTATION.into(), text);
    let stored = Stored {
        spec: &i.spec,
        finalizers: &i.metadata.finalizers,
        remember: Some(&i.spec),
        annotations: &BTreeMap::new(),
    };
    assert_eq!(spec_patch(&i, &stored, None), None);
    let mut other = i.spec.clone();
    other.parameters.insert("A".into(), "5".into());
    let stored = Stored {
        remember: Some(&other),
        ..stored
    };
    let patch = spec_patch(&i, &stored, None).unwrap();
    assert!(patch["metadata"]["annotations"][ADMITTED_SPEC_ANNOTATION].is_string());
}

#[test]
fn finalizers_are_replaced_whole() {
    let i = inst();
    let fins = vec!["a".to_string(), "b".to_string()];
    let stored = Stored {
        spec: &i.spec,
        finalizers: &fins,
        remember: None,
        annotations: &BTreeMap::new(),
    };
    let patch = spec_patch(&i, &stored, None).unwrap();
    assert_eq!(patch, json!({"metadata": {"finalizers": ["a", "b"]}}));
}

#[test]
fn lazy_annotations_ride_along_with_another_change_only() {
    let i = inst();
    let lazy = BTreeMap::from([("t", Some("x".to_string()))]);
    let none = BTreeMap::new();
    let same = Stored {
        spec: &i.spec,
        finalizers: &i.metadata.finalizers,
        remember: None,
        annotations: &none,
    };
    assert_eq!(spec_patch_along(&i, &same, &lazy, Some("7".into())), None);
    let mut unscheduled = i.spec.clone();
    unscheduled.parameters.insert("A".into(), "2".into());
    let changed = Stored {
        spec: &unscheduled,
        ..same
    };
    assert_eq!(
        spec_patch_along(&i, &changed, &lazy, Some("7".into())),
        Some(json!({"spec": {"parameters": {"A": "2"}},
            "metadata": {"annotations": {"t": "x"}, "resourceVersion": "7"}}))
    );
    assert_eq!(
        spec_patch_along(&i, &changed, &none, None),
        spec_patch(&i, &changed, None)
    );
}

#[test]
fn only_a_change_of_the_spec_proper_bumps_the_generation() {
    let i = inst();
    let none = BTreeMap::new();
    let fins = vec!["a".to_string(), "b".to_string()];
    let meta_only = Stored {
        spec: &i.spec,
        finalizers: &fins,
        remember: Some(&i.spec),
        annotations: &none,
    };
    assert!(!bumps_generation(&i, &meta_only));
    let mut running = i.spec.clone();
    running.plan_execution = PlanExecution {
        plan_name: "deploy".into(),
        uid: "u".into(),
        status: Some(ExecutionStatus::InProgress),
    };
    let spec = Stored {
        spec: &running,
        ..meta_only
    };
    assert!(bumps_generation(&i, &spec));
}
