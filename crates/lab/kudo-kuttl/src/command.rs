//! Running suite, step and assert commands the way kuttl does.
//!
//! `command:` is expanded (`$VAR`, `${VAR}` from the harness variables, then the environment),
//! split like a shell splits words (quotes and backslashes, no globbing or pipes) and executed
//! directly; `script:` goes to `sh -c` with the variables in its environment. Every command sees
//! `NAMESPACE`, `KUBECONFIG` and a `PATH` starting with the directory of the running binary, so
//! `kubectl kudo` inside a test resolves to the harness's own plugin binary.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::config::Command;
use crate::log::Log;

/// Expands `$NAME` and `${NAME}` from `vars`, falling back to the process environment; unknown
/// variables become empty (as `os.ExpandEnv` does). `$$` is left alone.
pub fn expand_env(input: &str, vars: &BTreeMap<String, String>) -> String {
    let lookup = |name: &str| -> String {
        vars.get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok())
            .unwrap_or_default()
    };
    let chars: Vec<char> = input.chars().collect();
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '$' || i + 1 >= chars.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let next = chars[i + 1];
        if next == '{' {
            if let Some(end) = chars[i + 2..].iter().position(|&c| c == '}') {
                let name: String = chars[i + 2..i + 2 + end].iter().collect();
                out.push_str(&lookup(&name));
                i += end + 3;
                continue;
            }
            out.push(c);
            i += 1;
        } else if next == '_' || next.is_ascii_alphabetic() {
            let mut j = i + 1;
            while j < chars.len() && (chars[j] == '_' || chars[j].is_ascii_alphanumeric()) {
                j += 1;
            }
            let name: String = chars[i + 1..j].iter().collect();
            out.push_str(&lookup(&name));
            i = j;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Why a command cannot be run ([`split_args`], [`build_argv`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgvError {
    /// A `'` has no closing quote (the command line as given).
    #[error("unterminated single quote in {0:?}")]
    UnterminatedSingleQuote(String),
    /// A `"` has no closing quote (the command line as given).
    #[error("unterminated double quote in {0:?}")]
    UnterminatedDoubleQuote(String),
    /// The command sets both `command:` and `script:`.
    #[error("command and script can not be set in the same configuration")]
    CommandAndScript,
    /// The command sets neither `command:` nor `script:`.
    #[error("command or script must be set")]
    NeitherCommandNorScript,
    /// A `script:` sets `namespaced: true`, which only a `command:` supports.
    #[error("script can not use 'namespaced', use the $NAMESPACE environment variable instead")]
    NamespacedScript,
    /// The `command:` has no words once its variables are expanded.
    #[error("command is empty after expansion")]
    Empty,
}

/// Splits a command line into words: whitespace separates, single quotes keep everything
/// literally, double quotes allow `\"` and `\\`, a backslash outside quotes escapes the next
/// character.
pub fn split_args(line: &str) -> Result<Vec<String>, ArgvError> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => cur.push(ch),
                        None => return Err(ArgvError::UnterminatedSingleQuote(line.to_string())),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(ch @ ('"' | '\\' | '$' | '`')) => cur.push(ch),
                            Some(ch) => {
                                cur.push('\\');
                                cur.push(ch);
                            }
                            None => return Err(ArgvError::UnterminatedDoubleQuote(line.to_string())),
                        },
                        Some(ch) => cur.push(ch),
                        None => return Err(ArgvError::UnterminatedDoubleQuote(line.to_string())),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(ch) = chars.next() {
                    cur.push(ch);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// Whether arguments already choose a namespace (`-n X`, `-nX`, `--namespace X`, `--namespace=X`).
fn has_namespace_flag(args: &[String]) -> bool {
    args.iter().any(|a| {
        a == "-n"
            || a == "--namespace"
            || a.starts_with("--namespace=")
            || (a.starts_with("-n") && !a.starts_with("--"))
    })
}

/// The program and arguments a `command:` runs, or the `sh -c` invocation of a `script:`.
pub fn build_argv(
    cmd: &Command,
    namespace: &str,
    vars: &BTreeMap<String, String>,
) -> Result<Vec<String>, ArgvError> {
    match (cmd.command.trim().is_empty(), cmd.script.trim().is_empty()) {
        (false, false) => return Err(ArgvError::CommandAndScript),
        (true, true) => return Err(ArgvError::NeitherCommandNorScript),
        _ => {}
    }
    if !cmd.script.trim().is_empty() {
        if cmd.namespaced {
            return Err(ArgvError::NamespacedScript);
        }
        return Ok(vec!["sh".into(), "-c".into(), cmd.script.clone()]);
    }
    let mut argv = split_args(&expand_env(&cmd.command, vars))?;
    if argv.is_empty() {
        return Err(ArgvError::Empty);
    }
    if cmd.namespaced && !namespace.is_empty() && !has_namespace_flag(&argv[1..]) {
        argv.push("--namespace".into());
        argv.push(namespace.into());
    }
    Ok(argv)
}

/// A command that keeps running after it was started (suite `background: true`).
#[derive(Debug)]
pub struct Background {
    /// What was started, for logs.
    pub display: String,
    child: tokio::process::Child,
}

impl Background {
    /// Kills the process (it is also killed when dropped).
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// How a command ended when it did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The command line was invalid.
    #[error("command {command:?}: {message}")]
    Invalid {
        /// The command.
        command: String,
        /// Why.
        message: String,
    },
    /// The program could not be started.
    #[error("command {command:?} could not start: {source}")]
    Start {
        /// The command.
        command: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Non-zero exit.
    #[error("command {command:?} failed: {status}")]
    Failed {
        /// The command.
        command: String,
        /// Exit status.
        status: std::process::ExitStatus,
    },
    /// It ran past its timeout and was killed.
    #[error("command {command:?} exceeded its {secs} s timeout")]
    Timeout {
        /// The command.
        command: String,
        /// The limit.
        secs: u64,
    },
}

/// Runs one command. `suite_timeout` applies unless the command overrides it (negative = none).
/// Returns the still-running process for background commands.
pub async fn run_command(
    cmd: &Command,
    namespace: &str,
    cwd: &Path,
    vars: &BTreeMap<String, String>,
    suite_timeout: u64,
    log: &Log,
) -> Result<Option<Background>, CommandError> {
    let display = cmd.display();
    let argv = build_argv(cmd, namespace, vars).map_err(|e| CommandError::Invalid {
        command: display.clone(),
        message: e.to_string(),
    })?;
    let timeout = match cmd.timeout {
        t if t < 0 => 0,
        0 => suite_timeout,
        t => t as u64,
    };
    if cmd.script.trim().is_empty() {
        log.line(format!("running command: {argv:?}"));
    } else {
        log.line(format!("running script: {}", cmd.script.trim()));
    }
    let mut c = tokio::process::Command::new(&argv[0]);
    c.args(&argv[1..])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in vars {
        c.env(k, v);
    }
    if cmd.skip_log_output {
        c.stdout(Stdio::null()).stderr(Stdio::null());
    } else {
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let mut child = c.spawn().map_err(|source| CommandError::Start {
        command: display.clone(),
        source,
    })?;
    let mut pumps = Vec::new();
    if let Some(out) = child.stdout.take() {
        pumps.push(tokio::spawn(pump(out, log.clone())));
    }
    if let Some(err) = child.stderr.take() {
        pumps.push(tokio::spawn(pump(err, log.clone())));
    }
    if cmd.background {
        return Ok(Some(Background { display, child }));
    }
    let status = if timeout > 0 {
        match tokio::time::timeout(Duration::from_secs(timeout), child.wait()).await {
            Ok(s) => s,
            Err(_) => {
                let _ = child.kill().await;
                for p in pumps {
                    let _ = p.await;
                }
                return Err(CommandError::Timeout {
                    command: display,
                    secs: timeout,
                });
            }
        }
    } else {
        child.wait().await
    }
    .map_err(|source| CommandError::Start {
        command: display.clone(),
        source,
    })?;
    for p in pumps {
        let _ = p.await;
    }
    if !status.success() {
        if cmd.ignore_failure {
            log.line(format!("command {display:?} failed ({status}), ignored"));
            return Ok(None);
        }
        return Err(CommandError::Failed {
            command: display,
            status,
        });
    }
    Ok(None)
}

async fn pump(stream: impl tokio::io::AsyncRead + Unpin, log: Log) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        log.line(format!("    | {line}"));
    }
}
