//! Malformed Instances and OperatorVersions applied with the real kubectl
//! never wedge the manager. Each bad object ends with a status that says what is wrong, while a
//! good Instance applied at the same time (and another one afterwards) deploys, and the manager
//! keeps answering its health endpoint and stops cleanly (no panic).

use std::collections::BTreeMap;

use kudo_controller::ControllerConfig;
use serde_json::Value;

use crate::harness::{self, Env, condition, resources};

/// `kubectl apply -f` of `yaml` written to a file named `name`: (success, stdout + stderr).
fn apply(env: &Env, name: &str, yaml: &str) -> Option<(bool, String)> {
    let path = env.dir.path().join(name);
    std::fs::write(&path, yaml).unwrap();
    let out = env.kubectl_output(&["apply", "-f", path.to_str().unwrap()])?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), text))
}

/// Operator + OperatorVersion `NAME-0.1.0` with the given `spec` tail (YAML at 2 spaces under
/// `spec:`), and an Instance `INSTANCE` of it with `params` (YAML at 4 spaces under `parameters:`).
fn package(name: &str, ov_spec: &str, instance: &str, params: &str) -> String {
    format!(
        r#"apiVersion: kudo.dev/v1beta1
kind: Operator
metadata:
  name: {name}
spec:
  description: malformed on purpose
---
apiVersion: kudo.dev/v1beta1
kind: OperatorVersion
metadata:
  name: {name}-0.1.0
spec:
  operator:
    kind: Operator
    name: {name}
  version: 0.1.0
{ov_spec}
---
apiVersion: kudo.dev/v1beta1
kind: Instance
metadata:
  name: {instance}
  labels:
    kudo.dev/operator: {name}
spec:
  operatorVersion:
    name: {name}-0.1.0
  parameters:
{params}
"#
    )
}

/// A one-step deploy plan applying `cm.yaml`, whose text is `template`.
fn cm_operator(template: &str, parameters: &str) -> String {
    let indented: String = template.lines().map(|l| format!("      {l}\n")).collect();
    format!(
        r#"  templates:
    cm.yaml: |
{indented}  parameters:
{parameters}
  tasks:
    - name: app
      kind: Apply
      spec:
        resources: [cm.yaml]
  plans:
    deploy:
      strategy: serial
      phases:
        - name: main
          strategy: serial
          steps:
            - name: app
              tasks: [app]"#
    )
}

fn good_cm_template() -> &'static str {
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-cm\ndata:\n  count: \"{{ .Params.COUNT }}\"\n  mode: {{ .Params.MODE }}"
}

fn typed_params() -> &'static str {
    r#"    - name: COUNT
      value-type: integer
      default: "1"
    - name: MODE
      enum: ["fast", "safe"]
      default: fast"#
}

fn ready_false_reason(i: &Value) -> Option<(String, String)> {
    let c = condition(i, "Ready")?;
    (c["status"] == "False").then(|| {
        (
            c["reason"].as_str().unwrap_or("").to_string(),
            c["message"].as_str().unwrap_or("").to_string(),
        )
    })
}

/// The deploy plan's status and message, when it ended in FATAL_ERROR.
fn deploy_fatal(i: &Value) -> Option<String> {
    let ps = &i["status"]["planStatus"]["deploy"];
    (ps["status"] == "FATAL_ERROR").then(|| serde_json::to_string(ps).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_instances_and_operator_versions_do_not_wedge_the_manager() {
    let env = Env::start_bare(kudo_sim::SimConfig::default()).await;
    let ctl = env.spawn_controller(ControllerConfig::default(), true).await;
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/first-operator");
    let good = resources(&examples, harness::NS, "good", BTreeMap::new());
    let good_json: String = [
        serde_json::to_string(&good.operator).unwrap(),
        serde_json::to_string(&good.operator_version).unwrap(),
        serde_json::to_string(&good.instance).unwrap(),
    ]
    .join("\n");
    if apply(
        &env,
        "probe.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n",
    )
    .is_none()
    {
        return; // kubectl not installed: noted by the harness
    }

    // (a) A template that does not parse (unclosed action).
    let broken = package(
        "broken-tpl",
        &cm_operator(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }-cm",
            "    []",
        ),
        "broken-tpl",
        "    {}",
    );
    // A template that renders an object the API server refuses (a ConfigMap value that is a map).
    let refused = package(
        "refused-obj",
        &cm_operator(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-cm\ndata:\n  k:\n    nested: x",
            "    []",
        ),
        "refused-obj",
        "    {}",
    );
    // (b) Parameters of the wrong type. Not strings at all: the CRD schema refuses them (422),
    // as kube-apiserver does.
    let map_param = package(
        "typed",
        &cm_operator(good_cm_template(), typed_params()),
        "map-param",
        "    COUNT:\n      nested: 1",
    );
    let number_param = package(
        "typed",
        &cm_operator(good_cm_template(), typed_params()),
        "number-param",
        "    COUNT: 3",
    );
    // Strings the schema admits but the OperatorVersion's parameter types do not.
    let bad_values = package(
        "typed",
        &cm_operator(good_cm_template(), typed_params()),
        "bad-values",
        "    COUNT: many\n    MODE: \"7\"",
    );
    // A number for an enum parameter.
    let bad_enum = package(
        "typed",
        &cm_operator(good_cm_template(), typed_params()),
        "bad-enum",
        "    MODE: \"7\"",
    );
    // An OperatorVersion whose plans have the wrong shape (`plans` is free-form in the schema).
    let bad_plans = package(
        "bad-plans",
        "  tasks: []\n  plans:\n    deploy:\n      strategy: serial\n      phases: oops",
        "bad-plans",
        "    {}",
    );
    // An Instance whose planExecution.status is no known status (a string, so admitted).
    let bad_status = r#"apiVersion: kudo.dev/v1beta1
kind: Instance
metadata:
  name: bad-status
spec:
  operatorVersion:
    name: typed-0.1.0
  planExecution:
    planName: deploy
    status: BANANA
"#;
    // (c) An Instance of an OperatorVersion that does not exist.
    let orphan = r#"apiVersion: kudo.dev/v1beta1
kind: Instance
metadata:
  name: orphan
spec:
  operatorVersion:
    name: nowhere-0.1.0
"#;

    // Everything at once, the good package among them.
    let (ok, out) = apply(&env, "good.json", &good_json).unwrap();
    assert!(ok, "{out}");
    for (file, text) in [
        ("broken.yaml", broken.as_str()),
        ("refused.yaml", refused.as_str()),
        ("bad-values.yaml", bad_values.as_str()),
        ("bad-enum.yaml", bad_enum.as_str()),
        ("bad-plans.yaml", bad_plans.as_str()),
        ("bad-status.yaml", bad_status),
        ("orphan.yaml", orphan),
    ] {
        let (ok, out) = apply(&env, file, text).unwrap();
        assert!(ok, "kubectl apply -f {file}: {out}");
    }
    for (file, text, field, type_) in [
        (
            "map-param.yaml",
            map_param.as_str(),
            "spec.parameters.COUNT",
            "object",
        ),
        (
            "number-param.yaml",
            number_param.as_str(),
            "spec.parameters.COUNT",
            "integer",
        ),
    ] {
        let (ok, out) = apply(&env, file, text).unwrap();
        assert!(!ok, "kubectl apply -f {file} should be refused: {out}");
        assert!(
            out.contains(&format!(
                "{field}: Invalid value: \"{type_}\": {field} in body must be of type string: \"{type_}\""
            )),
            "{file}: {out}"
        );
    }
    assert!(
        env.get("kudo.dev/v1beta1", "Instance", "map-param")
            .await
            .is_none()
    );
    assert!(
        env.get("kudo.dev/v1beta1", "Instance", "number-param")
            .await
            .is_none()
    );

    env.wait_plan("good", "deploy", "COMPLETE").await;

    let i = env
        .wait_instance("broken-tpl", "deploy FATAL_ERROR", |i| deploy_fatal(i).is_some())
        .await;
    let msg = deploy_fatal(&i).unwrap();
    assert!(msg.contains("cm.yaml"), "names the template: {msg}");

    let i = env
        .wait_instance("refused-obj", "deploy FATAL_ERROR", |i| deploy_fatal(i).is_some())
        .await;
    let msg = deploy_fatal(&i).unwrap();
    assert!(
        msg.contains("apply of ConfigMap default/refused-obj-cm failed"),
        "{msg}"
    );
    assert!(
        msg.contains("cannot unmarshal object into Go struct field ConfigMap.data of type string"),
        "{msg}"
    );
    assert!(env.get("v1", "ConfigMap", "refused-obj-cm").await.is_none());

    let i = env
        .wait_instance("bad-values", "a clear status", |i| {
            deploy_fatal(i).is_some()
                || ready_false_reason(i).is_some()
                || condition(i, "ChangeAccepted").is_some()
        })
        .await;
    let shown = serde_json::to_string(&i["status"]).unwrap();
    assert!(shown.contains("COUNT"), "names the parameter: {shown}");
    for name in ["bad-values", "bad-enum"] {
        let i = env
            .wait_instance(name, "ChangeAccepted=False ChangeDenied", |i| {
                condition(i, "ChangeAccepted")
                    .is_some_and(|c| c["status"] == "False" && c["reason"] == "ChangeDenied")
            })
            .await;
        let msg = condition(&i, "ChangeAccepted").unwrap()["message"]
            .as_str()
            .unwrap()
            .to_string();
        let param = if name == "bad-enum" {
            "\"MODE\""
        } else {
            "\"COUNT\""
        };
        assert!(msg.contains(param), "{name}: names the parameter: {msg}");
        assert!(
            i["status"]["planStatus"]["deploy"].is_null(),
            "{name}: nothing ran"
        );
    }

    let i = env
        .wait_instance("bad-plans", "Ready=False InvalidOperatorVersion", |i| {
            ready_false_reason(i).is_some_and(|(r, _)| r == "InvalidOperatorVersion")
        })
        .await;
    let (_, msg) = ready_false_reason(&i).unwrap();
    assert!(
        msg.contains("bad-plans-0.1.0"),
        "names the OperatorVersion: {msg}"
    );
    assert!(msg.contains("spec.plans.deploy.phases"), "names the field: {msg}");

    let i = env
        .wait_instance("bad-status", "Ready=False InvalidInstance", |i| {
            ready_false_reason(i).is_some_and(|(r, _)| r == "InvalidInstance")
        })
        .await;
    let (_, msg) = ready_false_reason(&i).unwrap();
    assert!(msg.contains("BANANA"), "names the bad value: {msg}");
    assert!(
        msg.contains("spec.planExecution.status"),
        "names the field: {msg}"
    );

    env.wait_instance("orphan", "Ready=False OperatorVersionNotFound", |i| {
        ready_false_reason(i).is_some_and(|(r, _)| r == "OperatorVersionNotFound")
    })
    .await;

    // The manager still works: a new Instance applied now deploys, health still answers.
    let late = resources(&examples, harness::NS, "late", BTreeMap::new());
    let (ok, out) = apply(&env, "late.json", &serde_json::to_string(&late.instance).unwrap()).unwrap();
    assert!(ok, "{out}");
    env.wait_plan("late", "deploy", "COMPLETE").await;
    env.wait_ready_replicas("apps/v1", "Deployment", "late-nginx", 2)
        .await;
    assert_eq!(ctl.get("/healthz").await, (200, "ok\n".to_string()));
    assert_eq!(ctl.get("/readyz").await.0, 200);
    // `stop` asserts the controller task ended cleanly (a panic would show here).
    ctl.stop().await;
    env.stop().await;
}
