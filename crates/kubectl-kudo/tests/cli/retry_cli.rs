//! `kubectl kudo plan retry` through the real binary: a FATAL_ERROR plan re-runs
//! from its failed step and the steps before it are not applied again, while `plan trigger`
//! restarts from the top; a plan that did not fail is refused with nothing written; the retry
//! works across a manager restart (the decision comes only from the Instance). On
//! `kubectl-kudo dev`, on the embedded API server with `kubectl-kudo manager` processes, and,
//! ignored, on the real control plane.
//!
//! How the plan fails: step `gate` applies the ConfigMap `<instance>-gate`, and the test first
//! creates that ConfigMap itself as `immutable: true` with other data (labelled as the
//! Instance's), so the API server rejects the manager's apply as Invalid (422: a fatal apply
//! error) on both clusters. Deleting the
//! test's ConfigMap removes the cause. Whether step `one` was applied again is read from its
//! ConfigMap's `kudo.dev/last-plan-execution-uid` annotation (every apply stamps the run's uid)
//! and its resourceVersion.

use crate::common::{self, On};

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-kudo");
pub(crate) const INSTANCE: &str = "r";

const OPERATOR: &str = r#"apiVersion: kudo.dev/v1beta1
name: retrier
operatorVersion: "0.1.0"
tasks:
  - name: one
    kind: Apply
    spec:
      resources: [one.yaml]
  - name: gate
    kind: Apply
    spec:
      resources: [gate.yaml]
plans:
  deploy:
    strategy: serial
    phases:
      - name: first
        strategy: serial
        steps:
          - name: one
            tasks: [one]
      - name: second
        strategy: serial
        steps:
          - name: gate
            tasks: [gate]
"#;

pub(crate) fn package(dir: &Path) -> PathBuf {
    let root = dir.join("retrier");
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::write(root.join("operator.yaml"), OPERATOR).unwrap();
    std::fs::write(
        root.join("params.yaml"),
        "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
    )
    .unwrap();
    std::fs::write(
        root.join("templates/one.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-one\ndata:\n  step: one\n",
    )
    .unwrap();
    std::fs::write(
        root.join("templates/gate.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-gate\ndata:\n  open: \"yes\"\n",
    )
    .unwrap();
    root
}

/// The ConfigMap that makes step `gate` fail: immutable, with data the plan's differs from. It
/// carries kudo's labels naming the Instance, so the manager takes it for its own (an object of
/// someone else's would be refused before any apply) and the API server rejects the apply.
pub(crate) fn blocker(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {INSTANCE}-gate\n  namespace: {ns}\n  labels:\n    heritage: kudo\n    kudo.dev/instance: {INSTANCE}\nimmutable: true\ndata:\n  open: \"no\"\n"
    )
}

/// What the retry scenario reads of its Instance and ConfigMaps.
impl On<'_> {
    async fn instance(&self) -> Value {
        self.get(&["instances.kudo.dev", INSTANCE]).await
    }

    async fn deploy_status(&self) -> Value {
        self.instance().await["status"]["planStatus"]["deploy"].clone()
    }

    /// Waits until the deploy plan has a run other than `not_uid` with status `want`.
    async fn wait_deploy(&self, want: &str, not_uid: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let st = self.deploy_status().await;
            if st["status"] == want && st["uid"] != not_uid {
                return st;
            }
            assert!(Instant::now() < deadline, "deploy never {want}: {st:#}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// `(run uid stamped on it, resourceVersion)` of a ConfigMap the plan applies.
    async fn stamp(&self, name: &str) -> (String, String) {
        let cm = self.get(&["configmap", name]).await;
        (
            text(&cm["metadata"]["annotations"]["kudo.dev/last-plan-execution-uid"]),
            text(&cm["metadata"]["resourceVersion"]),
        )
    }

    async fn create_blocker(&self) {
        self.kubectl(&["apply", "-f", "-"], Some(&blocker(self.ns))).await;
    }

    async fn remove_blocker(&self) {
        self.kubectl(&["delete", "configmap", &format!("{INSTANCE}-gate")], None)
            .await;
    }

    /// The PlanStarted Event messages of the Instance.
    async fn plan_started_notes(&self) -> Vec<String> {
        let list = self.get(&["events.v1.events.k8s.io"]).await;
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["reason"] == "PlanStarted" && e["regarding"]["name"] == INSTANCE)
            .map(|e| text(&e["note"]))
            .collect()
    }
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn step(deploy: &Value, phase: usize) -> &Value {
    &deploy["phases"][phase]["steps"][0]
}

/// Installs the package with step `gate` blocked: deploy ends FATAL_ERROR at `second/gate` after
/// `first/one` completed. Returns the failed run's status.
async fn install_failing(on: &On<'_>) -> Value {
    on.create_blocker().await;
    let pkg = package(on.home);
    let (code, out) = on
        .kudo(&["install", pkg.to_str().unwrap(), "--instance", INSTANCE])
        .await;
    assert_eq!(code, 0, "install: {out}");
    let failed = on.wait_deploy("FATAL_ERROR", "").await;
    assert_eq!(step(&failed, 0)["status"], "COMPLETE", "{failed:#}");
    assert_eq!(step(&failed, 1)["status"], "FATAL_ERROR", "{failed:#}");
    assert!(
        text(&step(&failed, 1)["message"]).contains("immutable"),
        "the apply of the gate was refused: {failed:#}"
    );
    failed
}

/// Retries the failed run `failed` after its cause was removed; asserts the run resumed at
/// `second/gate` and left `first/one` alone. `args` are extra `plan retry` flags.
async fn retry_resumes(on: &On<'_>, failed: &Value, args: &[&str]) {
    let failed_uid = text(&failed["uid"]);
    let one_before = on.stamp(&format!("{INSTANCE}-one")).await;
    assert_eq!(one_before.0, failed_uid, "step one was applied by the failed run");
    on.remove_blocker().await;
    let mut cmd = vec!["plan", "retry", "--instance", INSTANCE];
    cmd.extend_from_slice(args);
    let (code, out) = on.kudo(&cmd).await;
    assert_eq!(code, 0, "plan retry: {out}");
    assert!(
        out.contains(&format!("Retrying deploy plan for {}/{INSTANCE} instance", on.ns)),
        "{out}"
    );
    let done = on.wait_deploy("COMPLETE", &failed_uid).await;
    let retry_uid = text(&done["uid"]);
    assert_eq!(
        on.stamp(&format!("{INSTANCE}-one")).await,
        one_before,
        "step one was applied again by the retry"
    );
    let (gate_uid, _) = on.stamp(&format!("{INSTANCE}-gate")).await;
    assert_eq!(gate_uid, retry_uid, "step gate ran in the retry run");
    let gate = on.get(&["configmap", &format!("{INSTANCE}-gate")]).await;
    assert_eq!(gate["data"]["open"], "yes");
    let notes = on.plan_started_notes().await;
    let want = format!(
        "Execution of plan deploy started (retry of run {failed_uid}: resuming at phase second step gate)"
    );
    assert!(notes.contains(&want), "PlanStarted notes: {notes:?}");
    // The retry is a revision of its own, started by `retry`, and the failed run's is FATAL_ERROR.
    let (code, out) = on.kudo(&["history", "--instance", INSTANCE, "-o", "json"]).await;
    assert_eq!(code, 0, "{out}");
    let revs: Vec<Value> = serde_json::from_str(&out).expect("history -o json");
    let last = revs.last().expect("revisions");
    assert_eq!(last["startedBy"]["by"], "retry", "{out}");
    assert_eq!(last["change"], format!("retry of run {failed_uid}"), "{out}");
    assert_eq!(last["planUid"], retry_uid.as_str(), "{out}");
    let failed_rev = revs
        .iter()
        .find(|r| r["planUid"] == failed_uid.as_str())
        .expect("the failed run's revision");
    assert_eq!(failed_rev["status"], "FATAL_ERROR", "{out}");
    // The manager drops the annotation once the retry run replaced the failed one.
    let deadline = Instant::now() + Duration::from_secs(30);
    while on.instance().await["metadata"]["annotations"]["kudo-rs.dev/retry"].is_string() {
        assert!(Instant::now() < deadline, "the retry annotation stayed");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The whole CLI scenario on one cluster with a running manager.
async fn scenario(on: &On<'_>) {
    let first = install_failing(on).await;
    let first_uid = text(&first["uid"]);

    // `plan trigger` keeps KUDO's semantics: the failed plan restarts from the top (step one is
    // applied again by the new run) and fails again at the gate.
    let (code, out) = on
        .kudo(&[
            "plan",
            "trigger",
            "--name",
            "deploy",
            "--instance",
            INSTANCE,
            "--wait",
            "--wait-time",
            "60",
        ])
        .await;
    assert_ne!(code, 0, "the triggered run fails again: {out}");
    let again = on.wait_deploy("FATAL_ERROR", &first_uid).await;
    let (one_uid, _) = on.stamp(&format!("{INSTANCE}-one")).await;
    assert_eq!(one_uid, text(&again["uid"]), "plan trigger re-applied step one");

    // An unknown plan is refused.
    let (code, out) = on
        .kudo(&["plan", "retry", "--instance", INSTANCE, "--plan", "nope"])
        .await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("plan nope does not exist"), "{out}");

    retry_resumes(on, &again, &["--wait", "--wait-time", "60"]).await;

    // A plan that did not fail is refused, and nothing is written.
    let settled = stable_instance(on).await;
    let (code, out) = on.kudo(&["plan", "retry", "--instance", INSTANCE]).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no plan of instance"), "{out}");
    let (code, out) = on
        .kudo(&["plan", "retry", "--instance", INSTANCE, "--plan", "deploy"])
        .await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("is COMPLETE, not FATAL_ERROR"), "{out}");
    let after = on.instance().await;
    assert_eq!(
        after["metadata"]["resourceVersion"], settled["metadata"]["resourceVersion"],
        "a refused retry wrote to the Instance"
    );
}

/// The Instance once the manager stopped writing to it (same resourceVersion 1 s apart).
async fn stable_instance(on: &On<'_>) -> Value {
    let mut last = on.instance().await;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = on.instance().await;
        if now["metadata"]["resourceVersion"] == last["metadata"]["resourceVersion"] {
            return now;
        }
        last = now;
    }
    panic!("the Instance kept changing: {last:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_retry_resumes_at_the_failed_step_and_trigger_restarts_on_dev() {
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &[]);
    let on = On {
        home: home.path(),
        kubeconfig: &dev.kubeconfig,
        ns: "default",
    };
    scenario(&on).await;
}

/// `kubectl-kudo manager` as a process of its own, killed when dropped.
fn manager(home: &Path, kubeconfig: &Path) -> tokio::process::Child {
    tokio::process::Command::new(BIN)
        .args([
            "manager",
            "--leader-elect=false",
            "--metrics-address",
            "127.0.0.1:0",
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .env("HOME", home)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the manager")
}

/// The plan fails under one manager; with no manager running the retry is written; a new
/// manager, which never saw the failed run, resumes it from the cluster's state alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_retry_written_while_no_manager_runs_resumes_under_a_new_manager() {
    let server = kudo_apiserver::ApiServer::start(kudo_apiserver::Config::default())
        .await
        .expect("server");
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = home.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client =
        kube::Client::try_from(kube::Config::new(server.url().parse().expect("url"))).expect("client");
    kudo_controller::install_crds(&client, "test", Duration::from_secs(30))
        .await
        .expect("crds");
    let on = On {
        home: home.path(),
        kubeconfig: &kubeconfig,
        ns: "default",
    };

    let mut first = manager(home.path(), &kubeconfig);
    let failed = install_failing(&on).await;
    first.start_kill().expect("kill the first manager");
    let _ = first.wait().await;

    // Written with no manager running: the annotation and the trigger wait in the Instance.
    on.remove_blocker().await;
    let (code, out) = on.kudo(&["plan", "retry", "--instance", INSTANCE]).await;
    assert_eq!(code, 0, "plan retry: {out}");
    let inst = on.instance().await;
    assert_eq!(
        inst["metadata"]["annotations"]["kudo-rs.dev/retry"],
        format!("deploy/{}", text(&failed["uid"])),
        "{inst:#}"
    );
    assert_eq!(inst["spec"]["planExecution"]["planName"], "deploy", "{inst:#}");
    assert_eq!(on.deploy_status().await["uid"], failed["uid"], "nothing ran yet");

    // A second manager picks it up; `retry_resumes` (already retried: the blocker is gone and
    // the trigger is stored) would write another retry, so the checks are made here directly.
    let one_before = on.stamp(&format!("{INSTANCE}-one")).await;
    let second = manager(home.path(), &kubeconfig);
    let done = on.wait_deploy("COMPLETE", &text(&failed["uid"])).await;
    assert_eq!(on.stamp(&format!("{INSTANCE}-one")).await, one_before);
    let (gate_uid, _) = on.stamp(&format!("{INSTANCE}-gate")).await;
    assert_eq!(gate_uid, text(&done["uid"]));
    let notes = on.plan_started_notes().await;
    assert!(
        notes.iter().any(|n| n.contains(&format!(
            "retry of run {}: resuming at phase second step gate",
            text(&failed["uid"])
        ))),
        "{notes:?}"
    );
    drop(second);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_plan_retry_resumes_at_the_failed_step_and_trigger_restarts() {
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
    let ns = kudo_testkit::real_cluster::unique_namespace("retry");
    let on = On {
        home: home.path(),
        kubeconfig: &kubeconfig,
        ns: &ns,
    };
    on.kubectl(&["create", "namespace", &ns], None).await;
    scenario(&on).await;
    on.kubectl(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
}

/// A package whose one step is a Job (`backoffLimit: 0`) that exits with the code its ConfigMap
/// `<instance>-code` holds, or `exit 3` literally where the cluster decides exit codes from the
/// command line (`literal`: the real control plane's fake kubelet, ../shared/real-cluster).
fn job_package(dir: &Path, literal: bool) -> PathBuf {
    let root = dir.join("job-retry");
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::write(
        root.join("operator.yaml"),
        "apiVersion: kudo.dev/v1beta1\nname: job-retry\noperatorVersion: \"0.1.0\"\ntasks:\n  - name: run\n    kind: Apply\n    spec:\n      resources: [job.yaml]\nplans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: run\n            tasks: [run]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("params.yaml"),
        "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
    )
    .unwrap();
    let script = if literal {
        "exit 3"
    } else {
        "code=$(cat /cfg/code); echo \\\"exiting with $code\\\"; exit $code"
    };
    std::fs::write(
        root.join("templates/job.yaml"),
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{{{ .Name }}}}-run\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: run\n          image: busybox:1.36\n          command: [\"/bin/sh\", \"-c\", \"{script}\"]\n          volumeMounts:\n            - name: cfg\n              mountPath: /cfg\n      volumes:\n        - name: cfg\n          configMap:\n            name: {{{{ .Name }}}}-code\n"
        ),
    )
    .unwrap();
    root
}

/// `plan retry` of a step whose Job failed: the failed Job is deleted and created anew (another
/// uid), the PlanStarted Event says so, and the plan completes once the cause is fixed. `fix`
/// removes the cause between the two runs.
async fn job_retry_scenario(on: &On<'_>, literal: bool, fix: impl AsyncFnOnce(&On<'_>)) {
    let name = "jr";
    let code = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-code\n  namespace: {}\ndata:\n  code: \"3\"\n",
        on.ns
    );
    on.kubectl(&["apply", "-f", "-"], Some(&code)).await;
    let pkg = job_package(on.home, literal);
    let (status, out) = on
        .kudo(&[
            "install",
            pkg.to_str().unwrap(),
            "--instance",
            name,
            "--wait",
            "--wait-time",
            "120",
        ])
        .await;
    assert_eq!(status, 1, "the Job fails: {out}");
    let job = on.get(&["job", &format!("{name}-run")]).await;
    let failed_uid = text(&job["metadata"]["uid"]);
    let conditions = job["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "Failed" && c["status"] == "True"),
        "{job:#}"
    );
    let inst = on.get(&["instances.kudo.dev", name]).await;
    let failed_run = text(&inst["status"]["planStatus"]["deploy"]["uid"]);
    fix(on).await;
    let (status, out) = on
        .kudo(&[
            "plan",
            "retry",
            "--instance",
            name,
            "--wait",
            "--wait-time",
            "120",
        ])
        .await;
    assert_eq!(status, 0, "the retry completes: {out}");
    let job = on.get(&["job", &format!("{name}-run")]).await;
    assert_ne!(
        text(&job["metadata"]["uid"]),
        failed_uid,
        "the Job was created anew"
    );
    let conditions = job["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "Complete" && c["status"] == "True"),
        "{job:#}"
    );
    let list = on.get(&["events.v1.events.k8s.io"]).await;
    let want = format!(
        "Execution of plan deploy started (retry of run {failed_run}: resuming at phase main step run; recreating Job {}/{name}-run, which had failed)",
        on.ns
    );
    let notes: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == "PlanStarted" && e["regarding"]["name"] == name)
        .map(|e| text(&e["note"]))
        .collect();
    assert!(notes.contains(&want), "PlanStarted notes: {notes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_retry_recreates_a_failed_job_that_then_succeeds_on_dev() {
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &[]);
    let on = On {
        home: home.path(),
        kubeconfig: &dev.kubeconfig,
        ns: "default",
    };
    // The Job reads its exit code from the ConfigMap when its pod starts: fixing the ConfigMap
    // fixes the next run, not the failed Job.
    job_retry_scenario(&on, false, async |on: &On<'_>| {
        on.kubectl(
            &["patch", "configmap", "jr-code", "-p", r#"{"data":{"code":"0"}}"#],
            None,
        )
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_plan_retry_recreates_a_failed_job() {
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
    let ns = kudo_testkit::real_cluster::unique_namespace("retry-job");
    let on = On {
        home: home.path(),
        kubeconfig: &kubeconfig,
        ns: &ns,
    };
    on.kubectl(&["create", "namespace", &ns], None).await;
    // The fake kubelet decides a container's exit code from its command line (`exit 3` fails),
    // so the fix is made in the package as stored: the OperatorVersion's template now exits 0.
    // The retry renders it anew; the failed Job is deleted and created with the new command
    // (a Job's pod template cannot be changed in place, so without the recreation the apply
    // would be refused).
    job_retry_scenario(&on, true, async |on: &On<'_>| {
        let ov = "job-retry-0.1.0";
        let got = on.get(&["operatorversions.kudo.dev", ov]).await;
        let fixed = text(&got["spec"]["templates"]["job.yaml"]).replace("exit 3", "exit 0");
        let patch = serde_json::json!({"spec": {"templates": {"job.yaml": fixed}}}).to_string();
        on.kubectl(
            &[
                "patch",
                "operatorversions.kudo.dev",
                ov,
                "--type",
                "merge",
                "-p",
                &patch,
            ],
            None,
        )
        .await;
    })
    .await;
    on.kubectl(&["delete", "namespace", &ns, "--wait=false"], None)
        .await;
}
