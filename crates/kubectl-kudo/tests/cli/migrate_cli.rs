//! `kubectl kudo migrate` on a cluster as KUDO v0.19 leaves it (`common::kudo019`): the embedded
//! cluster (its manager told to leave `kudo-migrate-*` alone until the migration) and the real
//! control plane (the stage's manager ignores `kudo-migrate-*` too). After the migration a
//! manager watching the Instance's namespace finishes the plan KUDO was running.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
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

/// Runs `migrate --yes` again and again, each life killed by the fail point
/// `migrate-step-done` right after a step's effects and before the record says it is done:
/// the first life after its first step, every later one after its second (its first is the
/// step the previous life died in, run again). Returns, per killed life, the steps it recorded;
/// the life that finishes by itself ends the loop.
fn kill_after_each_step(home: &Path, kubeconfig: &Path, ns: &str, args: &[&str]) -> Vec<Vec<String>> {
    let mut killed = Vec::new();
    for life in 0..10 {
        let nth = if life == 0 { 1 } else { 2 };
        let out = Command::new(BIN)
            .args(args)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["-n", ns])
            .env("HOME", home)
            .env("KUDO_FAILPOINT", format!("migrate-step-done:{nth}"))
            .env_remove("KUBECONFIG")
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
    let (sys, ns) = (format!("kudo-migrate-{tag}-sys"), format!("kudo-migrate-{tag}"));
    let nss: Api<Namespace> = Api::all(client.clone());
    for n in [&sys, &ns] {
        let o = serde_json::from_value(json!({"metadata": {"name": n}})).unwrap();
        nss.create(&PostParams::default(), &o).await.expect("namespace");
    }
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
        // The API server picks a new webhook configuration up within a few seconds.
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let touch = json!({"metadata": {"labels": {"touched": "yes"}}});
            let write = instances(&client, &ns)
                .patch("web", &Default::default(), &kube::api::Patch::Merge(&touch))
                .await;
            if write.is_err() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "KUDO's broken webhook refuses Instance writes"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
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
    let managers: Vec<&Value> = after["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["manager"])
        .collect();
    assert!(
        managers.contains(&&json!("kudo")) && !managers.contains(&&json!("manager")),
        "{managers:?}"
    );
    assert!(
        after["metadata"]["annotations"]
            .get("kudo.dev/last-applied-configuration")
            .is_none()
    );

    // Run again: every step recorded, nothing to do.
    let (code, out, err) = common::kudo_in(home, kubeconfig, &sys, &[&args[..], &["--yes"]].concat());
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains('✓'), "no step ran twice: {err}");

    let _manager = Manager(
        Command::new(BIN)
            .args([
                "manager",
                "--leader-elect=false",
                "--metrics-address",
                "127.0.0.1:0",
                "--watch-namespace",
                &ns,
                "--kubeconfig",
            ])
            .arg(kubeconfig)
            .env("HOME", home)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("manager"),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let inst = loop {
        let i = serde_json::to_value(instances(&client, &ns).get("web").await.unwrap()).unwrap();
        if i["status"]["planStatus"]["deploy"]["status"] == "COMPLETE" {
            break i;
        }
        assert!(
            Instant::now() < deadline,
            "deploy did not complete under kudo-rs: {}",
            i["status"]
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real control plane; run by scripts/real-cluster-stage.sh"]
async fn real_cluster_migrate_takes_over_a_kudo_installation_mid_plan() {
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
    let tag = kudo_testkit::real_cluster::unique_namespace("r");
    migrate_first_operator(&kubeconfig, home.path(), &tag, false).await;
}
