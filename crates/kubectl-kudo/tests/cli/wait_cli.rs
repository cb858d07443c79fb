//! `update --wait` follows the run the update caused: it reports the new run's
//! result, and a change whose run stalls times out with a non-zero exit instead of reporting the
//! previous run. Runs on the embedded cluster (`kubectl-kudo dev`) and, ignored, on the real one.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::start_dev;

/// A one-Deployment operator whose container runs `sh -c CMD`.
fn package(root: &Path) -> PathBuf {
    let dir = root.join("waiter");
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("operator.yaml"),
        "apiVersion: kudo.dev/v1beta1\nname: waiter\noperatorVersion: \"0.1.0\"\ntasks:\n  - name: app\n    kind: Apply\n    spec:\n      resources:\n        - deploy.yaml\nplans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: app\n            tasks:\n              - app\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("params.yaml"),
        "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: CMD\n    default: sleep 3600\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("templates/deploy.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Name }}-app\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: waiter\n  template:\n    metadata:\n      labels:\n        app: waiter\n    spec:\n      containers:\n        - name: app\n          image: busybox\n          command: [\"sh\", \"-c\", {{ .Params.CMD | quote }}]\n",
    )
    .unwrap();
    dir
}

/// Runs the CLI: (exit code, stdout, stderr, elapsed).
fn kudo(home: &Path, kubeconfig: &Path, ns: &str, args: &[&str]) -> (i32, String, String, Duration) {
    let start = Instant::now();
    let (code, out, err) = common::kudo_in(home, kubeconfig, ns, args);
    (code, out, err, start.elapsed())
}

/// `stall` is a CMD whose Deployment never becomes available on that cluster.
fn update_wait_follows_the_new_run(home: &Path, kubeconfig: &Path, ns: &str, stall: &str) {
    let pkg = package(home);
    let pkg = pkg.to_str().unwrap();
    let (code, out, err, _) = kudo(
        home,
        kubeconfig,
        ns,
        &["install", pkg, "--instance", "w", "--wait", "--wait-time", "120"],
    );
    assert_eq!(code, 0, "install --wait: {out}{err}");
    // the CLI's Writes carry its field manager (they showed `unknown`).
    let managers = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-n", ns, "get", "instances.kudo.dev", "w", "-o"])
        .arg("jsonpath={.metadata.managedFields[*].manager}")
        .output()
        .expect("run kubectl");
    let managers = String::from_utf8_lossy(&managers.stdout).into_owned();
    assert!(
        managers.split_whitespace().any(|m| m == "kubectl-kudo"),
        "managers of the Instance: {managers:?}"
    );

    // A change that completes: reported COMPLETE after its own run.
    let (code, out, err, _) = kudo(
        home,
        kubeconfig,
        ns,
        &[
            "update",
            "--instance",
            "w",
            "-p",
            "CMD=sleep 1800",
            "--wait",
            "--wait-time",
            "120",
        ],
    );
    assert_eq!(code, 0, "update --wait: {out}{err}");
    assert!(
        out.contains("deploy plan of instance w is COMPLETE"),
        "{out}{err}"
    );

    // A change whose run stalls: no success, a timeout with a non-zero exit. Before the fix this
    // printed the previous run's COMPLETE and exited 0 within milliseconds.
    let wait = 8;
    let (code, out, err, took) = kudo(
        home,
        kubeconfig,
        ns,
        &[
            "update",
            "--instance",
            "w",
            "-p",
            &format!("CMD={stall}"),
            "--wait",
            "--wait-time",
            &wait.to_string(),
        ],
    );
    assert_ne!(code, 0, "a stalling change must not succeed: {out}{err}");
    assert!(!out.contains("COMPLETE"), "{out}{err}");
    assert!(err.contains("timed out after 8s"), "{out}{err}");
    assert!(
        err.contains("IN_PROGRESS"),
        "the stalled run is named with its status: {err}"
    );
    assert!(took >= Duration::from_secs(wait), "returned after {took:?}");
}

#[test]
fn update_wait_follows_the_new_run_and_times_out_on_a_stall() {
    let home = tempfile::tempdir().unwrap();
    let dev = start_dev(home.path(), &[]);
    // The simulated kubelet crash-loops a container whose command has the word "fail".
    update_wait_follows_the_new_run(home.path(), &dev.kubeconfig, "default", "fail");
}

#[test]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
fn real_cluster_update_wait_follows_the_new_run_and_times_out_on_a_stall() {
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
    let ns = kudo_testkit::real_cluster::unique_namespace("wait");
    let kubectl = |args: &[&str]| {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .output()
            .expect("run kubectl");
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    kubectl(&["create", "namespace", &ns]);
    // Pods are refused until the namespace's default ServiceAccount exists.
    let deadline = Instant::now() + Duration::from_secs(60);
    while Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["-n", &ns, "get", "serviceaccount", "default"])
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        assert!(Instant::now() < deadline, "no default ServiceAccount in {ns}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The real cluster's fake kubelet crash-loops exactly `sh -c "exit N"`.
    update_wait_follows_the_new_run(home.path(), &kubeconfig, &ns, "exit 3");
    kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
