//! The simulated container runtime: a shell interpreter over an in-memory filesystem, with the
//! programs containers of KUDO packages run.
//!
//! There are no containers on a simulated node, yet what a container's commands do must happen:
//! a Job whose container runs `false` fails, a KUDO Pipe task's generator pod writes the files
//! that are copied out through `pods/exec` (`openssl req -x509 …` a real key and certificate),
//! an init container that cannot do its work keeps its pod from starting, `kubectl logs` shows
//! what a container printed. This module runs a container's `command` and `args` as a POSIX
//! shell and its programs would, deterministically and without touching the host. It never
//! pretends: a program it does not implement exits with status 127 and says so on stderr
//! (`kudo-sim: openssl: not simulated: …`), as a missing program does in a real shell — the
//! script goes on unless `set -e` is on.
//!
//! # What runs
//! * The shell ([`parse`], [`exec`]): `sh`/`bash`/`ash`/`dash` with `-c SCRIPT` or a script
//!   file, flags `-e -x -u` and `-o pipefail`; lists, `&&`, `||`, pipelines, `!`, `&` (run at
//!   once, not waited for), `if`/`while`/`until`/`for`/`case`, `{ }`, `( )`, functions, `[[ ]]`,
//!   `(( ))`, quoting, parameter expansion (`${x:-y}`, `${x#p}`, `${x%%p}`, `${x/p/r}`,
//!   `${x:1:2}`, `${#x}` …), `$(…)`, backquotes, `$((…))`, field splitting, pathname expansion,
//!   redirections (`<`, `>`, `>>`, `2>&1`, `>&2`, `&>`, `<<<`); builtins (`cd`, `exit`, `set`,
//!   `export`, `read`, `test`/`[`, `source`/`.`, `shift`, `return`, `local`, `eval`, `exec`,
//!   `pushd`/`popd`, `wait`, `type`, `command -v`, …). Not interpreted (the script exits 127):
//!   here-documents, arrays, `for ((…))`, `trap`.
//! * Programs ([`programs`]): coreutils (`echo`, `printf`, `cat`, `cp`, `mv`, `rm`, `ls`,
//!   `mkdir`, `touch`, `stat`, `chmod`, `chown`, `ln -s`, `head`, `tail`, `wc`, `tr`, `cut`,
//!   `sort`, `uniq`, `tee`, `basename`, `dirname`, `date`, `env`, `seq`, `id`, `hostname`,
//!   `sleep`, `base64`, …), `grep`, `sed` (`s///`, `-n … p`, `-i`), `awk` (`{ print $N }` and
//!   friends), `xargs`, `tar cf -`, `sysctl`, `openssl` (`req -x509`, `genrsa`, `x509`),
//!   and clients of the simulated servers: `nslookup`, `nc`, `zkCli.sh`, `redis-cli`, `mysql`,
//!   `mysqldump`.
//! * Servers ([`standins`]): a server program (`kafka-server-start.sh`, `redis-server`,
//!   `zkServer.sh start-foreground`, …), the entrypoint of a long-running container, or, in a
//!   long-running container of a known server image, the first program kudo-sim does not
//!   implement: from there the process runs until stopped, listening on the container's ports.
//!
//! # Time and state
//! Effects happen when the container starts; `sleep` only delays when it is reported as
//! terminated (its total is followed for at most [`MAX_SLEEP_MS`]; a process still sleeping or
//! looping past that runs until stopped). Every container sees its own root filesystem, except
//! under the mount paths of the pod's volumes: an `emptyDir` is shared by the pod's containers,
//! a PersistentVolumeClaim's data by the pods that mount it, and ConfigMap, Secret and projected
//! volumes hold their keys as files (the runtime reads them when the pod starts). What the
//! commands print to stdout and stderr is the container's log.

mod arith;
mod ast;
pub mod audit;
mod builtins;
mod exec;
mod expand;
mod fs;
pub mod net;
mod parse;
mod pattern;
mod programs;
pub mod standins;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

pub use audit::{Handling, Use, audit};
pub use exec::Running;
pub use fs::{Meta, PodFs, Tree};
pub use net::{Network, NoNetwork, Resolved};
pub use programs::names as program_names;
pub use standins::{Protocol, Server, StandIn};

/// An absolute path with `.`, `..` and repeated slashes resolved.
pub(crate) fn normalize_path(p: &str) -> String {
    fs::normalize("/", p)
}

/// Longest total `sleep` a container is followed for, in milliseconds (as the real-cluster
/// fake kubelet caps it).
pub const MAX_SLEEP_MS: i64 = 3_600_000;

/// Where a container mounts a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Absolute mount path, normalised.
    pub path: String,
    /// Volume name (the key of its tree in [`PodFs::volumes`]).
    pub volume: String,
    /// Whether writes fail: `readOnly`, and always for configMap/secret/downwardAPI/projected.
    pub read_only: bool,
    /// What the volume is (for messages): `emptyDir`, `persistentVolumeClaim`, `configMap`, …
    pub source: String,
    /// The path inside the volume that is mounted (`subPath`; empty: its root).
    pub sub_path: String,
}

/// The container a command runs in.
#[derive(Debug, Clone, Default)]
pub struct Container {
    /// Container name (its private root).
    pub name: String,
    /// The container's image (`image`), which picks the server a stand-in is for.
    pub image: String,
    /// The volumes the container mounts (`volumeMounts`).
    pub mounts: Vec<Mount>,
    /// Literal environment (`env[].value`, and the pod fields of `valueFrom.fieldRef`).
    pub env: BTreeMap<String, String>,
    /// `workingDir`, or `/`.
    pub workdir: String,
    /// The pod's host name (`spec.hostname`, else its name).
    pub hostname: String,
    /// The pod's `spec.subdomain` (a StatefulSet's governing Service).
    pub subdomain: String,
    /// The pod's IP.
    pub ip: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// `containerPort`s.
    pub ports: Vec<u16>,
    /// Whether the process is meant to keep running (a regular container of a pod that restarts
    /// its containers; not an init container, not a Job's or a `restartPolicy: Never` pod's).
    pub long_running: bool,
    /// When the container started, in ms since the epoch (the simulator's clock).
    pub started_ms: i64,
}

/// What a command line did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Exit code once finished; `None` while it runs (see `running`).
    pub exit: Option<i32>,
    /// Why it does not end, when it does not.
    pub running: Option<Running>,
    /// Total simulated `sleep`, in milliseconds.
    pub sleep_ms: i64,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// stdout and stderr interleaved in the order written: the container log.
    pub log: Vec<u8>,
}

impl Run {
    /// The server the process became, if it did.
    pub fn serving(&self) -> Option<&StandIn> {
        match &self.running {
            Some(Running::Serving(s)) => Some(s),
            _ => None,
        }
    }
}

/// Runs a container's command line (`command` + `args`; empty: the image's entrypoint) in `fs`
/// with `stdin`, on `net`.
pub fn run(fs: &mut PodFs, c: &Container, net: &mut dyn Network, argv: &[String], stdin: &[u8]) -> Run {
    let mut sh = exec::Shell::new(fs, c, net, stdin);
    let flow = if argv.is_empty() {
        entrypoint(&mut sh, c)
    } else {
        let io = sh.base.clone();
        programs::shells::exec_program(&mut sh, &io, argv)
    };
    let (exit, running) = match flow {
        exec::Flow::Runs(Running::Serving(s)) => {
            // Said where a user looks (`kubectl logs`): what runs is not the real server.
            let ports: Vec<String> = s.ports.iter().map(u16::to_string).collect();
            let line = format!(
                "kudo-sim: {} keeps running: kudo-sim stands in for {} here (listening on {})\n",
                s.program,
                s.server,
                if ports.is_empty() {
                    "no port".to_string()
                } else {
                    ports.join(", ")
                }
            );
            sh.write(&exec::Sink::Err, line.as_bytes());
            (None, Some(Running::Serving(s)))
        }
        exec::Flow::Runs(r) => (None, Some(r)),
        exec::Flow::Exit(n) | exec::Flow::Return(n) => (Some(n), None),
        _ => (Some(sh.status), None),
    };
    Run {
        exit,
        running,
        sleep_ms: sh.sleep_ms.min(MAX_SLEEP_MS),
        stdout: std::mem::take(&mut sh.out.stdout),
        stderr: std::mem::take(&mut sh.out.stderr),
        log: std::mem::take(&mut sh.out.log),
    }
}

/// The command line a container's process runs, as [`run`] takes it: `command` and `args`; the
/// `args` alone for an image without entrypoint ([`standins::SHELL_IMAGES`]); empty (the image's
/// entrypoint, given the args) otherwise.
pub fn process_argv(image: &str, command: &[String], args: &[String]) -> Vec<String> {
    if !command.is_empty() {
        command.iter().chain(args).cloned().collect()
    } else if standins::shell_image(image) {
        args.to_vec()
    } else {
        Vec::new()
    }
}

/// A container without `command`: its image's entrypoint.
fn entrypoint(sh: &mut exec::Shell<'_>, c: &Container) -> exec::Flow {
    if let Some(s) = standins::entrypoint(c) {
        return exec::Flow::Runs(Running::Serving(s));
    }
    // Images whose default command is a shell: with nothing on stdin it ends at once.
    if standins::shell_image(&c.image) {
        return exec::Flow::Exit(0);
    }
    let io = sh.base.clone();
    sh.eprint(
        &io,
        format!(
            "kudo-sim: the entrypoint of {}: not simulated: a container that must finish needs a command kudo-sim runs\n",
            c.image
        ),
    );
    exec::Flow::Exit(127)
}
