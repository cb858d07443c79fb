//! The parser of the simulated shell: POSIX `sh` grammar for what container command lines use —
//! lists (`;`, `&`, newlines), `&&`/`||`, pipelines, `!`, `if`/`while`/`until`/`for`/`case`,
//! `{ …; }`, `( … )`, functions, bash's `[[ … ]]` and `(( … ))`, quoting, `$…`/`${…}` (the
//! POSIX operators and bash's `:offset:length` and `/pattern/replacement`), `$(…)`, backquotes,
//! `$((…))`, redirections with file descriptors (`2>&1`, `>&2`, `&>`, `<<<`).
//!
//! Not parsed (the script is then not run, see [`ErrorKind::Unsupported`]): here-documents, arrays,
//! C-style `for ((…))`, `${!name}` and `${name[…]}`, process substitution.

use std::rc::Rc;

use super::ast::*;

/// Why a script cannot be run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// A real shell refuses it too (exit 2).
    Syntax,
    /// Valid shell that kudo-sim does not interpret (exit 127).
    Unsupported,
}

type R<T> = Result<T, ParseError>;

fn syntax<T>(message: impl Into<String>) -> R<T> {
    Err(ParseError {
        kind: ErrorKind::Syntax,
        message: message.into(),
    })
}

fn unsupported<T>(what: &str) -> R<T> {
    Err(ParseError {
        kind: ErrorKind::Unsupported,
        message: what.to_string(),
    })
}

/// Parses a whole script.
pub(crate) fn parse(src: &str) -> R<List> {
    let mut p = Parser {
        s: src.chars().collect(),
        i: 0,
    };
    let list = p.list(&[])?;
    p.skip_space();
    if p.i < p.s.len() {
        return syntax(format!("unexpected {:?}", p.rest_preview()));
    }
    Ok(list)
}

/// Where a word ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// An ordinary word: ends at blanks and operators.
    Normal,
    /// Inside `${name:-…}`: ends at the closing brace; blanks are part of it.
    Brace,
    /// The pattern of `${name/pattern/…}`: ends at `/` or the closing brace.
    Slash,
}

struct Parser {
    s: Vec<char>,
    i: usize,
}

fn is_delim(c: Option<char>) -> bool {
    matches!(
        c,
        None | Some(' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')')
    )
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn peek_at(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).copied()
    }

    fn starts(&self, lit: &str) -> bool {
        lit.chars().enumerate().all(|(k, c)| self.peek_at(k) == Some(c))
    }

    fn rest_preview(&self) -> String {
        self.s[self.i..].iter().take(20).collect()
    }

    /// Skips blanks, line continuations and comments (not newlines).
    fn skip_space(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t') => self.i += 1,
                Some('\\') if self.peek_at(1) == Some('\n') => self.i += 2,
                Some('#') => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.i += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn skip_space_and_newlines(&mut self) {
        loop {
            self.skip_space();
            if self.peek() == Some('\n') {
                self.i += 1;
            } else {
                return;
            }
        }
    }

    /// The next token when it is a plain unquoted word (for keywords), without consuming it.
    fn peek_plain_word(&self) -> Option<String> {
        let mut j = self.i;
        let mut w = String::new();
        while let Some(&c) = self.s.get(j) {
            if is_delim(Some(c)) || matches!(c, '\'' | '"' | '\\' | '$' | '`') {
                break;
            }
            w.push(c);
            j += 1;
        }
        (!w.is_empty() && is_delim(self.s.get(j).copied())).then_some(w)
    }

    fn at_keyword(&self, kw: &str) -> bool {
        self.peek_plain_word().as_deref() == Some(kw)
    }

    fn eat_keyword(&mut self, kw: &str) -> R<()> {
        self.skip_space_and_newlines();
        if self.at_keyword(kw) {
            self.i += kw.chars().count();
            Ok(())
        } else {
            syntax(format!("expected `{kw}`, found {:?}", self.rest_preview()))
        }
    }

    fn at_stop(&self, stop: &[&str]) -> bool {
        match self.peek() {
            None => true,
            Some(')') => true,
            Some(';') if self.peek_at(1) == Some(';') => true,
            _ => stop.iter().any(|k| self.at_keyword(k)),
        }
    }

    /// A list of and-or lists, up to the end, a `)`, a `;;` or one of the `stop` keywords.
    fn list(&mut self, stop: &[&str]) -> R<List> {
        let mut items = Vec::new();
        loop {
            self.skip_space_and_newlines();
            if self.at_stop(stop) {
                return Ok(items);
            }
            let and_or = self.and_or()?;
            self.skip_space();
            let background = match (self.peek(), self.peek_at(1)) {
                (Some('&'), c) if c != Some('&') && c != Some('>') => {
                    self.i += 1;
                    true
                }
                (Some(';'), c) if c != Some(';') => {
                    self.i += 1;
                    false
                }
                (Some('\n'), _) => false,
                _ if self.at_stop(stop) => false,
                _ => return syntax(format!("unexpected {:?}", self.rest_preview())),
            };
            items.push(Item { and_or, background });
        }
    }

    fn and_or(&mut self) -> R<AndOr> {
        let first = self.pipeline()?;
        let mut rest = Vec::new();
        loop {
            self.skip_space();
            let op = if self.starts("&&") {
                Op::And
            } else if self.starts("||") {
                Op::Or
            } else {
                return Ok(AndOr { first, rest });
            };
            self.i += 2;
            self.skip_space_and_newlines();
            rest.push((op, self.pipeline()?));
        }
    }

    fn pipeline(&mut self) -> R<Pipeline> {
        self.skip_space();
        let negate = self.at_keyword("!");
        if negate {
            self.i += 1;
        }
        let mut cmds = vec![self.command()?];
        loop {
            self.skip_space();
            if self.peek() == Some('|') && self.peek_at(1) != Some('|') {
                self.i += 1;
                if self.peek() == Some('&') {
                    return unsupported("`|&`");
                }
                self.skip_space_and_newlines();
                cmds.push(self.command()?);
            } else {
                return Ok(Pipeline { negate, cmds });
            }
        }
    }

    fn command(&mut self) -> R<Command> {
        self.skip_space();
        if self.starts("((") {
            self.i += 2;
            let expr = self.until_double_paren()?;
            return self.with_redirs(Compound::Arith(expr));
        }
        if self.peek() == Some('(') {
            self.i += 1;
            let list = self.list(&[])?;
            self.expect_char(')')?;
            return self.with_redirs(Compound::Subshell(list));
        }
        match self.peek_plain_word().as_deref() {
            Some("if") => self.if_clause(),
            Some("while") => self.loop_clause(false),
            Some("until") => self.loop_clause(true),
            Some("for") => self.for_clause(),
            Some("case") => self.case_clause(),
            Some("{") => {
                self.i += 1;
                let list = self.list(&["}"])?;
                self.eat_keyword("}")?;
                self.with_redirs(Compound::Brace(list))
            }
            Some("[[") => self.cond_clause(),
            Some("function") => {
                self.i += "function".len();
                self.skip_space();
                let name = self.peek_plain_word().ok_or_else(|| ParseError {
                    kind: ErrorKind::Syntax,
                    message: "expected a function name".into(),
                })?;
                self.i += name.chars().count();
                self.skip_space();
                if self.starts("()") {
                    self.i += 2;
                }
                self.func_body(name)
            }
            Some(k @ ("then" | "else" | "elif" | "fi" | "do" | "done" | "esac" | "}" | "in")) => {
                syntax(format!("unexpected `{k}`"))
            }
            _ => self.simple(),
        }
    }

    fn func_body(&mut self, name: String) -> R<Command> {
        self.skip_space_and_newlines();
        match self.command()? {
            Command::Compound(c, redirs) if redirs.is_empty() => Ok(Command::FuncDef(name, Rc::from(c))),
            _ => syntax(format!("the body of function {name} is not a compound command")),
        }
    }

    fn expect_char(&mut self, c: char) -> R<()> {
        self.skip_space_and_newlines();
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            syntax(format!("expected `{c}`, found {:?}", self.rest_preview()))
        }
    }

    fn with_redirs(&mut self, c: Compound) -> R<Command> {
        let mut redirs = Vec::new();
        loop {
            self.skip_space();
            match self.redir_start() {
                Some(fd) => redirs.push(self.redir(fd)?),
                None => return Ok(Command::Compound(Box::new(c), redirs)),
            }
        }
    }

    fn if_clause(&mut self) -> R<Command> {
        self.i += 2;
        let mut branches = Vec::new();
        let mut otherwise = None;
        loop {
            let cond = self.list(&["then"])?;
            self.eat_keyword("then")?;
            let body = self.list(&["elif", "else", "fi"])?;
            branches.push((cond, body));
            self.skip_space_and_newlines();
            if self.at_keyword("elif") {
                self.i += 4;
                continue;
            }
            if self.at_keyword("else") {
                self.i += 4;
                otherwise = Some(self.list(&["fi"])?);
            }
            self.eat_keyword("fi")?;
            return self.with_redirs(Compound::If { branches, otherwise });
        }
    }

    fn loop_clause(&mut self, until: bool) -> R<Command> {
        self.i += "while".len(); // as long as "until"
        let cond = self.list(&["do"])?;
        self.eat_keyword("do")?;
        let body = self.list(&["done"])?;
        self.eat_keyword("done")?;
        self.with_redirs(Compound::Loop { until, cond, body })
    }

    fn for_clause(&mut self) -> R<Command> {
        self.i += 3;
        self.skip_space();
        if self.starts("((") {
            return unsupported("C-style `for ((…))` loops");
        }
        let var = self
            .peek_plain_word()
            .filter(|w| w.chars().all(is_name_char))
            .ok_or_else(|| ParseError {
                kind: ErrorKind::Syntax,
                message: "expected a variable name after `for`".into(),
            })?;
        self.i += var.chars().count();
        self.skip_space_and_newlines();
        let mut words = None;
        if self.at_keyword("in") {
            self.i += 2;
            let mut list = Vec::new();
            loop {
                self.skip_space();
                if matches!(self.peek(), None | Some(';' | '\n')) {
                    break;
                }
                list.push(self.word(Ctx::Normal)?);
            }
            words = Some(list);
        }
        self.skip_space();
        if self.peek() == Some(';') {
            self.i += 1;
        }
        self.eat_keyword("do")?;
        let body = self.list(&["done"])?;
        self.eat_keyword("done")?;
        self.with_redirs(Compound::For { var, words, body })
    }

    fn case_clause(&mut self) -> R<Command> {
        self.i += 4;
        self.skip_space();
        let word = self.word(Ctx::Normal)?;
        self.eat_keyword("in")?;
        let mut arms = Vec::new();
        loop {
            self.skip_space_and_newlines();
            if self.at_keyword("esac") {
                self.i += 4;
                return self.with_redirs(Compound::Case { word, arms });
            }
            if self.peek() == Some('(') {
                self.i += 1;
            }
            let mut patterns = Vec::new();
            loop {
                self.skip_space();
                patterns.push(self.word(Ctx::Normal)?);
                self.skip_space();
                match self.peek() {
                    Some('|') => self.i += 1,
                    Some(')') => {
                        self.i += 1;
                        break;
                    }
                    _ => return syntax(format!("bad case pattern near {:?}", self.rest_preview())),
                }
            }
            let body = self.list(&["esac"])?;
            self.skip_space_and_newlines();
            if self.starts(";;") {
                self.i += 2;
            } else if !self.at_keyword("esac") {
                return syntax(format!(
                    "expected `;;` or `esac`, found {:?}",
                    self.rest_preview()
                ));
            }
            arms.push((patterns, body));
        }
    }

    /// `[[ … ]]`: its operands and operators as words.
    fn cond_clause(&mut self) -> R<Command> {
        self.i += 2;
        let mut words = Vec::new();
        loop {
            self.skip_space_and_newlines();
            if self.at_keyword("]]") {
                self.i += 2;
                return self.with_redirs(Compound::Cond(words));
            }
            let op = ["&&", "||", "(", ")", "<", ">"]
                .into_iter()
                .find(|op| self.starts(op));
            if let Some(op) = op {
                self.i += op.len();
                words.push(Word(vec![Part::Lit(op.to_string())]));
                continue;
            }
            if self.peek().is_none() {
                return syntax("`[[` without `]]`");
            }
            let after_regex = words.last().and_then(Word::literal) == Some("=~");
            words.push(if after_regex {
                self.raw_regex()
            } else {
                self.word(Ctx::Normal)?
            });
        }
    }

    /// The right side of `=~`: up to a blank outside parentheses, taken as it is written.
    fn raw_regex(&mut self) -> Word {
        let mut depth = 0;
        let mut w = String::new();
        while let Some(c) = self.peek() {
            match c {
                '(' => depth += 1,
                ')' if depth > 0 => depth -= 1,
                ' ' | '\t' | '\n' if depth == 0 => break,
                _ => {}
            }
            w.push(c);
            self.i += 1;
        }
        Word(vec![Part::Quoted(w)])
    }

    fn until_double_paren(&mut self) -> R<String> {
        let mut depth = 0;
        let mut out = String::new();
        while let Some(c) = self.peek() {
            if c == ')' && depth == 0 && self.peek_at(1) == Some(')') {
                self.i += 2;
                return Ok(out);
            }
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            out.push(c);
            self.i += 1;
        }
        syntax("`((` without `))`")
    }

    /// Whether a redirection starts here, and its explicit file descriptor.
    fn redir_start(&self) -> Option<Option<u32>> {
        let mut j = self.i;
        while self.s.get(j).is_some_and(char::is_ascii_digit) {
            j += 1;
        }
        match self.s.get(j) {
            Some('<' | '>') if j > self.i => {
                let fd: String = self.s[self.i..j].iter().collect();
                Some(fd.parse().ok())
            }
            Some('<' | '>') => Some(None),
            Some('&') if j == self.i && self.peek_at(1) == Some('>') => Some(None),
            _ => None,
        }
    }

    fn redir(&mut self, fd: Option<u32>) -> R<Redir> {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        let ops: [(&str, RedirKind); 8] = [
            ("&>>", RedirKind::AppendErr),
            ("&>", RedirKind::OutErr),
            ("<<<", RedirKind::HereString),
            (">>", RedirKind::Append),
            (">&", RedirKind::Dup),
            ("<&", RedirKind::Dup),
            (">|", RedirKind::Out),
            (">", RedirKind::Out),
        ];
        if self.starts("<<") && !self.starts("<<<") {
            return unsupported("here-documents (`<<`)");
        }
        if self.starts("<>") {
            return unsupported("`<>` redirections");
        }
        let (kind, fd) = match ops.into_iter().find(|(op, _)| self.starts(op)) {
            Some((op, kind)) => {
                self.i += op.len();
                let default = if op.starts_with('<') { 0 } else { 1 };
                (kind, Some(fd.unwrap_or(default)))
            }
            None => {
                self.i += 1; // `<`
                (RedirKind::In, Some(fd.unwrap_or(0)))
            }
        };
        self.skip_space();
        if is_delim(self.peek()) {
            return syntax("a redirection without a target");
        }
        let target = self.word(Ctx::Normal)?;
        Ok(Redir { fd, kind, target })
    }

    fn simple(&mut self) -> R<Command> {
        let mut cmd = Simple::default();
        loop {
            self.skip_space();
            if is_delim(self.peek()) && self.redir_start().is_none() {
                break;
            }
            if let Some(fd) = self.redir_start() {
                cmd.redirs.push(self.redir(fd)?);
                continue;
            }
            let word = self.word(Ctx::Normal)?;
            if cmd.words.is_empty()
                && let Some((name, value)) = split_assignment(&word)
            {
                if self.peek() == Some('(') {
                    return unsupported("arrays");
                }
                cmd.assigns.push((name, value));
                continue;
            }
            cmd.words.push(word);
            if cmd.words.len() == 1 && cmd.assigns.is_empty() && self.starts("()") {
                let name = cmd.words[0].literal().map(str::to_string);
                if let Some(name) = name {
                    self.i += 2;
                    return self.func_body(name);
                }
            }
        }
        if cmd.words.is_empty() && cmd.assigns.is_empty() && cmd.redirs.is_empty() {
            return syntax(format!("expected a command, found {:?}", self.rest_preview()));
        }
        Ok(Command::Simple(cmd))
    }

    /// One word in context `ctx`.
    fn word(&mut self, ctx: Ctx) -> R<Word> {
        let mut parts: Vec<Part> = Vec::new();
        let lit = |parts: &mut Vec<Part>, c: char| match parts.last_mut() {
            Some(Part::Lit(s)) => s.push(c),
            _ => parts.push(Part::Lit(c.to_string())),
        };
        while let Some(c) = self.peek() {
            let end = match ctx {
                Ctx::Normal => is_delim(Some(c)),
                Ctx::Brace => c == '}',
                Ctx::Slash => c == '}' || c == '/',
            };
            if end {
                break;
            }
            match c {
                '\'' => {
                    self.i += 1;
                    let start = self.i;
                    while self.peek().is_some_and(|c| c != '\'') {
                        self.i += 1;
                    }
                    if self.peek().is_none() {
                        return syntax("unterminated quoted string");
                    }
                    parts.push(Part::Quoted(self.s[start..self.i].iter().collect()));
                    self.i += 1;
                }
                '"' => {
                    self.i += 1;
                    self.double_quoted(&mut parts)?;
                }
                '\\' => {
                    self.i += 1;
                    match self.peek() {
                        Some('\n') => self.i += 1,
                        Some(c) => {
                            self.i += 1;
                            parts.push(Part::Quoted(c.to_string()));
                        }
                        None => lit(&mut parts, '\\'),
                    }
                }
                '$' => parts.push(self.dollar(false)?),
                '`' => parts.push(self.backquoted(false)?),
                c => {
                    self.i += 1;
                    lit(&mut parts, c);
                }
            }
        }
        Ok(Word(parts))
    }

    fn double_quoted(&mut self, parts: &mut Vec<Part>) -> R<()> {
        let mut text = String::new();
        let flush = |parts: &mut Vec<Part>, text: &mut String| {
            if !text.is_empty() {
                parts.push(Part::Quoted(std::mem::take(text)));
            }
        };
        // `""` is an empty quoted word, not nothing.
        parts.push(Part::Quoted(String::new()));
        loop {
            match self.peek() {
                None => return syntax("unterminated quoted string"),
                Some('"') => {
                    self.i += 1;
                    flush(parts, &mut text);
                    return Ok(());
                }
                Some('\\') => {
                    match self.peek_at(1) {
                        Some(c @ ('"' | '\\' | '$' | '`')) => text.push(c),
                        Some('\n') => {}
                        Some(c) => {
                            text.push('\\');
                            text.push(c);
                        }
                        None => return syntax("unterminated quoted string"),
                    }
                    self.i += 2;
                }
                Some('$') => {
                    flush(parts, &mut text);
                    parts.push(self.dollar(true)?);
                }
                Some('`') => {
                    flush(parts, &mut text);
                    parts.push(self.backquoted(true)?);
                }
                Some(c) => {
                    text.push(c);
                    self.i += 1;
                }
            }
        }
    }

    fn backquoted(&mut self, quoted: bool) -> R<Part> {
        self.i += 1;
        let mut inner = String::new();
        loop {
            match self.peek() {
                None => return syntax("unterminated backquote"),
                Some('`') => {
                    self.i += 1;
                    break;
                }
                Some('\\') if matches!(self.peek_at(1), Some('`' | '\\' | '$')) => {
                    inner.push(self.s[self.i + 1]);
                    self.i += 2;
                }
                Some(c) => {
                    inner.push(c);
                    self.i += 1;
                }
            }
        }
        let list = parse(&inner)?;
        Ok(Part::Cmd {
            list: Rc::new(list),
            quoted,
        })
    }

    /// After `$`: an expansion, or a literal `$`.
    fn dollar(&mut self, quoted: bool) -> R<Part> {
        self.i += 1;
        if self.starts("((") {
            self.i += 2;
            let expr = self.until_double_paren()?;
            return Ok(Part::Arith { expr, quoted });
        }
        match self.peek() {
            Some('(') => {
                self.i += 1;
                let list = self.list(&[])?;
                self.expect_char(')')?;
                Ok(Part::Cmd {
                    list: Rc::new(list),
                    quoted,
                })
            }
            Some('{') => {
                self.i += 1;
                let exp = self.braced()?;
                Ok(Part::Param { exp, quoted })
            }
            Some(c) if is_name_start(c) => {
                let start = self.i;
                while self.peek().is_some_and(is_name_char) {
                    self.i += 1;
                }
                let name = self.s[start..self.i].iter().collect();
                Ok(Part::Param {
                    exp: ParamExp {
                        name,
                        op: ParamOp::Plain,
                    },
                    quoted,
                })
            }
            Some(c @ ('?' | '#' | '@' | '*' | '$' | '!' | '-' | '0'..='9')) => {
                self.i += 1;
                Ok(Part::Param {
                    exp: ParamExp {
                        name: c.to_string(),
                        op: ParamOp::Plain,
                    },
                    quoted,
                })
            }
            _ => Ok(if quoted {
                Part::Quoted("$".into())
            } else {
                Part::Lit("$".into())
            }),
        }
    }

    /// After `${`: up to and including the closing brace.
    fn braced(&mut self) -> R<ParamExp> {
        if self.peek() == Some('#') && self.peek_at(1).is_some_and(|c| c != '}') {
            self.i += 1;
            let name = self.param_name()?;
            self.expect_close()?;
            return Ok(ParamExp {
                name,
                op: ParamOp::Length,
            });
        }
        if self.peek() == Some('!') {
            return unsupported("indirect expansion `${!name}`");
        }
        let name = self.param_name()?;
        if self.peek() == Some('[') {
            return unsupported("arrays");
        }
        let op = self.param_op()?;
        self.expect_close()?;
        Ok(ParamExp { name, op })
    }

    fn param_name(&mut self) -> R<String> {
        let start = self.i;
        match self.peek() {
            Some(c) if is_name_start(c) => {
                while self.peek().is_some_and(is_name_char) {
                    self.i += 1;
                }
            }
            Some(c) if c.is_ascii_digit() => {
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.i += 1;
                }
            }
            Some('?' | '#' | '@' | '*' | '$' | '!' | '-') => self.i += 1,
            _ => return syntax(format!("bad substitution near {:?}", self.rest_preview())),
        }
        Ok(self.s[start..self.i].iter().collect())
    }

    fn expect_close(&mut self) -> R<()> {
        if self.peek() == Some('}') {
            self.i += 1;
            Ok(())
        } else {
            syntax(format!("bad substitution near {:?}", self.rest_preview()))
        }
    }

    fn param_op(&mut self) -> R<ParamOp> {
        let colon = self.peek() == Some(':');
        let next = if colon { self.peek_at(1) } else { self.peek() };
        let with_word = |p: &mut Self, k: usize| -> R<Word> {
            p.i += k;
            p.word(Ctx::Brace)
        };
        let k = usize::from(colon) + 1;
        Ok(match next {
            Some('}') if !colon => ParamOp::Plain,
            Some('-') => ParamOp::Default {
                colon,
                word: with_word(self, k)?,
            },
            Some('=') => ParamOp::Assign {
                colon,
                word: with_word(self, k)?,
            },
            Some('+') => ParamOp::Alt {
                colon,
                word: with_word(self, k)?,
            },
            Some('?') => ParamOp::Error {
                colon,
                word: with_word(self, k)?,
            },
            _ if colon => {
                self.i += 1;
                let spec = self.raw_until('}');
                let (offset, length) = match spec.split_once(':') {
                    Some((o, l)) => (o.to_string(), Some(l.to_string())),
                    None => (spec, None),
                };
                ParamOp::Substring { offset, length }
            }
            Some(c @ ('#' | '%')) => {
                let longest = self.peek_at(1) == Some(c);
                self.i += 1 + usize::from(longest);
                let pattern = self.word(Ctx::Brace)?;
                if c == '#' {
                    ParamOp::TrimPrefix { longest, pattern }
                } else {
                    ParamOp::TrimSuffix { longest, pattern }
                }
            }
            Some('/') => {
                let all = self.peek_at(1) == Some('/');
                self.i += 1 + usize::from(all);
                let pattern = self.word(Ctx::Slash)?;
                let with = if self.peek() == Some('/') {
                    self.i += 1;
                    self.word(Ctx::Brace)?
                } else {
                    Word::default()
                };
                ParamOp::Replace { all, pattern, with }
            }
            _ => return syntax(format!("bad substitution near {:?}", self.rest_preview())),
        })
    }

    fn raw_until(&mut self, end: char) -> String {
        let start = self.i;
        while self.peek().is_some_and(|c| c != end) {
            self.i += 1;
        }
        self.s[start..self.i].iter().collect()
    }
}

/// `NAME=value` at the start of a simple command: the name and the value's word.
fn split_assignment(w: &Word) -> Option<(String, Word)> {
    let Some(Part::Lit(first)) = w.0.first() else {
        return None;
    };
    let (name, value) = first.split_once('=')?;
    if name.is_empty() || !name.starts_with(is_name_start) || !name.chars().all(is_name_char) {
        return None;
    }
    let mut parts = Vec::new();
    if !value.is_empty() {
        parts.push(Part::Lit(value.to_string()));
    }
    parts.extend(w.0[1..].iter().cloned());
    Some((name.to_string(), Word(parts)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(src: &str) -> List {
        parse(src).unwrap_or_else(|e| panic!("{src:?}: {e:?}"))
    }

    #[test]
    fn the_catalog_scripts_parse() {
        for src in [
            "until bin/zkCli.sh -server $CONN ls /; do sleep 5; done",
            "set -x; if [ ! -d /datadir/mysql ]; then mkdir /datadir/mysql; fi",
            "while ! nc -z svc 8083 </dev/null; do echo \"Waiting\"; sleep 10; done;\necho done",
            "echo yes | redis-cli -x -h svc --cluster create $(i=0; while [ $i -lt 6 ]; do printf $(nslookup r-${i}.svc | grep \"Address\" | awk \"{ print \\$3 }\")\":6379 \"; i=$((i+1)); done)",
            "/bootstrap/bootstrap.sh; source ${KAFKA_HOME}/.env; echo \"id ${HOSTNAME##*-}...\"; KAFKA_OPTS=\"${KAFKA_OPTS} x\" exec ${KAFKA_HOME}/bin/kafka-server-start.sh ${KAFKA_HOME}/server.properties;",
            "ZOOKEEPERPATH=`pwd` /etc/zookeeper/bootstrap.sh --servers=3",
            "exec ${KAFKA_HOME}/bin/kafka-mirror-maker.sh \\\n--consumer.config=\"/a\" \\\n--whitelist=.*",
            "/etc/cassandra/generate-cassandra-yaml.sh;\n/etc/cassandra-bootstrap/bootstrap wait & cassandra -f",
            "case $1 in a|b) echo ab;; *) echo other;; esac",
            "f() { echo in f; return 3; }; f; echo $?",
            "while IFS= read -r flag; do JVM_OPTS=\"${JVM_OPTS} $flag\"; done < /etc/x",
            "[[ \"$A\" = \"true\" && -n $B ]] && echo yes",
            "echo ${X:-default value} ${Y:+set} ${Z%%.*} ${W/a/b} ${V:1:2} ${#U}",
            "exec 2>&1; echo err >&2; cat <<< hi",
        ] {
            ok(src);
        }
    }

    #[test]
    fn unsupported_and_wrong_scripts_are_told_apart() {
        let kind = |src: &str| parse(src).unwrap_err().kind;
        assert_eq!(kind("cat <<EOF\nx\nEOF\n"), ErrorKind::Unsupported);
        assert_eq!(kind("a=(1 2)"), ErrorKind::Unsupported);
        assert_eq!(kind("for ((i=0;i<3;i++)); do :; done"), ErrorKind::Unsupported);
        assert_eq!(kind("echo 'unterminated"), ErrorKind::Syntax);
        assert_eq!(kind("if true; then echo"), ErrorKind::Syntax);
        assert_eq!(kind("fi"), ErrorKind::Syntax);
    }

    #[test]
    fn assignments_redirections_and_keywords() {
        let list = ok("A=1 B=\"x y\" cmd 2>/dev/null arg >>out");
        let Command::Simple(s) = &list[0].and_or.first.cmds[0] else {
            panic!("simple");
        };
        assert_eq!(s.assigns.len(), 2);
        assert_eq!(s.words.len(), 2);
        assert_eq!(s.redirs.len(), 2);
        assert_eq!(s.redirs[0].fd, Some(2));
        // `echo if` is a command with an argument, not a keyword.
        assert!(matches!(
            &ok("echo if then")[0].and_or.first.cmds[0],
            Command::Simple(_)
        ));
    }
}
