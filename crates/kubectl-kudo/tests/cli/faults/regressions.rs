//! Regression tests of what the fault harness found, on the embedded API server with manager
//! processes: a manager aborted at a named fail point between two of its writes, then one that
//! runs on.
//!
//! Found: a manager killed after a run's admission write and before its revision was created
//! left the run with no revision for good (the history had one revision fewer than runs, and a
//! rollback by number picked the wrong one); killed after the status write that ended a run and
//! before the revision's outcome, it left the revision without an outcome, later marked REPLACED
//! although the run had completed.

use std::path::Path;
use std::time::{Duration, Instant};

use super::manager::Manager;

const OPERATOR: &str = "apiVersion: kudo.dev/v1beta1\nname: twosteps\noperatorVersion: \"0.1.0\"\ntasks:\n  - name: one\n    kind: Apply\n    spec:\n      resources: [one.yaml]\n  - name: two\n    kind: Apply\n    spec:\n      resources: [two.yaml]\nplans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: one\n            tasks: [one]\n          - name: two\n            tasks: [two]\n";

fn package(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("twosteps");
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::write(root.join("operator.yaml"), OPERATOR).unwrap();
    std::fs::write(
        root.join("params.yaml"),
        "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: V\n    default: \"0\"\n",
    )
    .unwrap();
    for step in ["one", "two"] {
        let cm = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ .Name }}}}-{step}\ndata:\n  v: \"{{{{ .Params.V }}}}\"\n"
        );
        std::fs::write(root.join(format!("templates/{step}.yaml")), cm).unwrap();
    }
    root
}

/// Lives of the manager with `failpoint` armed until the deploy run not in `prior` is COMPLETE
/// (each aborts at its point or is killed after 5 s), then the run's uid.
async fn run_through(
    kubeconfig: &Path,
    home: &Path,
    failpoint: &str,
    prior: &[String],
    client: &kube::Client,
) -> String {
    let ar = kudo_kube::discovery::known_resource("kudo.dev", "Instance");
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(client.clone(), "default", &ar);
    let deadline = Instant::now() + Duration::from_secs(60);
    let log = home.join("manager.log");
    while Instant::now() < deadline {
        let mut m = Manager::start(kubeconfig, "default", home, &log, Some(failpoint));
        while !m.exited() && m.started.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        m.kill().await;
        let inst = serde_json::to_value(api.get("r").await.unwrap()).unwrap();
        let ps = &inst["status"]["planStatus"]["deploy"];
        let uid = ps["uid"].as_str().unwrap_or_default().to_string();
        if ps["status"] == "COMPLETE" && !prior.contains(&uid) {
            return uid;
        }
    }
    panic!("the run did not complete under {failpoint}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_between_its_writes_leaves_every_run_its_revision_and_outcome() {
    let server = kudo_apiserver::ApiServer::start(kudo_apiserver::Config::default())
        .await
        .expect("server");
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = home.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    kudo_controller::install_crds(&client, "test", Duration::from_secs(30))
        .await
        .expect("crds");
    let kudo = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-kudo"))
            .args(args)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env("HOME", home.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let pkg = package(home.path());
    kudo(&["install", pkg.to_str().unwrap(), "--instance", "r"]);
    // Every life dies right after its admission write, then after each status write.
    let first = run_through(&kubeconfig, home.path(), "after-admission-write:1", &[], &client).await;
    kudo(&["update", "--instance", "r", "-p", "V=1"]);
    let second = run_through(
        &kubeconfig,
        home.path(),
        "after-admission-write:1",
        std::slice::from_ref(&first),
        &client,
    )
    .await;
    kudo(&["update", "--instance", "r", "-p", "V=2"]);
    let prior = [first.clone(), second.clone()];
    let third = run_through(&kubeconfig, home.path(), "after-status-write:1", &prior, &client).await;
    let inst_uid = {
        let ar = kudo_kube::discovery::known_resource("kudo.dev", "Instance");
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::namespaced_with(client.clone(), "default", &ar);
        api.get("r").await.unwrap().metadata.uid.unwrap()
    };
    let revs = kudo_client::revisions::list(&client, "default", "r", &inst_uid)
        .await
        .unwrap();
    let got: Vec<(u64, String, Option<String>)> = revs
        .iter()
        .map(|r| {
            (
                r.number,
                r.data.plan_uid.clone(),
                r.outcome.map(|o| format!("{o:?}")),
            )
        })
        .collect();
    let done = Some("Complete".to_string());
    assert_eq!(
        got,
        vec![
            (1, first, done.clone()),
            (2, second, done.clone()),
            (3, third, done)
        ],
        "one revision per run, each with its outcome"
    );
    server.shutdown().await;
}
