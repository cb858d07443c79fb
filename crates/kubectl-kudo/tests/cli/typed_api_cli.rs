//! The typed API of an operator, as far as the CLI writes it: `install` creates
//! the CRD of `api:` in operator.yaml, a CRD of that name owned by something else is never
//! overwritten (and nothing is installed), and `upgrade` refuses a version under which existing
//! typed objects would be invalid unless `--allow-breaking-changes`. On the embedded cluster.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{kudo_in, start_dev};

const PLAN: &str = "plans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: app\n            tasks:\n              - app\n";

/// A one-ConfigMap operator `db` with `api: {group: db.example.com, kind: Db}` at `version`,
/// declaring `params` (params.yaml entries).
fn package(root: &Path, version: &str, params: &str) -> PathBuf {
    typed_package(root, ("db", "db.example.com", "Db"), version, params)
}

/// A one-ConfigMap operator `NAME` with `api: {group: GROUP, kind: KIND, shortNames: [NAMEs1]}`
/// at `version`, declaring `params` (params.yaml entries); its ConfigMap `<instance>-cm` holds
/// `REPLICAS`.
pub(super) fn typed_package(
    root: &Path,
    (name, group, kind): (&str, &str, &str),
    version: &str,
    params: &str,
) -> PathBuf {
    let dir = root.join(format!("{name}-{version}"));
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    let operator = format!(
        "apiVersion: kudo.dev/v1beta1\nname: {name}\noperatorVersion: \"{version}\"\nkubernetesVersion: 1.15.0\napi:\n  group: {group}\n  kind: {kind}\n  shortNames: [{name}s1]\ntasks:\n  - name: app\n    kind: Apply\n    spec:\n      resources:\n        - cm.yaml\n{PLAN}"
    );
    std::fs::write(dir.join("operator.yaml"), operator).unwrap();
    std::fs::write(
        dir.join("params.yaml"),
        format!("apiVersion: kudo.dev/v1beta1\nparameters:\n{params}"),
    )
    .unwrap();
    std::fs::write(
        dir.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-cm\ndata:\n  replicas: {{ .Params.REPLICAS | quote }}\n",
    )
    .unwrap();
    dir
}

pub(super) const V1_PARAMS: &str =
    "  - name: REPLICAS\n    type: integer\n    default: 3\n  - name: MODE\n    default: fast\n";
const V2_PARAMS: &str = "  - name: REPLICAS\n    type: integer\n    default: 3\n";

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    if let Some(text) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn install_creates_the_typed_api_and_upgrade_guards_its_objects() {
    let home = tempfile::tempdir().unwrap();
    let dev = start_dev(home.path(), &[]);
    let kc = dev.kubeconfig.as_path();
    let v1 = package(home.path(), "0.1.0", V1_PARAMS);
    let (code, out, err) = kudo_in(
        home.path(),
        kc,
        "default",
        &["install", v1.to_str().unwrap(), "--instance", "one"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("customresourcedefinition.apiextensions.k8s.io/dbs.db.example.com created"),
        "{out}"
    );
    let (ok, labels) = kubectl(
        kc,
        &[
            "get",
            "crd",
            "dbs.db.example.com",
            "-o",
            "jsonpath={.metadata.labels.kudo\\.dev/operator} {.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.REPLICAS.type}",
        ],
        None,
    );
    assert!(ok, "{labels}");
    assert_eq!(labels, "db integer");
    // A typed object that sets MODE, which version 0.2.0 no longer declares.
    let (ok, text) = kubectl(
        kc,
        &["apply", "-f", "-"],
        Some(
            "apiVersion: db.example.com/v1\nkind: Db\nmetadata:\n  name: mine\n  namespace: default\nspec:\n  REPLICAS: 5\n  MODE: safe\n",
        ),
    );
    assert!(ok, "{text}");
    let v2 = package(home.path(), "0.2.0", V2_PARAMS);
    let (code, out, err) = kudo_in(
        home.path(),
        kc,
        "default",
        &["upgrade", v2.to_str().unwrap(), "--instance", "one"],
    );
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        err.contains("Db default/mine: spec.MODE is set, and the new version has no such parameter"),
        "{err}"
    );
    assert!(err.contains("--allow-breaking-changes"), "{err}");
    let (ok, ovs) = kubectl(kc, &["get", "operatorversions.kudo.dev", "-o", "name"], None);
    assert!(
        ok && !ovs.contains("db-0.2.0"),
        "nothing installed by the refused upgrade: {ovs}"
    );
    let (code, out, err) = kudo_in(
        home.path(),
        kc,
        "default",
        &[
            "upgrade",
            v2.to_str().unwrap(),
            "--instance",
            "one",
            "--allow-breaking-changes",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("customresourcedefinition.apiextensions.k8s.io/dbs.db.example.com configured"),
        "{out}"
    );
    let (_, ann) = kubectl(
        kc,
        &[
            "get",
            "crd",
            "dbs.db.example.com",
            "-o",
            "jsonpath={.metadata.annotations.kudo-rs\\.dev/operator-version}",
        ],
        None,
    );
    assert_eq!(ann, "db-0.2.0");
}

#[test]
fn a_crd_owned_by_something_else_is_never_overwritten() {
    let home = tempfile::tempdir().unwrap();
    let dev = start_dev(home.path(), &[]);
    let kc = dev.kubeconfig.as_path();
    let foreign = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: dbs.db.example.com\nspec:\n  group: db.example.com\n  scope: Namespaced\n  names:\n    kind: Db\n    plural: dbs\n    singular: db\n    listKind: DbList\n  versions:\n    - name: v1\n      served: true\n      storage: true\n      schema:\n        openAPIV3Schema:\n          type: object\n          x-kubernetes-preserve-unknown-fields: true\n";
    let (ok, text) = kubectl(kc, &["apply", "-f", "-"], Some(foreign));
    assert!(ok, "{text}");
    let v1 = package(home.path(), "0.1.0", V1_PARAMS);
    let (code, out, err) = kudo_in(home.path(), kc, "default", &["install", v1.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        err.contains(
            "CustomResourceDefinition dbs.db.example.com exists and belongs to something other than kudo-rs"
        ),
        "{err}"
    );
    let (_, ovs) = kubectl(
        kc,
        &[
            "get",
            "operatorversions.kudo.dev,instances.kudo.dev",
            "-o",
            "name",
        ],
        None,
    );
    assert!(
        !ovs.contains("db-0.1.0") && !ovs.contains("instance"),
        "nothing installed: {ovs}"
    );
    let (_, labels) = kubectl(
        kc,
        &[
            "get",
            "crd",
            "dbs.db.example.com",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
        None,
    );
    assert!(
        !labels.contains("kudo.dev/operator"),
        "the foreign CRD is untouched: {labels}"
    );
}

/// Polls `kubectl get ARGS -o jsonpath=PATH` until it prints `want` (60 s).
fn eventually(kubeconfig: &Path, args: &[&str], path: &str, want: &str) {
    let jsonpath = format!("jsonpath={path}");
    let mut last = String::new();
    for _ in 0..300 {
        let mut full: Vec<&str> = vec!["get"];
        full.extend(args);
        full.extend(["-o", &jsonpath]);
        let (_, text) = kubectl(kubeconfig, &full, None);
        if text == want {
            return;
        }
        last = text;
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    panic!("kubectl get {args:?} {path}: want {want:?}, last {last:?}");
}

/// A typed object, applied with plain kubectl in `ns`, runs as its Instance (the manager's sync),
/// mirrors the run into its status, takes `kubectl kudo update`, and takes its Instance with it.
fn a_typed_object_runs_as_its_instance_in(home: &Path, kc: &Path, ns: &str) {
    let v1 = package(home, "0.1.0", V1_PARAMS);
    let (code, out, err) = kudo_in(
        home,
        kc,
        ns,
        &["install", v1.to_str().unwrap(), "--skip-instance"],
    );
    assert_eq!(code, 0, "{out}{err}");
    let object = format!(
        "apiVersion: db.example.com/v1\nkind: Db\nmetadata:\n  name: mine\n  namespace: {ns}\nspec:\n  REPLICAS: 5\n"
    );
    let (ok, text) = kubectl(kc, &["apply", "-f", "-"], Some(&object));
    assert!(ok, "{text}");
    // A value of the wrong type is refused by the API server at admission, naming the field.
    let bad = format!(
        "apiVersion: db.example.com/v1\nkind: Db\nmetadata:\n  name: bad\n  namespace: {ns}\nspec:\n  REPLICAS: many\n"
    );
    let (ok, text) = kubectl(kc, &["apply", "-f", "-"], Some(&bad));
    assert!(!ok, "{text}");
    assert!(
        text.contains(r#"The Db "bad" is invalid: spec.REPLICAS: Invalid value: "string": spec.REPLICAS in body must be of type integer: "string""#),
        "{text}"
    );
    // The manager made the Instance, owned by the object, with the spec as KUDO strings.
    eventually(
        kc,
        &["-n", ns, "instances.kudo.dev", "mine"],
        "{.metadata.ownerReferences[0].kind} {.spec.parameters.REPLICAS}",
        "Db 5",
    );
    eventually(kc, &["-n", ns, "configmap", "mine-cm"], "{.data.replicas}", "5");
    eventually(
        kc,
        &["-n", ns, "dbs", "mine"],
        "{.status.plan} {.status.status}",
        "deploy COMPLETE",
    );
    let (ok, table) = kubectl(kc, &["-n", ns, "get", "dbs"], None);
    assert!(ok, "{table}");
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "PLAN", "STATUS", "READY", "AGE"], "{table}");
    // `kubectl kudo update` of that Instance changes the typed object, which changes the Instance.
    let (code, out, err) = kudo_in(
        home,
        kc,
        ns,
        &["update", "--instance", "mine", "-p", "REPLICAS=7", "--wait"],
    );
    assert_eq!(code, 0, "{out}{err}");
    eventually(kc, &["-n", ns, "dbs", "mine"], "{.spec.REPLICAS}", "7");
    eventually(kc, &["-n", ns, "configmap", "mine-cm"], "{.data.replicas}", "7");
    // Deleting the object deletes its Instance (garbage collection of the owned Instance).
    let (ok, text) = kubectl(kc, &["-n", ns, "delete", "db", "mine", "--wait=false"], None);
    assert!(ok, "{text}");
    eventually(
        kc,
        &["-n", ns, "instances.kudo.dev", "--ignore-not-found"],
        "{.items[*].metadata.name}",
        "",
    );
    // `kubectl kudo uninstall` of a typed object's Instance deletes the object, or the manager
    // would make the Instance again.
    let other = object.replace("name: mine", "name: other");
    let (ok, text) = kubectl(kc, &["apply", "-f", "-"], Some(&other));
    assert!(ok, "{text}");
    eventually(
        kc,
        &["-n", ns, "instances.kudo.dev", "other"],
        "{.metadata.ownerReferences[0].name}",
        "other",
    );
    let (code, out, err) = kudo_in(home, kc, ns, &["uninstall", "--instance", "other", "--wait"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("other deleted: the typed object that owns instance other"),
        "{out}"
    );
    eventually(
        kc,
        &["-n", ns, "dbs", "--ignore-not-found"],
        "{.items[*].metadata.name}",
        "",
    );
    eventually(
        kc,
        &["-n", ns, "instances.kudo.dev", "--ignore-not-found"],
        "{.items[*].metadata.name}",
        "",
    );
}

#[test]
fn a_typed_object_runs_as_its_instance() {
    let home = tempfile::tempdir().unwrap();
    let dev = start_dev(home.path(), &[]);
    a_typed_object_runs_as_its_instance_in(home.path(), &dev.kubeconfig, "default");
}

#[test]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
fn real_cluster_a_typed_object_runs_as_its_instance() {
    let home = tempfile::tempdir().unwrap();
    let kc = kudo_testkit::real_cluster::kubeconfig();
    let ns = kudo_testkit::real_cluster::unique_namespace("typed");
    let (ok, text) = kubectl(&kc, &["create", "namespace", &ns], None);
    assert!(ok, "{text}");
    a_typed_object_runs_as_its_instance_in(home.path(), &kc, &ns);
    let _ = kubectl(&kc, &["delete", "namespace", &ns, "--wait=false"], None);
}
