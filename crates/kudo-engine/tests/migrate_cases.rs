//! `kubectl kudo migrate`'s decisions, table-tested on objects as KUDO v0.19 leaves them.

use std::collections::BTreeMap;

use kudo_engine::migrate::{
    KUDO_FIELD_MANAGER, LAST_APPLIED_ANNOTATION, Record, Step, applied_by, drop_last_applied_patch,
    instance_patch, is_kudo_webhook, kudo_owns_fields, object_key, ownership_patch, restorable, run_by_kudo,
};
use kudo_engine::reconcile::ADMITTED_SPEC_ANNOTATION;
use serde_json::{Value, json};

fn deployment(managers: &[(&str, &str)]) -> Value {
    let entries: Vec<Value> = managers
        .iter()
        .map(|(m, op)| {
            json!({"manager": m, "operation": op, "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                   "fieldsV1": {"f:spec": {"f:replicas": {}}}})
        })
        .collect();
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "7", "uid": "d1",
            "labels": {"heritage": "kudo", "kudo.dev/instance": "inst"},
            "annotations": {LAST_APPLIED_ANNOTATION: "{}"},
            "ownerReferences": [{"kind": "Instance", "name": "inst", "uid": "i1"}],
            "managedFields": entries},
        "spec": {"replicas": 2}
    })
}

#[test]
fn record_round_trips_and_resumes_after_the_last_step_done() {
    let mut r = Record {
        replicas: Some(1),
        webhooks: vec![json!({"kind": "MutatingWebhookConfiguration"})],
        secret: Some(json!({"kind": "Secret"})),
        ..Record::default()
    };
    r.last_applied
        .insert(object_key("Deployment", Some("ns"), "web"), "{}".into());
    r.finish(Step::Save);
    r.finish(Step::StopKudo);
    r.finish(Step::StopKudo);
    let back = Record::from_data(&r.to_data()).unwrap();
    assert_eq!(back, r);
    assert_eq!(back.remaining()[0], Step::RemoveWebhook);
    assert_eq!(back.remaining().len(), Step::ALL.len() - 2);
    assert_eq!(
        Record::from_data(&BTreeMap::new()).unwrap().remaining(),
        Step::ALL.to_vec()
    );
    let bad = BTreeMap::from([("done".to_string(), "save,teleport".to_string())]);
    assert!(Record::from_data(&bad).unwrap_err().contains("teleport"));
}

#[test]
fn kudo_webhook_is_found_by_the_service_it_calls() {
    let hook = |svc: &str, ns: &str| json!({"webhooks": [{"name": "x", "clientConfig": {"service": {"name": svc, "namespace": ns}}}]});
    let cases = [
        (
            hook("kudo-controller-manager-service", "kudo-system"),
            "kudo-system",
            true,
        ),
        (
            hook("kudo-controller-manager-service", "other"),
            "kudo-system",
            false,
        ),
        (hook("cert-manager-webhook", "kudo-system"), "kudo-system", false),
        (
            json!({"webhooks": [{"clientConfig": {"url": "https://x"}}]}),
            "kudo-system",
            false,
        ),
        (json!({}), "kudo-system", false),
    ];
    for (config, ns, want) in cases {
        assert_eq!(is_kudo_webhook(&config, ns), want, "{config}");
    }
}

#[test]
fn objects_of_the_instance_are_those_with_its_labels_and_owner() {
    let d = deployment(&[]);
    let mut other_owner = d.clone();
    other_owner["metadata"]["ownerReferences"][0]["uid"] = json!("i2");
    let mut pod = d.clone();
    pod["kind"] = json!("Pod");
    let mut unlabelled = d.clone();
    unlabelled["metadata"]["labels"] = json!({});
    let mut cluster = d.clone();
    cluster["metadata"]["ownerReferences"] = json!([]);
    let cases = [
        (&d, true, true),
        (&other_owner, true, false),
        (&pod, true, false),
        (&unlabelled, true, false),
        (&cluster, false, true),
        (&cluster, true, false),
    ];
    for (obj, namespaced, want) in cases {
        assert_eq!(
            applied_by(obj, "inst", "i1", namespaced),
            want,
            "{obj} namespaced={namespaced}"
        );
    }
}

#[test]
fn an_instance_kudo_ran_keeps_its_run_and_gets_its_spec_admitted() {
    let running = json!({
        "metadata": {"name": "inst", "annotations": {},
            "managedFields": [{"manager": "kubectl-kudo", "operation": "Update"},
                {"manager": KUDO_FIELD_MANAGER, "operation": "Update", "subresource": "status"}]},
        "spec": {"operatorVersion": {"name": "op-0.1.0"}, "parameters": {"A": "1"},
                 "planExecution": {"planName": "deploy", "uid": "u1", "status": "IN_PROGRESS"}},
        "status": {"planStatus": {"deploy": {"name": "deploy", "status": "IN_PROGRESS", "uid": "u1"}}}
    });
    let p = instance_patch(&running).unwrap();
    let admitted: Value = serde_json::from_str(
        p["metadata"]["annotations"][ADMITTED_SPEC_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        admitted["planExecution"]["uid"], "u1",
        "the run's uid is kept: no new run"
    );
    assert!(
        p.get("status").is_none() && p.get("spec").is_none(),
        "status and spec untouched: {p}"
    );

    let mut ended = running.clone();
    ended["spec"]["planExecution"]["status"] = json!("COMPLETE");
    let p = instance_patch(&ended).unwrap();
    assert_eq!(
        p["spec"]["planExecution"]["uid"],
        Value::Null,
        "a finished run is unscheduled"
    );
    let admitted: Value = serde_json::from_str(
        p["metadata"]["annotations"][ADMITTED_SPEC_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(admitted.get("planExecution"), Some(&json!({})));

    let mut converted = running.clone();
    converted["metadata"]["annotations"][ADMITTED_SPEC_ANNOTATION] = json!("{}");
    assert_eq!(
        instance_patch(&converted),
        None,
        "a second run of the step changes nothing"
    );
}

#[test]
fn an_instance_kudos_manager_never_wrote_is_left_for_kudo_rs_to_start() {
    let created = |managers: &[(&str, Option<&str>)]| {
        let entries: Vec<Value> = managers
            .iter()
            .map(|(m, sub)| json!({"manager": m, "operation": "Update", "subresource": sub}))
            .collect();
        json!({"metadata": {"name": "inst", "managedFields": entries},
            "spec": {"operatorVersion": {"name": "op-0.1.0"},
                     "planExecution": {"planName": "deploy", "uid": "u1"}}})
    };
    let cases = [
        (created(&[]), false),
        (created(&[("kubectl-kudo", None)]), false),
        (created(&[("kudo", None), ("kubectl", None)]), false),
        (
            created(&[("kubectl-kudo", None), (KUDO_FIELD_MANAGER, Some("status"))]),
            true,
        ),
        (created(&[(KUDO_FIELD_MANAGER, None)]), true),
    ];
    for (inst, kudo_ran) in cases {
        assert_eq!(run_by_kudo(&inst), kudo_ran, "{inst}");
        assert_eq!(instance_patch(&inst).is_some(), kudo_ran, "{inst}");
    }
}

#[test]
fn ownership_moves_from_kudos_manager_only_and_once() {
    let by_kudo = deployment(&[
        (KUDO_FIELD_MANAGER, "Update"),
        ("kube-controller-manager", "Update"),
    ]);
    assert!(kudo_owns_fields(&by_kudo));
    let patch = ownership_patch(&by_kudo).unwrap();
    assert_eq!(
        patch[0],
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": "7"})
    );
    let entries = patch[1]["value"].as_array().unwrap();
    let names: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e["manager"].as_str().unwrap(), e["operation"].as_str().unwrap()))
        .collect();
    assert!(names.contains(&("kudo", "Apply")), "{names:?}");
    assert!(
        names.contains(&("kube-controller-manager", "Update")),
        "{names:?}"
    );
    assert!(!names.iter().any(|(m, _)| *m == KUDO_FIELD_MANAGER), "{names:?}");

    let mut moved = by_kudo.clone();
    moved["metadata"]["managedFields"] = patch[1]["value"].clone();
    assert!(!kudo_owns_fields(&moved));
    assert_eq!(ownership_patch(&moved), None, "rerun: nothing left to move");
    assert_eq!(
        ownership_patch(&deployment(&[("kubectl-client-side-apply", "Update")])),
        None
    );
}

#[test]
fn last_applied_is_removed_guarded_and_objects_restore_without_server_fields() {
    let d = deployment(&[]);
    let p = drop_last_applied_patch(&d).unwrap();
    assert_eq!(
        p[1]["path"],
        "/metadata/annotations/kudo.dev~1last-applied-configuration"
    );
    assert_eq!(p[0]["value"], "7");
    let mut gone = d.clone();
    gone["metadata"]["annotations"] = json!({});
    assert_eq!(drop_last_applied_patch(&gone), None);
    let r = restorable(&d);
    assert!(r["metadata"].get("uid").is_none() && r["metadata"].get("resourceVersion").is_none());
    assert_eq!(r["metadata"]["name"], "web");
}
