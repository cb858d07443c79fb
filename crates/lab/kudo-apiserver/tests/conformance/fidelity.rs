//! Differential fidelity: the same requests (raw HTTP through kube-rs, and the real kubectl)
//! against the embedded server and a real kube-apiserver v1.28.7 (`../shared/real-cluster`),
//! comparing status codes, reasons, messages, `details.causes` and printed tables after
//! normalising names, uids, ages, timestamps and IPs. Where the embedded server answers
//! differently on purpose, the case compares less (see docs/differences-from-kudo.md).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::Env;

/// One cluster under test.
struct Side {
    label: &'static str,
    client: kube::Client,
    kubeconfig: PathBuf,
    home: tempfile::TempDir,
    ns: String,
}

impl Side {
    async fn raw(&self, method: &str, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
        let req = http::Request::builder()
            .method(method)
            .uri(path.replace("{ns}", &self.ns))
            .header("Content-Type", content_type)
            .body(body)
            .expect("request");
        let resp = self
            .client
            .send(req.map(kube::client::Body::from))
            .await
            .unwrap_or_else(|e| panic!("{}: {method} {path}: {e}", self.label));
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect_bytes().await.expect("body");
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// The body with `{other-ip}` replaced by a service address other than svc1's own:
    /// the allocator picks svc1's address at random, so a fixed one could be a no-op.
    async fn body_for(&self, body: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(body);
        if !text.contains("{other-ip}") {
            return body.to_vec();
        }
        let (_, svc) = self
            .raw("GET", "/api/v1/namespaces/{ns}/services/svc1", "", Vec::new())
            .await;
        let current = svc["spec"]["clusterIP"].as_str().unwrap_or_default();
        let other = if current == "10.0.0.99" {
            "10.0.0.98"
        } else {
            "10.0.0.99"
        };
        text.replace("{other-ip}", other).into_bytes()
    }

    /// kubectl in this side's namespace; (success, stdout, stderr) with warnings dropped.
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        use std::io::Write;
        let mut c = Command::new("kubectl");
        c.env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.home.path())
            .arg("--cache-dir")
            .arg(self.home.path().join("cache"))
            .args(["-n", &self.ns])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("kubectl starts");
        let mut input = child.stdin.take().expect("stdin");
        input
            .write_all(stdin.unwrap_or("").as_bytes())
            .expect("stdin written");
        drop(input);
        let out = child.wait_with_output().expect("kubectl ends");
        let stderr: String = String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| !l.starts_with("Warning:"))
            .map(|l| format!("{l}\n"))
            .collect();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
        )
    }

    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.kubectl(args, stdin);
        assert!(ok, "{}: kubectl {args:?}: {err}", self.label);
        out
    }

    async fn eventually_ok(&self, args: &[&str]) {
        for _ in 0..150 {
            if self.kubectl(args, None).0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("{}: kubectl {args:?} never succeeded", self.label);
    }
}

/// Names, uids, timestamps, ages and IPs replaced by placeholders, blanks collapsed.
fn normalise(text: &str, ns: &str) -> String {
    let rules = [
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "<uid>",
        ),
        (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "<time>"),
        (r#"resourceVersion\\?":\\?"\d+"#, "resourceVersion\":\"<rv>"),
        (r"\b\d+\.\d+\.\d+\.\d+\b", "<ip>"),
        (r"\b\d+[ydhms](\d+[dhms])?\b", "<age>"),
        (r"[ \t]+", " "),
    ];
    let mut s = text.replace(ns, "<ns>");
    for (re, with) in rules {
        s = regex::Regex::new(re)
            .expect("regex")
            .replace_all(&s, with)
            .into_owned();
    }
    s.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

/// What a raw-request case compares.
#[derive(Clone, Copy)]
enum Compare {
    /// Code, reason, message and every cause.
    Full,
    /// Code, reason, and each cause's field and reason (messages with Go struct dumps differ).
    Shape,
    /// Code, reason, and that both messages start with this text.
    Prefix(&'static str),
    /// Code and reason only.
    CodeReason,
}

fn observe(code: u16, st: &Value, how: Compare, ns: &str) -> String {
    let reason = st["reason"].as_str().unwrap_or("");
    let message = normalise(st["message"].as_str().unwrap_or(""), ns);
    let causes = |with_message: bool| -> Vec<String> {
        st["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let mut s = format!(
                    "{} {}",
                    c["field"].as_str().unwrap_or(""),
                    c["reason"].as_str().unwrap_or("")
                );
                if with_message {
                    s.push_str(&format!(
                        " {}",
                        normalise(c["message"].as_str().unwrap_or(""), ns)
                    ));
                }
                s
            })
            .collect()
    };
    match how {
        Compare::Full if code < 300 => format!("{code}"),
        Compare::Full => format!("{code} {reason} {message} {:?}", causes(true)),
        Compare::Shape => format!("{code} {reason} {:?}", causes(false)),
        Compare::Prefix(p) => format!("{code} {reason} starts with {p:?}: {}", message.starts_with(p)),
        Compare::CodeReason => format!("{code} {reason}"),
    }
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

const FIXTURES: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: s}
spec:
  serviceName: s
  selector: {matchLabels: {a: b}}
  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: nginx}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  selector: {matchLabels: {app: d}}
  template: {metadata: {labels: {app: d}}, spec: {containers: [{name: web, image: nginx}]}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Service
metadata: {name: svc1}
spec:
  ports: [{port: 80}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: j1}
spec:
  template: {spec: {restartPolicy: Never, containers: [{name: j1, image: busybox}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: owner}
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
apiVersion: fidelity.kudo.dev/v1
kind: FidelityWidget
metadata: {name: w1}
spec: {replicas: 3, mode: fast}
status:
  conditions:
  - {type: Other, status: "False"}
  - {type: Ready, status: "True"}
---
apiVersion: fidelity.kudo.dev/v1
kind: FidelityWidget
metadata: {name: w2}
spec: {replicas: "three"}
"#;

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: fidelitywidgets.fidelity.kudo.dev}
spec:
  group: fidelity.kudo.dev
  scope: Namespaced
  names: {plural: fidelitywidgets, singular: fidelitywidget, kind: FidelityWidget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
    additionalPrinterColumns:
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Mode, type: string, jsonPath: .spec.mode}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
"#;

async fn prepare(side: &Side) {
    side.ok(&["create", "namespace", &side.ns], None);
    // Cluster-scoped and shared by runs on the real cluster: create it once.
    let (exists, _, _) = side.kubectl(&["get", "crd", "fidelitywidgets.fidelity.kudo.dev"], None);
    if !exists {
        side.ok(&["create", "-f", "-"], Some(WIDGET_CRD));
    }
    side.eventually_ok(&["get", "fidelitywidgets"]).await;
    side.ok(&["apply", "-f", "-"], Some(FIXTURES));
    let uid = |kind: &str, name: &str| side.ok(&["get", kind, name, "-o", "jsonpath={.metadata.uid}"], None);
    let (cm, sts) = (uid("configmap", "owner"), uid("statefulset", "s"));
    let revisions = format!(
        r#"
apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: rev1
  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: owner, uid: "{cm}", controller: true}}]
revision: 7
data: {{}}
---
apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: rev2
  ownerReferences: [{{apiVersion: apps/v1, kind: StatefulSet, name: s, uid: "{sts}", controller: true}}]
revision: 2
data: {{}}
---
apiVersion: v1
kind: Event
metadata: {{name: ev1}}
involvedObject: {{kind: Pod, name: web-0, namespace: {ns}, fieldPath: "spec.containers{{web}}"}}
reason: Pulled
message: "  Image pulled  "
type: Normal
source: {{component: kubelet, host: node-1}}
count: 3
firstTimestamp: "2020-01-01T00:00:00Z"
lastTimestamp: "2020-01-01T00:00:00Z"
"#,
        ns = side.ns
    );
    side.ok(&["apply", "-f", "-"], Some(&revisions));
    // The real controllers make these about a second after the namespace.
    side.eventually_ok(&["get", "serviceaccount", "default"]).await;
    side.eventually_ok(&["get", "configmap", "kube-root-ca.crt"])
        .await;
}

/// (name, method, path, content type, body, what to compare)
type RawCase = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Vec<u8>,
    Compare,
);

fn raw_cases() -> Vec<RawCase> {
    let cm = |name: &str, bytes: usize| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
               "data": {"a": "x".repeat(bytes)}})
        .to_string()
        .into_bytes()
    };
    let j = |v: Value| v.to_string().into_bytes();
    let deep = |d: usize| {
        format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"deep\"}},\"x\":{}{}}}",
            "[".repeat(d),
            "]".repeat(d)
        )
        .into_bytes()
    };
    let cms = "/api/v1/namespaces/{ns}/configmaps";
    let deps = "/apis/apps/v1/namespaces/{ns}/deployments";
    let dep = "/apis/apps/v1/namespaces/{ns}/deployments/d";
    let merge = "application/merge-patch+json";
    let jp = "application/json-patch+json";
    let smp = "application/strategic-merge-patch+json";
    let json = "application/json";
    vec![
        (
            "negative replicas",
            "POST",
            deps,
            json,
            j(deployment("neg", json!(-1))),
            Compare::Full,
        ),
        (
            "quoted replicas",
            "POST",
            deps,
            json,
            j(deployment("quoted", json!("3"))),
            Compare::Full,
        ),
        (
            "zero replicas",
            "POST",
            deps,
            json,
            j(deployment("zero", json!(0))),
            Compare::Full,
        ),
        (
            "bad names, labels, annotations, containers, ports",
            "POST",
            "/api/v1/namespaces/{ns}/pods",
            json,
            j(json!({
                "apiVersion": "v1", "kind": "Pod",
                // One label error only: kube-apiserver validates labels in Go map order, which is
                // random, so two label errors come back in either order (a red CI run, 2026-11-25).
                "metadata": {"name": "Bad_Name", "labels": {"bad key!": "v"},
                             "annotations": {"Bad Ann": "x"}},
                "spec": {"containers": [
                    {"name": "Web_1", "image": "nginx",
                     "ports": [{"containerPort": 70000, "name": "TOOLONGPORTNAME123"}, {"containerPort": 0}]},
                    {"name": "web2"}
                ]}
            })),
            Compare::Full,
        ),
        (
            "bad label value",
            "POST",
            "/api/v1/namespaces/{ns}/pods",
            json,
            j(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "bad-label-value", "labels": {"ok": "-bad"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}
            })),
            Compare::Full,
        ),
        (
            "service name with a dot",
            "POST",
            "/api/v1/namespaces/{ns}/services",
            json,
            j(
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a.b"},
                     "spec": {"ports": [{"port": 80}]}}),
            ),
            Compare::Full,
        ),
        (
            "configmap name with a dot",
            "POST",
            cms,
            json,
            j(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a.b"}})),
            Compare::Full,
        ),
        (
            "configmap data of exactly 1 MiB",
            "POST",
            cms,
            json,
            cm("max", 1024 * 1024),
            Compare::Full,
        ),
        (
            "configmap data over 1 MiB",
            "POST",
            cms,
            json,
            cm("big", 1024 * 1024 + 1),
            Compare::Full,
        ),
        (
            "secret data over 1 MiB",
            "POST",
            "/api/v1/namespaces/{ns}/secrets",
            json,
            j(
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "big"},
                     "stringData": {"a": "x".repeat(1024 * 1024 + 1)}}),
            ),
            Compare::Full,
        ),
        (
            "annotations over 256 KiB",
            "POST",
            cms,
            json,
            j(json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "ann", "annotations": {"a": "x".repeat(256 * 1024)}}})),
            Compare::Full,
        ),
        (
            "body over 3 MiB",
            "POST",
            cms,
            json,
            cm("huge", 4 * 1024 * 1024),
            Compare::Full,
        ),
        (
            "JSON nested deeper than 10000",
            "POST",
            cms,
            json,
            deep(10_001),
            Compare::Prefix(
                "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: ",
            ),
        ),
        (
            "truncated JSON",
            "POST",
            cms,
            json,
            b"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"".to_vec(),
            Compare::Prefix(
                "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: ",
            ),
        ),
        (
            "job with a negative backoffLimit",
            "POST",
            "/apis/batch/v1/namespaces/{ns}/jobs",
            json,
            j(
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "jneg"},
                "spec": {"backoffLimit": -2, "template": {"spec": {"restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "busybox"}]}}}}),
            ),
            Compare::Full,
        ),
        (
            "label value of the wrong type",
            "PUT",
            "/api/v1/namespaces/{ns}/configmaps/typed",
            json,
            j(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "typed", "labels": {"a": 1}}}),
            ),
            Compare::Full,
        ),
        (
            "JSON patch that is an object",
            "PATCH",
            dep,
            jp,
            br#"{"op":"replace"}"#.to_vec(),
            Compare::Full,
        ),
        (
            "JSON patch with an unknown op",
            "PATCH",
            dep,
            jp,
            br#"[{"op":"bogus","path":"/x"}]"#.to_vec(),
            Compare::CodeReason,
        ),
        (
            "JSON patch of a missing path",
            "PATCH",
            dep,
            jp,
            br#"[{"op":"replace","path":"/spec/nope/x","value":1}]"#.to_vec(),
            Compare::CodeReason,
        ),
        (
            "merge patch that is an array",
            "PATCH",
            dep,
            merge,
            b"[1,2]".to_vec(),
            Compare::Full,
        ),
        (
            "truncated merge patch",
            "PATCH",
            dep,
            merge,
            br#"{"spec":"#.to_vec(),
            Compare::Prefix("error decoding patch: "),
        ),
        (
            "merge patch to negative replicas",
            "PATCH",
            dep,
            merge,
            br#"{"spec":{"replicas":-1}}"#.to_vec(),
            Compare::Full,
        ),
        (
            "merge patch with a quoted count",
            "PATCH",
            dep,
            merge,
            br#"{"spec":{"replicas":"x"}}"#.to_vec(),
            Compare::Shape,
        ),
        (
            "strategic patch with a quoted count",
            "PATCH",
            dep,
            smp,
            br#"{"spec":{"replicas":"x"}}"#.to_vec(),
            Compare::CodeReason,
        ),
        (
            "deployment selector change",
            "PATCH",
            dep,
            merge,
            br#"{"spec":{"selector":{"matchLabels":{"q":"r"}}}}"#.to_vec(),
            Compare::Shape,
        ),
        (
            "statefulset serviceName change",
            "PATCH",
            "/apis/apps/v1/namespaces/{ns}/statefulsets/s",
            merge,
            br#"{"spec":{"serviceName":"t"}}"#.to_vec(),
            Compare::Full,
        ),
        (
            "statefulset replicas change",
            "PATCH",
            "/apis/apps/v1/namespaces/{ns}/statefulsets/s",
            merge,
            br#"{"spec":{"replicas":0}}"#.to_vec(),
            Compare::Full,
        ),
        (
            "service clusterIP change",
            "PATCH",
            "/api/v1/namespaces/{ns}/services/svc1",
            merge,
            br#"{"spec":{"clusterIP":"{other-ip}"}}"#.to_vec(),
            Compare::Full,
        ),
        (
            "job template change",
            "PATCH",
            "/apis/batch/v1/namespaces/{ns}/jobs/j1",
            merge,
            br#"{"spec":{"template":{"spec":{"containers":[{"name":"j1","image":"other"}]}}}}"#.to_vec(),
            Compare::Shape,
        ),
        (
            "PVC access mode change",
            "PATCH",
            "/api/v1/namespaces/{ns}/persistentvolumeclaims/data",
            merge,
            br#"{"spec":{"accessModes":["ReadWriteMany"]}}"#.to_vec(),
            Compare::Prefix(
                "PersistentVolumeClaim \"data\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests for bound claims",
            ),
        ),
        (
            "default ServiceAccount",
            "GET",
            "/api/v1/namespaces/{ns}/serviceaccounts/default",
            "",
            Vec::new(),
            Compare::Full,
        ),
        (
            "still serving",
            "GET",
            "/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt",
            "",
            Vec::new(),
            Compare::Full,
        ),
    ]
}

const KUBECTL_CASES: &[&[&str]] = &[
    &["create", "deployment", "x", "--image=nginx", "--replicas=-1"],
    &["get", "events", "--field-selector", "involvedObject.name=web-0"],
    &[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=web-0",
        "-o",
        "wide",
    ],
    &["get", "endpoints", "ep", "empty"],
    &["get", "controllerrevisions", "rev1", "rev2"],
    &["get", "fidelitywidgets"],
    &["get", "serviceaccount", "default"],
    &["get", "configmap", "kube-root-ca.crt"],
    &[
        "get",
        "configmap",
        "kube-root-ca.crt",
        "-o",
        "jsonpath={.metadata.annotations}",
    ],
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_fidelity_of_errors_and_tables() {
    crate::require_kubectl!();
    let ns = kudo_testkit::real_cluster::unique_namespace("fidelity");
    let embedded = Env::start().await;
    let sides = [
        Side {
            label: "embedded",
            client: embedded.client().await,
            kubeconfig: embedded.kubeconfig.clone(),
            home: tempfile::tempdir().expect("tempdir"),
            ns: ns.clone(),
        },
        Side {
            label: "real",
            client: kudo_testkit::real_cluster::client().await,
            kubeconfig: kudo_testkit::real_cluster::kubeconfig(),
            home: tempfile::tempdir().expect("tempdir"),
            ns: ns.clone(),
        },
    ];
    for side in &sides {
        prepare(side).await;
    }
    let mut diffs = Vec::new();
    let mut compared = 0;
    for (name, method, path, ct, body, how) in raw_cases() {
        let mut seen = Vec::new();
        for side in &sides {
            let body = side.body_for(&body).await;
            let (code, st) = side.raw(method, path, ct, body).await;
            seen.push(observe(code, &st, how, &ns));
        }
        compared += 1;
        if seen[0] != seen[1] {
            diffs.push(format!(
                "{name}:\n  embedded: {}\n  real:     {}",
                seen[0], seen[1]
            ));
        }
    }
    for args in KUBECTL_CASES {
        let mut seen = Vec::new();
        for side in &sides {
            let (ok, out, err) = side.kubectl(args, None);
            seen.push(format!(
                "ok={ok}\n{}\n{}",
                normalise(&out, &ns),
                normalise(&err, &ns)
            ));
        }
        compared += 1;
        if seen[0] != seen[1] {
            diffs.push(format!(
                "kubectl {args:?}:\n--- embedded\n{}\n--- real\n{}",
                seen[0], seen[1]
            ));
        }
    }
    // Cleanup on the shared real cluster before asserting.
    let _ = sides[1].kubectl(&["delete", "namespace", &ns, "--wait=false"], None);
    embedded.server.shutdown().await;
    assert!(
        diffs.is_empty(),
        "{} of {compared} requests answered differently:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    eprintln!("{compared} requests answered alike by the embedded and the real API server");
}
