//! A real OCI registry for tests: the CNCF distribution registry (`/usr/bin/docker-registry`,
//! Debian's `docker-registry`), started on `127.0.0.1` with htpasswd (bcrypt) authentication and
//! a TLS certificate from a CA made for the test (`openssl`, `htpasswd`), storage in a temporary
//! directory, and stopped when the [`TestRegistry`] is dropped.
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
    /// Require the htpasswd user (else anonymous access).
    pub auth: bool,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            tls: true,
            auth: true,
        }
    }
}

/// A running registry; killed and its files removed on drop.
pub struct TestRegistry {
    child: Child,
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
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Whether the tools are installed; the reason when not (a panic under CI).
pub fn available() -> bool {
    let missing: Vec<&str> = [REGISTRY_BIN, "/usr/bin/htpasswd", "/usr/bin/openssl"]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let msg = format!(
        "{} not installed (apt-get install docker-registry apache2-utils openssl; .ci/run does)",
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
        if !available() {
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
        if setup.auth {
            run(Command::new("htpasswd")
                .args(["-Bbc"])
                .arg(d.join("htpasswd"))
                .args([&user, &password]));
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: kudo-test\n    path: {}\n",
                d.join("htpasswd").display()
            ));
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
                dir,
                addr: format!("127.0.0.1:{port}"),
                user: user.clone(),
                password: password.clone(),
            };
            if reg.wait_listening() {
                return Some(reg);
            }
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
