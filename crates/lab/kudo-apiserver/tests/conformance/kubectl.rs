//! The real kubectl (v1.37) against the server.

use crate::require_kubectl;
use crate::util::Env;

const CM: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: demo
  labels:
    app: demo
data:
  a: one
  b: two
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_and_api_resources() {
    require_kubectl!();
    let env = Env::start().await;
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["version", "-o", "json"])).unwrap();
    assert_eq!(v["serverVersion"]["gitVersion"], "v1.37.1-kudo");
    let res = env.ok(&["api-resources"]);
    let deploy = res
        .lines()
        .find(|l| l.starts_with("deployments"))
        .expect("deployments listed");
    let cols: Vec<&str> = deploy.split_whitespace().collect();
    assert_eq!(cols, ["deployments", "deploy", "apps/v1", "true", "Deployment"]);
    let ns = res
        .lines()
        .find(|l| l.starts_with("namespaces"))
        .expect("namespaces listed");
    assert_eq!(
        ns.split_whitespace().collect::<Vec<_>>(),
        ["namespaces", "ns", "v1", "false", "Namespace"]
    );
    for expected in [
        "ingresses ing networking.k8s.io/v1 true Ingress",
        "horizontalpodautoscalers hpa autoscaling/v2 true HorizontalPodAutoscaler",
        "storageclasses sc storage.k8s.io/v1 false StorageClass",
        "poddisruptionbudgets pdb policy/v1 true PodDisruptionBudget",
        "customresourcedefinitions crd,crds apiextensions.k8s.io/v1 false CustomResourceDefinition",
        "leases coordination.k8s.io/v1 true Lease",
        "clusterroles rbac.authorization.k8s.io/v1 false ClusterRole",
        "events ev events.k8s.io/v1 true Event",
    ] {
        assert!(
            res.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == expected),
            "{expected} not in\n{res}"
        );
    }
    let names = env.ok(&["get", "namespaces", "-o", "name"]);
    for n in [
        "namespace/default",
        "namespace/kube-system",
        "namespace/kube-public",
    ] {
        assert!(names.lines().any(|l| l == n), "{n} missing from {names}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_get_describe_delete_configmap() {
    require_kubectl!();
    let env = Env::start().await;
    assert_eq!(env.apply(CM, &[]).trim(), "configmap/demo created");
    assert_eq!(env.apply(CM, &[]).trim(), "configmap/demo unchanged");
    let changed = CM.replace("  b: two\n", "  c: three\n");
    assert_eq!(env.apply(&changed, &[]).trim(), "configmap/demo configured");
    let data: serde_json::Value =
        serde_json::from_str(&env.ok(&["get", "cm", "demo", "-o", "jsonpath={.data}"])).unwrap();
    assert_eq!(data, serde_json::json!({"a": "one", "c": "three"}));
    let yaml = env.ok(&["get", "configmap", "demo", "-o", "yaml"]);
    assert!(
        yaml.contains("kubectl.kubernetes.io/last-applied-configuration"),
        "{yaml}"
    );
    let describe = env.ok(&["describe", "cm", "demo"]);
    assert!(describe.contains("Name:         demo"), "{describe}");
    assert!(describe.contains("Events:"), "{describe}");
    let table = env.ok(&["get", "cm", "demo"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "DATA", "AGE"]);
    assert!(table.lines().nth(1).unwrap().starts_with("demo"), "{table}");
    assert_eq!(
        env.ok(&["delete", "cm", "demo"]).trim(),
        "configmap \"demo\" deleted from default namespace"
    );
    let out = env.kubectl(&["get", "cm", "demo"]);
    assert!(!out.status.success());
    assert_eq!(
        Env::err(&out).trim(),
        "Error from server (NotFound): configmaps \"demo\" not found"
    );
}

const DEPLOY: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: app
        image: nginx:1.25
        env:
        - name: A
          value: a
        - name: B
          value: b
      - name: sidecar
        image: busybox:1
";

fn json_of(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_uses_strategic_merge_for_builtins() {
    require_kubectl!();
    let env = Env::start().await;
    assert_eq!(env.apply(DEPLOY, &[]).trim(), "deployment.apps/web created");
    // A controller changes replicas' status; the user edits one container and drops an env var.
    let edited = DEPLOY
        .replace("image: nginx:1.25", "image: nginx:1.26")
        .replace("        - name: B\n          value: b\n", "");
    assert_eq!(env.apply(&edited, &[]).trim(), "deployment.apps/web configured");
    let d = json_of(&env.ok(&["get", "deploy", "web", "-o", "json"]));
    let cs = d["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[0]["image"], "nginx:1.26");
    assert_eq!(cs[0]["env"], serde_json::json!([{"name": "A", "value": "a"}]));
    assert_eq!(cs[1]["name"], "sidecar");
    assert_eq!(d["metadata"]["generation"], 2);
    // Immutable selector: the server's 422 surfaces through kubectl.
    let bad = edited.replace("      app: web\n  template", "      app: other\n  template");
    let out = env.kubectl_stdin(&["apply", "-f", "-"], &bad);
    assert!(!out.status.success());
    assert!(Env::err(&out).contains("is invalid"), "{}", Env::err(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_and_field_removal() {
    require_kubectl!();
    let env = Env::start().await;
    let out = env.apply(CM, &["--server-side"]);
    assert_eq!(out.trim(), "configmap/demo serverside-applied");
    let o = json_of(&env.ok(&["get", "cm", "demo", "-o", "json", "--show-managed-fields"]));
    let managers: Vec<&str> = o["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert!(managers.contains(&"kubectl"), "{managers:?}");
    // Re-apply without `b`: the field this manager owned is removed.
    let without_b = CM.replace("  b: two\n", "");
    env.apply(&without_b, &["--server-side"]);
    let data = json_of(&env.ok(&["get", "cm", "demo", "-o", "jsonpath={.data}"]));
    assert_eq!(data, serde_json::json!({"a": "one"}));
    // Another manager changing an owned field conflicts unless forced.
    let other = without_b.replace("a: one", "a: other");
    let out = env.kubectl_stdin(
        &["apply", "-f", "-", "--server-side", "--field-manager", "someone"],
        &other,
    );
    assert!(!out.status.success());
    let err = Env::err(&out);
    assert!(err.contains("conflict"), "{err}");
    env.apply(
        &other,
        &["--server-side", "--field-manager", "someone", "--force-conflicts"],
    );
    assert_eq!(
        env.ok(&["get", "cm", "demo", "-o", "jsonpath={.data.a}"]),
        "other"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_annotate_and_patch_types() {
    require_kubectl!();
    let env = Env::start().await;
    env.apply(CM, &[]);
    assert_eq!(
        env.ok(&["label", "cm", "demo", "tier=web"]).trim(),
        "configmap/demo labeled"
    );
    assert_eq!(
        env.ok(&["annotate", "cm", "demo", "note=hi"]).trim(),
        "configmap/demo annotated"
    );
    assert_eq!(
        env.ok(&["get", "cm", "-l", "tier=web", "-o", "name"]).trim(),
        "configmap/demo"
    );
    assert_eq!(
        env.ok(&["get", "cm", "-l", "tier in (db)", "-o", "name"]).trim(),
        ""
    );
    env.ok(&["label", "cm", "demo", "tier-"]);
    assert_eq!(
        env.ok(&["get", "cm", "demo", "-o", "jsonpath={.metadata.labels}"]),
        "{\"app\":\"demo\"}"
    );
    env.ok(&[
        "patch",
        "cm",
        "demo",
        "--type=merge",
        "-p",
        "{\"data\":{\"m\":\"merge\"}}",
    ]);
    env.ok(&[
        "patch",
        "cm",
        "demo",
        "--type=json",
        "-p",
        "[{\"op\":\"add\",\"path\":\"/data/j\",\"value\":\"json\"}]",
    ]);
    env.ok(&["patch", "cm", "demo", "-p", "{\"data\":{\"s\":\"strategic\"}}"]);
    let data = json_of(&env.ok(&["get", "cm", "demo", "-o", "jsonpath={.data}"]));
    assert_eq!(
        data,
        serde_json::json!({"a": "one", "b": "two", "m": "merge", "j": "json", "s": "strategic"})
    );
    assert_eq!(
        env.ok(&["get", "cm", "demo", "-o", "jsonpath={.metadata.annotations.note}"]),
        "hi"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_errors_and_namespaces() {
    require_kubectl!();
    let env = Env::start().await;
    assert_eq!(
        env.ok(&["create", "namespace", "team"]).trim(),
        "namespace/team created"
    );
    let out = env.kubectl(&["create", "namespace", "team"]);
    assert_eq!(
        Env::err(&out).trim(),
        "Error from server (AlreadyExists): namespaces \"team\" already exists"
    );
    env.apply(CM, &["-n", "team"]);
    assert_eq!(
        // Every namespace also holds the root CA ConfigMap, as on a real cluster.
        env.ok(&[
            "get",
            "cm",
            "-A",
            "-o",
            "name",
            "--field-selector=metadata.name!=kube-root-ca.crt"
        ])
        .trim(),
        "configmap/demo"
    );
    let status = env.ok(&["get", "ns", "team", "-o", "jsonpath={.status.phase}"]);
    assert_eq!(status, "Active");
    assert_eq!(
        env.ok(&["delete", "namespace", "team"]).trim(),
        "namespace \"team\" deleted"
    );
    // kubectl delete waits for the namespace to be gone, so its content is gone too.
    let out = env.kubectl(&["get", "ns", "team"]);
    assert!(!out.status.success());
    let out = env.kubectl(&["get", "cm", "demo", "-n", "team"]);
    assert!(Env::err(&out).contains("NotFound"), "{}", Env::err(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_condition_jsonpath_and_delete() {
    require_kubectl!();
    let env = Env::start().await;
    let crd = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {color: {type: string}}}
";
    env.apply(crd, &[]);
    let out = env.ok(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=20s",
        "crd/gadgets.example.com",
    ]);
    assert_eq!(
        out.trim(),
        "customresourcedefinition.apiextensions.k8s.io/gadgets.example.com condition met"
    );
    let crds = env.ok(&["get", "crds"]);
    let header: Vec<&str> = crds.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "CREATED", "AT"]);
    assert!(
        crds.lines().nth(1).unwrap().starts_with("gadgets.example.com "),
        "{crds}"
    );
    // The new kind is usable at once, with its printer columns.
    env.apply(
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {color: blue}\n",
        &[],
    );
    let table = env.ok(&["get", "gadgets"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "COLOR", "AGE"]);
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .take(2)
            .eq(["g1", "blue"]),
        "{table}"
    );
    // Default validation is Strict and happens on the server: unknown fields are refused.
    let out = env.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g2}\nspec: {colour: blue}\n",
    );
    assert!(!out.status.success());
    assert!(
        Env::err(&out).contains("strict decoding error: unknown field \"spec.colour\""),
        "{}",
        Env::err(&out)
    );
    // Client-side apply of a changed custom resource uses a merge patch.
    assert_eq!(
        env.apply(
            "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {color: red}\n",
            &[]
        )
        .trim(),
        "gadget.example.com/g1 configured"
    );

    env.apply(CM, &[]);
    let store = env.server.store().clone();
    let changer = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(3000)).await;
        let mut cm = store
            .get_obj("v1", "ConfigMap", "default", "demo")
            .unwrap()
            .unwrap();
        cm["data"]["a"] = serde_json::json!("ready");
        store.update_obj(cm).unwrap();
    });
    let out = env.ok(&[
        "wait",
        "--for=jsonpath={.data.a}=ready",
        "--timeout=20s",
        "cm/demo",
    ]);
    assert_eq!(out.trim(), "configmap/demo condition met");
    changer.await.unwrap();

    let store = env.server.store().clone();
    let deleter = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(3000)).await;
        store.delete_obj("v1", "ConfigMap", "default", "demo").unwrap();
    });
    let out = env.ok(&["wait", "--for=delete", "--timeout=20s", "cm/demo"]);
    assert_eq!(out.trim(), "configmap/demo condition met");
    deleter.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_streams_changes() {
    require_kubectl!();
    let env = Env::start().await;
    env.apply(CM, &[]);
    let child = std::process::Command::new("kubectl")
        .env("KUBECONFIG", &env.kubeconfig)
        .env("HOME", env.dir.path())
        .args(["get", "cm", "-w", "-o", "name", "--request-timeout=4s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    env.server
        .store()
        .create_obj(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "later", "namespace": "default"}}))
        .unwrap();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| *l != "configmap/kube-root-ca.crt")
        .collect();
    assert_eq!(
        lines,
        ["configmap/demo", "configmap/later"],
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_shows_core_events() {
    require_kubectl!();
    let env = Env::start().await;
    env.apply(CM, &[]);
    let cm = env
        .server
        .store()
        .get_obj("v1", "ConfigMap", "default", "demo")
        .unwrap()
        .unwrap();
    env.server
        .store()
        .create_obj(serde_json::json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "demo.1", "namespace": "default"},
            "involvedObject": {"kind": "ConfigMap", "namespace": "default", "name": "demo", "uid": cm["metadata"]["uid"], "apiVersion": "v1"},
            "reason": "Tested", "message": "hello from the test", "type": "Normal",
            "source": {"component": "tester"}, "count": 1,
            "firstTimestamp": kudo_apiserver::meta::now_rfc3339(), "lastTimestamp": kudo_apiserver::meta::now_rfc3339()
        }))
        .unwrap();
    let d = env.ok(&["describe", "configmap", "demo"]);
    let ev_line = d
        .lines()
        .find(|l| l.contains("Tested"))
        .unwrap_or_else(|| panic!("{d}"));
    assert!(ev_line.contains("hello from the test"), "{ev_line}");
    assert!(ev_line.contains("tester"), "{ev_line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_formats() {
    require_kubectl!();
    let env = Env::start().await;
    env.apply(CM, &[]);
    let y = env.ok(&["get", "cm", "demo", "-o", "yaml"]);
    assert!(y.starts_with("apiVersion: v1\n"), "{y}");
    assert!(y.contains("kind: ConfigMap"));
    let j = json_of(&env.ok(&["get", "cm", "-o", "json"]));
    assert_eq!(j["kind"], "List");
    assert_eq!(j["items"][0]["metadata"]["name"], "demo");
    assert_eq!(
        env.ok(&["get", "cm", "demo", "-o", "jsonpath={.metadata.name}"]),
        "demo"
    );
    let wide = env.ok(&["get", "svc,cm", "-o", "wide"]);
    assert!(wide.contains("configmap/demo"), "{wide}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imperative_create_of_simple_core_kinds() {
    require_kubectl!();
    let env = Env::start().await;
    assert_eq!(
        env.ok(&[
            "create",
            "configmap",
            "cfg",
            "--from-literal=k=v",
            "--from-literal=x=y"
        ])
        .trim(),
        "configmap/cfg created"
    );
    assert_eq!(
        env.ok(&["get", "cm", "cfg", "-o", "jsonpath={.data}"]),
        "{\"k\":\"v\",\"x\":\"y\"}"
    );
    assert_eq!(
        env.ok(&["create", "secret", "generic", "sec", "--from-literal=pw=hunter2"])
            .trim(),
        "secret/sec created"
    );
    // Secret data is base64 of the literal.
    assert_eq!(
        env.ok(&["get", "secret", "sec", "-o", "jsonpath={.data.pw}"]),
        "aHVudGVyMg=="
    );
    assert_eq!(
        env.ok(&["get", "secret", "sec", "-o", "jsonpath={.type}"]),
        "Opaque"
    );
    assert_eq!(
        env.ok(&["create", "serviceaccount", "robot"]).trim(),
        "serviceaccount/robot created"
    );
    assert_eq!(
        env.ok(&[
            "get",
            "sa",
            "-o",
            "name",
            "--field-selector=metadata.name!=default"
        ])
        .trim(),
        "serviceaccount/robot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorder_events_show_in_describe() {
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    require_kubectl!();
    let env = Env::start().await;
    env.apply(CM, &[]);
    let client = env.client().await;
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), "default");
    let cm = api.get("demo").await.unwrap();
    let reporter = Reporter {
        controller: "kudo-test-controller".into(),
        instance: None,
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let reference = kube::Resource::object_ref(&cm, &());
    recorder
        .publish(
            &Event {
                type_: EventType::Normal,
                reason: "Reconciled".into(),
                note: Some("all good".into()),
                action: "Reconcile".into(),
                secondary: None,
            },
            &reference,
        )
        .await
        .unwrap();
    // Written through events.k8s.io/v1, read through core v1 by kubectl describe.
    let d = env.ok(&["describe", "cm", "demo"]);
    let line = d
        .lines()
        .find(|l| l.contains("Reconciled"))
        .unwrap_or_else(|| panic!("{d}"));
    assert!(
        line.contains("all good") && line.contains("kudo-test-controller"),
        "{line}"
    );
    let core: kube::Api<k8s_openapi::api::core::v1::Event> = kube::Api::namespaced(client.clone(), "default");
    let evs = core.list(&Default::default()).await.unwrap();
    assert_eq!(evs.items.len(), 1);
    assert_eq!(evs.items[0].involved_object.name.as_deref(), Some("demo"));
    let v1: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(client, "default");
    let evs = v1.list(&Default::default()).await.unwrap();
    assert_eq!(evs.items[0].note.as_deref(), Some("all good"));
}

/// A deleted namespace keeps its contents while `Terminating` (for the configured delay), so
/// `kubectl delete -f` of a manifest listing the namespace first still finds, and reports
/// deleted, every object after it — as on a real cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_namespace_keeps_contents_while_terminating() {
    require_kubectl!();
    let env = Env::start_with(kudo_apiserver::Config {
        namespace_termination_delay: std::time::Duration::from_secs(600),
        ..Default::default()
    })
    .await;
    let manifest = "apiVersion: v1
kind: Namespace
metadata: {name: staged}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: runner, namespace: staged}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: staged}
data: {k: v}
";
    env.apply(manifest, &[]);
    env.apply(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leftover, namespace: staged}\n",
        &[],
    );
    // --wait=false: kubectl would otherwise wait for the namespace, i.e. the whole delay.
    let out = env.kubectl_stdin(&["delete", "-f", "-", "--wait=false"], manifest);
    assert!(out.status.success(), "{}", Env::err(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "namespace \"staged\" deleted\nserviceaccount \"runner\" deleted from staged namespace\nconfigmap \"settings\" deleted from staged namespace"
    );
    assert_eq!(
        env.ok(&["get", "ns", "staged", "-o", "jsonpath={.status.phase}"]),
        "Terminating"
    );
    // Content nobody deleted is still there until the namespace controller gets to it.
    assert_eq!(
        env.ok(&[
            "get",
            "cm",
            "-n",
            "staged",
            "-o",
            "name",
            "--field-selector=metadata.name!=kube-root-ca.crt"
        ])
        .trim(),
        "configmap/leftover"
    );
}
