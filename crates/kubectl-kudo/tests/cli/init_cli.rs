//! `kubectl kudo init --dry-run -o json` is input `kubectl apply -f -` takes
//! (it was a bare JSON array, which kubectl rejects).

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-kudo");

/// The dry-run output for namespace `ns`.
fn dry_run_json(ns: &str) -> serde_json::Value {
    let out = Command::new(BIN)
        .args(["init", "--dry-run", "-o", "json", "-n", ns])
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("run kubectl-kudo");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[test]
fn init_dry_run_json_is_a_v1_list() {
    let list = dry_run_json("kudo-system");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["kind"], "List");
    let kinds: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"CustomResourceDefinition") && kinds.contains(&"Deployment"),
        "{kinds:?}"
    );
}

/// The real API server validates every item of the List (server-side dry run: nothing is kept;
/// namespace `default`, as a dry run creates no namespace for the items after it).
#[test]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
fn real_cluster_init_dry_run_json_is_accepted_by_kubectl_apply() {
    let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
    let json = serde_json::to_vec(&dry_run_json("default")).unwrap();
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "--dry-run=server", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    child.stdin.take().unwrap().write_all(&json).unwrap();
    let out = child.wait_with_output().expect("kubectl output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("deployment.apps/kudo-controller-manager"), "{text}");
}
