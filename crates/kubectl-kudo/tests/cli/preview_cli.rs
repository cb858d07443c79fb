//! Previews: `update`, `upgrade` and `plan trigger` with
//! `--dry-run[=client|server]` print KUDO's decision and the objects or a server-side diff, and
//! write nothing — every resourceVersion in the namespace (the Instance included) is unchanged —
//! on the embedded cluster and on a real control plane, through the real binary.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const OPERATOR: &str = r#"apiVersion: kudo.dev/v1beta1
name: preview
operatorVersion: "0.1.0"
tasks:
  - name: app
    kind: Apply
    spec:
      resources: [deployment.yaml, configmap.yaml, secret.yaml]
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: app
            tasks: [app]
  update:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: app
            tasks: [app]
"#;

const PARAMS: &str = r#"apiVersion: kudo.dev/v1beta1
parameters:
  - name: REPLICAS
    default: "1"
  - name: GREETING
    default: "hello"
  - name: PASSWORD
    default: "initial-password"
    sensitive: true
  - name: STORAGE
    default: "1Gi"
    immutable: true
"#;

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}-web
spec:
  replicas: {{ .Params.REPLICAS }}
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx
"#;

const CONFIGMAP: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-config
data:
  greeting: {{ .Params.GREETING }}
  storage: {{ .Params.STORAGE }}
"#;

const SECRET: &str = r#"apiVersion: v1
kind: Secret
metadata:
  name: {{ .Name }}-secret
stringData:
  password: {{ .Params.PASSWORD }}
"#;

fn package(dir: &Path) -> PathBuf {
    let root = dir.join("preview");
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::write(root.join("operator.yaml"), OPERATOR).unwrap();
    std::fs::write(root.join("params.yaml"), PARAMS).unwrap();
    for (f, t) in [
        ("deployment.yaml", DEPLOYMENT),
        ("configmap.yaml", CONFIGMAP),
        ("secret.yaml", SECRET),
    ] {
        std::fs::write(root.join("templates").join(f), t).unwrap();
    }
    root
}

/// Runs the binary: exit code, stdout, stderr (kept apart: the JSON output must parse alone).
fn run(home: &Path, kc: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(common::BIN)
        .args(args)
        .arg("--kubeconfig")
        .arg(kc)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run kubectl-kudo");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

type Snapshot = BTreeSet<(String, String, String)>;

/// (group/Kind, name, resourceVersion) of every object of every listable namespaced resource in
/// `ns`, found by discovery.
async fn snapshot_async(kc: &Path, ns: &str) -> Snapshot {
    use kube::api::{Api, DynamicObject};
    use kube::discovery::{Discovery, Scope, verbs};
    let kcfg = kube::config::Kubeconfig::read_from(kc).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kcfg, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let mut out = Snapshot::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if caps.scope != Scope::Namespaced || !caps.supports_operation(verbs::LIST) {
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
            let Ok(list) = api.list(&Default::default()).await else {
                continue;
            };
            for o in list.items {
                out.insert((
                    format!("{}/{}", ar.group, ar.kind),
                    o.metadata.name.unwrap_or_default(),
                    o.metadata.resource_version.unwrap_or_default(),
                ));
            }
        }
    }
    out
}

fn snapshot(kc: &Path, ns: &str) -> Snapshot {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(snapshot_async(kc, ns))
}

/// A snapshot once nothing has changed for two seconds (the manager and the workloads settle
/// after a plan), so that a difference afterwards is the preview's doing.
fn settled_snapshot(kc: &Path, ns: &str) -> Snapshot {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = snapshot(kc, ns);
    loop {
        std::thread::sleep(Duration::from_secs(2));
        let now = snapshot(kc, ns);
        if now == last {
            assert!(
                now.iter().any(|(k, n, _)| k == "kudo.dev/Instance" && n == "pv"),
                "the Instance is in the snapshot: {now:?}"
            );
            return now;
        }
        assert!(Instant::now() < deadline, "namespace {ns} never settled");
        last = now;
    }
}

fn install(home: &Path, kc: &Path, ns: &str) {
    let pkg = package(home);
    let (code, out, err) = run(
        home,
        kc,
        &[
            "install",
            pkg.to_str().unwrap(),
            "--instance",
            "pv",
            "-n",
            ns,
            "--wait",
            "--wait-time",
            "60",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
}

/// The previews every test runs (after `install`), each checked for its output; the snapshot
/// before and after must be equal.
fn previews_write_nothing(home: &Path, kc: &Path, ns: &str) {
    let before = settled_snapshot(kc, ns);

    // Server diff: the decision, then a kubectl-diff-style diff of the changed Deployment only.
    let (code, out, err) = run(
        home,
        kc,
        &[
            "update",
            "--instance",
            "pv",
            "-n",
            ns,
            "-p",
            "REPLICAS=3",
            "--dry-run=server",
            "-o",
            "diff",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("# plan update would run (parameters changed: REPLICAS)\n"),
        "{out}"
    );
    let id = format!("apps.v1.Deployment.{ns}.pv-web");
    assert!(
        out.contains(&format!(
            "diff -u -N LIVE/{id} MERGED/{id}\n--- LIVE/{id}\n+++ MERGED/{id}\n"
        )),
        "{out}"
    );
    assert!(out.contains("\n-  replicas: 1\n+  replicas: 3\n"), "{out}");
    assert!(!out.contains("managedFields"), "{out}");
    assert!(
        !out.contains(&format!("v1.ConfigMap.{ns}.pv-config")),
        "unchanged objects have no diff: {out}"
    );

    // A sensitive value: the Secret's diff is masked, the value never printed.
    let (code, out, err) = run(
        home,
        kc,
        &[
            "update",
            "--instance",
            "pv",
            "-n",
            ns,
            "-p",
            "PASSWORD=new-password-42",
            "--dry-run=server",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    // PASSWORD had its default: its source switches to pv-parameters, a parameter change.
    assert!(
        out.contains("# plan update would run (parameters changed: PASSWORD)"),
        "{out}"
    );
    assert!(
        !out.contains("new-password-42") && !out.contains("initial-password"),
        "{out}"
    );
    assert!(
        !out.contains("bmV3LXBhc3N3b3JkLTQy"),
        "no base64 of the value either: {out}"
    );
    assert!(
        out.contains("*** (after)"),
        "the Secret's changed key is masked as kubectl diff does: {out}"
    );

    // -o json: one document a script can use.
    let (code, out, err) = run(
        home,
        kc,
        &[
            "update",
            "--instance",
            "pv",
            "-n",
            ns,
            "-p",
            "GREETING=hi",
            "--dry-run=server",
            "-o",
            "json",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON output");
    assert_eq!(doc["decision"]["admitted"], true);
    assert_eq!(doc["plan"], "update");
    assert_eq!(doc["dryRun"], "server");
    assert_eq!(doc["objects"].as_array().unwrap().len(), 3, "{doc}");
    let changed: Vec<&str> = doc["diffs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["changed"] == true)
        .map(|d| d["object"].as_str().unwrap())
        .collect();
    assert_eq!(changed, [format!("v1.ConfigMap.{ns}.pv-config")], "{doc}");
    assert!(!out.contains("initial-password"), "{out}");

    // --dry-run (client) -o yaml: a YAML stream of the rendered objects, annotated.
    let (code, out, err) = run(
        home,
        kc,
        &[
            "update",
            "--instance",
            "pv",
            "-n",
            ns,
            "-p",
            "REPLICAS=2",
            "--dry-run",
            "-o",
            "yaml",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("# main/app/app (apply)"), "{out}");
    let docs: Vec<serde_json::Value> = out
        .split("\n---\n")
        .skip(1)
        .map(|d| serde_saphyr::from_str(d).expect("YAML document"))
        .collect();
    assert_eq!(docs.len(), 3, "{out}");
    assert_eq!(docs[0]["spec"]["replicas"], 2);
    assert_eq!(docs[2]["stringData"]["password"], "***");

    // Client diff: without SSA, and it says so.
    let (code, out, err) = run(
        home,
        kc,
        &[
            "update",
            "--instance",
            "pv",
            "-n",
            ns,
            "-p",
            "REPLICAS=2",
            "--dry-run=client",
            "-o",
            "diff",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("# client-side diff"), "{out}");
    assert!(out.contains("\n-  replicas: 1\n+  replicas: 2\n"), "{out}");

    // plan trigger --dry-run: a direct trigger.
    let (code, out, err) = run(
        home,
        kc,
        &[
            "plan",
            "trigger",
            "--name",
            "deploy",
            "--instance",
            "pv",
            "-n",
            ns,
            "--dry-run=server",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("# plan deploy would run (triggered directly)\n"),
        "{out}"
    );

    // upgrade --dry-run: the upgrade decision, the new image; the new OperatorVersion is not
    // created (the snapshot below covers OperatorVersions).
    let v2 = home.join("preview-v2");
    std::fs::create_dir_all(v2.join("templates")).unwrap();
    for f in [
        "operator.yaml",
        "params.yaml",
        "templates/configmap.yaml",
        "templates/secret.yaml",
    ] {
        std::fs::copy(package(home).join(f), v2.join(f)).unwrap();
    }
    let op = OPERATOR.replace("\"0.1.0\"", "\"0.2.0\"");
    std::fs::write(v2.join("operator.yaml"), op).unwrap();
    std::fs::write(
        v2.join("templates/deployment.yaml"),
        DEPLOYMENT.replace("nginx", "nginx:1.27"),
    )
    .unwrap();
    let (code, out, err) = run(
        home,
        kc,
        &[
            "upgrade",
            v2.to_str().unwrap(),
            "--instance",
            "pv",
            "-n",
            ns,
            "--dry-run=server",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with(
            "# plan update would run (operator version changes: preview-0.1.0 -> preview-0.2.0)\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("\n-      - image: nginx\n+      - image: nginx:1.27\n"),
        "{out}"
    );

    // A refused change: KUDO's message, exit 1, in text and JSON.
    let (code, out, err) = run(
        home,
        kc,
        &[
            "update",
            "--instance",
            "pv",
            "-n",
            ns,
            "-p",
            "STORAGE=2Gi",
            "--dry-run=server",
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("Error: updating instance pv:") && err.contains("immutable"),
        "{err}"
    );
    let (code, out, _) = run(
        home,
        kc,
        &[
            "update",
            "--instance",
            "pv",
            "-n",
            ns,
            "-p",
            "STORAGE=2Gi",
            "--dry-run=server",
            "-o",
            "json",
        ],
    );
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON output");
    assert_eq!(doc["decision"]["admitted"], false);
    assert!(
        doc["decision"]["message"].as_str().unwrap().contains("immutable"),
        "{doc}"
    );

    // --wait with --dry-run is refused before anything runs.
    let (code, _, err) = run(
        home,
        kc,
        &[
            "update",
            "--instance",
            "pv",
            "-n",
            ns,
            "-p",
            "REPLICAS=2",
            "--dry-run",
            "--wait",
        ],
    );
    assert_eq!(code, 1, "{err}");

    // -o manifests is upgrade's: an update refuses it.
    let (code, _, err) = run(
        home,
        kc,
        &[
            "update",
            "--instance",
            "pv",
            "-n",
            ns,
            "-p",
            "REPLICAS=2",
            "--dry-run",
            "-o",
            "manifests",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("-o manifests is for `upgrade --dry-run`"), "{err}");

    let after = snapshot(kc, ns);
    assert_eq!(before, after, "a preview wrote to namespace {ns}");
}

#[test]
fn previews_print_the_decision_and_diffs_and_write_nothing() {
    let home = tempfile::tempdir().expect("temp HOME");
    let h = home.path();
    let dev = common::start_dev(h, &[]);
    install(h, &dev.kubeconfig, "default");
    previews_write_nothing(h, &dev.kubeconfig, "default");
}

#[test]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
fn real_cluster_update_dry_run_diffs_against_the_live_objects_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let kc = kudo_testkit::real_cluster::kubeconfig();
    let ns = kudo_testkit::real_cluster::unique_namespace("preview");
    let kubectl = |args: &[&str]| {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kc)
            .args(args)
            .output()
            .expect("run kubectl")
    };
    assert!(kubectl(&["create", "namespace", &ns]).status.success());
    // Pods are refused until the namespace's default ServiceAccount exists.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !kubectl(&["-n", &ns, "get", "serviceaccount", "default"])
        .status
        .success()
    {
        assert!(Instant::now() < deadline, "no default ServiceAccount in {ns}");
        std::thread::sleep(Duration::from_millis(200));
    }
    install(home.path(), &kc, &ns);
    previews_write_nothing(home.path(), &kc, &ns);
    kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
