//! KUDO's "enhancement" of rendered objects (kudo-behaviour.md §4.5), shared by `package render`
//! and the controller so that what the CLI shows is exactly what the controller applies.
//!
//! * labels `heritage: kudo`, `kudo.dev/operator`, `kudo.dev/instance` on every object, and on pod
//!   templates / volumeClaimTemplates / job templates of workload kinds;
//! * annotations `kudo.dev/plan|phase|step|last-plan-execution-uid` on the top-level object only;
//! * annotation `kudo.dev/operator-version` on pod templates only (stable across plan runs, so
//!   pods are not restarted by a mere re-run);
//! * namespaced objects are forced into the Instance's namespace and get a controller
//!   ownerReference to the Instance; cluster-scoped objects get neither (Kubernetes forbids a
//!   namespaced owner for them).
//!
//! The ConfigMap/Secret dependencies hash needs live objects and is the controller's business.

use kudo_api::labels;
use serde_json::{Map, Value, json};

/// Who owns the rendered objects (the Instance).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// `apiVersion` of the owner (`kudo.dev/v1beta1` for an Instance).
    pub api_version: String,
    /// `kind` of the owner (`Instance`).
    pub kind: String,
    /// `metadata.name` of the owner.
    pub name: String,
    /// `metadata.uid` of the owner; [`OFFLINE_UID`] when rendering offline.
    pub uid: String,
}

/// Everything enhancement needs to know about the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    /// Name of the Instance: the `kudo.dev/instance` label.
    pub instance_name: String,
    /// Namespace of the Instance, into which namespaced objects are forced.
    pub instance_namespace: String,
    /// Name of the Operator: the `kudo.dev/operator` label.
    pub operator_name: String,
    /// OperatorVersion `spec.version`.
    pub operator_version: String,
    /// The plan being run: the `kudo.dev/plan` annotation.
    pub plan: String,
    /// The phase of the plan the object belongs to: the `kudo.dev/phase` annotation.
    pub phase: String,
    /// The step of the phase the object belongs to: the `kudo.dev/step` annotation.
    pub step: String,
    /// The plan execution UID (`kudo.dev/last-plan-execution-uid`).
    pub plan_uid: String,
    /// `None`: no ownerReference is added.
    pub owner: Option<Owner>,
}

/// Placeholder UID used offline (`package render`) where no Instance exists yet.
pub const OFFLINE_UID: &str = "00000000-0000-0000-0000-000000000000";

/// Cluster-scoped kinds of a stock Kubernetes API server (group, kind), for deciding
/// namespacedness without discovery. Anything not listed is treated as namespaced.
pub const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("policy", "PodSecurityPolicy"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("authentication.k8s.io", "TokenReview"),
    ("authentication.k8s.io", "SelfSubjectReview"),
    ("authorization.k8s.io", "SubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectRulesReview"),
];

/// The API group of an `apiVersion` (`apps/v1` → `apps`, `v1` → ``).
pub fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

/// Namespacedness from the built-in table (offline use; the controller asks discovery).
pub fn builtin_is_namespaced(api_version: &str, kind: &str) -> bool {
    let g = api_group(api_version);
    !CLUSTER_SCOPED.iter().any(|(cg, ck)| *cg == g && *ck == kind)
}

/// Kinds with a pod template at `spec.template`.
const POD_TEMPLATE_KINDS: &[&str] = &[
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "ReplicationController",
    "Job",
];

/// JSON pointer of the pod template that gets KUDO's pod-template annotations (the operator version
/// here, the dependencies hash in [`crate::deps_hash`]), by kind; `None` for kinds without one.
pub(crate) fn pod_template_pointer(kind: &str) -> Option<&'static str> {
    if POD_TEMPLATE_KINDS.contains(&kind) {
        Some("/spec/template")
    } else if kind == "CronJob" {
        Some("/spec/jobTemplate/spec/template")
    } else {
        None
    }
}

fn child_obj<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    v.as_object_mut()?.get_mut(key)?.as_object_mut()
}

/// Merges `pairs` into the string map at `obj.metadata.<field>`, creating `metadata` and the map
/// when needed. A non-map value in the way is replaced, as Kubernetes would reject it anyway.
fn merge_into_meta(obj: &mut Map<String, Value>, field: &str, pairs: &[(&str, &str)]) {
    let meta = obj.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let Some(meta) = meta.as_object_mut() else { return };
    let m = meta.entry(field).or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    if let Some(m) = m.as_object_mut() {
        for (k, v) in pairs {
            m.insert((*k).to_string(), Value::String((*v).to_string()));
        }
    }
}

/// Kinds whose pod template carries the bucket label ([`add_bucket_label`]): not a Job's
/// (immutable: a re-run would be refused), nor a StatefulSet's volumeClaimTemplates (immutable too).
const BUCKET_TEMPLATE_KINDS: &[&str] = &[
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "ReplicationController",
];

/// A sharded manager's addition to the enhancement: the Instance's hash bucket as the label
/// `kudo.dev/bucket` on the object and on the pod template of its long-running workloads, so
/// their Pods and ReplicaSets carry it too (each replica watches only its own buckets). Used by
/// the manager when sharded, and by previews of an Instance that carries the label.
pub fn add_bucket_label(obj: &mut Value, bucket: &str) {
    let templated = obj
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| BUCKET_TEMPLATE_KINDS.contains(&k));
    let Some(root) = obj.as_object_mut() else { return };
    merge_into_meta(root, "labels", &[(labels::BUCKET, bucket)]);
    if templated && let Some(tpl) = root.get_mut("spec").and_then(|s| child_obj(s, "template")) {
        merge_into_meta(tpl, "labels", &[(labels::BUCKET, bucket)]);
    }
}

/// Enhances one rendered object in place. `namespaced` comes from discovery (controller) or
/// [`builtin_is_namespaced`] (offline).
pub fn enhance(obj: &mut Value, meta: &Metadata, namespaced: bool) {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
    let label_pairs = [
        (labels::HERITAGE, "kudo"),
        (labels::OPERATOR, meta.operator_name.as_str()),
        (labels::INSTANCE, meta.instance_name.as_str()),
    ];
    let top_annotations = [
        (labels::PLAN, meta.plan.as_str()),
        (labels::PHASE, meta.phase.as_str()),
        (labels::STEP, meta.step.as_str()),
        (labels::PLAN_UID, meta.plan_uid.as_str()),
    ];
    let pod_annotations = [(labels::OPERATOR_VERSION, meta.operator_version.as_str())];
    let Some(root) = obj.as_object_mut() else { return };
    merge_into_meta(root, "labels", &label_pairs);
    merge_into_meta(root, "annotations", &top_annotations);

    if let Some(spec) = root.get_mut("spec") {
        if POD_TEMPLATE_KINDS.contains(&kind.as_str())
            && let Some(tpl) = child_obj(spec, "template")
        {
            merge_into_meta(tpl, "labels", &label_pairs);
            merge_into_meta(tpl, "annotations", &pod_annotations);
        }
        if kind == "StatefulSet"
            && let Some(vcts) = spec.get_mut("volumeClaimTemplates").and_then(Value::as_array_mut)
        {
            for vct in vcts.iter_mut().filter_map(Value::as_object_mut) {
                merge_into_meta(vct, "labels", &label_pairs);
            }
        }
        if kind == "CronJob"
            && let Some(jt) = child_obj(spec, "jobTemplate")
        {
            merge_into_meta(jt, "labels", &label_pairs);
            if let Some(tpl) = jt.get_mut("spec").and_then(|s| child_obj(s, "template")) {
                merge_into_meta(tpl, "labels", &label_pairs);
                merge_into_meta(tpl, "annotations", &pod_annotations);
            }
        }
    }

    if namespaced {
        let m = root.entry("metadata").or_insert_with(|| json!({}));
        if let Some(m) = m.as_object_mut() {
            m.insert("namespace".into(), Value::String(meta.instance_namespace.clone()));
            if let Some(owner) = &meta.owner {
                let reference = json!({
                    "apiVersion": owner.api_version,
                    "kind": owner.kind,
                    "name": owner.name,
                    "uid": owner.uid,
                    "controller": true,
                    "blockOwnerDeletion": true,
                });
                let refs = m.entry("ownerReferences").or_insert_with(|| json!([]));
                if !refs.is_array() {
                    *refs = json!([]);
                }
                if let Some(refs) = refs.as_array_mut() {
                    // A template cannot sensibly declare another controller: ours replaces it.
                    refs.retain(|r| r.get("controller").and_then(Value::as_bool) != Some(true));
                    refs.push(reference);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_scoped_table_agrees_with_the_kind_table() {
        for k in kudo_api::kinds::BUILTIN_KINDS
            .iter()
            .chain(kudo_api::kinds::KUDO_KINDS)
        {
            assert_eq!(
                builtin_is_namespaced(&k.api_version(), k.kind),
                k.namespaced,
                "{}",
                k.kind
            );
        }
    }

    fn md() -> Metadata {
        Metadata {
            instance_name: "inst".into(),
            instance_namespace: "ns".into(),
            operator_name: "op".into(),
            operator_version: "0.1.0".into(),
            plan: "deploy".into(),
            phase: "main".into(),
            step: "s".into(),
            plan_uid: "uid-1".into(),
            owner: Some(Owner {
                api_version: "kudo.dev/v1beta1".into(),
                kind: "Instance".into(),
                name: "inst".into(),
                uid: "iuid".into(),
            }),
        }
    }

    #[test]
    fn statefulset_gets_all_paths() {
        let mut o = json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "x", "namespace": "elsewhere", "labels": {"app": "a"}},
            "spec": {"template": {"metadata": {"labels": {"app": "a"}}, "spec": {}},
                     "volumeClaimTemplates": [{"metadata": {"name": "d"}}]}
        });
        enhance(&mut o, &md(), true);
        assert_eq!(o["metadata"]["namespace"], "ns");
        assert_eq!(o["metadata"]["labels"]["app"], "a");
        assert_eq!(o["metadata"]["labels"]["heritage"], "kudo");
        assert_eq!(o["metadata"]["annotations"]["kudo.dev/plan"], "deploy");
        assert!(
            o["metadata"]["annotations"]
                .get("kudo.dev/operator-version")
                .is_none()
        );
        assert_eq!(
            o["spec"]["template"]["metadata"]["annotations"]["kudo.dev/operator-version"],
            "0.1.0"
        );
        assert!(
            o["spec"]["template"]["metadata"]["annotations"]
                .get("kudo.dev/plan")
                .is_none()
        );
        assert_eq!(
            o["spec"]["template"]["metadata"]["labels"]["kudo.dev/instance"],
            "inst"
        );
        assert_eq!(
            o["spec"]["volumeClaimTemplates"][0]["metadata"]["labels"]["kudo.dev/operator"],
            "op"
        );
        assert_eq!(o["metadata"]["ownerReferences"][0]["uid"], "iuid");
        assert_eq!(o["metadata"]["ownerReferences"][0]["controller"], true);
    }

    #[test]
    fn the_bucket_label_reaches_long_running_pod_templates_only() {
        let mut d =
            json!({"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": {}}}});
        let mut j = json!({"kind": "Job", "metadata": {"name": "j", "labels": {"a": "b"}}, "spec": {"template": {"metadata": {}}}});
        add_bucket_label(&mut d, "17");
        add_bucket_label(&mut j, "17");
        assert_eq!(d["metadata"]["labels"]["kudo.dev/bucket"], "17");
        assert_eq!(
            d["spec"]["template"]["metadata"]["labels"]["kudo.dev/bucket"],
            "17"
        );
        assert_eq!(
            j["metadata"]["labels"],
            json!({"a": "b", "kudo.dev/bucket": "17"})
        );
        assert_eq!(j["spec"]["template"]["metadata"], json!({}));
    }

    #[test]
    fn cluster_scoped_gets_no_namespace_or_owner() {
        let mut o = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}});
        let ns = builtin_is_namespaced("rbac.authorization.k8s.io/v1", "ClusterRole");
        assert!(!ns);
        enhance(&mut o, &md(), ns);
        assert!(o["metadata"].get("namespace").is_none());
        assert!(o["metadata"].get("ownerReferences").is_none());
        assert_eq!(o["metadata"]["labels"]["heritage"], "kudo");
        assert!(builtin_is_namespaced("v1", "ConfigMap"));
    }
}
