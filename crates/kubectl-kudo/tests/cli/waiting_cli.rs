//! "Why is it waiting": while a step waits, `plan status` prints under it one
//! line per object that is not healthy, with what its pods say, and the Instance status carries
//! the same lines (`waitingFor`), on the embedded cluster through the real binary.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::kudo;

const OPERATOR: &str = r#"apiVersion: kudo.dev/v1beta1
name: stuck
operatorVersion: "0.1.0"
tasks:
  - name: app
    kind: Apply
    spec:
      resources: [deployment.yaml]
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

/// The simulated kubelet fails a container whose command has the word "fail": the Deployment's
/// pod crash-loops and the step waits.
const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}-web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: busybox
          command: ["sh", "-c", "exit 1 # fail"]
"#;

fn package(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("stuck");
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::write(root.join("operator.yaml"), OPERATOR).unwrap();
    std::fs::write(
        root.join("params.yaml"),
        "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
    )
    .unwrap();
    std::fs::write(root.join("templates/deployment.yaml"), DEPLOYMENT).unwrap();
    root
}

#[test]
fn plan_status_says_what_a_step_waits_for() {
    let home = tempfile::tempdir().expect("temp HOME");
    let h = home.path();
    let dev = common::start_dev(h, &[]);
    let kc = dev.kubeconfig.as_path();
    let pkg = package(h);
    let (code, out) = kudo(
        h,
        Some(kc),
        &["install", pkg.to_str().unwrap(), "--instance", "stuck"],
    );
    assert_eq!(code, 0, "{out}");

    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let (_, status) = kudo(h, Some(kc), &["plan", "status", "--instance", "stuck"]);
        if status.contains("CrashLoopBackOff") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "no waiting line with the pod's problem:\n{status}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let line = status
        .lines()
        .find(|l| l.contains("waiting for Deployment default/stuck-web: "))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(line.contains("; pod stuck-web-"), "{line}");
    assert!(line.contains(": CrashLoopBackOff"), "{line}");
    let step = status
        .lines()
        .position(|l| l.contains("Step app [IN_PROGRESS]"))
        .expect("step line");
    let waiting = status.lines().position(|l| l == line).unwrap();
    assert_eq!(waiting, step + 1, "the line is printed under its step:\n{status}");

    let (code, json) = kudo(h, Some(kc), &["get", "instances", "-o", "json"]);
    assert_eq!(code, 0, "{json}");
    let list: serde_json::Value = serde_json::from_str(&json).expect("json");
    let step = &list[0]["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0];
    let lines = step["waitingFor"]
        .as_array()
        .unwrap_or_else(|| panic!("waitingFor in the status: {json}"));
    assert_eq!(lines.len(), 1, "{step}");
    assert!(
        lines[0]
            .as_str()
            .unwrap()
            .starts_with("Deployment default/stuck-web: "),
        "{step}"
    );
}
