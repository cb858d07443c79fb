//! Sensitive parameters (a kudo-rs extension): `spec.parameterSources` resolved by the manager at
//! render time. A missing Secret makes the plan wait with a message naming the parameter and the
//! Secret; once it exists the templates see the value, which never appears in the Instance or its
//! Events.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::json;

use crate::harness::{self, Env, Pkg};

const VALUE: &str = "hunter2-Sup3rSecret";

fn package(dir: &std::path::Path) -> std::path::PathBuf {
    Pkg::new(dir, "sens")
        .operator(
            r#"apiVersion: kudo.dev/v1beta1
name: sens
operatorVersion: "0.1.0"
kubernetesVersion: 1.15.0
tasks:
  - name: app
    kind: Apply
    spec:
      resources:
        - secret.yaml
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: everything
            tasks:
              - app
"#,
        )
        .params(
            r#"apiVersion: kudo.dev/v1beta1
parameters:
  - name: PASSWORD
    description: The password.
    required: true
    sensitive: true
  - name: USER
    description: The user.
    default: admin
"#,
        )
        .template(
            "secret.yaml",
            r#"apiVersion: v1
kind: Secret
metadata:
  name: {{ .Name }}-app
stringData:
  password: {{ .Params.PASSWORD }}
  user: {{ .Params.USER }}
"#,
        )
        .write()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameter_sources_are_resolved_at_render_time_and_never_shown() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = package(dir.path());
    let res = harness::resources(&pkg, harness::NS, "sp", BTreeMap::new());
    env.create(serde_json::to_value(&res.operator).unwrap()).await;
    env.create(serde_json::to_value(&res.operator_version).unwrap())
        .await;
    let mut inst = serde_json::to_value(&res.instance).unwrap();
    inst["spec"]["parameterSources"] =
        json!({"PASSWORD": {"secretKeyRef": {"name": "db-creds", "key": "pw"}}});
    env.create(inst).await;

    // The Secret does not exist yet: the plan waits, naming the parameter and the Secret.
    let waiting = env
        .wait_instance("sp", "waiting for the Secret", |i| {
            i.to_string()
                .contains("parameter \\\"PASSWORD\\\": Secret default/db-creds not found")
        })
        .await;
    assert_ne!(waiting["status"]["planStatus"]["deploy"]["status"], "FATAL_ERROR");
    assert!(env.get("v1", "Secret", "sp-app").await.is_none());

    let b64 = base64::engine::general_purpose::STANDARD.encode(VALUE);
    env.create(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db-creds", "namespace": harness::NS},
        "data": {"pw": b64}
    }))
    .await;
    let inst = env.wait_plan("sp", "deploy", "COMPLETE").await;
    let rendered = env.get("v1", "Secret", "sp-app").await.expect("rendered Secret");
    let decoded = |k: &str| {
        let v = rendered["data"][k]
            .as_str()
            .unwrap_or_else(|| panic!("{rendered}"));
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(v).unwrap()).unwrap()
    };
    assert_eq!(decoded("password"), VALUE);
    assert_eq!(decoded("user"), "admin");

    let text = inst.to_string();
    assert!(!text.contains(VALUE), "value in the Instance: {text}");
    assert!(!text.contains(&b64), "encoded value in the Instance: {text}");
    assert!(inst["spec"]["parameters"].get("PASSWORD").is_none(), "{inst}");
    assert_eq!(
        inst["spec"]["parameterSources"]["PASSWORD"]["secretKeyRef"]["name"],
        "db-creds"
    );
    if let Some(yaml) = env.kubectl(&["get", "instance", "sp", "-o", "yaml"]) {
        assert!(!yaml.contains(VALUE), "{yaml}");
    }
    for (reason, note) in env.events("sp").await {
        assert!(!note.contains(VALUE), "{reason}: {note}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_source_fails_without_quoting_the_value() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = package(dir.path());
    let res = harness::resources(&pkg, harness::NS, "bad", BTreeMap::new());
    env.create(serde_json::to_value(&res.operator).unwrap()).await;
    env.create(serde_json::to_value(&res.operator_version).unwrap())
        .await;
    env.create(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds", "namespace": harness::NS},
        "stringData": {"other": VALUE}
    }))
    .await;
    let mut inst = serde_json::to_value(&res.instance).unwrap();
    inst["spec"]["parameterSources"] = json!({"PASSWORD": {"secretKeyRef": {"name": "creds", "key": "pw"}}});
    env.create(inst).await;
    let inst = env
        .wait_instance("bad", "waiting for the key", |i| {
            i.to_string()
                .contains("parameter \\\"PASSWORD\\\": Secret default/creds has no key \\\"pw\\\"")
        })
        .await;
    assert!(!inst.to_string().contains(VALUE));
    env.stop().await;
}

const ROTATED: &str = "rotated-Kq3NewSecret";

async fn set_secret(env: &Env, data: serde_json::Value, labels: serde_json::Value) {
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    let api: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        harness::NS,
        &kudo_kube::known_resource("", "Secret"),
    );
    api.patch(
        "db-creds",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": labels}, "stringData": data})),
    )
    .await
    .expect("secret patched");
}

fn deploy_uid(i: &serde_json::Value) -> String {
    i["status"]["planStatus"]["deploy"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn rendered_password(env: &Env) -> String {
    let s = env.get("v1", "Secret", "rot-app").await.expect("rendered Secret");
    let b = base64::engine::general_purpose::STANDARD
        .decode(s["data"]["password"].as_str().unwrap())
        .unwrap();
    String::from_utf8(b).unwrap()
}

/// Rotation: a change of the referenced Secret's data runs the parameter's trigger plan (here
/// `deploy`, KUDO's fallback) exactly once with the new value; a metadata-only change of the
/// Secret and a manager restart run nothing; what the manager remembers (an HMAC under the
/// Instance's own key) shows neither value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_the_secret_runs_the_trigger_plan_once() {
    let mut env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = package(dir.path());
    let res = harness::resources(&pkg, harness::NS, "rot", BTreeMap::new());
    env.create(serde_json::to_value(&res.operator).unwrap()).await;
    env.create(serde_json::to_value(&res.operator_version).unwrap())
        .await;
    env.create(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db-creds", "namespace": harness::NS},
        "stringData": {"pw": VALUE}
    }))
    .await;
    let mut inst = serde_json::to_value(&res.instance).unwrap();
    inst["spec"]["parameterSources"] =
        json!({"PASSWORD": {"secretKeyRef": {"name": "db-creds", "key": "pw"}}});
    env.create(inst).await;
    let first = env.wait_plan("rot", "deploy", "COMPLETE").await;
    let uid1 = deploy_uid(&first);
    assert_eq!(rendered_password(&env).await, VALUE);
    let fp = env
        .wait_instance("rot", "fingerprints recorded", |i| {
            i["metadata"]["annotations"]["kudo-rs.dev/parameter-fingerprints"].is_string()
        })
        .await;
    let fp_text = fp["metadata"]["annotations"]["kudo-rs.dev/parameter-fingerprints"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(fp_text.contains("db-creds/pw:"), "{fp_text}");
    assert!(
        env.get("v1", "Secret", "rot-parameter-fingerprint-key")
            .await
            .is_some(),
        "the key Secret exists"
    );

    // Rotate: deploy runs once more, with the new value.
    set_secret(&env, json!({"pw": ROTATED}), json!({})).await;
    let second = env
        .wait_instance("rot", "deploy re-run after the rotation", |i| {
            deploy_uid(i) != uid1 && i["status"]["planStatus"]["deploy"]["status"] == "COMPLETE"
        })
        .await;
    let uid2 = deploy_uid(&second);
    assert_eq!(rendered_password(&env).await, ROTATED);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let i = env.get("kudo.dev/v1beta1", "Instance", "rot").await.unwrap();
    assert_eq!(deploy_uid(&i), uid2, "exactly one run for one rotation: {i}");
    let rotated: Vec<String> = env
        .events("rot")
        .await
        .into_iter()
        .filter(|(r, _)| r == "ParameterRotated")
        .map(|(_, n)| n)
        .collect();
    assert_eq!(rotated.len(), 1, "{rotated:?}");
    assert!(
        rotated[0]
            .starts_with("The value of parameter(s) PASSWORD changed in their Secret: plan deploy (run "),
        "{rotated:?}"
    );
    let fp2 = i["metadata"]["annotations"]["kudo-rs.dev/parameter-fingerprints"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(fp2, fp_text, "new fingerprint recorded");

    // A metadata-only change of the Secret is not a rotation.
    set_secret(&env, json!({}), json!({"touched": "yes"})).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let i = env.get("kudo.dev/v1beta1", "Instance", "rot").await.unwrap();
    assert_eq!(deploy_uid(&i), uid2, "label change ran a plan: {i}");

    // A manager restart does not re-run anything.
    env.stop_controller().await;
    env.start_controller();
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let i = env.get("kudo.dev/v1beta1", "Instance", "rot").await.unwrap();
    assert_eq!(deploy_uid(&i), uid2, "restart re-ran a plan: {i}");

    // Neither value anywhere in the Instance (annotations included), its Events, plan status.
    let text = i.to_string();
    for v in [VALUE, ROTATED] {
        assert!(!text.contains(v), "value in the Instance: {text}");
        let b64 = base64::engine::general_purpose::STANDARD.encode(v);
        assert!(!text.contains(&b64), "encoded value in the Instance: {text}");
        for (reason, note) in env.events("rot").await {
            assert!(!note.contains(v), "{reason}: {note}");
        }
    }
    env.stop().await;
}
