//! Revision history and rollback decisions, table-tested on the pure
//! functions the manager and `kubectl kudo history|rollback` share.

use std::collections::BTreeMap;

use kudo_api::{ExecutionStatus, Instance, InstanceSpec, OperatorVersion, ParameterSource};
use kudo_engine::revision::{self, Outcome, Revision, RevisionData, StartedBy};
use kudo_engine::rollback::{self, Judged, RollbackError, RollbackMark};
use serde_json::json;

/// An OperatorVersion `name` (version `version`) with `plans`, NODE_COUNT (trigger `update`
/// unless there is none), an immutable STORAGE and a sensitive PASSWORD.
fn ov(name: &str, version: &str, plans: &[&str]) -> OperatorVersion {
    let plans: serde_json::Map<String, serde_json::Value> =
        plans.iter().map(|p| (p.to_string(), json!({}))).collect();
    let trigger = if plans.contains_key("update") {
        "update"
    } else {
        ""
    };
    serde_json::from_value(json!({
        "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "version": version,
            "plans": plans,
            "parameters": [
                {"name": "NODE_COUNT", "trigger": trigger},
                {"name": "STORAGE", "immutable": true},
                {"name": "PASSWORD", "sensitive": true},
            ],
        },
    }))
    .unwrap()
}

fn spec(ov: &str, params: &[(&str, &str)]) -> InstanceSpec {
    serde_json::from_value(json!({
        "operatorVersion": {"name": ov},
        "parameters": params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
    }))
    .unwrap()
}

fn instance(spec: InstanceSpec) -> Instance {
    let mut i: Instance = serde_json::from_value(json!({
        "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
        "metadata": {"name": "db", "namespace": "ns", "uid": "inst-uid"},
        "spec": {},
    }))
    .unwrap();
    i.spec = spec;
    i
}

fn running(mut s: InstanceSpec, plan: &str) -> InstanceSpec {
    s.plan_execution.plan_name = plan.into();
    s.plan_execution.uid = "run-uid".into();
    s.plan_execution.status = Some(ExecutionStatus::InProgress);
    s
}

fn data(ov_name: &str, params: &[(&str, &str)], by: StartedBy) -> RevisionData {
    RevisionData {
        operator_version: ov_name.into(),
        version: ov_name.rsplit('-').next().unwrap().into(),
        plan: "deploy".into(),
        plan_uid: format!("uid-{ov_name}-{}", params.len()),
        parameters: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        parameter_sources: BTreeMap::new(),
        started_by: by,
        change: String::new(),
    }
}

fn rev(number: u64, outcome: Option<Outcome>, data: RevisionData) -> Revision {
    Revision {
        number,
        name: format!("db-{number}"),
        created: "2026-01-01T00:00:00Z".into(),
        finished: None,
        outcome,
        data,
    }
}

#[test]
fn the_change_column_says_what_changed_in_words() {
    let base = data("db-0.1.0", &[("NODE_COUNT", "3")], StartedBy::User);
    let at_five = data("db-0.2.0", &[("NODE_COUNT", "5")], StartedBy::User);
    let cases: Vec<(&str, Option<&RevisionData>, RevisionData, &str)> = vec![
        ("first revision", None, base.clone(), "install"),
        (
            "a parameter",
            Some(&base),
            data("db-0.1.0", &[("NODE_COUNT", "5")], StartedBy::User),
            "NODE_COUNT: 3 → 5",
        ),
        (
            "added and removed",
            Some(&base),
            data("db-0.1.0", &[("STORAGE", "1Gi")], StartedBy::User),
            "NODE_COUNT: 3 → (unset), STORAGE: (unset) → 1Gi",
        ),
        (
            "an upgrade",
            Some(&base),
            data("db-0.2.0", &[("NODE_COUNT", "3")], StartedBy::User),
            "upgrade 0.1.0 → 0.2.0",
        ),
        (
            "a rollback across versions",
            Some(&at_five),
            data(
                "db-0.1.0",
                &[("NODE_COUNT", "3")],
                StartedBy::Rollback { from: 4, to: 2 },
            ),
            "rollback to 2, operator 0.2.0 → 0.1.0, NODE_COUNT: 5 → 3",
        ),
        ("a trigger", Some(&base), base.clone(), "plan deploy triggered"),
        (
            "a schedule",
            Some(&base),
            data(
                "db-0.1.0",
                &[("NODE_COUNT", "3")],
                StartedBy::Schedule {
                    due: "2026-01-01T00:00:00Z".into(),
                },
            ),
            "scheduled (2026-01-01T00:00:00Z)",
        ),
        (
            "a long value is shortened",
            Some(&base),
            data("db-0.1.0", &[("NODE_COUNT", &"9".repeat(40))], StartedBy::User),
            "NODE_COUNT: 3 → 99999999999999999999999999999999…",
        ),
    ];
    let defaults = BTreeMap::new();
    for (name, prev, next, want) in cases {
        assert_eq!(revision::change_summary(prev, &next, &defaults), want, "{name}");
    }
    // A value not set shows its default; setting the default explicitly changes nothing in words.
    let defaults = BTreeMap::from([("NODE_COUNT".to_string(), "3".to_string())]);
    let unset = data("db-0.1.0", &[], StartedBy::User);
    let five = data("db-0.1.0", &[("NODE_COUNT", "5")], StartedBy::User);
    assert_eq!(
        revision::change_summary(Some(&unset), &five, &defaults),
        "NODE_COUNT: 3 → 5"
    );
    assert_eq!(
        revision::change_summary(Some(&five), &unset, &defaults),
        "NODE_COUNT: 5 → 3"
    );
    assert_eq!(
        revision::change_summary(Some(&unset), &base, &defaults),
        "plan deploy triggered"
    );
}

#[test]
fn the_differences_of_two_revisions_keep_whole_values_and_read_defaults() {
    use revision::{Differences, ValueChange};
    let change = |name: &str, before: Option<&str>, after: Option<&str>| ValueChange {
        name: name.into(),
        before: before.map(str::to_string),
        after: after.map(str::to_string),
    };
    let long = "9".repeat(40);
    let mut sourced = data("db-0.2.0", &[("NODE_COUNT", &long)], StartedBy::User);
    sourced.parameter_sources.insert(
        "PASSWORD".into(),
        ParameterSource::secret("db-parameters", "PASSWORD"),
    );
    let defaults = BTreeMap::from([("STORAGE".to_string(), "1Gi".to_string())]);
    let older = data(
        "db-0.1.0",
        &[("NODE_COUNT", "3"), ("STORAGE", "1Gi")],
        StartedBy::User,
    );
    assert_eq!(
        revision::differences(&older, &sourced, &defaults),
        Differences {
            version: Some(("0.1.0".into(), "0.2.0".into())),
            values: vec![change("NODE_COUNT", Some("3"), Some(&long))],
            sources: vec!["PASSWORD".into()],
        }
    );
    let unset = data("db-0.1.0", &[("TAG", "a")], StartedBy::User);
    assert_eq!(
        revision::differences(&unset, &older, &BTreeMap::new()).values,
        vec![
            change("NODE_COUNT", None, Some("3")),
            change("STORAGE", None, Some("1Gi")),
            change("TAG", Some("a"), None),
        ]
    );
    assert_eq!(
        revision::differences(&older, &older, &defaults),
        Differences::default()
    );
}

#[test]
fn a_snapshot_never_holds_a_sensitive_value() {
    let o = ov("db-0.1.0", "0.1.0", &["deploy"]);
    let mut s = running(
        spec("db-0.1.0", &[("NODE_COUNT", "3"), ("PASSWORD", "hunter2")]),
        "deploy",
    );
    s.parameter_sources.insert(
        "PASSWORD".into(),
        ParameterSource::secret("db-parameters", "PASSWORD"),
    );
    let d = revision::snapshot(&s, &o, StartedBy::User, None);
    assert_eq!(
        d.parameters,
        BTreeMap::from([("NODE_COUNT".to_string(), "3".to_string())])
    );
    assert_eq!(d.parameter_sources.len(), 1);
    assert_eq!(
        (d.plan.as_str(), d.plan_uid.as_str(), d.version.as_str()),
        ("deploy", "run-uid", "0.1.0")
    );
    assert!(!serde_json::to_string(&d).unwrap().contains("hunter2"));
}

#[test]
fn a_revision_round_trips_through_its_controller_revision() {
    let d = data(
        "db-0.1.0",
        &[("NODE_COUNT", "3")],
        StartedBy::Rollback { from: 3, to: 1 },
    );
    let mut cr = revision::manifest("ns", "db", "inst-uid", 4, &d);
    assert_eq!(cr["metadata"]["name"], "db-4");
    assert_eq!(cr["metadata"]["labels"][revision::RUN_LABEL], d.plan_uid.as_str());
    assert_eq!(cr["metadata"]["ownerReferences"][0]["controller"], true);
    cr["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    let r = revision::parse(&cr).unwrap();
    assert_eq!((r.number, r.outcome, r.status()), (4, None, "IN_PROGRESS"));
    assert_eq!(r.data, d);
    let patch = revision::outcome_patch(Outcome::FatalError, "2026-01-01T00:05:00Z");
    cr["metadata"]["annotations"] = patch["metadata"]["annotations"].clone();
    let r = revision::parse(&cr).unwrap();
    assert_eq!((r.status(), r.updated()), ("FATAL_ERROR", "2026-01-01T00:05:00Z"));
    // Another Instance's revision, or a StatefulSet's, is not in this history.
    let mut foreign = cr.clone();
    foreign["metadata"]["ownerReferences"][0]["uid"] = json!("other");
    let sts = json!({"metadata": {"name": "web-5d8f", "ownerReferences": [{"uid": "inst-uid", "kind": "StatefulSet"}]}, "revision": 1, "data": {}});
    assert_eq!(revision::history(&[foreign, sts, cr], "inst-uid").len(), 1);
}

#[test]
fn a_long_instance_name_still_makes_a_valid_revision_name() {
    let long = "a".repeat(253);
    let cr = revision::manifest("ns", &long, "u", 12, &data("x-1", &[], StartedBy::User));
    let name = cr["metadata"]["name"].as_str().unwrap();
    assert!(name.len() <= 253 && name.ends_with("-12"), "{name}");
    assert!(
        cr["metadata"]["labels"]["kudo.dev/instance"]
            .as_str()
            .unwrap()
            .len()
            <= 63
    );
}

#[test]
fn history_keeps_the_newest_revisions_and_marks_replaced_runs() {
    let revs: Vec<Revision> = (1..=12)
        .map(|n| rev(n, Some(Outcome::Complete), data("db-0.1.0", &[], StartedBy::User)))
        .collect();
    assert_eq!(revision::next_number(&revs), 13);
    assert_eq!(revision::to_prune(&revs, 10), vec!["db-1", "db-2"]);
    assert_eq!(
        revision::to_prune(&revs, 0).len(),
        11,
        "at least the newest is kept"
    );
    assert!(revision::to_prune(&revs[..3], 10).is_empty());
    let mut open = revs[..3].to_vec();
    open[1].outcome = None;
    open[2].outcome = None;
    let current = open[2].data.plan_uid.clone();
    open[1].data.plan_uid = "older".into();
    let replaced: Vec<u64> = revision::replaced(&open, &current)
        .iter()
        .map(|r| r.number)
        .collect();
    assert_eq!(replaced, vec![2]);
}

fn history() -> Vec<Revision> {
    vec![
        rev(
            1,
            Some(Outcome::Complete),
            data("db-0.1.0", &[("NODE_COUNT", "3")], StartedBy::User),
        ),
        rev(
            2,
            Some(Outcome::Complete),
            data("db-0.1.0", &[("NODE_COUNT", "5")], StartedBy::User),
        ),
        rev(
            3,
            Some(Outcome::FatalError),
            data("db-0.2.0", &[("NODE_COUNT", "5")], StartedBy::User),
        ),
    ]
}

#[test]
fn the_default_target_is_the_newest_completed_revision_with_other_values() {
    let o = ov("db-0.2.0", "0.2.0", &["deploy"]);
    let revs = history();
    let current = spec("db-0.2.0", &[("NODE_COUNT", "5")]);
    assert_eq!(rollback::target(&revs, &current, &o, None).unwrap().number, 2);
    // Back on revision 2's values: the default goes one further.
    let o1 = ov("db-0.1.0", "0.1.0", &["deploy"]);
    let current = spec("db-0.1.0", &[("NODE_COUNT", "5")]);
    assert_eq!(rollback::target(&revs, &current, &o1, None).unwrap().number, 1);
    assert_eq!(
        rollback::target(&revs, &current, &o1, Some(2)),
        Err(RollbackError::Unchanged(2))
    );
    assert_eq!(
        rollback::target(&revs, &current, &o1, Some(9)),
        Err(RollbackError::NoSuchRevision(9, "1, 2, 3".into()))
    );
    assert_eq!(
        rollback::target(&[], &current, &o1, None),
        Err(RollbackError::NoHistory)
    );
    assert_eq!(
        rollback::target(&revs[..1], &spec("db-0.1.0", &[("NODE_COUNT", "3")]), &o1, None),
        Err(RollbackError::NoTarget)
    );
}

#[test]
fn a_restored_spec_takes_the_target_values_and_keeps_the_rest() {
    let o = ov("db-0.2.0", "0.2.0", &["deploy"]);
    let mut current = running(
        spec(
            "db-0.2.0",
            &[("NODE_COUNT", "5"), ("STORAGE", "1Gi"), ("PASSWORD", "x")],
        ),
        "deploy",
    );
    current.service_account_name = "sa".into();
    current
        .parameter_sources
        .insert("OTHER".into(), ParameterSource::secret("s", "k"));
    let target = data(
        "db-0.1.0",
        &[("NODE_COUNT", "3"), ("STORAGE", "1Gi")],
        StartedBy::User,
    );
    let s = rollback::restored_spec(&current, &target, &o);
    assert_eq!(s.operator_version.name, "db-0.1.0");
    assert_eq!(
        s.parameters,
        BTreeMap::from([
            ("NODE_COUNT".into(), "3".into()),
            ("PASSWORD".into(), "x".into()),
            ("STORAGE".into(), "1Gi".into())
        ])
    );
    assert!(s.parameter_sources.is_empty());
    assert_eq!(
        (
            s.service_account_name.as_str(),
            s.plan_execution.plan_name.as_str()
        ),
        ("sa", "deploy")
    );
}

#[test]
fn a_rollback_is_judged_by_kudos_rules_for_a_change() {
    let plain = ov("db-0.1.0", "0.1.0", &["deploy", "update"]);
    let with_rollback = ov("db-0.1.0", "0.1.0", &["deploy", "update", "rollback"]);
    let newer = ov("db-0.2.0", "0.2.0", &["deploy", "update"]);
    let five = spec("db-0.1.0", &[("NODE_COUNT", "5"), ("STORAGE", "1Gi")]);
    let three = spec("db-0.1.0", &[("NODE_COUNT", "3"), ("STORAGE", "1Gi")]);
    let judged = |triggered: &str, plan: &str, blocked: Option<&str>| {
        Ok(Judged {
            triggered: triggered.into(),
            plan: plan.into(),
            blocked_by: blocked.map(str::to_string),
        })
    };
    struct Case<'a> {
        name: &'a str,
        stored: InstanceSpec,
        proposed: InstanceSpec,
        old_ov: &'a OperatorVersion,
        new_ov: &'a OperatorVersion,
        want: Result<Judged, RollbackError>,
    }
    let cases = [
        Case {
            name: "idle: the trigger plan",
            stored: five.clone(),
            proposed: three.clone(),
            old_ov: &plain,
            new_ov: &plain,
            want: judged("update", "update", None),
        },
        Case {
            name: "idle: the package's rollback plan",
            stored: five.clone(),
            proposed: three.clone(),
            old_ov: &with_rollback,
            new_ov: &with_rollback,
            want: judged("update", "rollback", None),
        },
        Case {
            name: "the running plan is the one the change triggers: it restarts",
            stored: running(five.clone(), "update"),
            proposed: running(three.clone(), "update"),
            old_ov: &plain,
            new_ov: &plain,
            want: judged("update", "update", None),
        },
        Case {
            name: "the package's rollback plan is not the running one: --force",
            stored: running(five.clone(), "update"),
            proposed: running(three.clone(), "update"),
            old_ov: &with_rollback,
            new_ov: &with_rollback,
            want: judged("update", "rollback", Some("update")),
        },
        Case {
            name: "another plan runs: --force",
            stored: running(five.clone(), "deploy"),
            proposed: running(three.clone(), "deploy"),
            old_ov: &plain,
            new_ov: &plain,
            want: judged("update", "update", Some("deploy")),
        },
        Case {
            name: "an operator version change while a plan runs: --force",
            stored: running(spec("db-0.2.0", &[("NODE_COUNT", "5"), ("STORAGE", "1Gi")]), "deploy"),
            proposed: running(five.clone(), "deploy"),
            old_ov: &newer,
            new_ov: &plain,
            want: judged("update", "update", Some("deploy")),
        },
        Case {
            name: "an immutable parameter would change: refused even with --force",
            stored: running(five.clone(), "update"),
            proposed: running(spec("db-0.1.0", &[("NODE_COUNT", "5"), ("STORAGE", "2Gi")]), "update"),
            old_ov: &plain,
            new_ov: &plain,
            want: Err(RollbackError::Denied(
                "failed to check immutable parameters for Instance ns/db: parameter 'STORAGE' is immutable but was changed from '1Gi' to '2Gi'".into(),
            )),
        },
    ];
    for c in cases {
        let stored = instance(c.stored);
        let got = rollback::judge(&stored, None, &c.proposed, c.old_ov, c.new_ov, 2);
        assert_eq!(got, c.want, "{}", c.name);
    }
}

#[test]
fn the_rollback_mark_names_its_run_once_admitted() {
    let mut a = BTreeMap::new();
    assert_eq!(RollbackMark::pending(&a), None);
    let mark = RollbackMark {
        from: 3,
        to: 1,
        uid: None,
    };
    a.insert(revision::ROLLBACK_ANNOTATION.to_string(), mark.to_annotation());
    assert_eq!(RollbackMark::pending(&a), Some(mark.clone()));
    assert_eq!(RollbackMark::of_run(&a, "u1"), None);
    let admitted = RollbackMark {
        uid: Some("u1".into()),
        ..mark
    };
    a.insert(
        revision::ROLLBACK_ANNOTATION.to_string(),
        admitted.to_annotation(),
    );
    assert_eq!(RollbackMark::pending(&a), None, "an admitted mark is not pending");
    assert_eq!(RollbackMark::of_run(&a, "u1"), Some(admitted));
    assert_eq!(RollbackMark::of_run(&a, "u2"), None);
    assert_eq!(
        rollback::plan_for("update", &ov("x", "1", &["deploy", "rollback"])),
        "rollback"
    );
    assert_eq!(rollback::plan_for("update", &ov("x", "1", &["deploy"])), "update");
}

#[test]
fn only_an_instance_that_never_ran_a_plan_records_its_first_run_without_a_list() {
    let status = |plans: serde_json::Value| -> kudo_api::InstanceStatus {
        serde_json::from_value(json!({ "planStatus": plans })).unwrap()
    };
    let never = status(json!({"deploy": {"name": "deploy", "status": "NEVER_RUN"}}));
    let ran = status(json!({
        "deploy": {"name": "deploy", "status": "COMPLETE", "uid": "u-1"},
        "backup": {"name": "backup", "status": "NEVER_RUN"},
    }));
    let cases: [(Option<&kudo_api::InstanceStatus>, bool); 4] = [
        (None, true),
        (Some(&kudo_api::InstanceStatus::default()), true),
        (Some(&never), true),
        (Some(&ran), false),
    ];
    for (given, first) in cases {
        assert_eq!(revision::first_run(given), first, "{given:?}");
    }
}
