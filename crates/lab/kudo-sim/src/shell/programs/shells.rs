//! `sh`, `bash`, `ash`, `dash` as programs: `-c SCRIPT`, a script file, or a script on stdin, in
//! a new shell process (only exported variables carried over).

use super::Program;
use crate::shell::builtins;
use crate::shell::exec::{Flow, Io, Shell};
use crate::shell::parse::{self, ErrorKind};

pub(crate) const NAMES: &[&str] = &["sh", "bash", "ash", "dash"];

pub(crate) fn lookup(name: &str) -> Option<Program> {
    NAMES.contains(&name).then_some(shell as Program)
}

/// Whether `data` is a shell script a shell would run (`#!/bin/sh`, `#!/usr/bin/env bash`, or no
/// interpreter line at all).
pub(crate) fn is_script(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    match text.strip_prefix("#!") {
        None => true,
        Some(rest) => {
            let line = rest.lines().next().unwrap_or("");
            let mut words = line.split_whitespace();
            let interp = words.next().unwrap_or("");
            let prog = if crate::shell::fs::basename(interp) == "env" {
                words.next().unwrap_or("")
            } else {
                crate::shell::fs::basename(interp)
            };
            NAMES.contains(&prog)
        }
    }
}

/// Runs a script file named as a command (`./run.sh`): it must be executable.
pub(crate) fn run_script_file(
    sh: &mut Shell<'_>,
    io: &Io,
    path: &str,
    script: &[u8],
    args: &[String],
) -> Result<i32, Flow> {
    if sh.meta(path).mode & 0o111 == 0 {
        sh.eprint(io, format!("{}: {path}: Permission denied\n", sh.arg0));
        return Ok(126);
    }
    let bash = String::from_utf8_lossy(script)
        .lines()
        .next()
        .is_some_and(|l| l.contains("bash"));
    let text = String::from_utf8_lossy(script).into_owned();
    child(
        sh,
        io,
        &text,
        path,
        args,
        Flags {
            bash,
            ..Flags::default()
        },
    )
}

#[derive(Default, Clone, Copy)]
struct Flags {
    bash: bool,
    errexit: bool,
    xtrace: bool,
    nounset: bool,
    pipefail: bool,
}

/// `sh [-eux] [-o opt] (-c SCRIPT [NAME [ARG…]] | FILE [ARG…])`.
fn shell(sh: &mut Shell<'_>, io: &Io, argv: &[String]) -> Result<i32, Flow> {
    let mut flags = Flags {
        bash: crate::shell::fs::basename(&argv[0]) == "bash",
        ..Flags::default()
    };
    let mut command = false;
    let mut i = 1;
    while let Some(a) = argv.get(i) {
        if a == "-o" || a == "+o" {
            if argv.get(i + 1).map(String::as_str) == Some("pipefail") {
                flags.pipefail = a == "-o";
            }
            i += 2;
            continue;
        }
        if a == "--" {
            i += 1;
            break;
        }
        if !(a.starts_with('-') && a.len() > 1) {
            break;
        }
        for c in a[1..].chars() {
            match c {
                'c' => command = true,
                'e' => flags.errexit = true,
                'x' => flags.xtrace = true,
                'u' => flags.nounset = true,
                'l' | 'i' | 's' | 'v' => {}
                other => {
                    sh.eprint(io, format!("{}: -{other}: invalid option\n", argv[0]));
                    return Ok(2);
                }
            }
        }
        i += 1;
    }
    let rest = &argv[i.min(argv.len())..];
    if command {
        let Some(script) = rest.first() else {
            sh.eprint(io, format!("{}: -c: option requires an argument\n", argv[0]));
            return Ok(2);
        };
        let name = rest.get(1).cloned().unwrap_or_else(|| argv[0].clone());
        let args = rest.get(2..).unwrap_or(&[]).to_vec();
        return child(sh, io, script, &name, &args, flags);
    }
    match rest.first() {
        Some(file) => {
            let path = sh.abs(file);
            let Some(data) = sh.read_file(&path) else {
                sh.eprint(io, format!("{}: 0: cannot open {file}: No such file\n", argv[0]));
                return Ok(127);
            };
            let text = String::from_utf8_lossy(&data).into_owned();
            child(sh, io, &text, file, &rest[1..], flags)
        }
        None => {
            let text = String::from_utf8_lossy(&io.input.borrow_mut().rest()).into_owned();
            child(sh, io, &text, &argv[0], &[], flags)
        }
    }
}

/// Runs `script` as a new shell process: exported variables only, no functions, its own options.
fn child(
    sh: &mut Shell<'_>,
    io: &Io,
    script: &str,
    name: &str,
    args: &[String],
    f: Flags,
) -> Result<i32, Flow> {
    let list = match parse::parse(script) {
        Ok(l) => l,
        Err(e) if e.kind == ErrorKind::Unsupported => {
            if let Some(s) = crate::shell::standins::for_image_program(sh.ctr, name) {
                return Err(Flow::Runs(crate::shell::Running::Serving(s)));
            }
            sh.eprint(io, format!("{name}: {}\n", builtins::parse_message(&e)));
            return Ok(127);
        }
        Err(e) => {
            sh.eprint(io, format!("{name}: {}\n", builtins::parse_message(&e)));
            return Ok(2);
        }
    };
    let flow = sh.subshell(|sh| {
        let exported = sh.exported.clone();
        sh.vars.retain(|k, _| {
            exported.contains(k) || matches!(k.as_str(), "IFS" | "PATH" | "HOME" | "HOSTNAME")
        });
        sh.funcs.clear();
        sh.in_condition = 0;
        sh.args = args.to_vec();
        sh.arg0 = name.to_string();
        sh.bash = f.bash;
        sh.opts.errexit = f.errexit;
        sh.opts.xtrace = f.xtrace;
        sh.opts.nounset = f.nounset;
        sh.opts.pipefail = f.pipefail;
        let saved = std::mem::replace(&mut sh.base, io.clone());
        let flow = sh.run_list(&list);
        sh.base = saved;
        flow
    });
    match flow {
        Flow::Runs(r) => Err(Flow::Runs(r)),
        _ => Ok(sh.status),
    }
}

/// A container's command line: a program, with the builtins that also exist as programs.
pub(crate) fn exec_program(sh: &mut Shell<'_>, io: &Io, argv: &[String]) -> Flow {
    let name = crate::shell::fs::basename(&argv[0]);
    if builtins::ALSO_PROGRAMS.contains(&name)
        && let Some(b) = builtins::lookup(name)
    {
        let mut argv = argv.to_vec();
        argv[0] = name.to_string();
        return match b(sh, io, &argv) {
            Flow::Next => Flow::Exit(sh.status),
            other => other,
        };
    }
    match sh.run_program(argv, io) {
        Ok(st) => Flow::Exit(st),
        Err(f) => f,
    }
}
