//! Fleet rollouts (`kubectl kudo rollout`) end to end, through the real binary: the embedded API
//! server and simulated nodes in this process, the manager as a `kubectl-kudo manager` process
//! of its own (so a test can kill it and start another), and, ignored, the real control plane with
//! two sharded managers of the test's own.
//!
//! What counts as "changed exactly once" is read from the Instances' revisions: the manager
//! records every run it admits as a ControllerRevision, with who started it, so each Instance a
//! rollout changed has exactly one revision `startedBy: rollout`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-kudo");
const NS: &str = "default";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn instances_ar() -> ApiResource {
    ar("kudo.dev", "v1beta1", "Instance", "instances")
}

fn rollouts_ar() -> ApiResource {
    ar("kudo-rs.dev", "v1alpha1", "Rollout", "rollouts")
}

/// A copy of `examples/<example>` in `dir` as operatorVersion `version` (appVersion `app` when
/// given), for a "next version" of a package.
fn version_of(dir: &Path, example: &str, name: &str, version: &str, app: Option<&str>) -> PathBuf {
    let to = dir.join(name);
    let from = repo().join("examples").join(example);
    copy_dir(&from, &to);
    let op = to.join("operator.yaml");
    let text = std::fs::read_to_string(&op).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("operatorVersion:") {
                format!("operatorVersion: {version}")
            } else if let (true, Some(a)) = (l.starts_with("appVersion:"), app) {
                format!("appVersion: {a}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&op, text + "\n").unwrap();
    to
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// Adds to a first-operator package a plan `NAME` of one step applying a Job that runs `script`.
fn with_job_plan(pkg: &Path, plan: &str, script: &str) {
    let op = pkg.join("operator.yaml");
    let text = std::fs::read_to_string(&op).unwrap();
    let task = format!(
        "  - name: {plan}-job\n    kind: Apply\n    spec:\n      resources:\n        - {plan}-job.yaml\n"
    );
    let plan_yaml = format!(
        "  {plan}:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: job\n            tasks:\n              - {plan}-job\n"
    );
    let text = text
        .replacen("\ntasks:\n", &format!("\ntasks:\n{task}"), 1)
        .replacen("\nplans:\n", &format!("\nplans:\n{plan_yaml}"), 1);
    std::fs::write(&op, text).unwrap();
    let job = format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{{{ .Name }}}}-{plan}\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: run\n          image: busybox:1.36\n          command: [\"/bin/sh\", \"-c\", {script:?}]\n"
    );
    std::fs::write(pkg.join(format!("templates/{plan}-job.yaml")), job).unwrap();
}

/// A cluster with the kudo CRDs, a namespace to work in, the binary and a manager process.
struct Fleet {
    server: Option<kudo_apiserver::RunningServer>,
    sim: Option<kudo_sim::SimHandle>,
    client: kube::Client,
    home: tempfile::TempDir,
    kubeconfig: PathBuf,
    ns: String,
    managers: Vec<tokio::process::Child>,
}

impl Fleet {
    /// The embedded API server and simulator in this process.
    async fn embedded() -> Fleet {
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
        let config = kudo_sim::SimConfig::default();
        server.set_pod_runtime(std::sync::Arc::new(config.runtime.clone()));
        let sim = kudo_sim::spawn(client.clone(), config);
        Fleet {
            server: Some(server),
            sim: Some(sim),
            client,
            home,
            kubeconfig,
            ns: NS.into(),
            managers: Vec::new(),
        }
    }

    /// Starts a `kubectl-kudo manager` with `args` (its log goes to `manager-N.log` in HOME).
    fn start_manager(&mut self, args: &[&str]) {
        let log = std::fs::File::create(
            self.home
                .path()
                .join(format!("manager-{}.log", self.managers.len())),
        )
        .unwrap();
        let child = tokio::process::Command::new(BIN)
            .args(["manager", "--metrics-address", "127.0.0.1:0", "--kubeconfig"])
            .arg(&self.kubeconfig)
            .args(args)
            .env("HOME", self.home.path())
            .env("RUST_LOG", "info")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the manager");
        self.managers.push(child);
    }

    /// Kills manager `i` at once (SIGKILL: no graceful shutdown, no Lease handed over).
    async fn kill_manager(&mut self, i: usize) {
        let m = &mut self.managers[i];
        m.start_kill().expect("kill");
        let _ = m.wait().await;
    }

    /// `kubectl-kudo ARGS --kubeconfig … -n NS`: exit code and stdout + stderr.
    async fn kudo(&self, args: &[&str]) -> (i32, String) {
        let out = tokio::process::Command::new(BIN)
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["-n", &self.ns])
            .env("HOME", self.home.path())
            .env_remove("KUBECONFIG")
            .output()
            .await
            .expect("run kubectl-kudo");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (code, out) = self.kudo(args).await;
        assert_eq!(code, 0, "kubectl-kudo {args:?}: {out}");
        out
    }

    fn api(&self, r: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.ns, r)
    }

    /// Creates Instances `names` of OperatorVersion `ov` (operator `operator`), labelled.
    async fn create_instances(&self, operator: &str, ov: &str, names: &[String], labels: Value) {
        let api = self.api(&instances_ar());
        let mut labels = labels;
        labels["kudo.dev/operator"] = json!(operator);
        futures::future::join_all(names.iter().map(|n| {
            let obj: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
                "metadata": {"name": n, "labels": labels},
                "spec": {"operatorVersion": {"name": ov}},
            }))
            .unwrap();
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &obj)
                    .await
                    .expect("create instance")
            }
        }))
        .await;
    }

    async fn instance(&self, name: &str) -> Value {
        serde_json::to_value(self.api(&instances_ar()).get(name).await.expect("instance")).unwrap()
    }

    /// Waits until the deploy plan of every Instance of `names` is COMPLETE.
    async fn wait_deployed(&self, names: &[String]) {
        let api = self.api(&instances_ar());
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let all = api.list(&ListParams::default()).await.unwrap();
            let done = all
                .items
                .iter()
                .filter(|i| names.contains(i.metadata.name.as_ref().unwrap()))
                .filter(|i| i.data["status"]["planStatus"]["deploy"]["status"] == "COMPLETE")
                .count();
            if done == names.len() {
                return;
            }
            assert!(Instant::now() < deadline, "{done} of {} deployed", names.len());
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn rollout(&self, name: &str) -> Value {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &rollouts_ar());
        serde_json::to_value(api.get(name).await.expect("rollout")).unwrap()
    }

    /// Waits until the rollout's phase (for its current spec) is `want`; returns it.
    async fn wait_phase(&self, name: &str, want: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let r = self.rollout(name).await;
            let current = r["status"]["observedGeneration"] == r["metadata"]["generation"];
            if current && r["status"]["phase"] == want {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "rollout {name} never {want}: {:#}",
                r["status"]
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The revisions of every Instance of the namespace, by Instance name, oldest first: the
    /// ControllerRevisions' `data` with their outcome.
    async fn revisions(&self) -> BTreeMap<String, Vec<Value>> {
        let api = self.api(&ar("apps", "v1", "ControllerRevision", "controllerrevisions"));
        let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for cr in api.list(&ListParams::default()).await.unwrap().items {
            let v = serde_json::to_value(&cr).unwrap();
            let inst = v["metadata"]["labels"]["kudo.dev/instance"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let mut data = v["data"].clone();
            data["number"] = v["revision"].clone();
            data["outcome"] = v["metadata"]["annotations"]["kudo-rs.dev/outcome"].clone();
            out.entry(inst).or_default().push(data);
        }
        for revs in out.values_mut() {
            revs.sort_by_key(|r| r["number"].as_u64());
        }
        out
    }

    async fn stop(mut self) {
        for i in 0..self.managers.len() {
            self.kill_manager(i).await;
        }
        if let Some(sim) = self.sim.take() {
            let _ = sim.shutdown().await;
        }
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
    }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:02}")).collect()
}

/// The rollout's entry of Instance `name`.
fn entry<'v>(r: &'v Value, name: &str) -> &'v Value {
    r["status"]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str().unwrap().ends_with(&format!("/{name}")))
        .unwrap_or_else(|| panic!("no entry {name}: {:#}", r["status"]))
}

fn rollout_runs<'v>(revs: &'v [Value], rollout: &str) -> Vec<&'v Value> {
    revs.iter()
        .filter(|r| r["startedBy"]["by"] == "rollout" && r["startedBy"]["name"] == rollout)
        .collect()
}

/// Every Instance of the rollout is on `ov`, was changed by exactly one run of the rollout, and
/// no wave's Instance was changed before the wave before it completed.
async fn assert_rolled(fleet: &Fleet, r: &Value, ov: &str, waves: &[(&str, usize)]) {
    let name = r["metadata"]["name"].as_str().unwrap();
    let st = &r["status"];
    let got: Vec<(String, usize)> = st["waves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let n = st["instances"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["wave"] == w["name"])
                .count();
            (w["name"].as_str().unwrap().to_string(), n)
        })
        .collect();
    let want: Vec<(String, usize)> = waves.iter().map(|(w, n)| (w.to_string(), *n)).collect();
    assert_eq!(got, want, "waves of {name}");
    let revisions = fleet.revisions().await;
    let mut before: Option<String> = None;
    for w in st["waves"].as_array().unwrap() {
        for e in st["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["wave"] == w["name"])
        {
            let inst = e["name"].as_str().unwrap().rsplit('/').next().unwrap();
            assert_eq!(e["phase"], "Succeeded", "{e:#}");
            assert_eq!(
                fleet.instance(inst).await["spec"]["operatorVersion"]["name"],
                ov,
                "{inst}"
            );
            let revs = &revisions[inst];
            let ours = rollout_runs(revs, name);
            assert_eq!(ours.len(), 1, "{inst} changed once by {name}: {revs:#?}");
            assert_eq!(ours[0]["outcome"], "COMPLETE", "{inst}");
            assert_eq!(e["toRevision"], ours[0]["number"], "{inst}");
            if let Some(b) = &before {
                assert!(
                    e["changedAt"].as_str().unwrap() >= b.as_str(),
                    "{inst} changed before its wave started: {e:#} waves {:#}",
                    st["waves"]
                );
            }
        }
        before = w["completedAt"].as_str().map(str::to_string);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_first_operator_and_twenty_galera_instances_roll_out_in_four_waves() {
    let mut fleet = Fleet::embedded().await;
    fleet.start_manager(&["--leader-elect=false"]);
    let fo = repo().join("examples/first-operator");
    let galera = repo().join("examples/galera");
    fleet
        .ok(&["install", fo.to_str().unwrap(), "--skip-instance"])
        .await;
    fleet
        .ok(&["install", galera.to_str().unwrap(), "--skip-instance"])
        .await;
    let fos = names("fo", 50);
    fleet
        .create_instances("first-operator", "first-operator-1.7.9-0.2.0", &fos, json!({}))
        .await;
    let gals = names("gal", 16);
    fleet
        .create_instances("galera", "galera-10.5.3-0.1.0", &gals, json!({}))
        .await;
    // Four Galeras of the typed API: the manager makes (and owns) their Instances.
    let typed = fleet.api(&ar("galera.kudo.dev", "v1", "Galera", "galeras"));
    let typed_names = names("gal-typed", 4);
    for n in &typed_names {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "galera.kudo.dev/v1", "kind": "Galera", "metadata": {"name": n}, "spec": {"NODE_COUNT": 3}
        }))
        .unwrap();
        typed
            .create(&PostParams::default(), &obj)
            .await
            .expect("create a Galera");
    }
    let all: Vec<String> = fos.iter().chain(&gals).chain(&typed_names).cloned().collect();
    fleet.wait_deployed(&all).await;

    let fo_next = version_of(fleet.home.path(), "first-operator", "fo-next", "0.3.0", None);
    let galera_next = version_of(fleet.home.path(), "galera", "galera-next", "0.2.0", None);
    fleet
        .ok(&["install", fo_next.to_str().unwrap(), "--skip-instance"])
        .await;
    fleet
        .ok(&["install", galera_next.to_str().unwrap(), "--skip-instance"])
        .await;
    let dry = fleet
        .ok(&[
            "rollout",
            "start",
            "fo-next",
            "--operator-version",
            "first-operator-1.7.9-0.3.0",
            "--waves",
            "33%,33%",
            "--dry-run",
        ])
        .await;
    assert!(
        dry.contains(
            "Wave canary: 1 Instance\n    │   └── default/fo-00: plan deploy would run (operator version changes"
        ),
        "{dry}"
    );
    assert!(
        dry.contains("Wave wave-1: 17 Instances") && dry.contains("Wave remaining: 15 Instances"),
        "{dry}"
    );
    assert!(fleet.rollout_absent("fo-next").await, "a dry run writes nothing");
    for (name, ov, concurrent) in [
        ("fo-next", "first-operator-1.7.9-0.3.0", "9"),
        ("galera-next", "galera-10.5.3-0.2.0", "7"),
    ] {
        let out = fleet
            .ok(&[
                "rollout",
                "start",
                name,
                "--operator-version",
                ov,
                "--waves",
                "33%,33%",
                "--max-concurrent",
                concurrent,
            ])
            .await;
        assert!(
            out.contains(&format!("rollout.kudo-rs.dev/{name} created")),
            "{out}"
        );
    }
    for name in ["fo-next", "galera-next"] {
        let (code, out) = fleet
            .kudo(&["rollout", "status", name, "--wait", "--wait-time", "400"])
            .await;
        assert_eq!(code, 0, "{out}");
        assert!(out.contains(&format!("└── {name} (operatorVersion")), "{out}");
    }
    let mut r = Value::Null;
    for (name, ov, waves) in [
        (
            "fo-next",
            "first-operator-1.7.9-0.3.0",
            [("canary", 1), ("wave-1", 17), ("wave-2", 17), ("remaining", 15)],
        ),
        (
            "galera-next",
            "galera-10.5.3-0.2.0",
            [("canary", 1), ("wave-1", 7), ("wave-2", 7), ("remaining", 5)],
        ),
    ] {
        r = fleet.wait_phase(name, "Complete", Duration::from_secs(10)).await;
        assert_rolled(&fleet, &r, ov, &waves).await;
    }
    // kstatus: Ready, for the generation it observed.
    let conditions = r["status"]["conditions"].as_array().unwrap();
    let ready = conditions.iter().find(|c| c["type"] == "Ready").unwrap();
    assert_eq!(
        (ready["status"].as_str(), &ready["observedGeneration"]),
        (Some("True"), &r["metadata"]["generation"])
    );
    let history = fleet.ok(&["rollout", "history"]).await;
    let row: Vec<&str> = history
        .lines()
        .find(|l| l.starts_with("galera-next"))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    assert_eq!(
        row.get(3..7),
        Some(&["Complete", "20", "20", "0"][..]),
        "{history}"
    );
    fleet.stop().await;
}

impl Fleet {
    async fn rollout_absent(&self, name: &str) -> bool {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &rollouts_ar());
        api.get_opt(name).await.unwrap().is_none()
    }
}

/// The revisions of Instances `names`, to compare before and after.
async fn revisions_of(fleet: &Fleet, names: &[String]) -> Vec<Vec<Value>> {
    let all = fleet.revisions().await;
    names
        .iter()
        .map(|n| all.get(n).cloned().unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn broken_versions_stop_after_the_canary_and_a_rollback_restores_it() {
    let mut fleet = Fleet::embedded().await;
    fleet.start_manager(&["--leader-elect=false"]);
    let fo = repo().join("examples/first-operator");
    fleet
        .ok(&["install", fo.to_str().unwrap(), "--skip-instance"])
        .await;
    // Three sets of three Instances, one per broken rollout.
    let sets: Vec<Vec<String>> = ["a", "b", "c"].iter().map(|s| names(s, 3)).collect();
    for (s, set) in ["a", "b", "c"].iter().zip(&sets) {
        fleet
            .create_instances(
                "first-operator",
                "first-operator-1.7.9-0.2.0",
                set,
                json!({"set": s}),
            )
            .await;
    }
    fleet.wait_deployed(&sets.concat()).await;
    // A version whose image never becomes ready (on the simulated nodes a container whose image
    // has the word `fail` crash-loops), and one whose upgrade plan fails (a Job that exits 1).
    let never = version_of(
        fleet.home.path(),
        "first-operator",
        "fo-never",
        "0.3.0",
        Some("1.7.9-fail"),
    );
    let fatal = version_of(fleet.home.path(), "first-operator", "fo-fatal", "0.4.0", None);
    with_job_plan(&fatal, "upgrade", "echo migrating; exit 1");
    fleet
        .ok(&["install", never.to_str().unwrap(), "--skip-instance"])
        .await;
    fleet
        .ok(&["install", fatal.to_str().unwrap(), "--skip-instance"])
        .await;
    let before = revisions_of(&fleet, &sets.concat()).await;

    // (a) never ready, onFailure pause: the canary fails at its deadline, nothing else changes.
    let start = |name: &str, ov: &str, set: &str, on_failure: &str| {
        [
            "rollout",
            "start",
            name,
            "--operator-version",
            ov,
            "-l",
            &format!("set={set}"),
            "--progress-deadline",
            "20s",
            "--on-failure",
            on_failure,
        ]
        .map(String::from)
        .to_vec()
    };
    let args = start("never", "first-operator-1.7.9-fail-0.3.0", "a", "pause");
    fleet
        .ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    let args = start("fatal", "first-operator-1.7.9-0.4.0", "b", "rollback");
    fleet
        .ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    let args = start("never-back", "first-operator-1.7.9-fail-0.3.0", "c", "rollback");
    fleet
        .ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await;

    let (code, out) = fleet
        .kudo(&["rollout", "status", "never", "--wait", "--wait-time", "120"])
        .await;
    assert_eq!(code, 1, "a halted rollout: {out}");
    assert!(out.contains("[Halted]"), "{out}");
    let r = fleet.rollout("never").await;
    let canary = entry(&r, "a-00");
    assert_eq!(canary["phase"], "Failed", "{canary:#}");
    assert!(
        canary["failure"]
            .as_str()
            .unwrap()
            .starts_with("not COMPLETE and healthy within 20s"),
        "{canary:#}"
    );
    let stalled = r["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Stalled")
        .unwrap();
    assert_eq!(stalled["status"], "True");

    // (b) the upgrade plan fails: the canary is rolled back to its revision before, COMPLETE.
    // (c) never ready, with rollback: the rollout's stuck run is cancelled, then rolled back.
    for (name, canary) in [("fatal", "b-00"), ("never-back", "c-00")] {
        let r = fleet
            .wait_phase(name, "RolledBack", Duration::from_secs(180))
            .await;
        let e = entry(&r, canary);
        assert_eq!(
            (e["phase"].as_str(), e["fromRevision"].as_u64()),
            (Some("RolledBack"), Some(1)),
            "{e:#}"
        );
        let inst = fleet.instance(canary).await;
        assert_eq!(
            inst["spec"]["operatorVersion"]["name"],
            "first-operator-1.7.9-0.2.0"
        );
        let revs = &fleet.revisions().await[canary];
        let last = revs.last().unwrap();
        assert_eq!(
            (last["startedBy"]["by"].as_str(), last["outcome"].as_str()),
            (Some("rollback"), Some("COMPLETE")),
            "{revs:#?}"
        );
        assert_eq!(last["operatorVersion"], "first-operator-1.7.9-0.2.0");
        assert_eq!(rollout_runs(revs, name).len(), 1, "{revs:#?}");
        // The rollback's run is the Instance's last, COMPLETE (a failed upgrade may leave its
        // failed Job behind, which the Instance's readiness still counts).
        let run = last["planUid"].as_str().unwrap();
        let statuses = inst["status"]["planStatus"].as_object().unwrap();
        assert!(
            statuses
                .values()
                .any(|p| p["uid"] == run && p["status"] == "COMPLETE"),
            "{inst:#}"
        );
    }
    // The other Instances of every set: untouched (same revisions, same OperatorVersion).
    let after = revisions_of(&fleet, &sets.concat()).await;
    for (i, n) in sets.concat().iter().enumerate() {
        if n.ends_with("-00") {
            continue;
        }
        assert_eq!(after[i], before[i], "{n} was changed");
        assert_eq!(
            fleet.instance(n).await["spec"]["operatorVersion"]["name"],
            "first-operator-1.7.9-0.2.0"
        );
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_parameter_rollout_in_waves_and_one_that_fails_at_the_canary() {
    let mut fleet = Fleet::embedded().await;
    fleet.start_manager(&["--leader-elect=false"]);
    let fo = repo().join("examples/first-operator");
    fleet
        .ok(&["install", fo.to_str().unwrap(), "--skip-instance"])
        .await;
    let all = names("p", 10);
    fleet
        .create_instances("first-operator", "first-operator-1.7.9-0.2.0", &all, json!({}))
        .await;
    fleet.wait_deployed(&all).await;
    fleet
        .ok(&[
            "rollout",
            "start",
            "three",
            "-p",
            "REPLICAS=3",
            "-l",
            "kudo.dev/operator=first-operator",
            "--waves",
            "40%,30%",
            "--max-concurrent",
            "50%",
            "--min-success-time",
            "2s",
            "--wait",
            "--wait-time",
            "300",
        ])
        .await;
    let r = fleet.rollout("three").await;
    assert_rolled(
        &fleet,
        &r,
        "first-operator-1.7.9-0.2.0",
        &[("canary", 1), ("wave-1", 4), ("wave-2", 3), ("remaining", 2)],
    )
    .await;
    let revs = fleet.revisions().await;
    for n in &all {
        assert_eq!(fleet.instance(n).await["spec"]["parameters"]["REPLICAS"], "3");
        assert_eq!(rollout_runs(&revs[n], "three")[0]["change"], "REPLICAS: 2 → 3");
    }
    let dep: Api<DynamicObject> = fleet.api(&ar("apps", "v1", "Deployment", "deployments"));
    assert_eq!(dep.get("p-05-nginx").await.unwrap().data["spec"]["replicas"], 3);

    // A value KUDO's rules refuse fails the canary before anything is written; one that is
    // admitted but breaks the plan (a negative replica count the API server rejects) is rolled
    // back. Either way the other Instances keep their revisions.
    let before = revisions_of(&fleet, &all).await;
    fleet
        .ok(&[
            "rollout",
            "start",
            "refused",
            "-p",
            "REPLICAS=many",
            "-l",
            "kudo.dev/operator=first-operator",
        ])
        .await;
    let r = fleet
        .wait_phase("refused", "Halted", Duration::from_secs(60))
        .await;
    assert!(
        entry(&r, "p-00")["failure"]
            .as_str()
            .unwrap()
            .starts_with("refused: "),
        "{:#}",
        r["status"]
    );
    fleet.ok(&["rollout", "abort", "refused"]).await;
    fleet
        .wait_phase("refused", "Aborted", Duration::from_secs(60))
        .await;
    fleet
        .ok(&[
            "rollout",
            "start",
            "negative",
            "-p",
            "REPLICAS=-1",
            "-l",
            "kudo.dev/operator=first-operator",
            "--on-failure",
            "rollback",
        ])
        .await;
    let r = fleet
        .wait_phase("negative", "RolledBack", Duration::from_secs(120))
        .await;
    let e = entry(&r, "p-00");
    assert!(
        e["failure"].as_str().unwrap().contains("ended FATAL_ERROR"),
        "{e:#}"
    );
    let p0 = fleet.instance("p-00").await;
    assert_eq!(
        p0["spec"]["parameters"]["REPLICAS"], "3",
        "back on the values of its revision before"
    );
    let after = revisions_of(&fleet, &all).await;
    for (i, n) in all.iter().enumerate().skip(1) {
        assert_eq!(after[i], before[i], "{n} was changed");
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn joining_leaving_busy_and_finished_instances_and_a_manager_restart() {
    let mut fleet = Fleet::embedded().await;
    fleet.start_manager(&["--leader-elect=false"]);
    let hold = version_of(fleet.home.path(), "first-operator", "fo-hold", "0.2.0", None);
    with_job_plan(&hold, "hold", "sleep 20");
    let hold_next = version_of(fleet.home.path(), "first-operator", "fo-hold-next", "0.3.0", None);
    with_job_plan(&hold_next, "hold", "sleep 20");
    fleet
        .ok(&["install", hold.to_str().unwrap(), "--skip-instance"])
        .await;
    fleet
        .ok(&["install", hold_next.to_str().unwrap(), "--skip-instance"])
        .await;
    let (old, new) = ("first-operator-1.7.9-0.2.0", "first-operator-1.7.9-0.3.0");
    let hs = names("h", 7);
    fleet
        .create_instances("first-operator", old, &hs, json!({}))
        .await;
    // h-07 runs the target already.
    fleet
        .create_instances("first-operator", new, &["h-07".to_string()], json!({}))
        .await;
    let mut all = hs.clone();
    all.push("h-07".into());
    fleet.wait_deployed(&all).await;
    // h-02 is busy with a plan of its own when its turn comes: the rollout waits for it.
    fleet
        .ok(&["plan", "trigger", "--name", "hold", "--instance", "h-02"])
        .await;
    fleet
        .ok(&[
            "rollout",
            "start",
            "move",
            "--operator-version",
            new,
            "--waves",
            "50%",
            "--max-concurrent",
            "2",
            "--min-success-time",
            "3s",
        ])
        .await;
    // Once the canary completed and h-02 waits: h-04 is deleted, h-08 joins, the manager dies.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let r = fleet.rollout("move").await;
        let waits = r["status"]["instances"].as_array().is_some_and(|a| {
            a.iter()
                .any(|e| e["name"] == "default/h-02" && e["phase"] == "Waiting")
        });
        if waits {
            assert_eq!(
                entry(&r, "h-02")["message"],
                "plan hold is running",
                "{:#}",
                r["status"]
            );
            break;
        }
        assert!(Instant::now() < deadline, "h-02 never waited: {:#}", r["status"]);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    fleet
        .api(&instances_ar())
        .delete("h-04", &DeleteParams::default())
        .await
        .unwrap();
    fleet
        .create_instances("first-operator", old, &["h-08".to_string()], json!({}))
        .await;
    fleet.kill_manager(0).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    fleet.start_manager(&["--leader-elect=false"]);
    let r = fleet
        .wait_phase("move", "Complete", Duration::from_secs(240))
        .await;
    assert_eq!(entry(&r, "h-07")["phase"], "Skipped");
    assert_eq!(entry(&r, "h-07")["wave"], "");
    assert_eq!(entry(&r, "h-04")["phase"], "Deleted");
    assert_eq!(entry(&r, "h-08")["wave"], "remaining");
    let revs = fleet.revisions().await;
    for n in ["h-00", "h-01", "h-02", "h-03", "h-05", "h-06", "h-08"] {
        let e = entry(&r, n);
        assert_eq!(e["phase"], "Succeeded", "{e:#}");
        assert_eq!(rollout_runs(&revs[n], "move").len(), 1, "{n}: {:#?}", revs[n]);
        assert_eq!(fleet.instance(n).await["spec"]["operatorVersion"]["name"], new);
    }
    // The hold plan ran to its end (never cancelled), and h-02 was changed after it.
    let h2 = &revs["h-02"];
    let hold_run = h2.iter().find(|r| r["plan"] == "hold").expect("the hold run");
    assert_eq!(hold_run["outcome"], "COMPLETE");
    assert!(hold_run["number"].as_u64() < rollout_runs(h2, "move")[0]["number"].as_u64());
    assert_eq!(revs["h-07"].len(), 1, "h-07 was not changed");
    fleet.stop().await;
}

/// The prefix of the namespaces of tests that run managers of their own on the real control
/// plane: `scripts/real-cluster-stage.sh` starts its manager with `--ignore-namespace` of it.
const OWN_MANAGERS: &str = "rollout-shards";

impl Fleet {
    /// The real control plane, in a new namespace of `prefix`; no manager started.
    async fn real(prefix: &str) -> Fleet {
        let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
        let client = kudo_testkit::real_cluster::client().await;
        let ns = kudo_testkit::real_cluster::unique_namespace(prefix);
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        let obj = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        namespaces
            .create(&PostParams::default(), &obj)
            .await
            .expect("namespace");
        Fleet {
            server: None,
            sim: None,
            client,
            home: tempfile::tempdir().unwrap(),
            kubeconfig,
            ns,
            managers: Vec::new(),
        }
    }

    /// A sharded manager of this test (`--shards 2`, Leases in the test's namespace) acting only
    /// there, as replica `identity`.
    fn start_replica(&mut self, identity: &str) {
        let ns = self.ns.clone();
        let args = [
            "--watch-namespace",
            &ns,
            "--shards",
            "2",
            "--lease-namespace",
            &ns,
            "--lease-name",
            "rollout-test",
            "--lease-duration",
            "4",
        ];
        self.start_manager_as(identity, &args);
    }

    fn start_manager_as(&mut self, identity: &str, args: &[&str]) {
        let log = std::fs::File::create(self.home.path().join(format!("{identity}.log"))).unwrap();
        let child = tokio::process::Command::new(BIN)
            .args(["manager", "--metrics-address", "127.0.0.1:0", "--kubeconfig"])
            .arg(&self.kubeconfig)
            .args(args)
            .env("HOME", self.home.path())
            .env("KUDO_POD_NAME", identity)
            .env("RUST_LOG", "info")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start a replica");
        self.managers.push(child);
    }

    /// Who holds shard `shard` of the test's Lease group now.
    async fn holder(&self, shard: u32) -> Option<String> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.client.clone(), &self.ns);
        let l = leases
            .get_opt(&format!("rollout-test-shard-{shard}"))
            .await
            .ok()??;
        l.spec?.holder_identity
    }

    fn log_of(&self, identity: &str) -> String {
        std::fs::read_to_string(self.home.path().join(format!("{identity}.log"))).unwrap_or_default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_a_hundred_instance_rollout_survives_the_death_of_its_sharded_manager() {
    let mut fleet = Fleet::real(OWN_MANAGERS).await;
    fleet.start_replica("replica-a");
    fleet.start_replica("replica-b");
    let fo = repo().join("examples/first-operator");
    fleet
        .ok(&["install", fo.to_str().unwrap(), "--skip-instance"])
        .await;
    let all = names("fo", 100);
    for chunk in all.chunks(20) {
        fleet
            .create_instances("first-operator", "first-operator-1.7.9-0.2.0", chunk, json!({}))
            .await;
    }
    fleet.wait_deployed(&all).await;
    let next = version_of(fleet.home.path(), "first-operator", "fo-next", "0.3.0", None);
    fleet
        .ok(&["install", next.to_str().unwrap(), "--skip-instance"])
        .await;
    let name = format!("shards-{}", &fleet.ns[OWN_MANAGERS.len() + 1..]);
    fleet
        .ok(&[
            "rollout",
            "start",
            &name,
            "--operator-version",
            "first-operator-1.7.9-0.3.0",
            "--waves",
            "25%,25%",
            "--max-concurrent",
            "10",
        ])
        .await;
    // Mid-rollout (the canary done, wave-1 changing): the replica running it dies.
    let shard = kudo_engine::shard::shard_of("", &name, 2);
    let deadline = Instant::now() + Duration::from_secs(300);
    let runner = loop {
        let r = fleet.rollout(&name).await;
        let changed = r["status"]["instances"].as_array().map_or(0, |a| {
            a.iter()
                .filter(|e| e["wave"] == "wave-1" && e["changedAt"].is_string())
                .count()
        });
        if changed >= 3 {
            break fleet.holder(shard).await.expect("the rollout's shard is held");
        }
        assert!(
            Instant::now() < deadline,
            "wave-1 never started: {:#}",
            r["status"]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let index = if runner == "replica-a" { 0 } else { 1 };
    fleet.kill_manager(index).await;
    let r = fleet
        .wait_phase(&name, "Complete", Duration::from_secs(600))
        .await;
    let survivor = if index == 0 { "replica-b" } else { "replica-a" };
    assert_eq!(
        fleet.holder(shard).await.as_deref(),
        Some(survivor),
        "the shard moved"
    );
    assert!(
        fleet.log_of(survivor).contains("running the rollout"),
        "{}",
        fleet.log_of(survivor)
    );
    assert_rolled(
        &fleet,
        &r,
        "first-operator-1.7.9-0.3.0",
        &[("canary", 1), ("wave-1", 25), ("wave-2", 25), ("remaining", 49)],
    )
    .await;
    let revisions = fleet.revisions().await;
    for n in &all {
        assert_eq!(
            revisions[n].len(),
            2,
            "{n}: install and the rollout's run, nothing else: {:#?}",
            revisions[n]
        );
    }
    let ns = fleet.ns.clone();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(fleet.client.clone());
    let rollouts: Api<DynamicObject> = Api::all_with(fleet.client.clone(), &rollouts_ar());
    let _ = rollouts.delete(&name, &DeleteParams::default()).await;
    fleet.stop().await;
    let _ = namespaces.delete(&ns, &DeleteParams::background()).await;
}
