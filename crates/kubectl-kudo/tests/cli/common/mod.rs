//! Shared by the CLI test binaries that run `kubectl-kudo dev` as a child process.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub mod kudo019;

pub const BIN: &str = env!("CARGO_BIN_EXE_kubectl-kudo");

/// `../shared` beside the checkout (the catalog, the seeds), else `/work/shared`, where it is on
/// the development machines when the checkout is a worktree further down.
#[allow(dead_code)] // each test binary compiles this module; not all of them use it
pub fn shared_dir() -> PathBuf {
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared");
    match beside.canonicalize() {
        Ok(p) => p,
        Err(_) => PathBuf::from("/work/shared"),
    }
}

/// Runs `kubectl-kudo ARGS` with `HOME=home` (and `--kubeconfig`, when given, instead of any
/// `$KUBECONFIG`): its exit code and its stdout followed by its stderr.
#[allow(dead_code)] // each test binary compiles this module; not all of them run the CLI this way
pub fn kudo(home: &Path, kubeconfig: Option<&Path>, args: &[&str]) -> (i32, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env("HOME", home).env_remove("KUBECONFIG");
    if let Some(k) = kubeconfig {
        cmd.arg("--kubeconfig").arg(k);
    }
    let out = cmd.output().expect("run kubectl-kudo");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `kubectl-kudo ARGS --kubeconfig KC -n NS` with `HOME=home` and no `$KUBECONFIG`, to run.
#[allow(dead_code)] // each test binary compiles this module; not all of them run the CLI this way
pub fn kudo_command(home: &Path, kubeconfig: &Path, ns: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-n", ns])
        .env("HOME", home)
        .env_remove("KUBECONFIG");
    cmd
}

/// Runs `kubectl-kudo ARGS --kubeconfig KC -n NS` with `HOME=home`: exit code, stdout, stderr.
#[allow(dead_code)] // each test binary compiles this module; not all of them run the CLI this way
pub fn kudo_in(home: &Path, kubeconfig: &Path, ns: &str, args: &[&str]) -> (i32, String, String) {
    let out = kudo_command(home, kubeconfig, ns, args)
        .output()
        .expect("run kubectl-kudo");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether the real `kubectl` is on PATH (the e2e tests drive it).
#[allow(dead_code)] // each test binary compiles this module; not all of them run kubectl
pub fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `kubectl-kudo dev` as a child process; killed when dropped, whatever happened.
pub struct Dev {
    child: Child,
    /// The kubeconfig it wrote (and printed as `export KUBECONFIG=…`).
    pub kubeconfig: PathBuf,
    /// stderr lines printed up to and including `export KUBECONFIG=…`.
    pub banner: Vec<String>,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `kubectl-kudo dev` on a free loopback port with `HOME=home`, writing its kubeconfig into
/// `home`, plus `extra` flags; returns once it printed `export KUBECONFIG=…` (which must name
/// that kubeconfig).
pub fn start_dev(home: &Path, extra: &[&str]) -> Dev {
    let kubeconfig = home.join("kubeconfig");
    let mut child = Command::new(BIN)
        .args(["dev", "--address", "127.0.0.1:0", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(extra)
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kubectl-kudo dev");
    let stderr = child.stderr.take().expect("piped stderr");
    let mut dev = Dev {
        child,
        kubeconfig,
        banner: Vec::new(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stderr).lines();
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            let done = line.contains("export KUBECONFIG=");
            let _ = tx.send(line);
            if done {
                break;
            }
        }
        // Keep draining so the child never blocks on a full pipe.
        for _ in lines {}
    });
    loop {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(line) => {
                let printed = line
                    .find("export KUBECONFIG=")
                    .map(|i| line[i + "export KUBECONFIG=".len()..].trim().to_string());
                dev.banner.push(line);
                if let Some(path) = printed {
                    assert_eq!(
                        Path::new(&path),
                        dev.kubeconfig,
                        "the printed KUBECONFIG is the --kubeconfig file"
                    );
                    return dev;
                }
            }
            Err(e) => panic!(
                "kubectl-kudo dev printed no `export KUBECONFIG=` ({e}); stderr so far:\n{}",
                dev.banner.join("\n")
            ),
        }
    }
}

/// Copies the directory `from` to `to`, recursively.
#[allow(dead_code)] // each test binary compiles this module; not all of them copy packages
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Whether Debian's `openssl` is there (tests that read certificates with it skip otherwise).
#[allow(dead_code)] // each test binary compiles this module; not all of them use it
pub fn openssl_available() -> bool {
    Command::new("openssl")
        .arg("version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `openssl ARGS` on `input`: what it printed (stdout, then stderr); it must succeed.
#[allow(dead_code)] // each test binary compiles this module; not all of them use it
pub fn openssl(args: &[&str], input: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    let o = child.wait_with_output().expect("openssl ends");
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// Whether `tool --version`-like `args` runs. Where it does not, the test skips with `why`
/// printed, except under `CI=true`, where `.ci/run` installs the tool and its absence fails.
#[allow(dead_code)] // each test binary compiles this module; not all of them use it
pub fn tool_or_skip(tool: &str, args: &[&str], why: &str) -> bool {
    let ok = Command::new(tool)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let msg = format!("{tool} is not installed (apt-get install it; .ci/run does): {why}");
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"),
            "{msg}"
        );
        eprintln!("SKIPPED: {msg}");
    }
    ok
}

/// One cluster the scenario runs on: its kubeconfig, the namespace, a HOME for the CLI.
#[allow(dead_code)] // each test binary compiles this module; not all of them use it
pub struct On<'a> {
    pub home: &'a Path,
    pub kubeconfig: &'a Path,
    pub ns: &'a str,
}

#[allow(dead_code)]
impl On<'_> {
    /// `kubectl-kudo ARGS -n NS`: (exit code, stdout + stderr).
    pub async fn kudo(&self, args: &[&str]) -> (i32, String) {
        let out = tokio::process::Command::new(BIN)
            .args(args)
            .arg("--kubeconfig")
            .arg(self.kubeconfig)
            .args(["-n", self.ns])
            .env("HOME", self.home)
            .env_remove("KUBECONFIG")
            .output()
            .await
            .expect("run kubectl-kudo");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }

    /// `kubectl ARGS -n NS` (stdin from `input`), which must succeed: its stdout.
    pub async fn kubectl(&self, args: &[&str], input: Option<&str>) -> String {
        use tokio::io::AsyncWriteExt;
        let mut child = tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig)
            .args(["-n", self.ns])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run kubectl");
        let mut stdin = child.stdin.take().expect("stdin");
        if let Some(text) = input {
            stdin.write_all(text.as_bytes()).await.expect("write stdin");
        }
        drop(stdin);
        let out = child.wait_with_output().await.expect("kubectl output");
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub async fn get(&self, what: &[&str]) -> serde_json::Value {
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        args.extend(["-o", "json", "--show-managed-fields"]);
        serde_json::from_str(&self.kubectl(&args, None).await).expect("kubectl json")
    }
}
