//! The interpreter: runs a parsed script against the container's filesystem, as a POSIX shell
//! would, one command at a time (pipelines stage after stage, each stage's output the next one's
//! input; background jobs at once, without waiting).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::ast::*;
use super::{Container, Network, PodFs, StandIn, standins};

/// Commands one process may run before it is taken to run forever (a loop waiting for something
/// the simulated cluster never does).
const MAX_STEPS: u64 = 100_000;
/// Nested function calls, sourced files and subshells.
const MAX_DEPTH: usize = 64;

/// How control continues after a command.
#[derive(Debug)]
pub(crate) enum Flow {
    Next,
    Exit(i32),
    Return(i32),
    Break(u32),
    Continue(u32),
    /// The process does not end: it became a long-running program, or it waits for ever.
    Runs(Running),
}

/// Why a process does not end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Running {
    /// It became a long-running program kudo-sim stands in for.
    Serving(StandIn),
    /// It is still running when the simulator stops following it (the reason).
    Waiting(String),
}

/// Bytes a command reads, with a cursor shared by the commands of a redirected loop.
#[derive(Debug, Default)]
pub(crate) struct Input {
    pub data: Vec<u8>,
    pub pos: usize,
}

impl Input {
    /// Everything not read yet.
    pub fn rest(&mut self) -> Vec<u8> {
        let r = self.data[self.pos.min(self.data.len())..].to_vec();
        self.pos = self.data.len();
        r
    }

    /// The next line without its newline; `None` at the end.
    pub fn line(&mut self) -> Option<(Vec<u8>, bool)> {
        if self.pos >= self.data.len() {
            return None;
        }
        let rest = &self.data[self.pos..];
        match rest.iter().position(|b| *b == b'\n') {
            Some(n) => {
                let l = rest[..n].to_vec();
                self.pos += n + 1;
                Some((l, true))
            }
            None => {
                let l = rest.to_vec();
                self.pos = self.data.len();
                Some((l, false))
            }
        }
    }
}

/// Where output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sink {
    /// The process's standard output (the container log).
    Out,
    /// The process's standard error (the container log).
    Err,
    Null,
    /// Appended to this file (truncated when the redirection was made).
    File(String),
    /// Captured for `$(…)` or the next stage of a pipeline.
    Capture(usize),
}

/// The file descriptors of a command.
#[derive(Debug, Clone)]
pub(crate) struct Io {
    pub input: Rc<RefCell<Input>>,
    pub out: Sink,
    pub err: Sink,
}

impl Io {
    pub fn with_input(&self, data: Vec<u8>) -> Io {
        Io {
            input: Rc::new(RefCell::new(Input { data, pos: 0 })),
            ..self.clone()
        }
    }
}

/// What the process wrote.
#[derive(Debug, Default)]
pub(crate) struct Out {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub log: Vec<u8>,
}

/// The state a subshell copies and gets back.
struct Saved {
    arg0: String,
    bash: bool,
    in_condition: u32,
    vars: HashMap<String, String>,
    exported: HashSet<String>,
    args: Vec<String>,
    funcs: HashMap<String, Rc<Compound>>,
    opts: Opts,
    cwd: String,
    dirs: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Opts {
    pub errexit: bool,
    pub xtrace: bool,
    pub nounset: bool,
    pub pipefail: bool,
}

/// One shell process.
pub(crate) struct Shell<'a> {
    pub fs: &'a mut PodFs,
    pub ctr: &'a Container,
    pub net: &'a mut dyn Network,
    pub vars: HashMap<String, String>,
    pub exported: HashSet<String>,
    pub args: Vec<String>,
    pub arg0: String,
    pub funcs: HashMap<String, Rc<Compound>>,
    pub opts: Opts,
    /// bash rather than a POSIX sh (a missing `source` file is not fatal, `pushd` exists).
    pub bash: bool,
    pub cwd: String,
    pub dirs: Vec<String>,
    pub status: i32,
    pub sleep_ms: i64,
    /// Command substitutions run so far.
    pub substitutions: u64,
    /// Random draws so far (keys, serials), for a generator seeded by the container's identity.
    pub draws: u64,
    steps: u64,
    depth: usize,
    /// Inside a condition (`if`, `while`, `&&`, `!`): `set -e` does not apply.
    pub in_condition: u32,
    pub out: Out,
    pub captures: Vec<Vec<u8>>,
    /// The descriptors commands inherit (`exec 2>&1` changes them).
    pub base: Io,
}

impl<'a> Shell<'a> {
    pub fn new(fs: &'a mut PodFs, ctr: &'a Container, net: &'a mut dyn Network, stdin: &[u8]) -> Self {
        let mut vars: HashMap<String, String> = ctr.env.clone().into_iter().collect();
        let exported: HashSet<String> = vars.keys().cloned().collect();
        vars.entry("PATH".into())
            .or_insert_with(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
        vars.entry("HOME".into()).or_insert_with(|| "/root".into());
        vars.entry("IFS".into()).or_insert_with(|| " \t\n".into());
        if !ctr.hostname.is_empty() {
            vars.entry("HOSTNAME".into())
                .or_insert_with(|| ctr.hostname.clone());
        }
        let cwd = super::fs::normalize("/", if ctr.workdir.is_empty() { "/" } else { &ctr.workdir });
        Shell {
            fs,
            ctr,
            net,
            vars,
            exported,
            args: Vec::new(),
            arg0: "sh".into(),
            funcs: HashMap::new(),
            opts: Opts::default(),
            bash: false,
            cwd,
            dirs: Vec::new(),
            status: 0,
            sleep_ms: 0,
            substitutions: 0,
            draws: 0,
            steps: 0,
            depth: 0,
            in_condition: 0,
            out: Out::default(),
            captures: Vec::new(),
            base: Io {
                input: Rc::new(RefCell::new(Input {
                    data: stdin.to_vec(),
                    pos: 0,
                })),
                out: Sink::Out,
                err: Sink::Err,
            },
        }
    }

    // ------------------------------------------------------------------ output

    /// Writes `data` to `sink`; a file that cannot be written is reported on stderr.
    pub fn write(&mut self, sink: &Sink, data: &[u8]) {
        match sink {
            Sink::Out => {
                self.out.stdout.extend_from_slice(data);
                self.out.log.extend_from_slice(data);
            }
            Sink::Err => {
                self.out.stderr.extend_from_slice(data);
                self.out.log.extend_from_slice(data);
            }
            Sink::Null => {}
            Sink::File(path) => {
                let path = path.clone();
                if let Err(e) = self.write_file(&path, data, true) {
                    let msg = format!("{}: {e}\n", self.arg0);
                    self.write(&Sink::Err, msg.as_bytes());
                }
            }
            Sink::Capture(i) => {
                if let Some(c) = self.captures.get_mut(*i) {
                    c.extend_from_slice(data);
                }
            }
        }
    }

    /// A message on the command's standard error.
    pub fn eprint(&mut self, io: &Io, msg: impl AsRef<str>) {
        let err = io.err.clone();
        self.write(&err, msg.as_ref().as_bytes());
    }

    /// Text on the command's standard output.
    pub fn print(&mut self, io: &Io, text: impl AsRef<[u8]>) {
        let out = io.out.clone();
        self.write(&out, text.as_ref());
    }

    /// Runs `f` with its standard output captured, returning what it wrote.
    pub fn capture(&mut self, io: &Io, f: impl FnOnce(&mut Self, &Io) -> Flow) -> (Vec<u8>, Flow) {
        self.captures.push(Vec::new());
        let idx = self.captures.len() - 1;
        let inner = Io {
            out: Sink::Capture(idx),
            ..io.clone()
        };
        let flow = f(self, &inner);
        let data = self.captures.pop().unwrap_or_default();
        (data, flow)
    }

    // ------------------------------------------------------------------ state

    fn save(&self) -> Saved {
        Saved {
            arg0: self.arg0.clone(),
            bash: self.bash,
            in_condition: self.in_condition,
            vars: self.vars.clone(),
            exported: self.exported.clone(),
            args: self.args.clone(),
            funcs: self.funcs.clone(),
            opts: self.opts,
            cwd: self.cwd.clone(),
            dirs: self.dirs.clone(),
        }
    }

    fn restore(&mut self, s: Saved) {
        self.arg0 = s.arg0;
        self.bash = s.bash;
        self.in_condition = s.in_condition;
        self.vars = s.vars;
        self.exported = s.exported;
        self.args = s.args;
        self.funcs = s.funcs;
        self.opts = s.opts;
        self.cwd = s.cwd;
        self.dirs = s.dirs;
    }

    /// Runs `f` as a subshell: what it changes in the shell's state is undone; `exit` ends only it.
    pub fn subshell(&mut self, f: impl FnOnce(&mut Self) -> Flow) -> Flow {
        if self.depth >= MAX_DEPTH {
            return self.fatal("subshells nested too deeply", 2);
        }
        let saved = self.save();
        self.depth += 1;
        let flow = f(self);
        self.depth -= 1;
        self.restore(saved);
        match flow {
            Flow::Exit(n) | Flow::Return(n) => {
                self.status = n;
                Flow::Next
            }
            Flow::Break(_) | Flow::Continue(_) => Flow::Next,
            other => other,
        }
    }

    /// A shell error that ends the process with `code`.
    pub fn fatal(&mut self, msg: &str, code: i32) -> Flow {
        let line = format!("{}: {msg}\n", self.arg0);
        self.write(&Sink::Err, line.as_bytes());
        Flow::Exit(code)
    }

    pub fn var(&self, name: &str) -> Option<String> {
        match name {
            "?" => Some(self.status.to_string()),
            "#" => Some(self.args.len().to_string()),
            "$" => Some("1".into()),
            "!" => Some(String::new()),
            "-" => Some(String::new()),
            "0" => Some(self.arg0.clone()),
            "PWD" => Some(self.cwd.clone()),
            n if n.chars().all(|c| c.is_ascii_digit()) => {
                let i: usize = n.parse().ok()?;
                self.args.get(i.checked_sub(1)?).cloned()
            }
            n => self.vars.get(n).cloned(),
        }
    }

    pub fn set_var(&mut self, name: &str, value: String) {
        if name == "PWD" {
            self.cwd = value.clone();
        }
        self.vars.insert(name.to_string(), value);
    }

    /// Exported variables, as a program's environment.
    pub fn environment(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .exported
            .iter()
            .filter_map(|k| self.vars.get(k).map(|v| (k.clone(), v.clone())))
            .collect();
        env.sort();
        env
    }

    // ------------------------------------------------------------------ lists

    /// Runs a parsed script.
    pub fn run_list(&mut self, list: &List) -> Flow {
        for item in list {
            let flow = if item.background {
                self.background(&item.and_or)
            } else {
                self.and_or(&item.and_or)
            };
            if !matches!(flow, Flow::Next) {
                return flow;
            }
        }
        Flow::Next
    }

    /// A job started with `&`: it runs at once, in a subshell, and does not hold the script up
    /// (its `sleep`s do not count, a long-running program in it just runs).
    fn background(&mut self, ao: &AndOr) -> Flow {
        let sleep = self.sleep_ms;
        let flow = self.subshell(|sh| sh.and_or(ao));
        self.sleep_ms = sleep;
        self.status = 0;
        match flow {
            Flow::Runs(_) | Flow::Next => Flow::Next,
            other => other,
        }
    }

    fn and_or(&mut self, ao: &AndOr) -> Flow {
        let last = ao.rest.len();
        let guarded = |sh: &mut Self, p: &Pipeline, is_last: bool| -> Flow {
            if is_last {
                sh.pipeline(p)
            } else {
                sh.in_condition += 1;
                let f = sh.pipeline(p);
                sh.in_condition -= 1;
                f
            }
        };
        let flow = guarded(self, &ao.first, last == 0);
        if !matches!(flow, Flow::Next) {
            return flow;
        }
        let mut last_ran = last == 0 && !ao.first.negate;
        for (i, (op, p)) in ao.rest.iter().enumerate() {
            let run = match op {
                Op::And => self.status == 0,
                Op::Or => self.status != 0,
            };
            if !run {
                continue;
            }
            let flow = guarded(self, p, i + 1 == last);
            if !matches!(flow, Flow::Next) {
                return flow;
            }
            last_ran = i + 1 == last && !p.negate;
        }
        // `set -e` ignores a failure in an `&&`/`||` list unless it is the list's last command,
        // and a failure of a pipeline negated with `!`.
        if last_ran {
            self.check_errexit()
        } else {
            Flow::Next
        }
    }

    /// `set -e`: a failed command outside a condition ends the shell.
    pub fn check_errexit(&mut self) -> Flow {
        if self.opts.errexit && self.in_condition == 0 && self.status != 0 {
            Flow::Exit(self.status)
        } else {
            Flow::Next
        }
    }

    fn pipeline(&mut self, p: &Pipeline) -> Flow {
        if p.negate {
            self.in_condition += 1;
        }
        let flow = if p.cmds.len() == 1 {
            let io = self.base.clone();
            self.command(&p.cmds[0], &io)
        } else {
            self.stages(&p.cmds)
        };
        if p.negate {
            self.in_condition -= 1;
            if matches!(flow, Flow::Next) {
                self.status = i32::from(self.status == 0);
            }
        }
        flow
    }

    /// The stages of a pipeline, each in a subshell, one after the other.
    fn stages(&mut self, cmds: &[Command]) -> Flow {
        let base = self.base.clone();
        let mut input: Option<Vec<u8>> = None;
        let mut failed = 0;
        for (i, c) in cmds.iter().enumerate() {
            let io = match input.take() {
                Some(data) => base.with_input(data),
                None => base.clone(),
            };
            if i + 1 == cmds.len() {
                let flow = self.subshell(|sh| sh.command(c, &io));
                if self.opts.pipefail && self.status == 0 {
                    self.status = failed;
                }
                return flow;
            }
            let (data, flow) = self.capture(&io, |sh, io| sh.subshell(|sh| sh.command(c, io)));
            if let Flow::Runs(r) = flow {
                return Flow::Runs(r);
            }
            if self.status != 0 {
                failed = self.status;
            }
            input = Some(data);
        }
        Flow::Next
    }

    pub fn command(&mut self, c: &Command, io: &Io) -> Flow {
        match c {
            Command::Simple(s) => self.simple(s, io),
            Command::FuncDef(name, body) => {
                self.funcs.insert(name.clone(), body.clone());
                self.status = 0;
                Flow::Next
            }
            Command::Compound(comp, redirs) => {
                let io = match self.redirect(redirs, io) {
                    Ok(io) => io,
                    Err(flow) => return flow,
                };
                self.compound(comp, &io)
            }
        }
    }

    /// One step of the budget; past it, the process is taken to run forever.
    pub fn step(&mut self) -> Result<(), Flow> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(Flow::Runs(Running::Waiting(format!(
                "still running after {MAX_STEPS} commands"
            ))));
        }
        Ok(())
    }

    fn simple(&mut self, s: &Simple, io: &Io) -> Flow {
        if let Err(f) = self.step() {
            return f;
        }
        let substitutions = self.substitutions;
        let mut argv = Vec::new();
        for w in &s.words {
            match self.expand_fields(w) {
                Ok(fields) => argv.extend(fields),
                Err(f) => return f,
            }
        }
        let mut assigns = Vec::new();
        for (name, w) in &s.assigns {
            match self.expand_string(w) {
                Ok(v) => assigns.push((name.clone(), v)),
                Err(f) => return f,
            }
        }
        // A command of assignments alone has the status of its last command substitution.
        let subst_status = if self.substitutions == substitutions {
            0
        } else {
            self.status
        };
        let io = match self.redirect(&s.redirs, io) {
            Ok(io) => io,
            Err(flow) => return flow,
        };
        if argv.is_empty() {
            for (n, v) in assigns {
                self.set_var(&n, v);
            }
            self.status = subst_status;
            return Flow::Next;
        }
        if self.opts.xtrace {
            self.trace(&assigns, &argv);
        }
        self.invoke(&argv, assigns, &io)
    }

    /// `set -x`: the command on stderr, quoted as bash or as a POSIX sh (dash, busybox) does.
    fn trace(&mut self, assigns: &[(String, String)], argv: &[String]) {
        let bash = self.bash;
        let quote = |s: &str| {
            let plain = if bash {
                s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+%@".contains(c))
            } else {
                !s.chars()
                    .any(|c| c.is_whitespace() || "'\"$&|;<>()*?`\\{}~#".contains(c))
            };
            if !s.is_empty() && plain {
                s.to_string()
            } else {
                format!("'{}'", s.replace('\'', "'\\''"))
            }
        };
        let mut line = String::from("+");
        for (n, v) in assigns {
            line.push(' ');
            line.push_str(&format!("{n}={}", quote(v)));
        }
        for a in argv {
            line.push(' ');
            line.push_str(&quote(a));
        }
        line.push('\n');
        let err = self.base.err.clone();
        self.write(&err, line.as_bytes());
    }

    /// Runs a command line: a function, a builtin or a program, with `assigns` in its environment.
    pub fn invoke(&mut self, argv: &[String], assigns: Vec<(String, String)>, io: &Io) -> Flow {
        let name = argv[0].as_str();
        if name == "exec" {
            for (n, v) in assigns {
                self.set_var(&n, v);
                self.exported.insert(n);
            }
            return self.exec_builtin(&argv[1..], io);
        }
        let saved: Vec<(String, Option<String>, bool)> = assigns
            .iter()
            .map(|(n, _)| (n.clone(), self.vars.get(n).cloned(), self.exported.contains(n)))
            .collect();
        for (n, v) in assigns {
            self.set_var(&n, v);
            self.exported.insert(n);
        }
        let flow = self.dispatch(argv, io);
        for (n, old, was_exported) in saved {
            match old {
                Some(v) => {
                    self.vars.insert(n.clone(), v);
                }
                None => {
                    self.vars.remove(&n);
                }
            }
            if !was_exported {
                self.exported.remove(&n);
            }
        }
        flow
    }

    fn dispatch(&mut self, argv: &[String], io: &Io) -> Flow {
        let name = argv[0].as_str();
        if let Some(body) = self.funcs.get(name).cloned() {
            return self.call_function(&body, argv, io);
        }
        if let Some(f) = super::builtins::lookup(name) {
            return f(self, io, argv);
        }
        match self.run_program(argv, io) {
            Ok(st) => {
                self.status = st;
                Flow::Next
            }
            Err(flow) => flow,
        }
    }

    fn call_function(&mut self, body: &Rc<Compound>, argv: &[String], io: &Io) -> Flow {
        if self.depth >= MAX_DEPTH {
            return self.fatal("functions nested too deeply", 2);
        }
        let args = std::mem::replace(&mut self.args, argv[1..].to_vec());
        self.depth += 1;
        let flow = self.compound(body, io);
        self.depth -= 1;
        self.args = args;
        match flow {
            Flow::Return(n) => {
                self.status = n;
                Flow::Next
            }
            other => other,
        }
    }

    /// `exec`: redirections alone change the shell's own descriptors; a command replaces it.
    fn exec_builtin(&mut self, argv: &[String], io: &Io) -> Flow {
        if argv.is_empty() {
            self.base = io.clone();
            self.status = 0;
            return Flow::Next;
        }
        match self.dispatch(argv, io) {
            Flow::Next => Flow::Exit(self.status),
            other => other,
        }
    }

    /// A program (not a builtin or function): a script in the filesystem, one kudo-sim
    /// implements, a long-running one it stands in for, or one it does not simulate (127).
    pub fn run_program(&mut self, argv: &[String], io: &Io) -> Result<i32, Flow> {
        let name = argv[0].as_str();
        let base = super::fs::basename(name);
        if name.contains('/') {
            let path = self.abs(name);
            if let Some(script) = self.read_file(&path)
                && super::programs::shells::is_script(&script)
            {
                return super::programs::shells::run_script_file(self, io, &path, &script, &argv[1..]);
            }
        }
        if let Some(p) = super::programs::lookup(base) {
            return p(self, io, argv);
        }
        if let Some(kind) = standins::program(base, &argv[1..]) {
            return Err(Flow::Runs(Running::Serving(standins::serving(
                self.ctr, kind, name,
            ))));
        }
        match self.not_simulated(name, io) {
            Flow::Exit(n) => Ok(n),
            other => Err(other),
        }
    }

    /// A program kudo-sim cannot run: in a long-running container of an image it knows, the
    /// image's server from here on; else exit status 127 with the reason on stderr.
    pub fn not_simulated(&mut self, name: &str, io: &Io) -> Flow {
        if let Some(standin) = standins::for_image_program(self.ctr, name) {
            return Flow::Runs(Running::Serving(standin));
        }
        let path = self.abs(name);
        let reason = match (name.contains('/'), self.unprovided_volume(&path)) {
            (true, Some((kind, volume))) => format!(
                "a file of the {kind} volume {volume:?}; kudo-sim does not provide the files of {kind} volumes"
            ),
            _ => standins::refusal_in(&self.ctr.image, super::fs::basename(name))
                .unwrap_or("kudo-sim does not implement this program (docs/cli.md lists those it runs)")
                .to_string(),
        };
        self.eprint(io, format!("kudo-sim: {name}: not simulated: {reason}\n"));
        Flow::Exit(127)
    }

    // ------------------------------------------------------------------ compounds

    fn compound(&mut self, c: &Compound, io: &Io) -> Flow {
        let saved_base = std::mem::replace(&mut self.base, io.clone());
        let flow = self.compound_body(c);
        self.base = saved_base;
        flow
    }

    fn compound_body(&mut self, c: &Compound) -> Flow {
        match c {
            Compound::Brace(list) => self.run_list(list),
            Compound::Subshell(list) => self.subshell(|sh| sh.run_list(list)),
            Compound::If { branches, otherwise } => self.if_clause(branches, otherwise.as_ref()),
            Compound::Loop { until, cond, body } => self.loop_clause(*until, cond, body),
            Compound::For { var, words, body } => self.for_clause(var, words.as_ref(), body),
            Compound::Case { word, arms } => self.case_clause(word, arms),
            Compound::Cond(words) => {
                let io = self.base.clone();
                super::builtins::double_bracket(self, &io, words)
            }
            Compound::Arith(expr) => match self.arith(expr) {
                Ok(n) => {
                    self.status = i32::from(n == 0);
                    Flow::Next
                }
                Err(f) => f,
            },
        }
    }

    /// Runs a condition list: `set -e` does not apply to it.
    fn condition(&mut self, list: &List) -> Result<bool, Flow> {
        self.in_condition += 1;
        let flow = self.run_list(list);
        self.in_condition -= 1;
        match flow {
            Flow::Next => Ok(self.status == 0),
            other => Err(other),
        }
    }

    fn if_clause(&mut self, branches: &[(List, List)], otherwise: Option<&List>) -> Flow {
        for (cond, body) in branches {
            match self.condition(cond) {
                Ok(true) => return self.run_list(body),
                Ok(false) => {}
                Err(f) => return f,
            }
        }
        self.status = 0;
        match otherwise {
            Some(list) => self.run_list(list),
            None => Flow::Next,
        }
    }

    /// The body's outcome for a loop: `None` to go on, `Some` to leave with that flow.
    fn loop_step(&mut self, flow: Flow) -> Option<Flow> {
        match flow {
            Flow::Next => None,
            Flow::Break(n) if n > 1 => Some(Flow::Break(n - 1)),
            Flow::Break(_) => Some(Flow::Next),
            Flow::Continue(n) if n > 1 => Some(Flow::Continue(n - 1)),
            Flow::Continue(_) => None,
            other => Some(other),
        }
    }

    fn loop_clause(&mut self, until: bool, cond: &List, body: &List) -> Flow {
        let mut last = 0;
        loop {
            if let Err(f) = self.step() {
                return f;
            }
            match self.condition(cond) {
                Ok(ok) if ok == until => break,
                Ok(_) => {}
                Err(f) => return f,
            }
            let flow = self.run_list(body);
            last = self.status;
            if let Some(f) = self.loop_step(flow) {
                return f;
            }
        }
        self.status = last;
        Flow::Next
    }

    fn for_clause(&mut self, var: &str, words: Option<&Vec<Word>>, body: &List) -> Flow {
        let items = match words {
            None => self.args.clone(),
            Some(words) => {
                let mut items = Vec::new();
                for w in words {
                    match self.expand_fields(w) {
                        Ok(f) => items.extend(f),
                        Err(f) => return f,
                    }
                }
                items
            }
        };
        self.status = 0;
        for item in items {
            self.set_var(var, item);
            let flow = self.run_list(body);
            if let Some(f) = self.loop_step(flow) {
                return f;
            }
        }
        Flow::Next
    }

    fn case_clause(&mut self, word: &Word, arms: &[(Vec<Word>, List)]) -> Flow {
        let subject = match self.expand_string(word) {
            Ok(s) => s,
            Err(f) => return f,
        };
        for (patterns, body) in arms {
            for p in patterns {
                let pat = match self.expand_pattern(p) {
                    Ok(p) => p,
                    Err(f) => return f,
                };
                if super::pattern::matches(&pat, &subject) {
                    self.status = 0;
                    return self.run_list(body);
                }
            }
        }
        self.status = 0;
        Flow::Next
    }

    // ------------------------------------------------------------------ redirections

    /// The descriptors of a command after its redirections (files are created or truncated now).
    pub fn redirect(&mut self, redirs: &[Redir], io: &Io) -> Result<Io, Flow> {
        let mut io = io.clone();
        for r in redirs {
            let target = self.expand_string(&r.target)?;
            let fd = r.fd.unwrap_or(1);
            match r.kind {
                RedirKind::In => {
                    let path = self.abs(&target);
                    match self.read_file(&path) {
                        Some(data) => io = io.with_input(data),
                        None => return Err(self.redirect_failed(&io, &target, "No such file")),
                    }
                }
                RedirKind::HereString => io = io.with_input(format!("{target}\n").into_bytes()),
                RedirKind::Dup => {
                    let sink = match target.as_str() {
                        "1" => io.out.clone(),
                        "2" => io.err.clone(),
                        "-" => Sink::Null,
                        "0" if fd == 0 => continue,
                        _ => return Err(self.redirect_failed(&io, &target, "Bad file descriptor")),
                    };
                    self.set_fd(&mut io, fd, sink);
                }
                RedirKind::Out | RedirKind::Append | RedirKind::OutErr | RedirKind::AppendErr => {
                    let append = matches!(r.kind, RedirKind::Append | RedirKind::AppendErr);
                    let sink = self.file_sink(&target, append, &io)?;
                    if matches!(r.kind, RedirKind::OutErr | RedirKind::AppendErr) {
                        io.out = sink.clone();
                        io.err = sink;
                    } else {
                        self.set_fd(&mut io, fd, sink);
                    }
                }
            }
        }
        Ok(io)
    }

    fn set_fd(&mut self, io: &mut Io, fd: u32, sink: Sink) {
        match fd {
            1 => io.out = sink,
            2 => io.err = sink,
            _ => {}
        }
    }

    fn file_sink(&mut self, target: &str, append: bool, io: &Io) -> Result<Sink, Flow> {
        if target == "/dev/null" {
            return Ok(Sink::Null);
        }
        if target == "/dev/stderr" {
            return Ok(io.err.clone());
        }
        if target == "/dev/stdout" {
            return Ok(io.out.clone());
        }
        let path = self.abs(target);
        match self.write_file(&path, b"", append) {
            Ok(()) => Ok(Sink::File(path)),
            Err(e) => {
                let msg = format!("{}: {e}\n", self.arg0);
                self.eprint(io, msg);
                self.status = if self.bash { 1 } else { 2 };
                Err(Flow::Next)
            }
        }
    }

    fn redirect_failed(&mut self, io: &Io, target: &str, why: &str) -> Flow {
        self.eprint(io, format!("{}: {target}: {why}\n", self.arg0));
        self.status = if self.bash { 1 } else { 2 };
        Flow::Next
    }

    /// `sleep`: adds to the simulated time; past the hour the simulator follows a process, it is
    /// taken to run until stopped.
    pub fn sleep(&mut self, ms: i64) -> Result<(), Flow> {
        self.sleep_ms = self.sleep_ms.saturating_add(ms);
        if self.sleep_ms > super::MAX_SLEEP_MS {
            return Err(Flow::Runs(Running::Waiting(
                "still running after an hour of simulated time".into(),
            )));
        }
        Ok(())
    }

    /// The simulated time now: the container's start plus its sleeps so far, in ms since the epoch.
    pub fn now_ms(&self) -> i64 {
        self.ctr.started_ms.saturating_add(self.sleep_ms)
    }
}
