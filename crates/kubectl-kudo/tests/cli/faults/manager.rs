//! `kubectl-kudo manager` as a subprocess, one per life between two faults: its log in a file of
//! its own (read for panics afterwards), a named fail point armed through `KUDO_FAILPOINT` or
//! none, and SIGKILL (`Child::start_kill`) as the way it ends.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-kudo");

/// One manager process.
pub struct Manager {
    child: tokio::process::Child,
    /// When it was started.
    pub started: Instant,
}

/// How one manager life ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// It aborted at its armed fail point.
    FailPoint,
    /// The test SIGKILLed it.
    Killed,
}

impl Manager {
    /// Starts a manager of `ns` on `kubeconfig`, its stderr appended to `log`, with `failpoint`
    /// (`NAME[:N]`) armed when given.
    pub fn start(kubeconfig: &Path, ns: &str, home: &Path, log: &Path, failpoint: Option<&str>) -> Manager {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("manager log");
        let mut cmd = tokio::process::Command::new(BIN);
        cmd.args([
            "manager",
            "--leader-elect=false",
            "--metrics-address",
            "127.0.0.1:0",
        ])
        .args(["--watch-namespace", ns, "--debounce-ms", "0", "--kubeconfig"])
        .arg(kubeconfig)
        .env("HOME", home)
        .env("RUST_LOG", "info")
        .env_remove("KUDO_FAILPOINT")
        .stdout(Stdio::null())
        .stderr(file)
        .kill_on_drop(true);
        if let Some(fp) = failpoint {
            cmd.env("KUDO_FAILPOINT", fp);
        }
        Manager {
            child: cmd.spawn().expect("start the manager"),
            started: Instant::now(),
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to the process: a stopped manager keeps its state and
    /// connections but reads nothing, so the cluster moves on without it.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("the manager runs").to_string();
        let st = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -{signal} {pid}");
    }

    /// Whether the process has ended (at its fail point: nobody else kills it).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// SIGKILLs the process unless it ended already; how it ended.
    pub async fn kill(mut self) -> End {
        if self.exited() {
            return End::FailPoint;
        }
        self.child.start_kill().expect("SIGKILL the manager");
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
        End::Killed
    }
}

/// The lines of the manager logs in `dir` that show a panic or an error of the kind reserved for
/// bugs (the manager logs those at ERROR): none may exist.
pub fn bad_lines(dir: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path: PathBuf = entry.path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines() {
            if line.contains("panicked") || line.contains(" ERROR ") {
                bad.push(format!("{}: {line}", path.display()));
            }
        }
    }
    bad
}
