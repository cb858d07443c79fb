//! Shell builtins: what changes the shell itself (`cd`, `set`, `export`, `read`, `source`, …)
//! and the usual builtin versions of programs (`echo`, `printf`, `test`, `true`).

use super::ast::Word;
use super::exec::{Flow, Io, Shell};

pub(crate) type Builtin = fn(&mut Shell<'_>, &Io, &[String]) -> Flow;

/// The builtin called `name`, if there is one.
pub(crate) fn lookup(name: &str) -> Option<Builtin> {
    Some(match name {
        ":" | "true" => |sh, _, _| done(sh, 0),
        "false" => |sh, _, _| done(sh, 1),
        "exit" => exit,
        "return" => ret,
        "break" => |sh, io, a| loop_control(sh, io, a, true),
        "continue" => |sh, io, a| loop_control(sh, io, a, false),
        "set" => set,
        "shift" => shift,
        "export" | "readonly" => export,
        "local" => local,
        "unset" => unset,
        "cd" => cd,
        "pwd" => |sh, io, _| {
            let cwd = format!("{}\n", sh.cwd);
            sh.print(io, cwd);
            done(sh, 0)
        },
        "echo" | "printf" | "sleep" | "kill" => |sh, io, a| program(sh, io, a),
        "test" | "[" => test,
        "read" => read,
        "source" | "." => source,
        "eval" => eval,
        "wait" | "hash" => |sh, _, _| done(sh, 0),
        "umask" => |sh, io, a| {
            if a.len() == 1 {
                sh.print(io, "0022\n");
            }
            done(sh, 0)
        },
        "pushd" => pushd,
        "popd" => popd,
        "dirs" => |sh, io, _| {
            print_dirs(sh, io);
            done(sh, 0)
        },
        "type" => type_builtin,
        "command" => command,
        _ => return None,
    })
}

/// Builtins that also exist as programs (`/bin/echo`): a container command line can name them.
pub(crate) const ALSO_PROGRAMS: [&str; 7] = ["true", "false", "echo", "printf", "test", "[", "pwd"];

fn done(sh: &mut Shell<'_>, status: i32) -> Flow {
    sh.status = status;
    Flow::Next
}

/// The program of the same name (`echo`, `printf`, `sleep`), run as a builtin.
fn program(sh: &mut Shell<'_>, io: &Io, argv: &[String]) -> Flow {
    match super::programs::lookup(&argv[0]) {
        Some(p) => match p(sh, io, argv) {
            Ok(st) => done(sh, st),
            Err(f) => f,
        },
        None => done(sh, 127),
    }
}

fn number_arg(
    sh: &mut Shell<'_>,
    io: &Io,
    name: &str,
    a: Option<&String>,
    default: i32,
) -> Result<i32, Flow> {
    match a {
        None => Ok(default),
        Some(s) => s.parse::<i64>().map(|n| (n & 0xff) as i32).map_err(|_| {
            sh.eprint(io, format!("{}: {name}: Illegal number: {s}\n", sh.arg0));
            Flow::Exit(2)
        }),
    }
}

fn exit(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Flow {
    let st = sh.status;
    match number_arg(sh, io, "exit", a.get(1), st) {
        Ok(n) => Flow::Exit(n),
        Err(f) => f,
    }
}

fn ret(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Flow {
    let st = sh.status;
    match number_arg(sh, io, "return", a.get(1), st) {
        Ok(n) => Flow::Return(n),
        Err(f) => f,
    }
}

fn loop_control(sh: &mut Shell<'_>, io: &Io, a: &[String], is_break: bool) -> Flow {
    let n = match number_arg(sh, io, &a[0], a.get(1), 1) {
        Ok(n) => n.max(1) as u32,
        Err(f) => return f,
    };
    sh.status = 0;
    if is_break {
        Flow::Break(n)
    } else {
        Flow::Continue(n)
    }
}

fn set(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Flow {
    let mut i = 1;
    while i < a.len() {
        let arg = &a[i];
        if arg == "--" {
            sh.args = a[i + 1..].to_vec();
            return done(sh, 0);
        }
        let (on, flags) = match arg.chars().next() {
            Some('-') => (true, &arg[1..]),
            Some('+') => (false, &arg[1..]),
            _ => {
                sh.args = a[i..].to_vec();
                return done(sh, 0);
            }
        };
        if flags == "o" {
            i += 1;
            let name = a.get(i).map(String::as_str).unwrap_or("");
            let flag = match name {
                "errexit" => 'e',
                "xtrace" => 'x',
                "nounset" => 'u',
                "pipefail" => 'p',
                other => return unsupported_option(sh, io, &format!("-o {other}")),
            };
            set_flag(sh, flag, on);
        } else {
            for f in flags.chars() {
                if !"exuv".contains(f) {
                    return unsupported_option(sh, io, &format!("{}{f}", if on { '-' } else { '+' }));
                }
                set_flag(sh, f, on);
            }
        }
        i += 1;
    }
    done(sh, 0)
}

fn set_flag(sh: &mut Shell<'_>, f: char, on: bool) {
    match f {
        'e' => sh.opts.errexit = on,
        'x' => sh.opts.xtrace = on,
        'u' => sh.opts.nounset = on,
        'p' => sh.opts.pipefail = on,
        _ => {}
    }
}

fn unsupported_option(sh: &mut Shell<'_>, io: &Io, opt: &str) -> Flow {
    sh.eprint(io, format!("kudo-sim: set {opt}: not simulated\n"));
    done(sh, 127)
}

fn shift(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Flow {
    let n = match number_arg(sh, io, "shift", a.get(1), 1) {
        Ok(n) => n as usize,
        Err(f) => return f,
    };
    if n > sh.args.len() {
        sh.eprint(io, format!("{}: shift: can't shift that many\n", sh.arg0));
        return done(sh, 1);
    }
    sh.args.drain(..n);
    done(sh, 0)
}

fn export(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Flow {
    if a.len() == 1 || a[1] == "-p" {
        for (k, v) in sh.environment() {
            sh.print(io, format!("export {k}='{}'\n", v.replace('\'', "'\\''")));
        }
        return done(sh, 0);
    }
    for arg in &a[1..] {
        if let Some((k, v)) = arg.split_once('=') {
            sh.set_var(k, v.to_string());
        }
        let name = arg.split('=').next().unwrap_or(arg);
        sh.exported.insert(name.to_string());
    }
    done(sh, 0)
}

fn local(sh: &mut Shell<'_>, _io: &Io, a: &[String]) -> Flow {
    for arg in &a[1..] {
        let (k, v) = arg.split_once('=').unwrap_or((arg, ""));
        if !sh.vars.contains_key(k) || arg.contains('=') {
            sh.set_var(k, v.to_string());
        }
    }
    done(sh, 0)
}

fn unset(sh: &mut Shell<'_>, _io: &Io, a: &[String]) -> Flow {
    let funcs = a.get(1).is_some_and(|f| f == "-f");
    for name in a[1..].iter().filter(|n| !n.starts_with('-')) {
        if funcs {
            sh.funcs.remove(name);
        } else {
            sh.vars.remove(name);
            sh.exported.remove(name);
        }
    }
    done(sh, 0)
}

fn cd(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Flow {
    let home = sh.var("HOME").unwrap_or_else(|| "/".into());
    let arg = a.get(1).cloned().unwrap_or(home);
    let target = if arg == "-" {
        sh.var("OLDPWD").unwrap_or_else(|| sh.cwd.clone())
    } else {
        sh.abs(&arg)
    };
    if !sh.is_dir(&target) {
        sh.eprint(io, format!("{}: cd: can't cd to {arg}\n", sh.arg0));
        return done(sh, if sh.bash { 1 } else { 2 });
    }
    let old = std::mem::replace(&mut sh.cwd, target);
    sh.set_var("OLDPWD", old);
    done(sh, 0)
}

fn print_dirs(sh: &mut Shell<'_>, io: &Io) {
    let mut all = vec![sh.cwd.clone()];
    all.extend(sh.dirs.iter().rev().cloned());
    let line = format!("{}\n", all.join(" "));
    sh.print(io, line);
}

fn pushd(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Flow {
    if !sh.bash {
        return done(sh, 127);
    }
    let Some(dir) = a.get(1) else {
        sh.eprint(io, "bash: pushd: no other directory\n");
        return done(sh, 1);
    };
    let target = sh.abs(dir);
    if !sh.is_dir(&target) {
        sh.eprint(io, format!("bash: pushd: {dir}: No such file or directory\n"));
        return done(sh, 1);
    }
    let old = std::mem::replace(&mut sh.cwd, target);
    sh.dirs.push(old);
    print_dirs(sh, io);
    done(sh, 0)
}

fn popd(sh: &mut Shell<'_>, io: &Io, _a: &[String]) -> Flow {
    match sh.dirs.pop() {
        Some(d) => {
            sh.cwd = d;
            print_dirs(sh, io);
            done(sh, 0)
        }
        None => {
            sh.eprint(io, "bash: popd: directory stack empty\n");
            done(sh, 1)
        }
    }
}

fn type_builtin(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Flow {
    let mut st = 0;
    for name in &a[1..] {
        let line = if sh.funcs.contains_key(name) {
            format!("{name} is a function\n")
        } else if lookup(name).is_some() {
            format!("{name} is a shell builtin\n")
        } else if super::programs::lookup(name).is_some() {
            format!("{name} is /usr/bin/{name}\n")
        } else {
            st = 1;
            sh.eprint(io, format!("{}: type: {name}: not found\n", sh.arg0));
            continue;
        };
        sh.print(io, line);
    }
    done(sh, st)
}

/// `command [-v] NAME …`: runs NAME bypassing functions, or says where it is.
fn command(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Flow {
    if a.get(1).is_some_and(|f| f == "-v" || f == "-V") {
        let mut st = 0;
        for name in &a[2..] {
            if lookup(name).is_some() || sh.funcs.contains_key(name) {
                sh.print(io, format!("{name}\n"));
            } else if super::programs::lookup(name).is_some() {
                sh.print(io, format!("/usr/bin/{name}\n"));
            } else {
                st = 1;
            }
        }
        return done(sh, st);
    }
    if a.len() < 2 {
        return done(sh, 0);
    }
    if let Some(b) = lookup(&a[1]) {
        return b(sh, io, &a[1..]);
    }
    match sh.run_program(&a[1..], io) {
        Ok(st) => done(sh, st),
        Err(f) => f,
    }
}

fn read(sh: &mut Shell<'_>, _io: &Io, a: &[String]) -> Flow {
    let mut raw = false;
    let mut names = Vec::new();
    let mut i = 1;
    while i < a.len() {
        match a[i].as_str() {
            "-r" => raw = true,
            "-p" | "-t" | "-u" | "-n" | "-d" => i += 1,
            n => names.push(n.to_string()),
        }
        i += 1;
    }
    if names.is_empty() {
        names.push("REPLY".into());
    }
    let mut line = Vec::new();
    let mut complete = false;
    loop {
        let next = _io.input.borrow_mut().line();
        let Some((mut l, nl)) = next else { break };
        complete = nl;
        if !raw && l.last() == Some(&b'\\') && nl {
            l.pop();
            line.extend(l);
            continue;
        }
        line.extend(l);
        break;
    }
    let text = String::from_utf8_lossy(&line).into_owned();
    let text = if raw {
        text
    } else {
        super::pattern::unescape(&text)
    };
    let ifs = sh.var("IFS").unwrap_or_else(|| " \t\n".into());
    let values = split_read(&text, &ifs, names.len());
    for (k, name) in names.iter().enumerate() {
        sh.set_var(name, values.get(k).cloned().unwrap_or_default());
    }
    done(sh, i32::from(!complete))
}

/// `read`'s splitting: leading and trailing IFS blanks trimmed, `n` fields, the last keeps the
/// rest.
fn split_read(text: &str, ifs: &str, n: usize) -> Vec<String> {
    if ifs.is_empty() {
        return vec![text.to_string()];
    }
    let blank = |c: char| ifs.contains(c) && c.is_whitespace();
    let mut rest = text.trim_matches(blank);
    let mut out = Vec::new();
    while out.len() + 1 < n {
        match rest.find(|c: char| ifs.contains(c)) {
            Some(p) => {
                out.push(rest[..p].to_string());
                rest = rest[p..].trim_start_matches(blank);
                if let Some(c) = rest.chars().next()
                    && ifs.contains(c)
                    && !c.is_whitespace()
                {
                    rest = rest[c.len_utf8()..].trim_start_matches(blank);
                }
            }
            None => break,
        }
    }
    out.push(rest.to_string());
    out
}

fn source(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Flow {
    let Some(file) = a.get(1) else {
        sh.eprint(io, format!("{}: {}: filename argument required\n", sh.arg0, a[0]));
        return done(sh, 2);
    };
    let path = sh.abs(file);
    let Some(text) = sh.read_file(&path) else {
        if sh.bash {
            sh.eprint(io, format!("bash: {file}: No such file or directory\n"));
            return done(sh, 1);
        }
        return sh.fatal(&format!("{}: cannot open {file}: No such file", a[0]), 2);
    };
    let text = String::from_utf8_lossy(&text).into_owned();
    run_text(sh, io, &text, &format!("{} {file}", a[0]))
}

fn eval(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Flow {
    let text = a[1..].join(" ");
    run_text(sh, io, &text, "eval")
}

/// Parses and runs `text` in the current shell.
fn run_text(sh: &mut Shell<'_>, io: &Io, text: &str, what: &str) -> Flow {
    match super::parse::parse(text) {
        Ok(list) => {
            let saved = std::mem::replace(&mut sh.base, io.clone());
            let flow = sh.run_list(&list);
            sh.base = saved;
            flow
        }
        Err(e) => {
            let code = match e.kind {
                super::parse::ErrorKind::Syntax => 2,
                super::parse::ErrorKind::Unsupported => 127,
            };
            sh.eprint(io, format!("{}: {what}: {}\n", sh.arg0, parse_message(&e)));
            done(sh, code)
        }
    }
}

/// A parse error as the shell reports it.
pub(crate) fn parse_message(e: &super::parse::ParseError) -> String {
    match e.kind {
        super::parse::ErrorKind::Syntax => format!("Syntax error: {}", e.message),
        super::parse::ErrorKind::Unsupported => {
            format!(
                "kudo-sim does not interpret scripts using {} (not simulated)",
                e.message
            )
        }
    }
}

// ---------------------------------------------------------------------- test / [ / [[

fn test(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Flow {
    let mut args: Vec<String> = a[1..].to_vec();
    if a[0] == "[" {
        if args.last().map(String::as_str) != Some("]") {
            sh.eprint(io, format!("{}: [: missing ]\n", sh.arg0));
            return done(sh, 2);
        }
        args.pop();
    }
    let toks: Vec<Tok> = args.into_iter().map(Tok::plain).collect();
    evaluate(sh, io, &toks, "test")
}

/// An operand of `test` or `[[`: its text, and for `[[` the pattern it is on the right of `==`.
#[derive(Debug, Clone)]
pub(crate) struct Tok {
    text: String,
    pattern: Option<String>,
    /// An operator of `[[` (`&&`, `(`) written unquoted.
    operator: bool,
}

impl Tok {
    fn plain(text: String) -> Tok {
        Tok {
            text,
            pattern: None,
            operator: false,
        }
    }
}

fn evaluate(sh: &mut Shell<'_>, io: &Io, toks: &[Tok], what: &str) -> Flow {
    let mut t = Test {
        sh,
        toks,
        i: 0,
        double: what == "[[",
    };
    let r = if toks.is_empty() { Ok(false) } else { t.or() };
    let end = t.i;
    match r {
        Ok(v) if end == toks.len() => done(sh, i32::from(!v)),
        Ok(_) => {
            sh.eprint(io, format!("{}: {what}: unexpected operator\n", sh.arg0));
            done(sh, 2)
        }
        Err(e) => {
            sh.eprint(io, format!("{}: {what}: {e}\n", sh.arg0));
            done(sh, 2)
        }
    }
}

/// `[[ … ]]`.
pub(crate) fn double_bracket(sh: &mut Shell<'_>, io: &Io, words: &[Word]) -> Flow {
    let mut toks = Vec::new();
    for (k, w) in words.iter().enumerate() {
        if let Some(op) = w
            .literal()
            .filter(|l| ["&&", "||", "(", ")", "!", "<", ">"].contains(l))
        {
            toks.push(Tok {
                text: op.to_string(),
                pattern: None,
                operator: true,
            });
            continue;
        }
        let after_match = k > 0
            && words[k - 1]
                .literal()
                .is_some_and(|l| l == "==" || l == "=" || l == "!=");
        let text = match sh.expand_string(w) {
            Ok(t) => t,
            Err(f) => return f,
        };
        let pattern = if after_match {
            match sh.expand_pattern(w) {
                Ok(p) => Some(p),
                Err(f) => return f,
            }
        } else {
            None
        };
        toks.push(Tok {
            text,
            pattern,
            operator: false,
        });
    }
    evaluate(sh, io, &toks, "[[")
}

struct Test<'s, 'a, 't> {
    sh: &'s mut Shell<'a>,
    toks: &'t [Tok],
    i: usize,
    double: bool,
}

impl Test<'_, '_, '_> {
    fn peek(&self, k: usize) -> Option<&str> {
        self.toks.get(self.i + k).map(|t| t.text.as_str())
    }

    fn is_op(&self, k: usize, op: &str) -> bool {
        self.toks.get(self.i + k).is_some_and(|t| {
            t.text == op && (!self.double || t.operator || !matches!(op, "&&" | "||" | "(" | ")"))
        })
    }

    fn or(&mut self) -> Result<bool, String> {
        let mut v = self.and()?;
        let or = if self.double { "||" } else { "-o" };
        while self.is_op(0, or) {
            self.i += 1;
            let rhs = self.and()?;
            v = v || rhs;
        }
        Ok(v)
    }

    fn and(&mut self) -> Result<bool, String> {
        let mut v = self.not()?;
        let and = if self.double { "&&" } else { "-a" };
        while self.is_op(0, and) {
            self.i += 1;
            let rhs = self.not()?;
            v = v && rhs;
        }
        Ok(v)
    }

    fn not(&mut self) -> Result<bool, String> {
        let remaining = self.toks.len() - self.i;
        if self.is_op(0, "!") && remaining > 1 {
            self.i += 1;
            return Ok(!self.not()?);
        }
        if self.is_op(0, "(") && remaining > 2 {
            self.i += 1;
            let v = self.or()?;
            if !self.is_op(0, ")") {
                return Err("missing )".into());
            }
            self.i += 1;
            return Ok(v);
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<bool, String> {
        let Some(first) = self.peek(0).map(str::to_string) else {
            return Err("argument expected".into());
        };
        if let Some(op) = self.peek(1).map(str::to_string)
            && is_binary(&op, self.double)
            && self.i + 2 < self.toks.len()
        {
            let rhs = self.toks[self.i + 2].clone();
            self.i += 3;
            return self.binary(&first, &op, &rhs);
        }
        if first.starts_with('-') && first.len() == 2 && self.i + 1 < self.toks.len() {
            let arg = self.toks[self.i + 1].text.clone();
            self.i += 2;
            return self.unary(&first, &arg);
        }
        self.i += 1;
        Ok(!first.is_empty())
    }

    fn unary(&mut self, op: &str, arg: &str) -> Result<bool, String> {
        let path = self.sh.abs(arg);
        Ok(match op {
            "-n" => !arg.is_empty(),
            "-z" => arg.is_empty(),
            "-e" | "-a" => self.sh.exists(&path),
            "-f" => self.sh.read_file(&path).is_some() && !self.sh.is_dir(&path),
            "-d" => self.sh.is_dir(&path),
            "-s" => self.sh.read_file(&path).is_some_and(|d| !d.is_empty()) || self.sh.is_dir(&path),
            "-r" | "-w" => self.sh.exists(&path),
            "-x" => self.sh.is_dir(&path) || (self.sh.exists(&path) && self.sh.meta(&path).mode & 0o111 != 0),
            "-L" | "-h" | "-p" | "-S" | "-b" | "-c" | "-t" => false,
            _ => return Err(format!("{op}: unexpected operator")),
        })
    }

    fn binary(&mut self, a: &str, op: &str, rhs: &Tok) -> Result<bool, String> {
        let b = rhs.text.as_str();
        let int = |s: &str| {
            s.trim()
                .parse::<i64>()
                .map_err(|_| format!("Illegal number: {s}"))
        };
        Ok(match op {
            "=" | "==" => match &rhs.pattern {
                Some(p) => super::pattern::matches(p, a),
                None => a == b,
            },
            "!=" => match &rhs.pattern {
                Some(p) => !super::pattern::matches(p, a),
                None => a != b,
            },
            "<" => a < b,
            ">" => a > b,
            "=~" => match regex::Regex::new(b) {
                Ok(re) => re.is_match(a),
                Err(_) => return Err(format!("invalid regular expression {b:?}")),
            },
            "-eq" => int(a)? == int(b)?,
            "-ne" => int(a)? != int(b)?,
            "-lt" => int(a)? < int(b)?,
            "-le" => int(a)? <= int(b)?,
            "-gt" => int(a)? > int(b)?,
            "-ge" => int(a)? >= int(b)?,
            "-nt" | "-ot" | "-ef" => false,
            _ => return Err(format!("{op}: unexpected operator")),
        })
    }
}

fn is_binary(op: &str, double: bool) -> bool {
    matches!(
        op,
        "=" | "==" | "!=" | "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge" | "-nt" | "-ot" | "-ef"
    ) || (double && matches!(op, "<" | ">" | "=~"))
        || (!double && matches!(op, "<" | ">"))
}
