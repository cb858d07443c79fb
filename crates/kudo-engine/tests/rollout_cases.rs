//! The decisions of a fleet rollout (`kudo_engine::rollout`), one case per branch: from a Rollout
//! and the Instances it selects, as the manager reads them, to the status it writes and the
//! actions it executes. Each case feeds the status of the decision before it back in, as the
//! manager does, so a sequence of cases is a rollout (and, with nothing kept in between, a
//! restarted one).

use std::collections::BTreeMap;

use kudo_api::rollout::{Rollout, RolloutStatus};
use kudo_api::{ExecutionStatus, Instance, OperatorVersion};
use kudo_engine::Timestamp;
use kudo_engine::revision::{Revision, RevisionData, StartedBy};
use kudo_engine::rollout::{
    Action, Decision, Observed, ROLLOUT_ANNOTATION, RolloutMark, Seen, decide, instance_phase as ip, phase,
    wanted_revisions, wave_phase,
};
use serde_json::{Value, json};

const T0: i64 = 1_800_000_000;

fn at(secs: u64) -> Timestamp {
    Timestamp::from_unix(T0).plus_seconds(secs)
}

fn ov(name: &str, version: &str) -> OperatorVersion {
    serde_json::from_value(json!({
        "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "operator": {"name": "app"}, "version": version,
            "parameters": [
                {"name": "P", "default": "1"},
                {"name": "FIXED", "default": "a", "immutable": true},
                {"name": "SECRET", "sensitive": true},
            ],
            "plans": {"deploy": {"strategy": "serial", "phases": []}, "backup": {"strategy": "serial", "phases": []}},
        }
    }))
    .unwrap()
}

/// An Instance of `app-0.1.0` whose deploy run `d-NAME` completed and which is Ready.
fn inst(name: &str) -> Instance {
    serde_json::from_value(json!({
        "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "generation": 2,
            "labels": {"app": "db", "env": if name.ends_with('s') { "staging" } else { "prod" }}},
        "spec": {"operatorVersion": {"name": "app-0.1.0"}},
        "status": {
            "planStatus": {"deploy": {"name": "deploy", "status": "COMPLETE", "uid": format!("d-{name}")}},
            "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2, "reason": "ResourcesReady"}],
        }
    }))
    .unwrap()
}

fn rollout(spec: Value) -> Rollout {
    serde_json::from_value(json!({
        "apiVersion": "kudo-rs.dev/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "fleet", "uid": "ru", "generation": 1},
        "spec": spec,
    }))
    .unwrap()
}

fn upgrade() -> Value {
    json!({"target": {"operatorVersion": "app-0.2.0"}, "selector": {"matchLabels": {"app": "db"}}})
}

/// The Instance as the manager leaves it once it admitted the rollout's change: upgraded, the
/// mark stamped with run `u-NAME`, the run in `status` (or in the spec only while it runs).
fn changed(mut i: Instance, outcome: Option<ExecutionStatus>) -> Instance {
    let run = format!("u-{}", i.metadata.name);
    let mark = RolloutMark {
        name: "fleet".into(),
        uid: "ru".into(),
        at: at(0).to_string(),
        run: Some(run.clone()),
    };
    i.metadata
        .annotations
        .insert(ROLLOUT_ANNOTATION.into(), mark.to_annotation());
    i.spec.operator_version.name = "app-0.2.0".into();
    let st = i.status.as_mut().unwrap();
    match outcome {
        None => {
            i.spec.plan_execution.plan_name = "deploy".into();
            i.spec.plan_execution.uid = run;
            i.spec.plan_execution.status = Some(ExecutionStatus::InProgress);
        }
        Some(o) => {
            let ps = st.plan_status.get_mut("deploy").unwrap();
            ps.uid = run;
            ps.status = o;
        }
    }
    i
}

/// The rollout's mark written, not admitted yet.
fn marked(mut i: Instance) -> Instance {
    let mark = RolloutMark {
        name: "fleet".into(),
        uid: "ru".into(),
        at: at(0).to_string(),
        run: None,
    };
    i.metadata
        .annotations
        .insert(ROLLOUT_ANNOTATION.into(), mark.to_annotation());
    i.spec.operator_version.name = "app-0.2.0".into();
    i
}

fn revision(number: u64, ov: &str, plan_uid: &str) -> Revision {
    Revision {
        number,
        name: format!("x-{number}"),
        created: String::new(),
        finished: None,
        outcome: None,
        data: RevisionData {
            operator_version: ov.into(),
            version: String::new(),
            plan: "deploy".into(),
            plan_uid: plan_uid.into(),
            parameters: BTreeMap::new(),
            parameter_sources: BTreeMap::new(),
            started_by: StartedBy::User,
            change: String::new(),
        },
    }
}

/// The world of one decision: the rollout, its Instances, the OperatorVersions, revisions.
struct World {
    rollout: Rollout,
    instances: Vec<Instance>,
    ovs: Vec<OperatorVersion>,
    revisions: BTreeMap<String, Vec<Revision>>,
}

impl World {
    fn new(spec: Value, instances: Vec<Instance>) -> World {
        World {
            rollout: rollout(spec),
            instances,
            ovs: vec![ov("app-0.1.0", "0.1.0"), ov("app-0.2.0", "0.2.0")],
            revisions: BTreeMap::new(),
        }
    }

    fn decide(&self, now: Timestamp) -> Decision {
        let find = |name: &str| self.ovs.iter().find(|o| o.metadata.name == name);
        let target = self.rollout.spec.target.operator_version.clone();
        let instances = self
            .instances
            .iter()
            .map(|i| Seen {
                instance: i,
                current_ov: find(&i.spec.operator_version.name),
                target_ov: find(target.as_deref().unwrap_or(&i.spec.operator_version.name)),
                revisions: self.revisions.get(&i.metadata.name).map(Vec::as_slice),
            })
            .collect();
        decide(&Observed {
            rollout: &self.rollout,
            instances,
            now,
        })
    }

    /// Decides and keeps the status, as the manager writes it.
    fn step(&mut self, now: Timestamp) -> Decision {
        let d = self.decide(now);
        self.rollout.status = Some(d.status.clone());
        d
    }

    fn set(&mut self, i: Instance) {
        let at = self
            .instances
            .iter()
            .position(|x| x.metadata.name == i.metadata.name);
        match at {
            Some(n) => self.instances[n] = i,
            None => self.instances.push(i),
        }
    }
}

fn status(d: &Decision) -> &RolloutStatus {
    &d.status
}

fn phase_of<'d>(d: &'d Decision, name: &str) -> (&'d str, &'d str) {
    let e = d
        .status
        .instances
        .iter()
        .find(|e| e.name == format!("default/{name}"))
        .unwrap_or_else(|| panic!("no entry {name}: {:#?}", d.status.instances));
    (e.phase.as_str(), e.message.as_str())
}

fn changes(d: &Decision) -> Vec<String> {
    d.actions
        .iter()
        .filter_map(|a| match a {
            Action::Change { instance, .. } => Some(instance.clone()),
            _ => None,
        })
        .collect()
}

fn condition<'d>(d: &'d Decision, t: &str) -> &'d str {
    &d.status.conditions.iter().find(|c| c.type_ == t).unwrap().status
}

fn five() -> Vec<Instance> {
    ["a", "b", "c", "d", "e"].iter().map(|n| inst(n)).collect()
}

#[test]
fn an_invalid_spec_stalls_and_changes_nothing() {
    let cases = [
        ("no target", json!({"target": {}})),
        (
            "bad duration",
            json!({"target": {"parameters": {"P": "2"}}, "progressDeadline": "soon"}),
        ),
        (
            "bad amount",
            json!({"target": {"parameters": {"P": "2"}}, "maxFailures": "lots"}),
        ),
        (
            "bad rule",
            json!({"target": {"parameters": {"P": "2"}}, "gate": {"rules": [{"name": "x", "condition": "(("}]}}),
        ),
        (
            "bad selector",
            json!({"target": {"parameters": {"P": "2"}}, "selector": {"matchExpressions": [{"key": "k", "operator": "In"}]}}),
        ),
        (
            "duplicate wave",
            json!({"target": {"parameters": {"P": "2"}}, "waves": [{"name": "w"}, {"name": "w"}]}),
        ),
    ];
    for (case, spec) in cases {
        let w = World::new(spec, five());
        let d = w.decide(at(0));
        assert_eq!(status(&d).phase, phase::INVALID, "{case}");
        assert!(d.actions.is_empty(), "{case}");
        assert_eq!(condition(&d, "Stalled"), "True", "{case}");
        assert_eq!(d.status.observed_generation, Some(1), "{case}");
        assert_eq!(d.requeue, None, "{case}");
    }
}

#[test]
fn the_first_decision_places_every_instance_and_changes_the_canary_only() {
    let mut spec = upgrade();
    spec["waves"] = json!([{"size": "50%"}]);
    let mut instances = five();
    let mut done = inst("z");
    done.spec.operator_version.name = "app-0.2.0".into();
    instances.push(done);
    let w = World::new(spec, instances);
    let d = w.decide(at(0));
    assert_eq!(changes(&d), ["default/a"]);
    let Action::Change { plan, mark, .. } = &d.actions[0] else {
        panic!()
    };
    assert_eq!(
        (plan.as_str(), mark.name.as_str(), mark.uid.as_str()),
        ("deploy", "fleet", "ru")
    );
    let waves: Vec<(&str, &str)> = d
        .status
        .instances
        .iter()
        .map(|e| (e.name.as_str(), e.wave.as_str()))
        .collect();
    assert_eq!(
        waves,
        [
            ("default/z", ""),
            ("default/a", "canary"),
            ("default/b", "wave-1"),
            ("default/c", "wave-1"),
            ("default/d", "wave-1"),
            ("default/e", "remaining"),
        ]
    );
    assert_eq!(phase_of(&d, "z"), (ip::SKIPPED, "already at the target"));
    assert_eq!(d.status.total, 5, "the one at the target is not counted");
    assert_eq!(d.status.waves[0].phase, wave_phase::PROGRESSING);
    assert_eq!(d.status.phase, phase::PROGRESSING);
    assert_eq!(condition(&d, "Reconciling"), "True");
    assert_eq!(condition(&d, "Ready"), "False");
    assert!(d.requeue.is_some());
}

#[test]
fn a_change_not_written_is_judged_again_and_a_written_one_is_never_repeated() {
    let mut w = World::new(upgrade(), five());
    assert_eq!(changes(&w.step(at(0))), ["default/a"]);
    // The write did not happen (a conflict): the next decision changes it again.
    assert_eq!(changes(&w.step(at(1))), ["default/a"]);
    // It happened: the mark is there (admitted or not), nothing is written again, even by a
    // manager that kept nothing but the status.
    w.set(marked(inst("a")));
    let d = w.step(at(2));
    assert!(changes(&d).is_empty(), "{:?}", d.actions);
    assert_eq!(
        phase_of(&d, "a"),
        (ip::PROGRESSING, "waiting for the manager to admit the change")
    );
    w.rollout.status = None;
    let d = w.decide(at(3));
    assert!(!changes(&d).contains(&"default/a".to_string()), "{:?}", d.actions);
}

#[test]
fn a_running_change_then_a_healthy_canary_opens_the_next_wave_after_the_gate() {
    let mut spec = upgrade();
    spec["gate"] = json!({"minSuccessTime": "30s"});
    spec["maxConcurrent"] = json!(2);
    let mut w = World::new(spec, five());
    w.step(at(0));
    w.set(changed(inst("a"), None));
    let d = w.step(at(5));
    assert_eq!(phase_of(&d, "a"), (ip::PROGRESSING, "plan deploy is running"));
    assert!(d.requeue.unwrap() <= 600, "the deadline is 10 minutes");
    w.set(changed(inst("a"), Some(ExecutionStatus::Complete)));
    let d = w.step(at(10));
    assert_eq!(phase_of(&d, "a").0, ip::HEALTHY);
    assert_eq!(
        d.status.waves[0].healthy_since.as_deref(),
        Some(at(10).to_string().as_str())
    );
    assert_eq!(d.requeue, Some(30), "the gate's clock");
    assert!(changes(&d).is_empty());
    let d = w.step(at(40));
    assert_eq!(phase_of(&d, "a").0, ip::SUCCEEDED);
    assert_eq!(d.status.waves[0].phase, wave_phase::COMPLETE);
    assert_eq!(changes(&d), ["default/b", "default/c"], "maxConcurrent 2");
}

#[test]
fn a_complete_run_is_not_healthy_until_ready_and_every_gate_rule_holds() {
    let mut spec = upgrade();
    spec["gate"] = json!({"rules": [{"name": "p-is-2", "condition": "params.P == '2'"}]});
    let mut w = World::new(spec, five());
    w.step(at(0));
    let mut a = changed(inst("a"), Some(ExecutionStatus::Complete));
    a.status.as_mut().unwrap().conditions[0].status = "False".into();
    a.status.as_mut().unwrap().conditions[0].reason = "ResourceNotReady".into();
    w.set(a.clone());
    let d = w.step(at(5));
    let (p, msg) = phase_of(&d, "a");
    assert_eq!(p, ip::PROGRESSING);
    assert!(msg.contains("Ready is False (ResourceNotReady"), "{msg}");
    a.status.as_mut().unwrap().conditions[0].status = "True".into();
    a.status.as_mut().unwrap().conditions[0].observed_generation = Some(1);
    w.set(a.clone());
    assert!(
        phase_of(&w.step(at(6)), "a")
            .1
            .contains("not yet for its current spec")
    );
    a.status.as_mut().unwrap().conditions[0].observed_generation = Some(2);
    w.set(a.clone());
    assert!(
        phase_of(&w.step(at(7)), "a").1.contains("gate rule p-is-2"),
        "P is unset"
    );
    let mut p1 = a.clone();
    p1.spec.parameters.insert("P".into(), "1".into());
    w.set(p1);
    assert!(
        phase_of(&w.step(at(7)), "a")
            .1
            .contains("gate rule p-is-2 is false")
    );
    a.spec.parameters.insert("P".into(), "2".into());
    w.set(a);
    assert_eq!(
        phase_of(&w.step(at(8)), "a").0,
        ip::SUCCEEDED,
        "no minSuccessTime"
    );
}

#[test]
fn a_failed_run_halts_the_rollout_with_pause() {
    let mut w = World::new(upgrade(), five());
    w.step(at(0));
    w.set(changed(inst("a"), Some(ExecutionStatus::FatalError)));
    let d = w.step(at(5));
    assert_eq!(phase_of(&d, "a"), (ip::FAILED, "plan deploy ended FATAL_ERROR"));
    assert_eq!(d.status.phase, phase::HALTED);
    assert_eq!(condition(&d, "Stalled"), "True");
    assert!(changes(&d).is_empty());
    // Nothing else is ever changed; raising the budget goes on.
    assert!(changes(&w.step(at(100))).is_empty());
    w.rollout.spec.max_failures = Some(kudo_api::rollout::Amount::Count(1));
    let d = w.step(at(101));
    assert_eq!(d.status.phase, phase::PROGRESSING);
    assert_eq!(
        changes(&d).len(),
        4,
        "the canary wave is done; the rest is one wave"
    );
}

#[test]
fn a_replaced_run_and_a_missed_deadline_fail() {
    let mut w = World::new(upgrade(), five());
    w.step(at(0));
    let mut a = changed(inst("a"), Some(ExecutionStatus::Complete));
    a.status
        .as_mut()
        .unwrap()
        .plan_status
        .get_mut("deploy")
        .unwrap()
        .uid = "someone-else".into();
    w.set(a);
    assert!(
        phase_of(&w.step(at(1)), "a")
            .1
            .contains("replaced by another run")
    );
    // Between the unscheduling write and the final status write, the end is only in the
    // ended-run record: the run is not taken for replaced.
    let mut w = World::new(upgrade(), five());
    w.step(at(0));
    let mut a = changed(inst("a"), Some(ExecutionStatus::Complete));
    let ps = a.status.as_mut().unwrap().plan_status.get_mut("deploy").unwrap();
    let record = serde_json::to_string(&*ps).unwrap();
    ps.uid = "the-install".into();
    a.metadata
        .annotations
        .insert(kudo_engine::reconcile::ENDED_RUN_ANNOTATION.into(), record);
    w.set(a);
    let d = w.step(at(1));
    let (p, msg) = phase_of(&d, "a");
    assert!(!msg.contains("replaced"), "{p}: {msg}");
    assert_ne!(p, ip::FAILED);
    let mut w = World::new(upgrade(), five());
    w.step(at(0));
    w.set(changed(inst("a"), None));
    assert_eq!(phase_of(&w.step(at(599)), "a").0, ip::PROGRESSING);
    let d = w.step(at(600));
    let (p, msg) = phase_of(&d, "a");
    assert_eq!(p, ip::FAILED);
    assert!(
        msg.starts_with("not COMPLETE and healthy within 600s of the change: plan deploy is running"),
        "{msg}"
    );
}

#[test]
fn a_busy_instance_waits_without_taking_a_slot_and_is_never_cancelled() {
    let mut spec = upgrade();
    spec["canary"] = json!(0);
    spec["maxConcurrent"] = json!(1);
    let mut w = World::new(spec, five());
    let mut a = inst("a");
    a.spec.plan_execution.plan_name = "backup".into();
    a.spec.plan_execution.uid = "b1".into();
    w.set(a);
    let d = w.step(at(0));
    assert_eq!(phase_of(&d, "a"), (ip::WAITING, "plan backup is running"));
    assert_eq!(changes(&d), ["default/b"], "the next one takes the slot");
    assert!(!d.actions.iter().any(|a| matches!(a, Action::Cancel { .. })));
    w.set(inst("a"));
    w.set(changed(inst("b"), Some(ExecutionStatus::Complete)));
    let d = w.step(at(5));
    assert_eq!(changes(&d), ["default/a"], "once idle its turn comes");
}

#[test]
fn a_change_kudo_refuses_or_a_missing_target_fails_the_instance() {
    let mut spec = json!({"target": {"parameters": {"FIXED": "b"}}});
    spec["canary"] = json!(0);
    let w = World::new(spec, vec![inst("a")]);
    let d = w.decide(at(0));
    let (p, msg) = phase_of(&d, "a");
    assert_eq!(p, ip::FAILED);
    assert!(msg.starts_with("refused: "), "{msg}");
    let w = World::new(
        json!({"target": {"operatorVersion": "app-9.9.9"}}),
        vec![inst("a")],
    );
    assert_eq!(
        phase_of(&w.decide(at(0)), "a"),
        (
            ip::FAILED,
            "refused: OperatorVersion app-9.9.9 not found in namespace default"
        )
    );
    let w = World::new(
        json!({"target": {"parameters": {"SECRET": "x"}}}),
        vec![inst("a")],
    );
    assert!(phase_of(&w.decide(at(0)), "a").1.contains("sensitive"));
}

#[test]
fn deleted_and_recreated_instances_and_late_joiners() {
    let mut spec = upgrade();
    spec["waves"] = json!([{"size": 2}]);
    let mut w = World::new(spec, five());
    w.step(at(0));
    // c is deleted before its turn; b is deleted while changing (not a failure); f joins.
    w.instances.retain(|i| !["c"].contains(&i.metadata.name.as_str()));
    w.set(changed(inst("a"), Some(ExecutionStatus::Complete)));
    w.set(inst("f"));
    let d = w.step(at(1));
    assert_eq!(phase_of(&d, "c").0, ip::DELETED);
    assert_eq!(phase_of(&d, "f").0, ip::PENDING);
    let f_wave = d
        .status
        .instances
        .iter()
        .find(|e| e.name == "default/f")
        .unwrap()
        .wave
        .clone();
    assert_eq!(f_wave, "remaining", "wave-1 is full");
    assert_eq!(changes(&d), ["default/b"], "c of wave-1 is gone");
    w.instances.retain(|i| i.metadata.name != "b");
    let d = w.step(at(2));
    assert_eq!(phase_of(&d, "b").0, ip::DELETED);
    assert_eq!(d.status.phase, phase::PROGRESSING, "a deletion is no failure");
    // b comes back as another Instance: a new entry, placed anew in the first wave not started;
    // wave-1 has nothing left to change, so that wave starts at once.
    let mut b = inst("b");
    b.metadata.other.insert("uid".into(), json!("uid-b2"));
    w.set(b);
    let d = w.step(at(3));
    let b = d.status.instances.iter().find(|e| e.name == "default/b").unwrap();
    assert_eq!(
        (b.uid.as_str(), b.wave.as_str(), b.phase.as_str()),
        ("uid-b2", "remaining", ip::PROGRESSING)
    );
    assert_eq!(changes(&d), ["default/b", "default/d", "default/e", "default/f"]);
}

#[test]
fn pause_approval_and_abort() {
    let mut spec = upgrade();
    spec["waves"] = json!([{"name": "prod", "approval": true}]);
    spec["paused"] = json!(true);
    let mut w = World::new(spec, five());
    let d = w.step(at(0));
    assert_eq!(d.status.phase, phase::PAUSED);
    assert!(d.actions.is_empty());
    assert_eq!(condition(&d, "Reconciling"), "True");
    w.rollout.spec.paused = false;
    assert_eq!(changes(&w.step(at(1))), ["default/a"]);
    w.set(changed(inst("a"), Some(ExecutionStatus::Complete)));
    let d = w.step(at(2));
    assert_eq!(d.status.phase, phase::WAITING_FOR_APPROVAL);
    assert_eq!(d.status.waves[1].phase, wave_phase::WAITING_FOR_APPROVAL);
    assert!(changes(&d).is_empty());
    w.rollout.spec.approved_waves = vec!["prod".into()];
    let d = w.step(at(3));
    assert_eq!(changes(&d).len(), 4);
    for n in ["b", "c"] {
        w.set(changed(inst(n), None));
    }
    for n in ["d", "e"] {
        w.set(changed(inst(n), Some(ExecutionStatus::Complete)));
    }
    w.rollout.spec.abort = true;
    let d = w.step(at(4));
    assert_eq!(d.status.phase, phase::PROGRESSING, "two still change");
    for n in ["b", "c"] {
        w.set(changed(inst(n), Some(ExecutionStatus::Complete)));
    }
    let d = w.step(at(5));
    assert_eq!(d.status.phase, phase::ABORTED);
    assert_eq!(condition(&d, "Stalled"), "True");
    assert_eq!(d.status.finished_at.as_deref(), Some(at(5).to_string().as_str()));
    let again = w.step(at(6));
    assert_eq!((again.requeue, again.actions.len()), (None, 0), "final");
}

#[test]
fn a_complete_rollout_is_ready_and_final() {
    let mut spec = upgrade();
    spec["canary"] = json!(0);
    let mut w = World::new(spec, five());
    w.step(at(0));
    for n in ["a", "b", "c", "d", "e"] {
        w.set(changed(inst(n), Some(ExecutionStatus::Complete)));
    }
    let d = w.step(at(1));
    assert_eq!(d.status.phase, phase::COMPLETE);
    assert_eq!(condition(&d, "Ready"), "True");
    assert_eq!(condition(&d, "Reconciling"), "False");
    assert_eq!(d.requeue, None);
    assert!(
        d.status.message.starts_with("5 succeeded, 0 failed"),
        "{}",
        d.status.message
    );
}

#[test]
fn revisions_are_read_once_for_changed_instances() {
    let mut w = World::new(upgrade(), five());
    w.step(at(0));
    w.set(changed(inst("a"), None));
    let obs_names = |w: &World| {
        let instances = w
            .instances
            .iter()
            .map(|i| Seen {
                instance: i,
                current_ov: None,
                target_ov: None,
                revisions: None,
            })
            .collect();
        wanted_revisions(&Observed {
            rollout: &w.rollout,
            instances,
            now: at(0),
        })
    };
    assert_eq!(obs_names(&w), ["default/a"]);
    w.revisions.insert(
        "a".into(),
        vec![revision(1, "app-0.1.0", "d-a"), revision(2, "app-0.2.0", "u-a")],
    );
    let d = w.step(at(1));
    let a = d.status.instances.iter().find(|e| e.name == "default/a").unwrap();
    assert_eq!((a.from_revision, a.to_revision), (Some(1), Some(2)));
    assert!(obs_names(&w).is_empty());
}

#[test]
fn rollback_on_failure_restores_every_changed_instance() {
    let mut spec = upgrade();
    spec["onFailure"] = json!("Rollback");
    spec["canary"] = json!(2);
    let mut w = World::new(spec, five());
    w.step(at(0));
    w.set(changed(inst("a"), Some(ExecutionStatus::FatalError)));
    w.set(changed(inst("b"), None));
    for n in ["a", "b"] {
        w.revisions.insert(
            n.into(),
            vec![
                revision(1, "app-0.1.0", &format!("d-{n}")),
                revision(2, "app-0.2.0", &format!("u-{n}")),
            ],
        );
    }
    let d = w.step(at(1));
    assert_eq!(d.status.phase, phase::ROLLING_BACK);
    assert_eq!(condition(&d, "Reconciling"), "True");
    assert!(
        d.actions.contains(&Action::Rollback {
            instance: "default/a".into(),
            to: 1
        }),
        "{:?}",
        d.actions
    );
    assert!(
        d.actions.contains(&Action::Cancel {
            instance: "default/b".into(),
            run: "u-b".into()
        }),
        "the rollout's own run is stopped: {:?}",
        d.actions
    );
    assert!(changes(&d).is_empty());
    // b's run was cancelled; another plan keeps c... no: c was never changed and stays Pending.
    w.set(changed(inst("b"), Some(ExecutionStatus::Cancelled)));
    let mut a = inst("a");
    a.spec.plan_execution.plan_name = "deploy".into();
    a.spec.plan_execution.uid = "rb-a".into();
    a.spec.plan_execution.status = Some(ExecutionStatus::InProgress);
    w.set(a);
    let d = w.step(at(2));
    assert_eq!(
        phase_of(&d, "a"),
        (ip::ROLLING_BACK, "rolling back to revision 1")
    );
    assert!(d.actions.contains(&Action::Rollback {
        instance: "default/b".into(),
        to: 1
    }));
    assert_eq!(phase_of(&d, "c").0, ip::PENDING);
    w.set(inst("a"));
    w.set(inst("b"));
    let d = w.step(at(3));
    assert_eq!(phase_of(&d, "a").0, ip::ROLLED_BACK);
    assert_eq!(d.status.phase, phase::ROLLED_BACK);
    assert_eq!(condition(&d, "Stalled"), "True");
    assert_eq!(d.requeue, None);
}

#[test]
fn a_rollback_waits_for_another_plan_and_for_its_revisions() {
    let mut spec = upgrade();
    spec["onFailure"] = json!("Rollback");
    let mut w = World::new(spec, five());
    w.step(at(0));
    let mut a = changed(inst("a"), Some(ExecutionStatus::FatalError));
    let d = {
        w.set(a.clone());
        w.step(at(1))
    };
    assert_eq!(phase_of(&d, "a"), (ip::ROLLING_BACK, "reading its revisions"));
    w.revisions.insert(
        "a".into(),
        vec![revision(1, "app-0.1.0", "d-a"), revision(2, "app-0.2.0", "u-a")],
    );
    a.spec.plan_execution.plan_name = "backup".into();
    a.spec.plan_execution.uid = "b1".into();
    w.set(a);
    let d = w.step(at(2));
    assert_eq!(
        phase_of(&d, "a"),
        (
            ip::ROLLING_BACK,
            "plan backup is running; rolls back once it ends"
        )
    );
    assert!(d.actions.is_empty());
    w.revisions
        .insert("a".into(), vec![revision(2, "app-0.2.0", "u-a")]);
    w.set(changed(inst("a"), Some(ExecutionStatus::FatalError)));
    let d = w.step(at(3));
    assert_eq!(
        phase_of(&d, "a"),
        (ip::ROLLBACK_FAILED, "revision 1 is no longer recorded")
    );
    assert_eq!(d.status.phase, phase::ROLLED_BACK);
}

#[test]
fn a_percentage_budget_allows_that_many_failures() {
    let mut spec = upgrade();
    spec["canary"] = json!(0);
    spec["maxFailures"] = json!("20%");
    let mut w = World::new(spec, five());
    w.step(at(0));
    w.set(changed(inst("a"), Some(ExecutionStatus::FatalError)));
    assert_eq!(w.step(at(1)).status.phase, phase::PROGRESSING, "1 of 5 may fail");
    w.set(changed(inst("b"), Some(ExecutionStatus::FatalError)));
    assert_eq!(w.step(at(2)).status.phase, phase::HALTED);
}
