//! Word expansion: parameters, command substitution, arithmetic, then field splitting on `IFS`
//! and pathname expansion of unquoted patterns (a pattern that matches nothing stays as it is),
//! and quote removal.

use super::ast::{ParamExp, ParamOp, Part, Word};
use super::exec::{Flow, Shell};

/// A piece of an expanded word: text, and whether it came from quotes.
struct Piece {
    text: String,
    quoted: bool,
    /// Unquoted text from an expansion: split on `IFS`.
    split: bool,
}

/// Marks a field boundary inside "$@".
const FIELD_BREAK: char = '\u{0}';

impl Shell<'_> {
    /// A word as the fields of a command line.
    pub fn expand_fields(&mut self, w: &Word) -> Result<Vec<String>, Flow> {
        // "$@": one field per positional parameter, none when there are none.
        let all_args = |p: &Part| {
            matches!(p, Part::Param { exp, quoted: true }
                if exp.name == "@" && matches!(exp.op, ParamOp::Plain))
        };
        match w.0.as_slice() {
            [Part::Quoted(q), p] if q.is_empty() && all_args(p) => return Ok(self.args.clone()),
            [p] if all_args(p) => return Ok(self.args.clone()),
            _ => {}
        }
        let pieces = self.pieces(w)?;
        let fields = self.split(&pieces);
        let mut out = Vec::new();
        for (text, pattern, had_quotes) in fields {
            if text.is_empty() && !had_quotes {
                continue;
            }
            match pattern {
                Some(p) => {
                    let matches = self.glob(&p);
                    if matches.is_empty() {
                        out.push(text);
                    } else {
                        out.extend(matches);
                    }
                }
                None => out.push(text),
            }
        }
        Ok(out)
    }

    /// A word as one string (assignments, redirection targets, `case` subjects).
    pub fn expand_string(&mut self, w: &Word) -> Result<String, Flow> {
        let pieces = self.pieces(w)?;
        Ok(pieces
            .iter()
            .map(|p| p.text.replace(FIELD_BREAK, " "))
            .collect::<String>())
    }

    /// A word as a pattern: quoted characters escaped so they match themselves.
    pub fn expand_pattern(&mut self, w: &Word) -> Result<String, Flow> {
        let pieces = self.pieces(w)?;
        let mut out = String::new();
        for p in pieces {
            if p.quoted {
                out.push_str(&super::pattern::escape(&p.text));
            } else {
                out.push_str(&p.text);
            }
        }
        Ok(out)
    }

    fn pieces(&mut self, w: &Word) -> Result<Vec<Piece>, Flow> {
        let mut out = Vec::new();
        for part in &w.0 {
            match part {
                Part::Lit(s) => out.push(Piece {
                    text: s.clone(),
                    quoted: false,
                    split: false,
                }),
                Part::Quoted(s) => out.push(Piece {
                    text: s.clone(),
                    quoted: true,
                    split: false,
                }),
                Part::Param { exp, quoted } => {
                    let text = self.param(exp, *quoted)?;
                    out.push(Piece {
                        text,
                        quoted: *quoted,
                        split: !*quoted,
                    });
                }
                Part::Cmd { list, quoted } => {
                    let text = self.command_substitution(list)?;
                    out.push(Piece {
                        text,
                        quoted: *quoted,
                        split: !*quoted,
                    });
                }
                Part::Arith { expr, quoted } => {
                    let expr = self.expand_arith_text(expr)?;
                    let n = self.arith(&expr)?;
                    out.push(Piece {
                        text: n.to_string(),
                        quoted: *quoted,
                        split: !*quoted,
                    });
                }
            }
        }
        Ok(out)
    }

    /// `$(…)`: the list's output without its trailing newlines; its status becomes `$?`.
    fn command_substitution(&mut self, list: &super::ast::List) -> Result<String, Flow> {
        self.substitutions += 1;
        let io = self.base.clone();
        let (data, flow) = self.capture(&io, |sh, io| {
            let saved = std::mem::replace(&mut sh.base, io.clone());
            let flow = sh.subshell(|sh| sh.run_list(list));
            sh.base = saved;
            flow
        });
        if let Flow::Runs(r) = flow {
            return Err(Flow::Runs(r));
        }
        let mut text = String::from_utf8_lossy(&data).into_owned();
        while text.ends_with('\n') {
            text.pop();
        }
        Ok(text)
    }

    /// Splits pieces into fields: `(text, pattern when it has unquoted glob characters, quoted)`.
    fn split(&self, pieces: &[Piece]) -> Vec<(String, Option<String>, bool)> {
        /// A field being built: its text, its pattern, whether that has glob characters.
        #[derive(Default)]
        struct Field {
            text: String,
            pattern: String,
            globby: bool,
            quoted: bool,
        }
        let ifs = self.var("IFS").unwrap_or_else(|| " \t\n".into());
        let mut fields = Vec::new();
        let mut cur: Option<Field> = None;
        let finish = |f: Field| (f.text, f.globby.then_some(f.pattern), f.quoted);
        for p in pieces {
            if p.quoted {
                cur.get_or_insert_with(Field::default).quoted = true;
            }
            for c in p.text.chars() {
                if c == FIELD_BREAK {
                    fields.extend(cur.take().map(finish));
                    cur = Some(Field {
                        quoted: true,
                        ..Field::default()
                    });
                    continue;
                }
                if p.split && ifs.contains(c) {
                    fields.extend(cur.take().map(finish));
                    continue;
                }
                let f = cur.get_or_insert_with(Field::default);
                f.text.push(c);
                if p.quoted {
                    f.pattern.push_str(&super::pattern::escape(&c.to_string()));
                } else {
                    f.pattern.push(c);
                    f.globby |= matches!(c, '*' | '?' | '[');
                }
            }
        }
        fields.extend(cur.take().map(finish));
        fields
    }

    /// The value of a parameter expansion.
    fn param(&mut self, exp: &ParamExp, quoted: bool) -> Result<String, Flow> {
        if exp.name == "@" || exp.name == "*" {
            let sep = if exp.name == "@" && quoted {
                FIELD_BREAK.to_string()
            } else {
                self.var("IFS")
                    .and_then(|s| s.chars().next())
                    .map(String::from)
                    .unwrap_or_default()
            };
            return Ok(self.args.join(&sep));
        }
        let value = self.var(&exp.name);
        let set = value.is_some();
        let text = value.clone().unwrap_or_default();
        let unset_or_empty = |colon: bool| !set || (colon && text.is_empty());
        match &exp.op {
            ParamOp::Plain => {
                if !set && self.opts.nounset && !exp.name.chars().all(|c| c.is_ascii_digit()) {
                    return Err(self.fatal(&format!("{}: parameter not set", exp.name), 2));
                }
                Ok(text)
            }
            ParamOp::Length => Ok(text.chars().count().to_string()),
            ParamOp::Default { colon, word } => {
                if unset_or_empty(*colon) {
                    self.expand_string(word)
                } else {
                    Ok(text)
                }
            }
            ParamOp::Assign { colon, word } => {
                if unset_or_empty(*colon) {
                    let v = self.expand_string(word)?;
                    self.set_var(&exp.name, v.clone());
                    Ok(v)
                } else {
                    Ok(text)
                }
            }
            ParamOp::Alt { colon, word } => {
                if unset_or_empty(*colon) {
                    Ok(String::new())
                } else {
                    self.expand_string(word)
                }
            }
            ParamOp::Error { colon, word } => {
                if unset_or_empty(*colon) {
                    let msg = self.expand_string(word)?;
                    let msg = if msg.is_empty() {
                        "parameter null or not set".into()
                    } else {
                        msg
                    };
                    Err(self.fatal(&format!("{}: {msg}", exp.name), 2))
                } else {
                    Ok(text)
                }
            }
            ParamOp::TrimPrefix { longest, pattern } => {
                let p = self.expand_pattern(pattern)?;
                Ok(super::pattern::trim_prefix(&text, &p, *longest))
            }
            ParamOp::TrimSuffix { longest, pattern } => {
                let p = self.expand_pattern(pattern)?;
                Ok(super::pattern::trim_suffix(&text, &p, *longest))
            }
            ParamOp::Substring { offset, length } => self.substring(&text, offset, length.as_deref()),
            ParamOp::Replace { all, pattern, with } => {
                let p = self.expand_pattern(pattern)?;
                let r = self.expand_string(with)?;
                Ok(super::pattern::replace(&text, &p, &r, *all))
            }
        }
    }

    fn substring(&mut self, text: &str, offset: &str, length: Option<&str>) -> Result<String, Flow> {
        let chars: Vec<char> = text.chars().collect();
        let n = chars.len() as i64;
        let off = self.arith(offset.trim())?;
        let start = if off < 0 { (n + off).max(0) } else { off.min(n) };
        let end = match length {
            None => n,
            Some(l) => {
                let l = self.arith(l.trim())?;
                if l < 0 {
                    (n + l).max(start)
                } else {
                    (start + l).min(n)
                }
            }
        };
        Ok(chars[start as usize..end.max(start) as usize].iter().collect())
    }

    /// The text of `$((…))` with its `$` expansions done (bare names are read by the evaluator).
    fn expand_arith_text(&mut self, expr: &str) -> Result<String, Flow> {
        if !expr.contains('$') && !expr.contains('`') {
            return Ok(expr.to_string());
        }
        let word = super::parse::parse(&format!("echo {expr}")).ok().and_then(|l| {
            match l.into_iter().next()?.and_or.first.cmds.into_iter().next()? {
                super::ast::Command::Simple(s) => Some(s.words),
                _ => None,
            }
        });
        let Some(words) = word else {
            return Err(self.fatal(&format!("arithmetic expression: syntax error: \"{expr}\""), 2));
        };
        let mut out = Vec::new();
        for w in &words[1..] {
            out.push(self.expand_string(w)?);
        }
        Ok(out.join(" "))
    }
}
