//! What a reconcile stores after its pass (`kudo_engine::reconcile::settle`): finalizers and
//! bookkeeping annotations, one case per rule.

use std::collections::BTreeSet;

use kudo_api::{CLEANUP_FINALIZER, ExecutionStatus, Instance, InstanceStatus, OperatorVersion, PlanStatus};
use kudo_engine::reconcile::{
    CLUSTER_OBJECTS_ANNOTATION, CLUSTER_OBJECTS_FINALIZER, ClusterObject, ENDED_RUN_ANNOTATION,
    RETRY_ANNOTATION, Settle, settle, stored_cluster_objects,
};
use kudo_engine::{TIMING_ANNOTATION, retry};
use serde_json::json;

fn ov(plans: &[&str]) -> OperatorVersion {
    let mut ov: OperatorVersion = serde_json::from_value(json!({
        "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
        "metadata": {"name": "op-0.1.0"}, "spec": {}
    }))
    .unwrap();
    for p in plans {
        ov.spec.plans.insert(p.to_string(), Default::default());
    }
    ov
}

fn inst() -> Instance {
    let mut i: Instance = serde_json::from_value(json!({
        "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
        "metadata": {"name": "db", "namespace": "ns"},
        "spec": {"operatorVersion": {"name": "op-0.1.0"}}
    }))
    .unwrap();
    i.metadata.finalizers = vec![CLEANUP_FINALIZER.into()];
    i
}

fn status(plan: &str, uid: &str, st: ExecutionStatus) -> InstanceStatus {
    let mut s = InstanceStatus::default();
    s.plan_status.insert(
        plan.into(),
        PlanStatus {
            name: plan.into(),
            uid: uid.into(),
            status: st,
            ..Default::default()
        },
    );
    s
}

fn role(name: &str) -> ClusterObject {
    ClusterObject {
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: "ClusterRole".into(),
        name: name.into(),
    }
}

fn run(
    i: &Instance,
    o: &OperatorVersion,
    st: &InstanceStatus,
    deleting: bool,
    applied: &[ClusterObject],
) -> kudo_engine::reconcile::Settled {
    let applied: BTreeSet<ClusterObject> = applied.iter().cloned().collect();
    let s = Settle {
        inst: i,
        ov: o,
        status: st,
        deleting,
        timing: Some("{\"uid\":\"u\"}".into()),
        applied: &applied,
    };
    settle(&s, i.metadata.finalizers.clone())
}

#[test]
fn the_cleanup_finalizer_goes_once_cleanup_completed() {
    let o = ov(&["deploy", "cleanup"]);
    let done = run(
        &inst(),
        &o,
        &status("cleanup", "c1", ExecutionStatus::Complete),
        true,
        &[],
    );
    assert!(done.cleanup_released);
    assert!(!done.finalizers.contains(&CLEANUP_FINALIZER.to_string()));
    let running = run(
        &inst(),
        &o,
        &status("cleanup", "c1", ExecutionStatus::InProgress),
        true,
        &[],
    );
    assert!(!running.cleanup_released);
    assert!(running.finalizers.contains(&CLEANUP_FINALIZER.to_string()));
}

#[test]
fn the_cleanup_finalizer_stays_while_not_deleting() {
    let o = ov(&["deploy", "cleanup"]);
    let s = run(
        &inst(),
        &o,
        &status("cleanup", "c1", ExecutionStatus::Complete),
        false,
        &[],
    );
    assert!(s.finalizers.contains(&CLEANUP_FINALIZER.to_string()));
}

#[test]
fn the_timing_of_a_run_without_timeouts_waits_for_another_write() {
    let s = run(
        &inst(),
        &ov(&["deploy"]),
        &status("deploy", "u", ExecutionStatus::InProgress),
        false,
        &[],
    );
    assert_eq!(s.lazy[TIMING_ANNOTATION].as_deref(), Some("{\"uid\":\"u\"}"));
    assert!(!s.annotations.contains_key(TIMING_ANNOTATION));
}

#[test]
fn the_timing_of_a_run_with_a_timeout_is_stored_at_once() {
    for timed in ["plan", "step"] {
        let mut o = ov(&["deploy"]);
        let plan = o.spec.plans.get_mut("deploy").unwrap();
        if timed == "plan" {
            plan.timeout = Some("10m".into());
        } else {
            plan.phases = vec![serde_json::from_value(serde_json::json!(
                {"name": "p", "strategy": "serial", "steps": [{"name": "s", "tasks": ["t"], "timeout": "1m"}]}
            ))
            .unwrap()];
        }
        let s = run(
            &inst(),
            &o,
            &status("deploy", "u", ExecutionStatus::InProgress),
            false,
            &[],
        );
        assert_eq!(
            s.annotations[TIMING_ANNOTATION].as_deref(),
            Some("{\"uid\":\"u\"}"),
            "{timed} timeout"
        );
        assert!(s.lazy.is_empty(), "{timed} timeout");
    }
    // the timing of another run than the plan's: nothing to time out
    let mut o = ov(&["deploy"]);
    o.spec.plans.get_mut("deploy").unwrap().timeout = Some("10m".into());
    let s = run(
        &inst(),
        &o,
        &status("deploy", "other", ExecutionStatus::InProgress),
        false,
        &[],
    );
    assert!(s.lazy.contains_key(TIMING_ANNOTATION));
}

#[test]
fn a_spent_retry_mark_is_removed_and_a_pending_one_kept() {
    let mut i = inst();
    i.metadata
        .annotations
        .insert(RETRY_ANNOTATION.into(), retry::annotation_value("deploy", "f1"));
    let o = ov(&["deploy"]);
    // The failed run is still the plan's run: the mark is pending.
    let pending = run(
        &i,
        &o,
        &status("deploy", "f1", ExecutionStatus::FatalError),
        false,
        &[],
    );
    assert_eq!(pending.annotations.get(RETRY_ANNOTATION), None);
    // A newer run replaced it: the mark is spent.
    let spent = run(
        &i,
        &o,
        &status("deploy", "r2", ExecutionStatus::InProgress),
        false,
        &[],
    );
    assert_eq!(spent.annotations.get(RETRY_ANNOTATION), Some(&None));
}

#[test]
fn applied_cluster_objects_are_recorded_with_their_finalizer() {
    let s = run(
        &inst(),
        &ov(&["deploy"]),
        &InstanceStatus::default(),
        false,
        &[role("r")],
    );
    assert_eq!(
        s.annotations[CLUSTER_OBJECTS_ANNOTATION].as_deref(),
        Some(r#"[["rbac.authorization.k8s.io/v1","ClusterRole","r"]]"#)
    );
    assert!(s.finalizers.contains(&CLUSTER_OBJECTS_FINALIZER.to_string()));
}

#[test]
fn recorded_cluster_objects_are_not_written_again() {
    let mut i = inst();
    i.metadata.annotations.insert(
        CLUSTER_OBJECTS_ANNOTATION.into(),
        r#"[["rbac.authorization.k8s.io/v1","ClusterRole","r"]]"#.into(),
    );
    i.metadata.finalizers.push(CLUSTER_OBJECTS_FINALIZER.into());
    let s = run(
        &i,
        &ov(&["deploy"]),
        &InstanceStatus::default(),
        false,
        &[role("r")],
    );
    assert_eq!(s.annotations.get(CLUSTER_OBJECTS_ANNOTATION), None);
    assert_eq!(
        s.finalizers
            .iter()
            .filter(|f| *f == CLUSTER_OBJECTS_FINALIZER)
            .count(),
        1
    );
}

#[test]
fn no_finalizer_is_added_to_an_instance_being_deleted() {
    let s = run(
        &inst(),
        &ov(&["deploy"]),
        &InstanceStatus::default(),
        true,
        &[role("r")],
    );
    assert!(!s.finalizers.contains(&CLUSTER_OBJECTS_FINALIZER.to_string()));
    assert!(
        s.annotations[CLUSTER_OBJECTS_ANNOTATION].is_some(),
        "still recorded"
    );
}

#[test]
fn the_cluster_objects_annotation_round_trips_and_tolerates_garbage() {
    let mut i = inst();
    assert!(stored_cluster_objects(&i).is_empty());
    let set = BTreeSet::from([role("r")]);
    i.metadata.annotations.insert(
        CLUSTER_OBJECTS_ANNOTATION.into(),
        serde_json::to_string(&set).unwrap(),
    );
    assert_eq!(stored_cluster_objects(&i), set);
    i.metadata
        .annotations
        .insert(CLUSTER_OBJECTS_ANNOTATION.into(), "not json".into());
    assert!(stored_cluster_objects(&i).is_empty());
}

#[test]
fn the_run_the_write_unschedules_is_recorded_with_it() {
    let mut i = inst();
    i.spec.plan_execution.plan_name = "deploy".into();
    i.spec.plan_execution.uid = "r1".into();
    let o = ov(&["deploy"]);
    let ended = status("deploy", "r1", ExecutionStatus::Complete);
    let s = run(&i, &o, &ended, false, &[]);
    let recorded = s.annotations[ENDED_RUN_ANNOTATION].as_deref().unwrap();
    assert_eq!(
        serde_json::from_str::<PlanStatus>(recorded).unwrap(),
        ended.plan_status["deploy"]
    );
    let running = run(
        &i,
        &o,
        &status("deploy", "r1", ExecutionStatus::InProgress),
        false,
        &[],
    );
    assert!(!running.annotations.contains_key(ENDED_RUN_ANNOTATION));
}
