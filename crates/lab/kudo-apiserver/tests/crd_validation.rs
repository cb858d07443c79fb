//! Differential test of custom-object validation: the cases of
//! `tests/crd_validation/cases.json` — a schema fragment, an optional old object, a new object or a
//! merge patch — are sent to an API server and its answers (accepted and what it stored, or the
//! 422's message and `details.causes`) compared with `tests/golden/crd-validation.json`.
//!
//! The golden is kube-apiserver v1.28.7's answers, recorded by
//! `real_cluster_crd_validation_matches_golden` (`scripts/regen-crd-validation-golden.sh`); never
//! written by hand or by our code. `crd_validation_embedded_matches_golden` holds the embedded
//! server to it in every `cargo test`.
//!
//! Every object case is one property of one CRD (`spec.<case name>`), so the real control plane
//! establishes a single CRD; CRD cases (schemas kube refuses) are dry-run creations of their own.
//! kube-apiserver orders the causes of one object at random (Go map order), so causes are compared
//! as sets, and each answer's message is checked to list its own causes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const REGEN_ENV: &str = "KUDO_REGEN_CRD_VALIDATION_GOLDEN";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn cases() -> Value {
    let path = dir().join("crd_validation/cases.json");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("cases.json")).expect("cases json")
}

fn golden_path() -> PathBuf {
    dir().join("golden/crd-validation.json")
}

/// One API server under test, through kube-rs raw requests.
struct Side {
    client: kube::Client,
    ns: String,
    group: String,
}

impl Side {
    async fn send(&self, method: &str, path: &str, ct: &str, body: &Value) -> (u16, Value) {
        let bytes = if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(body).expect("body")
        };
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("Content-Type", ct)
            .body(bytes)
            .expect("request");
        let resp = self
            .client
            .send(req.map(kube::client::Body::from))
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect_bytes().await.expect("body");
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    fn objects_path(&self) -> String {
        format!("/apis/{}/v1/namespaces/{}/cases", self.group, self.ns)
    }

    fn object(&self, name: &str, spec: Value) -> Value {
        json!({
            "apiVersion": format!("{}/v1", self.group),
            "kind": "Case",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": spec,
        })
    }

    /// The namespace and the CRD holding one property per object case, established.
    async fn prepare(&self, cases: &Value) {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}});
        let (code, body) = self.send("POST", "/api/v1/namespaces", JSON, &ns).await;
        assert_eq!(code, 201, "namespace: {body}");
        let mut props = serde_json::Map::new();
        for c in cases["objects"].as_array().expect("objects") {
            props.insert(key(c), c["schema"].clone());
        }
        let crd = crd(&self.group, "cases", "Case", Value::Object(props));
        let (code, body) = self.send("POST", CRDS, JSON, &crd).await;
        assert_eq!(code, 201, "CRD: {body}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.send("GET", &self.objects_path(), "", &Value::Null).await.0 != 200 {
            assert!(Instant::now() < deadline, "the cases CRD was never served");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn cleanup(&self) {
        let crd = format!("{CRDS}/cases.{}", self.group);
        self.send("DELETE", &crd, "", &Value::Null).await;
        let ns = format!("/api/v1/namespaces/{}", self.ns);
        self.send("DELETE", &ns, "", &Value::Null).await;
    }

    /// One object case: its old object created for real when it has one, the new one (or the patch)
    /// sent as a dry run.
    async fn object_case(&self, c: &Value) -> Value {
        let name = c["name"].as_str().expect("name");
        let k = key(c);
        let op = c["op"].as_str().unwrap_or("create");
        let with = |v: Option<&Value>| match v {
            Some(v) => json!({ k.clone(): v }),
            None => json!({}),
        };
        let dry = "?dryRun=All";
        let (code, body) = if op == "create" {
            let obj = self.object(name, with(c.get("new")));
            let path = format!("{}{dry}", self.objects_path());
            self.send("POST", &path, JSON, &obj).await
        } else {
            let old = self.object(name, with(c.get("old")));
            let (code, created) = self.send("POST", &self.objects_path(), JSON, &old).await;
            assert_eq!(code, 201, "{name}: the old object: {created}");
            let path = format!("{}/{name}{dry}", self.objects_path());
            if op == "update" {
                let mut obj = self.object(name, with(c.get("new")));
                obj["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"].clone();
                self.send("PUT", &path, JSON, &obj).await
            } else {
                let patch = json!({"spec": with(c.get("patch"))});
                self.send("PATCH", &path, MERGE, &patch).await
            }
        };
        self.outcome(code, &body, |b| {
            b["spec"].get(&k).cloned().unwrap_or(json!("<absent>"))
        })
    }

    /// One CRD case: a dry-run creation of a CRD whose `spec.x` has the case's schema.
    async fn crd_case(&self, i: usize, c: &Value) -> Value {
        let plural = format!("crdcase{i}s");
        let crd = crd(
            &self.group,
            &plural,
            &format!("CrdCase{i}"),
            json!({"x": c["schema"]}),
        );
        let (code, body) = self.send("POST", &format!("{CRDS}?dryRun=All"), JSON, &crd).await;
        self.outcome(code, &body, |_| Value::Null)
    }

    /// The answer with this side's names replaced by placeholders.
    fn outcome(&self, code: u16, body: &Value, stored: impl Fn(&Value) -> Value) -> Value {
        let text = if (200..300).contains(&code) {
            json!({"code": code, "stored": stored(body)}).to_string()
        } else {
            json!({
                "code": code,
                "reason": body["reason"],
                "message": body["message"],
                "causes": body.pointer("/details/causes").cloned().unwrap_or(json!([])),
            })
            .to_string()
        };
        serde_json::from_str(&text.replace(&self.group, "<group>")).expect("outcome")
    }
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn key(c: &Value) -> String {
    c["name"].as_str().expect("name").to_string()
}

fn crd(group: &str, plural: &str, kind: &str, props: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": props}},
                }},
            }],
        },
    })
}

/// Runs every case on one side: `{"objects": {name: outcome}, "crds": {name: outcome}}`.
async fn run(side: &Side) -> Value {
    let cases = cases();
    side.prepare(&cases).await;
    let objects = cases["objects"].as_array().expect("objects");
    let answers = futures::future::join_all(objects.iter().map(|c| side.object_case(c))).await;
    let mut out_objects = serde_json::Map::new();
    for (c, a) in objects.iter().zip(answers) {
        out_objects.insert(key(c), a);
    }
    let crds = cases["crds"].as_array().expect("crds");
    let mut out_crds = serde_json::Map::new();
    for (i, c) in crds.iter().enumerate() {
        out_crds.insert(key(c), side.crd_case(i, c).await);
    }
    side.cleanup().await;
    json!({"objects": out_objects, "crds": out_crds})
}

/// What is compared of an answer: code, reason, the message's head (before the causes) and the
/// set of causes. A CRD refusal is compared by the fields and reasons of its causes only (its
/// messages quote CEL's and the regexp library's own error texts).
fn comparable(answer: &Value, crd: bool) -> Value {
    let Some(causes) = answer["causes"].as_array() else {
        return answer.clone();
    };
    let mut texts: Vec<String> = causes.iter().map(cause_text).collect();
    let message = answer["message"].as_str().unwrap_or_default();
    let own = if texts.len() == 1 {
        texts[0].clone()
    } else {
        format!("[{}]", texts.join(", "))
    };
    let head = message
        .strip_suffix(&own)
        .unwrap_or("<message does not list its causes>");
    texts.sort();
    if crd {
        let mut shapes: Vec<String> = causes
            .iter()
            .map(|c| format!("{} {}", c["field"].as_str().unwrap_or("<nil>"), c["reason"]))
            .collect();
        shapes.sort();
        shapes.dedup();
        return json!({"code": answer["code"], "causes": shapes});
    }
    json!({"code": answer["code"], "reason": answer["reason"], "head": head, "causes": texts})
}

fn cause_text(c: &Value) -> String {
    let field = c["field"].as_str().filter(|f| !f.is_empty()).unwrap_or("<nil>");
    format!("{field}: {}", c["message"].as_str().unwrap_or_default())
}

/// Every case whose answer differs from the golden's, described.
fn differences(got: &Value, golden: &Value) -> (usize, Vec<String>) {
    let mut diffs = Vec::new();
    let mut n = 0;
    for (section, crd) in [("objects", false), ("crds", true)] {
        let want: BTreeMap<String, Value> = golden[section]
            .as_object()
            .map(|m| m.clone().into_iter().collect())
            .unwrap_or_default();
        let have = got[section].as_object().cloned().unwrap_or_default();
        for (name, answer) in &have {
            n += 1;
            let Some(expected) = want.get(name) else {
                diffs.push(format!("{section}/{name}: not in the golden"));
                continue;
            };
            let (a, e) = (comparable(answer, crd), comparable(expected, crd));
            if a != e {
                diffs.push(format!("{section}/{name}:\n  got:    {a}\n  golden: {e}"));
            }
        }
        for name in want.keys().filter(|k| !have.contains_key(*k)) {
            diffs.push(format!("{section}/{name}: in the golden, not among the cases"));
        }
    }
    (n, diffs)
}

fn golden() -> Value {
    let text = std::fs::read_to_string(golden_path())
        .expect("tests/golden/crd-validation.json (record it with scripts/regen-crd-validation-golden.sh)");
    serde_json::from_str(&text).expect("golden json")
}

fn assert_matches(got: &Value, what: &str) {
    let (n, diffs) = differences(got, &golden());
    assert!(n >= 40, "only {n} cases");
    assert!(
        diffs.is_empty(),
        "{} of {n} cases answered differently by {what} than kube-apiserver v1.28.7 (the golden):\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    eprintln!("{n} cases answered by {what} as in the golden");
}

fn group() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("v{}.crdvalidation.kudo.dev", &id[..8])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_validation_embedded_matches_golden() {
    let server = kudo_apiserver::ApiServer::start(kudo_apiserver::Config::default())
        .await
        .expect("server starts");
    let config = kube::Config::new(server.url().parse().expect("url"));
    let side = Side {
        client: kube::Client::try_from(config).expect("client"),
        ns: "crd-validation".into(),
        group: group(),
    };
    let got = run(&side).await;
    server.shutdown().await;
    assert_matches(&got, "the embedded API server");
}

/// Runs the cases on the real control plane; with `KUDO_REGEN_CRD_VALIDATION_GOLDEN=1` records
/// its answers as the golden, else fails when the golden is stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_crd_validation_matches_golden() {
    let side = Side {
        client: kudo_testkit::real_cluster::client().await,
        ns: kudo_testkit::real_cluster::unique_namespace("crd-validation"),
        group: group(),
    };
    let started = Instant::now();
    let mut got = run(&side).await;
    eprintln!("the real control plane answered in {:?}", started.elapsed());
    if std::env::var_os(REGEN_ENV).is_some_and(|v| v == "1") {
        got["kube"] = json!("v1.28.7");
        let text = serde_json::to_string_pretty(&got).expect("golden") + "\n";
        std::fs::create_dir_all(golden_path().parent().expect("dir")).expect("golden dir");
        std::fs::write(golden_path(), text).expect("golden written");
        eprintln!("recorded {}", golden_path().display());
        return;
    }
    assert_matches(
        &got,
        "the real control plane (the golden is stale: regenerate it)",
    );
}
