//! `$((…))` and `((…))`: shell arithmetic on 64-bit integers, with variables, assignments and
//! the C operators (`? :`, `||`, `&&`, comparisons, bit operators, `+ - * / % **`, `++`/`--`).

use super::exec::{Flow, Shell};

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(i64),
    Name(String),
    Op(&'static str),
}

const OPS: [&str; 38] = [
    "<<=", ">>=", "**", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=", "*=", "/=",
    "%=", "&=", "|=", "^=", "+", "-", "*", "/", "%", "<", ">", "&", "|", "^", "!", "~", "?", ":", "=", "(",
    ")",
];

fn lex(src: &str) -> Result<Vec<Tok>, String> {
    let s: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < s.len() {
        let c = s[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < s.len() && s[i].is_ascii_alphanumeric() {
                i += 1;
            }
            let t: String = s[start..i].iter().collect();
            out.push(Tok::Num(number(&t)?));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == '_') {
                i += 1;
            }
            out.push(Tok::Name(s[start..i].iter().collect()));
        } else if c == ',' {
            return Err("the comma operator".into());
        } else {
            let rest: String = s[i..].iter().take(3).collect();
            let op = OPS
                .iter()
                .find(|o| rest.starts_with(*o))
                .ok_or(format!("unexpected `{c}`"))?;
            out.push(Tok::Op(op));
            i += op.len();
        }
    }
    Ok(out)
}

fn number(t: &str) -> Result<i64, String> {
    let bad = || format!("{t}: value too great for base (error token is \"{t}\")");
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).map_err(|_| bad())
    } else if t.len() > 1 && t.starts_with('0') {
        i64::from_str_radix(&t[1..], 8).map_err(|_| bad())
    } else {
        t.parse().map_err(|_| bad())
    }
}

struct Eval<'s, 'a> {
    sh: &'s mut Shell<'a>,
    toks: Vec<Tok>,
    i: usize,
    /// Inside the untaken branch of `&&`, `||` or `?:`: no assignments happen.
    skip: u32,
}

impl Eval<'_, '_> {
    fn peek_op(&self) -> Option<&'static str> {
        match self.toks.get(self.i) {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn eat(&mut self, op: &str) -> bool {
        if self.peek_op() == Some(op) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value_of(&self, name: &str) -> Result<i64, String> {
        let v = self.sh.var(name).unwrap_or_default();
        let v = v.trim();
        if v.is_empty() {
            Ok(0)
        } else {
            number(v).or_else(|_| lex_value(v))
        }
    }

    fn assign(&mut self, name: &str, v: i64) {
        if self.skip == 0 {
            self.sh.set_var(name, v.to_string());
        }
    }

    fn expr(&mut self) -> Result<i64, String> {
        if let (Some(Tok::Name(n)), Some(Tok::Op(op))) =
            (self.toks.get(self.i).cloned(), self.toks.get(self.i + 1))
            && op.ends_with('=')
            && !matches!(*op, "==" | "!=" | "<=" | ">=")
        {
            let op = *op;
            self.i += 2;
            let rhs = self.expr()?;
            let v = if op == "=" {
                rhs
            } else {
                binary(&op[..op.len() - 1], self.value_of(&n)?, rhs)?
            };
            self.assign(&n, v);
            return Ok(v);
        }
        self.ternary()
    }

    fn ternary(&mut self) -> Result<i64, String> {
        let c = self.binary(0)?;
        if !self.eat("?") {
            return Ok(c);
        }
        self.skip += u32::from(c == 0);
        let a = self.expr()?;
        self.skip -= u32::from(c == 0);
        if !self.eat(":") {
            return Err("expected `:`".into());
        }
        self.skip += u32::from(c != 0);
        let b = self.expr()?;
        self.skip -= u32::from(c != 0);
        Ok(if c != 0 { a } else { b })
    }

    fn binary(&mut self, min: u8) -> Result<i64, String> {
        let mut lhs = self.unary()?;
        while let Some(op) = self.peek_op() {
            let Some(prec) = precedence(op) else { break };
            if prec < min {
                break;
            }
            self.i += 1;
            let short = (op == "&&" && lhs == 0) || (op == "||" && lhs != 0);
            self.skip += u32::from(short);
            let next = if op == "**" { prec } else { prec + 1 };
            let rhs = self.binary(next)?;
            self.skip -= u32::from(short);
            lhs = binary(op, lhs, rhs)?;
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<i64, String> {
        for op in ["++", "--"] {
            if self.eat(op) {
                let Some(Tok::Name(n)) = self.toks.get(self.i).cloned() else {
                    return Err(format!("`{op}` needs a variable"));
                };
                self.i += 1;
                let v = self.value_of(&n)? + if op == "++" { 1 } else { -1 };
                self.assign(&n, v);
                return Ok(v);
            }
        }
        if self.eat("-") {
            return Ok(self.unary()?.wrapping_neg());
        }
        if self.eat("+") {
            return self.unary();
        }
        if self.eat("!") {
            return Ok(i64::from(self.unary()? == 0));
        }
        if self.eat("~") {
            return Ok(!self.unary()?);
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<i64, String> {
        match self.toks.get(self.i).cloned() {
            Some(Tok::Num(n)) => {
                self.i += 1;
                Ok(n)
            }
            Some(Tok::Name(n)) => {
                self.i += 1;
                let v = self.value_of(&n)?;
                for op in ["++", "--"] {
                    if self.eat(op) {
                        self.assign(&n, v + if op == "++" { 1 } else { -1 });
                    }
                }
                Ok(v)
            }
            Some(Tok::Op("(")) => {
                self.i += 1;
                let v = self.expr()?;
                if !self.eat(")") {
                    return Err("expected `)`".into());
                }
                Ok(v)
            }
            Some(t) => Err(format!(
                "syntax error: operand expected (error token is \"{t:?}\")"
            )),
            None => Err("syntax error: operand expected".into()),
        }
    }
}

/// A variable holding an expression (`a=b+1`): evaluated no deeper than that.
fn lex_value(v: &str) -> Result<i64, String> {
    match lex(v)?.as_slice() {
        [Tok::Num(n)] => Ok(*n),
        _ => Err(format!("{v}: syntax error in expression")),
    }
}

fn precedence(op: &str) -> Option<u8> {
    Some(match op {
        "||" => 1,
        "&&" => 2,
        "|" => 3,
        "^" => 4,
        "&" => 5,
        "==" | "!=" => 6,
        "<" | ">" | "<=" | ">=" => 7,
        "<<" | ">>" => 8,
        "+" | "-" => 9,
        "*" | "/" | "%" => 10,
        "**" => 11,
        _ => return None,
    })
}

fn binary(op: &str, a: i64, b: i64) -> Result<i64, String> {
    Ok(match op {
        "||" => i64::from(a != 0 || b != 0),
        "&&" => i64::from(a != 0 && b != 0),
        "|" => a | b,
        "^" => a ^ b,
        "&" => a & b,
        "==" => i64::from(a == b),
        "!=" => i64::from(a != b),
        "<" => i64::from(a < b),
        ">" => i64::from(a > b),
        "<=" => i64::from(a <= b),
        ">=" => i64::from(a >= b),
        "<<" => a.wrapping_shl(b as u32),
        ">>" => a.wrapping_shr(b as u32),
        "+" => a.wrapping_add(b),
        "-" => a.wrapping_sub(b),
        "*" => a.wrapping_mul(b),
        "/" | "%" if b == 0 => return Err("division by 0".into()),
        "/" => a.wrapping_div(b),
        "%" => a.wrapping_rem(b),
        "**" if b < 0 => return Err("exponent less than 0".into()),
        "**" => a.wrapping_pow(b as u32),
        _ => return Err(format!("unknown operator {op}")),
    })
}

impl Shell<'_> {
    /// Evaluates an arithmetic expression; an error ends the shell, as in a real one.
    pub fn arith(&mut self, src: &str) -> Result<i64, Flow> {
        let result = lex(src).and_then(|toks| {
            if toks.is_empty() {
                return Ok(0);
            }
            let mut e = Eval {
                sh: self,
                toks,
                i: 0,
                skip: 0,
            };
            let v = e.expr()?;
            if e.i < e.toks.len() {
                return Err(format!(
                    "syntax error in expression (error token is \"{:?}\")",
                    e.toks[e.i]
                ));
            }
            Ok(v)
        });
        result.map_err(|e| self.fatal(&format!("arithmetic expression: {e}: \"{src}\""), 2))
    }
}
