//! The step of a reconcile once its admission is stored (`kudo_engine::reconcile`): which step
//! runs (`plan_step`, one case per branch), how a pass ends (`after_pass`), a render failure, the
//! idle step (`idle_step`), the status changes and requeues the effects carry, and which
//! OperatorVersion an admitted spec executes. No server, no clock: the manager's reconcile calls
//! exactly these.

use std::collections::BTreeMap;
use std::time::Duration;

use kudo_api::ExecutionStatus::{self, *};
use kudo_api::{
    Condition, Instance, InstanceSpec, InstanceStatus, ObjectMeta, OperatorVersion, Phase, PhaseStatus, Plan,
    PlanExecution, PlanStatus, Step as PlanStep, StepStatus, Task,
};
use kudo_engine::readiness::{IDLE_READINESS_KINDS, last_failed_lifecycle_plan};
use kudo_engine::reconcile::{Admitted, StatusChange};
use kudo_engine::reconcile::{
    AfterPass, DRIFT_POLICY_ANNOTATION, DRIFTED, Effect, LogLevel, PassEnd, Policy, RETRY_ANNOTATION,
    Requeue, Step, StepInput, after_pass, idle_step, plan_step, render_failed, start_pass, store_plan_status,
};
use kudo_engine::{EventType, PassSummary, TaskOutcome, Timestamp, WAITING_GRACE_SECS, reasons};

fn at(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

const NOW: &str = "2026-01-02T03:00:00Z";

/// `deploy` (one step, one Dummy task) and `backup` (the same).
fn ov() -> OperatorVersion {
    let mut ov: OperatorVersion = serde_json::from_value(serde_json::json!({
        "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
        "metadata": {"name": "op-0.1.0", "namespace": "ns"}, "spec": {}
    }))
    .unwrap();
    for plan in ["deploy", "backup"] {
        ov.spec.plans.insert(
            plan.into(),
            Plan {
                phases: vec![Phase {
                    name: "main".into(),
                    steps: vec![PlanStep {
                        name: "s".into(),
                        tasks: vec!["t".into()],
                        timeout: None,
                    }],
                    ..Phase::default()
                }],
                ..Plan::default()
            },
        );
    }
    ov.spec.tasks = vec![Task {
        name: "t".into(),
        kind: "Dummy".into(),
        spec: Default::default(),
    }];
    ov
}

fn exec(plan: &str, uid: &str, status: Option<ExecutionStatus>) -> InstanceSpec {
    let mut s: InstanceSpec =
        serde_json::from_value(serde_json::json!({"operatorVersion": {"name": "op-0.1.0"}})).unwrap();
    s.plan_execution = PlanExecution {
        plan_name: plan.into(),
        uid: uid.into(),
        status,
    };
    s
}

fn plan_status(plan: &str, uid: &str, st: ExecutionStatus) -> PlanStatus {
    PlanStatus {
        name: plan.into(),
        uid: uid.into(),
        status: st,
        phases: vec![PhaseStatus {
            name: "main".into(),
            status: st,
            steps: vec![StepStatus {
                name: "s".into(),
                status: st,
                ..StepStatus::default()
            }],
            ..PhaseStatus::default()
        }],
        ..PlanStatus::default()
    }
}

fn with_plan(ps: PlanStatus) -> InstanceStatus {
    let mut s = InstanceStatus::default();
    s.plan_status.insert(ps.name.clone(), ps);
    s
}

fn input<'a>(
    ov: &'a OperatorVersion,
    exec: &'a InstanceSpec,
    annotations: &'a BTreeMap<String, String>,
) -> StepInput<'a> {
    StepInput {
        ov,
        exec,
        annotations,
        namespace: "ns",
        name: "db",
        now: at(NOW),
    }
}

/// The step of the run `e` names over `status`, without annotations.
fn step(e: &InstanceSpec, status: &mut InstanceStatus) -> Step {
    let (ov, none) = (ov(), BTreeMap::new());
    plan_step(&input(&ov, e, &none), status)
}

fn events(effects: &[Effect]) -> Vec<(EventType, String, String)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Event {
                type_,
                reason,
                action,
                ..
            } => Some((*type_, reason.clone(), action.clone())),
            _ => None,
        })
        .collect()
}

fn logs(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Log { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

// ---- plan_step: one case per branch --------------------------------------------------------

#[test]
fn no_plan_scheduled_is_the_idle_step_and_touches_nothing() {
    let e = exec("", "", None);
    let mut status = InstanceStatus::default();
    assert_eq!(step(&e, &mut status), Step::Idle);
    assert_eq!(status, InstanceStatus::default());
}

#[test]
fn a_plan_the_operator_version_lacks_fails_the_run_once() {
    let e = exec("nope", "r1", Some(InProgress));
    let mut status = InstanceStatus::default();
    let Step::Ended {
        plan_status,
        cancelled,
        effects,
    } = step(&e, &mut status)
    else {
        panic!("the run ends without a pass");
    };
    assert_eq!(plan_status.status, FatalError);
    assert_eq!(plan_status.message, "could not find required plan: nope");
    assert_eq!(cancelled, None);
    assert_eq!(
        events(&effects),
        vec![(
            EventType::Warning,
            reasons::INVALID_PLAN.to_string(),
            "nope".to_string()
        )]
    );
    // Every plan the OperatorVersion declares got its status.
    assert!(status.plan_status.contains_key("deploy") && status.plan_status.contains_key("backup"));
    // Already failed: said once, not at every reconcile.
    let mut failed = with_plan(plan_status);
    let Step::Ended { effects, .. } = step(&e, &mut failed) else {
        panic!("still ended");
    };
    assert!(effects.is_empty());
}

#[test]
fn a_cancellation_marks_the_unfinished_run_cancelled_without_a_task() {
    let e = exec("deploy", "r1", Some(Cancelled));
    let mut status = with_plan(plan_status("deploy", "r1", InProgress));
    let Step::Ended {
        plan_status,
        cancelled,
        effects,
    } = step(&e, &mut status)
    else {
        panic!("a cancellation runs no task");
    };
    assert_eq!(plan_status.status, Cancelled);
    let summary = cancelled.expect("the cancelling pass, for the metrics");
    assert_eq!(summary.tasks_run, 0);
    assert!(
        events(&effects).iter().all(|(_, _, action)| action == "deploy"),
        "{effects:?}"
    );
    assert!(logs(&effects).iter().any(|l| l.contains("plan cancelled")));
}

#[test]
fn a_terminal_run_runs_nothing_and_says_nothing() {
    let e = exec("deploy", "r1", Some(Complete));
    let mut status = with_plan(plan_status("deploy", "r1", Complete));
    let decided = step(&e, &mut status);
    let Step::Ended {
        plan_status,
        cancelled: None,
        effects,
    } = decided
    else {
        panic!("ended: {decided:?}");
    };
    assert_eq!(plan_status.status, Complete);
    assert!(effects.is_empty());
}

#[test]
fn a_new_run_restarts_its_plan_and_passes() {
    let e = exec("deploy", "r2", Some(InProgress));
    let mut status = with_plan(plan_status("deploy", "r1", Complete));
    let Step::Pass {
        plan_status,
        retry_of,
        effects,
    } = step(&e, &mut status)
    else {
        panic!("a pass");
    };
    assert_eq!((plan_status.uid.as_str(), plan_status.status), ("r2", Pending));
    assert_eq!(retry_of, None);
    assert!(effects.is_empty());
}

#[test]
fn a_retry_of_exactly_the_failed_run_keeps_its_complete_steps_and_names_it() {
    let (ov, e) = (ov(), exec("deploy", "r2", Some(InProgress)));
    let annotations = BTreeMap::from([(RETRY_ANNOTATION.to_string(), "deploy/r1".to_string())]);
    let mut status = with_plan(plan_status("deploy", "r1", FatalError));
    let Step::Pass {
        plan_status,
        retry_of,
        effects,
    } = plan_step(&input(&ov, &e, &annotations), &mut status)
    else {
        panic!("a pass");
    };
    assert_eq!(retry_of.as_deref(), Some("r1"));
    assert_eq!(plan_status.uid, "r2");
    assert_eq!(logs(&effects).len(), 1, "where the retry resumes");
}

#[test]
fn a_plan_that_does_not_render_fails_the_run_naming_the_instance() {
    let (ov, none) = (ov(), BTreeMap::new());
    let e = exec("deploy", "r1", Some(InProgress));
    let mut ps = plan_status("deploy", "r1", InProgress);
    let effects = render_failed(&input(&ov, &e, &none), &mut ps, "parameter REPLICAS is invalid");
    assert_eq!(ps.status, FatalError);
    assert_eq!(ps.message, "ns/db: parameter REPLICAS is invalid");
    assert_eq!(
        events(&effects),
        vec![(
            EventType::Warning,
            reasons::INVALID_PARAMS.to_string(),
            "deploy".to_string()
        )]
    );
}

#[test]
fn a_pass_starts_only_over_a_plan_of_the_operator_version() {
    let (ov, none) = (ov(), BTreeMap::new());
    let e = exec("deploy", "r1", Some(InProgress));
    assert!(
        start_pass(
            &input(&ov, &e, &none),
            plan_status("deploy", "r1", Pending),
            None,
            vec![]
        )
        .is_ok()
    );
    let gone = exec("nope", "r1", Some(InProgress));
    let Err(failed) = start_pass(
        &input(&ov, &gone, &none),
        plan_status("nope", "r1", Pending),
        None,
        vec![],
    ) else {
        panic!("no such plan");
    };
    assert_eq!(failed.status, FatalError);
}

#[test]
fn a_stored_plan_status_carries_the_readiness_of_lifecycle_plans_only() {
    let now = at(NOW);
    let ready = |s: &InstanceStatus| s.conditions.iter().find(|c| c.type_ == "Ready").cloned();
    let mut status = InstanceStatus::default();
    let st = store_plan_status(
        &mut status,
        "deploy",
        plan_status("deploy", "r1", InProgress),
        now,
        Some(3),
    );
    assert_eq!(st, InProgress);
    let c = ready(&status).expect("deploy marks readiness");
    assert_eq!((c.status.as_str(), c.observed_generation), ("Unknown", Some(3)));
    let mut status = InstanceStatus::default();
    store_plan_status(
        &mut status,
        "backup",
        plan_status("backup", "b1", InProgress),
        now,
        Some(3),
    );
    assert_eq!(ready(&status), None, "a running backup leaves readiness alone");
    assert_eq!(status.plan_status["backup"].uid, "b1");
}

// ---- after_pass ------------------------------------------------------------------------------

/// Runs a pass of deploy (run `uid`) from `from`, the Dummy task reporting `outcome`.
fn pass(
    from: PlanStatus,
    uid: &str,
    outcome: TaskOutcome,
    annotations: &BTreeMap<String, String>,
) -> (PlanStatus, PassSummary) {
    let ov = ov();
    let e = exec("deploy", uid, Some(InProgress));
    let mut p = start_pass(&input(&ov, &e, annotations), from, None, vec![]).expect("deploy exists");
    while p.next_task().is_some() {
        p.report(outcome.clone());
    }
    p.finish()
}

fn end<'a>(summary: &'a PassSummary, stored: &'a InstanceStatus, polled: bool) -> PassEnd<'a> {
    PassEnd {
        plan: "deploy",
        uid: "r1",
        summary,
        polled,
        backstop: Duration::from_secs(300),
        retry_of: None,
        recreated: false,
        stored,
        durable: true,
        generation: Some(2),
        now: at(NOW),
    }
}

/// The stored status of a deploy run `r1` already written (so no start is held back).
fn written() -> InstanceStatus {
    with_plan(plan_status("deploy", "r1", InProgress))
}

#[test]
fn a_wait_for_watched_objects_is_woken_by_the_watch_and_guarded_by_the_backstop() {
    let none = BTreeMap::new();
    let (ps, summary) = pass(
        plan_status("deploy", "r1", InProgress),
        "r1",
        TaskOutcome::InProgress(None),
        &none,
    );
    let stored = written();
    let mut status = stored.clone();
    let AfterPass {
        status: st,
        requeue,
        keep_stored_status,
        ..
    } = after_pass(&end(&summary, &stored, false), ps, &mut status);
    assert_eq!(st, InProgress);
    assert!(!keep_stored_status);
    // No timeout and nothing to show: only the backstop, however long it is.
    assert_eq!(requeue, Some(Duration::from_secs(300)));
    let short = PassEnd {
        backstop: Duration::from_secs(2),
        ..end(&summary, &stored, false)
    };
    let ps = status.plan_status["deploy"].clone();
    assert_eq!(
        after_pass(&short, ps, &mut status).requeue,
        Some(Duration::from_secs(2))
    );
}

#[test]
fn a_polled_wait_keeps_kudos_backoff() {
    let none = BTreeMap::new();
    let (ps, summary) = pass(
        plan_status("deploy", "r1", InProgress),
        "r1",
        TaskOutcome::InProgress(None),
        &none,
    );
    let stored = written();
    let mut status = stored.clone();
    let watched = after_pass(&end(&summary, &stored, false), ps.clone(), &mut status.clone());
    let polled = after_pass(&end(&summary, &stored, true), ps, &mut status);
    // KUDO's backoff starts at a second (the plan status was just updated).
    assert_eq!(polled.requeue, Some(Duration::from_secs(1)));
    assert_eq!(watched.requeue, Some(Duration::from_secs(300)));
}

#[test]
fn a_transient_error_is_polled() {
    let none = BTreeMap::new();
    let (ps, summary) = pass(
        plan_status("deploy", "r1", InProgress),
        "r1",
        TaskOutcome::Transient("connection refused".into()),
        &none,
    );
    let stored = written();
    let watched_summary = pass(
        plan_status("deploy", "r1", InProgress),
        "r1",
        TaskOutcome::InProgress(None),
        &none,
    )
    .1;
    let mut status = stored.clone();
    let transient = after_pass(&end(&summary, &stored, false), ps.clone(), &mut status.clone());
    let waiting = after_pass(&end(&watched_summary, &stored, false), ps, &mut status);
    assert_eq!(transient.requeue, Some(Duration::from_secs(1)));
    assert_eq!(waiting.requeue, Some(Duration::from_secs(300)));
}

#[test]
fn a_terminal_pass_needs_no_requeue_and_names_its_events_by_plan() {
    let none = BTreeMap::new();
    let (ps, summary) = pass(
        plan_status("deploy", "r1", InProgress),
        "r1",
        TaskOutcome::Done,
        &none,
    );
    let stored = written();
    let mut status = stored.clone();
    let ended = after_pass(&end(&summary, &stored, false), ps, &mut status);
    assert_eq!((ended.status, ended.requeue), (Complete, None));
    assert_eq!(status.plan_status["deploy"].status, Complete);
    let evs = events(&ended.effects);
    assert!(
        evs.iter()
            .any(|(_, r, a)| r == reasons::PLAN_FINISHED && a == "deploy"),
        "{evs:?}"
    );
}

#[test]
fn a_retry_announces_its_start_in_a_series_of_its_own() {
    let none = BTreeMap::new();
    let (ps, summary) = pass(
        plan_status("deploy", "r1", Pending),
        "r1",
        TaskOutcome::Done,
        &none,
    );
    let stored = written();
    let mut status = stored.clone();
    let retry = PassEnd {
        retry_of: Some("f0"),
        ..end(&summary, &stored, false)
    };
    let ended = after_pass(&retry, ps, &mut status);
    let evs = events(&ended.effects);
    assert!(
        evs.iter()
            .any(|(_, r, a)| r == reasons::PLAN_STARTED && a == "deploy retry of f0"),
        "{evs:?}"
    );
    assert!(
        evs.iter()
            .any(|(_, r, a)| r == reasons::PLAN_FINISHED && a == "deploy"),
        "{evs:?}"
    );
}

/// A pass publishes its Events before its status write: a run's start and end are keyed by the
/// run, so a pass repeated (after a kill or a refused write) announces nothing twice; other
/// Events stay series.
#[test]
fn a_runs_start_and_end_are_published_once_per_run() {
    let none = BTreeMap::new();
    let (ps, summary) = pass(
        plan_status("deploy", "r1", Pending),
        "r1",
        TaskOutcome::Done,
        &none,
    );
    let stored = written();
    let ended = after_pass(&end(&summary, &stored, false), ps.clone(), &mut stored.clone());
    let retry = PassEnd {
        retry_of: Some("f0"),
        ..end(&summary, &stored, false)
    };
    let retried = after_pass(&retry, ps, &mut stored.clone());
    let once = |effects: &[Effect]| -> Vec<(String, Option<String>)> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Event { reason, once, .. } => Some((reason.clone(), once.clone())),
                _ => None,
            })
            .collect()
    };
    let key = |k: &str| Some(k.to_string());
    assert_eq!(
        once(&ended.effects),
        [
            ("PlanStarted".into(), key("r1/PlanStarted/deploy")),
            ("PlanFinished".into(), key("r1/PlanFinished/deploy")),
        ]
    );
    assert_eq!(
        once(&retried.effects)[0],
        ("PlanStarted".into(), key("r1/PlanStarted/deploy retry of f0"))
    );
    let drift = Effect::event(EventType::Normal, "DriftRepaired", "deploy", "m");
    assert!(matches!(drift, Effect::Event { once: None, .. }));
}

#[test]
fn a_pass_that_only_started_the_run_keeps_the_stored_status_until_the_grace_ends() {
    let timing = kudo_engine::Timing {
        uid: "r1".into(),
        plan_started: Some(NOW.into()),
        ..Default::default()
    };
    let annotations = BTreeMap::from([(
        kudo_engine::TIMING_ANNOTATION.to_string(),
        timing.to_annotation().unwrap(),
    )]);
    let (ps, summary) = pass(
        plan_status("deploy", "r1", Pending),
        "r1",
        TaskOutcome::InProgress(None),
        &annotations,
    );
    // A status the manager wrote before (an Instance without one is written at once).
    let stored = InstanceStatus {
        observed_generation: Some(1),
        ..InstanceStatus::default()
    };
    let mut status = stored.clone();
    let ended = after_pass(&end(&summary, &stored, false), ps.clone(), &mut status);
    assert!(ended.keep_stored_status);
    assert_eq!(status, stored, "nothing but the start happened");
    assert!(
        events(&ended.effects).is_empty(),
        "its Events wait for the pass that writes"
    );
    assert!(
        ended
            .requeue
            .is_some_and(|r| r <= Duration::from_secs(WAITING_GRACE_SECS))
    );
    let unseen = InstanceStatus::default();
    let mut status = unseen.clone();
    let first = after_pass(&end(&summary, &unseen, false), ps, &mut status);
    assert!(
        !first.keep_stored_status,
        "a new Instance's first status goes out with its first reconcile"
    );
    // A retry that deleted objects to recreate them writes its start at once: its PlanStarted
    // Event names them, and the next pass (which finds them recreated) could not.
    let mut status = stored.clone();
    let recreated = PassEnd {
        recreated: true,
        ..end(&summary, &stored, false)
    };
    let ended = after_pass(&recreated, summary_ps(&annotations), &mut status);
    assert!(!ended.keep_stored_status);
    assert_ne!(status, stored);
}

/// The plan status a first pass of run `r1` leaves (see the test above).
fn summary_ps(annotations: &BTreeMap<String, String>) -> PlanStatus {
    pass(
        plan_status("deploy", "r1", Pending),
        "r1",
        TaskOutcome::InProgress(None),
        annotations,
    )
    .0
}

// ---- the idle step -----------------------------------------------------------------------------

fn failed_deploy() -> InstanceStatus {
    let mut ps = plan_status("deploy", "d1", FatalError);
    ps.last_updated_timestamp = Some("2026-01-01T10:00:00Z".into());
    with_plan(ps)
}

fn drifted() -> Condition {
    Condition {
        type_: DRIFTED.into(),
        status: "True".into(),
        ..Condition::default()
    }
}

#[test]
fn the_idle_step_chooses_readiness_and_the_drift_check() {
    let now = at(NOW);
    let policy = |p: &str| BTreeMap::from([(DRIFT_POLICY_ANNOTATION.to_string(), p.to_string())]);
    let none = BTreeMap::new();
    type Case<'a> = (
        &'a str,
        InstanceStatus,
        bool,
        BTreeMap<String, String>,
        bool,
        Option<Policy>,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "a failed lifecycle run: Unknown, no drift check",
            failed_deploy(),
            false,
            none.clone(),
            true,
            None,
        ),
        (
            "being deleted: no drift check",
            InstanceStatus::default(),
            true,
            none.clone(),
            false,
            None,
        ),
        (
            "the default policy repairs",
            InstanceStatus::default(),
            false,
            none.clone(),
            false,
            Some(Policy::Repair),
        ),
        (
            "policy report",
            InstanceStatus::default(),
            false,
            policy("report"),
            false,
            Some(Policy::Report),
        ),
        (
            "policy ignore",
            InstanceStatus::default(),
            false,
            policy("ignore"),
            false,
            None,
        ),
        (
            "an unknown policy repairs",
            InstanceStatus::default(),
            false,
            policy("fix"),
            false,
            Some(Policy::Repair),
        ),
    ];
    for (what, mut status, deleting, annotations, fixed_ready, drift) in cases {
        let step = idle_step(&mut status, deleting, &annotations, now);
        assert_eq!(step.ready.is_some(), fixed_ready, "{what}");
        assert_eq!(step.drift, drift, "{what}");
    }
    let failed = idle_step(&mut failed_deploy(), false, &none, now).ready.unwrap();
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_str()),
        ("Unknown", "PlanInFatalError")
    );
    let unknown = idle_step(&mut InstanceStatus::default(), false, &policy("fix"), now);
    assert_eq!(unknown.effects.len(), 1, "the unknown policy is reported");
    assert!(matches!(
        &unknown.effects[0],
        Effect::Log {
            level: LogLevel::Warn,
            ..
        }
    ));
    // Ignoring drift drops what a report said earlier; a repairing check leaves it to its result.
    let mut reported = InstanceStatus {
        conditions: vec![drifted()],
        ..InstanceStatus::default()
    };
    idle_step(&mut reported, false, &policy("ignore"), now);
    assert!(reported.conditions.is_empty());
    let mut kept = InstanceStatus {
        conditions: vec![drifted()],
        ..InstanceStatus::default()
    };
    idle_step(&mut kept, false, &none, now);
    assert_eq!(kept.conditions, vec![drifted()]);
}

#[test]
fn idle_readiness_follows_the_latest_failed_lifecycle_plan() {
    let ps = |name: &str, status: ExecutionStatus, at: &str| PlanStatus {
        name: name.into(),
        status,
        last_updated_timestamp: Some(at.into()),
        ..PlanStatus::default()
    };
    let mut st = InstanceStatus::default();
    st.plan_status
        .insert("deploy".into(), ps("deploy", Complete, "2026-01-01T10:00:00Z"));
    assert_eq!(last_failed_lifecycle_plan(&st), None);
    st.plan_status
        .insert("update".into(), ps("update", FatalError, "2026-01-01T11:00:00Z"));
    assert_eq!(last_failed_lifecycle_plan(&st), Some("update".into()));
    // A later successful deploy supersedes the failed update.
    st.plan_status
        .insert("deploy".into(), ps("deploy", Complete, "2026-01-01T12:00:00Z"));
    assert_eq!(last_failed_lifecycle_plan(&st), None);
    // Other plans (e.g. backup) do not affect readiness.
    st.plan_status
        .insert("backup".into(), ps("backup", FatalError, "2026-01-01T13:00:00Z"));
    assert_eq!(last_failed_lifecycle_plan(&st), None);
}

#[test]
fn idle_readiness_judges_workloads_not_replica_sets() {
    let kinds: Vec<&str> = IDLE_READINESS_KINDS.iter().map(|(_, k)| *k).collect();
    assert_eq!(kinds, ["Deployment", "StatefulSet", "DaemonSet", "Pod"]);
}

// ---- effects -------------------------------------------------------------------------------

#[test]
fn status_changes_write_their_field_and_the_admission_its_condition() {
    let now = at(NOW);
    let mut status = InstanceStatus::default();
    let sched = BTreeMap::from([("backup".to_string(), Default::default())]);
    StatusChange::Schedules(sched.clone()).apply(&mut status, Some(4), now);
    assert_eq!(status.schedules, sched);
    let rules = BTreeMap::from([("update/0".to_string(), Default::default())]);
    StatusChange::Autopilot(rules.clone()).apply(&mut status, Some(4), now);
    assert_eq!(status.autopilot, rules);
    StatusChange::Admission {
        denial: Some("immutable".into()),
    }
    .apply(&mut status, Some(4), now);
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == "ChangeAccepted")
        .unwrap();
    assert_eq!((c.status.as_str(), c.observed_generation), ("False", Some(4)));
    StatusChange::Admission { denial: None }.apply(&mut status, Some(5), now);
    assert!(status.conditions.iter().all(|c| c.type_ != "ChangeAccepted"));
}

#[test]
fn requeues_fold_into_the_soonest() {
    let s = Duration::from_secs;
    let cases: [(&[Option<Duration>], Duration, Duration); 4] = [
        (&[], s(300), s(300)),
        (&[None], s(300), s(300)),
        (&[Some(s(60)), None, Some(s(5))], s(300), s(5)),
        (&[Some(s(600))], s(300), s(300)),
    ];
    for (asked, default, want) in cases {
        let mut r = Requeue::default();
        for a in asked {
            r.within(*a);
        }
        assert_eq!(r.or(default), want, "{asked:?}");
    }
}

#[test]
fn a_denied_upgrade_keeps_executing_the_admitted_operator_version() {
    let inst = Instance {
        api_version: "kudo.dev/v1beta1".into(),
        kind: "Instance".into(),
        metadata: ObjectMeta {
            name: "db".into(),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        spec: exec("", "", None),
        status: None,
    };
    let same = Admitted::keeping(&inst, Some(inst.spec.clone()), None);
    assert_eq!(same.other_operator_version(&inst.spec), None);
    let mut upgraded = inst.clone();
    upgraded.spec.operator_version.name = "op-0.2.0".into();
    let denied = Admitted::keeping(&upgraded, Some(inst.spec.clone()), Some("denied".into()));
    assert_eq!(denied.other_operator_version(&upgraded.spec), Some(&inst.spec));
    let nothing = Admitted::keeping(&inst, None, None);
    assert_eq!(nothing.other_operator_version(&inst.spec), None);
}
