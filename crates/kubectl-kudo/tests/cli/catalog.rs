//! The KUDO community catalog (`../shared/community-operators`, unmodified packages written for
//! Kubernetes 1.15–1.19) on current Kubernetes: cassandra, elastic, redis and zookeeper are
//! installed with only their required parameters (none) and must reach `deploy` COMPLETE — on the
//! embedded cluster of `kubectl kudo dev` (but cassandra, whose node pods' init container runs
//! programs the simulated shell does not simulate: it stops there, saying so), and (ignored tests
//! run by scripts/real-cluster-stage.sh) on the real control plane of `../shared/real-cluster`
//! with the manager running out of cluster. Their `policy/v1beta1` PodDisruptionBudgets are not
//! served there: the manager translates them to `policy/v1` and says so with an
//! `APIVersionTranslated` Event. The catalog's own suite (`zookeeper-upgrade-test` and `kafka-upgrade-test`) runs through
//! `kubectl kudo test` with its published configuration, unchanged. kafka (a Pipe task) is
//! installed on its own in `exec_cli.rs`.
//!
//! Cluster tests run one at a time (a global lock): the machine is small.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use crate::common;

use common::BIN;

static CLUSTER_LOCK: Mutex<()> = Mutex::new(());

/// The catalog packages of these tests, with the only parameters they require (none: cassandra's
/// three array parameters have an empty `default:`, which KUDO stores as the default `null`, so
/// they are not required and its templates see nil).
/// kafka needs Pipe tasks and is tested with them.
const PACKAGES: &[(&str, &[(&str, &str)])] = &[
    ("cassandra", &[]),
    ("elastic", &[]),
    ("redis", &[]),
    ("zookeeper", &[]),
];

/// Packages that stop on the embedded cluster, and why: their pods' init containers run what the
/// simulated shell does not (a ConfigMap script with a here-document, the image's own bootstrap
/// program), which exits 127 — the pods stay initializing, as they would on a cluster where those
/// programs fail.
const NOT_ON_DEV: &[&str] = &["cassandra"];

/// Packages shipping a `policy/v1beta1` PodDisruptionBudget (removed in Kubernetes 1.25).
const WITH_PDB: &[&str] = &["cassandra", "redis", "zookeeper"];

/// Seconds `install --wait` may take (a liveness bound, not a performance check).
const WAIT_SECS: &str = "300";

fn catalog() -> PathBuf {
    common::shared_dir()
        .join("community-operators")
        .canonicalize()
        .expect("../shared/community-operators beside the checkout")
}

fn package_dir(name: &str) -> PathBuf {
    catalog().join(name).join("operator")
}

fn run(args: &[&str], kubeconfig: &Path, home: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl-kudo runs")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_table_names_exactly_the_required_parameters() {
    let home = tempfile::tempdir().unwrap();
    for (name, params) in PACKAGES {
        let out = Command::new(BIN)
            .args(["package", "list", "parameters", "--required"])
            .arg(package_dir(name))
            .env("HOME", home.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let table = if stdout.to_lowercase().starts_with("no required parameters") {
            ""
        } else {
            &stdout
        };
        let mut listed: Vec<String> = table
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|l| l != "Name")
            .collect();
        listed.sort();
        let mut ours: Vec<String> = params.iter().map(|(k, _)| k.to_string()).collect();
        ours.sort();
        assert_eq!(listed, ours, "{name}: required parameters");
    }
}

#[test]
fn verify_lists_every_translation_the_packages_need() {
    let home = tempfile::tempdir().unwrap();
    for (name, _) in PACKAGES {
        let out = Command::new(BIN)
            .args(["package", "verify", "-o", "json"])
            .arg(package_dir(name))
            .env("HOME", home.path())
            .output()
            .unwrap();
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
        let warnings: Vec<&str> = v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w.as_str())
            .filter(|w| w.contains("is not served since Kubernetes"))
            .collect();
        if WITH_PDB.contains(name) {
            assert!(
                warnings
                    .iter()
                    .any(|w| w.contains("PodDisruptionBudget policy/v1beta1") && w.contains("policy/v1 ")),
                "{name}: {warnings:?}"
            );
        } else {
            assert!(warnings.is_empty(), "{name}: {warnings:?}");
        }
        // translations are warnings, never errors
        assert!(
            !v["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e.as_str().unwrap_or("").contains("v1beta1")),
            "{name}: {}",
            v["errors"]
        );
    }
}

#[test]
fn render_for_1_28_shows_the_translated_pdb_and_for_1_24_the_original() {
    let home = tempfile::tempdir().unwrap();
    let render = |version: &str| {
        let out = Command::new(BIN)
            .args(["package", "render", "--kubernetes-version", version, "-o", "json"])
            .arg(package_dir("zookeeper"))
            .env("HOME", home.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let list: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        list.into_iter()
            .find(|o| o["object"]["kind"] == "PodDisruptionBudget")
            .expect("zookeeper renders a PodDisruptionBudget")
    };
    let new = render("1.28");
    assert_eq!(new["object"]["apiVersion"], "policy/v1");
    assert_eq!(new["translatedFrom"], "policy/v1beta1");
    assert_eq!(new["object"]["spec"]["maxUnavailable"], 1);
    assert_eq!(
        new["object"]["spec"]["selector"]["matchLabels"]["app"],
        "zookeeper"
    );
    let old = render("1.24");
    assert_eq!(old["object"]["apiVersion"], "policy/v1beta1");
    assert!(old.get("translatedFrom").is_none());
    let bad = Command::new(BIN)
        .args(["package", "render", "--kubernetes-version", "latest"])
        .arg(package_dir("zookeeper"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--kubernetes-version"));
}

/// Installs every package into its own namespace of the cluster behind `kubeconfig` and checks
/// each reaches `deploy` COMPLETE, with the PDB translated and the translation announced.
/// Installs every package of [`PACKAGES`] but those of `skip` into `<ns_prefix>-<name>`; with
/// `account`, as that ServiceAccount of the namespace, bound to the built-in `admin` role there
/// and nothing else (`install --service-account`: the catalog needs no more than a namespace
/// admin).
fn install_catalog(kubeconfig: &Path, ns_prefix: &str, account: Option<&str>, skip: &[&str]) {
    let home = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(client_for(kubeconfig));
    let mut failures = Vec::new();
    for (name, params) in PACKAGES.iter().filter(|(n, _)| !skip.contains(n)) {
        let ns = format!("{ns_prefix}-{name}");
        let dir = package_dir(name);
        let mut args = vec![
            "install".to_string(),
            dir.display().to_string(),
            "--instance".into(),
            name.to_string(),
            "-n".into(),
            ns.clone(),
            "--wait".into(),
            "--wait-time".into(),
            WAIT_SECS.into(),
        ];
        match account {
            Some(account) => {
                rt.block_on(namespace_admin(&client, &ns, account, name));
                args.extend(["--service-account".into(), account.to_string()]);
            }
            None => args.push("--create-namespace".into()),
        }
        for (k, v) in params.iter() {
            args.push("-p".into());
            args.push(format!("{k}={v}"));
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&argv, kubeconfig, home.path());
        if !out.status.success() {
            let status = run(
                &["plan", "status", "--instance", name, "-n", &ns],
                kubeconfig,
                home.path(),
            );
            failures.push(format!(
                "{name}: install --wait failed\n{}\n{}",
                text(&out),
                text(&status)
            ));
            continue;
        }
        let status = rt.block_on(deploy_status(&client, &ns, name));
        if status.as_deref() != Some("COMPLETE") {
            failures.push(format!("{name}: deploy is {status:?}"));
            continue;
        }
        if WITH_PDB.contains(name) {
            let (pdbs, events) = rt.block_on(pdbs_and_translation_events(&client, &ns));
            if pdbs.is_empty() {
                failures.push(format!("{name}: no policy/v1 PodDisruptionBudget in {ns}"));
            }
            for pdb in &pdbs {
                if pdb["spec"]["selector"]["matchLabels"]
                    .as_object()
                    .is_none_or(|m| m.is_empty())
                {
                    failures.push(format!("{name}: PDB lost its selector: {pdb}"));
                }
            }
            let named = |e: &String| e.contains("policy/v1beta1") && e.contains("policy/v1 ");
            if events.len() != pdbs.len() || !events.iter().all(named) {
                failures.push(format!(
                    "{name}: expected one APIVersionTranslated Event per PDB ({}), got {events:?}",
                    pdbs.len()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Catalog packages that touch cluster-scoped objects in every configuration: their Toggle tasks
/// *delete* a ClusterRole and ClusterRoleBinding when the option is off (a GET until NotFound), so
/// their account needs this beyond `admin` on the namespace (docs/security.md).
const CLUSTER_SCOPED: &[&str] = &["cassandra"];

/// The ClusterRole (and binding) of that grant for namespace `ns`.
fn cluster_grant_name(ns: &str) -> String {
    format!("{ns}-cluster-objects")
}

/// Namespace `ns` with a ServiceAccount `account` that is `admin` there, plus the grant of
/// [`CLUSTER_SCOPED`] when `package` is one of those.
async fn namespace_admin(client: &kube::Client, ns: &str, account: &str, package: &str) {
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    use k8s_openapi::api::rbac::v1::RoleBinding;
    use kube::api::{Api, PostParams};
    let pp = PostParams::default();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let obj = serde_json::json!({"metadata": {"name": ns}});
    namespaces
        .create(&pp, &serde_json::from_value(obj).unwrap())
        .await
        .expect("namespace");
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let obj = serde_json::json!({"metadata": {"name": account}});
    sas.create(&pp, &serde_json::from_value(obj).unwrap())
        .await
        .expect("service account");
    let rbs: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
    let obj = serde_json::json!({"metadata": {"name": format!("{account}-admin")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]});
    rbs.create(&pp, &serde_json::from_value(obj).unwrap())
        .await
        .expect("role binding");
    if CLUSTER_SCOPED.contains(&package) {
        use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
        let name = cluster_grant_name(ns);
        let roles: Api<ClusterRole> = Api::all(client.clone());
        let obj = serde_json::json!({"metadata": {"name": name}, "rules": [{
            "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["clusterroles", "clusterrolebindings"], "verbs": ["get", "delete"]}]});
        roles
            .create(&pp, &serde_json::from_value(obj).unwrap())
            .await
            .expect("cluster role");
        let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
        let obj = serde_json::json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]});
        bindings
            .create(&pp, &serde_json::from_value(obj).unwrap())
            .await
            .expect("cluster role binding");
    }
}

async fn client_for(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kubeconfig is usable");
    kube::Client::try_from(config).expect("client")
}

async fn deploy_status(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kudo.dev", "v1beta1", "Instance"),
        "instances",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let inst = api.get(name).await.ok()?;
    inst.data["status"]["planStatus"]["deploy"]["status"]
        .as_str()
        .map(str::to_string)
}

/// The namespace's `policy/v1` PDBs and the notes of its APIVersionTranslated Events.
async fn pdbs_and_translation_events(
    client: &kube::Client,
    ns: &str,
) -> (Vec<serde_json::Value>, Vec<String>) {
    use k8s_openapi::api::events::v1::Event;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use kube::api::{Api, ListParams};
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let pdbs = pdbs
        .list(&ListParams::default())
        .await
        .expect("list PDBs")
        .items
        .into_iter()
        .map(|p| serde_json::to_value(p).unwrap())
        .collect();
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let events = events
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("APIVersionTranslated"))
        .filter_map(|e| e.note)
        .collect();
    (pdbs, events)
}

#[test]
fn catalog_deploys_on_the_embedded_cluster() {
    let _guard = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &[]);
    install_catalog(&dev.kubeconfig, "catalog", None, NOT_ON_DEV);
    // redis's init Job really made the cluster: `redis-cli --cluster create` over the addresses
    // its script found with nslookup, grep and awk, answered by the simulated Redis servers.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(client_for(&dev.kubeconfig));
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, "catalog-redis");
    let lp = kube::api::ListParams::default().labels("job-name=deploy-redis-redis-job");
    let job_pods = rt.block_on(pods.list(&lp)).unwrap().items;
    let name = job_pods[0].metadata.name.clone().unwrap();
    let log = rt.block_on(pods.logs(&name, &Default::default())).unwrap();
    assert!(
        log.contains("Adding replica 10.244.") && log.contains("[OK] All 16384 slots covered."),
        "{log}"
    );
}

/// cassandra on the embedded cluster: its node pod's init container `bootstrap` runs two scripts
/// of ConfigMap volumes — the first uses a here-document, which the shell does not interpret —
/// and the image's bootstrap program, which is not simulated: it exits 127 saying so, the pod
/// stays initializing and the deploy plan waits, naming the pod.
#[test]
fn cassandra_stops_on_the_embedded_cluster_at_what_it_cannot_simulate() {
    let _guard = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &[]);
    let kc = dev.kubeconfig.clone();
    let dir = package_dir("cassandra");
    let out = run(
        &["install", dir.to_str().unwrap(), "--instance", "cassandra"],
        &kc,
        home.path(),
    );
    assert!(out.status.success(), "{}", text(&out));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(client_for(&kc));
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, "default");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let init = loop {
        let st = rt
            .block_on(pods.get_opt("cassandra-node-0"))
            .ok()
            .flatten()
            .and_then(|p| p.status?.init_container_statuses?.into_iter().next());
        if let Some(st) = st.filter(|s| {
            s.last_state
                .as_ref()
                .and_then(|l| l.terminated.as_ref())
                .is_some()
        }) {
            break st;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "cassandra-node-0's init container never ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(init.name, "bootstrap");
    assert_eq!(init.last_state.unwrap().terminated.unwrap().exit_code, 127);
    let logs = rt
        .block_on(pods.logs(
            "cassandra-node-0",
            &kube::api::LogParams {
                container: Some("bootstrap".into()),
                ..Default::default()
            },
        ))
        .unwrap();
    // The ConfigMap scripts are there and run as far as the shell goes; the image's program is
    // not simulated.
    for said in [
        "/etc/cassandra/generate-cqlshrc.sh: kudo-sim does not interpret scripts using here-documents",
        "Testing if node cassandra-node-0 is reachable...",
        "kudo-sim: /etc/cassandra-bootstrap/bootstrap: not simulated: the KUDO Cassandra image's program",
    ] {
        assert!(logs.contains(said), "{said}:\n{logs}");
    }
    let status = run(&["plan", "status", "--instance", "cassandra"], &kc, home.path());
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(
        shown.contains("Plan deploy (serial strategy) [IN_PROGRESS]"),
        "{shown}"
    );
}

/// The same on the real control plane (kube-apiserver 1.28, which no longer serves
/// policy/v1beta1), with the cluster-wide manager the stage script runs against it, each package
/// applied as a ServiceAccount that is only `admin` of its namespace (the real RBAC authorizer
/// decides every request).
#[test]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
fn real_cluster_catalog_deploys() {
    let _guard = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let kubeconfig = kudo_testkit::real_cluster::kubeconfig();
    let prefix = format!("catalog-{}", std::process::id());
    let result =
        std::panic::catch_unwind(|| install_catalog(&kubeconfig, &prefix, Some("catalog-admin"), &[]));
    // namespaces of this run go, whatever happened
    let home = tempfile::tempdir().unwrap();
    for (name, _) in PACKAGES {
        let ns = format!("{prefix}-{name}");
        let _ = run(
            &["uninstall", "--instance", name, "-n", &ns, "--wait"],
            &kubeconfig,
            home.path(),
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            use k8s_openapi::api::core::v1::Namespace;
            use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
            let client = client_for(&kubeconfig).await;
            let api: kube::Api<Namespace> = kube::Api::all(client.clone());
            let _ = api.delete(&ns, &Default::default()).await;
            let grant = cluster_grant_name(&ns);
            let bindings: kube::Api<ClusterRoleBinding> = kube::Api::all(client.clone());
            let _ = bindings.delete(&grant, &Default::default()).await;
            let roles: kube::Api<ClusterRole> = kube::Api::all(client);
            let _ = roles.delete(&grant, &Default::default()).await;
        });
    }
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

/// Lays out a folder like the catalog repository's CI: `repository/<name>` (symlinks to the
/// packages and their tests), the binary as `./bin/kubectl-kudo`, and the catalog's published
/// suite configuration, unchanged (community-operators/README.md).
fn catalog_checkout() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("kudo-catalog-")
        .tempdir()
        .unwrap();
    std::fs::create_dir_all(dir.path().join("repository")).unwrap();
    std::fs::create_dir_all(dir.path().join("bin")).unwrap();
    for name in ["zookeeper", "kafka"] {
        std::os::unix::fs::symlink(catalog().join(name), dir.path().join("repository").join(name)).unwrap();
    }
    std::os::unix::fs::symlink(BIN, dir.path().join("bin/kubectl-kudo")).unwrap();
    std::fs::write(
        dir.path().join("kuttl-test.yaml"),
        "apiVersion: kudo.dev/v1alpha1
kind: TestSuite
commands:
  - command: ./bin/kubectl-kudo init --unsafe-self-signed-webhook-ca --wait
  - command: ./bin/kubectl-kudo install --skip-instance ./repository/zookeeper/operator/
  - command: ./bin/kubectl-kudo install --skip-instance ./repository/kafka/operator/
testDirs:
- ./repository/zookeeper/tests
- ./repository/kafka/tests
startKIND: true
timeout: 300
",
    )
    .unwrap();
    dir
}

/// `kubectl-kudo test` in `dir` with `args`; (exit code, stdout+stderr).
fn kudo_test(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .arg("test")
        .args(args)
        .current_dir(dir)
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl-kudo test runs");
    (out.status.code(), text(&out))
}

#[test]
fn the_published_suite_runs_the_zookeeper_upgrade_test() {
    let _guard = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let checkout = catalog_checkout();
    let (code, all) = kudo_test(checkout.path(), &["--test", "zookeeper-upgrade-test"]);
    assert_eq!(code, Some(0), "{all}");
    assert!(all.contains("--- PASS: zookeeper-upgrade-test"), "{all}");
    // the webhook flag is accepted and explained, not an error
    assert!(
        all.contains("--unsafe-self-signed-webhook-ca: nothing to do"),
        "{all}"
    );
}

/// The catalog's `kafka-upgrade-test` installs its ZooKeeper from OperatorVersion
/// `zookeeper-3.4.14-0.3.1`, which the catalog (and its published suite) does not contain — it
/// ships zookeeper 3.6.2-0.3.3. KUDO's webhook refused such an Instance, so the test could not
/// pass there either; kudo-rs says exactly why (the Instance's `Ready=False` condition, reason
/// `OperatorVersionNotFound`, is checked in the controller's e2e tests; here the manager's warning).
#[test]
fn the_published_kafka_upgrade_test_names_the_missing_zookeeper_version() {
    let _guard = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let checkout = catalog_checkout();
    // -v 1: the embedded manager's warnings are printed too.
    let (code, all) = kudo_test(
        checkout.path(),
        &["--test", "kafka-upgrade-test", "--timeout", "10", "-v", "1"],
    );
    assert_eq!(code, Some(1), "{all}");
    assert!(all.contains("failed in step 00-install"), "{all}");
    assert!(
        all.contains("OperatorVersion default/zookeeper-3.4.14-0.3.1 of instance kuttl-test-"),
        "the manager names the missing OperatorVersion: {all}"
    );
}

/// kafka's upgrade scenario itself — install a broker with its Pipe-generated TLS material, then
/// resize it — with the catalog's own steps 01 and 02 (and 00's assertions), unchanged, after a
/// ZooKeeper installed from the OperatorVersion the catalog does ship.
#[test]
fn the_kafka_upgrade_steps_pass_with_the_catalogs_zookeeper() {
    let _guard = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let checkout = catalog_checkout();
    let tests = checkout.path().join("kafka-steps/kafka-upgrade-test");
    std::fs::create_dir_all(&tests).unwrap();
    let src = catalog().join("kafka/tests/kafka-upgrade-test");
    for f in [
        "00-assert.yaml",
        "01-install.yaml",
        "01-assert.yaml",
        "02-resize.yaml",
        "02-assert.yaml",
    ] {
        std::fs::copy(src.join(f), tests.join(f)).unwrap();
    }
    let install = std::fs::read_to_string(src.join("00-install.yaml"))
        .unwrap()
        .replace("zookeeper-3.4.14-0.3.1", "zookeeper-3.6.2-0.3.3");
    std::fs::write(tests.join("00-install.yaml"), install).unwrap();
    let (code, all) = kudo_test(checkout.path(), &["kafka-steps"]);
    assert_eq!(code, Some(0), "{all}");
    assert!(all.contains("--- PASS: kafka-upgrade-test"), "{all}");
}
