//! OperatorSources (`kudo-rs.dev/v1alpha1`) end to end under `--require-verified-sources`: the
//! packages are pushed and signed with the real binary into the real registry of
//! `kudo_testkit::registry` (htpasswd, TLS from a test CA); the source, its Secrets and the
//! Instances are applied with the real kubectl, as Git would hold them; the manager pulls, verifies
//! and stores. The same scenario runs on the embedded cluster (`kubectl kudo dev
//! --require-verified-sources`) and on the real control plane, where the test runs its own manager
//! with the policy for the namespace the stage's manager leaves alone (`--ignore-namespace`).
//!
//! Without the registry the tests print why and pass; under `CI=true` they fail instead.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common;
use super::oci_cli::{Env, examples, first_operator_at, ok, with_stdin};

const OV_020: &str = "first-operator-1.7.9-0.2.0";
const OV_021: &str = "first-operator-1.7.9-0.2.1";
const TIMEOUT: Duration = Duration::from_secs(120);

/// The cluster side: a kubeconfig and the namespace the scenario works in.
struct Cluster<'a> {
    kc: &'a Path,
    ns: &'a str,
}

impl Cluster<'_> {
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(self.kc)
            .args(["-n", self.ns])
            .args(args);
        with_stdin(&mut cmd, stdin.unwrap_or_default())
    }

    fn apply(&self, yaml: &str) {
        ok(self.kubectl(&["apply", "-f", "-"], Some(yaml)));
    }

    fn get(&self, what: &str, name: &str) -> Option<Value> {
        let o = self.kubectl(&["get", what, name, "-o", "json"], None);
        o.status
            .success()
            .then(|| serde_json::from_slice(&o.stdout).unwrap())
    }

    /// `what/name` once `pred` holds (panics with the last object after [`TIMEOUT`]).
    #[track_caller]
    fn wait(&self, what: &str, name: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let got = self.get(what, name);
            if let Some(v) = got.as_ref().filter(|v| pred(v)) {
                return v.clone();
            }
            assert!(
                start.elapsed() < TIMEOUT,
                "{what}/{name} not as expected: {got:#?}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn wait_source(&self, name: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait("operatorsources.kudo-rs.dev", name, pred)
    }
}

fn condition<'v>(obj: &'v Value, type_: &str) -> Option<&'v Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn is(obj: &Value, type_: &str, status: &str) -> bool {
    condition(obj, type_).is_some_and(|c| c["status"] == status)
}

fn reason<'v>(obj: &'v Value, type_: &str) -> &'v str {
    condition(obj, type_)
        .and_then(|c| c["reason"].as_str())
        .unwrap_or_default()
}

/// An OperatorSource of the test registry's repository `kudo/first-operator`.
fn source_yaml(env: &Env, name: &str, reference: &str, verify: &str) -> String {
    repo_source_yaml(env, name, "kudo/first-operator", reference, verify)
}

/// An OperatorSource of the test registry's repository `repo`.
fn repo_source_yaml(env: &Env, name: &str, repo: &str, reference: &str, verify: &str) -> String {
    format!(
        "apiVersion: kudo-rs.dev/v1alpha1
kind: OperatorSource
metadata: {{name: {name}}}
spec:
  url: {url}
  ref: {reference}
  interval: 2s
  secretRef: {{name: regcred}}
  certSecretRef: {{name: registry-ca}}
  verify: {verify}
",
        url = env.oci(repo)
    )
}

const TRUSTED: &str = "{provider: cosign, secretRef: {name: cosign-keys}}";

/// Keys A (trusted) and B, and the packages: 0.2.0 signed by A, 0.3.0 signed by B, 0.4.0
/// unsigned. The public key of A.
fn publish(env: &Env) -> (PathBuf, PathBuf) {
    env.login();
    let (key_a, pub_a) = keys(env, "keys-a");
    let (key_b, _) = keys(env, "keys-b");
    let repo = "kudo/first-operator";
    let d020 = env.push(&examples().join("first-operator"), repo);
    ok(env.sign(&format!("{}@{d020}", env.oci(repo)), &key_a));
    let d030 = env.push(&first_operator_at(env.tmp.path(), "0.3.0"), repo);
    ok(env.sign(&format!("{}@{d030}", env.oci(repo)), &key_b));
    env.push(&first_operator_at(env.tmp.path(), "0.4.0"), repo);
    (key_a, pub_a)
}

/// A key pair made by `package keygen` in `dir` (under the test's directory): private, public.
fn keys(env: &Env, dir: &str) -> (PathBuf, PathBuf) {
    let dir = env.path(dir);
    ok(env.kudo(&["package", "keygen", "-d", dir.to_str().unwrap()]));
    (dir.join("kudo.key"), dir.join("kudo.pub"))
}

/// The Secrets a source names, as `kubectl create secret` makes them.
fn secrets(env: &Env, c: &Cluster<'_>, public: &Path) {
    let (server, user, password) = (
        format!("--docker-server={}", env.reg.addr),
        format!("--docker-username={}", env.reg.user),
        format!("--docker-password={}", env.reg.password),
    );
    let docker = ["create", "secret", "docker-registry", "regcred"];
    ok(c.kubectl(&[&docker[..], &[&server, &user, &password]].concat(), None));
    let ca = format!("ca.crt={}", env.ca());
    ok(c.kubectl(
        &["create", "secret", "generic", "registry-ca", "--from-file", &ca],
        None,
    ));
    let key = format!("cosign.pub={}", public.display());
    ok(c.kubectl(
        &["create", "secret", "generic", "cosign-keys", "--from-file", &key],
        None,
    ));
}

/// The whole scenario on a cluster whose manager runs with `--require-verified-sources`.
fn sources_under_the_policy(env: &Env, c: &Cluster<'_>) {
    let (key_a, public) = publish(env);
    secrets(env, c, &public);

    // A range: the highest signed tag in it is stored, verified, and an Instance of it runs.
    c.apply(&source_yaml(
        env,
        "first-operator",
        "{semver: \">=0.2.0 <0.3.0\"}",
        TRUSTED,
    ));
    let src = c.wait_source("first-operator", |s| is(s, "Ready", "True"));
    assert!(is(&src, "SignatureVerified", "True"), "{src:#}");
    assert!(condition(&src, "Reconciling").is_none() && condition(&src, "Stalled").is_none());
    assert_eq!(src["status"]["observedGeneration"], src["metadata"]["generation"]);
    assert_eq!(src["status"]["artifact"]["operatorVersion"], OV_020, "{src:#}");
    assert_eq!(src["status"]["operatorVersions"][0]["name"], OV_020, "{src:#}");
    let ov = c.get("operatorversions.kudo.dev", OV_020).unwrap();
    assert_eq!(
        ov["metadata"]["labels"]["kudo-rs.dev/operator-source"],
        "first-operator"
    );
    assert_eq!(
        ov["metadata"]["annotations"]["kudo-rs.dev/source"],
        src["status"]["artifact"]["url"]
    );
    c.apply(&format!(
        "apiVersion: kudo.dev/v1beta1
kind: Instance
metadata: {{name: web, labels: {{kudo.dev/operator: first-operator}}}}
spec: {{operatorVersion: {{name: {OV_020}}}}}
"
    ));
    c.wait("instances.kudo.dev", "web", |i| {
        i["status"]["planStatus"]["deploy"]["status"] == "COMPLETE"
    });

    // A newer signed version in the range is found by the next check.
    let d021 = env.push(&first_operator_at(env.tmp.path(), "0.2.1"), "kudo/first-operator");
    ok(env.sign(&format!("{}@{d021}", env.oci("kudo/first-operator")), &key_a));
    let src = c.wait_source("first-operator", |s| {
        s["status"]["artifact"]["operatorVersion"] == OV_021
    });
    let stored: Vec<&str> = src["status"]["operatorVersions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(stored, [OV_020, OV_021]);

    refused_sources(env, c);
    refused_instance(env, c);
}

/// Unsigned, signed by an untrusted key, or checking nothing: refused, reported, nothing stored.
fn refused_sources(env: &Env, c: &Cluster<'_>) {
    let cases = [
        ("unsigned", "{tag: 0.4.0}", TRUSTED, "Unsigned", "is not signed"),
        (
            "other-key",
            "{tag: 0.3.0}",
            TRUSTED,
            "UntrustedSignature",
            "cosign-keys",
        ),
        (
            "unchecked",
            "{tag: 0.4.0}",
            "{provider: none}",
            "VerificationRequired",
            "--require-verified-sources",
        ),
    ];
    for (name, reference, verify, why, needle) in cases {
        c.apply(&source_yaml(env, name, reference, verify));
        let src = c.wait_source(name, |s| is(s, "Stalled", "True"));
        assert!(is(&src, "Ready", "False"), "{src:#}");
        assert_eq!(reason(&src, "Stalled"), why, "{src:#}");
        assert!(is(&src, "SignatureVerified", "False"), "{src:#}");
        let msg = condition(&src, "Ready").unwrap()["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{name}: {msg}");
        assert!(src["status"]["artifact"].is_null(), "{src:#}");
    }
    for v in ["0.3.0", "0.4.0"] {
        let name = format!("first-operator-1.7.9-{v}");
        assert!(
            c.get("operatorversions.kudo.dev", &name).is_none(),
            "{name} was stored"
        );
    }
}

/// An OperatorVersion installed from a directory: its Instance is refused, nothing is applied.
fn refused_instance(env: &Env, c: &Cluster<'_>) {
    let dir = first_operator_at(env.tmp.path(), "0.5.0");
    let mut cmd = env.command("docker");
    cmd.args(["install", dir.to_str().unwrap(), "--instance", "hand", "-n", c.ns])
        .arg("--kubeconfig")
        .arg(c.kc);
    ok(cmd.output().unwrap());
    let inst = c.wait("instances.kudo.dev", "hand", |i| {
        reason(i, "Ready") == "UnverifiedOperatorVersion"
    });
    assert!(is(&inst, "Stalled", "True"), "{inst:#}");
    let msg = condition(&inst, "Ready").unwrap()["message"].as_str().unwrap();
    for needle in [
        "--require-verified-sources",
        "first-operator-1.7.9-0.5.0",
        "was not stored by an OperatorSource",
        "nothing is applied for instance",
    ] {
        assert!(msg.contains(needle), "{needle:?} not in {msg}");
    }
    assert!(inst["status"]["planStatus"]["deploy"]["status"] != "COMPLETE");
    let applied = ok(c.kubectl(
        &["get", "deployments", "-l", "kudo.dev/instance=hand", "-o", "name"],
        None,
    ));
    assert_eq!(applied.trim(), "", "nothing is applied for it");
    let events = ok(c.kubectl(&["get", "events.events.k8s.io", "-o", "json"], None));
    let events: Value = serde_json::from_str(&events).unwrap();
    let warned = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["regarding"]["name"] == "hand" && e["reason"] == "UnverifiedOperatorVersion");
    assert!(warned, "a Warning Event says why: {events:#}");
}

/// The typed operator of the scenario below: its operator name, API group and kind.
const CACHE: (&str, &str, &str) = ("cache", "cache.example.com", "Cache");
/// An operator whose typed API's CRD name something else holds.
const WIDGET: (&str, &str, &str) = ("widget", "widget.example.com", "Widget");

/// A CRD `widgets.widget.example.com` as another tool would install it (no kudo labels).
const FOREIGN_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.widget.example.com}
spec:
  group: widget.example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
";

/// A signed package whose operator declares a typed API, delivered only through a source: the
/// manager stores its Operator, OperatorVersion and the typed API's CRD (as `install` writes it),
/// and an object of the typed kind, applied with kubectl, runs as its Instance to COMPLETE.
fn typed_api_through_a_source(env: &Env, c: &Cluster<'_>) {
    env.login();
    let (key, public) = keys(env, "keys-typed");
    let params = super::typed_api_cli::V1_PARAMS;
    for (name, group, kind) in [CACHE, WIDGET] {
        let dir = super::typed_api_cli::typed_package(env.tmp.path(), (name, group, kind), "0.1.0", params);
        let repo = format!("kudo/{name}");
        let digest = env.push(&dir, &repo);
        ok(env.sign(&format!("{}@{digest}", env.oci(&repo)), &key));
    }
    secrets(env, c, &public);
    c.apply(&repo_source_yaml(
        env,
        "cache",
        "kudo/cache",
        "{tag: 0.1.0}",
        TRUSTED,
    ));
    let src = c.wait_source("cache", |s| is(s, "Ready", "True"));
    assert!(is(&src, "SignatureVerified", "True"), "{src:#}");
    let ov = src["status"]["artifact"]["operatorVersion"].as_str().unwrap();
    assert_eq!(ov, "cache-0.1.0", "{src:#}");
    let stored = c.get("operatorversions.kudo.dev", ov).unwrap();
    assert_eq!(stored["spec"]["api"]["kind"], "Cache", "{stored:#}");
    let crd = c.wait("crd", "caches.cache.example.com", |crd| {
        is(crd, "Established", "True")
    });
    assert_eq!(crd["metadata"]["labels"]["kudo.dev/operator"], "cache", "{crd:#}");
    let managers = ok(c.kubectl(
        &[
            "get",
            "crd",
            "caches.cache.example.com",
            "--show-managed-fields",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}",
        ],
        None,
    ));
    assert!(
        managers.split_whitespace().any(|m| m == "kudo-manager"),
        "written by the manager: {managers}"
    );

    c.apply("apiVersion: cache.example.com/v1\nkind: Cache\nmetadata: {name: mine}\nspec: {REPLICAS: 5}\n");
    let inst = c.wait("instances.kudo.dev", "mine", |i| {
        i["status"]["planStatus"]["deploy"]["status"] == "COMPLETE"
    });
    assert_eq!(inst["spec"]["operatorVersion"]["name"], ov, "{inst:#}");
    assert_eq!(
        inst["metadata"]["ownerReferences"][0]["kind"], "Cache",
        "{inst:#}"
    );
    let cm = c.get("configmap", "mine-cm").unwrap();
    assert_eq!(cm["data"]["replicas"], "5", "{cm:#}");
    c.wait("caches.cache.example.com", "mine", |o| {
        o["status"]["plan"] == "deploy" && o["status"]["status"] == "COMPLETE"
    });
    foreign_crd_refused(env, c);
}

/// A source of a package whose CRD name something else owns: Stalled, nothing of it stored, the
/// CRD untouched.
fn foreign_crd_refused(env: &Env, c: &Cluster<'_>) {
    c.apply(FOREIGN_CRD);
    c.apply(&repo_source_yaml(
        env,
        "widget",
        "kudo/widget",
        "{tag: 0.1.0}",
        TRUSTED,
    ));
    let src = c.wait_source("widget", |s| is(s, "Stalled", "True"));
    assert_eq!(reason(&src, "Stalled"), "OperatorVersionConflict", "{src:#}");
    let msg = condition(&src, "Ready").unwrap()["message"].as_str().unwrap();
    assert!(
        msg.contains("CustomResourceDefinition widgets.widget.example.com exists and belongs to"),
        "{msg}"
    );
    assert!(src["status"]["artifact"].is_null(), "{src:#}");
    for what in [
        "operatorversions.kudo.dev/widget-0.1.0",
        "operators.kudo.dev/widget",
    ] {
        let (kind, name) = what.split_once('/').unwrap();
        assert!(c.get(kind, name).is_none(), "{what} was stored");
    }
    let foreign = c.get("crd", "widgets.widget.example.com").unwrap();
    assert!(
        foreign["metadata"]["labels"].is_null(),
        "the foreign CRD is untouched: {foreign:#}"
    );
}

/// `scenario` on the embedded cluster of `kubectl kudo dev --require-verified-sources`.
fn on_the_embedded_cluster(scenario: impl FnOnce(&Env, &Cluster<'_>)) {
    let Some(env) = Env::start() else { return };
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &["--require-verified-sources"]);
    let c = Cluster {
        kc: &dev.kubeconfig,
        ns: "default",
    };
    scenario(&env, &c);
}

#[test]
fn a_typed_api_arrives_through_an_operator_source_and_its_objects_run() {
    on_the_embedded_cluster(typed_api_through_a_source);
}

#[test]
fn operator_sources_store_verified_packages_and_the_policy_refuses_everything_else() {
    on_the_embedded_cluster(sources_under_the_policy);
}

/// `kubectl-kudo manager` for one namespace with the policy; stopped when dropped.
struct PolicyManager(Child);

impl Drop for PolicyManager {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `scenario` on the real control plane in `ns` (created, then deleted), with a manager of its own
/// for that namespace under `--require-verified-sources` (the stage's manager leaves the namespace
/// alone); its log is printed if the scenario fails.
fn on_the_real_cluster(env: &Env, ns: &str, scenario: impl FnOnce(&Env, &Cluster<'_>)) {
    let kc = kudo_testkit::real_cluster::kubeconfig();
    let c = Cluster { kc: &kc, ns };
    ok(c.kubectl(&["create", "namespace", ns], None));
    let log = std::fs::File::create(env.path("manager.log")).unwrap();
    let child = Command::new(common::BIN)
        .args([
            "manager",
            "--leader-elect=false",
            "--metrics-address",
            "127.0.0.1:0",
        ])
        .args([
            "--watch-namespace",
            ns,
            "--require-verified-sources",
            "--kubeconfig",
        ])
        .arg(&kc)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let manager = PolicyManager(child);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scenario(env, &c)));
    drop(manager);
    let _ = c.kubectl(&["delete", "namespace", ns, "--wait=false"], None);
    if let Err(e) = outcome {
        let log = std::fs::read_to_string(env.path("manager.log")).unwrap_or_default();
        eprintln!("the policy manager's log:\n{log}");
        std::panic::resume_unwind(e);
    }
}

/// The namespace the stage's manager leaves to the tests' policy managers (`suffix` appended:
/// the stage ignores every namespace starting with it).
fn verified_namespace(suffix: &str) -> String {
    let ns = std::env::var("KUDO_REAL_CLUSTER_VERIFIED_NAMESPACE").expect(
        "KUDO_REAL_CLUSTER_VERIFIED_NAMESPACE: the namespace prefix the stage's manager leaves \
         alone (scripts/real-cluster-stage.sh sets it)",
    );
    format!("{ns}{suffix}")
}

#[test]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
fn real_cluster_operator_sources_store_verified_packages_and_the_policy_refuses_everything_else() {
    let Some(env) = Env::start() else { return };
    on_the_real_cluster(&env, &verified_namespace(""), sources_under_the_policy);
}

#[test]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
fn real_cluster_a_typed_api_arrives_through_an_operator_source_and_its_objects_run() {
    let Some(env) = Env::start() else { return };
    on_the_real_cluster(&env, &verified_namespace("-typed"), typed_api_through_a_source);
    let kc = kudo_testkit::real_cluster::kubeconfig();
    for crd in ["caches.cache.example.com", "widgets.widget.example.com"] {
        let c = Cluster {
            kc: &kc,
            ns: "default",
        };
        let _ = c.kubectl(&["delete", "crd", crd, "--wait=false"], None);
    }
}
