//! Ownership of existing objects through the real binary and the real `kubectl`: an install whose
//! rendered object already exists and is not the Instance's fails naming it and leaves it
//! unchanged; `install --take-ownership` adopts it (same UID, labels and owner reference set,
//! field ownership moved to the manager's `kudo`); an object of another Instance is refused even
//! with the flag. On `kubectl-kudo dev` and, ignored, on the real control plane.

use crate::common::{self, On};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The team's Deployment, written by `kubectl apply` before any install (the template of
/// examples/first-operator renders the same name and selector for Instance `other`).
fn team_deployment(name: &str, instance: &str, extra_meta: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n{extra_meta}spec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: nginx\n      instance: {instance}\n  template:\n    metadata:\n      labels:\n        app: nginx\n        instance: {instance}\n    spec:\n      containers:\n        - name: nginx\n          image: payments/api:7\n"
    )
}

/// A package whose one object has a fixed name, so two Instances render the same object.
fn shared_package(dir: &Path) -> PathBuf {
    let root = dir.join("shared");
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::write(
        root.join("operator.yaml"),
        "apiVersion: kudo.dev/v1beta1\nname: shared\noperatorVersion: \"0.1.0\"\ntasks:\n  - name: app\n    kind: Apply\n    spec:\n      resources: [cm.yaml]\nplans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: app\n            tasks: [app]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("params.yaml"),
        "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
    )
    .unwrap();
    std::fs::write(
        root.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared-config\ndata:\n  by: \"{{ .Name }}\"\n",
    )
    .unwrap();
    root
}

/// What the scenario waits for.
impl On<'_> {
    /// Waits until Instance `name`'s deploy plan is `want`; its status.
    async fn wait_deploy_of(&self, name: &str, want: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let inst = self.get(&["instances.kudo.dev", name]).await;
            let st = inst["status"]["planStatus"]["deploy"].clone();
            if st["status"] == want {
                return st;
            }
            assert!(Instant::now() < deadline, "deploy of {name} never {want}: {st:#}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// The message of the step that failed the plan.
fn failed_step(deploy: &Value) -> String {
    deploy["phases"][0]["steps"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["subresource"].as_str().unwrap_or_default().is_empty())
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (s("manager"), s("operation"))
        })
        .collect()
}

fn first_operator() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/first-operator")
        .display()
        .to_string()
}

/// kubectl's Deployment: refused, unchanged; then adopted with --take-ownership.
async fn refuse_then_adopt(on: &On<'_>) {
    on.kubectl(
        &["apply", "-f", "-"],
        Some(&team_deployment("other-nginx", "other", "")),
    )
    .await;
    let before = on.get(&["deployment", "other-nginx"]).await;
    let pkg = first_operator();
    let (code, out) = on.kudo(&["install", &pkg, "--instance", "other"]).await;
    assert_eq!(code, 0, "install: {out}");
    let failed = on.wait_deploy_of("other", "FATAL_ERROR").await;
    let msg = failed_step(&failed);
    let named = format!(
        "Deployment {}/other-nginx exists and is not managed by this Instance",
        on.ns
    );
    for want in [
        named.as_str(),
        "kubectl-client-side-apply (Update)",
        "--take-ownership",
    ] {
        assert!(msg.contains(want), "{want:?} not in {msg:?}");
    }
    let after = on.get(&["deployment", "other-nginx"]).await;
    // The spec and metadata as the team wrote them (a real controller-manager still writes the
    // status, so the resourceVersion may move): same generation, same managers.
    assert_eq!(
        after["metadata"]["generation"], before["metadata"]["generation"],
        "{after:#}"
    );
    assert_eq!(managers(&after), managers(&before), "{after:#}");
    assert_eq!(
        after["spec"]["template"]["spec"]["containers"][0]["image"],
        "payments/api:7"
    );
    assert_eq!(after["spec"]["replicas"], 1);
    assert!(after["metadata"]["ownerReferences"].is_null(), "{after:#}");
    assert!(after["metadata"]["labels"]["heritage"].is_null(), "{after:#}");

    let (code, out) = on.kudo(&["uninstall", "--instance", "other", "--wait"]).await;
    assert_eq!(code, 0, "uninstall: {out}");
    assert_eq!(
        on.get(&["deployment", "other-nginx"]).await["metadata"]["uid"],
        before["metadata"]["uid"]
    );
    let (code, out) = on
        .kudo(&[
            "install",
            "first-operator",
            "--in-cluster",
            "--instance",
            "other",
            "--take-ownership",
        ])
        .await;
    assert_eq!(code, 0, "install --take-ownership: {out}");
    on.wait_deploy_of("other", "COMPLETE").await;
    let adopted = on.get(&["deployment", "other-nginx"]).await;
    assert_eq!(adopted["metadata"]["uid"], before["metadata"]["uid"], "recreated");
    assert_eq!(
        adopted["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.7.9"
    );
    assert_eq!(adopted["spec"]["replicas"], 2);
    assert_eq!(adopted["metadata"]["labels"]["kudo.dev/instance"], "other");
    assert_eq!(
        adopted["metadata"]["ownerReferences"][0]["name"], "other",
        "{adopted:#}"
    );
    let m = managers(&adopted);
    assert!(m.contains(&("kudo".into(), "Apply".into())), "{m:?}");
    assert!(!m.iter().any(|(n, _)| n == "kubectl-client-side-apply"), "{m:?}");
    let kudo = adopted["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "kudo")
        .unwrap();
    assert!(kudo["fieldsV1"]["f:spec"]["f:replicas"].is_object(), "{kudo:#}");
    // One shot: the manager removed the annotation when the plan ended.
    let deadline = Instant::now() + Duration::from_secs(30);
    while on.get(&["instances.kudo.dev", "other"]).await["metadata"]["annotations"]["kudo-rs.dev/take-ownership"]
        .is_string()
    {
        assert!(Instant::now() < deadline, "the take-ownership annotation stayed");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A Helm-style Deployment (Helm's labels and annotations, manager `helm`) is adopted with the
/// flag.
async fn adopt_helm(on: &On<'_>) {
    let meta = "  labels:\n    app.kubernetes.io/managed-by: Helm\n  annotations:\n    meta.helm.sh/release-name: web\n    meta.helm.sh/release-namespace: default\n";
    on.kubectl(
        &["create", "--field-manager=helm", "-f", "-"],
        Some(&team_deployment("helm-nginx", "helm", meta)),
    )
    .await;
    let before = on.get(&["deployment", "helm-nginx"]).await;
    assert!(
        managers(&before).contains(&("helm".into(), "Update".into())),
        "{before:#}"
    );
    let (code, out) = on
        .kudo(&[
            "install",
            "first-operator",
            "--in-cluster",
            "--instance",
            "helm",
            "--take-ownership",
        ])
        .await;
    assert_eq!(code, 0, "{out}");
    on.wait_deploy_of("helm", "COMPLETE").await;
    let adopted = on.get(&["deployment", "helm-nginx"]).await;
    assert_eq!(adopted["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(adopted["metadata"]["ownerReferences"][0]["name"], "helm");
    let m = managers(&adopted);
    assert!(
        m.contains(&("kudo".into(), "Apply".into())) && !m.iter().any(|(n, _)| n == "helm"),
        "{m:?}"
    );
}

/// Another Instance's object is never adopted, even with the flag.
async fn other_instance_refused(on: &On<'_>) {
    let pkg = shared_package(on.home);
    let (code, out) = on
        .kudo(&["install", pkg.to_str().unwrap(), "--instance", "one"])
        .await;
    assert_eq!(code, 0, "{out}");
    on.wait_deploy_of("one", "COMPLETE").await;
    let before = on.get(&["configmap", "shared-config"]).await;
    let (code, out) = on
        .kudo(&[
            "install",
            "shared",
            "--in-cluster",
            "--instance",
            "two",
            "--take-ownership",
        ])
        .await;
    assert_eq!(code, 0, "{out}");
    let failed = on.wait_deploy_of("two", "FATAL_ERROR").await;
    let msg = failed_step(&failed);
    assert!(
        msg.contains(&format!(
            "ConfigMap {ns}/shared-config exists and belongs to Instance {ns}/one",
            ns = on.ns
        )),
        "{msg}"
    );
    let after = on.get(&["configmap", "shared-config"]).await;
    assert_eq!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    assert_eq!(after["data"]["by"], "one");
}

async fn scenario(on: &On<'_>) {
    refuse_then_adopt(on).await;
    adopt_helm(on).await;
    other_instance_refused(on).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_objects_are_refused_and_adopted_only_when_asked_on_dev() {
    if !common::kubectl_available() {
        eprintln!("skipped: kubectl is not on PATH");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &[]);
    let on = On {
        home: home.path(),
        kubeconfig: &dev.kubeconfig,
        ns: "default",
    };
    scenario(&on).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_existing_objects_are_refused_and_adopted_only_when_asked() {
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
    let ns = kudo_testkit::real_cluster::unique_namespace("owner");
    let on = On {
        home: home.path(),
        kubeconfig: &kubeconfig,
        ns: &ns,
    };
    on.kubectl(&["create", "namespace", &ns], None).await;
    scenario(&on).await;
    on.kubectl(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
}
