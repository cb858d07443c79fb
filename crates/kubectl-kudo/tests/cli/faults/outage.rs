//! The API server taken away mid-plan: a 30 s outage between the manager and the API server
//! (10 s refused, then 20 s black-holed, through [`super::proxy::Proxy`]), then the
//! kube-apiserver process itself SIGKILLed and started again by the kit's start.sh (etcd keeps
//! the data). One manager lives through both and takes each plan to COMPLETE; the same checker
//! as the kill rounds judges the history.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::invariants::Checker;
use super::lab::{INSTANCE, Lab};
use super::manager;

/// A copy of `kubeconfig` whose server is the proxy on `port`; the upstream `host:port`.
fn via_proxy(kubeconfig: &Path, port: u16, dir: &Path) -> (PathBuf, String) {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:"))
        .expect("a server line")
        .trim()
        .to_string();
    let upstream = server.trim_start_matches("https://").to_string();
    let path = dir.join("kubeconfig-proxy");
    std::fs::write(&path, text.replace(&server, &format!("https://127.0.0.1:{port}"))).unwrap();
    (path, upstream)
}

/// Waits (at most `limit`) until the deploy run not in `prior` has `step` IN_PROGRESS or ends
/// COMPLETE; the run's uid once COMPLETE.
pub(super) async fn wait_for(lab: &Lab, prior: &[String], want: &str, limit: Duration) -> Option<String> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(inst) = lab.instance().await {
            let ps = &inst["status"]["planStatus"]["deploy"];
            let uid = ps["uid"].as_str().unwrap_or_default().to_string();
            let fresh = !uid.is_empty() && !prior.contains(&uid);
            let job = ps["phases"][1]["steps"][1]["status"].as_str().unwrap_or_default();
            if fresh && want == "COMPLETE" && ps["status"] == "COMPLETE" {
                return Some(uid);
            }
            if fresh && want == "job" && job == "IN_PROGRESS" {
                return Some(uid);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

/// SIGKILLs the fault cluster's kube-apiserver and starts it again with the kit; how long the
/// API server was away.
pub(super) async fn restart_api_server() -> Duration {
    let dir = PathBuf::from(std::env::var("KUDO_FAULTS_CLUSTER_DIR").expect("KUDO_FAULTS_CLUSTER_DIR"));
    let pid = std::fs::read_to_string(dir.join("run/kube-apiserver.pid")).expect("the API server's pid");
    let at = Instant::now();
    let st = std::process::Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(st.success(), "kill the API server");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let kit = std::env::var("KUDO_FAULTS_KIT").expect("KUDO_FAULTS_KIT");
    let out = tokio::process::Command::new("bash")
        .arg(format!("{kit}/start.sh"))
        .env("REAL_CLUSTER_DIR", &dir)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "start.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    at.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "fault cluster: run by scripts/faults-stage.sh"]
async fn faults_an_api_outage_and_an_api_server_restart_mid_plan_leave_the_plans_complete() {
    let _turn = super::ONE_AT_A_TIME.lock().await;
    let mut lab = Lab::new("faults-api").await;
    let mut checker = Checker::start(&lab.client, &lab.ns, INSTANCE);
    let proxy = super::proxy::Proxy::start(&upstream(&lab.kubeconfig)).await;
    let (via, _) = via_proxy(&lab.kubeconfig, proxy.port, lab.home.path());
    lab.install(&["JOB_SECONDS=15"]).await;
    let mut m = lab.manager(None, Some(&via));
    let mut runs = Vec::new();
    assert!(
        wait_for(&lab, &runs, "job", Duration::from_secs(60))
            .await
            .is_some(),
        "mid-plan"
    );
    proxy.refuse();
    tokio::time::sleep(Duration::from_secs(10)).await;
    proxy.black_hole().await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    proxy.pass().await;
    let back = Instant::now();
    let uid = wait_for(&lab, &runs, "COMPLETE", Duration::from_secs(120)).await;
    println!(
        "=== outage: 10 s refused + 20 s black-holed mid-plan; COMPLETE {:.1} s after",
        back.elapsed().as_secs_f64()
    );
    runs.push(uid.expect("the deploy completes after the outage"));
    checker.snapshot(&lab.instance().await.unwrap(), "after the outage");

    lab.kudo(&[
        "update",
        "--instance",
        INSTANCE,
        "-p",
        "ROUND=1",
        "-p",
        "JOB_SECONDS=8",
    ])
    .await;
    assert!(
        wait_for(&lab, &runs, "job", Duration::from_secs(60))
            .await
            .is_some(),
        "mid-plan"
    );
    let away = restart_api_server().await;
    let back = Instant::now();
    let uid = wait_for(&lab, &runs, "COMPLETE", Duration::from_secs(120)).await;
    println!(
        "=== API server SIGKILLed mid-plan, back after {:.1} s; COMPLETE {:.1} s after",
        away.as_secs_f64(),
        back.elapsed().as_secs_f64()
    );
    runs.push(uid.expect("the update completes after the API server restart"));
    assert!(!m.exited(), "the manager lived through both");
    m.kill().await;
    let inst = lab.instance().await.unwrap();
    checker.snapshot(&inst, "after the restart");
    checker.check_objects("after the restart");
    checker
        .check_history(inst["metadata"]["uid"].as_str().unwrap(), runs.len())
        .await;
    checker.stop();
    lab.finish().await;
    assert!(
        manager::bad_lines(&lab.logs).is_empty(),
        "{:#?}",
        manager::bad_lines(&lab.logs)
    );
    assert!(checker.violations.is_empty(), "{:#?}", checker.violations);
}

/// The API server's `host:port` in `kubeconfig`.
fn upstream(kubeconfig: &Path) -> String {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:"))
        .expect("server");
    server.trim().trim_start_matches("https://").to_string()
}
