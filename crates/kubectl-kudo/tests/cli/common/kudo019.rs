//! A cluster as KUDO v0.19 leaves it, written the way KUDO's code writes (not through kudo-rs):
//! `kudo init`'s objects in KUDO's namespace (manager StatefulSet, ServiceAccount bound to
//! cluster-admin, the self-signed webhook Secret, a MutatingWebhookConfiguration for Instances
//! calling a Service that does not exist) and an Instance's objects as KUDO's manager applies them
//! (pkg/engine/task/task_apply.go): created with a POST by client-go, so the field manager is the
//! binary's name, `manager`, operation Update; the annotation kudo.dev/last-applied-configuration
//! holding the object as applied; KUDO's labels, plan annotations and a controller owner reference
//! to the Instance; the Instance's status in KUDO's layout, written through the status
//! subresource. Objects of a package's templates (galera's) are rendered by the real Go
//! text/template + Sprig ([`go_template`]), never by kudo-rs's engine. Rust over kube-rs rather
//! than a script over kubectl: the same client library shape as client-go (typed POST/PATCH
//! with a field manager), and the tests already hold a client.

use std::path::Path;

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

/// What KUDO's enhancer knows of the step applying an object: the Instance (created), its
/// operator and version, the plan, phase and step, and the run's uid.
pub struct Step<'a> {
    pub instance: &'a Value,
    pub operator: &'a str,
    pub operator_version: &'a str,
    pub plan: &'a str,
    pub phase: &'a str,
    pub step: &'a str,
    pub uid: &'a str,
}

/// KUDO's enhancer (pkg/engine/renderer/enhancer.go): its three labels on the object and on every
/// pod template (and a StatefulSet's volume claim templates), the plan annotations on the object,
/// `kudo.dev/operator-version` on the pod templates, the Instance's namespace and a controller
/// owner reference to it.
pub fn enhance(obj: &mut Value, at: &Step) {
    let name = at.instance["metadata"]["name"].clone();
    let labels = json!({"heritage": "kudo", "kudo.dev/operator": at.operator, "kudo.dev/instance": name});
    let merge = |meta: &mut Value, key: &str, add: &Value| {
        if !meta[key].is_object() {
            meta[key] = json!({});
        }
        for (k, v) in add.as_object().unwrap() {
            meta[key][k] = v.clone();
        }
    };
    merge(&mut obj["metadata"], "labels", &labels);
    let plan = json!({"kudo.dev/plan": at.plan, "kudo.dev/phase": at.phase, "kudo.dev/step": at.step,
        "kudo.dev/last-plan-execution-uid": at.uid});
    merge(&mut obj["metadata"], "annotations", &plan);
    let version = json!({"kudo.dev/operator-version": at.operator_version});
    for path in ["/spec/template", "/spec/jobTemplate/spec/template"] {
        if let Some(t) = obj.pointer_mut(path) {
            merge(&mut t["metadata"], "labels", &labels);
            merge(&mut t["metadata"], "annotations", &version);
        }
    }
    if obj["kind"] == "StatefulSet" {
        for c in obj["spec"]["volumeClaimTemplates"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            merge(&mut c["metadata"], "labels", &labels);
        }
    }
    obj["metadata"]["namespace"] = at.instance["metadata"]["namespace"].clone();
    obj["metadata"]["ownerReferences"] = json!([{"apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
        "name": name, "uid": at.instance["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]);
}

/// An object of an Apply task as KUDO's manager creates it: enhanced, its pod template's
/// dependencies hash added ([`dependencies_hash`]), POSTed with the last-applied annotation.
pub async fn apply(client: &kube::Client, mut obj: Value, at: &Step<'_>) -> Value {
    enhance(&mut obj, at);
    if let Some(hash) = dependencies_hash(client, &obj).await {
        obj["spec"]["template"]["metadata"]["annotations"]["kudo.dev/dependencies-hash"] = json!(hash);
    }
    let plural = format!("{}s", obj["kind"].as_str().unwrap().to_ascii_lowercase());
    create(client, &obj, &plural, true).await
}

/// KUDO's dependencies hash of `obj`'s pod template (pkg/engine/renderer/dependencies.go): the
/// ConfigMaps and Secrets it references through `imagePullSecrets`, `volumes[].configMap` and
/// `volumes[].secret` (not projected volumes, not env), each as KUDO last applied it (the
/// live object's last-applied annotation, else the live object; objects of other tasks, so none
/// rendered in the same task here), sanitised, written as sigs.k8s.io/yaml writes it (by the
/// Go oracle's yaml.v2), md5 each (an absent one: 16 zero bytes), sorted by kind and name, and
/// md5 over those digests. `None` when nothing is referenced.
async fn dependencies_hash(client: &kube::Client, obj: &Value) -> Option<String> {
    let spec = obj.pointer("/spec/template/spec")?;
    let mut refs = Vec::new();
    for s in spec["imagePullSecrets"].as_array().into_iter().flatten() {
        refs.push(("Secret", s["name"].as_str()?.to_string()));
    }
    for v in spec["volumes"].as_array().into_iter().flatten() {
        if let Some(n) = v.pointer("/configMap/name").and_then(Value::as_str) {
            refs.push(("ConfigMap", n.to_string()));
        }
        if let Some(n) = v.pointer("/secret/secretName").and_then(Value::as_str) {
            refs.push(("Secret", n.to_string()));
        }
    }
    if refs.is_empty() {
        return None;
    }
    refs.sort();
    let ns = obj["metadata"]["namespace"].as_str().unwrap();
    let mut digests = Vec::new();
    for (kind, name) in refs {
        let r = ar("v1", kind, &format!("{}s", kind.to_ascii_lowercase()));
        let live = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &r)
            .get_opt(&name)
            .await
            .unwrap();
        let live = live.map(|o| serde_json::to_value(o).unwrap());
        let skip = |o: &Value| {
            o["metadata"]["annotations"]
                .get("kudo.dev/skip-hash-calculation")
                .is_some()
        };
        match live {
            Some(o) if !skip(&o) => {
                let applied = o["metadata"]["annotations"]["kudo.dev/last-applied-configuration"]
                    .as_str()
                    .map(|t| serde_json::from_str(t).unwrap())
                    .unwrap_or(o);
                digests.extend(md5(go_template::to_yaml(&sanitised(applied)).as_bytes()));
            }
            _ => digests.extend([0u8; 16]),
        }
    }
    Some(md5(&digests).iter().map(|b| format!("{b:02x}")).collect())
}

/// What KUDO's hash keeps of a dependency: apimachinery's Unstructured setters applied as
/// KUDO's dependencies.go calls them (apiVersion and kind emptied, the namespace and the
/// server's metadata removed, owner references, finalizers, managed fields and annotations
/// emptied, the two counters zeroed). Kept apart from kudo-package's deps_hash on purpose: the
/// fixture states KUDO's rule itself, so a mistake in kudo-rs's shows as a changed pod template.
fn sanitised(mut o: Value) -> Value {
    o["apiVersion"] = json!("");
    o["kind"] = json!("");
    let m = o["metadata"].as_object_mut().unwrap();
    for k in [
        "namespace",
        "resourceVersion",
        "clusterName",
        "continue",
        "creationTimestamp",
        "generateName",
        "generation",
        "selfLink",
        "uid",
    ] {
        m.remove(k);
    }
    for (k, v) in [
        ("ownerReferences", json!([])),
        ("finalizers", json!([])),
        ("managedFields", json!([])),
        ("annotations", json!({})),
        ("deletionGracePeriodSeconds", json!(0)),
        ("remainingItemCount", json!(0)),
    ] {
        m.insert(k.into(), v);
    }
    o
}

/// md5 by coreutils' md5sum (the fixture uses none of kudo-rs's hashing).
fn md5(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = std::process::Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("md5sum (coreutils)");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    let hex = String::from_utf8(out.stdout).unwrap();
    (0..16)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// An Instance as KUDO's CLI creates it (label `kudo.dev/operator: operator`, the
/// OperatorVersion `ov`) with `deploy` scheduled by its webhook (run `uid`), and `status`
/// (KUDO's layout, see [`plan_status`]) written by its manager through the status subresource.
/// Returns the Instance.
pub async fn instance(
    client: &kube::Client,
    ns: &str,
    name: &str,
    operator: &str,
    ov: &str,
    uid: &str,
    status: Value,
) -> Value {
    let inst = json!({"apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
        "metadata": {"name": name, "namespace": ns, "labels": {"kudo.dev/operator": operator}},
        "spec": {"operatorVersion": {"name": ov}, "parameters": {},
            "planExecution": {"planName": "deploy", "uid": uid, "status": "IN_PROGRESS"}}});
    let inst = create(client, &inst, "instances", false).await;
    let pp = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    };
    api(client, &inst, "instances")
        .patch_status(name, &pp, &Patch::Merge(&json!({"status": status})))
        .await
        .unwrap();
    inst
}

/// KUDO's status of an Instance mid-way through `deploy` (run `uid`): one phase, `steps` with
/// their statuses, every other plan of `others` NEVER_RUN, Ready Unknown (PlanInProgress).
pub fn plan_status(uid: &str, phase: &str, steps: &[(&str, &str)], others: &[&str]) -> Value {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(n, s)| json!({"name": n, "status": s}))
        .collect();
    let mut plans = json!({"deploy": {"name": "deploy", "status": "IN_PROGRESS", "uid": uid,
        "lastUpdatedTimestamp": "2021-05-01T10:00:00Z",
        "phases": [{"name": phase, "status": "IN_PROGRESS", "steps": steps}]}});
    for p in others {
        plans[*p] = json!({"name": p, "status": "NEVER_RUN"});
    }
    json!({"planStatus": plans,
        "conditions": [{"type": "Ready", "status": "Unknown", "reason": "PlanInProgress", "message": "",
            "lastTransitionTime": "2021-05-01T10:00:00Z"}]})
}

/// An Instance of first-operator (OperatorVersion `ov`, already in `ns`) mid-plan, step
/// `everything` IN_PROGRESS, and its Deployment as KUDO's manager applied it in that run. Returns
/// the Deployment.
pub async fn first_operator(client: &kube::Client, ns: &str, name: &str, ov: &str, uid: &str) -> Value {
    let status = plan_status(uid, "main", &[("everything", "IN_PROGRESS")], &[]);
    let inst = instance(client, ns, name, "first-operator", ov, uid, status).await;
    let at = Step {
        instance: &inst,
        operator: "first-operator",
        operator_version: "0.2.0",
        plan: "deploy",
        phase: "main",
        step: "everything",
        uid,
    };
    // templates/deployment.yaml with the default parameters, as KUDO renders it.
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("{name}-nginx")},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nginx", "instance": name}},
            "template": {"metadata": {"labels": {"app": "nginx", "instance": name}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9",
                    "ports": [{"containerPort": 80}]}]}}}});
    apply(client, deploy, &at).await
}

/// Where KUDO stopped galera's deploy plan: the steps before `statefulset` COMPLETE, the
/// StatefulSet applied and its step IN_PROGRESS (KUDO waits for its pods), `cleanup` PENDING.
pub const GALERA_STEPS: [(&str, &str); 9] = [
    ("secrets", "COMPLETE"),
    ("bootstrap_config", "COMPLETE"),
    ("bootstrap_service", "COMPLETE"),
    ("bootstrap_deploy", "COMPLETE"),
    ("firstboot_config", "COMPLETE"),
    ("node_scripts", "COMPLETE"),
    ("cluster_services", "COMPLETE"),
    ("statefulset", "IN_PROGRESS"),
    ("cleanup", "PENDING"),
];

/// An Instance `name` of the galera package at `pkg` (its OperatorVersion `ov` already in `ns`)
/// stopped by KUDO in `deploy` as [`GALERA_STEPS`] says, with the objects of every step it ran
/// (COMPLETE and IN_PROGRESS) rendered by Go's text/template + Sprig from galera's defaults and
/// applied as KUDO applies them. `None` (after saying why) where the Go oracle is missing.
pub async fn galera(
    client: &kube::Client,
    pkg: &Path,
    ns: &str,
    name: &str,
    ov: &str,
    uid: &str,
) -> Option<Vec<Value>> {
    let oracle = go_template::oracle()?;
    let read = |f: &str| -> Value {
        serde_saphyr::from_str(&std::fs::read_to_string(pkg.join(f)).unwrap()).unwrap()
    };
    let (operator, params) = (read("operator.yaml"), read("params.yaml"));
    let phase = &operator["plans"]["deploy"]["phases"][0];
    let others: Vec<&str> = operator["plans"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|p| *p != "deploy")
        .map(String::as_str)
        .collect();
    let status = plan_status(uid, phase["name"].as_str().unwrap(), &GALERA_STEPS, &others);
    let inst = instance(
        client,
        ns,
        name,
        operator["name"].as_str().unwrap(),
        ov,
        uid,
        status,
    )
    .await;
    let mut written = Vec::new();
    for (step, state) in GALERA_STEPS.iter().filter(|(_, s)| *s != "PENDING") {
        let at = Step {
            instance: &inst,
            operator: operator["name"].as_str().unwrap(),
            operator_version: operator["operatorVersion"].as_str().unwrap(),
            plan: "deploy",
            phase: phase["name"].as_str().unwrap(),
            step,
            uid,
        };
        let data = template_data(&operator, &params, &at);
        let tasks = phase["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == *step)
            .unwrap()["tasks"]
            .clone();
        for task in tasks.as_array().unwrap() {
            let spec = operator["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == *task)
                .unwrap();
            assert_eq!(spec["kind"], "Apply", "galera's step {step} ({state}) applies");
            for file in spec["spec"]["resources"].as_array().unwrap() {
                let template = pkg.join("templates").join(file.as_str().unwrap());
                for obj in go_template::render(&oracle, &template, &data) {
                    written.push(apply(client, obj, &at).await);
                }
            }
        }
    }
    Some(written)
}

/// What KUDO's manager passes to an Apply task's templates (kudo-behaviour.md, "Variables"):
/// every declared parameter as a string (its default: no Instance values here; a boolean or
/// number default as Go's strconv writes it), no pipes.
fn template_data(operator: &Value, params: &Value, at: &Step) -> Value {
    let mut values = serde_json::Map::new();
    for p in params["parameters"].as_array().unwrap() {
        let v = match &p["default"] {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        values.insert(p["name"].as_str().unwrap().into(), json!(v));
    }
    json!({"Name": at.instance["metadata"]["name"], "Namespace": at.instance["metadata"]["namespace"],
        "OperatorName": operator["name"], "OperatorVersion": operator["operatorVersion"],
        "AppVersion": operator["appVersion"], "PlanName": at.plan, "PhaseName": at.phase,
        "StepName": at.step, "Params": values, "Pipes": {}})
}

/// The real Go text/template + Sprig (../shared/go-template-oracle, profile `kudo`): galera's
/// templates rendered and their YAML read the way KUDO does, so no byte of the fixture's objects
/// comes from kudo-rs's template engine or YAML reader.
mod go_template {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use serde_json::Value;

    /// `$GOTMPL_ORACLE`, else the oracle built in ../shared; missing: a failure under CI (which
    /// builds it), a skip with the reason elsewhere.
    pub fn oracle() -> Option<PathBuf> {
        let path = match std::env::var_os("GOTMPL_ORACLE") {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ => super::super::shared_dir().join("go-template-oracle/bin/gotmpl-oracle"),
        };
        if path.is_file() {
            return Some(path);
        }
        let msg = format!(
            "the Go template oracle is missing at {} (set GOTMPL_ORACLE, or run \
             ../shared/go-template-oracle/build.sh; .ci/run does both)",
            path.display()
        );
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"),
            "{msg}"
        );
        eprintln!("SKIPPED: {msg}");
        None
    }

    fn run(oracle: &Path, template: &Path, data: &Path) -> String {
        let out = Command::new(oracle)
            .args(["--profile", "kudo", "--name"])
            .arg(template.file_name().unwrap())
            .arg(template)
            .arg(data)
            .output()
            .expect("gotmpl-oracle");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {err}", template.display());
        String::from_utf8(out.stdout).unwrap()
    }

    /// `template` rendered with `data`, split into its YAML documents as KUDO's parser splits
    /// them, each read by sigs.k8s.io/yaml (YAML 1.1: `0755` is octal) into JSON; empty
    /// documents dropped.
    pub fn render(oracle: &Path, template: &Path, data: &Value) -> Vec<Value> {
        let dir = tempfile::tempdir().unwrap();
        let data_file = dir.path().join("data.json");
        std::fs::write(&data_file, data.to_string()).unwrap();
        let text = run(oracle, template, &data_file);
        let to_json = dir.path().join("to-json.tmpl");
        std::fs::write(&to_json, "{{ toJson . }}").unwrap();
        let mut out = Vec::new();
        for (i, doc) in text.split("\n---").enumerate() {
            let doc_file = dir.path().join(format!("doc{i}.yaml"));
            std::fs::write(&doc_file, doc).unwrap();
            let v: Value = serde_json::from_str(&run(oracle, &to_json, &doc_file)).unwrap();
            if !v.is_null() {
                out.push(v);
            }
        }
        out
    }

    /// `obj` as sigs.k8s.io/yaml writes it (yaml.v2's Marshal: sorted keys, Go's quoting), by
    /// the oracle's `toYaml`. Its data goes through encoding/json, so numbers are float64: equal
    /// text for the small integers a ConfigMap or Secret holds.
    pub fn to_yaml(obj: &Value) -> String {
        let oracle = oracle().expect("the oracle");
        let dir = tempfile::tempdir().unwrap();
        let (data, tmpl) = (dir.path().join("obj.json"), dir.path().join("to-yaml.tmpl"));
        std::fs::write(&data, obj.to_string()).unwrap();
        std::fs::write(&tmpl, "{{ toYaml . }}").unwrap();
        run(&oracle, &tmpl, &data)
    }
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
