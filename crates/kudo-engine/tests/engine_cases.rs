//! Execution-pass behaviour, driven through the public pull API with a fake outcome table.
//!
//! The first 15 tests restate the behaviour pinned by KUDO's `pkg/engine/workflow/engine_test.go`
//! (one test per case there); the rest cover our additions and the pull protocol.

use std::collections::BTreeMap;

use kudo_api::ExecutionStatus::{self, *};
use kudo_api::{
    OperatorVersionSpec, Ordering, Phase, PhaseStatus, Plan, PlanStatus, Step, StepStatus, Task, TaskSpec,
};
use kudo_engine::*;

fn t(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

fn now() -> Timestamp {
    t("2024-01-01T12:00:00Z")
}

fn dummy(name: &str) -> Task {
    Task {
        name: name.into(),
        kind: "Dummy".into(),
        spec: TaskSpec::default(),
    }
}

fn step(name: &str, tasks: &[&str]) -> Step {
    Step {
        name: name.into(),
        tasks: tasks.iter().map(|s| s.to_string()).collect(),
        timeout: None,
    }
}

fn phase(name: &str, strategy: &str, steps: Vec<Step>) -> Phase {
    Phase {
        name: name.into(),
        strategy: Ordering(strategy.into()),
        steps,
    }
}

fn ov(strategy: &str, phases: Vec<Phase>, tasks: &[&str]) -> OperatorVersionSpec {
    let mut plans = BTreeMap::new();
    plans.insert(
        "test".to_string(),
        Plan {
            strategy: Ordering(strategy.into()),
            phases,
            timeout: None,
            schedule: None,
            when: Vec::new(),
        },
    );
    OperatorVersionSpec {
        plans,
        tasks: tasks.iter().map(|n| dummy(n)).collect(),
        ..Default::default()
    }
}

fn ss(name: &str, status: ExecutionStatus) -> StepStatus {
    StepStatus {
        name: name.into(),
        status,
        message: String::new(),
        waiting_for: Vec::new(),
    }
}

fn ssm(name: &str, status: ExecutionStatus, msg: &str) -> StepStatus {
    StepStatus {
        name: name.into(),
        status,
        message: msg.into(),
        waiting_for: Vec::new(),
    }
}

fn ps(name: &str, status: ExecutionStatus, steps: Vec<StepStatus>) -> PhaseStatus {
    PhaseStatus {
        name: name.into(),
        status,
        message: String::new(),
        steps,
    }
}

fn plan_status(status: ExecutionStatus, phases: Vec<PhaseStatus>) -> PlanStatus {
    PlanStatus {
        name: "test".into(),
        status,
        message: String::new(),
        last_updated_timestamp: None,
        uid: "uid-1".into(),
        phases,
    }
}

/// A serial plan of one phase `phase` with one step `step` running `tasks`, and its status with
/// that step already IN_PROGRESS.
fn one_running_step(tasks: &[&str]) -> (OperatorVersionSpec, PlanStatus) {
    let spec = ov(
        "serial",
        vec![phase("phase", "serial", vec![step("step", tasks)])],
        tasks,
    );
    let status = plan_status(
        InProgress,
        vec![ps("phase", InProgress, vec![ss("step", InProgress)])],
    );
    (spec, status)
}

/// Runs one pass, answering each task from `outcome(task_name)`; returns the new status, the
/// summary and the task paths in the order they were handed out.
fn run(
    spec: &OperatorVersionSpec,
    status: PlanStatus,
    outcome: impl Fn(&str) -> TaskOutcome,
) -> (PlanStatus, PassSummary, Vec<String>) {
    run_with(spec, status, Timing::default(), now(), outcome)
}

fn run_with(
    spec: &OperatorVersionSpec,
    status: PlanStatus,
    timing: Timing,
    at: Timestamp,
    outcome: impl Fn(&str) -> TaskOutcome,
) -> (PlanStatus, PassSummary, Vec<String>) {
    let mut pass = PlanPass::start(spec, "test", status, at)
        .unwrap()
        .with_instance("default", "test-instance")
        .with_timing(timing);
    let mut calls = Vec::new();
    while let Some(call) = pass.next_task() {
        calls.push(format!(
            "{}.{}.{}.{}",
            call.plan, call.phase, call.step, call.task_name
        ));
        let o = outcome(call.task_name);
        pass.report(o);
    }
    let (st, sum) = pass.finish();
    (st, sum, calls)
}

fn transient(msg: &str) -> TaskOutcome {
    TaskOutcome::Transient(msg.into())
}

fn fatal(msg: &str) -> TaskOutcome {
    TaskOutcome::Fatal {
        reason: "DummyTaskError".into(),
        message: msg.into(),
    }
}

fn not_done() -> TaskOutcome {
    TaskOutcome::InProgress(None)
}

fn strip_ts(mut s: PlanStatus) -> PlanStatus {
    s.last_updated_timestamp = None;
    s
}

const TRANSIENT_ONE: &str =
    "A transient error when executing task test.phase.step.task. Will retry. dummy error";

// ------------------------------------------------------------------ KUDO's 15 cases

#[test]
fn k01_finished_plan_is_unchanged() {
    let spec = ov(
        "serial",
        vec![phase("phase", "serial", vec![step("step", &["task"])])],
        &["task"],
    );
    let mut status = plan_status(Complete, vec![ps("phase", Complete, vec![ss("step", Complete)])]);
    status.last_updated_timestamp = Some("2020-01-01T00:00:00Z".into());
    let (st, sum, calls) = run(&spec, status.clone(), |_| TaskOutcome::Done);
    assert_eq!(st, status);
    assert!(calls.is_empty());
    assert!(!sum.changed);
    assert!(sum.events.is_empty());
}

#[test]
fn k02_step_not_completed_keeps_plan_in_progress() {
    let (spec, status) = one_running_step(&["task"]);
    let (st, sum, calls) = run(&spec, status.clone(), |_| not_done());
    assert_eq!(calls, ["test.phase.step.task"]);
    assert_eq!(strip_ts(st), status);
    assert_eq!(sum.status, InProgress);
}

#[test]
fn k03_single_done_step_completes_plan() {
    let spec = ov(
        "serial",
        vec![phase("phase", "serial", vec![step("step", &["task"])])],
        &["task"],
    );
    let status = plan_status(Pending, vec![ps("phase", Pending, vec![ss("step", Pending)])]);
    let (st, sum, _) = run(&spec, status, |_| TaskOutcome::Done);
    assert_eq!(
        strip_ts(st),
        plan_status(Complete, vec![ps("phase", Complete, vec![ss("step", Complete)])])
    );
    assert_eq!(sum.status, Complete);
}

#[test]
fn k04_errored_step_is_retried_and_completes() {
    let spec = ov(
        "serial",
        vec![phase("phase", "serial", vec![step("step", &["task"])])],
        &["task"],
    );
    // plan status unset (KUDO test uses ""), step in ERROR with an old message
    let status = plan_status(
        NeverRun,
        vec![ps("phase", InProgress, vec![ssm("step", Error, "old")])],
    );
    let (st, _, _) = run(&spec, status, |_| TaskOutcome::Done);
    assert_eq!(
        strip_ts(st),
        plan_status(Complete, vec![ps("phase", Complete, vec![ss("step", Complete)])])
    );
}

#[test]
fn k05_transient_error_puts_step_in_error() {
    let (spec, status) = one_running_step(&["task"]);
    let (st, sum, _) = run(&spec, status, |_| transient("dummy error"));
    assert_eq!(
        strip_ts(st),
        plan_status(
            InProgress,
            vec![ps("phase", InProgress, vec![ssm("step", Error, TRANSIENT_ONE)])]
        )
    );
    assert!(sum.fatal.is_none());
    assert_eq!(
        sum.transient_errors,
        [("test.phase.step.task".to_string(), "dummy error".to_string())]
    );
}

#[test]
fn k06_fatal_error_fails_plan_phase_and_step() {
    let (spec, status) = one_running_step(&["task"]);
    let (st, sum, _) = run(&spec, status, |_| fatal("dummy error"));
    let msg = "Error during execution: fatal error: default/test-instance failed in test.phase.step.task: dummy error";
    assert_eq!(
        strip_ts(st),
        plan_status(
            FatalError,
            vec![ps("phase", FatalError, vec![ssm("step", FatalError, msg)])]
        )
    );
    let f = sum.fatal.unwrap();
    assert_eq!(f.reason, "DummyTaskError");
    assert_eq!(f.message, msg);
    assert!(
        sum.events
            .iter()
            .any(|e| e.reason == "DummyTaskError" && e.type_ == EventType::Warning)
    );
    assert!(sum.events.iter().any(|e| e.reason == "PlanFinished"));
}

#[test]
fn k07_missing_task_is_fatal() {
    let spec = ov(
        "serial",
        vec![phase("phase", "serial", vec![step("step", &["fake-task"])])],
        &["task"],
    );
    let status = plan_status(
        InProgress,
        vec![ps("phase", InProgress, vec![ss("step", InProgress)])],
    );
    let (st, sum, calls) = run(&spec, status, |_| TaskOutcome::Done);
    assert!(calls.is_empty());
    let msg = "default/test-instance fatal error: missing task test.phase.step.fake-task";
    assert_eq!(
        strip_ts(st),
        plan_status(
            FatalError,
            vec![ps("phase", FatalError, vec![ssm("step", FatalError, msg)])]
        )
    );
    assert_eq!(sum.fatal.unwrap().reason, "UnknownTaskName");
}

#[test]
fn k08_unknown_task_kind_is_fatal() {
    let mut spec = ov(
        "serial",
        vec![phase("phase", "serial", vec![step("step", &["task"])])],
        &["task"],
    );
    spec.tasks[0].kind = "Unknown".into();
    let status = plan_status(
        InProgress,
        vec![ps("phase", InProgress, vec![ss("step", InProgress)])],
    );
    let (st, sum, calls) = run(&spec, status, |_| TaskOutcome::Done);
    assert!(calls.is_empty());
    let msg = "default/test-instance fatal error: failed to build task test.phase.step.task: unknown task kind Unknown";
    assert_eq!(
        strip_ts(st),
        plan_status(
            FatalError,
            vec![ps("phase", FatalError, vec![ssm("step", FatalError, msg)])]
        )
    );
    assert_eq!(sum.fatal.unwrap().reason, "TaskBuildError");
}

#[test]
fn k09_serial_steps_stop_after_first_incomplete_step() {
    let spec = ov(
        "serial",
        vec![phase(
            "phase",
            "serial",
            vec![step("stepOne", &["taskOne"]), step("stepTwo", &["taskTwo"])],
        )],
        &["taskOne", "taskTwo"],
    );
    let status = plan_status(
        InProgress,
        vec![ps(
            "phase",
            InProgress,
            vec![ss("stepOne", InProgress), ss("stepTwo", InProgress)],
        )],
    );
    let (st, _, calls) = run(&spec, status, |n| {
        if n == "taskOne" {
            transient("dummy error")
        } else {
            not_done()
        }
    });
    assert_eq!(calls, ["test.phase.stepOne.taskOne"]);
    assert_eq!(
        strip_ts(st),
        plan_status(
            InProgress,
            vec![ps(
                "phase",
                InProgress,
                vec![
                    ssm(
                        "stepOne",
                        Error,
                        "A transient error when executing task test.phase.stepOne.taskOne. Will retry. dummy error"
                    ),
                    ss("stepTwo", InProgress)
                ]
            )]
        )
    );
}

#[test]
fn k10_parallel_steps_continue_after_a_transient_error() {
    let spec = ov(
        "serial",
        vec![phase(
            "phase",
            "parallel",
            vec![step("stepOne", &["taskOne"]), step("stepTwo", &["taskTwo"])],
        )],
        &["taskOne", "taskTwo"],
    );
    let status = plan_status(
        InProgress,
        vec![ps(
            "phase",
            InProgress,
            vec![ss("stepOne", InProgress), ss("stepTwo", InProgress)],
        )],
    );
    let (st, _, calls) = run(&spec, status, |n| {
        if n == "taskOne" {
            transient("dummy error")
        } else {
            TaskOutcome::Done
        }
    });
    assert_eq!(
        calls,
        ["test.phase.stepOne.taskOne", "test.phase.stepTwo.taskTwo"]
    );
    assert_eq!(
        strip_ts(st),
        plan_status(
            InProgress,
            vec![ps(
                "phase",
                InProgress,
                vec![
                    ssm(
                        "stepOne",
                        Error,
                        "A transient error when executing task test.phase.stepOne.taskOne. Will retry. dummy error"
                    ),
                    ss("stepTwo", Complete)
                ]
            )]
        )
    );
}

#[test]
fn k11_parallel_steps_stop_at_first_fatal_error() {
    let spec = ov(
        "serial",
        vec![phase(
            "phase",
            "parallel",
            vec![step("stepOne", &["taskOne"]), step("stepTwo", &["taskTwo"])],
        )],
        &["taskOne", "taskTwo"],
    );
    let status = plan_status(
        InProgress,
        vec![ps(
            "phase",
            InProgress,
            vec![ss("stepOne", InProgress), ss("stepTwo", InProgress)],
        )],
    );
    let (st, _, calls) = run(&spec, status, |n| {
        if n == "taskOne" {
            fatal("dummy error")
        } else {
            TaskOutcome::Done
        }
    });
    assert_eq!(calls, ["test.phase.stepOne.taskOne"]);
    let msg = "Error during execution: fatal error: default/test-instance failed in test.phase.stepOne.taskOne: dummy error";
    assert_eq!(
        strip_ts(st),
        plan_status(
            FatalError,
            vec![ps(
                "phase",
                FatalError,
                vec![ssm("stepOne", FatalError, msg), ss("stepTwo", InProgress)]
            )]
        )
    );
}

#[test]
fn k12_serial_phases_stop_after_first_incomplete_phase() {
    let spec = ov(
        "serial",
        vec![
            phase("phaseOne", "serial", vec![step("step", &["taskOne"])]),
            phase("phaseTwo", "serial", vec![step("step", &["taskTwo"])]),
        ],
        &["taskOne", "taskTwo"],
    );
    let status = plan_status(
        InProgress,
        vec![
            ps("phaseOne", InProgress, vec![ss("step", InProgress)]),
            ps("phaseTwo", InProgress, vec![ss("step", InProgress)]),
        ],
    );
    let (st, _, calls) = run(&spec, status, |n| {
        if n == "taskOne" {
            transient("dummy error")
        } else {
            TaskOutcome::Done
        }
    });
    assert_eq!(calls, ["test.phaseOne.step.taskOne"]);
    assert_eq!(
        strip_ts(st),
        plan_status(
            InProgress,
            vec![
                ps(
                    "phaseOne",
                    InProgress,
                    vec![ssm(
                        "step",
                        Error,
                        "A transient error when executing task test.phaseOne.step.taskOne. Will retry. dummy error"
                    )]
                ),
                ps("phaseTwo", InProgress, vec![ss("step", InProgress)]),
            ]
        )
    );
}

#[test]
fn k13_parallel_phases_continue_after_a_transient_error() {
    let spec = ov(
        "parallel",
        vec![
            phase("phaseOne", "serial", vec![step("step", &["taskOne"])]),
            phase("phaseTwo", "serial", vec![step("step", &["taskTwo"])]),
        ],
        &["taskOne", "taskTwo"],
    );
    let status = plan_status(
        InProgress,
        vec![
            ps("phaseOne", InProgress, vec![ss("step", InProgress)]),
            ps("phaseTwo", InProgress, vec![ss("step", InProgress)]),
        ],
    );
    let (st, _, calls) = run(&spec, status, |n| {
        if n == "taskOne" {
            transient("dummy error")
        } else {
            TaskOutcome::Done
        }
    });
    assert_eq!(
        calls,
        ["test.phaseOne.step.taskOne", "test.phaseTwo.step.taskTwo"]
    );
    assert_eq!(
        strip_ts(st),
        plan_status(
            InProgress,
            vec![
                ps(
                    "phaseOne",
                    InProgress,
                    vec![ssm(
                        "step",
                        Error,
                        "A transient error when executing task test.phaseOne.step.taskOne. Will retry. dummy error"
                    )]
                ),
                ps("phaseTwo", Complete, vec![ss("step", Complete)]),
            ]
        )
    );
}

#[test]
fn k14_parallel_phases_stop_at_first_fatal_error() {
    let spec = ov(
        "parallel",
        vec![
            phase("phaseOne", "serial", vec![step("step", &["taskOne"])]),
            phase("phaseTwo", "serial", vec![step("step", &["taskTwo"])]),
        ],
        &["taskOne", "taskTwo"],
    );
    let status = plan_status(
        InProgress,
        vec![
            ps("phaseOne", InProgress, vec![ss("step", InProgress)]),
            ps("phaseTwo", InProgress, vec![ss("step", InProgress)]),
        ],
    );
    let (st, _, calls) = run(&spec, status, |n| {
        if n == "taskOne" {
            fatal("dummy error")
        } else {
            TaskOutcome::Done
        }
    });
    assert_eq!(calls, ["test.phaseOne.step.taskOne"]);
    let msg = "Error during execution: fatal error: default/test-instance failed in test.phaseOne.step.taskOne: dummy error";
    assert_eq!(
        strip_ts(st),
        plan_status(
            FatalError,
            vec![
                ps("phaseOne", FatalError, vec![ssm("step", FatalError, msg)]),
                ps("phaseTwo", InProgress, vec![ss("step", InProgress)])
            ]
        )
    );
}

#[test]
fn k15_pending_plan_gets_fatal_statuses_on_fatal_error() {
    let spec = ov(
        "serial",
        vec![phase("phase", "serial", vec![step("step", &["task"])])],
        &["task"],
    );
    let status = plan_status(Pending, vec![ps("phase", Pending, vec![ss("step", Pending)])]);
    let (st, sum, _) = run(&spec, status, |_| fatal("dummy error"));
    let msg = "Error during execution: fatal error: default/test-instance failed in test.phase.step.task: dummy error";
    assert_eq!(
        strip_ts(st),
        plan_status(
            FatalError,
            vec![ps("phase", FatalError, vec![ssm("step", FatalError, msg)])]
        )
    );
    assert_eq!(sum.status_before, Pending);
    let reasons: Vec<_> = sum.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["PlanStarted", "DummyTaskError", "PlanFinished"]);
}

// ------------------------------------------------------------------ more KUDO semantics

#[test]
fn missing_phase_status_is_fatal_with_message_on_plan() {
    let spec = ov(
        "serial",
        vec![phase("phase", "serial", vec![step("step", &["task"])])],
        &["task"],
    );
    let status = plan_status(InProgress, vec![]);
    let (st, sum, calls) = run(&spec, status, |_| TaskOutcome::Done);
    assert!(calls.is_empty());
    assert_eq!(st.status, FatalError);
    assert_eq!(
        st.message,
        "default/test-instance fatal error: missing phase status: test.phase"
    );
    assert_eq!(sum.fatal.unwrap().reason, "MissingPhaseStatus");
}

#[test]
fn missing_step_status_is_fatal_with_message_on_phase() {
    let spec = ov(
        "serial",
        vec![phase("phase", "serial", vec![step("step", &["task"])])],
        &["task"],
    );
    let status = plan_status(InProgress, vec![ps("phase", InProgress, vec![])]);
    let (st, sum, _) = run(&spec, status, |_| TaskOutcome::Done);
    assert_eq!(st.status, FatalError);
    assert_eq!(st.message, "");
    assert_eq!(st.phases[0].status, FatalError);
    assert_eq!(
        st.phases[0].message,
        "default/test-instance fatal error: missing step status: test.phase.step"
    );
    assert_eq!(sum.fatal.unwrap().reason, "MissingStepStatus");
}

#[test]
fn all_tasks_of_a_step_run_in_order_and_step_completes_only_when_all_done() {
    let spec = ov(
        "serial",
        vec![phase("phase", "serial", vec![step("step", &["a", "b", "c"])])],
        &["a", "b", "c"],
    );
    let status = plan_status(Pending, vec![ps("phase", Pending, vec![ss("step", Pending)])]);
    // b transient, c not done: all three still run in order
    let (st, _, calls) = run(&spec, status.clone(), |n| match n {
        "b" => transient("x"),
        "c" => not_done(),
        _ => TaskOutcome::Done,
    });
    assert_eq!(
        calls,
        ["test.phase.step.a", "test.phase.step.b", "test.phase.step.c"]
    );
    assert_eq!(st.phases[0].steps[0].status, Error);
    // next pass: every task runs again (done ones too); all done now → complete
    let (st, _, calls) = run(&spec, st, |_| TaskOutcome::Done);
    assert_eq!(calls.len(), 3);
    assert_eq!(st.status, Complete);
    assert_eq!(st.phases[0].steps[0].message, "");
}

#[test]
fn one_not_done_task_keeps_step_in_progress() {
    let spec = ov(
        "serial",
        vec![phase("phase", "serial", vec![step("step", &["a", "b"])])],
        &["a", "b"],
    );
    let status = plan_status(Pending, vec![ps("phase", Pending, vec![ss("step", Pending)])]);
    let (st, sum, _) = run(&spec, status, |n| {
        if n == "a" {
            TaskOutcome::InProgress(Some("waiting for deployment".into()))
        } else {
            TaskOutcome::Done
        }
    });
    assert_eq!(st.phases[0].steps[0].status, InProgress);
    assert_eq!(st.phases[0].steps[0].message, "");
    assert_eq!(
        sum.waiting,
        [(
            "test.phase.step.a".to_string(),
            "waiting for deployment".to_string()
        )]
    );
}

#[test]
fn empty_or_unknown_strategy_behaves_as_parallel() {
    for strategy in ["", "Serial", "whatever"] {
        let spec = ov(
            strategy,
            vec![
                phase("p1", strategy, vec![step("s1", &["a"]), step("s2", &["b"])]),
                phase("p2", strategy, vec![step("s", &["c"])]),
            ],
            &["a", "b", "c"],
        );
        let status = plan_status(
            Pending,
            vec![
                ps("p1", Pending, vec![ss("s1", Pending), ss("s2", Pending)]),
                ps("p2", Pending, vec![ss("s", Pending)]),
            ],
        );
        let (st, _, calls) = run(&spec, status, |n| {
            if n == "a" { not_done() } else { TaskOutcome::Done }
        });
        assert_eq!(
            calls,
            ["test.p1.s1.a", "test.p1.s2.b", "test.p2.s.c"],
            "strategy {strategy:?}"
        );
        assert_eq!(st.phases[0].status, InProgress);
        assert_eq!(st.phases[1].status, Complete);
    }
}

#[test]
fn completed_phases_and_steps_are_skipped() {
    let spec = ov(
        "serial",
        vec![
            phase("p1", "serial", vec![step("s1", &["a"])]),
            phase("p2", "serial", vec![step("s1", &["b"]), step("s2", &["c"])]),
        ],
        &["a", "b", "c"],
    );
    let status = plan_status(
        InProgress,
        vec![
            ps("p1", Complete, vec![ss("s1", Complete)]),
            ps("p2", InProgress, vec![ss("s1", Complete), ss("s2", InProgress)]),
        ],
    );
    let (st, _, calls) = run(&spec, status, |_| TaskOutcome::Done);
    assert_eq!(calls, ["test.p2.s2.c"]);
    assert_eq!(st.status, Complete);
}

#[test]
fn plan_without_phases_completes() {
    let spec = ov("serial", vec![], &[]);
    let (st, sum, calls) = run(&spec, plan_status(Pending, vec![]), |_| TaskOutcome::Done);
    assert!(calls.is_empty());
    assert_eq!(st.status, Complete);
    assert_eq!(
        sum.events.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>(),
        ["PlanStarted", "PlanFinished"]
    );
}

#[test]
fn never_run_phase_is_executed_without_status_change_until_complete() {
    // KUDO only marks running phases IN_PROGRESS; a NEVER_RUN phase (added by an upgrade to a
    // running plan) still has its steps executed
    let spec = ov(
        "serial",
        vec![phase("p", "serial", vec![step("s", &["a"])])],
        &["a"],
    );
    let (st, _, calls) = run(
        &spec,
        plan_status(InProgress, vec![ps("p", NeverRun, vec![ss("s", NeverRun)])]),
        |_| not_done(),
    );
    assert_eq!(calls.len(), 1);
    assert_eq!(st.phases[0].status, NeverRun);
    assert_eq!(st.phases[0].steps[0].status, NeverRun);
}

#[test]
fn unknown_plan_is_an_error() {
    let spec = ov("serial", vec![], &[]);
    let err = PlanPass::start(&spec, "nope", plan_status(Pending, vec![]), now()).unwrap_err();
    assert_eq!(err, PassError::PlanNotFound("nope".into()));
    assert_eq!(err.to_string(), "could not find required plan: nope");
}

#[test]
fn invalid_tasks_are_build_errors() {
    let cases: Vec<(Task, &str)> = vec![
        (
            Task {
                name: "t".into(),
                kind: "Apply".into(),
                spec: TaskSpec::default(),
            },
            "empty resource list",
        ),
        (
            Task {
                name: "t".into(),
                kind: "Delete".into(),
                spec: TaskSpec::default(),
            },
            "empty resource list",
        ),
        (
            Task {
                name: "t".into(),
                kind: "Toggle".into(),
                spec: TaskSpec {
                    resources: vec!["a.yaml".into()],
                    ..Default::default()
                },
            },
            "no parameter",
        ),
        (
            Task {
                name: "t".into(),
                kind: "Pipe".into(),
                spec: TaskSpec {
                    pod: "pod.yaml".into(),
                    ..Default::default()
                },
            },
            "no pipe entries",
        ),
        (
            Task {
                name: "t".into(),
                kind: "Pipe".into(),
                spec: TaskSpec {
                    pod: "pod.yaml".into(),
                    pipe: vec![kudo_api::PipeSpec {
                        file: "/tmp/a".into(),
                        env_file: String::new(),
                        kind: "Secret".into(),
                        key: "bad key".into(),
                    }],
                    ..Default::default()
                },
            },
            "must match",
        ),
        (
            Task {
                name: "t".into(),
                kind: "Pipe".into(),
                spec: TaskSpec {
                    pod: "pod.yaml".into(),
                    pipe: vec![kudo_api::PipeSpec {
                        file: "/tmp/a".into(),
                        env_file: "/tmp/b".into(),
                        kind: "Secret".into(),
                        key: "k".into(),
                    }],
                    ..Default::default()
                },
            },
            "exactly one of file or envFile",
        ),
        (
            Task {
                name: "t".into(),
                kind: "Pipe".into(),
                spec: TaskSpec {
                    pod: "pod.yaml".into(),
                    pipe: vec![kudo_api::PipeSpec {
                        file: "/tmp/a".into(),
                        env_file: String::new(),
                        kind: "Pod".into(),
                        key: "k".into(),
                    }],
                    ..Default::default()
                },
            },
            "expected Secret or ConfigMap",
        ),
        (
            Task {
                name: "t".into(),
                kind: "KudoOperator".into(),
                spec: TaskSpec::default(),
            },
            "no package",
        ),
        (
            Task {
                name: "t".into(),
                kind: "KudoOperator".into(),
                spec: TaskSpec {
                    package: "zk".into(),
                    ..Default::default()
                },
            },
            "no operatorVersion",
        ),
        (
            Task {
                name: "t".into(),
                kind: "apply".into(),
                spec: TaskSpec {
                    resources: vec!["a".into()],
                    ..Default::default()
                },
            },
            "unknown task kind apply",
        ),
    ];
    for (task, want) in cases {
        let err = validate_task(&task).unwrap_err().to_string();
        assert!(err.contains(want), "{}: {err}", task.kind);
    }
    let ok = [
        Task {
            name: "t".into(),
            kind: "Apply".into(),
            spec: TaskSpec {
                resources: vec!["a".into()],
                ..Default::default()
            },
        },
        Task {
            name: "t".into(),
            kind: "Toggle".into(),
            spec: TaskSpec {
                resources: vec!["a".into()],
                parameter: "P".into(),
                ..Default::default()
            },
        },
        Task {
            name: "t".into(),
            kind: "Dummy".into(),
            spec: TaskSpec::default(),
        },
        Task {
            name: "t".into(),
            kind: "KudoOperator".into(),
            spec: TaskSpec {
                package: "zk".into(),
                operator_version: "0.3.0".into(),
                ..Default::default()
            },
        },
        Task {
            name: "t".into(),
            kind: "Pipe".into(),
            spec: TaskSpec {
                pod: "pod.yaml".into(),
                pipe: vec![kudo_api::PipeSpec {
                    file: String::new(),
                    env_file: "/tmp/e".into(),
                    kind: "ConfigMap".into(),
                    key: "my_key-1".into(),
                }],
                ..Default::default()
            },
        },
    ];
    for task in ok {
        assert_eq!(validate_task(&task), Ok(()), "{}", task.kind);
    }
}

// ------------------------------------------------------------------ pull protocol

#[test]
fn next_task_repeats_until_reported_and_stray_reports_are_ignored() {
    let spec = ov(
        "serial",
        vec![phase("p", "serial", vec![step("s", &["a", "b"])])],
        &["a", "b"],
    );
    let mut pass = PlanPass::start(
        &spec,
        "test",
        plan_status(Pending, vec![ps("p", Pending, vec![ss("s", Pending)])]),
        now(),
    )
    .unwrap();
    pass.report(TaskOutcome::Done); // nothing outstanding: ignored
    let first = pass.next_task().unwrap();
    assert_eq!(first.task_name, "a");
    assert_eq!(first.plan_uid, "uid-1");
    assert_eq!(first.task.kind, "Dummy");
    let again = pass.next_task().unwrap();
    assert_eq!(again, first);
    pass.report(TaskOutcome::Done);
    assert_eq!(pass.next_task().unwrap().task_name, "b");
    assert_eq!(pass.status().status, InProgress);
    pass.report(TaskOutcome::Done);
    assert!(pass.next_task().is_none());
    assert!(pass.next_task().is_none());
    let (st, sum) = pass.finish();
    assert_eq!(st.status, Complete);
    assert_eq!(sum.tasks_run, 2);
}

#[test]
fn task_call_outlives_the_pass_borrow() {
    let spec = ov(
        "serial",
        vec![phase("p", "serial", vec![step("s", &["a"])])],
        &["a"],
    );
    let mut pass = PlanPass::start(
        &spec,
        "test",
        plan_status(Pending, vec![ps("p", Pending, vec![ss("s", Pending)])]),
        now(),
    )
    .unwrap();
    let call = pass.next_task().unwrap();
    pass.report(TaskOutcome::Done); // mutable use of the pass while `call` is alive
    assert_eq!(call.step, "s");
}

#[test]
fn finishing_early_counts_unreported_task_as_not_done() {
    let spec = ov(
        "serial",
        vec![phase("p", "serial", vec![step("s", &["a"])])],
        &["a"],
    );
    let mut pass = PlanPass::start(
        &spec,
        "test",
        plan_status(Pending, vec![ps("p", Pending, vec![ss("s", Pending)])]),
        now(),
    )
    .unwrap();
    let _ = pass.next_task().unwrap();
    let (st, sum) = pass.finish();
    assert_eq!(st.status, InProgress);
    assert_eq!(st.phases[0].steps[0].status, InProgress);
    assert_eq!(sum.tasks_run, 0);
}

#[test]
fn timestamp_moves_only_when_something_changed() {
    let spec = ov(
        "serial",
        vec![phase("p", "serial", vec![step("s", &["a"])])],
        &["a"],
    );
    let mut status = plan_status(InProgress, vec![ps("p", InProgress, vec![ss("s", InProgress)])]);
    status.last_updated_timestamp = Some("2024-01-01T11:00:00Z".into());
    let (st, sum, _) = run(&spec, status.clone(), |_| not_done());
    assert!(!sum.changed);
    assert_eq!(st.last_updated_timestamp.as_deref(), Some("2024-01-01T11:00:00Z"));
    let (st, sum, _) = run(&spec, status, |_| TaskOutcome::Done);
    assert!(sum.changed);
    assert_eq!(st.last_updated_timestamp.as_deref(), Some("2024-01-01T12:00:00Z"));
}

#[test]
fn plan_started_only_from_pending() {
    let spec = ov(
        "serial",
        vec![phase("p", "serial", vec![step("s", &["a"])])],
        &["a"],
    );
    let (_, sum, _) = run(
        &spec,
        plan_status(InProgress, vec![ps("p", InProgress, vec![ss("s", InProgress)])]),
        |_| not_done(),
    );
    assert!(sum.events.is_empty());
    let (_, sum, _) = run(
        &spec,
        plan_status(Pending, vec![ps("p", Pending, vec![ss("s", Pending)])]),
        |_| not_done(),
    );
    assert_eq!(sum.events.len(), 1);
    assert_eq!(sum.events[0].reason, "PlanStarted");
    assert_eq!(sum.events[0].type_, EventType::Normal);
    assert_eq!(sum.events[0].message, "Execution of plan test started");
}

// ------------------------------------------------------------------ retry (`plan retry`)

/// A FATAL_ERROR run of `test` whose 2nd phase failed at its 2nd step: reset for a retry, the
/// pass hands out only the failed step and what follows (the COMPLETE steps are not re-applied),
/// in serial and in parallel phases, and says where it resumed.
#[test]
fn a_retried_run_resumes_at_the_failed_step_and_reapplies_nothing_before_it() {
    for strategy in ["serial", "parallel"] {
        let spec = ov(
            "serial",
            vec![
                phase("one", strategy, vec![step("a", &["ta"]), step("b", &["tb"])]),
                phase(
                    "two",
                    strategy,
                    vec![step("c", &["tc"]), step("d", &["td1", "td2"]), step("e", &["te"])],
                ),
            ],
            &["ta", "tb", "tc", "td1", "td2", "te"],
        );
        let failed = plan_status(
            FatalError,
            vec![
                ps("one", Complete, vec![ss("a", Complete), ss("b", Complete)]),
                ps(
                    "two",
                    FatalError,
                    vec![ss("c", Complete), ssm("d", FatalError, "boom"), ss("e", Pending)],
                ),
            ],
        );
        assert!(retry::is_retry_of(Some("test/uid-1"), &failed));
        let mut status = failed.clone();
        retry::reset_for_retry(&mut status, "uid-2", now());
        let mut pass = PlanPass::start(&spec, "test", status, now())
            .unwrap()
            .with_retry_of("uid-1");
        let mut calls = Vec::new();
        while let Some(call) = pass.next_task() {
            calls.push(format!("{}.{}", call.step, call.task_name));
            assert_eq!(call.plan_uid, "uid-2");
            pass.report(TaskOutcome::Done);
        }
        let (st, sum) = pass.finish();
        assert_eq!(calls, ["d.td1", "d.td2", "e.te"], "{strategy}");
        assert_eq!(st.status, Complete, "{strategy}");
        assert!(
            st.phases
                .iter()
                .flat_map(|p| &p.steps)
                .all(|s| s.status == Complete)
        );
        let started: Vec<_> = sum.events.iter().filter(|e| e.reason == "PlanStarted").collect();
        assert_eq!(started.len(), 1, "{:?}", sum.events);
        assert_eq!(
            started[0].message,
            "Execution of plan test started (retry of run uid-1: resuming at phase two step d)"
        );
        assert_eq!(sum.timing.uid, "", "terminal: no timing kept");
    }
}

/// The retried run's clocks (plan and step timeouts) start at the retry, as for any new run.
#[test]
fn a_retried_run_measures_its_timeouts_from_the_retry() {
    let mut spec = ov(
        "serial",
        vec![phase("p", "serial", vec![step("a", &["ta"]), step("b", &["tb"])])],
        &["ta", "tb"],
    );
    spec.plans.get_mut("test").unwrap().phases[0].steps[1].timeout = Some("10s".into());
    let mut status = plan_status(
        FatalError,
        vec![ps(
            "p",
            FatalError,
            vec![ss("a", Complete), ssm("b", FatalError, "timed out")],
        )],
    );
    retry::reset_for_retry(&mut status, "uid-2", now());
    let old = Timing {
        uid: "uid-1".into(),
        plan_started: Some("2024-01-01T00:00:00Z".into()),
        ..Timing::default()
    };
    let (st, sum, calls) = run_with(&spec, status, old, now(), |_| not_done());
    assert_eq!(calls, ["test.p.b.tb"]);
    assert_eq!(st.status, InProgress);
    assert_eq!(sum.timing.uid, "uid-2");
    assert_eq!(sum.timing.plan_started.as_deref(), Some("2024-01-01T12:00:00Z"));
    assert_eq!(sum.next_deadline, Some(now().plus_seconds(10)));
}

// ------------------------------------------------------------------ cancel

#[test]
fn cancel_before_first_task_cancels_plan() {
    let spec = ov(
        "serial",
        vec![phase("p", "serial", vec![step("s1", &["a"]), step("s2", &["b"])])],
        &["a", "b"],
    );
    let status = plan_status(
        InProgress,
        vec![ps("p", InProgress, vec![ss("s1", Complete), ss("s2", Error)])],
    );
    let mut pass = PlanPass::start(&spec, "test", status, now()).unwrap();
    pass.request_cancel();
    assert!(pass.next_task().is_none());
    let (st, sum) = pass.finish();
    assert_eq!(st.status, Cancelled);
    assert_eq!(st.message, "Plan test was cancelled on request");
    assert_eq!(st.phases[0].status, Cancelled);
    assert_eq!(st.phases[0].steps[0].status, Complete);
    assert_eq!(st.phases[0].steps[1].status, Cancelled);
    let reasons: Vec<_> = sum.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["PlanCancelled", "PlanFinished"]);
    assert!(sum.timing.is_empty());
}

#[test]
fn cancel_mid_pass_stops_at_next_task_boundary() {
    let spec = ov(
        "parallel",
        vec![phase(
            "p",
            "parallel",
            vec![step("s1", &["a"]), step("s2", &["b"])],
        )],
        &["a", "b"],
    );
    let mut pass = PlanPass::start(
        &spec,
        "test",
        plan_status(
            Pending,
            vec![ps("p", Pending, vec![ss("s1", Pending), ss("s2", Pending)])],
        ),
        now(),
    )
    .unwrap();
    let call = pass.next_task().unwrap();
    assert_eq!(call.task_name, "a");
    pass.request_cancel();
    // the outstanding task is still handed back until reported
    assert_eq!(pass.next_task().unwrap().task_name, "a");
    pass.report(TaskOutcome::Done);
    assert!(pass.next_task().is_none());
    let (st, _) = pass.finish();
    assert_eq!(st.status, Cancelled);
    assert_eq!(st.phases[0].steps[0].status, Cancelled); // s1 was not completed: step ends at StepEnd
    assert_eq!(st.phases[0].steps[1].status, Cancelled);
}

#[test]
fn cancel_of_terminal_plan_changes_nothing() {
    let spec = ov(
        "serial",
        vec![phase("p", "serial", vec![step("s", &["a"])])],
        &["a"],
    );
    let status = plan_status(Complete, vec![ps("p", Complete, vec![ss("s", Complete)])]);
    let mut pass = PlanPass::start(&spec, "test", status.clone(), now()).unwrap();
    pass.request_cancel();
    assert!(pass.next_task().is_none());
    let (st, sum) = pass.finish();
    assert_eq!(st, status);
    assert!(sum.events.is_empty());
}

#[test]
fn cancel_after_pass_ended_still_cancels_unfinished_plan() {
    let spec = ov(
        "serial",
        vec![phase("p", "serial", vec![step("s", &["a"])])],
        &["a"],
    );
    let mut pass = PlanPass::start(
        &spec,
        "test",
        plan_status(Pending, vec![ps("p", Pending, vec![ss("s", Pending)])]),
        now(),
    )
    .unwrap();
    let _ = pass.next_task().unwrap();
    pass.report(not_done());
    assert!(pass.next_task().is_none());
    pass.request_cancel();
    let (st, _) = pass.finish();
    assert_eq!(st.status, Cancelled);
}

// ------------------------------------------------------------------ timeouts

fn timed_spec(step_timeout: Option<&str>, plan_timeout: Option<&str>) -> OperatorVersionSpec {
    let mut spec = ov(
        "serial",
        vec![phase("p", "serial", vec![step("s", &["a"])])],
        &["a"],
    );
    let plan = spec.plans.get_mut("test").unwrap();
    plan.timeout = plan_timeout.map(String::from);
    plan.phases[0].steps[0].timeout = step_timeout.map(String::from);
    spec
}

fn pending() -> PlanStatus {
    plan_status(Pending, vec![ps("p", Pending, vec![ss("s", Pending)])])
}

#[test]
fn step_timeout_records_start_and_fails_after_expiry() {
    let spec = timed_spec(Some("10m"), None);
    let (st, sum, _) = run(&spec, pending(), |_| not_done());
    assert_eq!(st.status, InProgress);
    assert_eq!(sum.timing.uid, "uid-1");
    assert_eq!(sum.timing.steps["p"]["s"], "2024-01-01T12:00:00Z");
    assert_eq!(sum.timing.plan_started.as_deref(), Some("2024-01-01T12:00:00Z"));
    assert_eq!(sum.next_deadline, Some(t("2024-01-01T12:10:00Z")));
    // round-trip through the annotation
    let ann = sum.timing.to_annotation().unwrap();
    let timing = Timing::from_annotation(Some(&ann));
    assert_eq!(timing, sum.timing);

    // 9 minutes later: still fine
    let (st, sum2, _) = run_with(&spec, st, timing.clone(), t("2024-01-01T12:09:00Z"), |_| {
        not_done()
    });
    assert_eq!(st.status, InProgress);
    assert!(sum2.fatal.is_none());
    // 10 minutes later: the step fails
    let (st, sum3, calls) = run_with(&spec, st, timing.clone(), t("2024-01-01T12:10:00Z"), |_| {
        not_done()
    });
    assert_eq!(
        calls.len(),
        1,
        "the step's tasks get a last chance before the timeout is judged"
    );
    assert_eq!(st.status, FatalError);
    assert_eq!(st.phases[0].status, FatalError);
    assert_eq!(st.phases[0].steps[0].status, FatalError);
    assert_eq!(
        st.phases[0].steps[0].message,
        "default/test-instance fatal error: step test.p.s did not complete within 10m (running since 2024-01-01T12:00:00Z)"
    );
    assert_eq!(sum3.fatal.unwrap().reason, "StepTimeout");
    assert!(sum3.timing.is_empty());
    assert!(sum3.next_deadline.is_none());
}

#[test]
fn step_completing_at_deadline_wins_over_timeout() {
    let spec = timed_spec(Some("1m"), None);
    let (st, sum, _) = run(&spec, pending(), |_| not_done());
    let (st, _, _) = run_with(&spec, st, sum.timing, t("2024-01-01T13:00:00Z"), |_| {
        TaskOutcome::Done
    });
    assert_eq!(st.status, Complete);
}

#[test]
fn timing_of_another_run_is_discarded() {
    let spec = timed_spec(Some("1m"), None);
    let old = Timing {
        uid: "old-run".into(),
        plan_started: Some("2020-01-01T00:00:00Z".into()),
        steps: [(
            "p".to_string(),
            [("s".to_string(), "2020-01-01T00:00:00Z".to_string())].into(),
        )]
        .into(),
    };
    let (st, sum, _) = run_with(&spec, pending(), old, now(), |_| not_done());
    assert_eq!(st.status, InProgress);
    assert_eq!(sum.timing.uid, "uid-1");
    assert_eq!(sum.timing.steps["p"]["s"], "2024-01-01T12:00:00Z");
}

#[test]
fn lost_timing_restarts_the_clock() {
    let spec = timed_spec(Some("1m"), None);
    let running = plan_status(InProgress, vec![ps("p", InProgress, vec![ss("s", InProgress)])]);
    let (st, sum, _) = run_with(
        &spec,
        running,
        Timing::from_annotation(Some("not json")),
        now(),
        |_| not_done(),
    );
    assert_eq!(st.status, InProgress);
    assert_eq!(sum.timing.steps["p"]["s"], "2024-01-01T12:00:00Z");
}

#[test]
fn plan_timeout_fails_running_phases_and_steps() {
    let spec = timed_spec(None, Some("1h"));
    let (st, sum, _) = run(&spec, pending(), |_| transient("api down"));
    assert_eq!(sum.next_deadline, Some(t("2024-01-01T13:00:00Z")));
    let (st, sum, _) = run_with(&spec, st, sum.timing, t("2024-01-01T13:00:01Z"), |_| {
        transient("api down")
    });
    let msg = "default/test-instance fatal error: plan test did not complete within 1h (running since 2024-01-01T12:00:00Z)";
    assert_eq!(st.status, FatalError);
    assert_eq!(st.message, msg);
    assert_eq!(st.phases[0].status, FatalError);
    assert_eq!(st.phases[0].steps[0].status, FatalError);
    assert_eq!(st.phases[0].steps[0].message, msg);
    assert_eq!(sum.fatal.unwrap().reason, "PlanTimeout");
}

#[test]
fn next_deadline_is_the_earliest() {
    let spec = timed_spec(Some("5m"), Some("1h"));
    let (_, sum, _) = run(&spec, pending(), |_| not_done());
    assert_eq!(sum.next_deadline, Some(t("2024-01-01T12:05:00Z")));
}

#[test]
fn invalid_timeouts_are_fatal() {
    let spec = timed_spec(Some("ten minutes"), None);
    let (st, sum, calls) = run(&spec, pending(), |_| TaskOutcome::Done);
    assert!(calls.is_empty());
    assert_eq!(st.phases[0].steps[0].status, FatalError);
    assert!(
        st.phases[0].steps[0]
            .message
            .contains("invalid timeout of step test.p.s"),
        "{}",
        st.phases[0].steps[0].message
    );
    assert_eq!(sum.fatal.unwrap().reason, "InvalidTimeout");

    let spec = timed_spec(None, Some("-1h"));
    let (st, sum, calls) = run(&spec, pending(), |_| TaskOutcome::Done);
    assert!(calls.is_empty());
    assert_eq!(st.status, FatalError);
    assert!(st.message.contains("invalid timeout of plan test"));
    assert_eq!(sum.fatal.unwrap().reason, "InvalidTimeout");
}

// ------------------------------------------------------------------ why a step waits

fn waiting(lines: &[&str]) -> TaskOutcome {
    TaskOutcome::InProgress(Some(lines.join("\n")))
}

/// The timing of a run whose step `phase.step` started `secs` seconds before [`now`].
fn step_started(phase: &str, step: &str, secs: i64) -> Timing {
    let started = (chrono::DateTime::parse_from_rfc3339("2024-01-01T12:00:00Z").unwrap()
        - chrono::Duration::seconds(secs))
    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    Timing {
        uid: "uid-1".into(),
        plan_started: Some(started.clone()),
        steps: [(phase.to_string(), [(step.to_string(), started)].into())].into(),
    }
}

/// One pass at [`now`] of a run whose step `phase.step` has waited a minute (past the grace).
fn run_waited(
    spec: &OperatorVersionSpec,
    status: PlanStatus,
    outcome: impl Fn(&str) -> TaskOutcome,
) -> (PlanStatus, PassSummary, Vec<String>) {
    run_with(spec, status, step_started("phase", "step", 60), now(), outcome)
}

#[test]
fn a_step_gets_its_waiting_lines_only_after_the_grace() {
    let (spec, status) = one_running_step(&["a"]);
    let line = || waiting(&["Deployment default/web: 0 of 2 updated replicas are available"]);
    let grace = i64::try_from(WAITING_GRACE_SECS).unwrap();
    // Within the grace: no lines, and the pass asks to look again when the grace ends.
    let (st, sum, _) = run_with(
        &spec,
        status.clone(),
        step_started("phase", "step", 2),
        now(),
        |_| line(),
    );
    assert!(st.phases[0].steps[0].waiting_for.is_empty(), "{st:?}");
    assert!(!sum.changed, "a young wait is no status write");
    assert_eq!(sum.next_deadline, Some(t("2024-01-01T12:00:03Z")));
    // A step that completes within the grace never wrote a line.
    let (done, _, _) = run_with(&spec, st.clone(), step_started("phase", "step", 4), now(), |_| {
        TaskOutcome::Done
    });
    assert_eq!(done.phases[0].steps[0].status, Complete);
    assert!(done.phases[0].steps[0].waiting_for.is_empty());
    // At the grace's end the lines are written; from then on they follow every change.
    let (st, sum, _) = run_with(&spec, st, step_started("phase", "step", grace), now(), |_| line());
    assert_eq!(
        st.phases[0].steps[0].waiting_for,
        ["Deployment default/web: 0 of 2 updated replicas are available"]
    );
    assert!(sum.changed);
    let (st, sum, _) = run_with(&spec, st, step_started("phase", "step", grace + 1), now(), |_| {
        waiting(&["Deployment default/web: 1 of 2 updated replicas are available"])
    });
    assert_eq!(
        st.phases[0].steps[0].waiting_for,
        ["Deployment default/web: 1 of 2 updated replicas are available"]
    );
    assert!(sum.changed);
}

#[test]
fn a_waiting_step_keeps_one_line_per_object_it_waits_for() {
    let (spec, status) = one_running_step(&["a", "b"]);
    let (st, sum, _) = run_waited(&spec, status, |task| match task {
        "a" => waiting(&[
            "StatefulSet default/db: Waiting for 2 pods to be ready...",
            "Service default/db: no endpoints",
        ]),
        _ => waiting(&["Job default/init: still running"]),
    });
    let step = &st.phases[0].steps[0];
    assert_eq!(
        step.waiting_for,
        [
            "StatefulSet default/db: Waiting for 2 pods to be ready...",
            "Service default/db: no endpoints",
            "Job default/init: still running"
        ]
    );
    assert_eq!(step.message, "", "KUDO's message stays empty while waiting");
    assert!(sum.changed, "a new reason to wait is a change");

    // Once healthy, the step completes and says nothing more.
    let (st, _, _) = run(&spec, st, |_| TaskOutcome::Done);
    assert_eq!(st.phases[0].steps[0].status, Complete);
    assert!(st.phases[0].steps[0].waiting_for.is_empty());
}

#[test]
fn the_same_wait_again_is_no_change() {
    let (spec, status) = one_running_step(&["a"]);
    let (st, _, _) = run_waited(&spec, status, |_| {
        waiting(&["Deployment default/web: 1 of 3 updated"])
    });
    let (again, sum, _) = run_waited(&spec, st.clone(), |_| {
        waiting(&["Deployment default/web: 1 of 3 updated"])
    });
    assert!(!sum.changed, "no new status write for the same wait");
    assert_eq!(strip_ts(again), strip_ts(st));
}

#[test]
fn waiting_lines_stay_within_ten_lines_and_one_kib() {
    let cases: Vec<(Vec<String>, usize, Option<&str>)> = vec![
        // (lines, expected count, expected last line)
        (
            (0..3).map(|i| format!("object {i}")).collect(),
            3,
            Some("object 2"),
        ),
        (
            (0..10).map(|i| format!("object {i}")).collect(),
            10,
            Some("object 9"),
        ),
        (
            (0..11).map(|i| format!("object {i}")).collect(),
            10,
            Some("… and 2 more"),
        ),
        (
            (0..40).map(|i| format!("object {i}")).collect(),
            10,
            Some("… and 31 more"),
        ),
        (vec!["x".repeat(5000)], 1, None),
        // 600-byte lines: one whole, one cut at a character boundary, the rest counted
        ((0..5).map(|_| "é".repeat(300)).collect(), 3, Some("… and 3 more")),
    ];
    for (lines, count, last) in cases {
        let kept = bounded_waiting(&lines);
        assert_eq!(kept.len(), count, "{kept:?}");
        let bytes: usize = kept.iter().map(String::len).sum();
        assert!(bytes <= StepStatus::MAX_WAITING_BYTES, "{bytes} bytes: {kept:?}");
        if let Some(last) = last {
            assert_eq!(kept.last().map(String::as_str), Some(last));
        }
    }
    let long = bounded_waiting(&["x".repeat(5000)]);
    assert!(long[0].ends_with('…') && long[0].len() <= StepStatus::MAX_WAITING_BYTES);
}
