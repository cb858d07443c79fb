//! `kubectl kudo plan retry`: re-running a FATAL_ERROR plan from its first
//! failed step, keeping the steps that already completed (KUDO could only restart a plan from the
//! top, kudobuilder/kudo#1752).
//!
//! The request is an ordinary direct trigger of the plan (admitted by [`crate::triggers::decide`],
//! which gives the run a fresh uid) written together with the Instance annotation
//! `kudo-rs.dev/retry = "<plan>/<uid of the failed run>"` ([`annotation_value`]). When the new run's
//! status is initialised, the controller asks [`is_retry_of`]: only if the run being replaced is
//! exactly the failed run the user named does it call [`reset_for_retry`] instead of
//! [`crate::reset_for_run`]. Everything comes from the Instance, so a restarted manager decides the
//! same, and an annotation naming an older run does nothing ([`is_spent`] says when to drop it).

use kudo_api::{ExecutionStatus, InstanceSpec, InstanceStatus, PlanStatus};

use crate::time::Timestamp;
use crate::triggers::ScheduleReason;

/// The annotation value naming the failed run `uid` of `plan`: `"<plan>/<uid>"`.
pub fn annotation_value(plan: &str, uid: &str) -> String {
    format!("{plan}/{uid}")
}

/// True when `annotation` (the Instance's `kudo-rs.dev/retry`) asks to retry exactly the run this
/// status records, and that run ended in FATAL_ERROR. Checked before the status is reset for a new
/// run: any other status (a COMPLETE or CANCELLED run, a run that was already replaced) makes the
/// new run an ordinary one that starts from the top.
pub fn is_retry_of(annotation: Option<&str>, plan_status: &PlanStatus) -> bool {
    plan_status.status == ExecutionStatus::FatalError
        && !plan_status.uid.is_empty()
        && annotation == Some(annotation_value(&plan_status.name, &plan_status.uid).as_str())
}

/// True when the run `annotation` names has been replaced by another run of its plan (or the
/// annotation names no plan of `status`): it can never match again and may be removed. While the
/// named run is still the plan's latest, the annotation is kept (the retry is not started yet).
pub fn is_spent(annotation: &str, status: &InstanceStatus) -> bool {
    let Some((plan, uid)) = annotation.split_once('/') else {
        return true;
    };
    status.plan_status.get(plan).is_none_or(|ps| ps.uid != uid)
}

/// Whether a pending retry annotation survives an admission that schedules a run for `reason`:
/// only a direct trigger (what `plan retry` writes) may be the retry. An install, upgrade or
/// parameter change runs changed templates, so it must start from the top; the manager drops the
/// annotation with that admission, so a retry the manager never started (a race with such a
/// change) cannot turn a later run into a resume.
pub fn kept_through(reason: &ScheduleReason) -> bool {
    matches!(reason, ScheduleReason::DirectTrigger)
}

/// Starts the retry run `uid` of a failed plan: like [`crate::reset_for_run`], except that every
/// COMPLETE step keeps its status, and so does a COMPLETE phase whose steps are all COMPLETE (a
/// COMPLETE phase with a step that is not, e.g. one added by an upgrade, is entered again). The
/// rest becomes PENDING with messages and `waitingFor` cleared, so the pass (which skips finished
/// phases and steps) resumes at the first step that did not complete. A plan that failed before
/// any step completed (e.g. invalid parameters at render time) is reset entirely, as a trigger
/// would.
pub fn reset_for_retry(plan_status: &mut PlanStatus, uid: &str, now: Timestamp) {
    plan_status.uid = uid.to_string();
    plan_status.status = ExecutionStatus::Pending;
    plan_status.message.clear();
    plan_status.last_updated_timestamp = Some(now.to_string());
    for phase in &mut plan_status.phases {
        let done = phase.status.is_finished() && phase.steps.iter().all(|s| s.status.is_finished());
        if done {
            continue;
        }
        phase.status = ExecutionStatus::Pending;
        phase.message.clear();
        for step in phase.steps.iter_mut().filter(|s| !s.status.is_finished()) {
            step.status = ExecutionStatus::Pending;
            step.message.clear();
            step.waiting_for.clear();
        }
    }
}

/// Where a run starts: the first phase that is not COMPLETE and its first step that is not
/// COMPLETE (the step is `None` for a phase without an unfinished step). `None` when every phase
/// is COMPLETE.
pub fn resume_point(plan_status: &PlanStatus) -> Option<(&str, Option<&str>)> {
    let phase = plan_status
        .phases
        .iter()
        .find(|p| !p.status.is_finished() || p.steps.iter().any(|s| !s.status.is_finished()))?;
    let step = phase.steps.iter().find(|s| !s.status.is_finished());
    Some((phase.name.as_str(), step.map(|s| s.name.as_str())))
}

/// The `PlanStarted` message of a retry run replacing the failed run `failed_uid`, given the reset
/// status ([`reset_for_retry`]): says where it resumes, so the Event tells a retry from a restart,
/// and names the objects deleted to be created again ([`recreate_reason`]).
pub fn started_message(
    plan: &str,
    failed_uid: &str,
    plan_status: &PlanStatus,
    recreated: &[String],
) -> String {
    let at = match resume_point(plan_status) {
        Some((phase, Some(step))) => format!("resuming at phase {phase} step {step}"),
        Some((phase, None)) => format!("resuming at phase {phase}"),
        None => "nothing left to run".to_string(),
    };
    let again = if recreated.is_empty() {
        String::new()
    } else {
        format!("; recreating {}, which had failed", recreated.join(", "))
    };
    format!("Execution of plan {plan} started (retry of run {failed_uid}: {at}{again})")
}

/// Whether the retry whose status [`reset_for_retry`] reset runs step `step` of phase `phase`
/// again: every step that did not complete does.
pub fn reruns(plan_status: &PlanStatus, phase: &str, step: &str) -> bool {
    plan_status
        .phases
        .iter()
        .filter(|p| p.name == phase)
        .flat_map(|p| &p.steps)
        .any(|s| s.name == step && !s.status.is_finished())
}

/// Why the live object `live`, which the retry run `run_uid` is about to apply again, must first be
/// deleted so that the apply creates it anew; `None` when applying it again is enough.
///
/// Applying an object whose failure is terminal changes nothing: a Job with a `Failed` condition
/// never runs again (its pod template cannot even be changed), and neither does a Pod in phase
/// `Failed` (a Pod with `restartPolicy: Never` whose container failed, or an evicted one). The
/// retry would report the same failure at once. Only an object the failed run (or an earlier
/// one) applied is recreated: it carries another run's `kudo.dev/last-plan-execution-uid`. An
/// object without the annotation is not KUDO's, and one stamped with `run_uid` was already
/// created by this run.
pub fn recreate_reason(live: &serde_json::Value, run_uid: &str) -> Option<String> {
    let stamped = live["metadata"]["annotations"][kudo_api::labels::PLAN_UID].as_str()?;
    if stamped == run_uid {
        return None;
    }
    let group = live["apiVersion"]
        .as_str()
        .unwrap_or("")
        .rsplit_once('/')
        .map_or("", |(g, _)| g);
    let failed_condition = || {
        live["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Failed" && c["status"] == "True")
    };
    match (group, live["kind"].as_str().unwrap_or("")) {
        ("batch", "Job") if failed_condition() => Some("the Job failed".to_string()),
        ("", "Pod") if live["status"]["phase"] == "Failed" => Some("the Pod failed".to_string()),
        _ => None,
    }
}

/// The failed run `plan retry` re-runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryTarget {
    /// The plan whose failed run is retried.
    pub plan: String,
    /// `status.planStatus[plan].uid`: the run the annotation names.
    pub failed_uid: String,
}

/// Why `plan retry` writes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryRefusal {
    #[error(
        "plan {plan} is scheduled on instance {instance} (status {status}): wait for it to finish or cancel it first"
    )]
    /// A plan is scheduled or running on the Instance; a retry replaces no running plan.
    PlanScheduled {
        /// The Instance's name.
        instance: String,
        /// The scheduled plan.
        plan: String,
        /// Its `spec.planExecution.status`, or `scheduled` when it has none.
        status: String,
    },
    /// The plan named with `--plan` has no status on the Instance (`status.planStatus`).
    #[error("plan {plan} does not exist on instance {instance} (plans: {known})")]
    UnknownPlan {
        /// The Instance's name.
        instance: String,
        /// The plan asked for.
        plan: String,
        /// The plans the Instance has a status for, comma-separated.
        known: String,
    },
    #[error(
        "plan {plan} of instance {instance} is {status}, not FATAL_ERROR: only a failed plan can be retried (plan trigger runs it again from the start)"
    )]
    /// The plan named with `--plan` is not FATAL_ERROR (or its status records no run uid).
    NotFailed {
        /// The Instance's name.
        instance: String,
        /// The plan asked for.
        plan: String,
        /// Its status.
        status: ExecutionStatus,
    },
    /// No `--plan` was given and no plan of the Instance is FATAL_ERROR.
    #[error("no plan of instance {instance} is FATAL_ERROR: nothing to retry")]
    NothingFailed {
        /// The Instance's name.
        instance: String,
    },
}

/// Which failed run `plan retry --instance <instance> [--plan <plan>]` re-runs, or why it refuses:
/// nothing may be scheduled (a retry replaces no running plan), and the plan (by default the
/// FATAL_ERROR plan updated last) must have ended in FATAL_ERROR with a recorded run uid.
pub fn target(
    instance: &str,
    spec: &InstanceSpec,
    status: &InstanceStatus,
    plan: Option<&str>,
) -> Result<RetryTarget, RetryRefusal> {
    let pe = &spec.plan_execution;
    if !pe.plan_name.is_empty() {
        return Err(RetryRefusal::PlanScheduled {
            instance: instance.to_string(),
            plan: pe.plan_name.clone(),
            status: pe.status.map_or("scheduled".into(), |s| s.to_string()),
        });
    }
    let (name, ps) = match plan {
        Some(p) => status
            .plan_status
            .get_key_value(p)
            .ok_or_else(|| RetryRefusal::UnknownPlan {
                instance: instance.to_string(),
                plan: p.to_string(),
                known: status.plan_status.keys().cloned().collect::<Vec<_>>().join(", "),
            })?,
        None => status
            .plan_status
            .iter()
            .filter(|(_, ps)| ps.status == ExecutionStatus::FatalError)
            .max_by_key(|(_, ps)| last_updated(ps))
            .ok_or_else(|| RetryRefusal::NothingFailed {
                instance: instance.to_string(),
            })?,
    };
    if ps.status != ExecutionStatus::FatalError || ps.uid.is_empty() {
        return Err(RetryRefusal::NotFailed {
            instance: instance.to_string(),
            plan: name.clone(),
            status: ps.status,
        });
    }
    Ok(RetryTarget {
        plan: name.clone(),
        failed_uid: ps.uid.clone(),
    })
}

/// A plan status's `lastUpdatedTimestamp` as an order key (unreadable or missing sorts first).
fn last_updated(ps: &PlanStatus) -> Option<Timestamp> {
    ps.last_updated_timestamp
        .as_deref()
        .and_then(|t| Timestamp::parse(t).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudo_api::ExecutionStatus::{
        Complete as C, FatalError as F, InProgress as I, NeverRun as N, Pending as P,
    };
    use kudo_api::{PhaseStatus, PlanExecution, StepStatus};

    fn now() -> Timestamp {
        Timestamp::parse("2024-01-01T00:00:00Z").unwrap()
    }

    /// A plan status tree written out: `[(phase, phase status, [(step, step status)])]`.
    type Tree<'a> = &'a [(&'a str, ExecutionStatus, &'a [(&'a str, ExecutionStatus)])];
    /// The same tree with owned names, as [`tree`] reads it back.
    type OwnedTree = Vec<(String, ExecutionStatus, Vec<(String, ExecutionStatus)>)>;
    /// Where a run resumes ([`resume_point`]).
    type Resume<'a> = Option<(&'a str, Option<&'a str>)>;

    /// A plan status from `(phase, phase status, [(step, step status)])`; every non-COMPLETE
    /// entry carries a message and a waiting line, so the tests see them cleared.
    fn status(plan: ExecutionStatus, phases: Tree<'_>) -> PlanStatus {
        PlanStatus {
            name: "deploy".into(),
            uid: "u1".into(),
            status: plan,
            message: "plan message".into(),
            last_updated_timestamp: Some("2023-12-31T00:00:00Z".into()),
            phases: phases
                .iter()
                .map(|(name, st, steps)| PhaseStatus {
                    name: name.to_string(),
                    status: *st,
                    message: if *st == C {
                        String::new()
                    } else {
                        "phase msg".into()
                    },
                    steps: steps
                        .iter()
                        .map(|(n, s)| StepStatus {
                            name: n.to_string(),
                            status: *s,
                            message: if *s == C { String::new() } else { "step msg".into() },
                            waiting_for: if *s == C {
                                vec![]
                            } else {
                                vec!["Pod x: waiting".into()]
                            },
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// `(phase, status, [(step, status)])` of a status, messages dropped, for comparisons.
    fn tree(ps: &PlanStatus) -> OwnedTree {
        ps.phases
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    p.status,
                    p.steps.iter().map(|s| (s.name.clone(), s.status)).collect(),
                )
            })
            .collect()
    }

    fn t(phases: Tree<'_>) -> OwnedTree {
        phases
            .iter()
            .map(|(n, s, steps)| {
                (
                    n.to_string(),
                    *s,
                    steps.iter().map(|(a, b)| (a.to_string(), *b)).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn retry_keeps_complete_steps_and_phases_and_resets_the_rest() {
        // (name, before, after, where it resumes)
        let cases: &[(&str, Tree, Tree, Resume)] = &[
            (
                "serial phases, the 2nd step of the 2nd phase failed",
                &[
                    ("one", C, &[("a", C), ("b", C)]),
                    ("two", F, &[("c", C), ("d", F), ("e", N)]),
                ],
                &[
                    ("one", C, &[("a", C), ("b", C)]),
                    ("two", P, &[("c", C), ("d", P), ("e", P)]),
                ],
                Some(("two", Some("d"))),
            ),
            (
                "parallel phase: one step failed while another was still running",
                &[
                    ("one", C, &[("a", C)]),
                    ("par", F, &[("x", C), ("y", F), ("z", I)]),
                ],
                &[
                    ("one", C, &[("a", C)]),
                    ("par", P, &[("x", C), ("y", P), ("z", P)]),
                ],
                Some(("par", Some("y"))),
            ),
            (
                "parallel phases: the failed one and the unfinished one are entered again",
                &[
                    ("p1", F, &[("a", F)]),
                    ("p2", C, &[("b", C)]),
                    ("p3", I, &[("c", I)]),
                ],
                &[
                    ("p1", P, &[("a", P)]),
                    ("p2", C, &[("b", C)]),
                    ("p3", P, &[("c", P)]),
                ],
                Some(("p1", Some("a"))),
            ),
            (
                "the first step failed: a full reset",
                &[("one", F, &[("a", F), ("b", N)]), ("two", N, &[("c", N)])],
                &[("one", P, &[("a", P), ("b", P)]), ("two", P, &[("c", P)])],
                Some(("one", Some("a"))),
            ),
            (
                "a COMPLETE phase with a step an upgrade added is entered again",
                &[("one", C, &[("a", C), ("new", N)]), ("two", F, &[("c", F)])],
                &[("one", P, &[("a", C), ("new", P)]), ("two", P, &[("c", P)])],
                Some(("one", Some("new"))),
            ),
        ];
        for (name, before, after, resume) in cases {
            let mut ps = status(F, before);
            reset_for_retry(&mut ps, "u2", now());
            assert_eq!(tree(&ps), t(after), "{name}");
            assert_eq!(ps.uid, "u2", "{name}");
            assert_eq!(ps.status, P, "{name}");
            assert_eq!(ps.message, "", "{name}");
            assert_eq!(ps.last_updated_timestamp.as_deref(), Some("2024-01-01T00:00:00Z"));
            for p in &ps.phases {
                assert!(p.status == C || p.message.is_empty(), "{name}: {p:?}");
                for s in &p.steps {
                    assert!(s.message.is_empty() && s.waiting_for.is_empty(), "{name}: {s:?}");
                }
            }
            assert_eq!(resume_point(&ps), *resume, "{name}");
        }
    }

    #[test]
    fn a_plan_level_fatal_before_any_step_ran_resets_everything() {
        // e.g. invalid parameters at render time: the plan is FATAL, no step failed or completed.
        let mut ps = status(F, &[("one", P, &[("a", P)]), ("two", P, &[("b", P)])]);
        ps.message = "instance default/x: invalid parameters".into();
        let mut full = ps.clone();
        reset_for_retry(&mut ps, "u2", now());
        crate::reset_for_run(&mut full, "u2", now());
        assert_eq!(ps, full);
    }

    #[test]
    fn retry_of_matches_only_the_named_failed_run() {
        let failed = status(F, &[("one", F, &[("a", F)])]);
        let v = annotation_value("deploy", "u1");
        assert_eq!(v, "deploy/u1");
        assert!(is_retry_of(Some(&v), &failed));
        assert!(!is_retry_of(None, &failed));
        assert!(!is_retry_of(Some("deploy/u0"), &failed), "an older run");
        assert!(!is_retry_of(Some("backup/u1"), &failed), "another plan");
        for st in [C, ExecutionStatus::Cancelled, I, P, N] {
            let mut other = failed.clone();
            other.status = st;
            assert!(!is_retry_of(Some(&v), &other), "{st}");
        }
        let mut no_uid = failed.clone();
        no_uid.uid.clear();
        assert!(!is_retry_of(Some("deploy/"), &no_uid));
    }

    #[test]
    fn the_annotation_is_spent_once_its_run_was_replaced() {
        let mut st = InstanceStatus::default();
        st.plan_status
            .insert("deploy".into(), status(F, &[("one", F, &[("a", F)])]));
        assert!(!is_spent("deploy/u1", &st), "the retry has not started yet");
        assert!(is_spent("deploy/u0", &st));
        assert!(is_spent("backup/u1", &st));
        assert!(is_spent("garbage", &st));
        st.plan_status.get_mut("deploy").unwrap().uid = "u2".into();
        assert!(is_spent("deploy/u1", &st), "the retry (or another run) started");
    }

    #[test]
    fn only_a_direct_trigger_keeps_a_pending_retry() {
        assert!(kept_through(&ScheduleReason::DirectTrigger));
        for r in [
            ScheduleReason::Install,
            ScheduleReason::Upgrade,
            ScheduleReason::ParameterUpdate(vec!["X".into()]),
            ScheduleReason::Retrigger,
        ] {
            assert!(!kept_through(&r), "{r:?}");
        }
    }

    #[test]
    fn the_started_message_says_where_the_retry_resumes() {
        let mut ps = status(F, &[("one", C, &[("a", C)]), ("two", F, &[("b", C), ("c", F)])]);
        reset_for_retry(&mut ps, "u2", now());
        assert_eq!(
            started_message("deploy", "u1", &ps, &[]),
            "Execution of plan deploy started (retry of run u1: resuming at phase two step c)"
        );
        assert_eq!(
            started_message("deploy", "u1", &ps, &["Job ns/x".into(), "Pod ns/y".into()]),
            "Execution of plan deploy started (retry of run u1: resuming at phase two step c; recreating Job ns/x, Pod ns/y, which had failed)"
        );
        let done = status(C, &[("one", C, &[("a", C)])]);
        assert!(started_message("deploy", "u1", &done, &[]).ends_with("nothing left to run)"));
    }

    #[test]
    fn a_retry_reruns_only_the_steps_that_did_not_complete() {
        let mut ps = status(F, &[("one", C, &[("a", C)]), ("two", F, &[("b", C), ("c", F)])]);
        reset_for_retry(&mut ps, "u2", now());
        assert!(!reruns(&ps, "one", "a"));
        assert!(!reruns(&ps, "two", "b"));
        assert!(reruns(&ps, "two", "c"));
        assert!(!reruns(&ps, "two", "nope"));
        assert!(!reruns(&ps, "nope", "c"));
    }

    #[test]
    fn only_terminally_failed_jobs_and_pods_of_an_earlier_run_are_recreated() {
        let obj = |api: &str, kind: &str, uid: Option<&str>, status: serde_json::Value| {
            let mut o = serde_json::json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x"}, "status": status});
            if let Some(u) = uid {
                o["metadata"]["annotations"] = serde_json::json!({"kudo.dev/last-plan-execution-uid": u});
            }
            o
        };
        let failed_job = serde_json::json!({"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]});
        let running_job = serde_json::json!({"active": 1});
        let complete_job = serde_json::json!({"conditions": [{"type": "Complete", "status": "True"}]});
        let not_failed = serde_json::json!({"conditions": [{"type": "Failed", "status": "False"}]});
        let failed_pod = serde_json::json!({"phase": "Failed"});
        let running_pod = serde_json::json!({"phase": "Running"});
        // (case, object, recreated)
        let cases = [
            (
                "a failed Job of the failed run",
                obj("batch/v1", "Job", Some("u1"), failed_job.clone()),
                true,
            ),
            (
                "a failed Job of an older version of batch",
                obj("batch/v1beta1", "Job", Some("u0"), failed_job.clone()),
                true,
            ),
            (
                "a failed Job this run created",
                obj("batch/v1", "Job", Some("u2"), failed_job.clone()),
                false,
            ),
            (
                "a failed Job KUDO never stamped",
                obj("batch/v1", "Job", None, failed_job.clone()),
                false,
            ),
            (
                "a running Job",
                obj("batch/v1", "Job", Some("u1"), running_job),
                false,
            ),
            (
                "a complete Job",
                obj("batch/v1", "Job", Some("u1"), complete_job),
                false,
            ),
            (
                "a Failed condition that is False",
                obj("batch/v1", "Job", Some("u1"), not_failed),
                false,
            ),
            (
                "a failed Pod",
                obj("v1", "Pod", Some("u1"), failed_pod.clone()),
                true,
            ),
            ("a running Pod", obj("v1", "Pod", Some("u1"), running_pod), false),
            (
                "a Job of another group",
                obj("example.com/v1", "Job", Some("u1"), failed_job),
                false,
            ),
            (
                "a failed pod-like custom object",
                obj("example.com/v1", "Pod", Some("u1"), failed_pod),
                false,
            ),
        ];
        for (case, o, want) in cases {
            assert_eq!(recreate_reason(&o, "u2").is_some(), want, "{case}");
        }
        let job = obj(
            "batch/v1",
            "Job",
            Some("u1"),
            serde_json::json!({"conditions": [{"type": "Failed", "status": "True"}]}),
        );
        assert_eq!(recreate_reason(&job, "u2").as_deref(), Some("the Job failed"));
    }

    #[test]
    fn target_picks_the_failed_plan_and_refuses_everything_else() {
        let mut st = InstanceStatus::default();
        let mut deploy = status(F, &[("one", F, &[("a", F)])]);
        deploy.last_updated_timestamp = Some("2024-01-01T10:00:00Z".into());
        let mut backup = status(F, &[("one", F, &[("a", F)])]);
        backup.name = "backup".into();
        backup.uid = "b1".into();
        backup.last_updated_timestamp = Some("2024-01-01T11:00:00Z".into());
        let mut update = status(C, &[("one", C, &[("a", C)])]);
        update.name = "update".into();
        for ps in [deploy, backup, update] {
            st.plan_status.insert(ps.name.clone(), ps);
        }
        let idle = InstanceSpec::default();
        let pick = |plan: Option<&str>, spec: &InstanceSpec, st: &InstanceStatus| target("x", spec, st, plan);
        let want = |plan: &str, uid: &str| -> Result<RetryTarget, RetryRefusal> {
            Ok(RetryTarget {
                plan: plan.into(),
                failed_uid: uid.into(),
            })
        };
        assert_eq!(
            pick(None, &idle, &st),
            want("backup", "b1"),
            "the failed plan updated last"
        );
        assert_eq!(pick(Some("deploy"), &idle, &st), want("deploy", "u1"));
        assert!(matches!(
            pick(Some("update"), &idle, &st),
            Err(RetryRefusal::NotFailed { status: C, .. })
        ));
        assert!(matches!(
            pick(Some("nope"), &idle, &st),
            Err(RetryRefusal::UnknownPlan { .. })
        ));
        let running = InstanceSpec {
            plan_execution: PlanExecution {
                plan_name: "update".into(),
                uid: "u9".into(),
                status: Some(I),
            },
            ..InstanceSpec::default()
        };
        let refused = pick(Some("deploy"), &running, &st).unwrap_err();
        assert!(matches!(refused, RetryRefusal::PlanScheduled { .. }));
        assert_eq!(
            refused.to_string(),
            "plan update is scheduled on instance x (status IN_PROGRESS): wait for it to finish or cancel it first"
        );
        st.plan_status.retain(|k, _| k == "update");
        assert_eq!(
            pick(None, &idle, &st),
            Err(RetryRefusal::NothingFailed { instance: "x".into() })
        );
    }
}
