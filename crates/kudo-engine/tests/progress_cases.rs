//! What a status says to kstatus, `kubectl wait` and Argo CD (`kudo_engine::progress::conclude`),
//! one case per branch, and the record of a run's end that a lost status write is restored from
//! (`ended_record`, `restore_ended`). No server, no clock.

use std::collections::BTreeMap;

use kudo_api::ExecutionStatus::{self, *};
use kudo_api::{Condition, Instance, InstanceStatus, PhaseStatus, PlanStatus, StepStatus};
use kudo_engine::Timestamp;
use kudo_engine::progress::{Activity, PLAN_CANCELLED, RECONCILING, STALLED, conclude};
use kudo_engine::readiness::{CHANGE_ACCEPTED, CHANGE_DENIED, PLAN_IN_FATAL_ERROR, READY};
use kudo_engine::reconcile::{ENDED_RUN_ANNOTATION, ended_record, restore_ended};

const T0: &str = "2026-01-02T03:00:00Z";
const T1: &str = "2026-01-02T04:00:00Z";

fn at(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

fn step(name: &str, status: ExecutionStatus, message: &str) -> StepStatus {
    StepStatus {
        name: name.into(),
        status,
        message: message.into(),
        ..StepStatus::default()
    }
}

/// Plan `plan`, run `uid`, one phase `main` with `steps`, updated at `updated`.
fn run(plan: &str, uid: &str, status: ExecutionStatus, steps: Vec<StepStatus>, updated: &str) -> PlanStatus {
    PlanStatus {
        name: plan.into(),
        uid: uid.into(),
        status,
        last_updated_timestamp: Some(updated.into()),
        phases: vec![PhaseStatus {
            name: "main".into(),
            status,
            steps,
            ..PhaseStatus::default()
        }],
        ..PlanStatus::default()
    }
}

fn status(plans: Vec<PlanStatus>) -> InstanceStatus {
    let mut s = InstanceStatus::default();
    for p in plans {
        s.plan_status.insert(p.name.clone(), p);
    }
    s
}

fn cond(type_: &str, status: &str, reason: &str, message: &str, generation: i64) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        observed_generation: Some(generation),
        last_transition_time: T0.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

/// `(status, reason, message, observedGeneration)` of `type_`, if present.
fn shown(s: &InstanceStatus, type_: &str) -> Option<(String, String, String, Option<i64>)> {
    s.conditions.iter().find(|c| c.type_ == type_).map(|c| {
        (
            c.status.clone(),
            c.reason.clone(),
            c.message.clone(),
            c.observed_generation,
        )
    })
}

fn truth(reason: &str, message: &str, generation: i64) -> Option<(String, String, String, Option<i64>)> {
    Some(("True".into(), reason.into(), message.into(), Some(generation)))
}

const DEPLOY: Activity<'static> = Activity::Run {
    plan: "deploy",
    uid: "r1",
};

#[test]
fn conclude_one_case_per_branch() {
    type Expect = Option<(String, String, String, Option<i64>)>;
    let denied = {
        let mut s = status(vec![run(
            "deploy",
            "r1",
            InProgress,
            vec![step("app", InProgress, "")],
            T0,
        )]);
        s.conditions.push(cond(
            CHANGE_ACCEPTED,
            "False",
            CHANGE_DENIED,
            "NODE_COUNT is immutable",
            7,
        ));
        s
    };
    let cases: Vec<(&str, InstanceStatus, Activity<'_>, Expect, Expect)> = vec![
        (
            "a running step: Reconciling names the plan and where it is",
            status(vec![run(
                "deploy",
                "r1",
                InProgress,
                vec![step("app", InProgress, "")],
                T0,
            )]),
            DEPLOY,
            truth("deploy", "plan deploy, phase main, step app", 7),
            None,
        ),
        (
            "a step in ERROR: its error is said",
            status(vec![run(
                "deploy",
                "r1",
                Error,
                vec![step("app", Error, "refused")],
                T0,
            )]),
            DEPLOY,
            truth("deploy", "plan deploy, phase main, step app: refused", 7),
            None,
        ),
        (
            "parallel steps: the first and how many more",
            status(vec![run(
                "deploy",
                "r1",
                InProgress,
                vec![step("a", InProgress, ""), step("b", InProgress, "")],
                T0,
            )]),
            DEPLOY,
            truth("deploy", "plan deploy, phase main, step a (and 1 more steps)", 7),
            None,
        ),
        (
            "only pending steps: the first one",
            status(vec![run(
                "deploy",
                "r1",
                Pending,
                vec![step("a", Pending, "")],
                T0,
            )]),
            DEPLOY,
            truth("deploy", "plan deploy, phase main, step a", 7),
            None,
        ),
        (
            "the run is not in the status yet",
            status(vec![run(
                "deploy",
                "r0",
                Complete,
                vec![step("a", Complete, "")],
                T0,
            )]),
            DEPLOY,
            truth("deploy", "plan deploy is starting", 7),
            None,
        ),
        (
            "a plan name that is no condition reason",
            status(vec![run(
                "node-update",
                "r1",
                InProgress,
                vec![step("a", InProgress, "")],
                T0,
            )]),
            Activity::Run {
                plan: "node-update",
                uid: "r1",
            },
            truth("node_update", "plan node-update, phase main, step a", 7),
            None,
        ),
        (
            "the run completed: neither condition",
            status(vec![run(
                "deploy",
                "r1",
                Complete,
                vec![step("app", Complete, "")],
                T0,
            )]),
            DEPLOY,
            None,
            None,
        ),
        (
            "the run failed on a step: Stalled names it and its error",
            status(vec![run(
                "deploy",
                "r1",
                FatalError,
                vec![step("app", FatalError, "boom")],
                T0,
            )]),
            DEPLOY,
            None,
            truth(PLAN_IN_FATAL_ERROR, "plan deploy, phase main, step app: boom", 7),
        ),
        (
            "the run failed before any step (the plan says why)",
            {
                let mut ps = run("deploy", "r1", FatalError, vec![step("app", Pending, "")], T0);
                ps.message = "ns/i: parameters are not valid".into();
                status(vec![ps])
            },
            DEPLOY,
            None,
            truth(
                PLAN_IN_FATAL_ERROR,
                "plan deploy: ns/i: parameters are not valid",
                7,
            ),
        ),
        (
            "a cancelled lifecycle run stalls",
            status(vec![run(
                "deploy",
                "r1",
                Cancelled,
                vec![step("app", Cancelled, "")],
                T0,
            )]),
            DEPLOY,
            None,
            truth(PLAN_CANCELLED, "plan deploy was cancelled", 7),
        ),
        (
            "a cancelled backup does not",
            status(vec![run(
                "backup",
                "r1",
                Cancelled,
                vec![step("app", Cancelled, "")],
                T0,
            )]),
            Activity::Run {
                plan: "backup",
                uid: "r1",
            },
            None,
            None,
        ),
        (
            "idle after a failed run: the latest run stalls",
            status(vec![
                run("deploy", "r0", Complete, vec![step("app", Complete, "")], T0),
                run(
                    "backup",
                    "r1",
                    FatalError,
                    vec![step("dump", FatalError, "disk full")],
                    T1,
                ),
            ]),
            Activity::Idle,
            None,
            truth(
                PLAN_IN_FATAL_ERROR,
                "plan backup, phase main, step dump: disk full",
                7,
            ),
        ),
        (
            "idle after a failed deploy and a later backup: the deploy's failure stands",
            status(vec![
                run(
                    "deploy",
                    "r0",
                    FatalError,
                    vec![step("app", FatalError, "boom")],
                    T0,
                ),
                run("backup", "r1", Complete, vec![step("dump", Complete, "")], T1),
            ]),
            Activity::Idle,
            None,
            truth(PLAN_IN_FATAL_ERROR, "plan deploy, phase main, step app: boom", 7),
        ),
        (
            "idle after a failure that a later run repaired",
            status(vec![
                run(
                    "deploy",
                    "r0",
                    FatalError,
                    vec![step("app", FatalError, "boom")],
                    T0,
                ),
                run("update", "r1", Complete, vec![step("app", Complete, "")], T1),
            ]),
            Activity::Idle,
            None,
            None,
        ),
        (
            "a refused change stalls, also while a run goes on",
            denied.clone(),
            DEPLOY,
            truth("deploy", "plan deploy, phase main, step app", 7),
            truth(CHANGE_DENIED, "NODE_COUNT is immutable", 7),
        ),
        (
            "an OperatorVersion that may still come: Reconciling",
            InstanceStatus::default(),
            Activity::Blocked {
                reason: "OperatorVersionNotFound",
                message: "OperatorVersion ns/op-1 of instance ns/i does not exist",
                stalled: false,
            },
            truth(
                "OperatorVersionNotFound",
                "OperatorVersion ns/op-1 of instance ns/i does not exist",
                7,
            ),
            None,
        ),
        (
            "an Instance that does not decode: Stalled",
            InstanceStatus::default(),
            Activity::Blocked {
                reason: "InvalidInstance",
                message: "instance ns/i cannot be read",
                stalled: true,
            },
            None,
            truth("InvalidInstance", "instance ns/i cannot be read", 7),
        ),
    ];
    for (name, mut new, activity, reconciling, stalled) in cases {
        let old = new.clone();
        conclude(&old, &mut new, &activity, Some(7), at(T1));
        assert_eq!(new.observed_generation, Some(7), "{name}");
        assert_eq!(shown(&new, RECONCILING), reconciling, "{name}: Reconciling");
        assert_eq!(shown(&new, STALLED), stalled, "{name}: Stalled");
    }
}

#[test]
fn a_refused_change_leaves_ready_on_the_generation_it_judged() {
    let mut old = status(vec![run(
        "deploy",
        "r0",
        Complete,
        vec![step("app", Complete, "")],
        T0,
    )]);
    old.conditions.push(cond(READY, "True", "ResourcesReady", "", 3));
    let mut new = old.clone();
    // The idle step judged the objects at generation 4, whose change admission refused.
    new.conditions[0].observed_generation = Some(4);
    new.conditions.push(cond(
        CHANGE_ACCEPTED,
        "False",
        CHANGE_DENIED,
        "NODE_COUNT is immutable",
        4,
    ));
    conclude(&old, &mut new, &Activity::Idle, Some(4), at(T1));
    assert_eq!(shown(&new, READY).unwrap().3, Some(3));
    // Admitted: Ready speaks of the generation it judged.
    let mut admitted = old.clone();
    admitted.conditions[0].observed_generation = Some(4);
    conclude(&old, &mut admitted, &Activity::Idle, Some(4), at(T1));
    assert_eq!(shown(&admitted, READY).unwrap().3, Some(4));
}

#[test]
fn a_condition_that_stays_true_keeps_its_transition_time_and_goes_when_resolved() {
    let mut s = status(vec![run(
        "deploy",
        "r1",
        InProgress,
        vec![step("a", InProgress, "")],
        T0,
    )]);
    let old = s.clone();
    conclude(&old, &mut s, &DEPLOY, Some(2), at(T0));
    let mut later = s.clone();
    later.plan_status.get_mut("deploy").unwrap().phases[0].steps[0].name = "b".into();
    conclude(&s, &mut later, &DEPLOY, Some(2), at(T1));
    let c = later.conditions.iter().find(|c| c.type_ == RECONCILING).unwrap();
    assert_eq!(
        (c.message.as_str(), c.last_transition_time.as_str()),
        ("plan deploy, phase main, step b", T0)
    );
    let mut done = later.clone();
    done.plan_status.get_mut("deploy").unwrap().status = Complete;
    conclude(&later, &mut done, &DEPLOY, Some(3), at(T1));
    assert!(done.conditions.is_empty(), "{:?}", done.conditions);
}

fn scheduled(plan: &str, uid: &str, annotations: &[(&str, String)]) -> Instance {
    let mut inst: Instance = serde_json::from_value(serde_json::json!({
        "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
        "metadata": {"name": "i", "namespace": "ns"},
        "spec": {"operatorVersion": {"name": "op-0.1.0"}, "planExecution": {"planName": plan, "uid": uid}},
    }))
    .unwrap();
    for (k, v) in annotations {
        inst.metadata.annotations.insert(k.to_string(), v.clone());
    }
    inst
}

#[test]
fn the_unscheduling_write_records_the_run_that_ended() {
    let complete = run("deploy", "r1", Complete, vec![step("app", Complete, "")], T1);
    let record = serde_json::to_string(&complete).unwrap();
    let cases: Vec<(&str, Instance, InstanceStatus, Option<String>)> = vec![
        (
            "the scheduled run ended",
            scheduled("deploy", "r1", &[]),
            status(vec![complete.clone()]),
            Some(record.clone()),
        ),
        (
            "it runs on",
            scheduled("deploy", "r1", &[]),
            status(vec![run("deploy", "r1", InProgress, vec![], T1)]),
            None,
        ),
        (
            "recorded already",
            scheduled("deploy", "r1", &[(ENDED_RUN_ANNOTATION, record.clone())]),
            status(vec![complete.clone()]),
            None,
        ),
        (
            "the status is of another run",
            scheduled("deploy", "r2", &[]),
            status(vec![complete.clone()]),
            None,
        ),
        (
            "nothing is scheduled",
            scheduled("", "", &[]),
            status(vec![complete.clone()]),
            None,
        ),
    ];
    for (name, inst, st, want) in cases {
        assert_eq!(ended_record(&inst, &st), want, "{name}");
    }
}

#[test]
fn a_lost_status_write_is_restored_from_the_record() {
    let complete = run("deploy", "r1", Complete, vec![step("app", Complete, "")], T1);
    let annotations = BTreeMap::from([(
        ENDED_RUN_ANNOTATION.to_string(),
        serde_json::to_string(&complete).unwrap(),
    )]);
    let running = run("deploy", "r1", InProgress, vec![step("app", InProgress, "")], T0);
    let older = run("deploy", "r0", Complete, vec![step("app", Complete, "")], T0);
    let newer = run(
        "deploy",
        "r2",
        Complete,
        vec![step("app", Complete, "")],
        "2026-01-02T05:00:00Z",
    );
    type Annotations = BTreeMap<String, String>;
    let cases: Vec<(&str, InstanceStatus, &str, Annotations, bool)> = vec![
        (
            "the run shows unfinished",
            status(vec![running]),
            "",
            annotations.clone(),
            true,
        ),
        (
            "the plan is not shown",
            status(vec![]),
            "",
            annotations.clone(),
            true,
        ),
        (
            "an older run is shown",
            status(vec![older.clone()]),
            "",
            annotations.clone(),
            true,
        ),
        (
            "shown as recorded",
            status(vec![complete.clone()]),
            "",
            annotations.clone(),
            false,
        ),
        (
            "shown ended otherwise (a later retry mark)",
            status(vec![run("deploy", "r1", FatalError, vec![], T1)]),
            "",
            annotations.clone(),
            false,
        ),
        (
            "a newer run is scheduled",
            status(vec![older]),
            "r0",
            annotations.clone(),
            false,
        ),
        (
            "a newer run is shown",
            status(vec![newer]),
            "",
            annotations.clone(),
            false,
        ),
        (
            "no record",
            status(vec![run("deploy", "r1", InProgress, vec![], T0)]),
            "",
            BTreeMap::new(),
            false,
        ),
        (
            "a record that does not decode",
            status(vec![]),
            "",
            BTreeMap::from([(ENDED_RUN_ANNOTATION.to_string(), "{".to_string())]),
            false,
        ),
    ];
    for (name, mut st, uid, ann, want) in cases {
        let before = st.clone();
        assert_eq!(restore_ended(&mut st, &ann, uid), want, "{name}");
        if want {
            assert_eq!(st.plan_status["deploy"], complete, "{name}");
        } else {
            assert_eq!(st, before, "{name}");
        }
    }
}
