//! Handing field ownership from another writer to kudo's server-side-apply manager.
//!
//! Server-side apply prunes only fields its own manager owns and reports conflicts for fields
//! another manager set. An object written by `kubectl apply` (client side), by Helm or by KUDO
//! 0.19 (operation `Update`) therefore keeps the old writer's fields forever once kudo applies
//! it: a field the next OperatorVersion drops is never removed. [`take_over`] rewrites
//! `metadata.managedFields` the way Kubernetes' `csaupgrade` does: the fields of the chosen
//! entries become the fields of one `Apply` entry of kudo's manager, the chosen entries go. The
//! caller sends the result with [`managed_fields_patch`], then applies as usual; the apply
//! proves the hand-over (nothing conflicts, dropped fields are pruned).
//!
//! This is written here rather than taken from a crate because the only implementation is Go
//! (client-go's `csaupgrade`); the FieldsV1 union is a small recursive map merge.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use serde_json::{Map, Value, json};

/// The field manager kudo applies with (server-side apply, `force`). The manager's
/// `--field-manager` defaults to it, a server-side preview merges as it, adoption moves fields
/// to it.
pub const FIELD_MANAGER: &str = "kudo";

/// The entry the API server records when an object that had no managedFields (created before
/// server-side apply, or with tracking reset) is applied for the first time: it holds every field
/// the object had then.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// `Apply`: the operation of a server-side-apply entry.
const APPLY: &str = "Apply";

/// Moves the fields of the entries `take` selects to one `Apply` entry of manager `to` for
/// `api_version` (merged into an existing one if there is one) and drops the selected entries.
///
/// Only main-resource entries (no `subresource`: status stays with whoever wrote it) of the same
/// `api_version` are taken — field sets of another version cannot be converted without the
/// schema, so they are left as they are. `to`'s own entries are never "taken". `None` when
/// nothing is selected, so the caller sends nothing.
///
/// ```
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
/// use kudo_engine::field_ownership::{FIELD_MANAGER, take_over};
/// let csa = ManagedFieldsEntry {
///     manager: Some("kubectl-client-side-apply".into()),
///     operation: Some("Update".into()),
///     api_version: Some("apps/v1".into()),
///     fields_type: Some("FieldsV1".into()),
///     fields_v1: Some(FieldsV1(serde_json::json!({"f:spec": {"f:replicas": {}}}))),
///     ..Default::default()
/// };
/// let by_kubectl = |e: &ManagedFieldsEntry| e.manager.as_deref() == Some("kubectl-client-side-apply");
/// let out = take_over(&[csa], by_kubectl, FIELD_MANAGER, "apps/v1").unwrap();
/// assert_eq!(out[0].manager.as_deref(), Some("kudo"));
/// assert_eq!(out[0].operation.as_deref(), Some("Apply"));
/// ```
pub fn take_over(
    entries: &[ManagedFieldsEntry],
    take: impl Fn(&ManagedFieldsEntry) -> bool,
    to: &str,
    api_version: &str,
) -> Option<Vec<ManagedFieldsEntry>> {
    let is_target = |e: &ManagedFieldsEntry| {
        e.manager.as_deref() == Some(to)
            && e.operation.as_deref() == Some(APPLY)
            && is_main(e)
            && e.api_version.as_deref() == Some(api_version)
    };
    let taken = |e: &ManagedFieldsEntry| {
        is_main(e) && e.api_version.as_deref() == Some(api_version) && !is_target(e) && take(e)
    };
    if !entries.iter().any(taken) {
        return None;
    }
    let mut fields = Value::Object(Map::new());
    for e in entries.iter().filter(|e| taken(e) || is_target(e)) {
        if let Some(FieldsV1(f)) = &e.fields_v1 {
            union_into(&mut fields, f);
        }
    }
    let existing = entries.iter().find(|e| is_target(e));
    let merged = ManagedFieldsEntry {
        api_version: Some(api_version.to_string()),
        fields_type: Some("FieldsV1".to_string()),
        fields_v1: Some(FieldsV1(fields)),
        manager: Some(to.to_string()),
        operation: Some(APPLY.to_string()),
        subresource: None,
        time: existing.and_then(|e| e.time.clone()),
    };
    let mut out = Vec::with_capacity(entries.len());
    let mut placed = false;
    for e in entries {
        if taken(e) || is_target(e) {
            if !placed {
                out.push(merged.clone());
                placed = true;
            }
        } else {
            out.push(e.clone());
        }
    }
    Some(out)
}

/// An entry of the main resource (not `status` or another subresource).
fn is_main(e: &ManagedFieldsEntry) -> bool {
    e.subresource.as_deref().is_none_or(str::is_empty)
}

/// Deep union of two FieldsV1 sets. A set is a trie of JSON objects keyed `f:<field>`,
/// `k:<key object>`, `v:<value>`, `i:<index>` and `.` (the node itself); membership is presence,
/// so the union of two tries is the union of their keys, recursively.
pub fn union_into(into: &mut Value, from: &Value) {
    let (Value::Object(a), Value::Object(b)) = (&mut *into, from) else {
        return;
    };
    for (k, v) in b {
        match a.get_mut(k) {
            Some(existing) => union_into(existing, v),
            None => {
                a.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The JSON patch (RFC 6902) that replaces an object's managedFields with `entries`, guarded by a
/// `test` of `resource_version`: if anyone wrote the object since it was read, the API server
/// answers 422 and nothing changes (optimistic concurrency, as a PUT with resourceVersion).
pub fn managed_fields_patch(entries: &[ManagedFieldsEntry], resource_version: &str) -> Value {
    let entries: Vec<Value> = entries
        .iter()
        .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
        .collect();
    json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "replace", "path": "/metadata/managedFields", "value": entries},
    ])
}

/// The managers of an object, for a message: `manager (operation[, subresource])`, in the order
/// of its managedFields.
pub fn describe_managers(entries: &[ManagedFieldsEntry]) -> Vec<String> {
    entries
        .iter()
        .map(|e| {
            let manager = e.manager.as_deref().unwrap_or("?");
            let op = e.operation.as_deref().unwrap_or("?");
            match e.subresource.as_deref().filter(|s| !s.is_empty()) {
                Some(sub) => format!("{manager} ({op}, {sub})"),
                None => format!("{manager} ({op})"),
            }
        })
        .collect()
}

/// The managedFields of an object as the API server returns it (`metadata.managedFields`);
/// entries that do not parse are skipped.
pub fn managed_fields_of(obj: &Value) -> Vec<ManagedFieldsEntry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|e| serde_json::from_value(e.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(manager: &str, op: &str, api: &str, sub: Option<&str>, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            api_version: Some(api.into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            manager: Some(manager.into()),
            operation: Some(op.into()),
            subresource: sub.map(Into::into),
            time: None,
        }
    }

    fn csa_or_helm(e: &ManagedFieldsEntry) -> bool {
        matches!(e.manager.as_deref(), Some("kubectl-client-side-apply" | "helm"))
            && e.operation.as_deref() == Some("Update")
    }

    fn fields(e: &ManagedFieldsEntry) -> &Value {
        &e.fields_v1.as_ref().unwrap().0
    }

    #[test]
    fn union_is_a_deep_trie_merge() {
        let cases = [
            (json!({}), json!({}), json!({})),
            (json!({"f:a": {}}), json!({}), json!({"f:a": {}})),
            (json!({}), json!({"f:a": {}}), json!({"f:a": {}})),
            (
                json!({"f:spec": {"f:replicas": {}}}),
                json!({"f:spec": {"f:template": {"f:spec": {}}}}),
                json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {}}}}),
            ),
            (
                json!({"f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}}}}}),
                json!({"f:spec": {"f:containers": {
                    "k:{\"name\":\"a\"}": {"f:name": {}},
                    "k:{\"name\":\"b\"}": {".": {}, "f:name": {}}}}}),
                json!({"f:spec": {"f:containers": {
                    "k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}},
                    "k:{\"name\":\"b\"}": {".": {}, "f:name": {}}}}}),
            ),
            (
                json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"a\"": {}}}}),
                json!({"f:metadata": {"f:finalizers": {"v:\"b\"": {}}}}),
                json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"a\"": {}, "v:\"b\"": {}}}}),
            ),
            // A leaf in one set and a subtree in the other: the subtree is kept (a superset).
            (
                json!({"f:a": {}}),
                json!({"f:a": {"f:b": {}}}),
                json!({"f:a": {"f:b": {}}}),
            ),
            (
                json!({"f:a": {"f:b": {}}}),
                json!({"f:a": {}}),
                json!({"f:a": {"f:b": {}}}),
            ),
        ];
        for (a, b, want) in cases {
            let mut got = a.clone();
            union_into(&mut got, &b);
            assert_eq!(got, want, "{a} ∪ {b}");
        }
    }

    #[test]
    fn take_over_table() {
        let status = entry(
            "kube-controller-manager",
            "Update",
            "apps/v1",
            Some("status"),
            json!({"f:status": {}}),
        );
        let csa = entry(
            "kubectl-client-side-apply",
            "Update",
            "apps/v1",
            None,
            json!({"f:spec": {"f:replicas": {}}}),
        );
        let helm = entry(
            "helm",
            "Update",
            "apps/v1",
            None,
            json!({"f:metadata": {"f:labels": {}}}),
        );
        let kudo = entry(
            "kudo",
            "Apply",
            "apps/v1",
            None,
            json!({"f:spec": {"f:template": {}}}),
        );
        let other = entry(
            "someone",
            "Update",
            "apps/v1",
            None,
            json!({"f:spec": {"f:paused": {}}}),
        );
        let old_api = entry("helm", "Update", "apps/v1beta2", None, json!({"f:spec": {}}));
        let kudo_status = entry(
            "helm",
            "Update",
            "apps/v1",
            Some("status"),
            json!({"f:status": {}}),
        );

        // Nothing to take: None.
        assert_eq!(take_over(&[], csa_or_helm, "kudo", "apps/v1"), None);
        assert_eq!(
            take_over(&[kudo.clone(), status.clone()], csa_or_helm, "kudo", "apps/v1"),
            None
        );
        assert_eq!(
            take_over(std::slice::from_ref(&other), csa_or_helm, "kudo", "apps/v1"),
            None
        );
        // Another version's set and a subresource entry are never taken.
        assert_eq!(
            take_over(
                &[old_api.clone(), kudo_status.clone()],
                csa_or_helm,
                "kudo",
                "apps/v1"
            ),
            None
        );

        // One entry, no kudo entry yet: renamed to an Apply entry of kudo.
        let got = take_over(&[csa.clone(), status.clone()], csa_or_helm, "kudo", "apps/v1").unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].manager.as_deref(), Some("kudo"));
        assert_eq!(got[0].operation.as_deref(), Some("Apply"));
        assert_eq!(got[0].fields_type.as_deref(), Some("FieldsV1"));
        assert_eq!(got[0].api_version.as_deref(), Some("apps/v1"));
        assert_eq!(got[0].subresource, None);
        assert_eq!(fields(&got[0]), &json!({"f:spec": {"f:replicas": {}}}));
        assert_eq!(got[1], status);

        // Two entries and an existing kudo entry: one union, where the first of them stood; the
        // rest in order.
        let all = [
            status.clone(),
            csa.clone(),
            other.clone(),
            helm.clone(),
            kudo.clone(),
            old_api.clone(),
        ];
        let got = take_over(&all, csa_or_helm, "kudo", "apps/v1").unwrap();
        let names: Vec<_> = got.iter().map(|e| e.manager.clone().unwrap()).collect();
        assert_eq!(names, ["kube-controller-manager", "kudo", "someone", "helm"]);
        assert_eq!(
            fields(&got[1]),
            &json!({"f:metadata": {"f:labels": {}}, "f:spec": {"f:replicas": {}, "f:template": {}}})
        );
        assert_eq!(got[3], old_api, "apps/v1beta2's set is left");

        // The target name is a parameter; the predicate may pick before-first-apply.
        let bfa = entry(BEFORE_FIRST_APPLY, "Update", "v1", None, json!({"f:data": {}}));
        let got = take_over(
            &[bfa],
            |e| e.manager.as_deref() == Some(BEFORE_FIRST_APPLY),
            "mine",
            "v1",
        )
        .unwrap();
        assert_eq!(got[0].manager.as_deref(), Some("mine"));
        assert_eq!(fields(&got[0]), &json!({"f:data": {}}));

        // An entry of kudo with operation Update (a PATCH by kudo) may be taken into its Apply entry.
        let kudo_update = entry("kudo", "Update", "apps/v1", None, json!({"f:metadata": {}}));
        let got = take_over(
            &[kudo.clone(), kudo_update],
            |e| e.operation.as_deref() == Some("Update"),
            "kudo",
            "apps/v1",
        )
        .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            fields(&got[0]),
            &json!({"f:metadata": {}, "f:spec": {"f:template": {}}})
        );
    }

    #[test]
    fn take_over_keeps_the_time_of_the_existing_entry_and_is_idempotent() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let mut kudo = entry("kudo", "Apply", "v1", None, json!({"f:data": {"f:a": {}}}));
        let t: Time = serde_json::from_value(json!("2024-01-02T03:04:05Z")).unwrap();
        kudo.time = Some(t.clone());
        let csa = entry(
            "kubectl-client-side-apply",
            "Update",
            "v1",
            None,
            json!({"f:data": {"f:b": {}}}),
        );
        let once = take_over(&[csa, kudo], csa_or_helm, "kudo", "v1").unwrap();
        assert_eq!(once[0].time, Some(t));
        assert_eq!(take_over(&once, csa_or_helm, "kudo", "v1"), None);
    }

    #[test]
    fn patch_tests_the_resource_version_then_replaces() {
        let e = entry("kudo", "Apply", "v1", None, json!({"f:data": {}}));
        let p = managed_fields_patch(&[e], "42");
        assert_eq!(
            p[0],
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "42"})
        );
        assert_eq!(p[1]["op"], "replace");
        assert_eq!(p[1]["path"], "/metadata/managedFields");
        assert_eq!(
            p[1]["value"],
            json!([{"apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}},
                    "manager": "kudo", "operation": "Apply"}])
        );
    }

    #[test]
    fn reads_and_describes_managers() {
        let obj = json!({"metadata": {"managedFields": [
            {"manager": "helm", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {}}},
            {"manager": "kcm", "operation": "Update", "subresource": "status", "apiVersion": "v1"},
        ]}});
        let m = managed_fields_of(&obj);
        assert_eq!(describe_managers(&m), ["helm (Update)", "kcm (Update, status)"]);
        assert!(managed_fields_of(&json!({})).is_empty());
    }
}
