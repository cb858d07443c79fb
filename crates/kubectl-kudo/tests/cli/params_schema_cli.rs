//! Parameter schemas and rules through the real binary: `package schema`, `package verify` of schema
//! keywords, and — against `kubectl-kudo dev` — `install`/`update` refusing a value before anything
//! is applied, the manager refusing one set directly on the Instance, and the embedded API server
//! keeping the new OperatorVersion fields (a real one prunes fields its CRD does not declare).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common;

use common::BIN;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture() -> PathBuf {
    repo().join("crates/kudo-package/tests/testdata/schema-params")
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("kubectl-kudo runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const TOO_MANY: &str = "parameter REPLICAS: 12 is greater than the maximum of 9";

/// The fixture with its `params.yaml` edited by `edit`, in a temporary directory.
fn edited_fixture(edit: impl Fn(String) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("templates")).unwrap();
    for f in ["operator.yaml", "params.yaml", "templates/configmap.yaml"] {
        let text = std::fs::read_to_string(fixture().join(f)).unwrap();
        let text = if f == "params.yaml" { edit(text) } else { text };
        std::fs::write(dir.path().join(f), text).unwrap();
    }
    dir
}

#[test]
fn package_schema_prints_a_draft_2020_12_document_in_json_or_yaml() {
    let fx = fixture();
    let o = run(&["package", "schema", fx.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON by default");
    assert_eq!(doc["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(doc["title"], "typed-0.1.0");
    assert_eq!(doc["properties"]["REPLICAS"]["maximum"], 9);
    assert_eq!(doc["properties"]["REPLICAS"]["default"], 3);
    assert_eq!(doc["properties"]["PORTS"]["items"]["type"], "integer");
    let o = run(&["package", "schema", fx.to_str().unwrap(), "-o", "yaml"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("$schema: https://json-schema.org/draft/2020-12/schema"));
}

/// Every package we know of, unchanged: a schema whose properties are exactly its parameters, each
/// typed default of its declared type and within its enum.
#[test]
fn package_schema_describes_galera_and_the_community_packages() {
    let community = Path::new("/work/shared/community-operators");
    let mut dirs = vec![repo().join("examples/galera")];
    for name in ["cassandra", "elastic", "kafka", "redis", "zookeeper"] {
        let d = community.join(name).join("operator");
        if d.exists() {
            dirs.push(d);
        }
    }
    for dir in dirs {
        let o = run(&["package", "schema", dir.to_str().unwrap()]);
        assert!(o.status.success(), "{}: {}", dir.display(), text(&o.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let pkg = kudo_package::read_path(&dir).unwrap();
        let props = doc["properties"].as_object().unwrap();
        assert_eq!(props.len(), pkg.params.parameters.len(), "{}", dir.display());
        for p in &pkg.params.parameters {
            let s = &props[&p.name];
            if let (Some(d), Some(t)) = (s.get("default"), s["type"].as_str()) {
                let ok = match t {
                    "string" => d.is_string(),
                    "integer" => d.is_i64() || d.is_u64(),
                    "number" => d.is_number(),
                    "boolean" => d.is_boolean(),
                    "array" => d.is_array(),
                    "object" => d.is_object(),
                    _ => false,
                };
                assert!(ok, "{}: {} default {d} is not a {t}", dir.display(), p.name);
                if let Some(e) = s["enum"].as_array() {
                    assert!(e.contains(d), "{}: {} default not in enum", dir.display(), p.name);
                }
            }
        }
    }
}

#[test]
fn package_schema_of_a_missing_package_fails_naming_it() {
    let o = run(&["package", "schema", "/nonexistent/pkg"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("/nonexistent/pkg"),
        "{}",
        text(&o.stderr)
    );
}

/// Needs the validator of `kudo-schema` (core commit).
#[test]
fn package_verify_reports_a_bad_schema_and_a_bad_default_by_parameter_and_keyword() {
    let bad_schema = edited_fixture(|t| t.replace("pattern: \"^[a-z]\"", "pattern: \"([a-z\""));
    let o = run(&["package", "verify", bad_schema.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let out = text(&o.stdout);
    assert!(
        out.contains("parameter \"CLUSTER_NAME\" has an invalid schema: ") && out.contains("pattern"),
        "{out}"
    );
    let bad_default = edited_fixture(|t| t.replace("maximum: 9", "maximum: 2"));
    let o = run(&["package", "verify", bad_default.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stdout).contains(
            "parameter \"REPLICAS\" has an invalid default value: 3 is greater than the maximum of 2"
        ),
        "{}",
        text(&o.stdout)
    );
    assert!(text(&o.stderr).contains("package verification found"));
    let o = run(&["package", "verify", fixture().to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stdout));
}

/// Needs the validator of `kudo-schema` (core commit; the rule part needs its CEL commit).
#[test]
fn package_render_refuses_a_value_out_of_bounds() {
    let o = run(&[
        "package",
        "render",
        fixture().to_str().unwrap(),
        "-p",
        "REPLICAS=12",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains(TOO_MANY), "{}", text(&o.stderr));
}

struct Cluster {
    dev: common::Dev,
    home: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let home = tempfile::tempdir().expect("temp HOME");
        let dev = common::start_dev(home.path(), &[]);
        Cluster { dev, home }
    }

    fn kudo(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--kubeconfig")
            .arg(&self.dev.kubeconfig)
            .args(args)
            .env("HOME", self.home.path())
            .output()
            .expect("kubectl-kudo runs")
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .env("KUBECONFIG", &self.dev.kubeconfig)
            .env("HOME", self.home.path())
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    fn get_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        let out = self.kubectl(&all);
        assert!(
            out.status.success(),
            "kubectl get {args:?}: {}",
            text(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// The new OperatorVersion fields survive the embedded API server (installed CRD schema).
fn assert_operator_version_keeps_the_schema(c: &Cluster) {
    let ov = c.get_json(&["operatorversion", "typed-0.1.0", "-n", "default"]);
    let params = &ov["spec"]["parameters"];
    assert_eq!(params[0]["maximum"], 9, "{ov}");
    assert_eq!(params[3]["exclusiveMaximum"], 1);
    assert_eq!(params[4]["items"]["maximum"], 65535);
    assert_eq!(params[5]["properties"]["cpu"]["type"], "string");
    assert_eq!(params[5]["additionalProperties"], false);
    assert_eq!(
        ov["spec"]["parameterValidations"][0]["rule"],
        "self.REPLICAS % 2 == 1"
    );
}

/// Needs the validator of `kudo-schema` (core and CEL commits) for the refusals; the round trip
/// of the OperatorVersion does not.
#[test]
fn install_update_and_the_manager_refuse_values_the_schema_forbids() {
    let c = Cluster::start();
    let pkg = fixture();
    let pkg = pkg.to_str().unwrap();
    let out = c.kudo(&["install", pkg, "--instance", "t", "-p", "REPLICAS=12"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "install must fail: {}",
        text(&out.stdout)
    );
    assert!(text(&out.stderr).contains(TOO_MANY), "{}", text(&out.stderr));
    let none = c.kubectl(&["get", "instances", "-n", "default", "-o", "name"]);
    assert_eq!(text(&none.stdout).trim(), "", "nothing applied");

    let out = c.kudo(&["install", pkg, "--instance", "t", "--wait"]);
    assert!(out.status.success(), "install: {}", text(&out.stderr));
    assert_operator_version_keeps_the_schema(&c);

    let before = c.get_json(&["instance", "t", "-n", "default"])["spec"].clone();
    let out = c.kudo(&["update", "--instance", "t", "-p", "REPLICAS=12"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains(TOO_MANY), "{}", text(&out.stderr));
    let out = c.kudo(&["update", "--instance", "t", "-p", "REPLICAS=4"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("REPLICAS must be odd"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(c.get_json(&["instance", "t", "-n", "default"])["spec"], before);

    // Set directly on the Instance: the manager refuses it (ChangeAccepted=False).
    let patch = r#"{"spec":{"parameters":{"REPLICAS":"12"}}}"#;
    let out = c.kubectl(&[
        "patch", "instance", "t", "-n", "default", "--type", "merge", "-p", patch,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let inst = c.get_json(&["instance", "t", "-n", "default"]);
        let denied = inst["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "ChangeAccepted" && c["status"] == "False");
        if let Some(d) = denied {
            assert!(d["message"].as_str().unwrap_or("").contains(TOO_MANY), "{d}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no ChangeAccepted=False: {}",
            inst["status"]
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
