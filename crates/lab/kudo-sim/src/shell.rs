//! The simulated container runtime: a small shell interpreter over an in-memory filesystem.
//!
//! There are no containers on a simulated node, yet some workloads only make sense when their
//! commands have an effect: a Job whose container runs `false` must fail, a KUDO Pipe task's
//! generator pod writes files that are copied out through `pods/exec`, `kubectl logs` should
//! show what a container printed. This module runs a documented subset of what a container's
//! `command`/`args` can ask for, deterministically and without touching the host.
//!
//! # The rules
//! A container's command line is its `command` followed by its `args`.
//! * `sh -c SCRIPT` / `bash -c SCRIPT` (also `/bin/sh`, `/bin/bash`, `ash`, `dash`; flags `-e`,
//!   `-x`, `-u` may precede or be combined with `-c`) interprets SCRIPT; any other command line
//!   whose program is one of the commands below runs that command directly.
//! * Scripts: commands separated by `;` or newlines, `&&` and `||` lists, words with single and
//!   double quotes and backslash escapes, `$NAME`/`${NAME}` from the container's literal `env`
//!   values and `$?`, redirections `>`, `>>`, `2>`, `2>>`, `2>&1`, `<` (and `/dev/null`),
//!   `set -e`/`set +e`, `exec CMD`, comments.
//! * Commands: `true`, `:`, `false`, `exit [N]`, `sleep N…` (GNU forms `5`, `0.5`, `30s`, `2m`,
//!   `1h`, `1d`, `infinity`; the total is capped at 3600 s and measured on the simulator's
//!   clock), `echo [-n] [-e]`, `printf FORMAT [ARG…]` (`%s %d %i %c %x %%`, backslash escapes),
//!   `touch`, `mkdir [-p]`, `cat`, `cp [-r]`, `rm [-f] [-r]`, `ls [-1] [-a]`, `stat -c %s`,
//!   `tar cf - PATH…` (a ustar archive on stdout, leading `/` removed as GNU tar does), `cd`,
//!   `pwd`, nested `sh -c`.
//! * Anything else is **not simulated**: a script using pipes `|`, `$(…)`, backquotes, globs,
//!   `if`/`for`/`while`/`case`, background `&`, other redirections (`>&2`) or variable
//!   assignments is not run at all; a program not listed above (`openssl`, `java`…) or no
//!   command at all (the image's entrypoint) stops interpretation where it is reached (effects
//!   of the commands before it remain). Such a container behaves as before this interpreter
//!   existed: a long-running container runs and is ready, an init container or a Job's
//!   container completes with exit code 0. Through `pods/exec` a not-simulated command exits
//!   127 with a message on stderr instead.
//! * Every container sees its own root filesystem, except under the mount paths of the pod's
//!   `emptyDir` volumes, which all its containers (init containers included) share.
//! * What the commands print to stdout and stderr is the container's log.
//!
//! The effects of a container's commands happen when it starts; `sleep` only delays when the
//! container is reported as terminated.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Longest total `sleep` a container is simulated for, in milliseconds (as the real-cluster
/// fake kubelet caps it).
pub const MAX_SLEEP_MS: i64 = 3_600_000;

/// One directory tree: files with contents and directories, by path relative to its root
/// (no leading slash; the root itself is "").
#[derive(Debug, Default, Clone)]
struct Tree {
    files: BTreeMap<String, Vec<u8>>,
    dirs: BTreeSet<String>,
}

/// The filesystems of one pod: a private root per container and one tree per `emptyDir` volume.
#[derive(Debug, Default, Clone)]
pub struct PodFs {
    roots: HashMap<String, Tree>,
    volumes: HashMap<String, Tree>,
}

/// Where a container's mount of an `emptyDir` volume is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Absolute mount path, normalised.
    pub path: String,
    /// Volume name.
    pub volume: String,
}

/// What a command line asks of a container, and what it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Exit code once finished; `None` when interpretation stopped at something not simulated.
    pub exit: Option<i32>,
    /// The program that is not simulated (for messages), when `exit` is `None`.
    pub not_simulated: Option<String>,
    /// Total simulated `sleep`, in milliseconds.
    pub sleep_ms: i64,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// stdout and stderr interleaved in the order written: the container log.
    pub log: Vec<u8>,
}

/// The container a command runs in.
#[derive(Debug, Clone, Default)]
pub struct Container {
    /// Container name (its private root).
    pub name: String,
    /// `emptyDir` mounts.
    pub mounts: Vec<Mount>,
    /// Literal environment (`env[].value`).
    pub env: BTreeMap<String, String>,
    /// `workingDir`, or `/`.
    pub workdir: String,
}

/// Runs a container's command line (`command` + `args`) in `fs` with `stdin`.
pub fn run(fs: &mut PodFs, c: &Container, argv: &[String], stdin: &[u8]) -> Run {
    let mut sh = Shell {
        fs,
        c,
        cwd: normalize("/", if c.workdir.is_empty() { "/" } else { &c.workdir }),
        status: 0,
        errexit: false,
        out: Out::default(),
        sleep_ms: 0,
        stdin: stdin.to_vec(),
    };
    let flow = if argv.is_empty() {
        Flow::NotSimulated("the image's entrypoint".into())
    } else {
        sh.command(argv, Io::default())
    };
    let (exit, not_simulated) = match flow {
        Flow::Next => (Some(sh.status), None),
        Flow::Exit(n) => (Some(n), None),
        Flow::NotSimulated(p) => (None, Some(p)),
    };
    Run {
        exit,
        not_simulated,
        sleep_ms: sh.sleep_ms.min(MAX_SLEEP_MS),
        stdout: sh.out.stdout,
        stderr: sh.out.stderr,
        log: sh.out.log,
    }
}

#[derive(Debug, Default)]
struct Out {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    log: Vec<u8>,
}

/// How control continues after a command.
#[derive(Debug)]
enum Flow {
    Next,
    Exit(i32),
    NotSimulated(String),
}

#[derive(Debug, Clone, Default)]
enum Sink {
    #[default]
    Std,
    Null,
    File {
        path: String,
        append: bool,
    },
}

#[derive(Debug, Clone, Default)]
struct Io {
    out: Sink,
    err: Sink,
    err_to_out: bool,
    input: Option<String>,
}

struct Shell<'a> {
    fs: &'a mut PodFs,
    c: &'a Container,
    cwd: String,
    status: i32,
    errexit: bool,
    out: Out,
    sleep_ms: i64,
    stdin: Vec<u8>,
}

/// `base` joined with `p`, with `.`, `..` and repeated slashes resolved.
fn normalize(base: &str, p: &str) -> String {
    let joined = if p.starts_with('/') {
        p.to_string()
    } else {
        format!("{base}/{p}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in joined.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// A script token.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Semi,
    And,
    Or,
    Redir { fd: u8, append: bool },
    DupErrToOut,
    Input,
}

/// Splits a script into tokens; `Err` names the construct that is not simulated.
fn lex(script: &str, env: &dyn Fn(&str) -> String) -> Result<Vec<Tok>, String> {
    let mut toks = Vec::new();
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let mut word = String::new();
    let mut in_word = false;
    macro_rules! flush {
        () => {
            if in_word {
                toks.push(Tok::Word(std::mem::take(&mut word)));
                in_word = false;
            }
        };
    }
    let var = |chars: &[char], i: &mut usize| -> Result<String, String> {
        // at '$'
        let start = *i + 1;
        if chars.get(start) == Some(&'{') {
            let end = chars[start..]
                .iter()
                .position(|c| *c == '}')
                .ok_or("an unterminated ${")?;
            let name: String = chars[start + 1..start + end].iter().collect();
            if !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '?')
            {
                return Err(format!("the expansion ${{{name}}}"));
            }
            *i = start + end + 1;
            return Ok(env(&name));
        }
        if chars.get(start) == Some(&'?') {
            *i = start + 1;
            return Ok(env("?"));
        }
        if chars.get(start) == Some(&'(') {
            return Err("command substitution $(…)".into());
        }
        let mut end = start;
        while end < chars.len() && (chars[end].is_ascii_alphanumeric() || chars[end] == '_') {
            end += 1;
        }
        if end == start {
            *i = start;
            return Ok("$".into());
        }
        let name: String = chars[start..end].iter().collect();
        *i = end;
        Ok(env(&name))
    };
    while i < chars.len() {
        let ch = chars[i];
        match ch {
            ' ' | '\t' => {
                flush!();
                i += 1;
            }
            '\n' | ';' => {
                flush!();
                if chars.get(i + 1) == Some(&';') {
                    return Err("`;;`".into());
                }
                toks.push(Tok::Semi);
                i += 1;
            }
            '#' if !in_word => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '&' => {
                flush!();
                if chars.get(i + 1) == Some(&'&') {
                    toks.push(Tok::And);
                    i += 2;
                } else {
                    return Err("background jobs (`&`)".into());
                }
            }
            '|' => {
                flush!();
                if chars.get(i + 1) == Some(&'|') {
                    toks.push(Tok::Or);
                    i += 2;
                } else {
                    return Err("pipes (`|`)".into());
                }
            }
            '>' | '<' => {
                // A lone `2` just before is the fd.
                let mut fd = 1;
                if ch == '>' && in_word && word == "2" {
                    word.clear();
                    in_word = false;
                    fd = 2;
                }
                flush!();
                if ch == '<' {
                    toks.push(Tok::Input);
                    i += 1;
                } else if chars.get(i + 1) == Some(&'&') {
                    if fd == 2 && chars.get(i + 2) == Some(&'1') {
                        toks.push(Tok::DupErrToOut);
                        i += 3;
                    } else {
                        return Err("this redirection (`>&`)".into());
                    }
                } else if chars.get(i + 1) == Some(&'>') {
                    toks.push(Tok::Redir { fd, append: true });
                    i += 2;
                } else {
                    toks.push(Tok::Redir { fd, append: false });
                    i += 1;
                }
            }
            '(' | ')' | '`' => return Err(format!("`{ch}`")),
            '*' | '?' | '[' => {
                return Err(format!("globbing (`{ch}`)"));
            }
            '\'' => {
                in_word = true;
                let end = chars[i + 1..]
                    .iter()
                    .position(|c| *c == '\'')
                    .ok_or("an unterminated single quote")?;
                word.extend(&chars[i + 1..i + 1 + end]);
                i += end + 2;
            }
            '"' => {
                in_word = true;
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err("an unterminated double quote".into()),
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some('\\') => {
                            match chars.get(i + 1) {
                                Some(c @ ('"' | '\\' | '$' | '`')) => word.push(*c),
                                Some('\n') => {}
                                Some(c) => {
                                    word.push('\\');
                                    word.push(*c);
                                }
                                None => return Err("an unterminated double quote".into()),
                            }
                            i += 2;
                        }
                        Some('$') => {
                            let v = var(&chars, &mut i)?;
                            word.push_str(&v);
                        }
                        Some('`') => return Err("command substitution (backquotes)".into()),
                        Some(c) => {
                            word.push(*c);
                            i += 1;
                        }
                    }
                }
            }
            '\\' => {
                match chars.get(i + 1) {
                    Some('\n') => {}
                    Some(c) => {
                        in_word = true;
                        word.push(*c);
                    }
                    None => {}
                }
                i += 2;
            }
            '$' => {
                in_word = true;
                let v = var(&chars, &mut i)?;
                word.push_str(&v);
            }
            c => {
                in_word = true;
                word.push(c);
                i += 1;
            }
        }
    }
    if in_word {
        toks.push(Tok::Word(word));
    }
    Ok(toks)
}

const KEYWORDS: [&str; 14] = [
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "function",
    "!",
];

/// Parses GNU sleep's argument forms into milliseconds.
fn sleep_arg(s: &str) -> Option<i64> {
    if s == "infinity" || s == "inf" {
        return Some(MAX_SLEEP_MS);
    }
    let (num, mult) = match s.chars().last()? {
        's' => (&s[..s.len() - 1], 1000.0),
        'm' => (&s[..s.len() - 1], 60_000.0),
        'h' => (&s[..s.len() - 1], 3_600_000.0),
        'd' => (&s[..s.len() - 1], 86_400_000.0),
        _ => (s, 1000.0),
    };
    let n: f64 = num.parse().ok()?;
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    Some((n * mult).min(MAX_SLEEP_MS as f64) as i64)
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some('a') => out.push('\x07'),
            Some('0') => out.push('\0'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// A minimal `printf`: `%s %d %i %c %x %%` and backslash escapes; the format is reused while
/// arguments remain, as the shell's printf does.
fn printf(format: &str, args: &[String]) -> Result<String, String> {
    let fmt: Vec<char> = unescape(format).chars().collect();
    let mut out = String::new();
    let mut ai = 0;
    loop {
        let mut i = 0;
        let mut used = false;
        while i < fmt.len() {
            if fmt[i] != '%' {
                out.push(fmt[i]);
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < fmt.len() && (fmt[j] == '-' || fmt[j] == '0' || fmt[j].is_ascii_digit()) {
                j += 1;
            }
            let spec: String = fmt[i + 1..j].iter().collect();
            let Some(&conv) = fmt.get(j) else {
                out.push('%');
                break;
            };
            let arg = args.get(ai).cloned().unwrap_or_default();
            let pad = |s: String| -> String {
                let width: usize = spec.trim_start_matches(['-', '0']).parse().unwrap_or(0);
                if s.chars().count() >= width {
                    s
                } else if spec.starts_with('-') {
                    format!("{s:<width$}")
                } else if spec.starts_with('0') {
                    format!("{s:0>width$}")
                } else {
                    format!("{s:>width$}")
                }
            };
            match conv {
                '%' => out.push('%'),
                's' => {
                    out.push_str(&pad(arg));
                    ai += 1;
                    used = true;
                }
                'c' => {
                    out.extend(arg.chars().next());
                    ai += 1;
                    used = true;
                }
                'd' | 'i' | 'x' => {
                    let n: i64 = if arg.is_empty() {
                        0
                    } else {
                        arg.trim()
                            .parse()
                            .map_err(|_| format!("printf: {arg}: invalid number"))?
                    };
                    out.push_str(&pad(if conv == 'x' {
                        format!("{n:x}")
                    } else {
                        n.to_string()
                    }));
                    ai += 1;
                    used = true;
                }
                other => return Err(format!("printf %{other}")),
            }
            i = j + 1;
        }
        if !used || ai >= args.len() {
            break;
        }
    }
    Ok(out)
}

fn no_such(cmd: &str, p: &str) -> String {
    format!("{cmd}: {p}: No such file or directory\n")
}

impl Shell<'_> {
    fn env(&self, name: &str) -> String {
        if name == "?" {
            return self.status.to_string();
        }
        if name == "PWD" {
            return self.cwd.clone();
        }
        self.c.env.get(name).cloned().unwrap_or_default()
    }

    /// The tree and relative path an absolute path lives in.
    fn locate(&mut self, abs: &str) -> (&mut Tree, String) {
        let mount = self
            .c
            .mounts
            .iter()
            .filter(|m| abs == m.path || abs.starts_with(&format!("{}/", m.path.trim_end_matches('/'))))
            .max_by_key(|m| m.path.len());
        match mount {
            Some(m) => {
                let rel = abs[m.path.len()..].trim_start_matches('/').to_string();
                (self.fs.volumes.entry(m.volume.clone()).or_default(), rel)
            }
            None => (
                self.fs.roots.entry(self.c.name.clone()).or_default(),
                abs.trim_start_matches('/').to_string(),
            ),
        }
    }

    fn abs(&self, p: &str) -> String {
        normalize(&self.cwd, p)
    }

    fn is_mount_point(&self, abs: &str) -> bool {
        abs == "/" || self.c.mounts.iter().any(|m| m.path == abs)
    }

    fn is_dir(&mut self, abs: &str) -> bool {
        if self.is_mount_point(abs) || abs == "/tmp" || abs == "/dev" {
            return true;
        }
        let (t, rel) = self.locate(abs);
        rel.is_empty() || t.dirs.contains(&rel)
    }

    fn read(&mut self, abs: &str) -> Option<Vec<u8>> {
        if abs == "/dev/null" {
            return Some(Vec::new());
        }
        let (t, rel) = self.locate(abs);
        t.files.get(&rel).cloned()
    }

    fn exists(&mut self, abs: &str) -> bool {
        self.is_dir(abs) || self.read(abs).is_some()
    }

    /// Writes a file; `Err` is the shell's message.
    fn write(&mut self, abs: &str, data: &[u8], append: bool) -> Result<(), String> {
        if abs == "/dev/null" {
            return Ok(());
        }
        if self.is_dir(abs) {
            return Err(format!("{abs}: Is a directory"));
        }
        let par = parent(abs).to_string();
        if !self.is_dir(&par) {
            return Err(format!("{abs}: No such file or directory"));
        }
        let (t, rel) = self.locate(abs);
        let f = t.files.entry(rel).or_default();
        if !append {
            f.clear();
        }
        f.extend_from_slice(data);
        Ok(())
    }

    fn mkdir(&mut self, abs: &str) {
        if self.is_mount_point(abs) {
            return;
        }
        let (t, rel) = self.locate(abs);
        if !rel.is_empty() {
            t.dirs.insert(rel);
        }
    }

    /// Paths (absolute) under directory `abs`, files and directories, sorted.
    fn children(&mut self, abs: &str) -> Vec<String> {
        let mut out = BTreeSet::new();
        let (t, rel) = self.locate(abs);
        let prefix = if rel.is_empty() {
            String::new()
        } else {
            format!("{rel}/")
        };
        for k in t.files.keys().chain(t.dirs.iter()) {
            if let Some(rest) = k.strip_prefix(&prefix)
                && !rest.is_empty()
            {
                out.insert(rest.split('/').next().unwrap_or(rest).to_string());
            }
        }
        let base = abs.trim_end_matches('/').to_string();
        for m in &self.c.mounts {
            if parent(&m.path) == abs || (abs == "/" && parent(&m.path) == "/") {
                out.insert(basename(&m.path).to_string());
            }
        }
        out.into_iter().map(|n| format!("{base}/{n}")).collect()
    }

    fn remove(&mut self, abs: &str, recursive: bool) -> Result<(), String> {
        if self.is_dir(abs) {
            if !recursive {
                return Err(format!("cannot remove '{abs}': Is a directory"));
            }
            let (t, rel) = self.locate(abs);
            let prefix = format!("{rel}/");
            t.files.retain(|k, _| !k.starts_with(&prefix));
            t.dirs.retain(|k| !k.starts_with(&prefix) && *k != rel);
            return Ok(());
        }
        let (t, rel) = self.locate(abs);
        if t.files.remove(&rel).is_none() {
            return Err(format!("cannot remove '{abs}': No such file or directory"));
        }
        Ok(())
    }

    fn emit(&mut self, io: &Io, data: &[u8], err: bool) -> Result<(), String> {
        let sink = if err && !io.err_to_out { &io.err } else { &io.out };
        match sink {
            Sink::Null => Ok(()),
            Sink::Std => {
                if err && !io.err_to_out {
                    self.out.stderr.extend_from_slice(data);
                } else {
                    self.out.stdout.extend_from_slice(data);
                }
                self.out.log.extend_from_slice(data);
                Ok(())
            }
            Sink::File { path, append } => {
                let (p, a) = (path.clone(), *append);
                self.write(&p, data, a)
            }
        }
    }

    fn out(&mut self, io: &Io, data: &[u8]) {
        if let Err(e) = self.emit(io, data, false) {
            let msg = format!("sh: {e}\n");
            let _ = self.emit(&Io::default(), msg.as_bytes(), true);
        }
    }

    fn err(&mut self, io: &Io, msg: &str) {
        if self.emit(io, msg.as_bytes(), true).is_err() {
            let _ = self.emit(&Io::default(), msg.as_bytes(), true);
        }
    }

    fn script(&mut self, script: &str) -> Flow {
        let env = |n: &str| self.env(n);
        // Variables are expanded while lexing; `$?` therefore means the status before the
        // script, a documented simplification.
        let toks = match lex(script, &env) {
            Ok(t) => t,
            Err(what) => return Flow::NotSimulated(format!("a script using {what}")),
        };
        // Split into and-or lists separated by `;`.
        let mut lists: Vec<Vec<Tok>> = vec![Vec::new()];
        for t in toks {
            if t == Tok::Semi {
                lists.push(Vec::new());
            } else if let Some(l) = lists.last_mut() {
                l.push(t);
            }
        }
        for list in lists.into_iter().filter(|l| !l.is_empty()) {
            // Split into commands joined by && / ||.
            let mut cmds: Vec<(Option<Tok>, Vec<Tok>)> = vec![(None, Vec::new())];
            for t in list {
                if matches!(t, Tok::And | Tok::Or) {
                    cmds.push((Some(t), Vec::new()));
                } else if let Some(c) = cmds.last_mut() {
                    c.1.push(t);
                }
            }
            if cmds.iter().any(|(_, c)| c.is_empty()) {
                return Flow::NotSimulated("a script with an empty command".into());
            }
            let last = cmds.len() - 1;
            let mut guarded_failure = false;
            for (i, (op, cmd)) in cmds.into_iter().enumerate() {
                let run = match op {
                    None => true,
                    Some(Tok::And) => self.status == 0,
                    Some(_) => self.status != 0,
                };
                if !run {
                    continue;
                }
                match self.simple(cmd) {
                    Flow::Next => {}
                    other => return other,
                }
                guarded_failure = i != last && self.status != 0;
            }
            if self.errexit && self.status != 0 && !guarded_failure {
                return Flow::Exit(self.status);
            }
        }
        Flow::Next
    }

    /// Runs one command with its redirections.
    fn simple(&mut self, toks: Vec<Tok>) -> Flow {
        let mut io = Io::default();
        let mut argv = Vec::new();
        let mut it = toks.into_iter();
        while let Some(t) = it.next() {
            match t {
                Tok::Word(w) => argv.push(w),
                Tok::DupErrToOut => io.err_to_out = true,
                Tok::Redir { fd, append } => {
                    let Some(Tok::Word(target)) = it.next() else {
                        return Flow::NotSimulated("a redirection without a target".into());
                    };
                    let sink = if target == "/dev/null" {
                        Sink::Null
                    } else {
                        let path = self.abs(&target);
                        // The shell creates (or truncates) the target before running the command.
                        if let Err(e) = self.write(&path, b"", append) {
                            self.err(&Io::default(), &format!("sh: {e}\n"));
                            self.status = 1;
                            return Flow::Next;
                        }
                        Sink::File { path, append: true }
                    };
                    if fd == 2 {
                        io.err = sink;
                        io.err_to_out = false;
                    } else {
                        io.out = sink;
                    }
                }
                Tok::Input => {
                    let Some(Tok::Word(target)) = it.next() else {
                        return Flow::NotSimulated("a redirection without a target".into());
                    };
                    io.input = Some(self.abs(&target));
                }
                _ => return Flow::NotSimulated("an operator in an unexpected place".into()),
            }
        }
        if argv.is_empty() {
            self.status = 0;
            return Flow::Next;
        }
        if KEYWORDS.contains(&argv[0].as_str()) || argv[0].contains('=') {
            return Flow::NotSimulated(format!("a script using `{}`", argv[0]));
        }
        self.command(&argv, io)
    }

    /// Runs one command line (already split into words).
    fn command(&mut self, argv: &[String], io: Io) -> Flow {
        let prog = basename(&argv[0]).to_string();
        let args = &argv[1..];
        let status = match prog.as_str() {
            "sh" | "bash" | "ash" | "dash" => {
                let mut script = None;
                let mut errexit = false;
                let mut i = 0;
                while i < args.len() {
                    let a = &args[i];
                    if a.starts_with('-') && a.len() > 1 && a[1..].chars().all(|c| "cexuv".contains(c)) {
                        if a.contains('e') {
                            errexit = true;
                        }
                        if a.contains('c') {
                            script = args.get(i + 1).cloned();
                            break;
                        }
                        i += 1;
                    } else {
                        break;
                    }
                }
                let Some(script) = script else {
                    return Flow::NotSimulated(format!("{prog} without -c"));
                };
                let saved = (self.errexit, self.cwd.clone());
                self.errexit = errexit;
                let flow = self.script(&script);
                (self.errexit, self.cwd) = saved;
                return match flow {
                    Flow::Next | Flow::Exit(_) => {
                        if let Flow::Exit(n) = flow {
                            self.status = n;
                        }
                        Flow::Next
                    }
                    ns => ns,
                };
            }
            "exec" => {
                if args.is_empty() {
                    return Flow::Next;
                }
                return match self.command(args, io) {
                    Flow::Next => Flow::Exit(self.status),
                    other => other,
                };
            }
            "exit" => {
                let n = match args.first() {
                    None => self.status,
                    Some(a) => match a.parse::<i64>() {
                        Ok(n) => (n & 0xff) as i32,
                        Err(_) => {
                            self.err(&io, &format!("sh: exit: {a}: Illegal number\n"));
                            2
                        }
                    },
                };
                return Flow::Exit(n);
            }
            "set" => {
                for a in args {
                    match a.as_str() {
                        s if s.starts_with('-') && s[1..].chars().all(|c| "exuv".contains(c)) => {
                            if s.contains('e') {
                                self.errexit = true;
                            }
                        }
                        s if s.starts_with('+') && s[1..].chars().all(|c| "exuv".contains(c)) => {
                            if s.contains('e') {
                                self.errexit = false;
                            }
                        }
                        _ => return Flow::NotSimulated(format!("set {a}")),
                    }
                }
                0
            }
            "true" | ":" => 0,
            "false" => 1,
            "sleep" => {
                if args.is_empty() {
                    self.err(&io, "sleep: missing operand\n");
                    1
                } else {
                    let mut total = 0i64;
                    let mut bad = None;
                    for a in args {
                        match sleep_arg(a) {
                            Some(ms) => total = total.saturating_add(ms),
                            None => bad = Some(a.clone()),
                        }
                    }
                    if let Some(a) = bad {
                        self.err(&io, &format!("sleep: invalid time interval '{a}'\n"));
                        1
                    } else {
                        self.sleep_ms = self.sleep_ms.saturating_add(total).min(MAX_SLEEP_MS);
                        0
                    }
                }
            }
            "echo" => {
                let mut newline = true;
                let mut escapes = false;
                let mut i = 0;
                while let Some(a) = args.get(i) {
                    match a.as_str() {
                        "-n" => newline = false,
                        "-e" => escapes = true,
                        "-E" => escapes = false,
                        "-ne" | "-en" => {
                            newline = false;
                            escapes = true;
                        }
                        _ => break,
                    }
                    i += 1;
                }
                let mut s = args[i..].join(" ");
                if escapes {
                    s = unescape(&s);
                }
                if newline {
                    s.push('\n');
                }
                self.out(&io, s.as_bytes());
                0
            }
            "printf" => match args.split_first() {
                None => {
                    self.err(&io, "printf: usage: printf format [arguments]\n");
                    2
                }
                Some((f, rest)) => match printf(f, rest) {
                    Ok(s) => {
                        self.out(&io, s.as_bytes());
                        0
                    }
                    Err(e) if e.starts_with("printf %") => {
                        return Flow::NotSimulated(e);
                    }
                    Err(e) => {
                        self.err(&io, &format!("{e}\n"));
                        1
                    }
                },
            },
            "pwd" => {
                let s = format!("{}\n", self.cwd);
                self.out(&io, s.as_bytes());
                0
            }
            "cd" => {
                let target = self.abs(args.first().map(String::as_str).unwrap_or("/"));
                if self.is_dir(&target) {
                    self.cwd = target;
                    0
                } else {
                    self.err(&io, &format!("sh: cd: can't cd to {}\n", args[0]));
                    2
                }
            }
            "touch" => {
                let mut st = 0;
                for a in args.iter().filter(|a| !a.starts_with('-')) {
                    let p = self.abs(a);
                    if self.exists(&p) {
                        continue;
                    }
                    if let Err(_e) = self.write(&p, b"", true) {
                        self.err(
                            &io,
                            &format!("touch: cannot touch '{a}': No such file or directory\n"),
                        );
                        st = 1;
                    }
                }
                st
            }
            "mkdir" => {
                let parents = args.iter().any(|a| a == "-p" || a == "--parents");
                let mut st = 0;
                for a in args.iter().filter(|a| !a.starts_with('-')) {
                    let p = self.abs(a);
                    if parents {
                        let mut cur = String::new();
                        for seg in p.split('/').filter(|s| !s.is_empty()) {
                            cur = format!("{cur}/{seg}");
                            if self.read(&cur).is_some() {
                                self.err(
                                    &io,
                                    &format!("mkdir: cannot create directory '{a}': Not a directory\n"),
                                );
                                st = 1;
                                break;
                            }
                            self.mkdir(&cur);
                        }
                    } else if self.exists(&p) {
                        self.err(
                            &io,
                            &format!("mkdir: cannot create directory '{a}': File exists\n"),
                        );
                        st = 1;
                    } else if !self.is_dir(parent(&p)) {
                        self.err(
                            &io,
                            &format!("mkdir: cannot create directory '{a}': No such file or directory\n"),
                        );
                        st = 1;
                    } else {
                        self.mkdir(&p);
                    }
                }
                st
            }
            "cat" => {
                let files: Vec<&String> = args.iter().filter(|a| a.as_str() != "-").collect();
                let mut st = 0;
                if files.is_empty() {
                    let data = match &io.input {
                        Some(p) => self.read(&p.clone()),
                        None => Some(std::mem::take(&mut self.stdin)),
                    };
                    match data {
                        Some(d) => self.out(&io, &d),
                        None => {
                            self.err(&io, &no_such("sh", io.input.as_deref().unwrap_or("")));
                            st = 1;
                        }
                    }
                }
                for a in files {
                    let p = self.abs(a);
                    if self.is_dir(&p) {
                        self.err(&io, &format!("cat: {a}: Is a directory\n"));
                        st = 1;
                        continue;
                    }
                    match self.read(&p) {
                        Some(d) => self.out(&io, &d),
                        None => {
                            self.err(&io, &no_such("cat", a));
                            st = 1;
                        }
                    }
                }
                st
            }
            "cp" => {
                let recursive = args.iter().any(|a| a == "-r" || a == "-R" || a == "-a");
                let paths: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
                if paths.len() < 2 {
                    self.err(&io, "cp: missing file operand\n");
                    2
                } else {
                    let (dst, srcs) = (paths[paths.len() - 1], paths[..paths.len() - 1].to_vec());
                    let dst_abs = self.abs(dst);
                    let dst_is_dir = self.is_dir(&dst_abs);
                    if srcs.len() > 1 && !dst_is_dir {
                        self.err(&io, &format!("cp: target '{dst}': Not a directory\n"));
                        1
                    } else {
                        let mut st = 0;
                        for s in srcs {
                            let sp = self.abs(s);
                            let target = if dst_is_dir {
                                format!("{}/{}", dst_abs.trim_end_matches('/'), basename(&sp))
                            } else {
                                dst_abs.clone()
                            };
                            if self.is_dir(&sp) {
                                if !recursive {
                                    self.err(
                                        &io,
                                        &format!("cp: -r not specified; omitting directory '{s}'\n"),
                                    );
                                    st = 1;
                                    continue;
                                }
                                if let Err(e) = self.copy_tree(&sp, &target) {
                                    self.err(&io, &format!("cp: {e}\n"));
                                    st = 1;
                                }
                                continue;
                            }
                            match self.read(&sp) {
                                None => {
                                    self.err(
                                        &io,
                                        &format!("cp: cannot stat '{s}': No such file or directory\n"),
                                    );
                                    st = 1;
                                }
                                Some(d) => {
                                    if let Err(e) = self.write(&target, &d, false) {
                                        self.err(&io, &format!("cp: cannot create regular file '{e}'\n"));
                                        st = 1;
                                    }
                                }
                            }
                        }
                        st
                    }
                }
            }
            "rm" => {
                let flags: String = args
                    .iter()
                    .filter(|a| a.starts_with('-'))
                    .flat_map(|a| a.chars().skip(1))
                    .collect();
                let force = flags.contains('f');
                let recursive = flags.contains('r') || flags.contains('R');
                let mut st = 0;
                for a in args.iter().filter(|a| !a.starts_with('-')) {
                    let p = self.abs(a);
                    if let Err(e) = self.remove(&p, recursive)
                        && !(force && e.ends_with("No such file or directory"))
                    {
                        self.err(&io, &format!("rm: {}\n", e.replace(&p, a)));
                        st = 1;
                    }
                }
                st
            }
            "ls" => {
                let all = args.iter().any(|a| a.starts_with('-') && a.contains('a'));
                if args
                    .iter()
                    .any(|a| a.starts_with('-') && a.chars().skip(1).any(|c| !"1aA".contains(c)))
                {
                    return Flow::NotSimulated(format!("ls {}", args.join(" ")));
                }
                let mut targets: Vec<String> = args.iter().filter(|a| !a.starts_with('-')).cloned().collect();
                if targets.is_empty() {
                    targets.push(".".into());
                }
                let many = targets.len() > 1;
                let mut st = 0;
                let mut text = String::new();
                for (n, t) in targets.iter().enumerate() {
                    let p = self.abs(t);
                    if self.is_dir(&p) {
                        if many {
                            if n > 0 {
                                text.push('\n');
                            }
                            text.push_str(&format!("{t}:\n"));
                        }
                        if all {
                            text.push_str(".\n..\n");
                        }
                        for c in self.children(&p) {
                            let b = basename(&c);
                            if all || !b.starts_with('.') {
                                text.push_str(b);
                                text.push('\n');
                            }
                        }
                    } else if self.read(&p).is_some() {
                        text.push_str(t);
                        text.push('\n');
                    } else {
                        self.err(
                            &io,
                            &format!("ls: cannot access '{t}': No such file or directory\n"),
                        );
                        st = 2;
                    }
                }
                self.out(&io, text.as_bytes());
                st
            }
            "stat" => {
                let (fmt, files) = match args {
                    [c, f, rest @ ..] if c == "-c" => (f.as_str(), rest),
                    [c, rest @ ..] if c.starts_with("--format=") => (&c["--format=".len()..], rest),
                    _ => return Flow::NotSimulated(format!("stat {}", args.join(" "))),
                };
                if fmt != "%s" {
                    return Flow::NotSimulated(format!("stat -c {fmt}"));
                }
                if files.is_empty() {
                    self.err(&io, "stat: missing operand\n");
                    1
                } else {
                    let mut st = 0;
                    for f in files {
                        let p = self.abs(f);
                        let size = if self.is_dir(&p) {
                            Some(4096)
                        } else {
                            self.read(&p).map(|d| d.len())
                        };
                        match size {
                            Some(n) => self.out(&io, format!("{n}\n").as_bytes()),
                            None => {
                                self.err(
                                    &io,
                                    &format!("stat: cannot statx '{f}': No such file or directory\n"),
                                );
                                st = 1;
                            }
                        }
                    }
                    st
                }
            }
            "tar" => {
                let (mode, rest) = match args.split_first() {
                    Some((m, r)) => (m.trim_start_matches('-').to_string(), r),
                    None => return Flow::NotSimulated("tar".into()),
                };
                // Only `tar cf - PATH…` (flags in any order, `v` allowed).
                if !(mode.contains('c') && mode.contains('f') && mode.chars().all(|c| "cfv".contains(c)))
                    || rest.first().map(String::as_str) != Some("-")
                {
                    return Flow::NotSimulated(format!("tar {}", args.join(" ")));
                }
                match self.tar(&rest[1..], &io) {
                    Ok(st) => st,
                    Err(e) => {
                        self.err(&io, &format!("tar: {e}\n"));
                        2
                    }
                }
            }
            _ => return Flow::NotSimulated(prog),
        };
        self.status = status;
        Flow::Next
    }

    fn copy_tree(&mut self, from: &str, to: &str) -> Result<(), String> {
        if !self.is_dir(parent(to)) {
            return Err(format!(
                "cannot create directory '{to}': No such file or directory"
            ));
        }
        self.mkdir(to);
        for c in self.children(from) {
            let target = format!("{}/{}", to.trim_end_matches('/'), basename(&c));
            if self.is_dir(&c) {
                self.copy_tree(&c, &target)?;
            } else if let Some(d) = self.read(&c) {
                self.write(&target, &d, false)?;
            }
        }
        Ok(())
    }

    fn tar(&mut self, paths: &[String], io: &Io) -> Result<i32, String> {
        let mut entries: Vec<(String, Option<Vec<u8>>)> = Vec::new();
        let mut st = 0;
        let mut stripped = false;
        for p in paths {
            let abs = self.abs(p);
            if !self.exists(&abs) {
                self.err(io, &format!("tar: {p}: Cannot stat: No such file or directory\n"));
                st = 2;
                continue;
            }
            let name = if p.starts_with('/') {
                stripped = true;
                p.trim_start_matches('/').to_string()
            } else {
                p.clone()
            };
            self.collect(&abs, &name, &mut entries);
        }
        if stripped {
            self.err(io, "tar: Removing leading `/' from member names\n");
        }
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in entries {
            let mut h = tar::Header::new_ustar();
            h.set_mode(if data.is_some() { 0o644 } else { 0o755 });
            h.set_mtime(0);
            h.set_entry_type(if data.is_some() {
                tar::EntryType::Regular
            } else {
                tar::EntryType::Directory
            });
            let body = data.unwrap_or_default();
            h.set_size(body.len() as u64);
            let n = if h.entry_type().is_dir() {
                format!("{}/", name.trim_end_matches('/'))
            } else {
                name
            };
            b.append_data(&mut h, &n, body.as_slice())
                .map_err(|e| e.to_string())?;
        }
        let data = b.into_inner().map_err(|e| e.to_string())?;
        self.out(io, &data);
        if st != 0 {
            self.err(io, "tar: Exiting with failure status due to previous errors\n");
        }
        Ok(st)
    }

    fn collect(&mut self, abs: &str, name: &str, out: &mut Vec<(String, Option<Vec<u8>>)>) {
        if self.is_dir(abs) {
            out.push((name.to_string(), None));
            for c in self.children(abs) {
                let n = format!("{}/{}", name.trim_end_matches('/'), basename(&c));
                self.collect(&c, &n, out);
            }
        } else if let Some(d) = self.read(abs) {
            out.push((name.to_string(), Some(d)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctr(name: &str, mounts: &[(&str, &str)]) -> Container {
        Container {
            name: name.into(),
            mounts: mounts
                .iter()
                .map(|(p, v)| Mount {
                    path: p.to_string(),
                    volume: v.to_string(),
                })
                .collect(),
            env: BTreeMap::from([("GREETING".to_string(), "hello".to_string())]),
            workdir: String::new(),
        }
    }

    fn sh(fs: &mut PodFs, c: &Container, script: &str) -> Run {
        run(fs, c, &["/bin/sh".into(), "-c".into(), script.into()], b"")
    }

    #[test]
    fn exit_codes_and_lists() {
        let mut fs = PodFs::default();
        let c = ctr("c", &[]);
        assert_eq!(run(&mut fs, &c, &["false".into()], b"").exit, Some(1));
        assert_eq!(run(&mut fs, &c, &["/bin/true".into()], b"").exit, Some(0));
        assert_eq!(sh(&mut fs, &c, "exit 3").exit, Some(3));
        assert_eq!(sh(&mut fs, &c, " exit 300 ").exit, Some(44));
        assert_eq!(sh(&mut fs, &c, "false || echo recovered").exit, Some(0));
        assert_eq!(sh(&mut fs, &c, "false && echo no").exit, Some(1));
        assert_eq!(sh(&mut fs, &c, "false; true").exit, Some(0));
        assert_eq!(
            run(
                &mut fs,
                &c,
                &["sh".into(), "-ec".into(), "false; true".into()],
                b""
            )
            .exit,
            Some(1)
        );
        assert_eq!(sh(&mut fs, &c, "set -e; false && true; exit 4").exit, Some(4));
        let r = sh(
            &mut fs,
            &c,
            "echo $GREETING \"${GREETING} world\" 'no $GREETING'; echo err >&2 2>/dev/null",
        );
        assert_eq!(r.exit, None, "`>&2` is not simulated");
        let r = sh(&mut fs, &c, "echo $GREETING \"${GREETING} world\" 'no $GREETING'");
        assert_eq!(
            String::from_utf8_lossy(&r.stdout),
            "hello hello world no $GREETING\n"
        );
    }

    #[test]
    fn sleep_adds_up_and_is_capped() {
        let mut fs = PodFs::default();
        let c = ctr("c", &[]);
        assert_eq!(
            run(&mut fs, &c, &["sleep".into(), "1.5".into(), "2m".into()], b"").sleep_ms,
            121_500
        );
        assert_eq!(sh(&mut fs, &c, "sleep infinity").sleep_ms, MAX_SLEEP_MS);
        assert_eq!(sh(&mut fs, &c, "sleep 1h; sleep 1h").sleep_ms, MAX_SLEEP_MS);
        let r = sh(&mut fs, &c, "sleep x");
        assert_eq!(r.exit, Some(1));
        assert_eq!(
            String::from_utf8_lossy(&r.stderr),
            "sleep: invalid time interval 'x'\n"
        );
    }

    #[test]
    fn files_are_shared_through_empty_dirs_only() {
        let mut fs = PodFs::default();
        let init = ctr("init", &[("/tmp", "out")]);
        let main = ctr("main", &[("/data", "out")]);
        let r = sh(
            &mut fs,
            &init,
            "touch /tmp/tls.key && printf 'a=%s\\n' 1 2 > /tmp/vars.env; mkdir -p /private/x; echo hi >> /private/x/f",
        );
        assert_eq!(r.exit, Some(0), "{:?}", String::from_utf8_lossy(&r.stderr));
        let r = run(&mut fs, &main, &["cat".into(), "/data/vars.env".into()], b"");
        assert_eq!(String::from_utf8_lossy(&r.stdout), "a=1\na=2\n");
        let r = run(&mut fs, &main, &["cat".into(), "/private/x/f".into()], b"");
        assert_eq!(r.exit, Some(1));
        assert_eq!(
            String::from_utf8_lossy(&r.stderr),
            "cat: /private/x/f: No such file or directory\n"
        );
        let r = run(
            &mut fs,
            &main,
            &["stat".into(), "-c".into(), "%s".into(), "/data/vars.env".into()],
            b"",
        );
        assert_eq!(String::from_utf8_lossy(&r.stdout), "8\n");
        let r = run(&mut fs, &main, &["ls".into(), "/data".into()], b"");
        assert_eq!(String::from_utf8_lossy(&r.stdout), "tls.key\nvars.env\n");
        let r = sh(
            &mut fs,
            &main,
            "cp /data/vars.env /data/copy && rm /data/vars.env && ls /data",
        );
        assert_eq!(String::from_utf8_lossy(&r.stdout), "copy\ntls.key\n");
        assert_eq!(sh(&mut fs, &main, "touch /nope/x").exit, Some(1));
    }

    #[test]
    fn tar_archives_files() {
        let mut fs = PodFs::default();
        let c = ctr("c", &[("/tmp", "v")]);
        sh(&mut fs, &c, "echo secret > /tmp/tls.crt");
        let r = run(
            &mut fs,
            &c,
            &["tar".into(), "cf".into(), "-".into(), "/tmp/tls.crt".into()],
            b"",
        );
        assert_eq!(r.exit, Some(0));
        let mut a = tar::Archive::new(r.stdout.as_slice());
        let mut names = Vec::new();
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            let mut s = String::new();
            std::io::Read::read_to_string(&mut e, &mut s).unwrap();
            names.push((e.path().unwrap().display().to_string(), s));
        }
        assert_eq!(names, vec![("tmp/tls.crt".to_string(), "secret\n".to_string())]);
        assert_eq!(
            String::from_utf8_lossy(&r.stderr),
            "tar: Removing leading `/' from member names\n"
        );
        let r = run(
            &mut fs,
            &c,
            &["tar".into(), "cf".into(), "-".into(), "/tmp/missing".into()],
            b"",
        );
        assert_eq!(r.exit, Some(2));
    }

    #[test]
    fn unknown_programs_stop_interpretation() {
        let mut fs = PodFs::default();
        let c = ctr("c", &[("/tmp", "v")]);
        let r = sh(
            &mut fs,
            &c,
            "echo start; openssl req -x509 -out /tmp/tls.crt; echo never",
        );
        assert_eq!(r.exit, None);
        assert_eq!(r.not_simulated.as_deref(), Some("openssl"));
        assert_eq!(String::from_utf8_lossy(&r.log), "start\n");
        assert_eq!(run(&mut fs, &c, &[], b"").exit, None);
        assert_eq!(sh(&mut fs, &c, "cat /tmp/x | grep y").exit, None);
        assert_eq!(sh(&mut fs, &c, "if true; then echo; fi").exit, None);
        assert_eq!(sh(&mut fs, &c, "echo $(date)").exit, None);
        assert_eq!(sh(&mut fs, &c, "ls /tmp/*").exit, None);
    }
}
