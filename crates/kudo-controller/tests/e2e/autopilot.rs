//! Autopilot rules (plan field `when`, a kudo-rs extension): a watched ConfigMap is the signal.
//! The rule fires once its condition held for `for`, sets a parameter through the admission,
//! runs its plan and says so in an `AutopilotTriggered` Event; its cooldown (kept in the Instance
//! status, so it survives a manager restart) prevents a second firing; a condition that turns
//! false before `for` elapsed fires nothing; a condition that cannot be evaluated gives one
//! Warning Event and leaves the manager working.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{self, Env, Pkg};

/// A package whose `scale` plan is run by one rule on the ConfigMap `<instance>-signal`.
fn package(dir: &std::path::Path, condition: &str, for_: &str, cooldown: &str) -> std::path::PathBuf {
    Pkg::new(dir, "auto")
        .operator(&format!(
            r#"apiVersion: kudo.dev/v1beta1
name: auto
operatorVersion: "0.1.0"
kubernetesVersion: 1.15.0
tasks:
  - name: result
    kind: Apply
    spec:
      resources:
        - result.yaml
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: result
            tasks: [result]
  scale:
    strategy: serial
    when:
      - resource: {{apiVersion: v1, kind: ConfigMap, name: "{{{{ .Name }}}}-signal"}}
        condition: '{condition}'
        for: {for_}
        cooldown: {cooldown}
        setParameters: {{NODES: '{{{{ add (atoi .Params.NODES) 1 }}}}'}}
    phases:
      - name: main
        strategy: serial
        steps:
          - name: result
            tasks: [result]
"#
        ))
        .params(
            r#"apiVersion: kudo.dev/v1beta1
parameters:
  - name: NODES
    description: How many nodes.
    default: "1"
"#,
        )
        .template(
            "result.yaml",
            r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-result
data:
  nodes: "{{ .Params.NODES }}"
  plan: {{ .PlanName }}
"#,
        )
        .write()
}

async fn signal(env: &Env, instance: &str, load: &str) {
    let name = format!("{instance}-signal");
    if env.get("v1", "ConfigMap", &name).await.is_none() {
        env.create(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": harness::NS},
            "data": {"load": load}
        }))
        .await;
    } else {
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
            env.client.clone(),
            harness::NS,
            &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap")),
        );
        api.patch(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"data": {"load": load}})),
        )
        .await
        .expect("signal patched");
    }
}

async fn triggered(env: &Env, instance: &str) -> Vec<String> {
    env.events(instance)
        .await
        .into_iter()
        .filter(|(r, _)| r == "AutopilotTriggered")
        .map(|(_, n)| n)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_fires_once_after_for_sets_the_parameter_runs_the_plan_and_respects_its_cooldown() {
    let mut env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = package(dir.path(), r#"object.data.load == "high""#, "1s", "1h");
    env.install(&pkg, "ap", BTreeMap::new()).await;
    env.wait_plan("ap", "deploy", "COMPLETE").await;

    // Low load: nothing fires.
    signal(&env, "ap", "low").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(triggered(&env, "ap").await.is_empty());
    let inst = env.get("kudo.dev/v1beta1", "Instance", "ap").await.unwrap();
    assert_ne!(
        inst["status"]["planStatus"]["scale"]["status"], "COMPLETE",
        "{inst}"
    );

    // High load: after `for` the rule sets NODES=2 and runs `scale`.
    let t0 = Instant::now();
    signal(&env, "ap", "high").await;
    let inst = env.wait_plan("ap", "scale", "COMPLETE").await;
    assert!(
        t0.elapsed() >= Duration::from_secs(1),
        "fired before `for` elapsed"
    );
    assert_eq!(inst["spec"]["parameters"]["NODES"], "2", "{inst}");
    let result = env.get("v1", "ConfigMap", "ap-result").await.unwrap();
    assert_eq!(result["data"]["nodes"], "2");
    assert!(
        inst["status"]["autopilot"]["scale/0"]["lastFired"].is_string(),
        "{inst}"
    );
    let notes = triggered(&env, "ap").await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("rule scale/0"), "{}", notes[0]);
    assert!(notes[0].contains("\"scale\""), "{}", notes[0]);
    assert!(notes[0].contains("ConfigMap ap-signal"), "{}", notes[0]);
    assert!(notes[0].contains(r#"object.data.load="high""#), "{}", notes[0]);
    assert!(notes[0].contains("NODES=2"), "{}", notes[0]);

    // Cooldown (1h), across a manager restart: the condition flaps and holds again, no firing.
    env.stop_controller().await;
    env.start_controller();
    signal(&env, "ap", "low").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    signal(&env, "ap", "high").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let inst = env.get("kudo.dev/v1beta1", "Instance", "ap").await.unwrap();
    assert_eq!(triggered(&env, "ap").await.len(), 1);
    assert_eq!(inst["spec"]["parameters"]["NODES"], "2", "{inst}");
    // The rule holds (its window counts) but waits for the cooldown.
    assert!(
        inst["status"]["autopilot"]["scale/0"]["holdingSince"].is_string(),
        "{inst}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_that_turns_false_before_for_elapses_fires_nothing() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = package(dir.path(), r#"object.data.load == "high""#, "4s", "0s");
    env.install(&pkg, "flap", BTreeMap::new()).await;
    env.wait_plan("flap", "deploy", "COMPLETE").await;

    signal(&env, "flap", "high").await;
    env.wait_instance("flap", "window started", |i| {
        i["status"]["autopilot"]["scale/0"]["holdingSince"].is_string()
    })
    .await;
    signal(&env, "flap", "low").await;
    env.wait_instance("flap", "window reset", |i| {
        i["status"]["autopilot"]["scale/0"]["holdingSince"].is_null()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(triggered(&env, "flap").await.is_empty());
    let inst = env.get("kudo.dev/v1beta1", "Instance", "flap").await.unwrap();
    assert_eq!(inst["spec"]["parameters"]["NODES"], json!(null), "{inst}");
    assert_ne!(
        inst["status"]["planStatus"]["scale"]["status"], "COMPLETE",
        "{inst}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evaluation_error_is_one_warning_and_the_manager_keeps_working() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = package(dir.path(), r#"object.data.nope == "high""#, "0s", "0s");
    env.install(&pkg, "bad", BTreeMap::new()).await;
    env.wait_plan("bad", "deploy", "COMPLETE").await;

    signal(&env, "bad", "high").await;
    let inst = env
        .wait_instance("bad", "rule error recorded", |i| {
            i["status"]["autopilot"]["scale/0"]["lastError"].is_string()
        })
        .await;
    let err = inst["status"]["autopilot"]["scale/0"]["lastError"]
        .as_str()
        .unwrap();
    assert!(err.contains("when[0]") && err.contains("nope"), "{err}");
    // More changes of the object: the same error is not reported again.
    signal(&env, "bad", "higher").await;
    signal(&env, "bad", "highest").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let warnings: Vec<_> = env
        .events("bad")
        .await
        .into_iter()
        .filter(|(r, _)| r == "AutopilotRuleError")
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(triggered(&env, "bad").await.is_empty());

    // The manager still works: a user's parameter update runs its plan.
    env.patch_instance("bad", json!({"spec": {"parameters": {"NODES": "5"}}}))
        .await;
    harness::wait_for("result with NODES=5", || async {
        let r = env.get("v1", "ConfigMap", "bad-result").await?;
        (r["data"]["nodes"] == "5").then_some(())
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_setting_an_immutable_parameter_is_denied_like_a_user_update() {
    // The CLI and `package verify` refuse such a package; an OperatorVersion created directly
    // still reaches the manager, whose admission denies the change exactly as for a user.
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = package(dir.path(), r#"object.data.load == "high""#, "0s", "0s");
    let params = pkg.join("params.yaml");
    std::fs::write(
        &params,
        r#"apiVersion: kudo.dev/v1beta1
parameters:
  - name: NODES
    description: How many nodes.
    default: "1"
    immutable: true
"#,
    )
    .unwrap();
    env.install(&pkg, "imm", BTreeMap::new()).await;
    env.wait_plan("imm", "deploy", "COMPLETE").await;
    signal(&env, "imm", "high").await;
    let inst = env
        .wait_instance("imm", "denial recorded", |i| {
            i["status"]["autopilot"]["scale/0"]["lastError"].is_string()
        })
        .await;
    let err = inst["status"]["autopilot"]["scale/0"]["lastError"]
        .as_str()
        .unwrap();
    assert!(err.contains("immutable"), "{err}");
    assert_eq!(inst["spec"]["parameters"]["NODES"], "1", "{inst}");
    assert!(triggered(&env, "imm").await.is_empty());
    let reasons = env.event_reasons("imm").await;
    assert!(reasons.iter().any(|r| r == "AutopilotRuleError"), "{reasons:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_the_cluster_does_not_serve_is_the_rules_error_naming_the_kind() {
    // `package verify` cannot know which CRDs a cluster has: the manager says it.
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = package(dir.path(), "true", "0s", "0s");
    let op = pkg.join("operator.yaml");
    let text = std::fs::read_to_string(&op).unwrap().replace(
        "{apiVersion: v1, kind: ConfigMap,",
        "{apiVersion: example.com/v1, kind: Widget,",
    );
    std::fs::write(&op, text).unwrap();
    env.install(&pkg, "unk", BTreeMap::new()).await;
    env.wait_plan("unk", "deploy", "COMPLETE").await;
    let inst = env
        .wait_instance("unk", "rule error recorded", |i| {
            i["status"]["autopilot"]["scale/0"]["lastError"].is_string()
        })
        .await;
    let err = inst["status"]["autopilot"]["scale/0"]["lastError"]
        .as_str()
        .unwrap();
    assert!(
        err.contains("unknown resource kind Widget (example.com/v1)"),
        "{err}"
    );
    let notes: Vec<String> = env
        .events("unk")
        .await
        .into_iter()
        .filter(|(r, _)| r == "AutopilotRuleError")
        .map(|(_, n)| n)
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("Widget"), "{}", notes[0]);
    assert!(triggered(&env, "unk").await.is_empty());
    env.stop().await;
}
