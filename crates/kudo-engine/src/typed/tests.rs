use super::*;
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

#[test]
fn the_status_mirrors_the_latest_plan_and_the_conditions() {
    let mut inst = instance(&[], Some("u-1"));
    let ps = |name: &str, status, at: &str| PlanStatus {
        name: name.into(),
        status,
        last_updated_timestamp: Some(at.into()),
        ..Default::default()
    };
    inst.status = Some(InstanceStatus {
        plan_status: [
            (
                "deploy".to_string(),
                ps("deploy", ExecutionStatus::Complete, "2026-11-27T10:00:00Z"),
            ),
            (
                "update".to_string(),
                ps("update", ExecutionStatus::InProgress, "2026-11-27T11:00:00Z"),
            ),
        ]
        .into(),
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: "False".into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    let st = status_of(&inst);
    assert_eq!(
        (st["plan"].as_str(), st["status"].as_str()),
        (Some("update"), Some("IN_PROGRESS"))
    );
    assert_eq!(st["conditions"][0]["type"], "Ready");
    assert_eq!(st["planStatus"]["deploy"]["status"], "COMPLETE");
    let obj = json!({"status": {"instance": "db", "stale": 1}});
    let patch = status_patch(&obj, &inst).unwrap();
    assert_eq!(patch["status"]["stale"], Value::Null);
    assert_eq!(patch["status"]["plan"], "update");
    let mirrored = json!({"status": st});
    assert_eq!(status_patch(&mirrored, &inst), None);
}
