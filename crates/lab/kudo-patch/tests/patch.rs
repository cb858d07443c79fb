//! Behavioural tests of the four patch flavours.
//!
//! Expected values come from the RFC appendices (RFC 6902 Appendix A, RFC 7386 Appendix A
//! and §3), from the Kubernetes documentation of `kubectl patch` / strategic merge patch and
//! of server-side apply, and from the managedFields shapes kube-apiserver is documented to
//! write — never from this crate's own output.

use kudo_patch::{Gvk, PatchError, SsaError, json_patch, merge, ssa, strategic};
use serde_json::{Value, json};

// ----------------------------------------------------------------------------------------
// RFC 6902 Appendix A
// ----------------------------------------------------------------------------------------

fn jp(doc: Value, patch: Value) -> Result<Value, PatchError> {
    json_patch::apply(&doc, &patch)
}

#[test]
fn rfc6902_a1_add_object_member() {
    assert_eq!(
        jp(
            json!({"foo": "bar"}),
            json!([{"op": "add", "path": "/baz", "value": "qux"}])
        )
        .unwrap(),
        json!({"baz": "qux", "foo": "bar"})
    );
}

#[test]
fn rfc6902_a2_add_array_element() {
    assert_eq!(
        jp(
            json!({"foo": ["bar", "baz"]}),
            json!([{"op": "add", "path": "/foo/1", "value": "qux"}])
        )
        .unwrap(),
        json!({"foo": ["bar", "qux", "baz"]})
    );
}

#[test]
fn rfc6902_a3_remove_object_member() {
    assert_eq!(
        jp(
            json!({"baz": "qux", "foo": "bar"}),
            json!([{"op": "remove", "path": "/baz"}])
        )
        .unwrap(),
        json!({"foo": "bar"})
    );
}

#[test]
fn rfc6902_a4_remove_array_element() {
    assert_eq!(
        jp(
            json!({"foo": ["bar", "qux", "baz"]}),
            json!([{"op": "remove", "path": "/foo/1"}])
        )
        .unwrap(),
        json!({"foo": ["bar", "baz"]})
    );
}

#[test]
fn rfc6902_a5_replace_value() {
    assert_eq!(
        jp(
            json!({"baz": "qux", "foo": "bar"}),
            json!([{"op": "replace", "path": "/baz", "value": "boo"}])
        )
        .unwrap(),
        json!({"baz": "boo", "foo": "bar"})
    );
}

#[test]
fn rfc6902_a6_move_value() {
    assert_eq!(
        jp(
            json!({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}}),
            json!([{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}])
        )
        .unwrap(),
        json!({"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}})
    );
}

#[test]
fn rfc6902_a7_move_array_element() {
    assert_eq!(
        jp(
            json!({"foo": ["all", "grass", "cows", "eat"]}),
            json!([{"op": "move", "from": "/foo/1", "path": "/foo/3"}])
        )
        .unwrap(),
        json!({"foo": ["all", "cows", "eat", "grass"]})
    );
}

#[test]
fn rfc6902_a8_test_success() {
    let doc = json!({"baz": "qux", "foo": ["a", 2, "c"]});
    assert_eq!(
        jp(
            doc.clone(),
            json!([
                {"op": "test", "path": "/baz", "value": "qux"},
                {"op": "test", "path": "/foo/1", "value": 2}
            ])
        )
        .unwrap(),
        doc
    );
}

#[test]
fn rfc6902_a9_test_error() {
    let err = jp(
        json!({"baz": "qux"}),
        json!([{"op": "test", "path": "/baz", "value": "bar"}]),
    )
    .unwrap_err();
    assert_eq!(err.status_code(), 422);
}

#[test]
fn rfc6902_a10_add_nested_member_object() {
    assert_eq!(
        jp(
            json!({"foo": "bar"}),
            json!([{"op": "add", "path": "/child", "value": {"grandchild": {}}}])
        )
        .unwrap(),
        json!({"foo": "bar", "child": {"grandchild": {}}})
    );
}

#[test]
fn rfc6902_a11_ignore_unrecognized_elements() {
    assert_eq!(
        jp(
            json!({"foo": "bar"}),
            json!([{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}])
        )
        .unwrap(),
        json!({"foo": "bar", "baz": "qux"})
    );
}

#[test]
fn rfc6902_a12_add_to_nonexistent_target() {
    let err = jp(
        json!({"foo": "bar"}),
        json!([{"op": "add", "path": "/baz/bat", "value": "qux"}]),
    )
    .unwrap_err();
    assert_eq!(err.status_code(), 422);
}

#[test]
fn rfc6902_a14_escape_ordering() {
    let doc = json!({"/": 9, "~1": 10});
    assert_eq!(
        jp(doc.clone(), json!([{"op": "test", "path": "/~01", "value": 10}])).unwrap(),
        doc
    );
}

#[test]
fn rfc6902_a15_strings_and_numbers_differ() {
    assert!(
        jp(
            json!({"/": 9, "~1": 10}),
            json!([{"op": "test", "path": "/~01", "value": "10"}])
        )
        .is_err()
    );
}

#[test]
fn rfc6902_a16_add_array_value() {
    assert_eq!(
        jp(
            json!({"foo": ["bar"]}),
            json!([{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}])
        )
        .unwrap(),
        json!({"foo": ["bar", ["abc", "def"]]})
    );
}

#[test]
fn escaped_slash_in_annotation_key() {
    let out = jp(
        json!({"metadata": {"annotations": {}}}),
        json!([{"op": "add", "path": "/metadata/annotations/kudo.dev~1plan", "value": "deploy"}]),
    )
    .unwrap();
    assert_eq!(
        out,
        json!({"metadata": {"annotations": {"kudo.dev/plan": "deploy"}}})
    );
}

#[test]
fn kube_runtime_finalizer_patch_on_object_without_finalizers() {
    // kube-runtime's finalizer(): test that /metadata/finalizers is null, then add it.
    let doc = json!({"apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
        "metadata": {"name": "i", "namespace": "default"}});
    let patch = json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["kudo.dev/cleanup"]}
    ]);
    let out = json_patch::apply(&doc, &patch).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["kudo.dev/cleanup"]));

    // And the removal it sends later: test the exact list, then remove by index.
    let patch = json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": "kudo.dev/cleanup"},
        {"op": "remove", "path": "/metadata/finalizers/0"}
    ]);
    let out = json_patch::apply(&out, &patch).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!([]));
}

// ----------------------------------------------------------------------------------------
// RFC 7386
// ----------------------------------------------------------------------------------------

#[test]
fn rfc7386_section3_example() {
    let target = json!({
        "title": "Goodbye!",
        "author": {"givenName": "John", "familyName": "Doe"},
        "tags": ["example", "sample"],
        "content": "This will be unchanged"
    });
    let patch = json!({
        "title": "Hello!",
        "phoneNumber": "+01-123-456-7890",
        "author": {"familyName": null},
        "tags": ["example"]
    });
    assert_eq!(
        merge::apply(&target, &patch),
        json!({
            "title": "Hello!",
            "author": {"givenName": "John"},
            "tags": ["example"],
            "content": "This will be unchanged",
            "phoneNumber": "+01-123-456-7890"
        })
    );
}

#[test]
fn rfc7386_appendix_a() {
    let cases = [
        (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
        (json!({"a": "b"}), json!({"a": null}), json!({})),
        (json!({"a": "b", "b": "c"}), json!({"a": null}), json!({"b": "c"})),
        (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
        (
            json!({"a": {"b": "c"}}),
            json!({"a": {"b": "d", "c": null}}),
            json!({"a": {"b": "d"}}),
        ),
        (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
        (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
        (json!({"a": "b"}), json!(["c"]), json!(["c"])),
        (json!({"a": "foo"}), json!(null), json!(null)),
        (json!({"a": "foo"}), json!("bar"), json!("bar")),
        (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
        (json!([1, 2]), json!({"a": "b", "c": null}), json!({"a": "b"})),
        (
            json!({}),
            json!({"a": {"bb": {"ccc": null}}}),
            json!({"a": {"bb": {}}}),
        ),
    ];
    for (target, patch, expected) in cases {
        assert_eq!(merge::apply(&target, &patch), expected, "patch {patch}");
    }
}

// ----------------------------------------------------------------------------------------
// Strategic merge patch (kubernetes.io "Update API Objects in Place Using kubectl patch")
// ----------------------------------------------------------------------------------------

fn deployment_gvk() -> Gvk {
    Gvk::new("apps", "v1", "Deployment")
}

fn patch_demo() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "patch-demo"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "nginx"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {
                    "containers": [{"name": "patch-demo-ctr", "image": "nginx",
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        "ports": [{"containerPort": 80}]}],
                    "tolerations": [{"effect": "NoSchedule", "key": "dedicated", "value": "test-team"}]
                }
            }
        }
    })
}

fn containers(v: &Value) -> &Value {
    &v["spec"]["template"]["spec"]["containers"]
}

#[test]
fn smp_adding_a_container_keeps_the_existing_one_and_puts_patch_items_first() {
    // The docs' example: the patched Deployment lists patch-demo-ctr-2 (redis) and then
    // the original patch-demo-ctr.
    let out = strategic::apply(
        &patch_demo(),
        &json!({"spec": {"template": {"spec": {"containers": [
            {"name": "patch-demo-ctr-2", "image": "redis"}]}}}}),
        &deployment_gvk(),
    )
    .unwrap();
    let names: Vec<&str> = containers(&out)
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["patch-demo-ctr-2", "patch-demo-ctr"]);
    assert_eq!(containers(&out)[1]["image"], "nginx");
}

#[test]
fn smp_tolerations_are_replaced_not_merged() {
    let out = strategic::apply(
        &patch_demo(),
        &json!({"spec": {"template": {"spec": {"tolerations": [
            {"effect": "NoSchedule", "key": "disktype", "value": "ssd"}]}}}}),
        &deployment_gvk(),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["tolerations"],
        json!([{"effect": "NoSchedule", "key": "disktype", "value": "ssd"}])
    );
}

#[test]
fn smp_image_change_keeps_other_fields_and_containers() {
    let mut doc = patch_demo();
    doc["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "sidecar", "image": "busybox"}));
    let out = strategic::apply(
        &doc,
        &json!({"spec": {"template": {"spec": {"containers": [
            {"name": "patch-demo-ctr", "image": "nginx:1.27"}]}}}}),
        &deployment_gvk(),
    )
    .unwrap();
    let c = containers(&out).as_array().unwrap();
    assert_eq!(c.len(), 2);
    let main = c.iter().find(|c| c["name"] == "patch-demo-ctr").unwrap();
    assert_eq!(main["image"], "nginx:1.27");
    assert_eq!(
        main["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    assert!(
        c.iter()
            .any(|c| c["name"] == "sidecar" && c["image"] == "busybox")
    );
}

#[test]
fn smp_env_merges_by_name() {
    let out = strategic::apply(
        &patch_demo(),
        &json!({"spec": {"template": {"spec": {"containers": [
            {"name": "patch-demo-ctr", "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}]}]}}}}),
        &deployment_gvk(),
    )
    .unwrap();
    let env = containers(&out)[0]["env"].as_array().unwrap().clone();
    assert_eq!(env.len(), 3);
    assert!(env.contains(&json!({"name": "A", "value": "1"})));
    assert!(env.contains(&json!({"name": "B", "value": "20"})));
    assert!(env.contains(&json!({"name": "C", "value": "3"})));
}

#[test]
fn smp_delete_directive_removes_a_container() {
    let mut doc = patch_demo();
    doc["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "sidecar", "image": "busybox"}));
    let out = strategic::apply(
        &doc,
        &json!({"spec": {"template": {"spec": {"containers": [
            {"name": "sidecar", "$patch": "delete"}]}}}}),
        &deployment_gvk(),
    )
    .unwrap();
    let c = containers(&out).as_array().unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0]["name"], "patch-demo-ctr");
}

#[test]
fn smp_set_element_order_reorders_the_merged_list() {
    let mut doc = patch_demo();
    let list = doc["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap();
    list.push(json!({"name": "b", "image": "b"}));
    list.push(json!({"name": "c", "image": "c"}));
    let out = strategic::apply(
        &doc,
        &json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "patch-demo-ctr"}, {"name": "b"}],
            "containers": [{"name": "b", "image": "b2"}]
        }}}}),
        &deployment_gvk(),
    )
    .unwrap();
    let c = containers(&out).as_array().unwrap();
    let names: Vec<&str> = c.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["c", "patch-demo-ctr", "b"]);
    assert_eq!(c[2]["image"], "b2");
    assert_eq!(c[1]["image"], "nginx");
}

#[test]
fn smp_retain_keys_clears_unlisted_strategy_fields() {
    // The docs' retainKeys example: switching the strategy to Recreate drops rollingUpdate.
    let out = strategic::apply(
        &patch_demo(),
        &json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
        &deployment_gvk(),
    )
    .unwrap();
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
}

#[test]
fn smp_retain_keys_must_cover_the_patch() {
    let err = strategic::apply(
        &patch_demo(),
        &json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate",
            "rollingUpdate": {"maxSurge": 2}}}}),
        &deployment_gvk(),
    )
    .unwrap_err();
    assert_eq!(err.status_code(), 422);
    assert_eq!(err.to_string(), "patch content doesn't match retainKeys list");
}

#[test]
fn smp_ports_merge_by_container_port() {
    let out = strategic::apply(
        &patch_demo(),
        &json!({"spec": {"template": {"spec": {"containers": [
            {"name": "patch-demo-ctr", "ports": [{"containerPort": 443}, {"containerPort": 80, "name": "http"}]}]}}}}),
        &deployment_gvk(),
    )
    .unwrap();
    assert_eq!(
        containers(&out)[0]["ports"],
        json!([{"containerPort": 443}, {"containerPort": 80, "name": "http"}])
    );
}

#[test]
fn smp_service_ports_merge_by_port_and_null_deletes_keys() {
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s",
        "labels": {"a": "1", "b": "2"}},
        "spec": {"ports": [{"port": 80, "targetPort": 8080}], "selector": {"app": "x"}}});
    let out = strategic::apply(
        &svc,
        &json!({"metadata": {"labels": {"a": null}},
            "spec": {"ports": [{"port": 80, "targetPort": 9090}, {"port": 443}]}}),
        &Gvk::new("", "v1", "Service"),
    )
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
    assert_eq!(
        out["spec"]["ports"],
        json!([{"port": 80, "targetPort": 9090}, {"port": 443}])
    );
}

#[test]
fn smp_finalizers_union_and_delete_from_primitive_list() {
    let doc = json!({"metadata": {"name": "x", "finalizers": ["a", "b"]}});
    let gvk = Gvk::new("", "v1", "ConfigMap");
    let out = strategic::apply(&doc, &json!({"metadata": {"finalizers": ["b", "c"]}}), &gvk).unwrap();
    let f = out["metadata"]["finalizers"].as_array().unwrap();
    assert_eq!(f.len(), 3);
    for v in ["a", "b", "c"] {
        assert!(f.contains(&json!(v)));
    }
    let out = strategic::apply(
        &out,
        &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "c"]}}),
        &gvk,
    )
    .unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
}

#[test]
fn smp_owner_references_merge_by_uid() {
    let doc = json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a", "kind": "K", "apiVersion": "v1"}]}});
    let out = strategic::apply(
        &doc,
        &json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "b", "kind": "K", "apiVersion": "v1"}]}}),
        &Gvk::new("", "v1", "ConfigMap"),
    )
    .unwrap();
    assert_eq!(out["metadata"]["ownerReferences"].as_array().unwrap().len(), 2);
}

// ----------------------------------------------------------------------------------------
// Server-side apply
// ----------------------------------------------------------------------------------------

const T0: &str = "2026-11-21T10:00:00Z";
const T1: &str = "2026-11-21T10:05:00Z";
const T2: &str = "2026-11-21T10:10:00Z";

fn cm_gvk() -> Gvk {
    Gvk::new("", "v1", "ConfigMap")
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "demo", "namespace": "default", "labels": {"test-label": "test"}},
        "data": data})
}

fn entry<'a>(obj: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
}

#[test]
fn ssa_create_writes_the_documented_managed_fields() {
    // The shape in the server-side apply documentation for a ConfigMap applied by kubectl.
    let out = ssa::apply(
        None,
        &cm(json!({"key": "some value"})),
        "kubectl",
        false,
        &cm_gvk(),
        T0,
    )
    .unwrap();
    assert_eq!(out["data"], json!({"key": "some value"}));
    assert_eq!(out["metadata"]["name"], "demo");
    assert_eq!(out["metadata"]["namespace"], "default");
    assert_eq!(out["metadata"]["labels"], json!({"test-label": "test"}));
    assert_eq!(
        out["metadata"]["managedFields"],
        json!([{
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:data": {"f:key": {}},
                "f:metadata": {"f:labels": {"f:test-label": {}}}
            }
        }])
    );
}

#[test]
fn ssa_reapplying_the_same_configuration_changes_nothing() {
    let applied = cm(json!({"key": "v"}));
    let live = ssa::apply(None, &applied, "kubectl", false, &cm_gvk(), T0).unwrap();
    let again = ssa::apply(Some(&live), &applied, "kubectl", false, &cm_gvk(), T1).unwrap();
    assert_eq!(again, live);
}

#[test]
fn ssa_field_omitted_by_its_only_applier_is_removed() {
    let live = ssa::apply(
        None,
        &cm(json!({"a": "1", "b": "2"})),
        "kudo",
        false,
        &cm_gvk(),
        T0,
    )
    .unwrap();
    let out = ssa::apply(Some(&live), &cm(json!({"a": "1"})), "kudo", false, &cm_gvk(), T1).unwrap();
    assert_eq!(out["data"], json!({"a": "1"}));
    assert_eq!(
        entry(&out, "kudo", "Apply").unwrap()["fieldsV1"]["f:data"],
        json!({"f:a": {}})
    );
    assert_eq!(entry(&out, "kudo", "Apply").unwrap()["time"], T1);
}

#[test]
fn ssa_two_managers_on_different_fields_are_both_kept() {
    let live = ssa::apply(None, &cm(json!({"a": "1"})), "alice", false, &cm_gvk(), T0).unwrap();
    let bob = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "demo", "namespace": "default"}, "data": {"b": "2"}});
    let out = ssa::apply(Some(&live), &bob, "bob", false, &cm_gvk(), T1).unwrap();
    assert_eq!(out["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(out["metadata"]["labels"], json!({"test-label": "test"}));
    assert_eq!(
        entry(&out, "alice", "Apply").unwrap()["fieldsV1"],
        json!({"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:test-label": {}}}})
    );
    assert_eq!(
        entry(&out, "bob", "Apply").unwrap()["fieldsV1"],
        json!({"f:data": {"f:b": {}}})
    );
    // bob omitting b later removes only b.
    let bob2 = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "demo", "namespace": "default"}, "data": {"c": "3"}});
    let out = ssa::apply(Some(&out), &bob2, "bob", false, &cm_gvk(), T2).unwrap();
    assert_eq!(out["data"], json!({"a": "1", "c": "3"}));
}

#[test]
fn ssa_conflict_names_the_field_and_the_owner() {
    let live = ssa::apply(None, &cm(json!({"key": "1"})), "alice", false, &cm_gvk(), T0).unwrap();
    let err = ssa::apply(Some(&live), &cm(json!({"key": "2"})), "bob", false, &cm_gvk(), T1).unwrap_err();
    let SsaError::Conflict { causes } = &err else {
        panic!("expected a conflict, got {err:?}");
    };
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].path, ".data.key");
    assert_eq!(causes[0].manager, "alice");
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"alice\": .data.key"
    );
    let status = err.to_status();
    assert_eq!(status["code"], 409);
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"alice\"", "field": ".data.key"}])
    );
}

#[test]
fn ssa_same_value_is_shared_not_conflicting() {
    let live = ssa::apply(None, &cm(json!({"key": "1"})), "alice", false, &cm_gvk(), T0).unwrap();
    let out = ssa::apply(Some(&live), &cm(json!({"key": "1"})), "bob", false, &cm_gvk(), T1).unwrap();
    assert!(entry(&out, "alice", "Apply").is_some());
    assert_eq!(
        entry(&out, "bob", "Apply").unwrap()["fieldsV1"]["f:data"],
        json!({"f:key": {}})
    );
    // A field still owned by alice survives bob dropping it.
    let bob2 = cm(json!({}));
    let out = ssa::apply(Some(&out), &bob2, "bob", false, &cm_gvk(), T2).unwrap();
    assert_eq!(out["data"], json!({"key": "1"}));
}

#[test]
fn ssa_force_takes_ownership() {
    let live = ssa::apply(
        None,
        &cm(json!({"key": "1", "other": "x"})),
        "alice",
        false,
        &cm_gvk(),
        T0,
    )
    .unwrap();
    let out = ssa::apply(Some(&live), &cm(json!({"key": "2"})), "bob", true, &cm_gvk(), T1).unwrap();
    assert_eq!(out["data"], json!({"key": "2", "other": "x"}));
    assert_eq!(
        entry(&out, "alice", "Apply").unwrap()["fieldsV1"]["f:data"],
        json!({"f:other": {}})
    );
    assert_eq!(
        entry(&out, "bob", "Apply").unwrap()["fieldsV1"]["f:data"],
        json!({"f:key": {}})
    );
    // Managers are listed Apply first, then by time.
    let managers: Vec<&str> = out["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(managers, ["alice", "bob"]);
}

#[test]
fn ssa_update_by_another_manager_then_apply_conflicts() {
    let live = ssa::apply(None, &cm(json!({"key": "1"})), "kudo", false, &cm_gvk(), T0).unwrap();
    // kubectl edit: a PUT/PATCH changing data.key.
    let mut edited = live.clone();
    edited["data"]["key"] = json!("edited");
    let after_edit = ssa::record_update(
        Some(&live),
        &edited,
        "kubectl-edit",
        "Update",
        None,
        &cm_gvk(),
        T1,
    );
    assert_eq!(
        entry(&after_edit, "kubectl-edit", "Update").unwrap(),
        &json!({"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1", "time": T1,
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:key": {}}}})
    );
    // The applier lost the field to the editor.
    assert_eq!(
        entry(&after_edit, "kudo", "Apply").unwrap()["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:test-label": {}}}})
    );
    let err = ssa::apply(
        Some(&after_edit),
        &cm(json!({"key": "1"})),
        "kudo",
        false,
        &cm_gvk(),
        T2,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1 at {T1}: .data.key")
    );
    // Forcing (what a controller does) wins the field back.
    let out = ssa::apply(
        Some(&after_edit),
        &cm(json!({"key": "1"})),
        "kudo",
        true,
        &cm_gvk(),
        T2,
    )
    .unwrap();
    assert_eq!(out["data"]["key"], "1");
    assert!(entry(&out, "kubectl-edit", "Update").is_none());
}

#[test]
fn ssa_record_update_on_create_marks_new_maps() {
    // kubectl create configmap: an Update entry whose new maps carry the "." marker.
    let obj = cm(json!({"key1": "config1"}));
    let out = ssa::record_update(None, &obj, "kubectl-create", "Update", None, &cm_gvk(), T0);
    assert_eq!(
        out["metadata"]["managedFields"],
        json!([{
            "manager": "kubectl-create", "operation": "Update", "apiVersion": "v1", "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:data": {".": {}, "f:key1": {}},
                "f:metadata": {"f:labels": {".": {}, "f:test-label": {}}}
            }
        }])
    );
}

#[test]
fn ssa_record_update_without_changes_keeps_managed_fields() {
    let live = ssa::apply(None, &cm(json!({"key": "1"})), "kudo", false, &cm_gvk(), T0).unwrap();
    let out = ssa::record_update(Some(&live), &live, "other", "Update", None, &cm_gvk(), T1);
    assert_eq!(out, live);
}

fn deployment(containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment", "labels": {"app": "nginx"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": containers}
            }
        }
    })
}

#[test]
fn ssa_deployment_managed_fields_shape() {
    // The FieldsV1 shape kube-apiserver writes for `kubectl apply --server-side` of the
    // canonical nginx Deployment: list items keyed with ".", the atomic selector as a leaf,
    // and the port key including the defaulted protocol.
    let out = ssa::apply(
        None,
        &deployment(json!([{"name": "nginx", "image": "nginx:1.14.2", "ports": [{"containerPort": 80}]}])),
        "kubectl",
        false,
        &deployment_gvk(),
        T0,
    )
    .unwrap();
    let fields = &entry(&out, "kubectl", "Apply").unwrap()["fieldsV1"];
    assert_eq!(
        fields,
        &json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                        ".": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                            ".": {},
                            "f:containerPort": {}
                        }}
                    }}}
                }
            }
        })
    );
    // The exact serialization order matters to clients diffing managedFields.
    let text = serde_json::to_string(fields).unwrap();
    assert!(text.starts_with("{\"f:metadata\":"));
    assert!(text.contains("{\".\":{},\"f:image\":{},\"f:name\":{},\"f:ports\""));
}

#[test]
fn ssa_containers_merge_by_name_across_managers() {
    let live = ssa::apply(
        None,
        &deployment(json!([{"name": "app", "image": "app:1"}])),
        "kudo",
        false,
        &deployment_gvk(),
        T0,
    )
    .unwrap();
    let sidecar = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment"},
        "spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "envoy"}]}}}});
    let out = ssa::apply(Some(&live), &sidecar, "injector", false, &deployment_gvk(), T1).unwrap();
    let c = containers(&out).as_array().unwrap();
    assert_eq!(c.len(), 2);
    assert!(c.iter().any(|c| c["name"] == "app" && c["image"] == "app:1"));
    assert!(c.iter().any(|c| c["name"] == "sidecar" && c["image"] == "envoy"));
    assert_eq!(out["spec"]["replicas"], 3);
    // The first manager re-applying its own container (changing the image) neither
    // conflicts nor removes the other manager's container.
    let out = ssa::apply(
        Some(&out),
        &deployment(json!([{"name": "app", "image": "app:2"}])),
        "kudo",
        false,
        &deployment_gvk(),
        T2,
    )
    .unwrap();
    let c = containers(&out).as_array().unwrap();
    assert_eq!(c.len(), 2);
    assert!(c.iter().any(|c| c["name"] == "app" && c["image"] == "app:2"));
    // The second manager changing the first one's image conflicts on that field.
    let steal = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment"},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "evil"}]}}}});
    let err = ssa::apply(Some(&out), &steal, "injector", false, &deployment_gvk(), T2).unwrap_err();
    let SsaError::Conflict { causes } = err else {
        panic!("expected conflict")
    };
    assert_eq!(causes.len(), 1);
    assert_eq!(
        causes[0].path,
        ".spec.template.spec.containers[name=\"app\"].image"
    );
    assert_eq!(causes[0].manager, "kudo");
}

#[test]
fn ssa_removed_container_is_pruned() {
    let live = ssa::apply(
        None,
        &deployment(json!([{"name": "a", "image": "a"}, {"name": "b", "image": "b"}])),
        "kudo",
        false,
        &deployment_gvk(),
        T0,
    )
    .unwrap();
    let out = ssa::apply(
        Some(&live),
        &deployment(json!([{"name": "a", "image": "a"}])),
        "kudo",
        false,
        &deployment_gvk(),
        T1,
    )
    .unwrap();
    assert_eq!(containers(&out), &json!([{"name": "a", "image": "a"}]));
}

#[test]
fn ssa_status_is_not_owned_through_the_main_resource() {
    let mut applied = deployment(json!([{"name": "a", "image": "a"}]));
    applied["status"] = json!({"replicas": 99});
    let mut live = ssa::apply(
        None,
        &deployment(json!([{"name": "a", "image": "a"}])),
        "kudo",
        false,
        &deployment_gvk(),
        T0,
    )
    .unwrap();
    live["status"] = json!({"replicas": 3});
    let out = ssa::apply(Some(&live), &applied, "kudo", false, &deployment_gvk(), T1).unwrap();
    assert_eq!(out["status"], json!({"replicas": 3}));
    assert!(
        entry(&out, "kudo", "Apply").unwrap()["fieldsV1"]
            .get("f:status")
            .is_none()
    );
}

#[test]
fn ssa_status_subresource_update_is_recorded_with_subresource() {
    let live = ssa::apply(
        None,
        &deployment(json!([{"name": "a", "image": "a"}])),
        "kudo",
        false,
        &deployment_gvk(),
        T0,
    )
    .unwrap();
    let mut new = live.clone();
    new["status"] = json!({"replicas": 3});
    let out = ssa::record_update(
        Some(&live),
        &new,
        "kube-controller-manager",
        "Update",
        Some("status"),
        &deployment_gvk(),
        T1,
    );
    let e = entry(&out, "kube-controller-manager", "Update").unwrap();
    assert_eq!(e["subresource"], "status");
    // `status` is a non-pointer struct, always present in the typed object: no "." marker.
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));
}

#[test]
fn ssa_rejects_managed_fields_in_the_request() {
    let mut applied = cm(json!({}));
    applied["metadata"]["managedFields"] = json!([]);
    let err = ssa::apply(None, &applied, "kubectl", false, &cm_gvk(), T0).unwrap_err();
    assert_eq!(
        err,
        SsaError::BadRequest("metadata.managedFields must be nil".into())
    );
    assert_eq!(err.status_code(), 400);
}

#[test]
fn ssa_rejects_list_items_without_their_key() {
    let err = ssa::apply(
        None,
        &deployment(json!([{"image": "a"}])),
        "kubectl",
        false,
        &deployment_gvk(),
        T0,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains(
            ".spec.template.spec.containers: element 0: associative list with keys has an element that omits key field \"name\""
        ),
        "{err}"
    );
}

#[test]
fn ssa_finalizers_are_a_set_shared_between_managers() {
    let mut a = cm(json!({}));
    a["metadata"]["finalizers"] = json!(["a.example/f"]);
    let live = ssa::apply(None, &a, "alice", false, &cm_gvk(), T0).unwrap();
    let mut b = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo", "namespace": "default"}});
    b["metadata"]["finalizers"] = json!(["b.example/f"]);
    let out = ssa::apply(Some(&live), &b, "bob", false, &cm_gvk(), T1).unwrap();
    assert_eq!(
        out["metadata"]["finalizers"],
        json!(["a.example/f", "b.example/f"])
    );
    assert_eq!(
        entry(&out, "bob", "Apply").unwrap()["fieldsV1"],
        json!({"f:metadata": {"f:finalizers": {"v:\"b.example/f\"": {}}}})
    );
}

#[test]
fn ssa_custom_resource_without_schema_tracks_nested_keys() {
    // Without a schema every object key is a map key, so nested objects carry ".".
    let gvk = Gvk::new("kudo.dev", "v1beta1", "Instance");
    let applied = json!({"apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
        "metadata": {"name": "i"}, "spec": {"parameters": {"A": "1"}}});
    let out = ssa::apply(None, &applied, "kudo", false, &gvk, T0).unwrap();
    assert_eq!(
        entry(&out, "kudo", "Apply").unwrap()["fieldsV1"],
        json!({"f:spec": {".": {}, "f:parameters": {".": {}, "f:A": {}}}})
    );
}

#[test]
fn smp_volume_source_switch_with_retain_keys() {
    // kubectl sends $retainKeys for volumes so that switching the source drops the old one.
    let mut doc = patch_demo();
    doc["spec"]["template"]["spec"]["volumes"] = json!([{"name": "data", "emptyDir": {}}]);
    let out = strategic::apply(
        &doc,
        &json!({"spec": {"template": {"spec": {"volumes": [
            {"$retainKeys": ["configMap", "name"], "name": "data", "configMap": {"name": "cfg"}}]}}}}),
        &deployment_gvk(),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["volumes"],
        json!([{"name": "data", "configMap": {"name": "cfg"}}])
    );
}

#[test]
fn smp_client_side_apply_style_container_removal() {
    // What `kubectl apply` (client-side) sends when a container is dropped from the manifest.
    let mut doc = patch_demo();
    doc["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "old", "image": "old"}));
    let out = strategic::apply(
        &doc,
        &json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "patch-demo-ctr"}],
            "containers": [{"$patch": "delete", "name": "old"}]
        }}}}),
        &deployment_gvk(),
    )
    .unwrap();
    let c = containers(&out).as_array().unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0]["name"], "patch-demo-ctr");
}

#[test]
fn smp_rejects_non_object_patch() {
    let err = strategic::apply(&patch_demo(), &json!([1]), &deployment_gvk()).unwrap_err();
    assert_eq!(err.status_code(), 400);
}

#[test]
fn ssa_update_removing_a_field_takes_it_from_its_applier() {
    let live = ssa::apply(
        None,
        &cm(json!({"a": "1", "b": "2"})),
        "kudo",
        false,
        &cm_gvk(),
        T0,
    )
    .unwrap();
    let mut new = live.clone();
    new["data"].as_object_mut().unwrap().remove("b");
    let out = ssa::record_update(Some(&live), &new, "kubectl-edit", "Update", None, &cm_gvk(), T1);
    // Removing a field records no ownership for the editor, and the applier no longer owns it.
    assert!(entry(&out, "kubectl-edit", "Update").is_none());
    assert_eq!(
        entry(&out, "kudo", "Apply").unwrap()["fieldsV1"]["f:data"],
        json!({"f:a": {}})
    );
}

#[test]
fn ssa_update_with_reset_managed_fields_clears_them() {
    let live = ssa::apply(None, &cm(json!({"a": "1"})), "kudo", false, &cm_gvk(), T0).unwrap();
    let mut new = live.clone();
    new["metadata"]["managedFields"] = json!([{}]);
    let out = ssa::record_update(Some(&live), &new, "kubectl-patch", "Update", None, &cm_gvk(), T1);
    assert!(out["metadata"].get("managedFields").is_none());
}

#[test]
fn ssa_apply_through_status_subresource_owns_only_status() {
    let gvk = Gvk::new("kudo.dev", "v1beta1", "Instance");
    let live = ssa::apply(
        None,
        &json!({"apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
            "metadata": {"name": "i"}, "spec": {"operatorVersion": {"name": "ov"}}}),
        "kubectl",
        false,
        &gvk,
        T0,
    )
    .unwrap();
    let opts = ssa::Options {
        subresource: Some("status"),
        status_subresource: Some(true),
        ..Default::default()
    };
    let out = ssa::apply_with(
        Some(&live),
        &json!({"apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
            "metadata": {"name": "i"}, "spec": {"ignored": true},
            "status": {"planStatus": {"deploy": {"status": "COMPLETE"}}}}),
        "kudo-controller",
        true,
        &gvk,
        T1,
        &opts,
    )
    .unwrap();
    assert_eq!(out["spec"], json!({"operatorVersion": {"name": "ov"}}));
    assert_eq!(out["status"]["planStatus"]["deploy"]["status"], "COMPLETE");
    let e = out["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "kudo-controller")
        .unwrap();
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["operation"], "Apply");
    assert!(e["fieldsV1"].get("f:spec").is_none());
    assert!(e["fieldsV1"].get("f:status").is_some());
}

#[test]
fn ssa_with_crd_schema_uses_struct_fields_and_list_map_keys() {
    let schema = kudo_patch::schema::Schema::from_openapi_v3(&json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "params": {"type": "object", "additionalProperties": {"type": "string"}},
                "steps": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "image": {"type": "string"}}}}
            }}
        }
    }));
    let gvk = Gvk::new("example.com", "v1", "Widget");
    let opts = ssa::Options {
        schema: Some(&schema),
        ..Default::default()
    };
    let applied = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"replicas": 1, "params": {"A": "x"}, "steps": [{"name": "s1", "image": "i1"}]}});
    let live = ssa::apply_with(None, &applied, "alice", false, &gvk, T0, &opts).unwrap();
    assert_eq!(
        live["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:spec": {
            "f:params": {"f:A": {}},
            "f:replicas": {},
            "f:steps": {"k:{\"name\":\"s1\"}": {".": {}, "f:image": {}, "f:name": {}}}
        }})
    );
    let bob = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"steps": [{"name": "s2", "image": "i2"}]}});
    let out = ssa::apply_with(Some(&live), &bob, "bob", false, &gvk, T1, &opts).unwrap();
    assert_eq!(
        out["spec"]["steps"],
        json!([{"name": "s1", "image": "i1"}, {"name": "s2", "image": "i2"}])
    );
}

#[test]
fn ssa_null_server_metadata_in_config_is_ignored() {
    let live = ssa::apply(None, &cm(json!({"a": "1"})), "kubectl", false, &cm_gvk(), T0).unwrap();
    let mut live = live;
    live["metadata"]["creationTimestamp"] = json!(T0);
    live["metadata"]["uid"] = json!("u-1");
    let mut applied = cm(json!({"a": "1"}));
    applied["metadata"]["creationTimestamp"] = Value::Null;
    let out = ssa::apply(Some(&live), &applied, "kubectl", false, &cm_gvk(), T1).unwrap();
    assert_eq!(out, live);
}

#[test]
fn ssa_record_update_on_deployment_create_has_the_typed_markers() {
    // `kubectl create deployment` style Update entry: value structs (spec, template,
    // template.spec) and the non-omitempty containers slice carry no ".", while maps and
    // list items created by the write do.
    let obj = deployment(json!([{"name": "nginx", "image": "nginx"}]));
    let out = ssa::record_update(
        None,
        &obj,
        "kubectl-create",
        "Update",
        None,
        &deployment_gvk(),
        T0,
    );
    assert_eq!(
        entry(&out, "kubectl-create", "Update").unwrap()["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                        ".": {}, "f:image": {}, "f:name": {}
                    }}}
                }
            }
        })
    );
}

#[test]
fn ssa_first_apply_to_an_unmanaged_object_conflicts_with_before_first_apply() {
    // An object stored without managedFields (e.g. created before field tracking): its
    // fields belong to the placeholder manager "before-first-apply".
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "demo", "namespace": "default"}, "data": {"key": "old", "other": "x"}});
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "demo", "namespace": "default"}, "data": {"key": "new"}});
    let err = ssa::apply(Some(&live), &applied, "kubectl", false, &cm_gvk(), T0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.key"
    );
    let out = ssa::apply(Some(&live), &applied, "kubectl", true, &cm_gvk(), T0).unwrap();
    assert_eq!(out["data"], json!({"key": "new", "other": "x"}));
    let placeholder = entry(&out, "before-first-apply", "Update").unwrap();
    assert_eq!(placeholder["fieldsV1"], json!({"f:data": {"f:other": {}}}));
    assert!(placeholder.get("time").is_none());
}

#[test]
fn ssa_kubectl_takes_over_client_side_applied_fields_without_conflicts() {
    // Documented: switching from `kubectl apply` to `kubectl apply --server-side` transfers
    // field management "without encountering conflicts", and the last-applied annotation
    // is kept up to date by the server.
    let manifest = cm(json!({"key": "1"}));
    let mut created = manifest.clone();
    created["metadata"]["annotations"] = json!({
        ssa::LAST_APPLIED_ANNOTATION: format!("{}\n", ssa::go_json(&manifest))
    });
    let live = ssa::record_update(
        None,
        &created,
        "kubectl-client-side-apply",
        "Update",
        None,
        &cm_gvk(),
        T0,
    );
    let applied = cm(json!({"key": "2"}));
    // Another manager changing the same field conflicts with the client-side applier ...
    let err = ssa::apply(Some(&live), &applied, "someone-else", false, &cm_gvk(), T1).unwrap_err();
    assert!(err.to_string().contains("kubectl-client-side-apply"), "{err}");
    // ... but kubectl itself takes the field over.
    let out = ssa::apply(Some(&live), &applied, "kubectl", false, &cm_gvk(), T1).unwrap();
    assert_eq!(out["data"]["key"], "2");
    let annotation = out["metadata"]["annotations"][ssa::LAST_APPLIED_ANNOTATION]
        .as_str()
        .unwrap();
    assert_eq!(
        annotation,
        "{\"apiVersion\":\"v1\",\"data\":{\"key\":\"2\"},\"kind\":\"ConfigMap\",\"metadata\":{\"labels\":{\"test-label\":\"test\"},\"name\":\"demo\",\"namespace\":\"default\"}}\n"
    );
    let csa = entry(&out, "kubectl-client-side-apply", "Update").unwrap();
    assert!(csa["fieldsV1"]["f:data"].get("f:key").is_none());
}

#[test]
fn go_json_escapes_like_encoding_json() {
    assert_eq!(
        ssa::go_json(&json!({"b": "<&>", "a": 1})),
        "{\"a\":1,\"b\":\"\\u003c\\u0026\\u003e\"}"
    );
}

#[test]
fn ssa_dropped_container_goes_even_if_another_manager_changed_its_image() {
    let live = ssa::apply(
        None,
        &deployment(json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}])),
        "kudo",
        false,
        &deployment_gvk(),
        T0,
    )
    .unwrap();
    // `kubectl set image` style update of container b.
    let mut edited = live.clone();
    edited["spec"]["template"]["spec"]["containers"][1]["image"] = json!("b:2");
    let edited = ssa::record_update(
        Some(&live),
        &edited,
        "kubectl-set",
        "Update",
        None,
        &deployment_gvk(),
        T1,
    );
    // The applier drops container b: the item goes as a whole (no half item without its
    // key), and the other manager's ownership of its image goes with it.
    let out = ssa::apply(
        Some(&edited),
        &deployment(json!([{"name": "a", "image": "a:1"}])),
        "kudo",
        false,
        &deployment_gvk(),
        T2,
    )
    .unwrap();
    assert_eq!(containers(&out), &json!([{"name": "a", "image": "a:1"}]));
    assert!(entry(&out, "kubectl-set", "Update").is_none());
}

#[test]
fn ssa_struct_field_survives_while_another_manager_owns_below_it() {
    let mut first = deployment(json!([{"name": "a", "image": "a"}]));
    first["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}});
    let live = ssa::apply(None, &first, "kudo", false, &deployment_gvk(), T0).unwrap();
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx-deployment"},
        "spec": {"strategy": {"rollingUpdate": {"maxUnavailable": 0}}}});
    let live = ssa::apply(Some(&live), &other, "tuner", false, &deployment_gvk(), T1).unwrap();
    let out = ssa::apply(
        Some(&live),
        &deployment(json!([{"name": "a", "image": "a"}])),
        "kudo",
        false,
        &deployment_gvk(),
        T2,
    )
    .unwrap();
    assert_eq!(
        out["spec"]["strategy"],
        json!({"rollingUpdate": {"maxUnavailable": 0}})
    );
}

#[test]
fn ssa_scale_subresource_owner_is_named_with_its_subresource() {
    let live = ssa::apply(
        None,
        &deployment(json!([{"name": "a", "image": "a"}])),
        "kudo",
        false,
        &deployment_gvk(),
        T0,
    )
    .unwrap();
    // `kubectl scale` writes spec.replicas through /scale.
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(5);
    let scaled = ssa::record_update(
        Some(&live),
        &scaled,
        "kubectl",
        "Update",
        Some("scale"),
        &deployment_gvk(),
        T1,
    );
    let e = entry(&scaled, "kubectl", "Update").unwrap();
    assert_eq!(e["subresource"], "scale");
    assert_eq!(e["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    let err = ssa::apply(
        Some(&scaled),
        &deployment(json!([{"name": "a", "image": "a"}])),
        "kudo",
        false,
        &deployment_gvk(),
        T2,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "Apply failed with 1 conflict: conflict with \"kubectl\" with subresource \"scale\" using apps/v1 at {T1}: .spec.replicas"
        )
    );
}

#[test]
fn ssa_owner_references_are_keyed_by_uid_and_pruned() {
    let with_owner = |uids: &[&str]| {
        let mut cm = cm(json!({"a": "1"}));
        cm["metadata"]["ownerReferences"] = Value::Array(
            uids.iter()
                .map(|u| json!({"apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "name": "i", "uid": u}))
                .collect(),
        );
        cm
    };
    let live = ssa::apply(None, &with_owner(&["u1", "u2"]), "kudo", false, &cm_gvk(), T0).unwrap();
    assert_eq!(
        entry(&live, "kudo", "Apply").unwrap()["fieldsV1"]["f:metadata"]["f:ownerReferences"],
        json!({"k:{\"uid\":\"u1\"}": {}, "k:{\"uid\":\"u2\"}": {}})
    );
    let out = ssa::apply(Some(&live), &with_owner(&["u2"]), "kudo", false, &cm_gvk(), T1).unwrap();
    let refs = out["metadata"]["ownerReferences"].as_array().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0]["uid"], "u2");
}

#[test]
fn schema_exposes_patch_metadata_for_openapi() {
    let svc = Gvk::new("", "v1", "Service");
    let fields: Vec<(Vec<&str>, kudo_patch::ListStrategy)> = kudo_patch::schema::list_fields(&svc).collect();
    let ports = fields.iter().find(|(p, _)| p == &["spec", "ports"]).unwrap();
    assert_eq!(ports.1.merge_key, Some("port"));
    assert_eq!(ports.1.patch_strategy, Some("merge"));
    assert_eq!(
        ports.1.list_type,
        kudo_patch::ListType::Map(&["port", "protocol"])
    );
    let pod = Gvk::new("", "v1", "Pod");
    let volumes = kudo_patch::schema::merge_key(&pod, &["spec", "volumes"]).unwrap();
    assert_eq!(volumes.patch_strategy, Some("merge,retainKeys"));
    assert!(kudo_patch::schema::is_builtin(&pod));
    assert!(!kudo_patch::schema::is_builtin(&Gvk::new(
        "kudo.dev", "v1beta1", "Instance"
    )));
}
