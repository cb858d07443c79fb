//! Text tools: `grep`, `sed` (`s`, `d`, `p`, `q` with line and regex addresses), a small `awk`
//! (rules of patterns and `print`/assignment actions, `BEGIN`/`END`, fields, `NR`, `NF`), and
//! `xargs`.

use regex::Regex;

use super::coreutils::inputs;
use super::{Args, Program};
use crate::shell::exec::{Flow, Io, Shell};

pub(crate) const NAMES: &[&str] = &["grep", "egrep", "fgrep", "sed", "awk", "mawk", "gawk", "xargs"];

pub(crate) fn lookup(name: &str) -> Option<Program> {
    Some(match name {
        "grep" | "egrep" | "fgrep" => grep,
        "sed" => sed,
        "awk" | "mawk" | "gawk" => awk,
        "xargs" => xargs,
        _ => return None,
    })
}

/// A POSIX basic regular expression in the `regex` crate's (extended) syntax.
pub(crate) fn bre_to_ere(bre: &str) -> String {
    let mut out = String::new();
    let mut it = bre.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\\' => match it.next() {
                Some(e @ ('(' | ')' | '{' | '}' | '|' | '+' | '?')) => out.push(e),
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
                None => out.push_str("\\\\"),
            },
            '(' | ')' | '{' | '}' | '|' | '+' | '?' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// POSIX bracket classes (`[[:space:]]`) in the `regex` crate's spelling: the same.
fn compile(pattern: &str, extended: bool, fixed: bool, icase: bool) -> Result<Regex, String> {
    let body = if fixed {
        regex::escape(pattern)
    } else if extended {
        pattern.to_string()
    } else {
        bre_to_ere(pattern)
    };
    let src = if icase { format!("(?i){body}") } else { body };
    Regex::new(&src).map_err(|_| format!("invalid regular expression: {pattern}"))
}

/// The regular expressions of grep's patterns, by its options (`-E`, `-F`, `-w`, `-x`, `-i`).
fn grep_patterns(
    patterns: &[String],
    args: &Args,
    extended: bool,
    fixed: bool,
) -> Result<Vec<Regex>, String> {
    let mut res = Vec::new();
    for p in patterns.iter().flat_map(|p| p.split('\n')) {
        let body = if fixed {
            regex::escape(p)
        } else if extended {
            p.to_string()
        } else {
            bre_to_ere(p)
        };
        let body = if args.has('w') {
            format!("\\b(?:{body})\\b")
        } else {
            body
        };
        let body = if args.has('x') {
            format!("^(?:{body})$")
        } else {
            body
        };
        let src = if args.has('i') {
            format!("(?i){body}")
        } else {
            body
        };
        res.push(Regex::new(&src).map_err(|_| format!("invalid regular expression: {p}"))?);
    }
    Ok(res)
}

fn grep(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, values) = Args::parse(&a[1..], "efmABC");
    let prog = crate::shell::fs::basename(&a[0]);
    let extended = args.has('E') || prog == "egrep";
    let fixed = args.has('F') || prog == "fgrep";
    let mut operands = args.operands.clone();
    let mut patterns: Vec<String> = values
        .iter()
        .filter(|(c, _)| *c == 'e')
        .map(|(_, v)| v.clone())
        .collect();
    if patterns.is_empty() {
        if operands.is_empty() {
            sh.eprint(io, "Usage: grep [OPTION]... PATTERNS [FILE]...\n");
            return Ok(2);
        }
        patterns.push(operands.remove(0));
    }
    let Ok(res) = grep_patterns(&patterns, &args, extended, fixed) else {
        return bad_regex(sh, io);
    };
    let (data, st) = inputs(sh, io, "grep", &operands);
    let mut count = 0;
    let mut out = String::new();
    for (n, line) in super::coreutils::lines(&data).iter().enumerate() {
        if res.iter().any(|r| r.is_match(line)) == args.has('v') {
            continue;
        }
        count += 1;
        if args.has('o') && !args.has('v') {
            for m in res.iter().flat_map(|r| r.find_iter(line)) {
                out.push_str(m.as_str());
                out.push('\n');
            }
        } else if args.has('n') {
            out.push_str(&format!("{}:{line}\n", n + 1));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !args.has('q') {
        sh.print(io, if args.has('c') { format!("{count}\n") } else { out });
    }
    Ok(if st == 2 && count == 0 {
        2
    } else if count > 0 {
        0
    } else {
        1
    })
}

fn bad_regex(sh: &mut Shell<'_>, io: &Io) -> Result<i32, Flow> {
    sh.eprint(io, "grep: invalid regular expression\n");
    Ok(2)
}

// ---------------------------------------------------------------------- sed

#[derive(Debug, Clone)]
enum Addr {
    Line(usize),
    Last,
    Re(Regex),
}

#[derive(Debug, Clone)]
enum SedCmd {
    Subst {
        re: Regex,
        with: String,
        global: bool,
        print: bool,
    },
    Delete,
    Print,
    Quit,
}

#[derive(Debug, Clone)]
struct SedRule {
    from: Option<Addr>,
    to: Option<Addr>,
    negate: bool,
    cmd: SedCmd,
}

/// A sed script being read.
struct SedScript {
    chars: Vec<char>,
    i: usize,
    extended: bool,
}

impl SedScript {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    /// Text up to the unescaped `delim` (consumed); `\delim` is the delimiter itself.
    fn until(&mut self, delim: char) -> Result<String, String> {
        let mut s = String::new();
        while let Some(c) = self.peek() {
            if c == delim {
                self.i += 1;
                return Ok(s);
            }
            if c == '\\'
                && let Some(&n) = self.chars.get(self.i + 1)
            {
                if n != delim {
                    s.push('\\');
                }
                s.push(n);
                self.i += 2;
                continue;
            }
            s.push(c);
            self.i += 1;
        }
        Err("unterminated address or command".into())
    }

    fn addr(&mut self) -> Result<Option<Addr>, String> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() => {
                let start = self.i;
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.i += 1;
                }
                let n: String = self.chars[start..self.i].iter().collect();
                Ok(Some(Addr::Line(n.parse().unwrap_or(0))))
            }
            Some('$') => {
                self.i += 1;
                Ok(Some(Addr::Last))
            }
            Some('/') => {
                self.i += 1;
                let r = self.until('/')?;
                Ok(Some(Addr::Re(compile(&r, self.extended, false, false)?)))
            }
            _ => Ok(None),
        }
    }

    fn substitution(&mut self) -> Result<SedCmd, String> {
        let delim = self.peek().ok_or("unterminated `s' command")?;
        self.i += 1;
        let pat = self.until(delim)?;
        let with = self.until(delim)?;
        let (mut global, mut print, mut icase) = (false, false, false);
        while let Some(f) = self.peek() {
            match f {
                'g' => global = true,
                'p' => print = true,
                'I' | 'i' => icase = true,
                _ => break,
            }
            self.i += 1;
        }
        let re = compile(&pat, self.extended, false, icase)?;
        Ok(SedCmd::Subst {
            re,
            with,
            global,
            print,
        })
    }

    fn command(&mut self) -> Result<SedCmd, String> {
        let c = self.peek().ok_or("missing command")?;
        self.i += 1;
        Ok(match c {
            's' => return self.substitution(),
            'd' => SedCmd::Delete,
            'p' => SedCmd::Print,
            'q' => SedCmd::Quit,
            c => return Err(format!("the command `{c}`")),
        })
    }
}

fn sed_parse(script: &str, extended: bool) -> Result<Vec<SedRule>, String> {
    let mut p = SedScript {
        chars: script.chars().collect(),
        i: 0,
        extended,
    };
    let mut rules = Vec::new();
    loop {
        while p.peek().is_some_and(|c| c.is_whitespace() || c == ';') {
            p.i += 1;
        }
        if p.peek().is_none() {
            return Ok(rules);
        }
        let from = p.addr()?;
        let mut to = None;
        if from.is_some() && p.peek() == Some(',') {
            p.i += 1;
            to = p.addr()?;
        }
        let negate = p.peek() == Some('!');
        if negate {
            p.i += 1;
        }
        let cmd = p.command()?;
        rules.push(SedRule {
            from,
            to,
            negate,
            cmd,
        });
    }
}

/// sed's replacement (`&`, `\1`…`\9`, `\n`) in the `regex` crate's expansion syntax.
fn sed_replacement(with: &str) -> String {
    let mut out = String::new();
    let mut it = with.chars();
    while let Some(c) = it.next() {
        match c {
            '&' => out.push_str("${0}"),
            '$' => out.push_str("$$"),
            '\\' => match it.next() {
                Some(d @ '0'..='9') => out.push_str(&format!("${{{d}}}")),
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => {}
            },
            c => out.push(c),
        }
    }
    out
}

fn sed_run(rules: &[SedRule], text: &str, quiet: bool) -> String {
    let all = super::coreutils::lines(text.as_bytes());
    let lines: Vec<&str> = all.iter().map(String::as_str).collect();
    let mut out = String::new();
    let mut active = vec![false; rules.len()];
    'lines: for (n, line) in lines.iter().enumerate() {
        let mut cur = line.to_string();
        let last = n + 1 == lines.len();
        for (k, r) in rules.iter().enumerate() {
            let hit = |a: &Addr, s: &str| match a {
                Addr::Line(l) => *l == n + 1,
                Addr::Last => last,
                Addr::Re(re) => re.is_match(s),
            };
            let selected = match (&r.from, &r.to) {
                (None, _) => true,
                (Some(f), None) => hit(f, &cur),
                (Some(f), Some(t)) => {
                    if active[k] {
                        if hit(t, &cur) {
                            active[k] = false;
                        }
                        true
                    } else if hit(f, &cur) {
                        active[k] = !hit(t, &cur) || matches!(t, Addr::Re(_));
                        true
                    } else {
                        false
                    }
                }
            };
            if selected == r.negate {
                continue;
            }
            match &r.cmd {
                SedCmd::Subst {
                    re,
                    with,
                    global,
                    print,
                } => {
                    let rep = sed_replacement(with);
                    let new = if *global {
                        re.replace_all(&cur, rep.as_str())
                    } else {
                        re.replace(&cur, rep.as_str())
                    };
                    let changed = new != cur;
                    cur = new.into_owned();
                    if changed && *print {
                        out.push_str(&cur);
                        out.push('\n');
                    }
                }
                SedCmd::Delete => continue 'lines,
                SedCmd::Print => {
                    out.push_str(&cur);
                    out.push('\n');
                }
                SedCmd::Quit => {
                    if !quiet {
                        out.push_str(&cur);
                        out.push('\n');
                    }
                    return out;
                }
            }
        }
        if !quiet {
            out.push_str(&cur);
            out.push('\n');
        }
    }
    out
}

fn sed(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, values) = Args::parse(&a[1..], "ef");
    let mut operands = args.operands.clone();
    let mut script: Vec<String> = values
        .iter()
        .filter(|(c, _)| *c == 'e')
        .map(|(_, v)| v.clone())
        .collect();
    if script.is_empty() {
        if operands.is_empty() {
            sh.eprint(
                io,
                "Usage: sed [OPTION]... {script-only-if-no-other-script} [input-file]...\n",
            );
            return Ok(1);
        }
        script.push(operands.remove(0));
    }
    let extended = args.has('E') || args.has('r');
    let rules = match sed_parse(&script.join("\n"), extended) {
        Ok(r) => r,
        Err(e) => {
            sh.eprint(
                io,
                format!("kudo-sim: sed: not simulated: {e} (kudo-sim's sed runs s, d, p and q)\n"),
            );
            return Ok(127);
        }
    };
    let quiet = args.has('n');
    if args.has('i') || args.long.iter().any(|l| l.starts_with("in-place")) {
        let mut st = 0;
        for f in &operands {
            let p = sh.abs(f);
            let Some(data) = sh.read_file(&p) else {
                sh.eprint(io, format!("sed: can't read {f}: No such file or directory\n"));
                st = 2;
                continue;
            };
            let out = sed_run(&rules, &String::from_utf8_lossy(&data), quiet);
            if let Err(e) = sh.write_file(&p, out.as_bytes(), false) {
                sh.eprint(io, format!("sed: {e}\n"));
                st = 4;
            }
        }
        return Ok(st);
    }
    let (data, st) = inputs(sh, io, "sed", &operands);
    let out = sed_run(&rules, &String::from_utf8_lossy(&data), quiet);
    sh.print(io, out);
    Ok(if st != 0 { 2 } else { 0 })
}

// ---------------------------------------------------------------------- awk

mod awk_lang;

fn awk(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, values) = Args::parse(&a[1..], "Fv");
    let mut operands = args.operands.clone();
    if operands.is_empty() {
        sh.eprint(
            io,
            "usage: awk [-F fs][-v var=value][prog | -f progfile][file ...]\n",
        );
        return Ok(2);
    }
    let program = operands.remove(0);
    let fs = values.iter().find(|(c, _)| *c == 'F').map(|(_, v)| v.clone());
    let vars: Vec<(String, String)> = values
        .iter()
        .filter(|(c, _)| *c == 'v')
        .filter_map(|(_, v)| v.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    let prog = match awk_lang::parse(&program) {
        Ok(p) => p,
        Err(e) => {
            sh.eprint(io, format!("kudo-sim: awk: not simulated: {e}\n"));
            return Ok(127);
        }
    };
    let (data, st) = inputs(sh, io, "awk", &operands);
    match awk_lang::run(&prog, &String::from_utf8_lossy(&data), fs.as_deref(), &vars) {
        Ok(out) => {
            sh.print(io, out);
            Ok(if st != 0 { 2 } else { 0 })
        }
        Err(e) => {
            sh.eprint(io, format!("awk: {e}\n"));
            Ok(2)
        }
    }
}

// ---------------------------------------------------------------------- xargs

fn xargs(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let mut i = 1;
    let mut no_empty = false;
    let mut delim: Option<char> = None;
    let mut per: Option<usize> = None;
    let mut replace: Option<String> = None;
    while let Some(x) = a.get(i) {
        match x.as_str() {
            "-r" | "--no-run-if-empty" => no_empty = true,
            "-0" => delim = Some('\0'),
            "-d" => {
                i += 1;
                delim = a
                    .get(i)
                    .map(|d| crate::shell::programs::coreutils::unescape(d))
                    .and_then(|d| d.chars().next());
            }
            "-n" => {
                i += 1;
                per = a.get(i).and_then(|n| n.parse().ok());
            }
            "-I" => {
                i += 1;
                replace = a.get(i).cloned();
            }
            s if s.starts_with('-') && s.len() > 1 => {
                sh.eprint(io, format!("kudo-sim: xargs: not simulated: the option {s}\n"));
                return Ok(127);
            }
            _ => break,
        }
        i += 1;
    }
    let cmd: Vec<String> = if i < a.len() {
        a[i..].to_vec()
    } else {
        vec!["echo".into()]
    };
    let input = String::from_utf8_lossy(&io.input.borrow_mut().rest()).into_owned();
    let items: Vec<String> = match delim {
        Some(d) => input
            .split(d)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
        None if replace.is_some() => input.lines().map(String::from).collect(),
        None => input.split_whitespace().map(String::from).collect(),
    };
    if items.is_empty() && no_empty {
        return Ok(0);
    }
    let batches: Vec<Vec<String>> = match (&replace, per) {
        (Some(_), _) => items.iter().map(|x| vec![x.clone()]).collect(),
        (None, Some(n)) if n > 0 => items.chunks(n).map(<[String]>::to_vec).collect(),
        _ => vec![items],
    };
    let mut worst = 0;
    let quiet = io.with_input(Vec::new());
    for batch in batches {
        let argv: Vec<String> = match &replace {
            Some(r) => cmd.iter().map(|c| c.replace(r.as_str(), &batch[0])).collect(),
            None => cmd.iter().cloned().chain(batch).collect(),
        };
        let st = match sh.invoke(&argv, Vec::new(), &quiet) {
            Flow::Next | Flow::Exit(_) => sh.status,
            other => return Err(other),
        };
        if st == 127 {
            return Ok(127);
        }
        if st != 0 {
            worst = 123;
        }
    }
    Ok(worst)
}
