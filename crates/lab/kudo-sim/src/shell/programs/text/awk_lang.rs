//! A small awk: rules (`BEGIN`, `END`, a pattern, a block), `print`/`printf`, assignments and
//! `++`/`--`, `if`/`else`, `next`, fields (`$N`, `NF`, `NR`, `FS`, `OFS`, `ORS`), string
//! concatenation, comparisons, `~`/`!~`, `&&`/`||`/`!`, arithmetic, and `length`, `substr`,
//! `index`, `tolower`, `toupper`. Anything else is refused when the program is parsed.

use std::collections::HashMap;

use regex::Regex;

#[derive(Debug, Clone)]
enum Expr {
    Num(f64),
    Str(String),
    Re(String),
    Field(Box<Expr>),
    Var(String),
    Assign(String, Option<char>, Box<Expr>),
    AssignField(Box<Expr>, Box<Expr>),
    Incr(String, f64, bool),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Bin(&'static str, Box<Expr>, Box<Expr>),
    Concat(Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
}

#[derive(Debug, Clone)]
enum Stmt {
    Print(Vec<Expr>),
    Printf(Vec<Expr>),
    Expr(Expr),
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    Next,
    Exit,
}

#[derive(Debug, Clone)]
enum When {
    Begin,
    End,
    Each(Option<Expr>),
}

/// A parsed awk program.
#[derive(Debug, Clone)]
pub(crate) struct Program(Vec<(When, Option<Vec<Stmt>>)>);

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Str(String),
    Re(String),
    Name(String),
    Op(&'static str),
    Newline,
}

const OPS: [&str; 30] = [
    "&&", "||", "==", "!=", "<=", ">=", "!~", "++", "--", "+=", "-=", "{", "}", "(", ")", ";", ",", "$", "!",
    "~", "<", ">", "=", "+", "-", "*", "/", "%", "?", ":",
];

fn lex(src: &str) -> Result<Vec<Tok>, String> {
    let s: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out: Vec<Tok> = Vec::new();
    while i < s.len() {
        let c = s[i];
        match c {
            ' ' | '\t' => i += 1,
            '\\' if s.get(i + 1) == Some(&'\n') => i += 2,
            '\n' => {
                out.push(Tok::Newline);
                i += 1;
            }
            '#' => {
                while i < s.len() && s[i] != '\n' {
                    i += 1;
                }
            }
            '"' => {
                i += 1;
                let mut t = String::new();
                while i < s.len() && s[i] != '"' {
                    if s[i] == '\\' && i + 1 < s.len() {
                        t.push(match s[i + 1] {
                            'n' => '\n',
                            't' => '\t',
                            o => o,
                        });
                        i += 2;
                        continue;
                    }
                    t.push(s[i]);
                    i += 1;
                }
                i += 1;
                out.push(Tok::Str(t));
            }
            '/' if regex_allowed(out.last()) => {
                i += 1;
                let mut t = String::new();
                while i < s.len() && s[i] != '/' {
                    if s[i] == '\\' && s.get(i + 1) == Some(&'/') {
                        t.push('/');
                        i += 2;
                        continue;
                    }
                    t.push(s[i]);
                    i += 1;
                }
                i += 1;
                out.push(Tok::Re(t));
            }
            c if c.is_ascii_digit() || (c == '.' && s.get(i + 1).is_some_and(char::is_ascii_digit)) => {
                let start = i;
                while i < s.len() && (s[i].is_ascii_digit() || s[i] == '.') {
                    i += 1;
                }
                let t: String = s[start..i].iter().collect();
                out.push(Tok::Num(t.parse().map_err(|_| format!("bad number {t}"))?));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == '_') {
                    i += 1;
                }
                out.push(Tok::Name(s[start..i].iter().collect()));
            }
            _ => {
                let rest: String = s[i..].iter().take(2).collect();
                let op = OPS
                    .iter()
                    .find(|o| rest.starts_with(*o))
                    .ok_or(format!("the character `{c}`"))?;
                out.push(Tok::Op(op));
                i += op.len();
            }
        }
    }
    Ok(out)
}

fn regex_allowed(prev: Option<&Tok>) -> bool {
    !matches!(
        prev,
        Some(Tok::Num(_) | Tok::Str(_) | Tok::Name(_) | Tok::Op(")"))
    )
}

struct P {
    t: Vec<Tok>,
    i: usize,
}

impl P {
    fn peek(&self) -> Option<&Tok> {
        self.t.get(self.i)
    }
    fn is(&self, op: &str) -> bool {
        matches!(self.peek(), Some(Tok::Op(o)) if *o == op)
    }
    fn eat(&mut self, op: &str) -> bool {
        let hit = self.is(op);
        if hit {
            self.i += 1;
        }
        hit
    }
    fn skip_newlines(&mut self) {
        while matches!(self.peek(), Some(Tok::Newline)) || self.is(";") {
            self.i += 1;
        }
    }
    fn expect(&mut self, op: &str) -> Result<(), String> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(format!("expected `{op}`"))
        }
    }

    fn program(&mut self) -> Result<Program, String> {
        let mut rules = Vec::new();
        loop {
            self.skip_newlines();
            let Some(tok) = self.peek().cloned() else { break };
            let when = match tok {
                Tok::Name(n) if n == "BEGIN" => {
                    self.i += 1;
                    When::Begin
                }
                Tok::Name(n) if n == "END" => {
                    self.i += 1;
                    When::End
                }
                Tok::Op("{") => When::Each(None),
                _ => When::Each(Some(self.expr()?)),
            };
            let body = if self.is("{") { Some(self.block()?) } else { None };
            rules.push((when, body));
        }
        Ok(Program(rules))
    }

    fn block(&mut self) -> Result<Vec<Stmt>, String> {
        self.expect("{")?;
        let mut out = Vec::new();
        loop {
            self.skip_newlines();
            if self.eat("}") {
                return Ok(out);
            }
            if self.peek().is_none() {
                return Err("a block without `}`".into());
            }
            out.push(self.stmt()?);
        }
    }

    fn stmt(&mut self) -> Result<Stmt, String> {
        if self.is("{") {
            let b = self.block()?;
            return Ok(Stmt::If(Expr::Num(1.0), b, Vec::new()));
        }
        if let Some(Tok::Name(n)) = self.peek().cloned() {
            match n.as_str() {
                "print" | "printf" => {
                    self.i += 1;
                    let mut args = Vec::new();
                    while !matches!(self.peek(), None | Some(Tok::Newline) | Some(Tok::Op(";" | "}"))) {
                        args.push(self.expr()?);
                        if !self.eat(",") {
                            break;
                        }
                    }
                    if self.is(">") {
                        return Err("output redirection in awk".into());
                    }
                    return Ok(if n == "print" {
                        Stmt::Print(args)
                    } else {
                        Stmt::Printf(args)
                    });
                }
                "next" => {
                    self.i += 1;
                    return Ok(Stmt::Next);
                }
                "exit" => {
                    self.i += 1;
                    return Ok(Stmt::Exit);
                }
                "if" => {
                    self.i += 1;
                    self.expect("(")?;
                    let c = self.expr()?;
                    self.expect(")")?;
                    self.skip_newlines();
                    let then = vec![self.stmt()?];
                    let mut otherwise = Vec::new();
                    let save = self.i;
                    self.skip_newlines();
                    if matches!(self.peek(), Some(Tok::Name(e)) if e == "else") {
                        self.i += 1;
                        self.skip_newlines();
                        otherwise.push(self.stmt()?);
                    } else {
                        self.i = save;
                    }
                    return Ok(Stmt::If(c, then, otherwise));
                }
                "for" | "while" | "do" | "getline" | "function" | "delete" | "split" | "gsub" | "sub" => {
                    return Err(format!("`{n}`"));
                }
                _ => {}
            }
        }
        Ok(Stmt::Expr(self.expr()?))
    }

    fn expr(&mut self) -> Result<Expr, String> {
        let lhs = self.or()?;
        for (op, kind) in [("=", None), ("+=", Some('+')), ("-=", Some('-'))] {
            if self.is(op) {
                self.i += 1;
                let rhs = self.expr()?;
                return match lhs {
                    Expr::Var(n) => Ok(Expr::Assign(n, kind, Box::new(rhs))),
                    Expr::Field(f) if kind.is_none() => Ok(Expr::AssignField(f, Box::new(rhs))),
                    _ => Err("assignment to something that is not a variable".into()),
                };
            }
        }
        Ok(lhs)
    }

    fn binary_level(
        &mut self,
        ops: &[&'static str],
        next: fn(&mut P) -> Result<Expr, String>,
    ) -> Result<Expr, String> {
        let mut lhs = next(self)?;
        loop {
            let Some(op) = ops.iter().find(|o| self.is(o)).copied() else {
                return Ok(lhs);
            };
            self.i += 1;
            self.skip_newlines_after_logic(op);
            let rhs = next(self)?;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs));
        }
    }

    fn skip_newlines_after_logic(&mut self, op: &str) {
        if op == "&&" || op == "||" {
            while matches!(self.peek(), Some(Tok::Newline)) {
                self.i += 1;
            }
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.binary_level(&["||"], P::and)
    }
    fn and(&mut self) -> Result<Expr, String> {
        self.binary_level(&["&&"], P::matching)
    }
    fn matching(&mut self) -> Result<Expr, String> {
        self.binary_level(&["~", "!~"], P::comparison)
    }
    fn comparison(&mut self) -> Result<Expr, String> {
        self.binary_level(&["==", "!=", "<=", ">=", "<", ">"], P::concat)
    }

    fn concat(&mut self) -> Result<Expr, String> {
        let mut lhs = self.additive()?;
        while self.starts_primary() {
            let rhs = self.additive()?;
            lhs = Expr::Concat(Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn starts_primary(&self) -> bool {
        match self.peek() {
            Some(Tok::Num(_) | Tok::Str(_) | Tok::Name(_)) => {
                !matches!(self.peek(), Some(Tok::Name(n)) if matches!(n.as_str(), "in" | "else"))
            }
            Some(Tok::Op(o)) => matches!(*o, "$" | "(" | "!" | "-" | "++" | "--"),
            _ => false,
        }
    }

    fn additive(&mut self) -> Result<Expr, String> {
        self.binary_level(&["+", "-"], P::multiplicative)
    }
    fn multiplicative(&mut self) -> Result<Expr, String> {
        self.binary_level(&["*", "/", "%"], P::unary)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat("-") {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        for (op, d) in [("++", 1.0), ("--", -1.0)] {
            if self.eat(op) {
                let Some(Tok::Name(n)) = self.peek().cloned() else {
                    return Err(format!("`{op}` without a variable"));
                };
                self.i += 1;
                return Ok(Expr::Incr(n, d, true));
            }
        }
        let e = self.primary()?;
        if let Expr::Var(n) = &e {
            for (op, d) in [("++", 1.0), ("--", -1.0)] {
                if self.eat(op) {
                    return Ok(Expr::Incr(n.clone(), d, false));
                }
            }
        }
        Ok(e)
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let tok = self.peek().cloned().ok_or("an expression is missing")?;
        self.i += 1;
        Ok(match tok {
            Tok::Num(n) => Expr::Num(n),
            Tok::Str(s) => Expr::Str(s),
            Tok::Re(r) => Expr::Re(r),
            Tok::Op("$") => Expr::Field(Box::new(self.primary()?)),
            Tok::Op("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                e
            }
            Tok::Name(n) if self.is("(") => {
                if !matches!(n.as_str(), "length" | "substr" | "index" | "tolower" | "toupper") {
                    return Err(format!("the function `{n}`"));
                }
                self.i += 1;
                let mut args = Vec::new();
                while !self.is(")") {
                    args.push(self.expr()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect(")")?;
                Expr::Call(n, args)
            }
            Tok::Name(n) if n == "length" => Expr::Call(n, Vec::new()),
            Tok::Name(n) => Expr::Var(n),
            other => return Err(format!("unexpected {other:?}")),
        })
    }
}

/// Parses an awk program; `Err` names what is not simulated.
pub(crate) fn parse(src: &str) -> Result<Program, String> {
    let mut p = P { t: lex(src)?, i: 0 };
    p.program()
}

struct Run<'a> {
    vars: HashMap<String, String>,
    fields: Vec<String>,
    out: String,
    regexes: HashMap<String, Regex>,
    fs: Option<&'a str>,
}

enum Ctl {
    Go,
    Next,
    Exit,
}

fn num(s: &str) -> f64 {
    let t = s.trim_start();
    let end = t
        .char_indices()
        .take_while(|(i, c)| c.is_ascii_digit() || *c == '.' || (*i == 0 && (*c == '-' || *c == '+')))
        .map(|(i, c)| i + c.len_utf8())
        .last()
        .unwrap_or(0);
    t[..end].parse().unwrap_or(0.0)
}

fn looks_numeric(s: &str) -> bool {
    let t = s.trim();
    !t.is_empty() && t.parse::<f64>().is_ok()
}

fn fmt_num(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e16 {
        format!("{}", n as i64)
    } else {
        let s = format!("{n:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

impl Run<'_> {
    fn split(&mut self, line: &str) {
        let mut f = vec![line.to_string()];
        match self.fs {
            None | Some(" ") => f.extend(line.split_whitespace().map(String::from)),
            Some(sep) if sep.chars().count() == 1 => f.extend(line.split(sep).map(String::from)),
            Some(sep) => match Regex::new(sep) {
                Ok(re) => f.extend(re.split(line).map(String::from)),
                Err(_) => f.extend(line.split(sep).map(String::from)),
            },
        }
        if line.is_empty() {
            f.truncate(1);
        }
        self.vars.insert("NF".into(), (f.len() - 1).to_string());
        self.fields = f;
    }

    fn regex(&mut self, src: &str) -> Result<Regex, String> {
        if let Some(r) = self.regexes.get(src) {
            return Ok(r.clone());
        }
        let r = Regex::new(src).map_err(|_| format!("bad regular expression /{src}/"))?;
        self.regexes.insert(src.to_string(), r.clone());
        Ok(r)
    }

    fn eval(&mut self, e: &Expr) -> Result<String, String> {
        Ok(match e {
            Expr::Num(n) => fmt_num(*n),
            Expr::Str(s) => s.clone(),
            Expr::Re(r) => {
                let re = self.regex(r)?;
                let hit = re.is_match(&self.fields[0]);
                (if hit { "1" } else { "0" }).into()
            }
            Expr::Field(i) => {
                let k = num(&self.eval(i)?) as usize;
                self.fields.get(k).cloned().unwrap_or_default()
            }
            Expr::Var(n) => self.vars.get(n).cloned().unwrap_or_default(),
            Expr::Assign(n, op, rhs) => {
                let v = self.eval(rhs)?;
                let v = match op {
                    None => v,
                    Some(o) => {
                        let cur = num(&self.vars.get(n).cloned().unwrap_or_default());
                        fmt_num(if *o == '+' { cur + num(&v) } else { cur - num(&v) })
                    }
                };
                self.vars.insert(n.clone(), v.clone());
                v
            }
            Expr::AssignField(f, rhs) => {
                let k = num(&self.eval(f)?) as usize;
                let v = self.eval(rhs)?;
                if self.fields.len() <= k {
                    self.fields.resize(k + 1, String::new());
                }
                self.fields[k] = v.clone();
                let ofs = self.vars.get("OFS").cloned().unwrap_or_else(|| " ".into());
                self.fields[0] = self.fields[1..].join(&ofs);
                v
            }
            Expr::Incr(n, d, pre) => {
                let cur = num(&self.vars.get(n).cloned().unwrap_or_default());
                self.vars.insert(n.clone(), fmt_num(cur + d));
                fmt_num(if *pre { cur + d } else { cur })
            }
            Expr::Not(x) => (if truthy(&self.eval(x)?) { "0" } else { "1" }).into(),
            Expr::Neg(x) => fmt_num(-num(&self.eval(x)?)),
            Expr::Concat(a, b) => format!("{}{}", self.eval(a)?, self.eval(b)?),
            Expr::Bin(op, a, b) => self.binary(op, a, b)?,
            Expr::Call(f, args) => self.call(f, args)?,
        })
    }

    fn binary(&mut self, op: &str, a: &Expr, b: &Expr) -> Result<String, String> {
        if op == "&&" || op == "||" {
            let l = truthy(&self.eval(a)?);
            let r = if (op == "&&") == l {
                truthy(&self.eval(b)?)
            } else {
                l
            };
            return Ok((if r { "1" } else { "0" }).into());
        }
        if op == "~" || op == "!~" {
            let s = self.eval(a)?;
            let src = match b {
                Expr::Re(r) => r.clone(),
                other => self.eval(other)?,
            };
            let hit = self.regex(&src)?.is_match(&s);
            return Ok((if hit == (op == "~") { "1" } else { "0" }).into());
        }
        let (x, y) = (self.eval(a)?, self.eval(b)?);
        let b = |v: bool| (if v { "1" } else { "0" }).to_string();
        let numeric = looks_numeric(&x) && looks_numeric(&y);
        let ord = if numeric {
            num(&x).partial_cmp(&num(&y)).unwrap_or(std::cmp::Ordering::Equal)
        } else {
            x.cmp(&y)
        };
        Ok(match op {
            "==" => b(ord.is_eq()),
            "!=" => b(!ord.is_eq()),
            "<" => b(ord.is_lt()),
            "<=" => b(ord.is_le()),
            ">" => b(ord.is_gt()),
            ">=" => b(ord.is_ge()),
            "+" => fmt_num(num(&x) + num(&y)),
            "-" => fmt_num(num(&x) - num(&y)),
            "*" => fmt_num(num(&x) * num(&y)),
            "/" if num(&y) == 0.0 => return Err("division by zero".into()),
            "/" => fmt_num(num(&x) / num(&y)),
            "%" if num(&y) == 0.0 => return Err("division by zero in %".into()),
            "%" => fmt_num(num(&x) % num(&y)),
            _ => return Err(format!("operator {op}")),
        })
    }

    fn call(&mut self, f: &str, args: &[Expr]) -> Result<String, String> {
        let mut v = Vec::new();
        for a in args {
            v.push(self.eval(a)?);
        }
        let s = v.first().cloned().unwrap_or_else(|| self.fields[0].clone());
        Ok(match f {
            "length" => s.chars().count().to_string(),
            "tolower" => s.to_lowercase(),
            "toupper" => s.to_uppercase(),
            "index" => {
                let t = v.get(1).cloned().unwrap_or_default();
                s.find(&t).map_or(0, |i| s[..i].chars().count() + 1).to_string()
            }
            _ => {
                let chars: Vec<char> = s.chars().collect();
                let start = (num(v.get(1).map(String::as_str).unwrap_or("1")) as i64).max(1) as usize - 1;
                let len = v.get(2).map_or(chars.len(), |l| num(l).max(0.0) as usize);
                chars.iter().skip(start).take(len).collect()
            }
        })
    }

    fn exec(&mut self, stmts: &[Stmt]) -> Result<Ctl, String> {
        for s in stmts {
            match s {
                Stmt::Print(args) => {
                    let ofs = self.vars.get("OFS").cloned().unwrap_or_else(|| " ".into());
                    let ors = self.vars.get("ORS").cloned().unwrap_or_else(|| "\n".into());
                    let line = if args.is_empty() {
                        self.fields[0].clone()
                    } else {
                        let mut parts = Vec::new();
                        for a in args {
                            parts.push(self.eval(a)?);
                        }
                        parts.join(&ofs)
                    };
                    self.out.push_str(&line);
                    self.out.push_str(&ors);
                }
                Stmt::Printf(args) => {
                    let mut parts = Vec::new();
                    for a in args {
                        parts.push(self.eval(a)?);
                    }
                    let (fmt, rest) = parts.split_first().ok_or("printf without a format")?;
                    let (s, _) = crate::shell::programs::coreutils::printf(fmt, rest)?;
                    self.out.push_str(&s);
                }
                Stmt::Expr(e) => {
                    self.eval(e)?;
                }
                Stmt::If(c, then, otherwise) => {
                    let branch = if truthy(&self.eval(c)?) { then } else { otherwise };
                    match self.exec(branch)? {
                        Ctl::Go => {}
                        other => return Ok(other),
                    }
                }
                Stmt::Next => return Ok(Ctl::Next),
                Stmt::Exit => return Ok(Ctl::Exit),
            }
        }
        Ok(Ctl::Go)
    }
}

fn truthy(s: &str) -> bool {
    if looks_numeric(s) {
        num(s) != 0.0
    } else {
        !s.is_empty()
    }
}

/// Runs `prog` over `input` with field separator `fs` and `-v` assignments.
pub(crate) fn run(
    prog: &Program,
    input: &str,
    fs: Option<&str>,
    vars: &[(String, String)],
) -> Result<String, String> {
    let mut r = Run {
        vars: vars.iter().cloned().collect(),
        fields: vec![String::new()],
        out: String::new(),
        regexes: HashMap::new(),
        fs,
    };
    let stage = |r: &mut Run<'_>, begin: bool| -> Result<bool, String> {
        for (when, body) in &prog.0 {
            if matches!((when, begin), (When::Begin, true) | (When::End, false))
                && let Some(b) = body
                && let Ctl::Exit = r.exec(b)?
            {
                return Ok(false);
            }
        }
        Ok(true)
    };
    if !stage(&mut r, true)? {
        return Ok(r.out);
    }
    let all = crate::shell::programs::coreutils::lines(input.as_bytes());
    'lines: for (n, line) in all.iter().enumerate() {
        r.vars.insert("NR".into(), (n + 1).to_string());
        r.split(line);
        for (when, body) in &prog.0 {
            let When::Each(pattern) = when else { continue };
            let selected = match pattern {
                None => true,
                Some(p) => truthy(&r.eval(p)?),
            };
            if !selected {
                continue;
            }
            let ctl = match body {
                Some(b) => r.exec(b)?,
                None => r.exec(&[Stmt::Print(Vec::new())])?,
            };
            match ctl {
                Ctl::Go => {}
                Ctl::Next => continue 'lines,
                Ctl::Exit => return Ok(r.out),
            }
        }
    }
    stage(&mut r, false)?;
    Ok(r.out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn awk(p: &str, input: &str) -> String {
        run(&parse(p).unwrap(), input, None, &[]).unwrap()
    }

    #[test]
    fn programs() {
        let ns = "\nName:      r-0.svc\nAddress 1: 10.244.0.5 r-0.svc.default.svc.cluster.local\n";
        let addr: String = ns
            .lines()
            .filter(|l| l.contains("Address"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(awk("{ print $3 }", &addr), "10.244.0.5\n");
        assert_eq!(
            awk(
                "/master/{m++} /slave/{s++} END{print m+0, s+0}",
                "a master\nb slave\nc master\n"
            ),
            "2 1\n"
        );
        assert_eq!(awk("NR == 2", "a\nb\nc\n"), "b\n");
        assert_eq!(
            awk(
                "$2 == \"STREAM\" { print $1 }",
                "1.2.3.4 STREAM x\n1.2.3.4 DGRAM\n"
            ),
            "1.2.3.4\n"
        );
        assert_eq!(awk("NR == 1 && NF >= 3 { print $3 }", "a b c\n"), "c\n");
        assert_eq!(awk("{ print length($1), toupper($2) }", "abc de\n"), "3 DE\n");
        assert!(parse("{ for (i=0;i<3;i++) print i }").is_err());
    }
}
