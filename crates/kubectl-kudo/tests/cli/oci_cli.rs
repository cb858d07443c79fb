//! Packages in OCI registries through the real binary, against a real registry (the CNCF
//! distribution registry of Debian's `docker-registry`, htpasswd auth, TLS from a test CA; see
//! `kudo_testkit::registry`) and independent clients: `skopeo` (Debian) reads what
//! `package push` writes, copies artifacts from an OCI layout and mirrors them; `oci_tools.py`
//! (Python's urllib and `cryptography`, written from the published formats) pushes artifacts and
//! cosign signatures of its own. Installs reach COMPLETE on the embedded cluster
//! (`kubectl kudo dev`).
//!
//! Without the registry, skopeo or Python's `cryptography` the tests print why and pass; under
//! `CI=true` they fail instead (`.ci/run` installs all three).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use kudo_testkit::registry::{Setup, TestRegistry};

use super::common;

pub(super) fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn tools_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/oci_tools.py")
}

pub(super) fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// skopeo and Python's `cryptography`, beside the registry (`TestRegistry::start` checks that).
fn clients_available() -> bool {
    let skopeo = Command::new("skopeo")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let crypto = Command::new("python3")
        .args(["-c", "import cryptography"])
        .output()
        .is_ok_and(|o| o.status.success());
    if skopeo && crypto {
        return true;
    }
    let msg = "skopeo or Python's cryptography is missing (apt-get install skopeo; pip install cryptography; \
               .ci/run does both)";
    assert!(!in_ci(), "{msg}: the OCI tests must run in CI");
    eprintln!("SKIPPED (not in CI): {msg}");
    false
}

/// A registry, a home for the CLI (`--home`, `HOME`, `DOCKER_CONFIG`), and the tools around them.
pub(super) struct Env {
    pub(super) reg: TestRegistry,
    pub(super) tmp: tempfile::TempDir,
}

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[track_caller]
pub(super) fn ok(o: Output) -> String {
    assert!(o.status.success(), "exit {:?}:\n{}", o.status.code(), out(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Exit 1 and `needle` in stderr.
#[track_caller]
pub(super) fn fails(o: Output, needle: &str) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(err.contains(needle), "{needle:?} not in:\n{err}");
    err
}

impl Env {
    pub(super) fn start() -> Option<Env> {
        let reg = TestRegistry::start(Setup::default())?;
        if !clients_available() {
            return None;
        }
        let tmp = tempfile::tempdir().unwrap();
        Some(Env { reg, tmp })
    }

    pub(super) fn path(&self, p: &str) -> PathBuf {
        self.tmp.path().join(p)
    }

    pub(super) fn ca(&self) -> String {
        self.reg.ca_file().display().to_string()
    }

    /// `oci://ADDR/repo`.
    pub(super) fn oci(&self, repo: &str) -> String {
        format!("oci://{}/{repo}", self.reg.addr)
    }

    pub(super) fn command(&self, docker_config: &str) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_kubectl-kudo"));
        c.arg("--home")
            .arg(self.path("kudo"))
            .env("HOME", self.tmp.path())
            .env("DOCKER_CONFIG", self.path(docker_config))
            .env_remove("KUDO_HOME")
            .env_remove("SOURCE_DATE_EPOCH")
            .stdin(Stdio::null());
        c
    }

    /// `kubectl-kudo ARGS` with the test's Docker config.
    pub(super) fn kudo(&self, args: &[&str]) -> Output {
        self.command("docker").args(args).output().unwrap()
    }

    /// `kubectl-kudo ARGS` with `stdin`.
    fn kudo_stdin(&self, args: &[&str], stdin: &str) -> Output {
        with_stdin(self.command("docker").args(args), stdin)
    }

    /// `registry login ADDR -u kudo --password-stdin --ca-file CA`.
    fn login_args(&self) -> Vec<String> {
        let args = [
            "registry",
            "login",
            &self.reg.addr,
            "-u",
            &self.reg.user,
            "--password-stdin",
            "--ca-file",
        ];
        let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        args.push(self.ca());
        args
    }

    pub(super) fn login(&self) {
        let args = self.login_args();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = self.kudo_stdin(&args, &format!("{}\n", self.reg.password));
        assert!(ok(o).starts_with(&format!("Login Succeeded: credentials for {}", self.reg.addr)));
    }

    /// `package push PKG oci://ADDR/REPO` (`-o json`): the printed digest.
    pub(super) fn push(&self, pkg: &Path, repo: &str) -> String {
        let o = self.kudo(&[
            "package",
            "push",
            pkg.to_str().unwrap(),
            &self.oci(repo),
            "--ca-file",
            &self.ca(),
            "-o",
            "json",
        ]);
        let v: serde_json::Value = serde_json::from_str(&ok(o)).unwrap();
        v["digest"].as_str().unwrap().to_string()
    }

    /// `package create examples/first-operator -d DIR`: the directory.
    fn created_first_operator(&self) -> PathBuf {
        let created = self.path("created");
        let pkg = examples().join("first-operator");
        ok(self.kudo(&[
            "package",
            "create",
            pkg.to_str().unwrap(),
            "-d",
            created.to_str().unwrap(),
        ]));
        created
    }

    /// `package sign REF --key KEY --ca-file CA`.
    pub(super) fn sign(&self, pinned: &str, key: &Path) -> Output {
        self.kudo(&[
            "package",
            "sign",
            pinned,
            "--key",
            key.to_str().unwrap(),
            "--ca-file",
            &self.ca(),
        ])
    }

    /// `package pull REF -d DEST --verify --key PUB --ca-file CA EXTRA…`.
    fn pull_verified(&self, reference: &str, dest: &Path, public: &Path, extra: &[&str]) -> Output {
        let ca = self.ca();
        let mut args = vec!["package", "pull", reference, "-d", dest.to_str().unwrap()];
        args.extend(["--verify", "--key", public.to_str().unwrap(), "--ca-file", &ca]);
        args.extend(extra);
        self.kudo(&args)
    }

    /// `python3 oci_tools.py ARGS` against the registry; its stdout.
    fn tools(&self, args: &[&str]) -> String {
        let o = Command::new("python3")
            .arg(tools_script())
            .args(args)
            .env("REG_USER", &self.reg.user)
            .env("REG_PASSWORD", &self.reg.password)
            .env("REG_CA", self.reg.ca_file())
            .output()
            .unwrap();
        ok(o).trim().to_string()
    }

    fn skopeo(&self, args: &[&str]) -> String {
        let o = Command::new("skopeo")
            .args(args)
            .env("REGISTRY_AUTH_FILE", self.path("skopeo-auth.json"))
            .output()
            .unwrap();
        ok(o)
    }

    fn skopeo_flags(&self) -> Vec<String> {
        let cert_dir = self.reg.cert_dir().display().to_string();
        vec!["--cert-dir".into(), cert_dir, "--creds".into(), self.reg.creds()]
    }
}

/// Runs `cmd` with `stdin` written to it.
pub(super) fn with_stdin(cmd: &mut Command, stdin: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// A copy of examples/first-operator with another operatorVersion.
pub(super) fn first_operator_at(dir: &Path, version: &str) -> PathBuf {
    let to = dir.join(format!("first-operator-{version}"));
    super::common::copy_dir(&examples().join("first-operator"), &to);
    let op = to.join("operator.yaml");
    let text = std::fs::read_to_string(&op).unwrap();
    assert!(text.contains("operatorVersion: 0.2.0"));
    std::fs::write(
        &op,
        text.replace("operatorVersion: 0.2.0", &format!("operatorVersion: {version}")),
    )
    .unwrap();
    to
}

pub(super) fn kubectl_json(kubeconfig: &Path, args: &[&str]) -> serde_json::Value {
    let o = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap();
    serde_json::from_str(&ok(o)).unwrap()
}

/// `install|upgrade … --kubeconfig KC` through the binary.
fn kudo_on(env: &Env, kubeconfig: &Path, args: &[&str]) -> Output {
    env.command("docker")
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .unwrap()
}

#[test]
fn oci_push_sign_pull_and_install_verified_to_complete() {
    let Some(env) = Env::start() else { return };
    let login = env.login_args();
    let login: Vec<&str> = login.iter().map(String::as_str).collect();
    let wrong = env.kudo_stdin(&login, "not-the-password\n");
    fails(wrong, "401 Unauthorized (user \"kudo\" from the command line)");
    env.login();
    let config = std::fs::read_to_string(env.path("docker/config.json")).unwrap();
    assert!(
        config.contains(&env.reg.addr) && config.contains("\"auth\""),
        "{config}"
    );

    // Pushed twice, one digest; what skopeo reads is the documented artifact.
    let digest = env.push(&examples().join("first-operator"), "kudo/first-operator");
    assert_eq!(
        env.push(&examples().join("first-operator"), "kudo/first-operator"),
        digest
    );
    let mut args = vec!["inspect".to_string(), "--raw".into()];
    args.extend(env.skopeo_flags());
    args.push(format!("docker://{}/kudo/first-operator:0.2.0", env.reg.addr));
    let raw = env.skopeo(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        kudo_oci::artifact::sha256_digest(raw.as_bytes()),
        digest,
        "the digest of the bytes skopeo read"
    );
    let m: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(m["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    assert_eq!(m["artifactType"], "application/vnd.kudo.package.v1");
    assert_eq!(
        m["config"]["mediaType"],
        "application/vnd.kudo.package.config.v1+json"
    );
    assert_eq!(
        m["layers"][0]["mediaType"],
        "application/vnd.kudo.package.content.v1.tar+gzip"
    );
    assert_eq!(
        m["layers"][0]["annotations"]["org.opencontainers.image.title"],
        "first-operator-1.7.9_0.2.0.tgz"
    );
    assert_eq!(m["annotations"]["org.opencontainers.image.version"], "0.2.0");
    assert_eq!(
        m["annotations"]["org.opencontainers.image.created"],
        "1970-01-01T00:00:00Z"
    );

    // Keys, a signature (twice: the second adds nothing), and a verified pull of the exact tarball.
    let keys = env.path("keys");
    ok(env.kudo(&["package", "keygen", "-d", keys.to_str().unwrap()]));
    let (key, public) = (keys.join("kudo.key"), keys.join("kudo.pub"));
    let pinned = format!("{}@{digest}", env.oci("kudo/first-operator"));
    let signed = ok(env.sign(&pinned, &key));
    assert!(signed.starts_with(&format!("Signed {pinned} with ")), "{signed}");
    let again = ok(env.sign(&pinned, &key));
    assert!(again.contains("already has this signature"), "{again}");
    let dest = env.path("pulled");
    let tag = format!("{}:0.2.0", env.oci("kudo/first-operator"));
    let pulled = ok(env.pull_verified(&tag, &dest, &public, &[]));
    assert!(
        pulled.contains(&format!("{pinned} (signature verified with ")),
        "{pulled}"
    );
    let created = env.created_first_operator();
    let name = "first-operator-1.7.9_0.2.0.tgz";
    assert_eq!(
        std::fs::read(dest.join(name)).unwrap(),
        std::fs::read(created.join(name)).unwrap()
    );

    install_and_upgrade_verified(&env, &public, &key, &pinned);
    mirror_with_skopeo(&env, &public, &digest);

    let gone = ok(env.kudo(&["registry", "logout", &env.reg.addr]));
    assert!(gone.starts_with("Removed the credentials"), "{gone}");
    let o = env.kudo(&[
        "package",
        "pull",
        &pinned,
        "-d",
        dest.to_str().unwrap(),
        "-w",
        "--ca-file",
        &env.ca(),
    ]);
    fails(o, "401 Unauthorized (no credentials)");
}

/// `install oci://…:TAG --verify` to COMPLETE, the digest on the OperatorVersion; then `upgrade`
/// to a signed 0.3.0.
fn install_and_upgrade_verified(env: &Env, public: &Path, key: &Path, pinned: &str) {
    let dev_home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(dev_home.path(), &[]);
    let kc = &dev.kubeconfig;
    let tag = format!("{}:0.2.0", env.oci("kudo/first-operator"));
    let ca = env.ca();
    let verify = ["--verify", "--key", public.to_str().unwrap(), "--ca-file", &ca];
    let mut args = vec![
        "install",
        tag.as_str(),
        "--instance",
        "web",
        "--wait",
        "--wait-time",
        "120",
    ];
    args.extend(verify);
    let installed = ok(kudo_on(env, kc, &args));
    assert!(
        installed.starts_with(&format!("{tag}: {pinned} (signature verified with ")),
        "{installed}"
    );
    assert!(
        installed.contains("deploy plan of instance web is COMPLETE"),
        "{installed}"
    );
    let ov = kubectl_json(
        kc,
        &["get", "operatorversions.kudo.dev", "first-operator-1.7.9-0.2.0"],
    );
    assert_eq!(ov["metadata"]["annotations"]["kudo-rs.dev/source"], pinned);
    let fp = ov["metadata"]["annotations"]["kudo-rs.dev/signature"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(fp.starts_with("cosign key sha256:"), "{fp}");

    let v3 = first_operator_at(env.tmp.path(), "0.3.0");
    let d3 = env.push(&v3, "kudo/first-operator");
    let unsigned = format!("{}:0.3.0", env.oci("kudo/first-operator"));
    let mut args = vec!["upgrade", unsigned.as_str(), "--instance", "web"];
    args.extend(verify);
    fails(
        kudo_on(env, kc, &args),
        "is not signed: no cosign signature at sha256-",
    );
    let p3 = format!("{}@{d3}", env.oci("kudo/first-operator"));
    ok(env.sign(&p3, key));
    args.extend(["--wait", "--wait-time", "120"]);
    let upgraded = ok(kudo_on(env, kc, &args));
    assert!(upgraded.contains("instance default/web updated"), "{upgraded}");
    let ov = kubectl_json(
        kc,
        &["get", "operatorversions.kudo.dev", "first-operator-1.7.9-0.3.0"],
    );
    assert_eq!(ov["metadata"]["annotations"]["kudo-rs.dev/source"], p3.as_str());
}

/// The air-gapped mirror of the docs: `skopeo copy` of the artifact and of its signature tag into
/// another repository keeps the digest, and the mirror verifies.
fn mirror_with_skopeo(env: &Env, public: &Path, digest: &str) {
    let sig_tag = kudo_oci::reference::signature_tag(digest);
    for tag in ["0.2.0", sig_tag.as_str()] {
        let cert_dir = env.reg.cert_dir().display().to_string();
        let creds = env.reg.creds();
        env.skopeo(&[
            "copy",
            "--src-cert-dir",
            &cert_dir,
            "--src-creds",
            &creds,
            "--dest-cert-dir",
            &cert_dir,
            "--dest-creds",
            &creds,
            &format!("docker://{}/kudo/first-operator:{tag}", env.reg.addr),
            &format!("docker://{}/mirror/first-operator:{tag}", env.reg.addr),
        ]);
    }
    let dest = env.path("mirrored");
    let mirrored = format!("{}:0.2.0", env.oci("mirror/first-operator"));
    let pulled = ok(env.pull_verified(&mirrored, &dest, public, &["-o", "json"]));
    let v: serde_json::Value = serde_json::from_str(&pulled).unwrap();
    assert_eq!(v["digest"], digest);
    assert!(
        v["verified"]["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{v}"
    );
}

#[test]
fn oci_artifacts_and_signatures_of_other_tools_install_and_bad_ones_are_refused() {
    let Some(env) = Env::start() else { return };
    env.login();
    let created = env.created_first_operator();
    let tgz = created.join("first-operator-1.7.9_0.2.0.tgz");
    let tgz = tgz.to_str().unwrap();
    let addr = env.reg.addr.as_str();
    let py = env.path("py");
    std::fs::create_dir_all(&py).unwrap();
    env.tools(&["keygen", py.to_str().unwrap()]);
    let (py_key, py_pub) = (
        py.join("py.key").display().to_string(),
        py.join("py.pub").display().to_string(),
    );

    // Pushed by Python with our media types (its own config blob and annotations), signed by
    // Python.
    let digest = env.tools(&["push-artifact", addr, "py/first-operator", "0.2.0", tgz]);
    env.tools(&["sign", addr, "py/first-operator", &digest, &py_key]);
    // Copied by skopeo from an OCI layout written by Python.
    let layout = env.path("layout");
    env.tools(&["layout", layout.to_str().unwrap(), "0.2.0", tgz]);
    let cert_dir = env.reg.cert_dir().display().to_string();
    env.skopeo(&[
        "copy",
        "--dest-cert-dir",
        &cert_dir,
        "--dest-creds",
        &env.reg.creds(),
        &format!("oci:{}:0.2.0", layout.display()),
        &format!("docker://{addr}/sk/first-operator:0.2.0"),
    ]);

    let dev_home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(dev_home.path(), &[]);
    let kc = &dev.kubeconfig;
    let ca = env.ca();
    let verify = ["--verify", "--key", py_pub.as_str(), "--ca-file", &ca];
    let py_ref = format!("{}:0.2.0", env.oci("py/first-operator"));
    let mut args = vec![
        "install",
        py_ref.as_str(),
        "--instance",
        "py",
        "--wait",
        "--wait-time",
        "120",
    ];
    args.extend(verify);
    let installed = ok(kudo_on(&env, kc, &args));
    assert!(
        installed.contains("(signature verified with ") && installed.contains("is COMPLETE"),
        "{installed}"
    );
    let sk_ref = format!("{}:0.2.0", env.oci("sk/first-operator"));
    let o = kudo_on(
        &env,
        kc,
        &[
            "install",
            &sk_ref,
            "--instance",
            "sk",
            "--ca-file",
            &env.ca(),
            "--wait",
            "--wait-time",
            "120",
        ],
    );
    assert!(ok(o).contains("deploy plan of instance sk is COMPLETE"));

    refusals(&env, kc, &digest, tgz, &py_key, &py_pub);
}

/// Unsigned, another key, a tampered payload, a signature copied from another artifact: each
/// refused, naming why, before anything is written.
fn refusals(env: &Env, kc: &Path, signed_digest: &str, tgz: &str, py_key: &str, py_pub: &str) {
    let addr = env.reg.addr.as_str();
    let before = kubectl_json(kc, &["get", "operatorversions.kudo.dev,instances.kudo.dev"]);
    let other = env.path("other");
    ok(env.kudo(&["package", "keygen", "-d", other.to_str().unwrap()]));
    let d = env.tools(&[
        "push-artifact",
        addr,
        "bad/first-operator",
        "0.2.0",
        tgz,
        "--artifact-type",
        "",
    ]);
    let ca = env.ca();
    let try_install = |reference: &str, key: &str| {
        let args = [
            "install",
            reference,
            "--instance",
            "bad",
            "--verify",
            "--key",
            key,
            "--ca-file",
            &ca,
        ];
        kudo_on(env, kc, &args)
    };
    let bad = format!("{}@{d}", env.oci("bad/first-operator"));
    fails(
        try_install(&bad, py_pub),
        "is not signed: no cosign signature at sha256-",
    );
    ok(env.sign(&bad, &other.join("kudo.key")));
    fails(
        try_install(&bad, py_pub),
        "does not verify with the trusted key(s): made with another key",
    );
    env.tools(&["sign", addr, "bad/first-operator", &d, py_key, "--tamper"]);
    fails(
        try_install(&bad, py_pub),
        "or its payload or signature was altered",
    );
    // A valid signature of the other artifact, put under this one's signature tag.
    env.tools(&[
        "sign",
        addr,
        "bad/first-operator",
        &d,
        py_key,
        "--payload-digest",
        signed_digest,
    ]);
    let e = fails(
        try_install(&bad, py_pub),
        "is for another artifact: its payload names",
    );
    assert!(e.contains(signed_digest), "{e}");
    // A local package cannot be verified at all.
    let local = examples().join("first-operator");
    fails(
        try_install(local.to_str().unwrap(), py_pub),
        "cannot be verified: a signature is required",
    );
    let after = kubectl_json(kc, &["get", "operatorversions.kudo.dev,instances.kudo.dev"]);
    assert_eq!(
        before["items"], after["items"],
        "nothing was written by the refused installs"
    );
}

#[test]
fn oci_registry_failures_name_the_reference_and_write_nothing() {
    let Some(env) = Env::start() else { return };
    env.login();
    let digest = env.push(&examples().join("first-operator"), "kudo/first-operator");
    let tag = format!("{}:0.2.0", env.oci("kudo/first-operator"));
    let dest = env.path("never");
    let d = dest.to_str().unwrap();
    let pull = |args: &[&str]| {
        let mut all = vec!["package", "pull"];
        all.extend(args);
        all.extend(["-d", d]);
        env.kudo(&all)
    };
    let ca = env.ca();
    fails(
        pull(&[&tag]),
        "invalid peer certificate: UnknownIssuer (a registry whose certificate is signed by its own CA needs --ca-file",
    );
    fails(
        pull(&[&tag, "--plain-http"]),
        "Client sent an HTTP request to an HTTPS server",
    );
    fails(
        pull(&["oci://127.0.0.1:1/kudo/first-operator:0.2.0"]),
        "cannot reach the registry 127.0.0.1:1 for oci://127.0.0.1:1/kudo/first-operator:0.2.0",
    );
    fails(
        pull(&[
            &format!("{}:9.9.9", env.oci("kudo/first-operator")),
            "--ca-file",
            &ca,
        ]),
        ":9.9.9 not found in the registry",
    );
    // No credentials, and credentials the registry no longer accepts.
    let anonymous = env
        .command("no-docker")
        .args(["package", "pull", &tag, "--ca-file", &ca, "-d", d])
        .output()
        .unwrap();
    fails(
        anonymous,
        &format!(
            "the registry {} refused {tag} with 401 Unauthorized (no credentials)",
            env.reg.addr
        ),
    );
    let expired = env.path("expired");
    std::fs::create_dir_all(&expired).unwrap();
    let auth = base64_encode("kudo:an-old-password");
    std::fs::write(
        expired.join("config.json"),
        format!(r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#, env.reg.addr),
    )
    .unwrap();
    let o = env
        .command("expired")
        .args(["package", "pull", &tag, "--ca-file", &ca, "-d", d])
        .output()
        .unwrap();
    fails(o, "401 Unauthorized (user \"kudo\" from ");

    // Not packages: a container-image-like manifest, an index, a gzip bomb in the right media type.
    let addr = env.reg.addr.as_str();
    let tgz = env.path("any.tgz");
    std::fs::write(&tgz, b"not even gzip").unwrap();
    let tgz = tgz.to_str().unwrap();
    env.tools(&[
        "push-artifact",
        addr,
        "bad/image",
        "1",
        tgz,
        "--config-media-type",
        "application/vnd.oci.image.config.v1+json",
        "--artifact-type",
        "",
    ]);
    fails(
        pull(&[&format!("{}:1", env.oci("bad/image")), "--ca-file", &ca]),
        "is not a kudo package: its config media type is application/vnd.oci.image.config.v1+json",
    );
    env.tools(&["push-index", addr, "kudo/first-operator", "list", &digest, "1000"]);
    fails(
        pull(&[
            &format!("{}:list", env.oci("kudo/first-operator")),
            "--ca-file",
            &ca,
        ]),
        "is not a kudo package: it is an image index",
    );
    let bomb = env.path("bomb.tgz");
    write_gzip_bomb(&bomb);
    env.tools(&["push-artifact", addr, "bad/bomb", "1", bomb.to_str().unwrap()]);
    fails(
        pull(&[&format!("{}:1", env.oci("bad/bomb")), "--ca-file", &ca]),
        "is invalid: its layer: templates/zeros.yaml: rejected: file is larger than the limit",
    );

    // The registry's copy of the layer damaged, then cut short.
    let m: serde_json::Value =
        serde_json::from_str(&pulled_manifest(&env, "kudo/first-operator:0.2.0")).unwrap();
    let blob = env.reg.blob_path(m["layers"][0]["digest"].as_str().unwrap());
    let original = std::fs::read(&blob).unwrap();
    let mut flipped = original.clone();
    flipped[100] ^= 1;
    std::fs::write(&blob, &flipped).unwrap();
    fails(
        pull(&[&tag, "--ca-file", &ca]),
        &format!("digest mismatch for package layer of {tag}: expected sha256:"),
    );
    std::fs::write(&blob, &original[..original.len() / 2]).unwrap();
    fails(
        pull(&[&tag, "--ca-file", &ca]),
        &format!(
            "the package layer of {tag} is truncated: received {} of {} bytes",
            original.len() / 2,
            original.len()
        ),
    );
    assert!(!dest.exists(), "a failed pull writes nothing");
    std::fs::write(&blob, &original).unwrap();
    credential_helper(&env, &tag);
}

/// `credsStore` naming a helper: `get` supplies the credentials, `login` stores and `logout`
/// erases through it.
fn credential_helper(env: &Env, tag: &str) {
    let bin = env.path("bin");
    let store = env.path("helper-store");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&store).unwrap();
    let helper = bin.join("docker-credential-kudotest");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\nd={}\ncase \"$1\" in\n  get) read -r h; if [ -f \"$d/$h\" ]; then cat \"$d/$h\"; else echo \
             'credentials not found in native keychain'; exit 1; fi ;;\n  store) cat > \"$d/stored\" ;;\n  erase) read -r h; \
             rm -f \"$d/$h\"; echo \"$h\" > \"$d/erased\" ;;\nesac\n",
            store.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = env.path("helper-docker");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.json"), r#"{"credsStore": "kudotest"}"#).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let run = |args: &[&str], stdin: &str| {
        with_stdin(env.command("helper-docker").args(args).env("PATH", &path), stdin)
    };
    let dest = env.path("helper-pull");
    let pull = [
        "package",
        "pull",
        tag,
        "--ca-file",
        &env.ca(),
        "-d",
        dest.to_str().unwrap(),
        "-w",
    ];
    fails(run(&pull, ""), "401 Unauthorized (no credentials)");
    let login = env.login_args();
    let login: Vec<&str> = login.iter().map(String::as_str).collect();
    let o = ok(run(&login, &format!("{}\n", env.reg.password)));
    assert!(
        o.contains("stored in credential helper docker-credential-kudotest"),
        "{o}"
    );
    let stored = std::fs::read_to_string(store.join("stored")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(
        (v["ServerURL"].as_str(), v["Username"].as_str()),
        (Some(env.reg.addr.as_str()), Some("kudo"))
    );
    std::fs::write(store.join(&env.reg.addr), stored).unwrap();
    ok(run(&pull, ""));
    ok(run(&["registry", "logout", &env.reg.addr], ""));
    assert_eq!(
        std::fs::read_to_string(store.join("erased")).unwrap().trim(),
        env.reg.addr
    );
}

fn base64_encode(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn pulled_manifest(env: &Env, repo_tag: &str) -> String {
    let mut args = vec!["inspect".to_string(), "--raw".into()];
    args.extend(env.skopeo_flags());
    args.push(format!("docker://{}/{repo_tag}", env.reg.addr));
    env.skopeo(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// A package whose one template decompresses to 40 MiB of zeros (about 40 KiB compressed).
fn write_gzip_bomb(path: &Path) {
    let gz = flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    let files: [(&str, Vec<u8>); 3] = [
        (
            "operator.yaml",
            b"apiVersion: kudo.dev/v1beta1\nname: bomb\noperatorVersion: 0.1.0\n".to_vec(),
        ),
        ("params.yaml", b"parameters: []\n".to_vec()),
        ("templates/zeros.yaml", vec![0u8; 40 << 20]),
    ];
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        tar.append_data(&mut h, name, data.as_slice()).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
}

#[test]
fn oci_repositories_resolve_names_to_the_highest_version_tag() {
    let Some(env) = Env::start() else { return };
    env.login();
    for v in ["0.2.0", "0.10.0", "0.9.0"] {
        let pkg = if v == "0.2.0" {
            examples().join("first-operator")
        } else {
            first_operator_at(env.tmp.path(), v)
        };
        env.push(&pkg, "team/first-operator");
    }
    let ns = env.oci("team");
    let o = env.kudo(&["repo", "add", "team", &ns]);
    fails(o, &format!("looks like \"{ns}\" cannot be reached"));
    let added = ok(env.kudo(&["repo", "add", "team", &ns, "--ca-file", &env.ca()]));
    assert_eq!(added, "\"team\" has been added to your repositories\n");
    let ca = env.ca();
    let schema_of = |name: &str, extra: &[&str]| {
        let mut args = vec!["package", "schema", name, "--repo", "team", "--ca-file", &ca];
        args.extend(extra);
        env.kudo(&args)
    };
    let title = |extra: &[&str]| {
        let v: serde_json::Value = serde_json::from_str(&ok(schema_of("first-operator", extra))).unwrap();
        v["title"].as_str().unwrap().to_string()
    };
    assert_eq!(title(&[]), "first-operator-1.7.9-0.10.0");
    assert_eq!(
        title(&["--operator-version", "0.9.0"]),
        "first-operator-1.7.9-0.9.0"
    );
    fails(
        schema_of("first-operator", &["--operator-version", "0.5.0"]),
        "no operator version found for first-operator with operator version 0.5.0 in repository \"team\"",
    );
    fails(
        schema_of("nothing", &[]),
        "no operator version found for nothing in repository \"team\"",
    );
    let public = env.path("keys/kudo.pub");
    ok(env.kudo(&["package", "keygen", "-d", env.path("keys").to_str().unwrap()]));
    let verify = ["--verify", "--key", public.to_str().unwrap()];
    fails(
        schema_of("first-operator", &verify),
        "/team/first-operator@sha256:",
    );
    fails(env.kudo(&["search", "--repo", "team"]), "is an OCI registry");
}
