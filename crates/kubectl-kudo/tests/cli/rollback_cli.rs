//! Revision history and rollback through the real binary: every admitted
//! run becomes a ControllerRevision owned by the Instance, `history` lists them, and `rollback`
//! restores an earlier revision's values — restarting a stuck plan when the rollback runs that
//! same plan, refusing (then, with --force, cancelling) a running plan when the package's own
//! `rollback` plan runs instead. On the embedded cluster (`kubectl-kudo dev`) and, ignored, on
//! the real control plane; the tutorial's rollback of a failed Galera upgrade runs on the
//! embedded cluster only (the real-node stage runs Galera on real pods).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{kudo_in as kudo, start_dev};

const OPERATOR: &str = r#"apiVersion: kudo.dev/v1beta1
name: keeper
operatorVersion: "0.1.0"
tasks:
  - name: app
    kind: Apply
    spec:
      resources: [deploy.yaml]
  - name: marker
    kind: Apply
    spec:
      resources: [marker.yaml]
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: app
            tasks: [app]
"#;

/// Appended for the variant whose package has its own `rollback` plan: it records what the
/// templates saw of the rollback, then applies the app.
const ROLLBACK_PLAN: &str = r#"  rollback:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: marker
            tasks: [marker]
          - name: app
            tasks: [app]
"#;

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}-app
spec:
  replicas: 1
  selector:
    matchLabels: {app: keeper}
  template:
    metadata:
      labels: {app: keeper}
    spec:
      containers:
        - name: app
          image: busybox
          command: ["sh", "-c", {{ .Params.CMD | quote }}]
"#;

const MARKER: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-rolled-back
data:
  from: "{{ .Rollback.FromRevision }}"
  to: "{{ .Rollback.ToRevision }}"
  cmd: {{ .Params.CMD | quote }}
"#;

pub(crate) fn package(root: &Path, with_rollback_plan: bool) -> PathBuf {
    let dir = root.join(if with_rollback_plan { "keeper-rb" } else { "keeper" });
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    let mut operator = OPERATOR.to_string();
    if with_rollback_plan {
        operator.push_str(ROLLBACK_PLAN);
    }
    std::fs::write(dir.join("operator.yaml"), operator).unwrap();
    std::fs::write(
        dir.join("params.yaml"),
        "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: CMD\n    default: sleep 3600\n",
    )
    .unwrap();
    std::fs::write(dir.join("templates/deploy.yaml"), DEPLOYMENT).unwrap();
    std::fs::write(dir.join("templates/marker.yaml"), MARKER).unwrap();
    dir
}

fn kubectl(kubeconfig: &Path, ns: &str, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-n", ns])
        .args(args)
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `history -o json` of Instance `k` as (plan, status, by, change) per revision, oldest first.
fn history(home: &Path, kc: &Path, ns: &str) -> Vec<(String, String, String, String)> {
    history_of(home, kc, ns, "k")
}

fn history_of(home: &Path, kc: &Path, ns: &str, instance: &str) -> Vec<(String, String, String, String)> {
    let (code, out, err) = kudo(home, kc, ns, &["history", "--instance", instance, "-o", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let revs: Vec<serde_json::Value> = serde_json::from_str(&out).expect("history -o json");
    let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    revs.iter()
        .enumerate()
        .map(|(i, r)| {
            assert_eq!(r["revision"], i as u64 + 1, "{out}");
            (
                s(&r["plan"]),
                s(&r["status"]),
                s(&r["startedBy"]["by"]),
                s(&r["change"]),
            )
        })
        .collect()
}

/// Waits until the Instance's deploy plan is IN_PROGRESS on a run with the stalling command.
fn wait_stuck(home: &Path, kc: &Path, ns: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, out, _) = kudo(home, kc, ns, &["plan", "status", "--instance", "k"]);
        if out.contains("Plan deploy") && out.contains("IN_PROGRESS") {
            return;
        }
        assert!(Instant::now() < deadline, "the stalling update never ran:\n{out}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn row(plan: &str, status: &str, by: &str, change: &str) -> (String, String, String, String) {
    (plan.into(), status.into(), by.into(), change.into())
}

/// Install, a good update, a stalling update, then rollback: `stall` is a CMD whose Deployment
/// never becomes available on that cluster. Without a package `rollback` plan the rollback's
/// plan is the stuck `deploy` itself, so it restarts it with the restored values.
fn a_stuck_update_is_rolled_back(home: &Path, kc: &Path, ns: &str, stall: &str) {
    let pkg = package(home, false);
    let wait = ["--wait", "--wait-time", "120"];
    let (code, out, err) = kudo(
        home,
        kc,
        ns,
        &[&["install", pkg.to_str().unwrap(), "--instance", "k"][..], &wait].concat(),
    );
    assert_eq!(code, 0, "install: {out}{err}");
    let (code, out, err) = kudo(
        home,
        kc,
        ns,
        &[&["update", "--instance", "k", "-p", "CMD=sleep 1800"][..], &wait].concat(),
    );
    assert_eq!(code, 0, "update: {out}{err}");
    let stall_param = format!("CMD={stall}");
    let (code, out, err) = kudo(home, kc, ns, &["update", "--instance", "k", "-p", &stall_param]);
    assert_eq!(code, 0, "stalling update: {out}{err}");
    wait_stuck(home, kc, ns);

    let (code, out, err) = kudo(
        home,
        kc,
        ns,
        &["rollback", "--instance", "k", "--to-revision", "99"],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("revision 99 does not exist (revisions: 1, 2, 3)"),
        "{err}"
    );

    // A server-side preview first: the decision and the Deployment's diff, nothing written.
    let rv = || {
        kubectl(
            kc,
            ns,
            &[
                "get",
                "instance",
                "k",
                "-o",
                "jsonpath={.metadata.resourceVersion}",
            ],
        )
    };
    let before = rv();
    let (code, out, err) = kudo(
        home,
        kc,
        ns,
        &["rollback", "--instance", "k", "--dry-run=server", "-o", "json"],
    );
    assert_eq!(code, 0, "rollback --dry-run: {out}{err}");
    let preview: serde_json::Value = serde_json::from_str(&out).expect("preview json");
    assert_eq!(preview["plan"], "deploy", "{preview}");
    let diff = preview["diffs"].to_string();
    assert!(diff.contains("sleep 1800"), "{diff}");
    assert_eq!(rv(), before, "a preview writes nothing");
    assert_eq!(history(home, kc, ns).len(), 3, "a preview records no revision");

    let (code, out, err) = kudo(
        home,
        kc,
        ns,
        &[&["rollback", "--instance", "k"][..], &wait].concat(),
    );
    assert_eq!(code, 0, "rollback: {out}{err}");
    assert!(
        out.contains("rolled back to revision 2: plan deploy will run"),
        "{out}"
    );
    assert!(out.contains("deploy plan of instance k is COMPLETE"), "{out}");
    let cmd = kubectl(
        kc,
        ns,
        &[
            "get",
            "deployment",
            "k-app",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].command[2]}",
        ],
    );
    assert_eq!(cmd, "sleep 1800");

    assert_eq!(
        history(home, kc, ns),
        vec![
            row("deploy", "COMPLETE", "user", "install"),
            row("deploy", "COMPLETE", "user", "CMD: sleep 3600 → sleep 1800"),
            row(
                "deploy",
                "REPLACED",
                "user",
                &format!("CMD: sleep 1800 → {stall}")
            ),
            row(
                "deploy",
                "COMPLETE",
                "rollback",
                &format!("rollback to 2, CMD: {stall} → sleep 1800")
            ),
        ]
    );
    // ControllerRevisions owned by the Instance, so they go with it.
    let owners = kubectl(
        kc,
        ns,
        &[
            "get",
            "controllerrevisions",
            "-l",
            "kudo.dev/instance=k",
            "-o",
            "jsonpath={.items[*].metadata.ownerReferences[0].kind}",
        ],
    );
    assert_eq!(owners, "Instance Instance Instance Instance");
    let (code, out, _) = kudo(home, kc, ns, &["history", "--instance", "k"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("REVISION   UPDATED"), "{out}");
}

#[test]
fn a_stuck_update_is_rolled_back_by_restarting_its_plan() {
    let home = tempfile::tempdir().unwrap();
    let dev = start_dev(home.path(), &[]);
    a_stuck_update_is_rolled_back(home.path(), &dev.kubeconfig, "default", "fail");
}

#[test]
fn a_package_rollback_plan_needs_force_over_a_running_plan_and_sees_the_revisions() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let dev = start_dev(h, &[]);
    let kc = dev.kubeconfig.as_path();
    let pkg = package(h, true);
    let wait = ["--wait", "--wait-time", "120"];
    let (code, out, err) = kudo(
        h,
        kc,
        "default",
        &[&["install", pkg.to_str().unwrap(), "--instance", "k"][..], &wait].concat(),
    );
    assert_eq!(code, 0, "install: {out}{err}");
    let (code, out, err) = kudo(h, kc, "default", &["update", "--instance", "k", "-p", "CMD=fail"]);
    assert_eq!(code, 0, "{out}{err}");
    wait_stuck(h, kc, "default");

    // The package's rollback plan is not the running deploy: KUDO's rule refuses, nothing written.
    let before = kubectl(
        kc,
        "default",
        &[
            "get",
            "instance",
            "k",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ],
    );
    let (code, out, err) = kudo(h, kc, "default", &["rollback", "--instance", "k"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("plan 'deploy' is scheduled (or running) and the rollback would run plan 'rollback'"),
        "{err}"
    );
    assert!(err.contains("--force"), "{err}");
    let after = kubectl(
        kc,
        "default",
        &[
            "get",
            "instance",
            "k",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ],
    );
    assert_eq!(before, after, "a refused rollback writes nothing");
    let (code, out, err) = kudo(
        h,
        kc,
        "default",
        &["rollback", "--instance", "k", "--force", "--dry-run"],
    );
    assert_eq!(code, 0, "rollback --force --dry-run: {out}{err}");
    assert!(err.contains("# --force would first cancel plan deploy"), "{err}");
    assert!(out.contains("plan rollback would run"), "{out}");
    assert!(
        out.contains("name: k-rolled-back"),
        "the rollback plan's objects: {out}"
    );
    let after = kubectl(
        kc,
        "default",
        &[
            "get",
            "instance",
            "k",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ],
    );
    assert_eq!(before, after, "a preview writes nothing");

    let (code, out, err) = kudo(
        h,
        kc,
        "default",
        &[&["rollback", "--instance", "k", "--force"][..], &wait].concat(),
    );
    assert_eq!(code, 0, "rollback --force: {out}{err}");
    assert!(err.contains("cancelling plan deploy"), "{err}");
    assert!(out.contains("rollback plan of instance k is COMPLETE"), "{out}");
    let marker = kubectl(
        kc,
        "default",
        &["get", "configmap", "k-rolled-back", "-o", "jsonpath={.data}"],
    );
    let marker: serde_json::Value = serde_json::from_str(&marker).unwrap();
    assert_eq!(
        marker,
        serde_json::json!({"from": "2", "to": "1", "cmd": "sleep 3600"})
    );
    assert_eq!(
        history(h, kc, "default"),
        vec![
            row("deploy", "COMPLETE", "user", "install"),
            row("deploy", "CANCELLED", "user", "CMD: sleep 3600 → fail"),
            row(
                "rollback",
                "COMPLETE",
                "rollback",
                "rollback to 1, CMD: fail → sleep 3600"
            ),
        ]
    );
}

#[test]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
fn real_cluster_a_stuck_update_is_rolled_back_by_restarting_its_plan() {
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
    let ns = kudo_testkit::real_cluster::unique_namespace("rollback");
    let run = |args: &[&str]| {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .output()
            .unwrap();
        out.status.success()
    };
    assert!(run(&["create", "namespace", &ns]));
    // Pods are refused until the namespace's default ServiceAccount exists.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !run(&["-n", &ns, "get", "serviceaccount", "default"]) {
        assert!(Instant::now() < deadline, "no default ServiceAccount in {ns}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The real cluster's fake kubelet crash-loops exactly `sh -c "exit N"`.
    a_stuck_update_is_rolled_back(home.path(), &kubeconfig, &ns, "exit 3");
    run(&["delete", "namespace", &ns, "--wait=false"]);
}

/// The tutorial's "when an upgrade fails": Galera upgraded to a version whose image does not
/// run, `plan status` says why, the rollback needs --force (the package's rollback plan is not
/// the running deploy), and it leaves the cluster as revision 1 made it.
#[test]
fn galera_a_failed_upgrade_is_rolled_back_with_its_rollback_plan() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let dev = start_dev(h, &[]);
    let kc = dev.kubeconfig.as_path();
    let galera = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/galera");
    let broken = h.join("galera-broken");
    super::common::copy_dir(&galera, &broken);
    let op = std::fs::read_to_string(broken.join("operator.yaml")).unwrap();
    let op = op
        .replace("operatorVersion: 0.1.0", "operatorVersion: 0.2.0")
        .replace("appVersion: 10.5.3", "appVersion: 10.5.99-fail");
    std::fs::write(broken.join("operator.yaml"), op).unwrap();
    let wait = ["--wait", "--wait-time", "180"];
    let ns = "default";
    let (code, out, err) = kudo(
        h,
        kc,
        ns,
        &[&["install", galera.to_str().unwrap()][..], &wait].concat(),
    );
    assert_eq!(code, 0, "install: {out}{err}");
    let (code, out, err) = kudo(
        h,
        kc,
        ns,
        &[
            "upgrade",
            broken.to_str().unwrap(),
            "--instance",
            "galera-instance",
        ],
    );
    assert_eq!(code, 0, "upgrade: {out}{err}");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (_, out, _) = kudo(h, kc, ns, &["plan", "status", "--instance", "galera-instance"]);
        if out.contains("waiting for ") && out.contains("CrashLoopBackOff") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no waiting line for the broken image:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let (code, _, err) = kudo(h, kc, ns, &["rollback", "--instance", "galera-instance"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("use --force"), "{err}");
    let (code, out, err) = kudo(
        h,
        kc,
        ns,
        &[
            &["rollback", "--instance", "galera-instance", "--force"][..],
            &wait,
        ]
        .concat(),
    );
    assert_eq!(code, 0, "rollback --force: {out}{err}");
    assert!(
        out.contains("rollback plan of instance galera-instance is COMPLETE"),
        "{out}"
    );
    let image = kubectl(
        kc,
        ns,
        &[
            "get",
            "statefulset",
            "galera-instance-galera",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ],
    );
    assert_eq!(image, "mariadb:10.5.3");
    let deployments = kubectl(kc, ns, &["get", "deployments", "-o", "name"]);
    assert_eq!(
        deployments.trim(),
        "",
        "the failed deploy's bootstrap node is gone"
    );
    assert_eq!(
        history_of(h, kc, ns, "galera-instance"),
        vec![
            row("deploy", "COMPLETE", "user", "install"),
            row("deploy", "CANCELLED", "user", "upgrade 0.1.0 → 0.2.0"),
            row(
                "rollback",
                "COMPLETE",
                "rollback",
                "rollback to 1, operator 0.2.0 → 0.1.0"
            ),
        ]
    );
}

/// The tutorial's retry: Galera installed as a ServiceAccount that may not write StatefulSets
/// fails FATAL_ERROR at step `statefulset`; once the Role allows it, `plan retry` resumes there
/// (the bootstrap steps before it are not run again) and the plan completes.
#[test]
fn galera_a_plan_stopped_by_a_missing_permission_is_retried_from_the_failed_step() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let dev = start_dev(h, &["--least-privilege"]);
    let kc = dev.kubeconfig.as_path();
    let ns = "default";
    let role = h.join("role.yaml");
    std::fs::write(
        &role,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: galera-deployer\nrules:\n  - apiGroups: [\"\"]\n    resources: [configmaps, secrets, services, pods]\n    verbs: [get, list, watch, create, update, patch, delete]\n  - apiGroups: [apps]\n    resources: [deployments, replicasets]\n    verbs: [get, list, watch, create, update, patch, delete]\n",
    )
    .unwrap();
    kubectl(kc, ns, &["create", "serviceaccount", "galera-deployer"]);
    kubectl(kc, ns, &["apply", "-f", role.to_str().unwrap()]);
    kubectl(
        kc,
        ns,
        &[
            "create",
            "rolebinding",
            "galera-deployer",
            "--role=galera-deployer",
            "--serviceaccount=default:galera-deployer",
        ],
    );
    let galera = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/galera");
    let (code, out, err) = kudo(
        h,
        kc,
        ns,
        &[
            "install",
            galera.to_str().unwrap(),
            "--service-account",
            "galera-deployer",
            "--wait",
            "--wait-time",
            "120",
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    let (_, status, _) = kudo(h, kc, ns, &["plan", "status", "--instance", "galera-instance"]);
    assert!(status.contains("Step statefulset [FATAL_ERROR]"), "{status}");
    // The manager reads an object before its first apply (is it this Instance's?), so the read
    // is what the missing permission stops.
    assert!(
        status.contains("cannot get resource \"statefulsets\""),
        "{status}"
    );

    kubectl(
        kc,
        ns,
        &[
            "patch",
            "role",
            "galera-deployer",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/rules/-","value":{"apiGroups":["apps"],"resources":["statefulsets"],"verbs":["get","list","watch","create","update","patch","delete"]}}]"#,
        ],
    );
    let (code, out, err) = kudo(
        h,
        kc,
        ns,
        &[
            "plan",
            "retry",
            "--instance",
            "galera-instance",
            "--wait",
            "--wait-time",
            "120",
        ],
    );
    assert_eq!(code, 0, "plan retry: {out}{err}");
    assert!(
        out.contains("deploy plan of instance galera-instance is COMPLETE"),
        "{out}"
    );
    let rows = history_of(h, kc, ns, "galera-instance");
    assert_eq!(rows[0], row("deploy", "FATAL_ERROR", "user", "install"));
    assert_eq!(
        (rows[1].0.as_str(), rows[1].1.as_str(), rows[1].2.as_str()),
        ("deploy", "COMPLETE", "retry")
    );
    // The retry started at step statefulset: the bootstrap node was not deployed again.
    let notes = kubectl(
        kc,
        ns,
        &["get", "events.events.k8s.io", "-o", "jsonpath={.items[*].note}"],
    );
    assert!(
        notes.contains("resuming at phase deploy step statefulset"),
        "PlanStarted notes: {notes}"
    );
    let bootstrap_rollouts = notes
        .matches("Scaled up replica set galera-instance-bootstrap")
        .count();
    assert_eq!(bootstrap_rollouts, 1, "{notes}");
}
