//! What the interpreter would make of a container's command line without running it: every
//! program it names, and what kudo-sim does with each (the audit of a package's commands).

use std::collections::HashMap;

use super::ast::{Command, Compound, List, Part, Word};
use super::{Container, Tree, parse, programs, standins};

/// How kudo-sim handles a program a command line names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handling {
    /// A shell builtin, or a function the script defines.
    Builtin,
    /// A program kudo-sim implements.
    Implemented,
    /// A long-running program kudo-sim stands in for (the server's name).
    StandIn(&'static str),
    /// Not run: it is deliberately not simulated, for this reason (exits 127).
    Refused(String),
    /// Not known to kudo-sim (exits 127).
    Unknown,
}

/// One program of a command line and its handling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// As written, with the container's literal environment expanded
    /// (`/bin/kafka-server-start.sh`).
    pub program: String,
    /// How kudo-sim treats the program.
    pub handling: Handling,
}

/// The programs `argv` runs in `c` (an empty command line runs the image's entrypoint), with the
/// files of its volumes (`volumes`: the scripts of ConfigMaps it runs are audited too), or the
/// syntax error a shell would stop at.
pub fn audit(c: &Container, argv: &[String], volumes: &HashMap<String, Tree>) -> Result<Vec<Use>, String> {
    let mut out = Vec::new();
    if argv.is_empty() {
        let handling = match standins::entrypoint(c) {
            Some(s) => Handling::StandIn(s.server),
            None if standins::shell_image(&c.image) => Handling::Implemented,
            None => Handling::Unknown,
        };
        out.push(Use {
            program: format!("the entrypoint of {}", c.image),
            handling,
        });
        return Ok(out);
    }
    let mut a = Auditor {
        c,
        volumes,
        out: &mut out,
        functions: Vec::new(),
        scripts: Vec::new(),
    };
    a.argv(argv)?;
    Ok(out)
}

struct Auditor<'a> {
    c: &'a Container,
    volumes: &'a HashMap<String, Tree>,
    out: &'a mut Vec<Use>,
    functions: Vec<String>,
    /// Script files audited so far.
    scripts: Vec<String>,
}

impl Auditor<'_> {
    fn push(&mut self, program: &str, handling: Handling) {
        self.out.push(Use {
            program: program.to_string(),
            handling,
        });
    }

    /// A command line as words: the program, then what it runs in turn.
    fn argv(&mut self, argv: &[String]) -> Result<(), String> {
        let name = argv[0].as_str();
        let base = super::fs::basename(name);
        let args = &argv[1..];
        if programs::shells::lookup(base).is_some() {
            self.push(name, Handling::Implemented);
            return match shell_script(args) {
                Some(script) => self.script(&script),
                None => Ok(()),
            };
        }
        if let Some(rest) = wrapped(base, args) {
            self.push(name, Handling::Builtin);
            return if rest.is_empty() { Ok(()) } else { self.argv(&rest) };
        }
        if !self.scripts.iter().any(|s| s == name)
            && let Some(text) = self.script_file(name)
        {
            self.scripts.push(name.to_string());
            self.push(name, Handling::Implemented);
            return self.script(&text);
        }
        let handling = self.handling(name, args);
        self.push(name, handling);
        Ok(())
    }

    /// The text of the shell script `name` is, when it is a file of one of the container's volumes.
    fn script_file(&self, name: &str) -> Option<String> {
        let m = self
            .c
            .mounts
            .iter()
            .filter(|m| name == m.path || name.starts_with(&format!("{}/", m.path.trim_end_matches('/'))))
            .max_by_key(|m| m.path.len())?;
        let rest = name[m.path.len()..].trim_start_matches('/');
        let rel = match (m.sub_path.trim_matches('/'), rest) {
            ("", r) => r.to_string(),
            (s, "") => s.to_string(),
            (s, r) => format!("{s}/{r}"),
        };
        let data = self.volumes.get(&m.volume)?.files().get(&rel)?;
        programs::shells::is_script(data).then(|| String::from_utf8_lossy(data).into_owned())
    }

    fn handling(&self, name: &str, args: &[String]) -> Handling {
        let base = super::fs::basename(name);
        if self.functions.iter().any(|f| f == base) || super::builtins::lookup(base).is_some() {
            return Handling::Builtin;
        }
        if programs::lookup(base).is_some() {
            return Handling::Implemented;
        }
        if let Some(k) = standins::program(base, args) {
            return Handling::StandIn(k.name);
        }
        if let Some(s) = standins::for_image_program(self.c, name) {
            return Handling::StandIn(s.server);
        }
        if let Some(why) = standins::refusal_in(&self.c.image, base) {
            return Handling::Refused(why.to_string());
        }
        Handling::Unknown
    }

    /// A script's commands. One using what the interpreter does not interpret is refused (it
    /// exits 127, or a known image's server takes over); one a shell would refuse is an error.
    fn script(&mut self, script: &str) -> Result<(), String> {
        match parse::parse(script) {
            Ok(list) => {
                self.list(&list);
                Ok(())
            }
            Err(e) if e.kind == parse::ErrorKind::Syntax => Err(super::builtins::parse_message(&e)),
            Err(e) => {
                let handling = match standins::for_image_program(self.c, "sh") {
                    Some(s) => Handling::StandIn(s.server),
                    None => Handling::Refused(super::builtins::parse_message(&e)),
                };
                self.push("sh", handling);
                Ok(())
            }
        }
    }

    fn list(&mut self, list: &List) {
        for item in list {
            let pipelines =
                std::iter::once(&item.and_or.first).chain(item.and_or.rest.iter().map(|(_, p)| p));
            for p in pipelines {
                for c in &p.cmds {
                    self.command(c);
                }
            }
        }
    }

    fn command(&mut self, c: &Command) {
        match c {
            Command::Simple(s) => {
                for w in s.words.iter().chain(s.assigns.iter().map(|(_, w)| w)) {
                    self.substitutions(w);
                }
                let words: Vec<String> = s.words.iter().map(|w| self.text(w)).collect();
                if !words.is_empty() {
                    let _ = self.argv(&words);
                }
            }
            Command::FuncDef(name, body) => {
                self.functions.push(name.clone());
                self.compound(body);
            }
            Command::Compound(comp, _) => self.compound(comp),
        }
    }

    fn compound(&mut self, c: &Compound) {
        match c {
            Compound::Brace(l) | Compound::Subshell(l) => self.list(l),
            Compound::If { branches, otherwise } => {
                for (cond, body) in branches {
                    self.list(cond);
                    self.list(body);
                }
                if let Some(o) = otherwise {
                    self.list(o);
                }
            }
            Compound::Loop { cond, body, .. } => {
                self.list(cond);
                self.list(body);
            }
            Compound::For { body, .. } => self.list(body),
            Compound::Case { arms, .. } => {
                for (_, body) in arms {
                    self.list(body);
                }
            }
            Compound::Cond(_) | Compound::Arith(_) => {}
        }
    }

    /// Programs run by the `$(…)` of a word.
    fn substitutions(&mut self, w: &Word) {
        for p in &w.0 {
            if let Part::Cmd { list, .. } = p {
                self.list(list);
            }
        }
    }

    /// A word's text with the container's literal environment expanded (other expansions empty).
    fn text(&self, w: &Word) -> String {
        w.0.iter()
            .map(|p| match p {
                Part::Lit(s) | Part::Quoted(s) => s.clone(),
                Part::Param { exp, .. } => self.c.env.get(&exp.name).cloned().unwrap_or_default(),
                Part::Cmd { .. } | Part::Arith { .. } => String::new(),
            })
            .collect()
    }
}

/// The command line a wrapper program (`exec`, `env`, `xargs`, `timeout`, …) runs, after its own
/// options and operands.
fn wrapped(program: &str, args: &[String]) -> Option<Vec<String>> {
    let with_value: &str = match program {
        "exec" | "command" | "nohup" => "",
        "env" => "uSC",
        "xargs" => "dnILsPaE",
        "timeout" => "sk",
        _ => return None,
    };
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let option = a.starts_with('-') && a.len() > 1;
        let assignment = program == "env" && a.contains('=');
        if option && a.len() == 2 && with_value.contains(&a[1..]) {
            i += 2;
        } else if option || assignment {
            i += 1;
        } else if program == "timeout" && a.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
            break;
        } else {
            break;
        }
    }
    Some(args.get(i..).unwrap_or(&[]).to_vec())
}

/// The script of `sh -c SCRIPT` (the first operand after the options, `-c` anywhere in them).
fn shell_script(args: &[String]) -> Option<String> {
    let mut command = false;
    for a in args {
        if a.starts_with('-') && a.len() > 1 && !a.starts_with("--") {
            command |= a.contains('c');
            continue;
        }
        return command.then(|| a.clone());
    }
    None
}
