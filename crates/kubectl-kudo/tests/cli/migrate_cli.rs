//! `kubectl kudo migrate` on a cluster as KUDO v0.19 leaves it (`common::kudo019`): the embedded
//! cluster (its manager told to leave `kudo-migrate-*` alone until the migration) and the real
//! control plane (the stage's manager ignores `kudo-migrate-*` too). After the migration a
//! manager watching the Instance's namespace finishes the plan KUDO was running.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::{Value, json};

use crate::common::{self, BIN, kudo019};

async fn client_for(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kubeconfig");
    kube::Client::try_from(config).expect("client")
}

struct Manager(Child);
impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn instances(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kudo.dev", "v1beta1", "Instance");
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "instances"),
    )
}

/// Waits (up to 15 s: the API server picks a new webhook configuration up within seconds) until
/// KUDO's broken webhook refuses writes of Instance `name`.
async fn webhook_refuses(client: &kube::Client, ns: &str, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let touch = json!({"metadata": {"labels": {"touched": "yes"}}});
        let write = instances(client, ns)
            .patch(name, &Default::default(), &kube::api::Patch::Merge(&touch))
            .await;
        if write.is_err() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "KUDO's broken webhook refuses Instance writes"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A kudo-rs manager watching `ns`; with `log`, its controller's debug log goes there (JSON lines).
fn manager(kubeconfig: &Path, home: &Path, ns: &str, log: Option<&Path>) -> Manager {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "manager",
        "--leader-elect=false",
        "--metrics-address",
        "127.0.0.1:0",
        "--watch-namespace",
        ns,
        "--kubeconfig",
    ])
    .arg(kubeconfig)
    .env("HOME", home)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if let Some(log) = log {
        cmd.arg("--json-logs")
            .env("RUST_LOG", "kudo_controller=debug")
            .stdout(std::fs::File::create(log).unwrap());
    }
    Manager(cmd.spawn().expect("manager"))
}

/// Waits (up to 120 s) until Instance `name`'s deploy plan is COMPLETE; returns the Instance.
async fn deploy_completes(client: &kube::Client, ns: &str, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let i = serde_json::to_value(instances(client, ns).get(name).await.unwrap()).unwrap();
        if i["status"]["planStatus"]["deploy"]["status"] == "COMPLETE" {
            return i;
        }
        assert!(
            Instant::now() < deadline,
            "deploy did not complete under kudo-rs: {}",
            i["status"]
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `obj`'s fields are kudo's (no entry of KUDO's manager left) and KUDO's last-applied
/// annotation is gone.
fn assert_handed_over(obj: &Value) {
    let what = format!("{} {}", obj["kind"], obj["metadata"]["name"]);
    let managers: Vec<&Value> = obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["manager"])
        .collect();
    assert!(
        managers.contains(&&json!("kudo")) && !managers.contains(&&json!(kudo019::MANAGER)),
        "{what}: {managers:?}"
    );
    assert!(
        obj["metadata"]["annotations"]
            .get("kudo.dev/last-applied-configuration")
            .is_none(),
        "{what} still carries the last-applied annotation"
    );
}

/// Runs `migrate --yes` again and again, each life killed by the fail point
/// `migrate-step-done` right after a step's effects and before the record says it is done:
/// the first life after its first step, every later one after its second (its first is the
/// step the previous life died in, run again). Returns, per killed life, the steps it recorded;
/// the life that finishes by itself ends the loop.
fn kill_after_each_step(home: &Path, kubeconfig: &Path, ns: &str, args: &[&str]) -> Vec<Vec<String>> {
    let mut killed = Vec::new();
    for life in 0..10 {
        let nth = if life == 0 { 1 } else { 2 };
        let out = common::kudo_command(home, kubeconfig, ns, args)
            .env("KUDO_FAILPOINT", format!("migrate-step-done:{nth}"))
            .output()
            .expect("migrate");
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            return killed;
        }
        assert!(
            err.contains(&format!("kudo failpoint migrate-step-done:{nth} hit")),
            "life {life} failed without its fail point: {err}"
        );
        let steps = err
            .lines()
            .filter_map(|l| l.split_once('✓').map(|(_, s)| s.trim().to_string()));
        killed.push(steps.collect());
    }
    panic!("migrate did not finish in 10 lives; killed lives recorded {killed:?}");
}

/// The whole migration of a first-operator Instance KUDO left mid-plan, in namespaces
/// `kudo-migrate-<tag>-sys` (KUDO) and `kudo-migrate-<tag>` (the Instance). With `kill`, the
/// `--yes` run is killed after every step's effects and run again until it finishes.
async fn migrate_first_operator(kubeconfig: &Path, home: &Path, tag: &str, kill: bool) {
    let client = client_for(kubeconfig).await;
    let webhooks = kudo019::served(&client, "admissionregistration.k8s.io/v1").await;
    let (sys, ns) = namespaces(&client, tag).await;
    let pkg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/first-operator");
    let (code, out, err) = common::kudo_in(
        home,
        kubeconfig,
        &ns,
        &["install", pkg.to_str().unwrap(), "--skip-instance"],
    );
    assert_eq!(code, 0, "{out}{err}");
    kudo019::init(&client, &sys).await;
    let run_uid = "6f1f1c5e-0000-4000-8000-000000000001";
    let before = kudo019::first_operator(&client, &ns, "web", "first-operator-1.7.9-0.2.0", run_uid).await;

    kudo019::webhook(&client, &sys, &ns).await;
    if webhooks {
        webhook_refuses(&client, &ns, "web").await;
    }
    let args = ["migrate", "--kudo-namespace", sys.as_str()];
    let (code, plan, err) = common::kudo_in(home, kubeconfig, &sys, &args[..3]);
    assert_eq!(code, 0, "{plan}{err}");
    assert!(
        plan.contains("Steps to run: save, stop-kudo, remove-webhook"),
        "{plan}"
    );
    assert!(
        // The other managers (kube-controller-manager's) and their order vary with timing.
        plan.lines().any(|l| l.contains("Deployment/web-nginx [")
            && (l.contains("[manager (Update)") || l.contains(", manager (Update)"))
            && l.ends_with("KUDO owns fields, last-applied")),
        "{plan}"
    );
    assert!(plan.contains("Nothing was changed"), "{plan}");

    let yes = [&args[..], &["--yes"]].concat();
    if kill {
        let killed = kill_after_each_step(home, kubeconfig, &sys, &yes);
        // Seven steps: the first life records none, each later one the step its predecessor
        // died in.
        assert_eq!(killed.len(), 7, "one kill after each step: {killed:?}");
        assert!(killed[0].is_empty(), "{killed:?}");
        let redone: Vec<Vec<String>> = killed[1..].to_vec();
        assert_eq!(
            redone,
            [
                "save",
                "stop-kudo",
                "remove-webhook",
                "install",
                "convert-status",
                "take-ownership"
            ]
            .map(|s| vec![s.to_string()]),
            "each life redid the step the last one died in"
        );
    } else {
        let (code, out, err) = common::kudo_in(home, kubeconfig, &sys, &yes);
        assert_eq!(code, 0, "{out}{err}");
        assert!(err.contains("✓ drop-last-applied"), "{err}");
    }
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), &sys);
    assert_eq!(
        sts.get("kudo-controller-manager").await.unwrap().spec.replicas,
        Some(0)
    );
    let hooks: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(
                "admissionregistration.k8s.io",
                "v1",
                "MutatingWebhookConfiguration",
            ),
            "mutatingwebhookconfigurations",
        ),
    );
    let hook_name = format!("kudo-manager-instance-admission-webhook-config-{sys}");
    if webhooks {
        assert!(
            hooks.get_opt(&hook_name).await.unwrap().is_none(),
            "the webhook is gone"
        );
    }
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let after = serde_json::to_value(deploys.get("web-nginx").await.unwrap()).unwrap();
    assert_eq!(
        after["metadata"]["uid"], before["metadata"]["uid"],
        "not recreated"
    );
    // The pod template is untouched (no rollout); the generation moves only because removing an
    // annotation of a Deployment bumps it (kube-apiserver's deployment strategy does).
    assert_eq!(
        after["spec"]["template"]["spec"],
        before["spec"]["template"]["spec"]
    );
    assert_eq!(
        after["spec"]["template"]["metadata"]["annotations"],
        before["spec"]["template"]["metadata"]["annotations"]
    );
    assert_handed_over(&after);

    // Run again: every step recorded, nothing to do.
    let (code, out, err) = common::kudo_in(home, kubeconfig, &sys, &[&args[..], &["--yes"]].concat());
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains('✓'), "no step ran twice: {err}");

    let _manager = manager(kubeconfig, home, &ns, None);
    let inst = deploy_completes(&client, &ns, "web").await;
    assert_eq!(
        inst["status"]["planStatus"]["deploy"]["uid"], run_uid,
        "KUDO's run continued, not a new one"
    );
    let done = serde_json::to_value(deploys.get("web-nginx").await.unwrap()).unwrap();
    assert_eq!(
        done["metadata"]["uid"], before["metadata"]["uid"],
        "not recreated"
    );
    assert_eq!(
        done["metadata"]["generation"], after["metadata"]["generation"],
        "the apply was a no-op"
    );

    // The fields KUDO wrote are kudo's now: an OperatorVersion whose template no longer renders
    // the container's ports prunes them (server-side apply prunes only what its manager owns).
    let next = tempfile::tempdir().unwrap();
    for f in ["operator.yaml", "params.yaml", "templates/deployment.yaml"] {
        let text = std::fs::read_to_string(pkg.join(f)).unwrap();
        let text = text
            .replace("operatorVersion: 0.2.0", "operatorVersion: 0.3.0")
            .replace("          ports:\n            - containerPort: 80\n", "");
        std::fs::create_dir_all(next.path().join(f).parent().unwrap()).unwrap();
        std::fs::write(next.path().join(f), text).unwrap();
    }
    let upgrade = ["upgrade", next.path().to_str().unwrap(), "--instance", "web"];
    let (code, out, err) = common::kudo_in(home, kubeconfig, &ns, &upgrade);
    assert_eq!(code, 0, "{out}{err}");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let i = serde_json::to_value(instances(&client, &ns).get("web").await.unwrap()).unwrap();
        let deploy = &i["status"]["planStatus"]["deploy"];
        if deploy["uid"] != run_uid && deploy["status"] == "COMPLETE" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the upgrade did not complete: {}",
            i["status"]
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let upgraded = serde_json::to_value(deploys.get("web-nginx").await.unwrap()).unwrap();
    assert_eq!(
        upgraded["metadata"]["uid"], before["metadata"]["uid"],
        "not recreated"
    );
    let container = &upgraded["spec"]["template"]["spec"]["containers"][0];
    assert!(
        container.get("ports").is_none(),
        "the dropped field was pruned: {container}"
    );

    // Rollback: KUDO's manager and webhook are back.
    let (code, out, err) = common::kudo_in(
        home,
        kubeconfig,
        &sys,
        &["migrate", "--rollback", "--kudo-namespace", &sys],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        sts.get("kudo-controller-manager").await.unwrap().spec.replicas,
        Some(1)
    );
    if webhooks {
        assert!(
            hooks.get_opt(&hook_name).await.unwrap().is_some(),
            "the webhook is back"
        );
    }
    let back = serde_json::to_value(deploys.get("web-nginx").await.unwrap()).unwrap();
    assert!(
        back["metadata"]["annotations"]
            .get("kudo.dev/last-applied-configuration")
            .is_some()
    );
    if webhooks {
        let _ = hooks.delete(&hook_name, &Default::default()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_takes_over_a_kudo_installation_mid_plan() {
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &["--ignore-namespace", "kudo-migrate-*"]);
    migrate_first_operator(&dev.kubeconfig, home.path(), "dev", false).await;
}

/// Killed after any step's effects, before it is recorded, and run again, migrate finishes:
/// every step is safe to repeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_killed_midway_and_run_again_finishes() {
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &["--ignore-namespace", "kudo-migrate-*"]);
    migrate_first_operator(&dev.kubeconfig, home.path(), "kill", true).await;
}

/// Taken by each migration on the real control plane: migrate converts every Instance of the
/// cluster, so a migration would take over the other test's KUDO Instance too, while that
/// test's broken webhook still refuses writes of it. On the real cluster one migration runs at
/// a time (the embedded ones have a cluster each).
static REAL_CLUSTER_MIGRATION: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real control plane; run by scripts/real-cluster-stage.sh"]
async fn real_cluster_migrate_takes_over_a_kudo_installation_mid_plan() {
    let _turn = REAL_CLUSTER_MIGRATION.lock().await;
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
    let tag = kudo_testkit::real_cluster::unique_namespace("r");
    migrate_first_operator(&kubeconfig, home.path(), &tag, false).await;
}

/// Every object the fixture wrote, read again: `(before, now)`, `now` `None` where it is gone.
async fn read_again(client: &kube::Client, written: &[Value]) -> Vec<(Value, Option<Value>)> {
    let mut out = Vec::new();
    for before in written {
        let (kind, ns) = (
            before["kind"].as_str().unwrap(),
            before["metadata"]["namespace"].as_str(),
        );
        let (group, version) = before["apiVersion"]
            .as_str()
            .unwrap()
            .split_once('/')
            .unwrap_or(("", before["apiVersion"].as_str().unwrap()));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let plural = format!("{}s", kind.to_ascii_lowercase());
        let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns.unwrap(), &ar);
        let now = api
            .get_opt(before["metadata"]["name"].as_str().unwrap())
            .await
            .unwrap();
        out.push((before.clone(), now.map(|o| serde_json::to_value(o).unwrap())));
    }
    out
}

/// The UIDs of the pods of galera's StatefulSet in `ns`, by name.
async fn galera_pods(client: &kube::Client, ns: &str, name: &str) -> BTreeMap<String, String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(&format!("app=galera,instance={name}"));
    let list = pods.list(&lp).await.unwrap();
    list.into_iter()
        .map(|p| (p.metadata.name.unwrap(), p.metadata.uid.unwrap()))
        .collect()
}

/// The steps the kudo-rs manager ran tasks of, from its JSON debug log ("task ran", field
/// `step`).
fn steps_run(log: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["fields"]["message"] == "task ran")
        .filter_map(|l| l["fields"]["step"].as_str().map(String::from))
        .collect()
}

/// Namespaces `kudo-migrate-<tag>-sys` (KUDO's) and `kudo-migrate-<tag>` (the Instance's),
/// created.
async fn namespaces(client: &kube::Client, tag: &str) -> (String, String) {
    let (sys, ns) = (format!("kudo-migrate-{tag}-sys"), format!("kudo-migrate-{tag}"));
    let nss: Api<Namespace> = Api::all(client.clone());
    for n in [&sys, &ns] {
        let o = serde_json::from_value(json!({"metadata": {"name": n}})).unwrap();
        nss.create(&PostParams::default(), &o).await.expect("namespace");
    }
    (sys, ns)
}

/// The fixture wrote galera's objects as KUDO would have: what the eight steps apply, the
/// StatefulSet's pod template with KUDO's dependencies hash and YAML 1.1's octal mode.
fn assert_written_as_kudo_writes(written: &[Value]) {
    let mut kinds = BTreeMap::new();
    for o in written {
        *kinds.entry(o["kind"].as_str().unwrap()).or_insert(0) += 1;
    }
    let want = [
        ("ConfigMap", 3),
        ("Deployment", 1),
        ("Secret", 1),
        ("Service", 3),
        ("StatefulSet", 1),
    ];
    assert_eq!(kinds, want.into(), "what galera's first eight steps apply");
    let sts_before = written.iter().find(|o| o["kind"] == "StatefulSet").unwrap();
    let template = &sts_before["spec"]["template"];
    assert!(
        template["metadata"]["annotations"]["kudo.dev/dependencies-hash"].is_string(),
        "KUDO hashes the node-scripts ConfigMap the pods mount: {template}"
    );
    // sigs.k8s.io/yaml reads YAML 1.1: galera's `defaultMode: 0755` is octal.
    assert_eq!(template["spec"]["volumes"][1]["configMap"]["defaultMode"], 0o755);
}

/// Waits (up to 180 s) until galera's StatefulSet `db-galera` in `ns` has its three pods ready;
/// their UIDs by name.
async fn ready_pods(client: &kube::Client, ns: &str) -> BTreeMap<String, String> {
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(180);
    while sts
        .get("db-galera")
        .await
        .unwrap()
        .status
        .and_then(|s| s.ready_replicas)
        != Some(3)
    {
        assert!(Instant::now() < deadline, "galera's 3 pods did not become ready");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let before = galera_pods(client, ns, "db").await;
    assert_eq!(before.len(), 3, "{before:?}");
    before
}

/// After kudo-rs finished galera's deploy: what the bootstrap steps made is gone (`cleanup`
/// deletes it), everything else is the object the fixture wrote, handed over, the StatefulSet's
/// generation and pod template as KUDO left them.
fn assert_after_the_plan(objects: Vec<(Value, Option<Value>)>) {
    for (before, now) in objects {
        let what = format!("{} {}", before["kind"], before["metadata"]["name"]);
        let step = before["metadata"]["annotations"]["kudo.dev/step"]
            .as_str()
            .unwrap();
        let Some(now) = now else {
            // The cleanup step deletes what the bootstrap steps made.
            assert!(step.starts_with("bootstrap_"), "{what} (step {step}) is gone");
            continue;
        };
        assert!(
            !step.starts_with("bootstrap_"),
            "{what}: cleanup did not delete it"
        );
        assert_eq!(
            now["metadata"]["uid"], before["metadata"]["uid"],
            "{what} recreated"
        );
        assert_handed_over(&now);
        if before["kind"] == "StatefulSet" {
            assert_eq!(
                now["metadata"]["generation"], before["metadata"]["generation"],
                "{what}"
            );
            assert_eq!(
                now["spec"]["template"], before["spec"]["template"],
                "{what}: pod template"
            );
        }
    }
}

/// galera "installed by KUDO" and stopped mid-way through deploy (`kudo019::GALERA_STEPS`), in
/// `kudo-migrate-<tag>(-sys)`: `migrate --yes` hands every object over without recreating one,
/// and a kudo-rs manager resumes the plan at its IN_PROGRESS step and finishes it. With `pods`
/// (the real control plane: its StatefulSet controller makes the pods, the fake kubelet runs
/// them) the pods are running before and the same pods after.
async fn migrate_galera(kubeconfig: &Path, home: &Path, tag: &str, pods: bool) {
    let client = client_for(kubeconfig).await;
    let webhooks = kudo019::served(&client, "admissionregistration.k8s.io/v1").await;
    let (sys, ns) = namespaces(&client, tag).await;
    let pkg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/galera");
    let install = ["install", pkg.to_str().unwrap(), "--skip-instance"];
    let (code, out, err) = common::kudo_in(home, kubeconfig, &ns, &install);
    assert_eq!(code, 0, "{out}{err}");
    kudo019::init(&client, &sys).await;
    let run_uid = "6f1f1c5e-0000-4000-8000-000000000002";
    let ov = "galera-10.5.3-0.1.0";
    let Some(written) = kudo019::galera(&client, &pkg, &ns, "db", ov, run_uid).await else {
        return;
    };
    assert_written_as_kudo_writes(&written);
    let pods_before = if pods {
        ready_pods(&client, &ns).await
    } else {
        BTreeMap::new()
    };
    kudo019::webhook(&client, &sys, &ns).await;
    if webhooks {
        webhook_refuses(&client, &ns, "db").await;
    }

    let yes = ["migrate", "--kudo-namespace", sys.as_str(), "--yes"];
    let (code, out, err) = common::kudo_in(home, kubeconfig, &sys, &yes);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("✓ drop-last-applied"), "{err}");
    let migrated = read_again(&client, &written).await;
    for (before, now) in &migrated {
        let what = format!("{} {}", before["kind"], before["metadata"]["name"]);
        let now = now.as_ref().unwrap_or_else(|| panic!("{what} is gone"));
        assert_eq!(
            now["metadata"]["uid"], before["metadata"]["uid"],
            "{what} recreated"
        );
        assert_handed_over(now);
    }

    let log = home.join("manager.log");
    let manager = manager(kubeconfig, home, &ns, Some(&log));
    let inst = deploy_completes(&client, &ns, "db").await;
    drop(manager);
    assert_eq!(
        inst["status"]["planStatus"]["deploy"]["uid"], run_uid,
        "KUDO's run continued, not a new one"
    );
    let ran = steps_run(&log);
    let expected: BTreeSet<String> = ["statefulset", "cleanup"].map(String::from).into();
    assert_eq!(
        ran,
        expected,
        "resumed at KUDO's IN_PROGRESS step, not from the top: {}",
        std::fs::read_to_string(&log).unwrap()
    );

    assert_after_the_plan(read_again(&client, &written).await);
    if pods {
        assert_eq!(
            galera_pods(&client, &ns, "db").await,
            pods_before,
            "no pod restarted"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_takes_over_galera_mid_plan() {
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &["--ignore-namespace", "kudo-migrate-*"]);
    migrate_galera(&dev.kubeconfig, home.path(), "galera-dev", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real control plane; run by scripts/real-cluster-stage.sh"]
async fn real_cluster_migrate_takes_over_galera_mid_plan() {
    let _turn = REAL_CLUSTER_MIGRATION.lock().await;
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
    let tag = kudo_testkit::real_cluster::unique_namespace("rg");
    migrate_galera(&kubeconfig, home.path(), &tag, true).await;
}
