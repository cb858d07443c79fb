//! Objects of removed API versions (the embedded server, like a real current one, serves only the
//! current versions): translated and announced, or — when the translation would lose a field or
//! none is known — the step fails naming the field / apiVersion and kind, and nothing after it runs.

use std::collections::BTreeMap;

use crate::harness::{Env, Pkg};

/// Two serial steps: `first` applies `templates`, `second` a ConfigMap `after`.
fn two_steps(dir: &std::path::Path, name: &str, templates: &[(&str, &str)]) -> std::path::PathBuf {
    let resources: String = templates
        .iter()
        .map(|(n, _)| format!("        - {n}\n"))
        .collect();
    let mut pkg = Pkg::new(dir, name)
        .operator(&format!(
            r#"apiVersion: kudo.dev/v1beta1
name: {name}
operatorVersion: "0.1.0"
tasks:
  - name: first
    kind: Apply
    spec:
      resources:
{resources}  - name: second
    kind: Apply
    spec:
      resources:
        - after.yaml
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: first
            tasks:
              - first
          - name: second
            tasks:
              - second
"#
        ))
        .params("apiVersion: kudo.dev/v1beta1\nparameters: []\n")
        .template(
            "after.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: after\ndata:\n  a: b\n",
        );
    for (n, t) in templates {
        pkg = pkg.template(n, t);
    }
    pkg.write()
}

fn step_message(inst: &serde_json::Value) -> String {
    inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_pdb_version_is_translated_keeping_meaning_and_announced_once() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = two_steps(
        dir.path(),
        "pdbs",
        &[
            (
                "pdb.yaml",
                "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: sel\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app: x\n",
            ),
            (
                "empty.yaml",
                "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: empty\nspec:\n  minAvailable: 1\n  selector: {}\n",
            ),
        ],
    );
    env.install(&pkg, "pdbs", BTreeMap::new()).await;
    env.wait_plan("pdbs", "deploy", "COMPLETE").await;
    let sel = env
        .get("policy/v1", "PodDisruptionBudget", "sel")
        .await
        .expect("translated PDB");
    assert_eq!(sel["spec"]["selector"]["matchLabels"]["app"], "x");
    assert_eq!(sel["spec"]["maxUnavailable"], 1);
    // v1beta1's empty selector selected no pods; in v1 an empty one selects all, an absent none
    let empty = env
        .get("policy/v1", "PodDisruptionBudget", "empty")
        .await
        .unwrap();
    assert!(empty["spec"].get("selector").is_none(), "{}", empty["spec"]);
    assert!(env.get("v1", "ConfigMap", "after").await.is_some());
    let events: Vec<(String, String)> = env
        .events("pdbs")
        .await
        .into_iter()
        .filter(|(r, _)| r == "APIVersionTranslated")
        .collect();
    assert_eq!(events.len(), 2, "one Event per translated object: {events:?}");
    for (_, note) in &events {
        assert!(
            note.contains("policy/v1beta1") && note.contains("applied as policy/v1"),
            "{note}"
        );
    }
    let ev = env.instance_events("pdbs").await;
    for e in ev
        .iter()
        .filter(|e| e.reason.as_deref() == Some("APIVersionTranslated"))
    {
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        // announced once per plan run, although the plan was rendered at every reconcile
        assert!(e.series.is_none(), "{e:?}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lossy_translation_fails_the_step_naming_the_field_and_nothing_after_runs() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = two_steps(
        dir.path(),
        "lossy",
        &[
            (
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: before\ndata:\n  a: b\n",
            ),
            (
                "deploy.yaml",
                "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  rollbackTo:\n    revision: 2\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: c\n        image: nginx:1.25\n",
            ),
        ],
    );
    env.install(&pkg, "lossy", BTreeMap::new()).await;
    let inst = env.wait_plan("lossy", "deploy", "FATAL_ERROR").await;
    let msg = step_message(&inst);
    assert!(msg.contains("spec.rollbackTo"), "{msg}");
    assert!(
        msg.contains("extensions/v1beta1") && msg.contains("\"web\""),
        "{msg}"
    );
    // nothing of the failed step, nothing after it
    assert!(env.get("v1", "ConfigMap", "before").await.is_none());
    assert!(env.get("apps/v1", "Deployment", "web").await.is_none());
    assert!(env.get("v1", "ConfigMap", "after").await.is_none());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unserved_version_without_translation_fails_naming_api_version_and_kind() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = two_steps(
        dir.path(),
        "psp",
        &[(
            "psp.yaml",
            "apiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata:\n  name: restricted\nspec:\n  privileged: false\n",
        )],
    );
    env.install(&pkg, "psp", BTreeMap::new()).await;
    let inst = env.wait_plan("psp", "deploy", "FATAL_ERROR").await;
    let msg = step_message(&inst);
    assert!(
        msg.contains("policy/v1beta1") && msg.contains("PodSecurityPolicy"),
        "{msg}"
    );
    assert!(env.get("v1", "ConfigMap", "after").await.is_none());
    env.stop().await;
}
