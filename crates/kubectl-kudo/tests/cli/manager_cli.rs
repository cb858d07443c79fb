//! `kubectl-kudo manager` as a process: its JSON log lines carry the instance/plan/step fields an
//! operator needs to follow one plan run. The cluster is the embedded API
//! server with the simulator, in this test process; the manager and the install are the real
//! binary, killed by `kill_on_drop` whatever happens.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use kudo_apiserver::{ApiServer, Config};
use serde_json::Value;
use tokio::io::AsyncReadExt;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-kudo");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_instance_plan_and_step_fields() {
    let server = ApiServer::start(Config::default()).await.expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client =
        kube::Client::try_from(kube::Config::new(server.url().parse().expect("url"))).expect("client");
    kudo_controller::install_crds(&client, "test", Duration::from_secs(30))
        .await
        .expect("crds");
    let sim = kudo_sim::spawn(client.clone(), kudo_sim::SimConfig::default());

    let mut manager = tokio::process::Command::new(BIN)
        .args([
            "manager",
            "--json-logs",
            "--worker-threads",
            "2",
            "--leader-elect=false",
            "--metrics-address",
            "127.0.0.1:0",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .env("HOME", dir.path())
        .env("RUST_LOG", "kudo_controller=debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the manager");

    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/first-operator");
    let install = tokio::process::Command::new(BIN)
        .args([
            "install",
            "--instance",
            "logs",
            "--wait",
            "--wait-time",
            "120",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .arg(&example)
        .env("HOME", dir.path())
        .output()
        .await
        .expect("run install");
    assert!(
        install.status.success(),
        "install --wait failed:\n{}{}",
        String::from_utf8_lossy(&install.stdout),
        String::from_utf8_lossy(&install.stderr)
    );

    manager.start_kill().expect("kill the manager");
    let mut out = String::new();
    manager
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .await
        .expect("read logs");
    let _ = manager.wait().await;
    let _ = sim.shutdown().await;
    server.shutdown().await;

    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {l}")))
        .collect();
    assert!(!lines.is_empty(), "no log lines");
    // Somewhere in the run a line logged inside a task names the whole path of the run.
    let field = |spans: &Value, key: &str| {
        spans
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|s| s.get(key).and_then(Value::as_str).map(str::to_string))
    };
    let in_task = lines.iter().find(|l| field(&l["spans"], "step").is_some());
    let Some(line) = in_task else {
        panic!("no log line inside a task span:\n{out}");
    };
    let spans = &line["spans"];
    assert_eq!(
        field(spans, "instance").as_deref(),
        Some("default/logs"),
        "{line}"
    );
    assert_eq!(field(spans, "plan").as_deref(), Some("deploy"), "{line}");
    assert!(field(spans, "uid").is_some_and(|u| !u.is_empty()), "{line}");
    assert_eq!(field(spans, "phase").as_deref(), Some("main"), "{line}");
    assert_eq!(field(spans, "step").as_deref(), Some("everything"), "{line}");
    assert_eq!(field(spans, "task").as_deref(), Some("app"), "{line}");
    assert!(
        line["level"].is_string() && line["timestamp"].is_string(),
        "{line}"
    );
}

/// text Logs written to a pipe or file carry no ANSI colour codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_logs_to_a_pipe_have_no_colour_codes() {
    let server = ApiServer::start(Config::default()).await.expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let mut manager = tokio::process::Command::new(BIN)
        .args([
            "manager",
            "--leader-elect=false",
            "--metrics-address",
            "127.0.0.1:0",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .env("HOME", dir.path())
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the manager");
    tokio::time::sleep(Duration::from_secs(3)).await;
    manager.start_kill().expect("kill the manager");
    let mut out = String::new();
    manager
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .await
        .expect("read logs");
    let _ = manager.wait().await;
    server.shutdown().await;
    assert!(out.lines().count() > 0, "no log lines");
    assert!(!out.contains('\u{1b}'), "ANSI escape codes in piped logs:\n{out}");
}

#[test]
fn worker_threads_below_one_are_refused_naming_the_flag() {
    let out = std::process::Command::new(BIN)
        .args(["manager", "--worker-threads", "0"])
        .output()
        .expect("run the manager");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--worker-threads"), "{err}");
}
