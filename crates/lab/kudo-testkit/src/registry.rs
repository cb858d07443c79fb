//! A real OCI registry for tests: the CNCF distribution registry (`/usr/bin/docker-registry`,
//! Debian's `docker-registry`), started on `127.0.0.1` with htpasswd (bcrypt) authentication, or
//! with the token flow against a token service of the test's (`token_server.py`: ES256 JWTs from
//! Python's `cryptography`), and a TLS certificate from a CA made for the test (`openssl`,
//! `htpasswd`), storage in a temporary directory, all stopped when the [`TestRegistry`] is
//! dropped.
//!
//! Where the registry is not installed, [`TestRegistry::start`] prints why the test does not run
//! and returns `None`; under `CI=true` it panics instead (`.ci/run` installs it).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The registry binary Debian installs.
pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// How the registry is set up.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    /// Serve HTTPS with the test CA's certificate (else plain HTTP).
    pub tls: bool,
    /// Who may pull and push.
    pub auth: Auth,
}

/// The registry's authentication.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// Anonymous access.
    None,
    /// Basic auth against an htpasswd file (`401` with `WWW-Authenticate: Basic`).
    Htpasswd,
    /// The token flow (`401` with `WWW-Authenticate: Bearer realm=…`): tokens from a token service
    /// that checks the user's password.
    Token,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            tls: true,
            auth: Auth::Htpasswd,
        }
    }
}

/// A running registry; killed and its files removed on drop.
pub struct TestRegistry {
    child: Child,
    token_service: Option<Child>,
    dir: tempfile::TempDir,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The user of the htpasswd file.
    pub user: String,
    /// Its password.
    pub password: String,
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        for child in std::iter::once(&mut self.child).chain(self.token_service.as_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Whether the tools `setup` needs are installed; the reason when not (a panic under CI).
pub fn available(setup: Setup) -> bool {
    let mut missing: Vec<&str> = [REGISTRY_BIN, "/usr/bin/htpasswd", "/usr/bin/openssl"]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    let crypto = || {
        Command::new("python3")
            .args(["-c", "import cryptography"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if setup.auth == Auth::Token && !crypto() {
        missing.push("Python's cryptography");
    }
    if missing.is_empty() {
        return true;
    }
    let msg = format!(
        "{} not installed (apt-get install docker-registry apache2-utils openssl; pip install \
         cryptography; .ci/run does)",
        missing.join(", ")
    );
    if in_ci() {
        panic!("{msg}: the registry tests must run in CI");
    }
    eprintln!("SKIPPED (not in CI): {msg}");
    false
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test CA and a certificate for 127.0.0.1/localhost signed by it, in `dir`.
fn make_certificates(dir: &Path) {
    let p = |f: &str| dir.join(f);
    run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ])
        .args(["-days", "2", "-subj", "/CN=kudo-rs test CA"])
        .args(["-addext", "basicConstraints=critical,CA:TRUE"])
        .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        .arg("-keyout")
        .arg(p("ca.key"))
        .arg("-out")
        .arg(p("ca.crt")));
    run(Command::new("openssl")
        .args([
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ])
        .args(["-subj", "/CN=127.0.0.1"])
        .arg("-keyout")
        .arg(p("server.key"))
        .arg("-out")
        .arg(p("server.csr")));
    std::fs::write(
        p("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(Command::new("openssl")
        .args(["x509", "-req", "-days", "2", "-CAcreateserial"])
        .arg("-in")
        .arg(p("server.csr"))
        .arg("-CA")
        .arg(p("ca.crt"))
        .arg("-CAkey")
        .arg(p("ca.key"))
        .arg("-extfile")
        .arg(p("server.ext"))
        .arg("-out")
        .arg(p("server.crt")));
    // skopeo's --cert-dir layout: CA certificates as *.crt.
    std::fs::create_dir_all(p("certs.d")).unwrap();
    std::fs::copy(p("ca.crt"), p("certs.d/ca.crt")).unwrap();
}

/// The `service` and `issuer` of the token flow's JWTs.
const TOKEN_SERVICE: &str = "kudo-test-registry";
const TOKEN_ISSUER: &str = "kudo-test-token-service";

/// Starts `token_server.py` with an issuer certificate made here; returns it and its realm URL.
fn start_token_service(d: &Path, user: &str, password: &str) -> (Child, String) {
    run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ])
        .args(["-days", "2", "-subj", "/CN=kudo-rs test token issuer"])
        .arg("-keyout")
        .arg(d.join("token.key"))
        .arg("-out")
        .arg(d.join("token.crt")));
    let script = d.join("token_server.py");
    std::fs::write(&script, include_str!("token_server.py")).unwrap();
    let port_file = d.join("token.port");
    let log = std::fs::File::create(d.join("token.log")).unwrap();
    let child = Command::new("python3")
        .arg(&script)
        .arg(&port_file)
        .arg(d.join("token.key"))
        .arg(d.join("token.crt"))
        .args([TOKEN_ISSUER, user, password])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start the token service (python3)");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !port_file.exists() {
        assert!(
            Instant::now() < deadline,
            "the token service did not start: {}",
            std::fs::read_to_string(d.join("token.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let port = std::fs::read_to_string(&port_file).unwrap();
    (child, format!("http://127.0.0.1:{}/token", port.trim()))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl TestRegistry {
    /// Starts a registry set up as `setup`; `None` (after printing why) when it is not installed.
    pub fn start(setup: Setup) -> Option<TestRegistry> {
        if !available(setup) {
            return None;
        }
        let mut dir = tempfile::tempdir().unwrap();
        let d = &dir.path().to_path_buf();
        let (user, password) = ("kudo".to_string(), "s3cret-Pa55".to_string());
        let mut config = format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  \
             delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{{PORT}}\n",
            d.join("data").display()
        );
        if setup.tls {
            make_certificates(d);
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                d.join("server.crt").display(),
                d.join("server.key").display()
            ));
        }
        let mut token_service = None;
        match setup.auth {
            Auth::None => {}
            Auth::Htpasswd => {
                run(Command::new("htpasswd")
                    .args(["-Bbc"])
                    .arg(d.join("htpasswd"))
                    .args([&user, &password]));
                config.push_str(&format!(
                    "auth:\n  htpasswd:\n    realm: kudo-test\n    path: {}\n",
                    d.join("htpasswd").display()
                ));
            }
            Auth::Token => {
                let (child, realm) = start_token_service(d, &user, &password);
                token_service = Some(child);
                config.push_str(&format!(
                    "auth:\n  token:\n    realm: {realm}\n    service: {TOKEN_SERVICE}\n    issuer: \
                     {TOKEN_ISSUER}\n    rootcertbundle: {}\n",
                    d.join("token.crt").display()
                ));
            }
        }
        // A port taken between choosing and binding makes the registry exit: try a few.
        for _ in 0..5 {
            let port = free_port();
            std::fs::write(d.join("config.yml"), config.replace("{PORT}", &port.to_string())).unwrap();
            let log = std::fs::File::create(d.join("registry.log")).unwrap();
            let child = Command::new(REGISTRY_BIN)
                .arg("serve")
                .arg(d.join("config.yml"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start docker-registry");
            let mut reg = TestRegistry {
                child,
                token_service: token_service.take(),
                dir,
                addr: format!("127.0.0.1:{port}"),
                user: user.clone(),
                password: password.clone(),
            };
            if reg.wait_listening() {
                return Some(reg);
            }
            token_service = reg.token_service.take();
            dir = take_dir(&mut reg);
        }
        panic!("docker-registry did not start on a free port (see its log above)");
    }

    /// Waits until the port accepts connections; false when the process ended first.
    fn wait_listening(&mut self) -> bool {
        let addr: SocketAddr = self.addr.parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                eprintln!("docker-registry exited:\n{}", self.log());
                return false;
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "docker-registry did not listen on {} within 20 s:\n{}",
            self.addr,
            self.log()
        );
    }

    /// The registry's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// The test CA's certificate (PEM), for `--ca-file`.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// A directory holding the CA as `ca.crt`, for skopeo's `--cert-dir`.
    pub fn cert_dir(&self) -> PathBuf {
        self.dir.path().join("certs.d")
    }

    /// `user:password`, for skopeo's `--creds`.
    pub fn creds(&self) -> String {
        format!("{}:{}", self.user, self.password)
    }

    /// The file holding blob `digest` (`sha256:…`) in the registry's storage, to damage it.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

/// Takes the directory back from a registry that did not start (it is killed on drop).
fn take_dir(reg: &mut TestRegistry) -> tempfile::TempDir {
    let placeholder = tempfile::tempdir().unwrap();
    std::mem::replace(&mut reg.dir, placeholder)
}
