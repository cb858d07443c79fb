//! KUDO semantics through the real binary, against `kubectl-kudo dev`, read back with the real
//! `kubectl`: the admission rules the CLI applies before it writes (KUDO's webhook refused such
//! changes synchronously), the one OperatorVersion lookup rule (an OperatorVersion in another
//! namespace), the `install --in-cluster` version pick, and the dependencies hash (a ConfigMap
//! change rolls the pods that mount it, a replica change restarts nothing).

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common;

use common::{BIN, Dev};

/// A package with an immutable, a typed, an enum and a `trigger`ed parameter; `IMAGE=busybox:fail`
/// makes the Deployment crash-loop, so the plan applying it never finishes.
fn write_package(dir: &Path, app_version: &str) {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("operator.yaml"),
        format!(
            r#"apiVersion: kudo.dev/v1beta1
name: refusal
operatorVersion: 0.1.0
appVersion: "{app_version}"
kubernetesVersion: 1.17.0
maintainers:
  - name: kudo-rs
    email: kudo-rs@example.invalid
tasks:
  - name: app
    kind: Apply
    spec:
      resources: [deployment.yaml]
  - name: note
    kind: Apply
    spec:
      resources: [configmap.yaml]
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
  backup:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: note
            tasks: [note]
"#
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("params.yaml"),
        r#"apiVersion: kudo.dev/v1beta1
parameters:
  - name: IMAGE
    default: busybox
  - name: STORAGE
    default: 1Gi
    immutable: true
  - name: REPLICAS
    type: integer
    default: 1
  - name: MODE
    enum: [fast, safe]
    default: fast
  - name: BACKUP_NAME
    default: first
    trigger: backup
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("templates/deployment.yaml"),
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}
spec:
  replicas: {{ .Params.REPLICAS }}
  selector:
    matchLabels: {app: {{ .Name }}}
  template:
    metadata:
      labels: {app: {{ .Name }}}
    spec:
      containers:
        - name: app
          image: {{ .Params.IMAGE }}
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("templates/configmap.yaml"),
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-note
data:
  backup: {{ .Params.BACKUP_NAME | quote }}
"#,
    )
    .unwrap();
}

struct Cluster {
    dev: Dev,
    home: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let home = tempfile::tempdir().expect("temp HOME");
        let dev = common::start_dev(home.path(), &[]);
        Cluster { dev, home }
    }

    fn kudo(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--kubeconfig")
            .arg(&self.dev.kubeconfig)
            .args(args)
            .env("HOME", self.home.path())
            .output()
            .expect("kubectl-kudo runs")
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .env("KUBECONFIG", &self.dev.kubeconfig)
            .env("HOME", self.home.path())
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// `kubectl get instance NAME -n NS -o jsonpath=PATH`.
    fn instance_field(&self, ns: &str, name: &str, path: &str) -> String {
        let out = self.kubectl(&[
            "get",
            "instance",
            name,
            "-n",
            ns,
            "-o",
            &format!("jsonpath={path}"),
        ]);
        assert!(
            out.status.success(),
            "kubectl get instance: {}",
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// Waits until the Instance's plan `plan` reports `status`.
    fn wait_plan(&self, ns: &str, name: &str, plan: &str, status: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let got = self.instance_field(ns, name, &format!("{{.status.planStatus.{plan}.status}}"));
            if got == status {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "plan {plan} of {ns}/{name} is {got:?}, not {status}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `args`, expects a refusal whose stderr contains `message`, and that the Instance's
/// parameters and planExecution are what they were.
fn assert_refused(c: &Cluster, args: &[&str], message: &str) {
    let before = c.instance_field("default", "r", "{.spec}");
    let out = c.kudo(args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?} must fail; stderr: {stderr}");
    assert!(
        stderr.contains(message),
        "{args:?}: stderr {stderr:?} does not contain {message:?}"
    );
    assert!(
        !text(&out.stdout).contains("was updated"),
        "{args:?} reported success"
    );
    assert_eq!(
        c.instance_field("default", "r", "{.spec}"),
        before,
        "{args:?} changed the Instance"
    );
}

#[test]
fn update_upgrade_and_trigger_refuse_what_kudo_refused_and_write_nothing() {
    let c = Cluster::start();
    let pkg = tempfile::tempdir().unwrap();
    write_package(pkg.path(), "1.0.0");
    let pkg_path = pkg.path().to_str().unwrap();
    let out = c.kudo(&["install", pkg_path, "--instance", "r", "--wait"]);
    assert!(out.status.success(), "install: {}", text(&out.stderr));

    // Immutable, unknown, wrongly typed and out-of-enum values: KUDO's webhook messages.
    assert_refused(
        &c,
        &["update", "--instance", "r", "-p", "STORAGE=2Gi"],
        "updating instance r: failed to check immutable parameters for Instance default/r: parameter 'STORAGE' is immutable but was changed from '1Gi' to '2Gi'",
    );
    assert_refused(
        &c,
        &["update", "--instance", "r", "-p", "NOPE=1"],
        "failed to update Instance default/r: failed to find parameter \"NOPE\" in the OperatorVersion",
    );
    assert_refused(
        &c,
        &["update", "--instance", "r", "-p", "REPLICAS=many"],
        "failed to validate parameters for Instance default/r",
    );
    assert_refused(
        &c,
        &["update", "--instance", "r", "-p", "MODE=reckless"],
        "failed to validate parameters for Instance default/r",
    );

    // A change that stalls (the container crash-loops): its update plan keeps running…
    let out = c.kudo(&["update", "--instance", "r", "-p", "IMAGE=busybox:fail"]);
    assert!(out.status.success(), "update IMAGE: {}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Instance r was updated."));
    c.wait_plan("default", "r", "update", "IN_PROGRESS");

    // …so a parameter triggering another plan, and triggering another plan directly, are refused.
    assert_refused(
        &c,
        &["update", "--instance", "r", "-p", "BACKUP_NAME=second"],
        "plan 'update' is scheduled (or running) and an update would trigger a different plan 'backup'",
    );
    assert_refused(
        &c,
        &["plan", "trigger", "--name", "backup", "--instance", "r"],
        "overriding currently scheduled (or running) plan 'update' with 'backup' is not supported",
    );
    // An upgrade while a plan runs, too (nothing is created: no new OperatorVersion).
    let newer = tempfile::tempdir().unwrap();
    write_package(newer.path(), "1.1.0");
    std::fs::write(
        newer.path().join("operator.yaml"),
        std::fs::read_to_string(newer.path().join("operator.yaml"))
            .unwrap()
            .replace("operatorVersion: 0.1.0", "operatorVersion: 0.2.0"),
    )
    .unwrap();
    assert_refused(
        &c,
        &["upgrade", newer.path().to_str().unwrap(), "--instance", "r"],
        "upgrade to new OperatorVersion refusal-1.1.0-0.2.0 while a plan 'update' is scheduled (or running) is not allowed",
    );
    let ovs = c.kubectl(&["get", "operatorversions", "-o", "name"]);
    assert!(
        !text(&ovs.stdout).contains("0.2.0"),
        "a refused upgrade created its OperatorVersion: {}",
        text(&ovs.stdout)
    );

    // Re-triggering the running plan itself is allowed (KUDO restarts it).
    let out = c.kudo(&["update", "--instance", "r", "-p", "IMAGE=busybox"]);
    assert!(out.status.success(), "update IMAGE back: {}", text(&out.stderr));
    c.wait_plan("default", "r", "update", "COMPLETE");
}

#[test]
fn an_operator_version_in_another_namespace_is_found_by_every_command() {
    let c = Cluster::start();
    let pkg = tempfile::tempdir().unwrap();
    write_package(pkg.path(), "1.0.0");
    for ns in ["shared-ovs", "apps"] {
        let out = c.kubectl(&["create", "namespace", ns]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = c.kudo(&[
        "install",
        pkg.path().to_str().unwrap(),
        "--skip-instance",
        "-n",
        "shared-ovs",
    ]);
    assert!(
        out.status.success(),
        "install --skip-instance: {}",
        text(&out.stderr)
    );
    let instance = r#"apiVersion: kudo.dev/v1beta1
kind: Instance
metadata:
  name: cross
  namespace: apps
spec:
  operatorVersion:
    name: refusal-1.0.0-0.1.0
    namespace: shared-ovs
"#;
    let manifest = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(manifest.path(), instance).unwrap();
    let out = c.kubectl(&["apply", "-f", manifest.path().to_str().unwrap()]);
    assert!(out.status.success(), "kubectl apply: {}", text(&out.stderr));
    c.wait_plan("apps", "cross", "deploy", "COMPLETE");

    let out = c.kudo(&["plan", "status", "--instance", "cross", "-n", "apps"]);
    assert!(out.status.success(), "plan status: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Plan deploy"),
        "plan status shows the plans of the OperatorVersion in shared-ovs: {}",
        text(&out.stdout)
    );
    let out = c.kudo(&[
        "update",
        "--instance",
        "cross",
        "-n",
        "apps",
        "-p",
        "REPLICAS=2",
        "--wait",
    ]);
    assert!(out.status.success(), "update: {}", text(&out.stderr));
    assert_eq!(
        c.instance_field("apps", "cross", "{.spec.parameters.REPLICAS}"),
        "2"
    );
    // The refusal rules see that OperatorVersion too.
    let out = c.kudo(&["update", "--instance", "cross", "-n", "apps", "-p", "STORAGE=5Gi"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("parameter 'STORAGE' is immutable"));
}

#[test]
fn install_in_cluster_picks_the_highest_app_version_by_kudo_ordering() {
    let c = Cluster::start();
    // appVersions 10.5 and 10.10: 10.10 is newer (a string comparison says the opposite).
    for app in ["10.10", "10.5"] {
        let pkg = tempfile::tempdir().unwrap();
        write_package(pkg.path(), app);
        let out = c.kudo(&["install", pkg.path().to_str().unwrap(), "--skip-instance"]);
        assert!(out.status.success(), "install {app}: {}", text(&out.stderr));
    }
    let out = c.kudo(&["install", "refusal", "--in-cluster", "--instance", "picked"]);
    assert!(
        out.status.success(),
        "install --in-cluster: {}",
        text(&out.stderr)
    );
    assert_eq!(
        c.instance_field("default", "picked", "{.spec.operatorVersion.name}"),
        "refusal-10.10-0.1.0"
    );
}

/// A StatefulSet mounting a ConfigMap whose content is the parameter CONFIG.
fn write_hash_package(dir: &Path) {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("operator.yaml"),
        r#"apiVersion: kudo.dev/v1beta1
name: hashed
operatorVersion: 0.1.0
kubernetesVersion: 1.17.0
maintainers:
  - name: kudo-rs
    email: kudo-rs@example.invalid
tasks:
  - name: config
    kind: Apply
    spec:
      resources: [configmap.yaml]
  - name: app
    kind: Apply
    spec:
      resources: [statefulset.yaml]
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: config
            tasks: [config]
          - name: app
            tasks: [app]
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("params.yaml"),
        "parameters:\n  - name: CONFIG\n    default: a\n  - name: REPLICAS\n    default: \"2\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("templates/configmap.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-conf\ndata:\n  app.conf: {{ .Params.CONFIG | quote }}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("templates/statefulset.yaml"),
        r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Name }}
spec:
  replicas: {{ .Params.REPLICAS }}
  serviceName: {{ .Name }}
  selector:
    matchLabels: {app: {{ .Name }}}
  template:
    metadata:
      labels: {app: {{ .Name }}}
    spec:
      containers:
        - name: app
          image: busybox
          volumeMounts: [{name: conf, mountPath: /etc/app}]
      volumes:
        - name: conf
          configMap: {name: {{ .Name }}-conf}
"#,
    )
    .unwrap();
}

const HASH_PATH: &str = "{.spec.template.metadata.annotations.kudo\\.dev/dependencies-hash}";

impl Cluster {
    fn get(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    }

    /// `name=uid` of the StatefulSet's pods, sorted.
    fn pod_uids(&self) -> Vec<String> {
        let out = self.get(&[
            "get",
            "pods",
            "-l",
            "app=h",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.metadata.uid}{\"\\n\"}{end}",
        ]);
        let mut v: Vec<String> = out.lines().map(str::to_string).collect();
        v.sort();
        v
    }

    fn wait_ready_pods(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = self.get(&[
                "get",
                "statefulset",
                "h",
                "-o",
                "jsonpath={.status.readyReplicas}/{.status.updatedReplicas}",
            ]);
            if ready == format!("{n}/{n}") && self.pod_uids().len() == n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "StatefulSet h: ready/updated {ready}, want {n}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[test]
fn dependencies_hash_rolls_pods_on_config_change_only() {
    let c = Cluster::start();
    let pkg = tempfile::tempdir().unwrap();
    write_hash_package(pkg.path());
    let pkg_path = pkg.path().to_str().unwrap();

    // `package render` shows the hash KUDO would set.
    let out = c.kudo(&["package", "render", pkg_path, "--instance", "h", "-o", "json"]);
    assert!(out.status.success(), "package render: {}", text(&out.stderr));
    let rendered = text(&out.stdout);
    let offline: Vec<String> = rendered
        .match_indices("\"kudo.dev/dependencies-hash\": \"")
        .map(|(i, m)| rendered[i + m.len()..i + m.len() + 32].to_string())
        .collect();
    assert_eq!(
        offline.len(),
        1,
        "exactly the StatefulSet's pod template is annotated: {rendered}"
    );

    let out = c.kudo(&["install", pkg_path, "--instance", "h", "--wait"]);
    assert!(out.status.success(), "install: {}", text(&out.stderr));
    c.wait_ready_pods(2);
    let h1 = c.get(&["get", "statefulset", "h", "-o", &format!("jsonpath={HASH_PATH}")]);
    assert_eq!(h1, offline[0], "the manager sets the hash `package render` shows");
    let pods1 = c.pod_uids();

    // Only the ConfigMap changes: the hash changes and the pods are replaced.
    let out = c.kudo(&["update", "--instance", "h", "-p", "CONFIG=b", "--wait"]);
    assert!(out.status.success(), "update CONFIG: {}", text(&out.stderr));
    let h2 = c.get(&["get", "statefulset", "h", "-o", &format!("jsonpath={HASH_PATH}")]);
    assert_ne!(h1, h2, "a ConfigMap change changes the hash");
    c.wait_ready_pods(2);
    let pods2 = c.pod_uids();
    assert!(
        pods1.iter().all(|p| !pods2.contains(p)),
        "every pod was replaced after the config change: {pods1:?} → {pods2:?}"
    );

    // Only the replica count changes: same hash, the existing pods keep running.
    let out = c.kudo(&["update", "--instance", "h", "-p", "REPLICAS=3", "--wait"]);
    assert!(out.status.success(), "update REPLICAS: {}", text(&out.stderr));
    c.wait_ready_pods(3);
    let h3 = c.get(&["get", "statefulset", "h", "-o", &format!("jsonpath={HASH_PATH}")]);
    assert_eq!(h2, h3, "a replica change leaves the hash alone");
    let pods3 = c.pod_uids();
    assert!(
        pods2.iter().all(|p| pods3.contains(p)),
        "no pod was restarted by scaling: {pods2:?} → {pods3:?}"
    );
}

#[test]
fn readiness_follows_the_workloads_while_no_plan_runs() {
    let c = Cluster::start();
    let pkg = tempfile::tempdir().unwrap();
    write_package(pkg.path(), "1.0.0");
    let out = c.kudo(&[
        "install",
        pkg.path().to_str().unwrap(),
        "--instance",
        "r",
        "--wait",
    ]);
    assert!(out.status.success(), "install: {}", text(&out.stderr));
    let ready = |want: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let got = c.instance_field(
                "default",
                "r",
                "{.status.conditions[?(@.type==\"Ready\")].status}/{.status.conditions[?(@.type==\"Ready\")].message}",
            );
            if got.starts_with(want) {
                return got;
            }
            assert!(Instant::now() < deadline, "Ready is {got:?}, want {want}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    ready("True/");
    // Someone else breaks the Deployment (KUDO's readiness e2e test does this with kubectl apply);
    // drift repair is off so the change stays, and no plan runs.
    let out = c.kubectl(&["annotate", "instance", "r", "kudo.dev/drift-policy=ignore"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = c.kubectl(&["set", "image", "deployment/r", "app=busybox:fail"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let got = ready("False/");
    assert!(
        got.contains("deployment"),
        "the reason names the Deployment: {got}"
    );
    assert_eq!(
        c.instance_field("default", "r", "{.spec.planExecution.planName}"),
        ""
    );
    // Repaired by hand: Ready again.
    let out = c.kubectl(&["set", "image", "deployment/r", "app=busybox"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    ready("True/");
}
