//! The programs kudo-sim implements, by name (the base name of the command, so `/bin/cat` and
//! `cat` are the same program).

pub mod clients;
pub(crate) mod coreutils;
pub(crate) mod openssl;
pub(crate) mod shells;
pub(crate) mod tar;
pub(crate) mod text;

use super::exec::{Flow, Io, Shell};

/// A program: its status when it ends, or the flow that replaces the process (a server).
pub(crate) type Program = fn(&mut Shell<'_>, &Io, &[String]) -> Result<i32, Flow>;

/// The program called `name`, if kudo-sim implements it.
pub(crate) fn lookup(name: &str) -> Option<Program> {
    let own: Option<Program> = match name {
        "tar" => Some(tar::tar),
        "openssl" => Some(openssl::openssl),
        _ => None,
    };
    shells::lookup(name)
        .or_else(|| coreutils::lookup(name))
        .or_else(|| text::lookup(name))
        .or_else(|| clients::lookup(name))
        .or(own)
}

/// Every program name [`lookup`] knows (for documentation and the audit of packages).
pub fn names() -> Vec<&'static str> {
    let mut all: Vec<&'static str> = shells::NAMES
        .iter()
        .chain(coreutils::NAMES)
        .chain(text::NAMES)
        .chain(clients::NAMES)
        .chain(&["tar", "openssl"])
        .copied()
        .collect();
    all.sort_unstable();
    all
}

/// Options of a command line: single-letter flags (`-rf`) and the rest, `--` ending options.
pub(crate) struct Args {
    pub flags: Vec<char>,
    pub long: Vec<String>,
    pub operands: Vec<String>,
}

impl Args {
    /// Splits `args` (without the program name); letters in `with_value` take the next argument,
    /// kept in `values`.
    pub fn parse(args: &[String], with_value: &str) -> (Args, Vec<(char, String)>) {
        let mut a = Args {
            flags: Vec::new(),
            long: Vec::new(),
            operands: Vec::new(),
        };
        let mut values = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let s = &args[i];
            if s == "--" {
                a.operands.extend(args[i + 1..].iter().cloned());
                break;
            }
            if let Some(long) = s.strip_prefix("--") {
                a.long.push(long.to_string());
            } else if s.starts_with('-') && s.len() > 1 {
                let chars: Vec<char> = s[1..].chars().collect();
                for (k, c) in chars.iter().enumerate() {
                    if with_value.contains(*c) {
                        let rest: String = chars[k + 1..].iter().collect();
                        let v = if rest.is_empty() {
                            i += 1;
                            args.get(i).cloned().unwrap_or_default()
                        } else {
                            rest
                        };
                        values.push((*c, v));
                        break;
                    }
                    a.flags.push(*c);
                }
            } else {
                a.operands.push(s.clone());
            }
            i += 1;
        }
        (a, values)
    }

    pub fn has(&self, c: char) -> bool {
        self.flags.contains(&c)
    }
}
