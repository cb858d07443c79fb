use super::*;
use crate::time::Timestamp;
use kudo_api::{
    Condition, ExecutionStatus, InstanceSpec, InstanceStatus, ObjectMeta, ObjectReference,
    OperatorVersionSpec, Parameter, PlanStatus,
};

fn ov(name: &str, kind: &str) -> OperatorVersion {
    let p = |n: &str, ty: &str, sensitive: bool| Parameter {
        name: n.into(),
        value_type: ty.into(),
        sensitive: Some(sensitive),
        ..Default::default()
    };
    OperatorVersion {
        api_version: kudo_api::API_VERSION.into(),
        kind: "OperatorVersion".into(),
        metadata: ObjectMeta {
            name: name.into(),
            ..Default::default()
        },
        spec: OperatorVersionSpec {
            operator: ObjectReference {
                name: "galera".into(),
                ..Default::default()
            },
            parameters: vec![
                p("NODE_COUNT", "integer", false),
                p("MODE", "string", false),
                p("PASSWORD", "string", true),
            ],
            api: Some(TypedApi {
                group: "galera.kudo.dev".into(),
                kind: kind.into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        status: None,
    }
}

fn object(spec: Value) -> Value {
    json!({"apiVersion": "galera.kudo.dev/v1", "kind": "Galera",
        "metadata": {"name": "db", "namespace": "ns", "uid": "u-1"}, "spec": spec})
}

fn instance(params: &[(&str, &str)], owner_uid: Option<&str>) -> Instance {
    let mut meta = ObjectMeta {
        name: "db".into(),
        namespace: Some("ns".into()),
        ..Default::default()
    };
    if let Some(uid) = owner_uid {
        meta.other.insert(
            "ownerReferences".into(),
            json!([{"apiVersion": "galera.kudo.dev/v1", "kind": "Galera", "name": "db", "uid": uid, "controller": true}]),
        );
    }
    Instance {
        api_version: kudo_api::API_VERSION.into(),
        kind: "Instance".into(),
        metadata: meta,
        spec: InstanceSpec {
            parameters: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        },
        status: None,
    }
}

#[test]
fn a_new_object_gets_an_owned_instance_with_its_spec_as_strings() {
    let o = object(json!({"NODE_COUNT": 3, "MODE": "safe",
        "parameterSources": {"PASSWORD": {"secretKeyRef": {"name": "s", "key": "k"}}}}));
    let InstanceAction::Create(inst) = instance_action(&o, &ov("galera-0.1.0", "Galera"), None) else {
        panic!("create expected");
    };
    assert_eq!(inst["metadata"]["name"], "db");
    assert_eq!(inst["metadata"]["namespace"], "ns");
    assert_eq!(inst["metadata"]["labels"][TYPED_LABEL], "galeras.galera.kudo.dev");
    assert_eq!(inst["metadata"]["labels"]["kudo.dev/operator"], "galera");
    assert_eq!(
        inst["metadata"]["ownerReferences"],
        json!([{"apiVersion": "galera.kudo.dev/v1", "kind": "Galera", "name": "db", "uid": "u-1",
            "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(inst["spec"]["operatorVersion"]["name"], "galera-0.1.0");
    assert_eq!(
        inst["spec"]["parameters"],
        json!({"MODE": "safe", "NODE_COUNT": "3"})
    );
    assert_eq!(
        inst["spec"]["parameterSources"]["PASSWORD"]["secretKeyRef"]["key"],
        "k"
    );
}

#[test]
fn parameter_changes_are_patched_and_removed_fields_unset() {
    type Case<'a> = (Value, Vec<(&'a str, &'a str)>, InstanceAction);
    let cases: Vec<Case> = vec![
        (
            json!({"NODE_COUNT": 3}),
            vec![("NODE_COUNT", "3")],
            InstanceAction::Nothing,
        ),
        (
            json!({"NODE_COUNT": 5}),
            vec![("NODE_COUNT", "3")],
            InstanceAction::Patch(json!({"spec": {"parameters": {"NODE_COUNT": "5"}}})),
        ),
        (
            json!({}),
            vec![("NODE_COUNT", "3"), ("UNDECLARED", "x")],
            InstanceAction::Patch(json!({"spec": {"parameters": {"NODE_COUNT": null}}})),
        ),
        (
            json!({"MODE": "fast", "parameterSources": {"PASSWORD": {"secretKeyRef": {"name": "s", "key": "k"}}}}),
            vec![("MODE", "fast")],
            InstanceAction::Patch(
                json!({"spec": {"parameterSources": {"PASSWORD": {"secretKeyRef": {"name": "s", "key": "k"}}}}}),
            ),
        ),
    ];
    for (spec, have, want) in cases {
        let got = instance_action(
            &object(spec.clone()),
            &ov("galera-0.1.0", "Galera"),
            Some(&instance(&have, Some("u-1"))),
        );
        assert_eq!(got, want, "spec {spec} over {have:?}");
    }
}

#[test]
fn an_instance_of_that_name_owned_by_another_is_left_alone() {
    for owner in [None, Some("other-uid")] {
        let got = instance_action(
            &object(json!({"NODE_COUNT": 5})),
            &ov("galera-0.1.0", "Galera"),
            Some(&instance(&[("NODE_COUNT", "3")], owner)),
        );
        assert!(
            matches!(got, InstanceAction::Conflict(ref m) if m.contains("not owned")),
            "{got:?}"
        );
    }
}

#[test]
fn a_new_object_runs_the_newest_operator_version_of_its_kind() {
    let versioned = |name: &str, version: &str, kind: &str| {
        let mut o = ov(name, kind);
        o.spec.version = version.into();
        o
    };
    let ovs = vec![
        versioned("galera-0.10.0", "0.10.0", "Galera"),
        versioned("galera-0.9.0", "0.9.0", "Galera"),
        versioned("other-1.0.0", "1.0.0", "Other"),
    ];
    let pick =
        |kind| choose_operator_version(&ovs, "galera.kudo.dev/v1", kind).map(|o| o.metadata.name.as_str());
    assert_eq!(
        pick("Galera"),
        Some("galera-0.10.0"),
        "semantic, not lexical, order"
    );
    assert_eq!(pick("Other"), Some("other-1.0.0"));
    assert_eq!(choose_operator_version(&ovs, "other.io/v1", "Galera"), None);
}

fn now() -> Timestamp {
    Timestamp::parse("2026-11-27T12:00:00Z").unwrap()
}

fn cond(type_: &str, status: &str, reason: &str, generation: Option<i64>) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        observed_generation: generation,
        last_transition_time: "2026-11-27T10:00:00Z".into(),
        reason: reason.into(),
        message: String::new(),
    }
}

/// An Instance at generation `generation` whose status observed `observed`.
fn acted(generation: i64, observed: Option<i64>, conditions: Vec<Condition>) -> Instance {
    let mut inst = instance(&[], Some("u-1"));
    inst.metadata.other.insert("generation".into(), json!(generation));
    inst.status = Some(InstanceStatus {
        observed_generation: observed,
        conditions,
        ..Default::default()
    });
    inst
}

#[test]
fn the_status_mirrors_the_latest_plan_and_the_conditions() {
    let mut inst = acted(
        4,
        Some(4),
        vec![cond("Ready", "False", "PlanInProgress", Some(4))],
    );
    let ps = |name: &str, status, at: &str| PlanStatus {
        name: name.into(),
        status,
        last_updated_timestamp: Some(at.into()),
        ..Default::default()
    };
    inst.status.as_mut().unwrap().plan_status = [
        (
            "deploy".to_string(),
            ps("deploy", ExecutionStatus::Complete, "2026-11-27T10:00:00Z"),
        ),
        (
            "update".to_string(),
            ps("update", ExecutionStatus::InProgress, "2026-11-27T11:00:00Z"),
        ),
    ]
    .into();
    let obj = json!({"metadata": {"name": "db", "generation": 2}, "status": {"instance": "db", "stale": 1}});
    let st = status_of(&obj, Some(&inst), &InstanceAction::Nothing, now());
    assert_eq!(
        (st["plan"].as_str(), st["status"].as_str()),
        (Some("update"), Some("IN_PROGRESS"))
    );
    assert_eq!(st["observedGeneration"], 2);
    assert_eq!(st["conditions"][0]["type"], "Ready");
    assert_eq!(
        st["conditions"][0]["observedGeneration"], 2,
        "the object's generation"
    );
    assert_eq!(st["planStatus"]["deploy"]["status"], "COMPLETE");
    let patch = status_patch(&obj, Some(&inst), &InstanceAction::Nothing, now()).unwrap();
    assert_eq!(patch["status"]["stale"], Value::Null);
    assert_eq!(patch["status"]["plan"], "update");
    let mut mirrored = obj.clone();
    mirrored["status"] = st;
    assert_eq!(
        status_patch(&mirrored, Some(&inst), &InstanceAction::Nothing, now()),
        None
    );
}

#[test]
fn typed_conditions_one_case_per_branch() {
    let obj = |conditions: Value| json!({"metadata": {"name": "db", "generation": 5}, "status": {"conditions": conditions}});
    let ready_before = json!([{"type": "Ready", "status": "True", "observedGeneration": 4,
        "lastTransitionTime": "2026-11-27T09:00:00Z", "reason": "ResourcesReady", "message": ""}]);
    let done = acted(9, Some(9), vec![cond("Ready", "True", "ResourcesReady", Some(9))]);
    let judged_before = acted(
        9,
        Some(9),
        vec![
            cond("Ready", "True", "ResourcesReady", Some(8)),
            cond("Reconciling", "True", "backup", Some(9)),
        ],
    );
    let unobserved = acted(9, Some(7), vec![cond("Ready", "True", "ResourcesReady", Some(7))]);
    let summary = |cs: &[Condition]| -> Vec<(String, String, String, Option<i64>)> {
        cs.iter()
            .map(|c| {
                (
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone(),
                    c.observed_generation,
                )
            })
            .collect()
    };
    let t = |ty: &str, st: &str, r: &str, g: i64| (ty.to_string(), st.to_string(), r.to_string(), Some(g));
    let cases: Vec<(&str, Value, Option<&Instance>, InstanceAction, Vec<_>)> = vec![
        (
            "no Instance yet: Reconciling",
            obj(json!([])),
            None,
            InstanceAction::Create(json!({})),
            vec![t("Reconciling", "True", INSTANCE_PENDING, 5)],
        ),
        (
            "its parameters were just patched: Reconciling, the previous Ready kept",
            obj(ready_before.clone()),
            Some(&done),
            InstanceAction::Patch(json!({})),
            vec![
                t("Ready", "True", "ResourcesReady", 4),
                t("Reconciling", "True", INSTANCE_PENDING, 5),
            ],
        ),
        (
            "the manager has not admitted the Instance's change yet",
            obj(ready_before.clone()),
            Some(&unobserved),
            InstanceAction::Nothing,
            vec![
                t("Ready", "True", "ResourcesReady", 4),
                t("Reconciling", "True", INSTANCE_PENDING, 5),
            ],
        ),
        (
            "an Instance of someone else: Stalled",
            obj(json!([])),
            Some(&done),
            InstanceAction::Conflict("Instance db exists".into()),
            vec![t("Stalled", "True", INSTANCE_CONFLICT, 5)],
        ),
        (
            "in step: the Instance's conditions at the object's generation",
            obj(ready_before.clone()),
            Some(&done),
            InstanceAction::Nothing,
            vec![t("Ready", "True", "ResourcesReady", 5)],
        ),
        (
            "a condition the Instance judged earlier stays earlier",
            obj(ready_before),
            Some(&judged_before),
            InstanceAction::Nothing,
            vec![
                t("Ready", "True", "ResourcesReady", 4),
                t("Reconciling", "True", "backup", 5),
            ],
        ),
        (
            "…and without an earlier one on the object, one generation back",
            obj(json!([])),
            Some(&judged_before),
            InstanceAction::Nothing,
            vec![
                t("Ready", "True", "ResourcesReady", 4),
                t("Reconciling", "True", "backup", 5),
            ],
        ),
    ];
    for (name, o, inst, action, want) in cases {
        assert_eq!(
            summary(&typed_conditions(&o, inst, &action, now())),
            want,
            "{name}"
        );
    }
}
