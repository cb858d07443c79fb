//! The embedded server is never more lenient than kube-apiserver v1.28: validation of built-in
//! objects, request limits, malformed bodies and patches, namespace defaults, table columns.
//! Every expected message here was taken from a real v1.28.7 server (see `fidelity.rs`, which
//! re-checks them against one).

use std::time::Duration;

use serde_json::{Value, json};

use crate::require_kubectl;
use crate::util::Env;

/// One raw request; the status code and the decoded body.
async fn raw(env: &Env, method: &str, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
    let client = env.client().await;
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .body(body)
        .expect("request");
    let resp = client
        .send(req.map(kube::client::Body::from))
        .await
        .expect("sent");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await.expect("body");
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn post(env: &Env, path: &str, obj: &Value) -> (u16, Value) {
    raw(
        env,
        "POST",
        path,
        "application/json",
        obj.to_string().into_bytes(),
    )
    .await
}

fn causes(status: &Value) -> Vec<(String, String)> {
    status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or("").to_string(),
                c["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn deployment(name: &str, replicas: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_replicas_are_invalid_through_kubectl() {
    require_kubectl!();
    let env = Env::start().await;
    let out = env.kubectl(&["create", "deployment", "x", "--image=nginx", "--replicas=-1"]);
    assert!(!out.status.success());
    assert!(
        Env::err(&out).contains(
            "Deployment.apps \"x\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        ),
        "{}",
        Env::err(&out)
    );
    let out = env.kubectl(&["get", "deployments", "-o", "name"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "nothing stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_labels_annotations_and_containers_are_validated() {
    let env = Env::start().await;
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "Bad_Name", "labels": {"bad key!": "v", "ok": "-bad"},
                     "annotations": {"Bad Ann": "x"}},
        "spec": {"containers": [
            {"name": "Web_1", "image": "nginx",
             "ports": [{"containerPort": 70000, "name": "TOOLONGPORTNAME123"}, {"containerPort": 0}]},
            {"name": "web2"}
        ]}
    });
    let (code, st) = post(&env, "/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(st["details"]["kind"], "Pod");
    let fields: Vec<String> = causes(&st).into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        fields,
        [
            "metadata.name",
            "metadata.labels",
            "metadata.labels",
            "metadata.annotations",
            "spec.containers[0].name",
            "spec.containers[0].ports[0].name",
            "spec.containers[0].ports[0].name",
            "spec.containers[0].ports[0].name",
            "spec.containers[0].ports[0].containerPort",
            "spec.containers[0].ports[1].containerPort",
            "spec.containers[1].image",
        ]
    );
    let c = causes(&st);
    assert!(
        c[3].1
            .starts_with("Invalid value: \"Bad Ann\": name part must consist"),
        "{:?}",
        c[3]
    );
    assert_eq!(
        c[8].1,
        "Invalid value: 70000: must be between 1 and 65535, inclusive"
    );
    assert_eq!(c[9].1, "Required value");

    // A Service name must be a DNS-1035 label (no dots, a letter first), a ConfigMap name a
    // subdomain (dots allowed).
    let (code, st) = post(
        &env,
        "/api/v1/namespaces/default/services",
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a.b"},
                "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    assert_eq!(code, 422, "{st}");
    assert!(causes(&st)[0].1.contains("a DNS-1035 label must consist"));
    let (code, _) = post(
        &env,
        "/api/v1/namespaces/default/configmaps",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a.b"}}),
    )
    .await;
    assert_eq!(code, 201);

    // Pod templates of workloads are checked too, and Job counts are non-negative.
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"backoffLimit": -2, "template": {"spec": {"restartPolicy": "Never", "containers": []}}}});
    let (code, st) = post(&env, "/apis/batch/v1/namespaces/default/jobs", &job).await;
    assert_eq!(code, 422, "{st}");
    let fields: Vec<String> = causes(&st).into_iter().map(|(f, _)| f).collect();
    assert!(
        fields.contains(&"spec.template.spec.containers".to_string()),
        "{fields:?}"
    );
    assert!(fields.contains(&"spec.backoffLimit".to_string()), "{fields:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sizes_over_the_real_limits_are_refused_and_the_server_keeps_serving() {
    let env = Env::start().await;
    let cm = |name: &str, bytes: usize| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
               "data": {"a": "x".repeat(bytes)}})
    };
    // Exactly 1 MiB of data is allowed, one byte more is not.
    let (code, _) = post(
        &env,
        "/api/v1/namespaces/default/configmaps",
        &cm("max", 1024 * 1024),
    )
    .await;
    assert_eq!(code, 201);
    let (code, st) = post(
        &env,
        "/api/v1/namespaces/default/configmaps",
        &cm("big", 1024 * 1024 + 1),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "ConfigMap \"big\" is invalid: []: Too long: must have at most 1048576 bytes"
    );
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "big"},
                        "stringData": {"a": "x".repeat(1024 * 1024 + 1)}});
    let (code, st) = post(&env, "/api/v1/namespaces/default/secrets", &secret).await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "Secret \"big\" is invalid: data: Too long: must have at most 1048576 bytes"
    );
    let ann = json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "ann", "annotations": {"a": "x".repeat(256 * 1024)}}});
    let (code, st) = post(&env, "/api/v1/namespaces/default/configmaps", &ann).await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "ConfigMap \"ann\" is invalid: metadata.annotations: Too long: must have at most 262144 bytes"
    );
    // A body over 3 MiB is refused before it is decoded.
    let (code, st) = post(
        &env,
        "/api/v1/namespaces/default/configmaps",
        &cm("huge", 4 * 1024 * 1024),
    )
    .await;
    assert_eq!(code, 413);
    assert_eq!(st["reason"], "RequestEntityTooLarge");
    assert_eq!(st["message"], "Request entity too large: limit is 3145728");
    // ... also as a patch.
    let (code, _) = raw(
        &env,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/max",
        "application/merge-patch+json",
        cm("max", 4 * 1024 * 1024).to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 413);
    let (code, _) = raw(
        &env,
        "GET",
        "/api/v1/namespaces/default/configmaps/max",
        "",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200, "still serving");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_nesting_and_malformed_bodies_are_bad_requests() {
    let env = Env::start().await;
    let depth = 10_001;
    let deep = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"deep\"}},\"x\":{}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let (code, st) = raw(
        &env,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        deep.into_bytes(),
    )
    .await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["reason"], "BadRequest");
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: deep}}\nx: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let (code, _) = raw(
        &env,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/yaml",
        yaml.into_bytes(),
    )
    .await;
    assert_eq!(code, 400);
    let (code, st) = raw(
        &env,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        b"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"".to_vec(),
    )
    .await;
    assert_eq!(code, 400);
    assert!(
        st["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error")
    );
    // Field types are those of the Go structs: a quoted replica count is a bad request.
    let (code, st) = post(
        &env,
        "/apis/apps/v1/namespaces/default/deployments",
        &deployment("d", json!("3")),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        st["message"],
        "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
    );
    let (code, _) = raw(&env, "GET", "/version", "", Vec::new()).await;
    assert_eq!(code, 200, "still serving");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_patches_get_the_real_codes() {
    let env = Env::start().await;
    let (code, _) = post(
        &env,
        "/apis/apps/v1/namespaces/default/deployments",
        &deployment("d", json!(1)),
    )
    .await;
    assert_eq!(code, 201);
    let path = "/apis/apps/v1/namespaces/default/deployments/d";
    let cases: [(&str, &str, u16, &str); 7] = [
        (
            "application/json-patch+json",
            r#"{"op":"replace"}"#,
            400,
            "BadRequest",
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"bogus","path":"/x"}]"#,
            422,
            "Invalid",
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"/spec/nope/x","value":1}]"#,
            422,
            "Invalid",
        ),
        ("application/merge-patch+json", "[1,2]", 400, "BadRequest"),
        ("application/merge-patch+json", r#"{"spec":"#, 400, "BadRequest"),
        (
            "application/strategic-merge-patch+json",
            r#"{"spec":{"replicas":"x"}}"#,
            422,
            "Invalid",
        ),
        (
            "application/merge-patch+json",
            r#"{"spec":{"replicas":-1}}"#,
            422,
            "Invalid",
        ),
    ];
    for (ct, body, want, reason) in cases {
        let (code, st) = raw(&env, "PATCH", path, ct, body.as_bytes().to_vec()).await;
        assert_eq!(
            (code, st["reason"].as_str().unwrap_or("")),
            (want, reason),
            "{ct} {body}: {st}"
        );
    }
    let (code, st) = raw(&env, "GET", path, "", Vec::new()).await;
    assert_eq!(code, 200);
    assert_eq!(st["spec"]["replicas"], 1, "nothing half-applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immutable_fields_keep_their_values() {
    require_kubectl!();
    let env = Env::start().await;
    env.apply(
        r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: s}
spec:
  serviceName: s
  selector: {matchLabels: {a: b}}
  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: nginx}]}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
"#,
        &[],
    );
    env.ok(&["create", "service", "clusterip", "svc1", "--tcp=80:80"]);
    env.ok(&["create", "job", "j1", "--image=busybox"]);
    let cases: [(&[&str], &str); 5] = [
        (
            &[
                "patch",
                "sts",
                "s",
                "--type=merge",
                "-p",
                r#"{"spec":{"serviceName":"t"}}"#,
            ],
            "The StatefulSet \"s\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        ),
        (
            &[
                "patch",
                "svc",
                "svc1",
                "--type=merge",
                "-p",
                r#"{"spec":{"clusterIP":"10.0.0.99"}}"#,
            ],
            "The Service \"svc1\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"10.0.0.99\"}: may not change once set",
        ),
        (
            &[
                "patch",
                "job",
                "j1",
                "--type=merge",
                "-p",
                r#"{"spec":{"template":{"spec":{"containers":[{"name":"j1","image":"other"}]}}}}"#,
            ],
            "spec.template: Invalid value:",
        ),
        (
            &[
                "patch",
                "job",
                "j1",
                "--type=merge",
                "-p",
                r#"{"spec":{"selector":{"matchLabels":{"x":"y"}}}}"#,
            ],
            "spec.selector: Invalid value:",
        ),
        (
            &[
                "patch",
                "pvc",
                "data",
                "--type=merge",
                "-p",
                r#"{"spec":{"accessModes":["ReadWriteMany"]}}"#,
            ],
            "The PersistentVolumeClaim \"data\" is invalid: spec: Forbidden: spec is immutable after creation",
        ),
    ];
    for (args, want) in cases {
        let out = env.kubectl(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(Env::err(&out).contains(want), "{args:?}: {}", Env::err(&out));
    }
    let replicas = env.ok(&[
        "patch",
        "sts",
        "s",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ]);
    assert!(replicas.contains("patched"), "replicas stay mutable: {replicas}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_gets_the_default_service_account_and_root_ca() {
    let env = Env::start().await;
    let client = env.client().await;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
    use kube::api::{Api, DeleteParams, PostParams};
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "fresh"}})).expect("ns"),
    )
    .await
    .expect("namespace created");
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "fresh");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "fresh");
    let wait_cm = || async {
        for _ in 0..100 {
            if let Some(cm) = cms.get_opt("kube-root-ca.crt").await.expect("get") {
                return cm;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("kube-root-ca.crt never appeared");
    };
    let cm = wait_cm().await;
    let ca = cm.data.unwrap_or_default().remove("ca.crt").unwrap_or_default();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let managers: Vec<String> = cm
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["kube-controller-manager"]);
    assert!(sas.get_opt("default").await.expect("get").is_some());
    // The pre-made namespaces have them as well, and a deleted one comes back.
    let default_sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    assert!(default_sas.get_opt("default").await.expect("get").is_some());
    cms.delete("kube-root-ca.crt", &DeleteParams::default())
        .await
        .expect("deleted");
    wait_cm().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_of_events_endpoints_and_controllerrevisions() {
    require_kubectl!();
    let env = Env::start().await;
    env.apply(
        r#"
apiVersion: v1
kind: Event
metadata: {name: ev1}
involvedObject: {kind: Pod, name: web-0, namespace: default, fieldPath: "spec.containers{web}"}
reason: Pulled
message: "  Image pulled  "
type: Normal
source: {component: kubelet, host: node-1}
count: 3
firstTimestamp: "2020-01-01T00:00:00Z"
lastTimestamp: "2020-01-01T00:00:00Z"
---
apiVersion: v1
kind: Endpoints
metadata: {name: ep}
subsets:
- addresses: [{ip: 10.1.0.1}, {ip: 10.1.0.2}]
  ports: [{port: 80, name: http}, {port: 443, name: https}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: empty}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: owner}
"#,
        &[],
    );
    let owner_uid = env
        .ok(&["get", "configmap", "owner", "-o", "jsonpath={.metadata.uid}"])
        .trim()
        .to_string();
    env.apply(
        &format!(
            r#"
apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: rev1
  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: owner, uid: "{owner_uid}", controller: true}}]
revision: 7
data: {{}}
"#
        ),
        &[],
    );
    let words = |s: String| -> Vec<Vec<String>> {
        s.lines()
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect()
    };
    let events = words(env.ok(&["get", "events", "-o", "wide"]));
    assert_eq!(
        events[0],
        [
            "LAST",
            "SEEN",
            "TYPE",
            "REASON",
            "OBJECT",
            "SUBOBJECT",
            "SOURCE",
            "MESSAGE",
            "FIRST",
            "SEEN",
            "COUNT",
            "NAME"
        ]
    );
    let ev = events
        .iter()
        .find(|r| r.last().map(String::as_str) == Some("ev1"))
        .expect("ev1 row");
    assert_eq!(
        ev[1..],
        [
            "Normal",
            "Pulled",
            "pod/web-0",
            "spec.containers{web}",
            "kubelet,",
            "node-1",
            "Image",
            "pulled",
            ev[9].as_str(),
            "3",
            "ev1"
        ]
    );
    let eps = words(env.ok(&["get", "endpoints"]));
    assert_eq!(eps[0], ["NAME", "ENDPOINTS", "AGE"]);
    let row = |name: &str| eps.iter().find(|r| r[0] == name).cloned().expect("row");
    assert_eq!(
        row("ep")[1..5],
        ["10.1.0.1:80,10.1.0.2:80,10.1.0.1:443", "+", "1", "more..."]
    );
    assert_eq!(row("empty")[1], "<none>");
    let revs = words(env.ok(&["get", "controllerrevisions"]));
    assert_eq!(revs[0], ["NAME", "CONTROLLER", "REVISION", "AGE"]);
    assert_eq!(revs[1][..3], ["rev1", "configmap/owner", "7"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_ready_column_evaluates_its_filter() {
    require_kubectl!();
    let env = Env::start().await;
    let crd = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kudo-api/crds/instances.yaml"),
    )
    .expect("Instance CRD");
    env.apply(&crd, &[]);
    env.apply(
        r#"
apiVersion: kudo.dev/v1beta1
kind: Instance
metadata: {name: inst}
spec: {operatorVersion: {name: op-1.0}}
"#,
        &[],
    );
    let status = json!({"status": {"conditions": [
        {"type": "Other", "status": "False", "lastTransitionTime": "2020-01-01T00:00:00Z", "reason": "X", "message": ""},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z", "reason": "Y", "message": ""}
    ]}});
    env.ok(&[
        "patch",
        "instance",
        "inst",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    let table = env.ok(&["get", "instances"]);
    // Empty cells print as blanks, so read the row at the READY header's offset.
    let header = table.lines().next().unwrap_or("");
    let row = table.lines().nth(1).unwrap_or("");
    let at = header.find("READY").expect("READY column");
    let cell = row.get(at..).unwrap_or("").split_whitespace().next();
    assert_eq!(cell, Some("True"), "{table}");
}

/// Server-side apply that creates the object type-checks it like an apply to an existing object:
/// a ConfigMap value that is a map never lands (the KUDO manager creates everything by apply, so a
/// template rendering such an object must fail its step, as on a real cluster).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_that_creates_is_type_checked() {
    let env = Env::start().await;
    let path = "/api/v1/namespaces/default/configmaps/typed?fieldManager=t";
    let body =
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"typed"},"data":{"k":{"nested":"x"}}}"#;
    let ct = "application/apply-patch+yaml";
    let (code, st) = raw(&env, "PATCH", path, ct, body.to_vec()).await;
    assert_eq!(
        (code, st["reason"].as_str().unwrap_or("")),
        (422, "Invalid"),
        "{st}"
    );
    assert!(
        st.to_string()
            .contains("json: cannot unmarshal object into Go struct field ConfigMap.data of type string"),
        "{st}"
    );
    let (code, _) = raw(
        &env,
        "GET",
        "/api/v1/namespaces/default/configmaps/typed",
        "",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 404, "nothing created");
    // The same answer once the object exists.
    let good = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"typed"},"data":{"k":"v"}}"#;
    let (code, _) = raw(&env, "PATCH", path, ct, good.to_vec()).await;
    assert_eq!(code, 201);
    let (code, st) = raw(&env, "PATCH", path, ct, body.to_vec()).await;
    assert_eq!(
        (code, st["reason"].as_str().unwrap_or("")),
        (422, "Invalid"),
        "{st}"
    );
}
