//! A cluster as KUDO v0.19 leaves it, written the way KUDO's code writes (not through kudo-rs):
//! `kudo init`'s objects in KUDO's namespace (manager StatefulSet, ServiceAccount bound to
//! cluster-admin, the self-signed webhook Secret, a MutatingWebhookConfiguration for Instances
//! calling a Service that does not exist) and an Instance's objects as KUDO's manager applies them
//! (pkg/engine/task/task_apply.go): created with a POST by client-go, so the field manager is the
//! binary's name, `manager`, operation Update; the annotation kudo.dev/last-applied-configuration
//! holding the object as applied; KUDO's labels, plan annotations and a controller owner reference
//! to the Instance; the Instance's status in KUDO's layout, written through the status
//! subresource. Rust over kube-rs rather than a script over kubectl: the same client library shape
//! as client-go (typed POST/PATCH with a field manager), and the tests already hold a client.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// client-go's default field manager for KUDO's manager binary.
pub const MANAGER: &str = "manager";

fn ar(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (g, v) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, kind), plural)
}

fn api(client: &kube::Client, obj: &Value, plural: &str) -> Api<DynamicObject> {
    let r = ar(
        obj["apiVersion"].as_str().unwrap(),
        obj["kind"].as_str().unwrap(),
        plural,
    );
    match obj["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &r),
        None => Api::all_with(client.clone(), &r),
    }
}

/// POSTs `obj` as KUDO's manager does (field manager `manager`, operation Update), with the
/// last-applied annotation KUDO sets right before creating: the object's JSON without it.
pub async fn create(client: &kube::Client, obj: &Value, plural: &str, last_applied: bool) -> Value {
    let mut obj = obj.clone();
    if last_applied {
        let text = obj.to_string();
        obj["metadata"]["annotations"]["kudo.dev/last-applied-configuration"] = json!(text);
    }
    let pp = PostParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    };
    let o: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
    let made = api(client, &obj, plural)
        .create(&pp, &o)
        .await
        .unwrap_or_else(|e| panic!("create {obj}: {e}"));
    serde_json::to_value(made).unwrap()
}

/// Whether the cluster serves `group_version` (the embedded cluster has no admission webhooks).
pub async fn served(client: &kube::Client, group_version: &str) -> bool {
    client.list_api_group_resources(group_version).await.is_ok()
}

/// `kudo init --unsafe-self-signed-webhook-ca` in `ns` but its webhook configuration
/// ([`webhook`]).
pub async fn init(client: &kube::Client, ns: &str) {
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "kudo-manager", "namespace": ns}});
    create(client, &sa, "serviceaccounts", false).await;
    let crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("kudo-manager-rolebinding-{ns}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "kudo-manager", "namespace": ns}]});
    create(client, &crb, "clusterrolebindings", false).await;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "kudo-webhook-server-secret", "namespace": ns},
        "data": {"tls.crt": "dGlueS1jYQ==", "tls.key": "dGlueS1rZXk="}});
    create(client, &secret, "secrets", false).await;
    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "kudo-controller-manager", "namespace": ns,
            "labels": {"app": "kudo-manager", "control-plane": "controller-manager"}},
        "spec": {"replicas": 1, "serviceName": "kudo-controller-manager-service",
            "selector": {"matchLabels": {"app": "kudo-manager", "control-plane": "controller-manager"}},
            "template": {"metadata": {"labels": {"app": "kudo-manager", "control-plane": "controller-manager"}},
                "spec": {"serviceAccountName": "kudo-manager", "containers": [{"name": "manager",
                    "image": "kudobuilder/controller:v0.19.0", "command": ["/root/manager"],
                    "ports": [{"containerPort": 443, "name": "webhook-server"}]}]}}}});
    create(client, &sts, "statefulsets", false).await;
}

/// An Instance of first-operator (OperatorVersion `ov`, already in `ns`) as KUDO's CLI creates
/// it and its webhook schedules `deploy` (run `uid`), its Deployment as KUDO's manager applied it
/// in that run, and its status mid-plan: step `everything` IN_PROGRESS. Returns the Deployment.
pub async fn first_operator(client: &kube::Client, ns: &str, name: &str, ov: &str, uid: &str) -> Value {
    let inst = json!({"apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
        "metadata": {"name": name, "namespace": ns, "labels": {"kudo.dev/operator": "first-operator"}},
        "spec": {"operatorVersion": {"name": ov}, "parameters": {},
            "planExecution": {"planName": "deploy", "uid": uid, "status": "IN_PROGRESS"}}});
    let inst = create(client, &inst, "instances", false).await;
    let status = json!({"status": {"planStatus": {"deploy": {"name": "deploy", "status": "IN_PROGRESS",
        "uid": uid, "lastUpdatedTimestamp": "2021-05-01T10:00:00Z",
        "phases": [{"name": "main", "status": "IN_PROGRESS",
            "steps": [{"name": "everything", "status": "IN_PROGRESS"}]}]}},
        "conditions": [{"type": "Ready", "status": "Unknown", "reason": "PlanInProgress", "message": "",
            "lastTransitionTime": "2021-05-01T10:00:00Z"}]}});
    let pp = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    };
    api(client, &inst, "instances")
        .patch_status(name, &pp, &Patch::Merge(&status))
        .await
        .unwrap();
    let labels =
        json!({"heritage": "kudo", "kudo.dev/operator": "first-operator", "kudo.dev/instance": name});
    let mut pod_labels = json!({"app": "nginx", "instance": name});
    for (k, v) in labels.as_object().unwrap() {
        pod_labels[k] = v.clone();
    }
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("{name}-nginx"), "namespace": ns, "labels": labels,
            "annotations": {"kudo.dev/plan": "deploy", "kudo.dev/phase": "main", "kudo.dev/step": "everything",
                "kudo.dev/last-plan-execution-uid": uid},
            "ownerReferences": [{"apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "name": name,
                "uid": inst["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nginx", "instance": name}},
            "template": {"metadata": {"labels": pod_labels,
                "annotations": {"kudo.dev/operator-version": "0.2.0"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9",
                    "ports": [{"containerPort": 80}]}]}}}});
    create(client, &deploy, "deployments", true).await
}

/// KUDO's MutatingWebhookConfiguration for Instances in namespace `only`, calling the Service of
/// KUDO's namespace `ns`, which does not exist (KUDO's manager is gone or its Service deleted): from
/// now on every Instance write there fails, as on such a KUDO cluster. Written last, since it
/// would refuse the fixture's Instance too. KUDO's has no namespaceSelector; this one has, since
/// the tests share one cluster and a webhook that fails every Instance write must not reach other
/// tests' namespaces.
pub async fn webhook(client: &kube::Client, ns: &str, only: &str) {
    let hook = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": format!("kudo-manager-instance-admission-webhook-config-{ns}")},
        "webhooks": [{"name": "instance-admission.kudo.dev", "admissionReviewVersions": ["v1beta1"],
            "sideEffects": "None", "failurePolicy": "Fail", "matchPolicy": "Equivalent",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": only}},
            "clientConfig": {"caBundle": "dGlueS1jYQ==", "service": {"name": "kudo-controller-manager-service",
                "namespace": ns, "path": "/admit-kudo-dev-v1beta1-instance"}},
            "rules": [{"apiGroups": ["kudo.dev"], "apiVersions": ["v1beta1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["instances"], "scope": "Namespaced"}]}]});
    if served(client, "admissionregistration.k8s.io/v1").await {
        create(client, &hook, "mutatingwebhookconfigurations", false).await;
    } else {
        eprintln!("the cluster serves no admissionregistration.k8s.io/v1: no webhook configuration");
    }
}
