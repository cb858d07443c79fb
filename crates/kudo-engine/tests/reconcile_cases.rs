//! Whole admissions of one reconcile, table-driven: every initiator of
//! `kudo_engine::reconcile::INITIATORS` (autopilot, the user's change, rotation, schedules) run
//! by the same state machine the manager drives, from an observed Instance to what is stored,
//! what is executed and which Events are published. No server: each case is microseconds.

use std::collections::BTreeMap;
use std::time::Duration;

use kudo_api::{
    ExecutionStatus, Instance, InstanceSpec, InstanceStatus, ObjectMeta, OperatorVersion, Parameter,
    PlanExecution, PlanStatus, ScheduleStatus,
};
use kudo_engine::autopilot::Evaluation;
use kudo_engine::initiate::{Initiation, Origin};
use kudo_engine::reconcile::{
    ADMITTED_SPEC_ANNOTATION, Admitting, Autopilot, AutopilotRead, Effect, FINGERPRINTS_ANNOTATION,
    INITIATORS, Observation, Observed, Provided, RETRY_ANNOTATION, Sensitive, StatusChange, initiate_all,
};
use kudo_engine::revision::{ROLLBACK_ANNOTATION, StartedBy};
use kudo_engine::rollout::ROLLOUT_ANNOTATION;
use kudo_engine::{EventType, Timestamp};

const CLEANUP_FINALIZER: &str = kudo_api::CLEANUP_FINALIZER;

fn param(name: &str, default: &str, trigger: &str) -> Parameter {
    Parameter {
        name: name.into(),
        default: Some(default.into()),
        trigger: trigger.into(),
        ..Default::default()
    }
}

/// An operator with the lifecycle plans, a cleanup and a rollback plan, a nightly `backup`
/// schedule, and a parameter rotated through `rotate`.
fn ov_with(name: &str, schedule: &str) -> OperatorVersion {
    let mut ov: OperatorVersion = serde_json::from_value(serde_json::json!({
        "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
        "metadata": {"name": name, "namespace": "ns"}, "spec": {}
    }))
    .unwrap();
    for p in [
        "deploy", "update", "upgrade", "cleanup", "rollback", "backup", "rotate",
    ] {
        ov.spec.plans.insert(p.to_string(), Default::default());
    }
    ov.spec.plans.get_mut("backup").unwrap().schedule = Some(schedule.to_string());
    let mut fixed = param("STORAGE", "1Gi", "");
    fixed.immutable = Some(true);
    ov.spec.parameters = vec![
        param("REPLICAS", "3", "update"),
        fixed,
        param("PASSWORD", "", "rotate"),
    ];
    ov
}

fn ov() -> OperatorVersion {
    ov_with("op-0.1.0", "0 3 * * *")
}

fn spec(ov_name: &str, params: &[(&str, &str)]) -> InstanceSpec {
    let mut s: InstanceSpec =
        serde_json::from_value(serde_json::json!({"operatorVersion": {"name": ov_name}})).unwrap();
    s.parameters = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    s
}

/// A new Instance, never admitted.
fn created() -> Instance {
    Instance {
        api_version: "kudo.dev/v1beta1".into(),
        kind: "Instance".into(),
        metadata: ObjectMeta {
            name: "db".into(),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        spec: spec("op-0.1.0", &[]),
        status: None,
    }
}

fn plan_status(plan: &str, uid: &str, st: ExecutionStatus) -> PlanStatus {
    PlanStatus {
        name: plan.into(),
        uid: uid.into(),
        status: st,
        ..Default::default()
    }
}

/// Installed and idle: the deploy run `d1` COMPLETE, the stored spec admitted.
fn idle() -> Instance {
    let mut i = created();
    i.metadata.finalizers = vec![CLEANUP_FINALIZER.into()];
    let mut st = InstanceStatus::default();
    st.plan_status.insert(
        "deploy".into(),
        plan_status("deploy", "d1", ExecutionStatus::Complete),
    );
    i.status = Some(st);
    admit_as_is(i)
}

/// The stored spec becomes the admitted one.
fn admit_as_is(mut i: Instance) -> Instance {
    let text = serde_json::to_string(&i.spec).unwrap();
    i.metadata
        .annotations
        .insert(ADMITTED_SPEC_ANNOTATION.into(), text);
    i
}

/// Idle, then the user changed the spec with `f` (not admitted yet).
fn changed(f: impl FnOnce(&mut InstanceSpec)) -> Instance {
    let mut i = idle();
    f(&mut i.spec);
    i
}

/// A plan `plan` (run `r1`) scheduled and IN_PROGRESS, admitted.
fn running(plan: &str) -> Instance {
    let mut i = idle();
    i.spec.plan_execution = PlanExecution {
        plan_name: plan.into(),
        uid: "r1".into(),
        status: Some(ExecutionStatus::InProgress),
    };
    i.status
        .as_mut()
        .unwrap()
        .plan_status
        .insert(plan.into(), plan_status(plan, "r1", ExecutionStatus::InProgress));
    admit_as_is(i)
}

fn at(t: &str) -> Timestamp {
    Timestamp::parse(t).unwrap()
}

const NOW: &str = "2026-01-02T03:00:30Z";

/// One reconcile's inputs besides the Instance.
#[derive(Default)]
struct World {
    deleting: bool,
    fire: Option<Initiation>,
    /// The autopilot evaluation the manager would read (its `fire` is `fire`'s when that is set).
    evaluation: Option<Evaluation>,
    sensitive: Option<Sensitive>,
    admitted_ov: Option<OperatorVersion>,
    ov: Option<OperatorVersion>,
    now: Option<&'static str>,
}

/// What a case's run saw besides the admission.
struct Run {
    adm: Admitting,
    /// How often the sensitive parameters were read.
    reads: usize,
    /// Run uids drawn.
    uids: usize,
}

fn run(inst: &Instance, w: World) -> Run {
    let mut ov = w.ov.unwrap_or_else(ov);
    if w.fire.is_some() || w.evaluation.is_some() {
        // A firing comes from an evaluation, which needs a rule to evaluate.
        ov.spec.plans.get_mut("update").unwrap().when = vec![Default::default()];
    }
    let obs = Observed::new(
        inst,
        &ov,
        w.admitted_ov.as_ref(),
        w.deleting,
        at(w.now.unwrap_or(NOW)),
    );
    let mut reads = 0;
    let mut n = 0;
    let mut uids = || {
        n += 1;
        format!("uid-{n}")
    };
    let sensitive = w.sensitive.unwrap_or(Sensitive::NoSources);
    let mut evaluation = w.evaluation.clone().unwrap_or_default();
    if w.fire.is_some() {
        evaluation.fire = w.fire.clone();
    }
    let adm = initiate_all(
        obs,
        |need, _| match need {
            Observation::Sensitive => {
                reads += 1;
                Provided::Sensitive(sensitive.clone())
            }
            Observation::Autopilot(AutopilotRead::Rules { .. }) => {
                Provided::Autopilot(Autopilot::Evaluated(evaluation.clone()))
            }
            Observation::Autopilot(AutopilotRead::None) => Provided::Autopilot(Autopilot::NotEvaluated),
        },
        &mut uids,
    );
    Run { adm, reads, uids: n }
}

fn admitted(r: &Run) -> &kudo_engine::reconcile::Admitted {
    r.adm
        .admitted
        .as_ref()
        .expect("the user-change initiator always admits")
}

fn exec_plan(r: &Run) -> (String, String) {
    let pe = &admitted(r)
        .exec
        .as_ref()
        .expect("a spec to execute")
        .plan_execution;
    (pe.plan_name.clone(), pe.uid.clone())
}

fn events(r: &Run) -> Vec<(EventType, String, String)> {
    r.adm
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::Event {
                type_,
                reason,
                message,
                ..
            } => Some((*type_, reason.clone(), message.clone())),
            _ => None,
        })
        .collect()
}

/// The effects executed once the admission is stored, as (kind, detail).
fn stored(r: &Run) -> Vec<String> {
    r.adm
        .stored
        .iter()
        .map(|e| match e {
            Effect::Event { reason, action, .. } => format!("event {reason} {action}"),
            Effect::Log { level, .. } => format!("log {level:?}"),
            Effect::Status(StatusChange::Admission { denial }) => format!("admission {}", denial.is_some()),
            Effect::Status(StatusChange::Autopilot(rules)) => format!("autopilot {}", rules.len()),
            Effect::Status(StatusChange::Schedules(s)) => format!("schedules {}", s.len()),
            Effect::Requeue(d) => format!("requeue {}", d.as_secs()),
        })
        .collect()
}

fn fire(plan: &str, set: &[(&str, &str)]) -> Option<Initiation> {
    Some(Initiation {
        plan: plan.into(),
        set_parameters: set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        origin: Origin::Autopilot {
            rule: format!("{plan}/0"),
            observed: "lag 30".into(),
        },
    })
}

fn fingerprints(pw: &str) -> Sensitive {
    Sensitive::Current {
        fingerprints: BTreeMap::from([("PASSWORD".to_string(), format!("db-secret/password:{pw}"))]),
        fresh_key: false,
    }
}

fn with_fingerprints(mut i: Instance, pw: &str) -> Instance {
    let fp = BTreeMap::from([("PASSWORD".to_string(), format!("db-secret/password:{pw}"))]);
    i.metadata.annotations.insert(
        FINGERPRINTS_ANNOTATION.into(),
        serde_json::to_string(&fp).unwrap(),
    );
    i
}

fn with_schedule(mut i: Instance, last: Option<&str>, next: Option<&str>) -> Instance {
    let st = i.status.get_or_insert_with(Default::default);
    st.schedules.insert(
        "backup".into(),
        ScheduleStatus {
            last_schedule_time: last.map(String::from),
            next_schedule_time: next.map(String::from),
        },
    );
    i
}

fn no_schedules() -> OperatorVersion {
    let mut o = ov();
    o.spec.plans.get_mut("backup").unwrap().schedule = None;
    o
}

// ---- the user's change -------------------------------------------------------------------

#[test]
fn first_deploy_schedules_deploy_with_a_fresh_uid_and_the_cleanup_finalizer() {
    let r = run(&created(), World::default());
    let a = admitted(&r);
    assert_eq!(exec_plan(&r), ("deploy".into(), "uid-1".into()));
    assert_eq!(a.spec, *a.exec.as_ref().unwrap());
    assert_eq!(a.remember, a.exec);
    assert_eq!(a.started, Some(StartedBy::User));
    assert!(a.finalizers.iter().any(|f| f == CLEANUP_FINALIZER));
    assert_eq!(a.denial, None);
    assert_eq!(r.uids, 1);
}

#[test]
fn a_new_run_is_stored_in_progress_with_its_plan_start() {
    let r = run(&created(), World::default());
    let mut a = admitted(&r).clone();
    a.begin(at(NOW));
    for spec in [Some(&a.spec), a.exec.as_ref(), a.remember.as_ref()] {
        let pe = &spec.expect("stored, executed and remembered").plan_execution;
        assert_eq!(
            (pe.plan_name.as_str(), pe.uid.as_str(), pe.status),
            ("deploy", "uid-1", Some(ExecutionStatus::InProgress))
        );
    }
    let timing =
        kudo_engine::Timing::from_annotation(a.annotations[kudo_engine::TIMING_ANNOTATION].as_deref());
    assert_eq!(
        (timing.uid.as_str(), timing.plan_started.as_deref()),
        ("uid-1", Some(NOW))
    );
    assert!(timing.steps.is_empty());
}

#[test]
fn a_run_already_going_or_no_run_is_left_as_admitted() {
    for inst in [running("update"), idle()] {
        let r = run(&inst, World::default());
        let before = admitted(&r).clone();
        let mut a = before.clone();
        a.begin(at(NOW));
        assert_eq!(a, before);
    }
}

#[test]
fn an_unchanged_idle_instance_admits_nothing_new() {
    let r = run(
        &with_schedule(idle(), None, Some("2026-01-03T03:00:00Z")),
        World::default(),
    );
    let a = admitted(&r);
    assert_eq!(a.started, None);
    assert_eq!(a.spec, idle().spec);
    assert_eq!(exec_plan(&r).0, "");
    assert!(events(&r).is_empty());
    assert_eq!(r.uids, 0);
}

#[test]
fn a_parameter_update_runs_the_parameters_trigger_plan() {
    let r = run(
        &changed(|s| {
            s.parameters.insert("REPLICAS".into(), "5".into());
        }),
        World::default(),
    );
    assert_eq!(exec_plan(&r), ("update".into(), "uid-1".into()));
    assert_eq!(admitted(&r).started, Some(StartedBy::User));
    assert_eq!(admitted(&r).spec.parameters["REPLICAS"], "5");
}

#[test]
fn a_parameter_without_a_trigger_runs_deploy() {
    let r = run(
        &changed(|s| {
            s.parameters.insert("PASSWORD".into(), "x".into());
        }),
        World::default(),
    );
    // PASSWORD's trigger is `rotate`.
    assert_eq!(exec_plan(&r).0, "rotate");
}

#[test]
fn an_immutable_parameter_change_is_denied_and_the_admitted_spec_keeps_running() {
    let inst = changed(|s| {
        s.parameters.insert("STORAGE".into(), "5Gi".into());
    });
    let r = run(&inst, World::default());
    let a = admitted(&r);
    let msg = a.denial.as_deref().expect("denied");
    assert!(msg.contains("STORAGE"), "{msg}");
    assert_eq!(a.exec.as_ref().unwrap().parameters.get("STORAGE"), None);
    assert_eq!(a.spec, inst.spec, "the stored spec is left as the user wrote it");
    assert_eq!(a.started, None);
}

#[test]
fn an_unknown_parameter_is_denied() {
    let r = run(
        &changed(|s| {
            s.parameters.insert("NOPE".into(), "1".into());
        }),
        World::default(),
    );
    let msg = admitted(&r).denial.clone().expect("denied");
    assert!(msg.contains("NOPE"), "{msg}");
}

#[test]
fn an_upgrade_runs_the_upgrade_plan_against_the_new_operator_version() {
    let inst = changed(|s| s.operator_version.name = "op-0.2.0".into());
    let r = run(
        &inst,
        World {
            ov: Some(ov_with("op-0.2.0", "0 3 * * *")),
            admitted_ov: Some(ov()),
            ..Default::default()
        },
    );
    assert_eq!(exec_plan(&r).0, "upgrade");
    assert_eq!(
        admitted(&r).exec.as_ref().unwrap().operator_version.name,
        "op-0.2.0"
    );
}

#[test]
fn a_trigger_while_a_plan_runs_is_denied() {
    let mut inst = running("deploy");
    inst.spec.plan_execution = PlanExecution {
        plan_name: "backup".into(),
        ..Default::default()
    };
    let r = run(&inst, World::default());
    assert!(admitted(&r).denial.is_some());
    assert_eq!(exec_plan(&r), ("deploy".into(), "r1".into()));
}

#[test]
fn a_cancellation_executes_the_admitted_run_marked_cancelled() {
    let mut inst = running("deploy");
    inst.spec.plan_execution.status = Some(ExecutionStatus::Cancelled);
    let r = run(&inst, World::default());
    let pe = &admitted(&r).exec.as_ref().unwrap().plan_execution;
    assert_eq!(pe.status, Some(ExecutionStatus::Cancelled));
    assert_eq!(pe.uid, "r1");
}

#[test]
fn a_marked_retry_of_the_failed_run_is_started_as_a_retry() {
    let mut inst = idle();
    inst.status.as_mut().unwrap().plan_status.insert(
        "backup".into(),
        plan_status("backup", "f1", ExecutionStatus::FatalError),
    );
    let inst = admit_as_is(inst);
    let mut inst = inst;
    inst.spec.plan_execution.plan_name = "backup".into();
    inst.metadata.annotations.insert(
        RETRY_ANNOTATION.into(),
        kudo_engine::retry::annotation_value("backup", "f1"),
    );
    let r = run(&inst, World::default());
    assert_eq!(admitted(&r).started, Some(StartedBy::Retry { of: "f1".into() }));
    assert_eq!(
        admitted(&r).annotations.get(RETRY_ANNOTATION),
        None,
        "kept for the run's reset"
    );
}

#[test]
fn a_parameter_change_is_never_a_retry_and_clears_the_mark() {
    let mut inst = changed(|s| {
        s.parameters.insert("REPLICAS".into(), "4".into());
    });
    inst.metadata
        .annotations
        .insert(RETRY_ANNOTATION.into(), "deploy/d1".into());
    let r = run(&inst, World::default());
    assert_eq!(admitted(&r).started, Some(StartedBy::User));
    assert_eq!(admitted(&r).annotations.get(RETRY_ANNOTATION), Some(&None));
}

#[test]
fn a_rollback_mark_runs_the_rollback_plan_and_is_stamped_with_the_run() {
    let mut inst = changed(|s| {
        s.parameters.insert("REPLICAS".into(), "2".into());
    });
    inst.metadata
        .annotations
        .insert(ROLLBACK_ANNOTATION.into(), r#"{"from":3,"to":1}"#.into());
    let r = run(&inst, World::default());
    let a = admitted(&r);
    assert_eq!(exec_plan(&r), ("rollback".into(), "uid-1".into()));
    assert_eq!(a.started, Some(StartedBy::Rollback { from: 3, to: 1 }));
    let stamp = a.annotations[ROLLBACK_ANNOTATION].as_deref().unwrap();
    assert!(stamp.contains("\"uid\":\"uid-1\""), "{stamp}");
}

#[test]
fn a_rollback_mark_without_a_change_does_nothing_yet() {
    let mut inst = idle();
    inst.metadata
        .annotations
        .insert(ROLLBACK_ANNOTATION.into(), r#"{"from":3,"to":1}"#.into());
    let r = run(&inst, World::default());
    assert_eq!(admitted(&r).started, None);
    assert!(admitted(&r).annotations.is_empty());
}

#[test]
fn a_rollout_mark_records_the_run_as_the_rollouts_and_is_stamped_with_it() {
    let mut inst = changed(|s| {
        s.parameters.insert("REPLICAS".into(), "4".into());
    });
    inst.metadata.annotations.insert(
        ROLLOUT_ANNOTATION.into(),
        r#"{"name":"fleet","uid":"r1","at":"2026-01-01T00:00:00Z"}"#.into(),
    );
    let r = run(&inst, World::default());
    let a = admitted(&r);
    assert_eq!(exec_plan(&r), ("update".into(), "uid-1".into()));
    assert_eq!(a.started, Some(StartedBy::Rollout { name: "fleet".into() }));
    let stamp = a.annotations[ROLLOUT_ANNOTATION].as_deref().unwrap();
    assert!(stamp.contains("\"run\":\"uid-1\""), "{stamp}");
    // Without a change, or once stamped, the mark is left as it is.
    let mut idle = idle();
    idle.metadata.annotations = inst.metadata.annotations.clone();
    let r = run(&idle, World::default());
    assert_eq!(admitted(&r).started, None);
    assert!(admitted(&r).annotations.is_empty());
    let mut stamped = inst.clone();
    stamped
        .metadata
        .annotations
        .insert(ROLLOUT_ANNOTATION.into(), stamp.to_string());
    let r = run(&stamped, World::default());
    assert_eq!(
        admitted(&r).started,
        Some(StartedBy::User),
        "a later change is the user's"
    );
}

// ---- deletion ----------------------------------------------------------------------------

#[test]
fn deletion_schedules_the_cleanup_plan() {
    let r = run(
        &idle(),
        World {
            deleting: true,
            ..Default::default()
        },
    );
    assert_eq!(exec_plan(&r), ("cleanup".into(), "uid-1".into()));
    assert_eq!(admitted(&r).spec.plan_execution.plan_name, "cleanup");
    assert!(r.adm.scheduled.is_none(), "no schedule check while deleting");
}

#[test]
fn deletion_without_a_cleanup_plan_runs_nothing() {
    let mut o = ov();
    o.spec.plans.remove("cleanup");
    let r = run(
        &idle(),
        World {
            deleting: true,
            ov: Some(o),
            ..Default::default()
        },
    );
    assert_eq!(exec_plan(&r).0, "");
    assert_eq!(r.uids, 0);
}

#[test]
fn deletion_before_any_admission_executes_nothing() {
    let r = run(
        &created(),
        World {
            deleting: true,
            ..Default::default()
        },
    );
    assert_eq!(admitted(&r).exec, None);
    assert_eq!(admitted(&r).started, None);
}

#[test]
fn deletion_reads_no_sensitive_parameters_and_fires_no_autopilot() {
    let r = run(
        &idle(),
        World {
            deleting: true,
            fire: fire("backup", &[]),
            sensitive: Some(fingerprints("new")),
            ..Default::default()
        },
    );
    assert_eq!(r.reads, 0);
    assert!(r.adm.fired.is_none());
    assert_eq!(exec_plan(&r).0, "cleanup");
}

// ---- autopilot ---------------------------------------------------------------------------

#[test]
fn an_autopilot_firing_on_an_idle_instance_starts_its_plan_with_its_parameters() {
    let r = run(
        &idle(),
        World {
            fire: fire("update", &[("REPLICAS", "6")]),
            ..Default::default()
        },
    );
    let a = admitted(&r);
    assert_eq!(exec_plan(&r), ("update".into(), "uid-1".into()));
    assert_eq!(a.spec.parameters["REPLICAS"], "6");
    assert_eq!(
        a.started,
        Some(StartedBy::Autopilot {
            rule: "update/0".into()
        })
    );
    assert_eq!(r.adm.fired.as_ref().map(|i| i.plan.as_str()), Some("update"));
}

#[test]
fn an_autopilot_firing_of_an_unknown_plan_starts_nothing_and_says_why() {
    let r = run(
        &idle(),
        World {
            fire: fire("nope", &[]),
            ..Default::default()
        },
    );
    assert!(r.adm.fired.is_none());
    let msg = r.adm.autopilot_denial.clone().expect("denied");
    assert!(msg.contains("nope"), "{msg}");
    assert_eq!(exec_plan(&r).0, "");
}

#[test]
fn an_autopilot_firing_setting_an_immutable_parameter_is_denied() {
    let r = run(
        &idle(),
        World {
            fire: fire("update", &[("STORAGE", "9Gi")]),
            ..Default::default()
        },
    );
    let msg = r.adm.autopilot_denial.clone().expect("denied");
    assert!(msg.contains("STORAGE"), "{msg}");
    assert_eq!(admitted(&r).started, None);
}

#[test]
fn autopilot_rules_are_read_only_when_there_are_some_and_wait_while_the_instance_is_busy() {
    let autopilot = INITIATORS[0];
    assert_eq!(autopilot.name(), "autopilot");
    let mut with_rules = ov();
    with_rules.spec.plans.get_mut("update").unwrap().when = vec![Default::default()];
    let now = at(NOW);
    let need = |inst: &Instance, ov: &OperatorVersion, deleting: bool| {
        autopilot.needs(&Observed::new(inst, ov, None, deleting, now))
    };
    let rules = |waiting| vec![Observation::Autopilot(AutopilotRead::Rules { waiting })];
    let none = vec![Observation::Autopilot(AutopilotRead::None)];
    assert_eq!(need(&idle(), &ov(), false), none, "no rules");
    assert_eq!(need(&idle(), &with_rules, true), none, "being deleted");
    assert_eq!(need(&idle(), &with_rules, false), rules(false), "idle");
    assert_eq!(
        need(&running("deploy"), &with_rules, false),
        rules(true),
        "a plan runs"
    );
    let pending = changed(|s| {
        s.parameters.insert("REPLICAS".into(), "5".into());
    });
    assert_eq!(need(&pending, &with_rules, false), rules(true), "a change waits");
}

#[test]
fn without_rules_their_states_go_once_the_admission_is_stored() {
    let r = run(&idle(), World::default());
    assert!(
        stored(&r).contains(&"autopilot 0".to_string()),
        "{:?}",
        stored(&r)
    );
    let deleting = run(
        &idle(),
        World {
            deleting: true,
            ..Default::default()
        },
    );
    assert!(
        !stored(&deleting).iter().any(|e| e.starts_with("autopilot")),
        "the cleanup run leaves the rules' states alone: {:?}",
        stored(&deleting)
    );
}

#[test]
fn an_evaluation_is_reported_once_the_admission_is_stored() {
    let state = kudo_api::AutopilotRuleStatus {
        last_error: "plan \"update\" when[0]: no such key".into(),
        ..Default::default()
    };
    let evaluation = Evaluation {
        states: BTreeMap::from([("update/0".to_string(), state.clone())]),
        errors: vec![("update/0".into(), state.last_error.clone())],
        requeue: Some(Duration::from_secs(30)),
        ..Default::default()
    };
    let r = run(
        &idle(),
        World {
            evaluation: Some(evaluation),
            ..Default::default()
        },
    );
    assert_eq!(
        stored(&r),
        [
            "admission false",
            "log Warn",
            "event AutopilotRuleError update/0",
            "autopilot 1",
            "requeue 30",
            "schedules 1",
            "requeue 86370",
        ]
    );
    assert!(
        events(&r).is_empty(),
        "nothing of the evaluation is said before the admission is stored"
    );
}

#[test]
fn a_firing_is_announced_once_its_run_is_stored() {
    let r = run(
        &idle(),
        World {
            fire: fire("update", &[("REPLICAS", "6")]),
            ..Default::default()
        },
    );
    let s = stored(&r);
    assert!(
        s.contains(&"event AutopilotTriggered update".to_string()),
        "{s:?}"
    );
    assert!(!s.iter().any(|e| e.contains("AutopilotRuleError")), "{s:?}");
}

#[test]
fn a_denied_firing_is_reported_as_the_rules_error() {
    let r = run(
        &idle(),
        World {
            fire: fire("nope", &[]),
            evaluation: Some(Evaluation {
                states: BTreeMap::from([("nope/0".to_string(), Default::default())]),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    let s = stored(&r);
    assert!(
        s.contains(&"event AutopilotRuleError nope/0".to_string()),
        "{s:?}"
    );
    assert!(!s.iter().any(|e| e.contains("AutopilotTriggered")), "{s:?}");
}

#[test]
fn a_denied_change_is_written_and_announced_once_the_admission_is_stored() {
    let inst = changed(|s| {
        s.parameters.insert("STORAGE".into(), "5Gi".into());
    });
    let r = run(&inst, World::default());
    let s = stored(&r);
    assert_eq!(
        &s[..3],
        ["admission true", "log Warn", "event ChangeDenied Admission"]
    );
    let admitted = run(&idle(), World::default());
    assert_eq!(
        stored(&admitted)[0],
        "admission false",
        "an admitted change clears the condition"
    );
}

// ---- rotation of sensitive parameters ----------------------------------------------------

#[test]
fn rotation_first_sight_records_fingerprints_and_runs_nothing() {
    let r = run(
        &idle(),
        World {
            sensitive: Some(fingerprints("a")),
            ..Default::default()
        },
    );
    assert_eq!(r.reads, 1);
    let recorded = admitted(&r).annotations[FINGERPRINTS_ANNOTATION]
        .as_deref()
        .unwrap();
    assert!(recorded.contains("password:a"));
    assert_eq!(admitted(&r).started, None);
}

#[test]
fn a_rotated_secret_runs_the_parameters_trigger_plan_once() {
    let r = run(
        &with_fingerprints(idle(), "a"),
        World {
            sensitive: Some(fingerprints("b")),
            ..Default::default()
        },
    );
    assert_eq!(exec_plan(&r), ("rotate".into(), "uid-1".into()));
    assert_eq!(
        admitted(&r).started,
        Some(StartedBy::Rotation {
            parameters: "PASSWORD".into()
        })
    );
    let ev = events(&r);
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].0, ev[0].1.as_str()),
        (EventType::Normal, "ParameterRotated")
    );
    assert!(ev[0].2.contains("plan rotate (run uid-1) started"), "{}", ev[0].2);
    // Recorded in the same write: the next reconcile sees no rotation.
    let recorded = admitted(&r).annotations[FINGERPRINTS_ANNOTATION].clone().unwrap();
    let mut again = with_fingerprints(idle(), "b");
    again
        .metadata
        .annotations
        .insert(FINGERPRINTS_ANNOTATION.into(), recorded);
    let r2 = run(
        &again,
        World {
            sensitive: Some(fingerprints("b")),
            ..Default::default()
        },
    );
    assert_eq!(admitted(&r2).started, None);
}

#[test]
fn a_rotation_while_a_plan_runs_waits() {
    let r = run(
        &with_fingerprints(running("deploy"), "a"),
        World {
            sensitive: Some(fingerprints("b")),
            ..Default::default()
        },
    );
    assert_eq!(exec_plan(&r), ("deploy".into(), "r1".into()));
    assert_eq!(admitted(&r).annotations.get(FINGERPRINTS_ANNOTATION), None);
}

#[test]
fn a_rotation_waits_for_an_autopilot_run_admitted_first() {
    let r = run(
        &with_fingerprints(idle(), "a"),
        World {
            fire: fire("update", &[]),
            sensitive: Some(fingerprints("b")),
            ..Default::default()
        },
    );
    assert_eq!(exec_plan(&r).0, "update");
    assert_eq!(admitted(&r).annotations.get(FINGERPRINTS_ANNOTATION), None);
}

#[test]
fn fingerprints_made_with_a_lost_key_are_replaced_without_a_run() {
    let r = run(
        &with_fingerprints(idle(), "a"),
        World {
            sensitive: Some(Sensitive::Current {
                fingerprints: BTreeMap::from([("PASSWORD".into(), "db-secret/password:z".into())]),
                fresh_key: true,
            }),
            ..Default::default()
        },
    );
    assert_eq!(admitted(&r).started, None);
    assert!(
        admitted(&r).annotations[FINGERPRINTS_ANNOTATION]
            .as_deref()
            .unwrap()
            .contains(":z")
    );
}

#[test]
fn fingerprints_of_removed_sources_are_dropped() {
    let r = run(
        &with_fingerprints(idle(), "a"),
        World {
            sensitive: Some(Sensitive::NoSources),
            ..Default::default()
        },
    );
    assert_eq!(admitted(&r).annotations.get(FINGERPRINTS_ANNOTATION), Some(&None));
}

#[test]
fn unreadable_sensitive_parameters_change_nothing() {
    let r = run(
        &with_fingerprints(idle(), "a"),
        World {
            sensitive: Some(Sensitive::Unknown),
            ..Default::default()
        },
    );
    assert!(admitted(&r).annotations.is_empty());
    assert!(events(&r).is_empty());
}

#[test]
fn a_rotated_parameter_whose_trigger_plan_is_missing_records_and_warns() {
    let mut o = ov();
    o.spec.plans.remove("rotate");
    let r = run(
        &with_fingerprints(idle(), "a"),
        World {
            ov: Some(o),
            sensitive: Some(fingerprints("b")),
            ..Default::default()
        },
    );
    let ev = events(&r);
    assert_eq!(
        (ev[0].0, ev[0].1.as_str()),
        (EventType::Warning, "ParameterRotated")
    );
    assert!(admitted(&r).annotations[FINGERPRINTS_ANNOTATION].is_some());
    assert_eq!(admitted(&r).started, None);
}

// ---- schedules ---------------------------------------------------------------------------

#[test]
fn a_schedule_seen_first_records_its_next_occurrence_and_wakes_for_it() {
    let r = run(&idle(), World::default());
    let s = r.adm.scheduled.as_ref().unwrap();
    assert_eq!(
        s.statuses["backup"].next_schedule_time.as_deref(),
        Some("2026-01-03T03:00:00Z")
    );
    assert_eq!(s.statuses["backup"].last_schedule_time, None);
    assert_eq!(s.wake, Some(Duration::from_secs(24 * 3600 - 30)));
}

#[test]
fn a_due_occurrence_starts_the_scheduled_plan() {
    let inst = with_schedule(idle(), Some("2026-01-01T03:00:00Z"), Some("2026-01-02T03:00:00Z"));
    let r = run(&inst, World::default());
    assert_eq!(exec_plan(&r), ("backup".into(), "uid-1".into()));
    assert_eq!(
        admitted(&r).started,
        Some(StartedBy::Schedule {
            due: "2026-01-02T03:00:00Z".into()
        })
    );
    let s = r.adm.scheduled.as_ref().unwrap();
    assert_eq!(
        s.statuses["backup"].last_schedule_time.as_deref(),
        Some("2026-01-02T03:00:00Z")
    );
    let ev = events(&r);
    assert_eq!(ev[0].1, "PlanStarted");
    assert!(ev[0].2.contains("started by schedule '0 3 * * *'"), "{}", ev[0].2);
}

#[test]
fn a_due_occurrence_while_a_plan_runs_is_skipped_and_recorded() {
    let inst = with_schedule(running("deploy"), Some("2026-01-01T03:00:00Z"), None);
    let r = run(&inst, World::default());
    assert_eq!(exec_plan(&r), ("deploy".into(), "r1".into()));
    let ev = events(&r);
    assert_eq!(ev[0].1, "ScheduledPlanSkipped");
    assert!(ev[0].2.contains("plan 'deploy' is running"), "{}", ev[0].2);
    let st = &r.adm.scheduled.as_ref().unwrap().statuses["backup"];
    assert_eq!(st.last_schedule_time.as_deref(), Some("2026-01-02T03:00:00Z"));
}

#[test]
fn a_due_occurrence_with_a_denied_change_pending_is_skipped() {
    let inst = with_schedule(
        changed(|s| {
            s.parameters.insert("STORAGE".into(), "9Gi".into());
        }),
        Some("2026-01-01T03:00:00Z"),
        None,
    );
    let r = run(&inst, World::default());
    let ev = events(&r);
    assert!(
        ev.iter()
            .any(|e| e.2.contains("a change of the instance is pending")),
        "{ev:?}"
    );
    assert_eq!(admitted(&r).started, None);
}

#[test]
fn a_due_occurrence_right_after_a_run_ended_is_decided_a_second_later() {
    let mut inst = running("deploy");
    inst.spec.plan_execution.status = Some(ExecutionStatus::Complete);
    let inst = with_schedule(admit_as_is(inst), Some("2026-01-01T03:00:00Z"), None);
    let r = run(&inst, World::default());
    assert!(events(&r).is_empty());
    assert_eq!(
        r.adm.scheduled.as_ref().unwrap().wake,
        Some(Duration::from_secs(1))
    );
}

#[test]
fn an_invalid_schedule_is_reported_and_not_scheduled() {
    let r = run(
        &idle(),
        World {
            ov: Some(ov_with("op-0.1.0", "every day")),
            ..Default::default()
        },
    );
    let ev = events(&r);
    assert_eq!(
        (ev[0].0, ev[0].1.as_str()),
        (EventType::Warning, "InvalidSchedule")
    );
    assert!(r.adm.scheduled.as_ref().unwrap().statuses.is_empty());
}

#[test]
fn a_schedule_rendered_from_a_parameter_uses_the_admitted_value() {
    let mut o = ov_with("op-0.1.0", "{{ .Params.BACKUP_AT }}");
    o.spec.parameters.push(param("BACKUP_AT", "0 4 * * *", "deploy"));
    let r = run(
        &idle(),
        World {
            ov: Some(o),
            ..Default::default()
        },
    );
    let st = &r.adm.scheduled.as_ref().unwrap().statuses["backup"];
    assert_eq!(st.next_schedule_time.as_deref(), Some("2026-01-02T04:00:00Z"));
}

#[test]
fn plans_without_a_schedule_leave_no_schedule_status() {
    let r = run(
        &idle(),
        World {
            ov: Some(no_schedules()),
            ..Default::default()
        },
    );
    assert!(r.adm.scheduled.as_ref().unwrap().statuses.is_empty());
    assert_eq!(r.adm.scheduled.as_ref().unwrap().wake, None);
}

#[test]
fn a_rotation_run_makes_a_due_schedule_skip() {
    let inst = with_schedule(with_fingerprints(idle(), "a"), Some("2026-01-01T03:00:00Z"), None);
    let r = run(
        &inst,
        World {
            sensitive: Some(fingerprints("b")),
            ..Default::default()
        },
    );
    assert_eq!(exec_plan(&r).0, "rotate");
    assert!(events(&r).iter().any(|e| e.1 == "ScheduledPlanSkipped"));
}

// ---- the registry ------------------------------------------------------------------------

#[test]
fn initiators_decide_in_the_documented_order() {
    let names: Vec<&str> = INITIATORS.iter().map(|i| i.name()).collect();
    assert_eq!(names, ["autopilot", "user change", "rotation", "schedules"]);
}

#[test]
fn sensitive_parameters_are_read_once_and_only_when_asked() {
    let r = run(&idle(), World::default());
    assert_eq!(r.reads, 1);
}
