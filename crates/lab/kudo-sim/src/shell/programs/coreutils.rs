//! The coreutils/busybox programs containers use, on the pod's in-memory filesystem.

use super::{Args, Program};
use crate::shell::MAX_SLEEP_MS;
use crate::shell::exec::{Flow, Io, Shell};
use crate::shell::fs::{Meta, basename, parent};

pub(crate) const NAMES: &[&str] = &[
    "true", "false", "echo", "printf", "cat", "cp", "mv", "rm", "ls", "mkdir", "touch", "stat", "chmod",
    "chown", "ln", "head", "tail", "wc", "tr", "cut", "sort", "uniq", "tee", "basename", "dirname", "date",
    "env", "printenv", "seq", "id", "whoami", "hostname", "sleep", "base64", "sysctl", "uname", "nproc",
    "mktemp", "realpath", "readlink", "which", "expr", "sync", "rmdir",
];

pub(crate) fn lookup(name: &str) -> Option<Program> {
    Some(match name {
        "true" => |_, _, _| Ok(0),
        "false" => |_, _, _| Ok(1),
        "echo" => echo,
        "printf" => printf_cmd,
        "cat" => cat,
        "cp" => cp,
        "mv" => mv,
        "rm" => rm,
        "rmdir" => rmdir,
        "ls" => ls,
        "mkdir" => mkdir,
        "touch" => touch,
        "stat" => stat,
        "chmod" => chmod,
        "chown" => chown,
        "ln" => ln,
        "head" | "tail" => head_tail,
        "wc" => wc,
        "tr" => tr,
        "cut" => cut,
        "sort" => sort,
        "uniq" => uniq,
        "tee" => tee,
        "basename" => basename_cmd,
        "dirname" => dirname_cmd,
        "date" => date,
        "env" | "printenv" => env,
        "seq" => seq,
        "id" | "whoami" => id,
        "hostname" => hostname,
        "sleep" => sleep,
        "base64" => base64,
        "sysctl" => sysctl,
        "uname" => |sh, io, a| {
            let all = a.iter().any(|x| x == "-a");
            let text = if all {
                format!("Linux {} 6.1.0 #1 SMP x86_64 GNU/Linux\n", sh.ctr.hostname)
            } else {
                "Linux\n".into()
            };
            sh.print(io, text);
            Ok(0)
        },
        "nproc" => |sh, io, _| {
            sh.print(io, "2\n");
            Ok(0)
        },
        "mktemp" => mktemp,
        "realpath" | "readlink" => realpath,
        "which" => which,
        "expr" => expr,
        "sync" => |_, _, _| Ok(0),
        _ => return None,
    })
}

/// The text of a command's input: its files, or stdin when there are none (or `-`).
pub(crate) fn inputs(sh: &mut Shell<'_>, io: &Io, prog: &str, files: &[String]) -> (Vec<u8>, i32) {
    if files.is_empty() {
        return (io.input.borrow_mut().rest(), 0);
    }
    let mut data = Vec::new();
    let mut st = 0;
    for f in files {
        if f == "-" {
            data.extend(io.input.borrow_mut().rest());
            continue;
        }
        let p = sh.abs(f);
        if sh.is_dir(&p) {
            sh.eprint(io, format!("{prog}: {f}: Is a directory\n"));
            st = 1;
            continue;
        }
        match sh.read_file(&p) {
            Some(d) => data.extend(d),
            None => {
                sh.eprint(io, format!("{prog}: {f}: No such file or directory\n"));
                st = if prog == "grep" { 2 } else { 1 };
            }
        }
    }
    (data, st)
}

/// The lines of a text (split at `\n` only: a `\r` stays, as in the tools' own output).
pub(crate) fn lines(data: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(data);
    let mut v: Vec<String> = text.split('\n').map(str::to_string).collect();
    if text.ends_with('\n') || text.is_empty() {
        v.pop();
    }
    v
}

/// Backslash escapes of `echo -e` and `printf` formats.
pub(crate) fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('f') => out.push('\x0c'),
            Some('v') => out.push('\x0b'),
            Some('e') => out.push('\x1b'),
            Some('0') => {
                let mut n = 0u32;
                for _ in 0..3 {
                    match it.peek().and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            n = n * 8 + d;
                            it.next();
                        }
                        None => break,
                    }
                }
                out.extend(char::from_u32(n));
            }
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

fn echo(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let mut newline = true;
    let mut escapes = false;
    let mut i = 1;
    while let Some(arg) = a.get(i) {
        if arg.len() < 2 || !arg.starts_with('-') || !arg[1..].chars().all(|c| "neE".contains(c)) {
            break;
        }
        for c in arg[1..].chars() {
            match c {
                'n' => newline = false,
                'e' => escapes = true,
                _ => escapes = false,
            }
        }
        i += 1;
    }
    let mut s = a[i..].join(" ");
    if escapes {
        s = unescape(&s);
    }
    if newline {
        s.push('\n');
    }
    sh.print(io, s);
    Ok(0)
}

fn printf_cmd(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let Some(format) = a.get(1) else {
        sh.eprint(io, "printf: usage: printf format [arguments]\n");
        return Ok(2);
    };
    match printf(format, &a[2..]) {
        Ok((s, st)) => {
            sh.print(io, s);
            if st != 0 {
                sh.eprint(io, "printf: invalid number\n");
            }
            Ok(st)
        }
        Err(e) => {
            sh.eprint(io, format!("printf: {e}\n"));
            Ok(1)
        }
    }
}

/// `printf FORMAT ARG…`: conversions `%s %b %c %d %i %u %o %x %X %f %e %g %%` with flags, width
/// and precision; the format is reused while arguments remain.
pub(crate) fn printf(format: &str, args: &[String]) -> Result<(String, i32), String> {
    let fmt: Vec<char> = unescape(format).chars().collect();
    let mut out = String::new();
    let mut ai = 0;
    let mut status = 0;
    loop {
        let mut i = 0;
        let mut used = false;
        while i < fmt.len() {
            if fmt[i] != '%' {
                out.push(fmt[i]);
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < fmt.len() && "-+ #0123456789.".contains(fmt[j]) {
                j += 1;
            }
            let spec: String = fmt[i + 1..j].iter().collect();
            let Some(&conv) = fmt.get(j) else {
                out.push('%');
                break;
            };
            i = j + 1;
            if conv == '%' {
                out.push('%');
                continue;
            }
            let arg = args.get(ai).cloned().unwrap_or_default();
            ai += 1;
            used = true;
            let (text, ok) = convert(conv, &spec, &arg)?;
            if !ok {
                status = 1;
            }
            out.push_str(&text);
        }
        if !used || ai >= args.len() {
            break;
        }
    }
    Ok((out, status))
}

fn pad(spec: &str, s: String) -> String {
    let flags: String = spec.chars().take_while(|c| "-+ #0".contains(*c)).collect();
    let left = flags.contains('-');
    let zero = flags.contains('0') && !left;
    let width: usize = spec[flags.len()..]
        .split('.')
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or(0);
    let n = s.chars().count();
    if n >= width {
        s
    } else if left {
        format!("{s}{}", " ".repeat(width - n))
    } else if zero {
        let (sign, digits) = match s.strip_prefix('-') {
            Some(d) => ("-", d.to_string()),
            None => ("", s.clone()),
        };
        format!("{sign}{}{digits}", "0".repeat(width - n))
    } else {
        format!("{}{s}", " ".repeat(width - n))
    }
}

fn precision(spec: &str) -> Option<usize> {
    spec.split_once('.').map(|(_, p)| p.parse().unwrap_or(0))
}

fn convert(conv: char, spec: &str, arg: &str) -> Result<(String, bool), String> {
    let int = |s: &str| -> (i64, bool) {
        let t = s.trim();
        if t.is_empty() {
            return (0, true);
        }
        if let Some(c) = t.strip_prefix('\'').or_else(|| t.strip_prefix('"')) {
            return (c.chars().next().map_or(0, |c| c as i64), true);
        }
        match t.parse::<i64>() {
            Ok(n) => (n, true),
            Err(_) => (0, false),
        }
    };
    Ok(match conv {
        's' => {
            let s = match precision(spec) {
                Some(p) => arg.chars().take(p).collect(),
                None => arg.to_string(),
            };
            (pad(spec, s), true)
        }
        'b' => (pad(spec, unescape(arg)), true),
        'c' => (
            pad(spec, arg.chars().next().map(String::from).unwrap_or_default()),
            true,
        ),
        'd' | 'i' | 'u' => {
            let (n, ok) = int(arg);
            let s = if spec.contains('+') && n >= 0 {
                format!("+{n}")
            } else {
                n.to_string()
            };
            (pad(spec, s), ok)
        }
        'x' | 'X' | 'o' => {
            let (n, ok) = int(arg);
            let s = match conv {
                'x' => format!("{n:x}"),
                'X' => format!("{n:X}"),
                _ => format!("{n:o}"),
            };
            (pad(spec, s), ok)
        }
        'f' | 'e' | 'g' => {
            let v: f64 = arg.trim().parse().unwrap_or(0.0);
            let p = precision(spec).unwrap_or(6);
            let s = match conv {
                'f' => format!("{v:.p$}"),
                'e' => format!("{v:.p$e}"),
                _ => format!("{v}"),
            };
            (pad(spec, s), true)
        }
        other => return Err(format!("%{other}: invalid directive")),
    })
}

fn cat(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "");
    let (data, st) = inputs(sh, io, "cat", &args.operands);
    sh.print(io, data);
    Ok(st)
}

fn copy_tree(sh: &mut Shell<'_>, from: &str, to: &str) -> Result<(), String> {
    if !sh.is_dir(parent(to)) {
        return Err(format!(
            "cannot create directory '{to}': No such file or directory"
        ));
    }
    sh.mkdir(to);
    for c in sh.children(from) {
        let target = format!("{}/{}", to.trim_end_matches('/'), basename(&c));
        if sh.is_dir(&c) {
            copy_tree(sh, &c, &target)?;
        } else if let Some(d) = sh.read_file(&c) {
            sh.write_file(&target, &d, false)?;
        }
    }
    Ok(())
}

/// `cp` and `mv`: sources, then a destination file or directory.
fn transfer(sh: &mut Shell<'_>, io: &Io, a: &[String], moving: bool) -> Result<i32, Flow> {
    let prog = if moving { "mv" } else { "cp" };
    let (args, _) = Args::parse(&a[1..], "");
    let recursive = moving || args.has('r') || args.has('R') || args.has('a');
    let paths = &args.operands;
    if paths.len() < 2 {
        sh.eprint(io, format!("{prog}: missing file operand\n"));
        return Ok(1);
    }
    let (dst, srcs) = (&paths[paths.len() - 1], &paths[..paths.len() - 1]);
    let dst_abs = sh.abs(dst);
    let dst_is_dir = sh.is_dir(&dst_abs);
    if srcs.len() > 1 && !dst_is_dir {
        sh.eprint(io, format!("{prog}: target '{dst}': Not a directory\n"));
        return Ok(1);
    }
    let mut st = 0;
    for s in srcs {
        let sp = sh.abs(s);
        let target = if dst_is_dir {
            format!("{}/{}", dst_abs.trim_end_matches('/'), basename(&sp))
        } else {
            dst_abs.clone()
        };
        let result = if sh.is_dir(&sp) {
            if recursive {
                copy_tree(sh, &sp, &target)
            } else {
                Err(format!("-r not specified; omitting directory '{s}'"))
            }
        } else {
            match sh.read_file(&sp) {
                None => Err(format!("cannot stat '{s}': No such file or directory")),
                Some(d) => sh
                    .write_file(&target, &d, false)
                    .map_err(|e| format!("cannot create regular file '{e}'")),
            }
        };
        let result = result.and_then(|()| if moving { sh.remove(&sp, true) } else { Ok(()) });
        if let Err(e) = result {
            sh.eprint(io, format!("{prog}: {e}\n"));
            st = 1;
        }
    }
    Ok(st)
}

fn cp(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    transfer(sh, io, a, false)
}

fn mv(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    transfer(sh, io, a, true)
}

fn rm(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "");
    let force = args.has('f');
    let recursive = args.has('r') || args.has('R');
    let mut st = 0;
    for f in &args.operands {
        let p = sh.abs(f);
        if let Err(e) = sh.remove(&p, recursive)
            && !(force && e.ends_with("No such file or directory"))
        {
            sh.eprint(io, format!("rm: {}\n", e.replace(&p, f)));
            st = 1;
        }
    }
    Ok(st)
}

fn rmdir(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let mut st = 0;
    for f in a[1..].iter().filter(|f| !f.starts_with('-')) {
        let p = sh.abs(f);
        if !sh.is_dir(&p) {
            sh.eprint(
                io,
                format!("rmdir: failed to remove '{f}': No such file or directory\n"),
            );
            st = 1;
        } else if !sh.children(&p).is_empty() {
            sh.eprint(
                io,
                format!("rmdir: failed to remove '{f}': Directory not empty\n"),
            );
            st = 1;
        } else {
            let _ = sh.remove(&p, true);
        }
    }
    Ok(st)
}

fn ls(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "");
    let all = args.has('a');
    let almost = args.has('A');
    let long = args.has('l');
    let mut targets = args.operands.clone();
    if targets.is_empty() {
        targets.push(".".into());
    }
    let many = targets.len() > 1;
    let mut st = 0;
    let mut text = String::new();
    for (n, t) in targets.iter().enumerate() {
        let p = sh.abs(t);
        if sh.is_dir(&p) {
            if many {
                if n > 0 {
                    text.push('\n');
                }
                text.push_str(&format!("{t}:\n"));
            }
            if all {
                text.push_str(".\n..\n");
            }
            for c in sh.children(&p) {
                let b = basename(&c).to_string();
                if all || almost || !b.starts_with('.') {
                    text.push_str(&ls_line(sh, &c, &b, long));
                }
            }
        } else if sh.read_file(&p).is_some() {
            text.push_str(&ls_line(sh, &p, t, long));
        } else {
            sh.eprint(
                io,
                format!("ls: cannot access '{t}': No such file or directory\n"),
            );
            st = 2;
        }
    }
    sh.print(io, text);
    Ok(st)
}

fn ls_line(sh: &mut Shell<'_>, abs: &str, shown: &str, long: bool) -> String {
    if !long {
        return format!("{shown}\n");
    }
    let dir = sh.is_dir(abs);
    let m = sh.meta(abs);
    let size = if dir {
        4096
    } else {
        sh.read_file(abs).map_or(0, |d| d.len())
    };
    format!(
        "{}{} 1 {} {} {size} Jan  1 00:00 {shown}\n",
        if dir { 'd' } else { '-' },
        mode_string(m.mode),
        m.uid,
        m.gid
    )
}

fn mode_string(mode: u32) -> String {
    let mut s = String::new();
    for shift in [6, 3, 0] {
        let b = (mode >> shift) & 7;
        s.push(if b & 4 != 0 { 'r' } else { '-' });
        s.push(if b & 2 != 0 { 'w' } else { '-' });
        s.push(if b & 1 != 0 { 'x' } else { '-' });
    }
    s
}

fn mkdir(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, values) = Args::parse(&a[1..], "m");
    let parents = args.has('p') || args.long.iter().any(|l| l == "parents");
    let mode = values
        .iter()
        .find(|(c, _)| *c == 'm')
        .and_then(|(_, m)| u32::from_str_radix(m, 8).ok());
    let mut st = 0;
    for f in &args.operands {
        let p = sh.abs(f);
        let result = if parents {
            let mut cur = String::new();
            let mut r = Ok(());
            for seg in p.split('/').filter(|s| !s.is_empty()) {
                cur = format!("{cur}/{seg}");
                if sh.read_file(&cur).is_some() && !sh.is_dir(&cur) {
                    r = Err("Not a directory");
                    break;
                }
                sh.mkdir(&cur);
            }
            r
        } else if sh.exists(&p) {
            Err("File exists")
        } else if !sh.is_dir(parent(&p)) {
            Err("No such file or directory")
        } else {
            sh.mkdir(&p);
            Ok(())
        };
        match result {
            Err(why) => {
                sh.eprint(io, format!("mkdir: cannot create directory '{f}': {why}\n"));
                st = 1;
            }
            Ok(()) => {
                if let Some(mode) = mode {
                    let m = sh.meta(&p);
                    let _ = sh.set_meta(&p, Meta { mode, ..m });
                }
            }
        }
    }
    Ok(st)
}

fn touch(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "dtr");
    let mut st = 0;
    for f in &args.operands {
        let p = sh.abs(f);
        if sh.exists(&p) {
            continue;
        }
        if let Err(e) = sh.write_file(&p, b"", true) {
            let why = e
                .rsplit(": ")
                .next()
                .unwrap_or("No such file or directory")
                .to_string();
            sh.eprint(io, format!("touch: cannot touch '{f}': {why}\n"));
            st = 1;
        }
    }
    Ok(st)
}

fn stat(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (format, files) = match &a[1..] {
        [c, f, rest @ ..] if c == "-c" => (f.clone(), rest),
        [c, rest @ ..] if c.starts_with("--format=") || c.starts_with("--printf=") => (
            c.split_once('=').map(|(_, f)| f.to_string()).unwrap_or_default(),
            rest,
        ),
        _ => {
            sh.eprint(
                io,
                "kudo-sim: stat: not simulated: only `stat -c FORMAT FILE…` is\n",
            );
            return Ok(127);
        }
    };
    if files.is_empty() {
        sh.eprint(io, "stat: missing operand\n");
        return Ok(1);
    }
    let mut st = 0;
    for f in files {
        let p = sh.abs(f);
        if !sh.exists(&p) {
            sh.eprint(
                io,
                format!("stat: cannot statx '{f}': No such file or directory\n"),
            );
            st = 1;
            continue;
        }
        let dir = sh.is_dir(&p);
        let size = if dir {
            4096
        } else {
            sh.read_file(&p).map_or(0, |d| d.len())
        };
        let m = sh.meta(&p);
        let mut line = String::new();
        let mut it = format.chars();
        while let Some(c) = it.next() {
            if c != '%' {
                line.push(c);
                continue;
            }
            match it.next() {
                Some('s') => line.push_str(&size.to_string()),
                Some('n') => line.push_str(f),
                Some('u') => line.push_str(&m.uid.to_string()),
                Some('g') => line.push_str(&m.gid.to_string()),
                Some('a') => line.push_str(&format!("{:o}", m.mode)),
                Some('F') => line.push_str(if dir { "directory" } else { "regular file" }),
                Some('%') => line.push('%'),
                Some(o) => {
                    sh.eprint(io, format!("kudo-sim: stat: not simulated: the format %{o}\n"));
                    return Ok(127);
                }
                None => line.push('%'),
            }
        }
        line.push('\n');
        sh.print(io, line);
    }
    Ok(st)
}

/// Applies `change` to the mode and owner of each of `files` (with `recursive`, of everything
/// below them too): what `chmod` and `chown` share.
fn change_meta(
    sh: &mut Shell<'_>,
    io: &Io,
    prog: &str,
    files: &[String],
    recursive: bool,
    change: impl Fn(Meta) -> Meta,
) -> i32 {
    let mut st = 0;
    for f in files {
        let p = sh.abs(f);
        if !sh.exists(&p) {
            sh.eprint(
                io,
                format!("{prog}: cannot access '{f}': No such file or directory\n"),
            );
            st = 1;
            continue;
        }
        let paths = if recursive { sh.walk(&p) } else { vec![p] };
        for path in paths {
            let m = sh.meta(&path);
            if let Err(e) = sh.set_meta(&path, change(m)) {
                sh.eprint(io, format!("{prog}: changing '{f}': {e}\n"));
                st = 1;
            }
        }
    }
    st
}

fn chmod(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "");
    let (Some(spec), files) = (args.operands.first(), args.operands.get(1..).unwrap_or(&[])) else {
        sh.eprint(io, "chmod: missing operand\n");
        return Ok(1);
    };
    if new_mode(spec, 0).is_none() {
        sh.eprint(io, format!("chmod: invalid mode: '{spec}'\n"));
        return Ok(1);
    }
    Ok(change_meta(sh, io, "chmod", files, args.has('R'), |m| Meta {
        mode: new_mode(spec, m.mode).unwrap_or(m.mode),
        ..m
    }))
}

/// An octal mode, or symbolic changes (`+x`, `u+rw,go-w`).
fn new_mode(spec: &str, old: u32) -> Option<u32> {
    if let Ok(m) = u32::from_str_radix(spec, 8) {
        return Some(m);
    }
    let mut mode = old;
    for clause in spec.split(',') {
        let pos = clause.find(['+', '-', '='])?;
        let (who, rest) = clause.split_at(pos);
        let op = rest.chars().next()?;
        let bits = rest[1..].chars().try_fold(0u32, |acc, c| match c {
            'r' => Some(acc | 4),
            'w' => Some(acc | 2),
            'x' | 'X' => Some(acc | 1),
            _ => None,
        })?;
        let who = if who.is_empty() { "ugo" } else { who };
        for (w, shift) in [('u', 6), ('g', 3), ('o', 0)] {
            if who.contains(w) || who.contains('a') {
                match op {
                    '+' => mode |= bits << shift,
                    '-' => mode &= !(bits << shift),
                    _ => mode = (mode & !(7 << shift)) | (bits << shift),
                }
            }
        }
    }
    Some(mode)
}

fn chown(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "");
    let (Some(owner), files) = (args.operands.first(), args.operands.get(1..).unwrap_or(&[])) else {
        sh.eprint(io, "chown: missing operand\n");
        return Ok(1);
    };
    let id = |s: &str| match s {
        "root" | "" => Some(0),
        n => n.parse::<u32>().ok(),
    };
    let (u, g) = owner.split_once(':').unwrap_or((owner.as_str(), ""));
    let (Some(uid), gid) = (id(u), if g.is_empty() { None } else { id(g) }) else {
        sh.eprint(io, format!("chown: invalid user: '{owner}'\n"));
        return Ok(1);
    };
    Ok(change_meta(sh, io, "chown", files, args.has('R'), |m| Meta {
        uid,
        gid: gid.unwrap_or(m.gid),
        ..m
    }))
}

/// `ln -s TARGET LINK` copies what TARGET holds (the simulated filesystem has no links).
fn ln(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "");
    if args.operands.len() != 2 {
        sh.eprint(
            io,
            "kudo-sim: ln: not simulated: only `ln [-sf] TARGET LINK` is\n",
        );
        return Ok(127);
    }
    let target = sh.abs(&args.operands[0]);
    let link = sh.abs(&args.operands[1]);
    match sh.read_file(&target) {
        Some(d) => match sh.write_file(&link, &d, false) {
            Ok(()) => Ok(0),
            Err(e) => {
                sh.eprint(io, format!("ln: {e}\n"));
                Ok(1)
            }
        },
        None if sh.is_dir(&target) => {
            sh.mkdir(&link);
            Ok(0)
        }
        None => {
            sh.eprint(
                io,
                "kudo-sim: ln: not simulated: links to paths that do not exist\n",
            );
            Ok(127)
        }
    }
}

fn head_tail(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let tail = basename(&a[0]) == "tail";
    let mut n: i64 = 10;
    let mut files = Vec::new();
    let mut i = 1;
    while i < a.len() {
        let s = &a[i];
        if s == "-n" || s == "-c" {
            i += 1;
            n = a
                .get(i)
                .and_then(|v| v.trim_start_matches('+').parse().ok())
                .unwrap_or(10);
        } else if let Some(v) = s.strip_prefix("-n") {
            n = v.parse().unwrap_or(10);
        } else if s.starts_with('-') && s[1..].chars().all(|c| c.is_ascii_digit()) {
            n = s[1..].parse().unwrap_or(10);
        } else if s == "-f" || s == "-F" {
            return Err(crate::shell::exec::Flow::Runs(crate::shell::Running::Waiting(
                "`tail -f` follows its file until stopped".into(),
            )));
        } else {
            files.push(s.clone());
        }
        i += 1;
    }
    let (data, st) = inputs(sh, io, &a[0], &files);
    let all = lines(&data);
    let k = (n.max(0) as usize).min(all.len());
    let picked = if tail { &all[all.len() - k..] } else { &all[..k] };
    let mut text = picked.join("\n");
    if !picked.is_empty() {
        text.push('\n');
    }
    sh.print(io, text);
    Ok(st)
}

fn wc(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "");
    let (data, st) = inputs(sh, io, "wc", &args.operands);
    let text = String::from_utf8_lossy(&data);
    let l = data.iter().filter(|b| **b == b'\n').count();
    let w = text.split_whitespace().count();
    let c = data.len();
    let out = if args.has('l') {
        format!("{l}\n")
    } else if args.has('w') {
        format!("{w}\n")
    } else if args.has('c') || args.has('m') {
        format!("{c}\n")
    } else {
        format!("{l:7} {w:7} {c:7}\n")
    };
    sh.print(io, out);
    Ok(st)
}

/// Characters of a `tr` set, with ranges and escapes expanded.
fn tr_set(s: &str) -> Vec<char> {
    let chars: Vec<char> = unescape(s).chars().collect();
    let named = [
        ("[:upper:]", 'A'..='Z'),
        ("[:lower:]", 'a'..='z'),
        ("[:digit:]", '0'..='9'),
    ];
    let text: String = chars.iter().collect();
    if let Some((_, r)) = named.iter().find(|(n, _)| *n == text) {
        return r.clone().collect();
    }
    if text == "[:space:]" {
        return vec![' ', '\t', '\n', '\r', '\x0b', '\x0c'];
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if i + 2 < chars.len() && chars[i + 1] == '-' {
            out.extend(chars[i]..=chars[i + 2]);
            i += 3;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

fn tr(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "");
    let data = String::from_utf8_lossy(&io.input.borrow_mut().rest()).into_owned();
    let set1 = tr_set(args.operands.first().map(String::as_str).unwrap_or(""));
    let out: String = if args.has('d') {
        data.chars().filter(|c| !set1.contains(c)).collect()
    } else {
        let set2 = tr_set(args.operands.get(1).map(String::as_str).unwrap_or(""));
        let mut out = String::new();
        let mut last: Option<char> = None;
        for c in data.chars() {
            let mapped = match set1.iter().position(|x| *x == c) {
                Some(p) => set2.get(p).or(set2.last()).copied().unwrap_or(c),
                None => c,
            };
            if args.has('s') && last == Some(mapped) && set2.contains(&mapped) {
                continue;
            }
            out.push(mapped);
            last = Some(mapped);
        }
        out
    };
    sh.print(io, out);
    Ok(0)
}

fn cut(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, values) = Args::parse(&a[1..], "dfc");
    let get = |k: char| values.iter().find(|(c, _)| *c == k).map(|(_, v)| v.clone());
    let delim = get('d').and_then(|d| d.chars().next()).unwrap_or('\t');
    let list = get('f').or_else(|| get('c')).unwrap_or_default();
    let by_char = get('c').is_some();
    let wanted = |i: usize| {
        list.split(',').any(|r| match r.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.parse().unwrap_or(1);
                let b: usize = b.parse().unwrap_or(usize::MAX);
                (a..=b).contains(&i)
            }
            None => r.parse() == Ok(i),
        })
    };
    let (data, st) = inputs(sh, io, "cut", &args.operands);
    let mut out = String::new();
    for line in lines(&data) {
        let picked: Vec<String> = if by_char {
            vec![
                line.chars()
                    .enumerate()
                    .filter(|(i, _)| wanted(i + 1))
                    .map(|(_, c)| c)
                    .collect(),
            ]
        } else if !line.contains(delim) {
            vec![line.clone()]
        } else {
            line.split(delim)
                .enumerate()
                .filter(|(i, _)| wanted(i + 1))
                .map(|(_, s)| s.to_string())
                .collect()
        };
        out.push_str(&picked.join(&delim.to_string()));
        out.push('\n');
    }
    sh.print(io, out);
    Ok(st)
}

fn sort(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "tk");
    let (data, st) = inputs(sh, io, "sort", &args.operands);
    let mut l = lines(&data);
    if args.has('n') {
        let key = |s: &String| {
            s.trim()
                .split(|c: char| !c.is_ascii_digit() && c != '-')
                .next()
                .and_then(|n| n.parse::<i64>().ok())
                .unwrap_or(0)
        };
        l.sort_by_key(key);
    } else {
        l.sort();
    }
    if args.has('r') {
        l.reverse();
    }
    if args.has('u') {
        l.dedup();
    }
    let mut text = l.join("\n");
    if !l.is_empty() {
        text.push('\n');
    }
    sh.print(io, text);
    Ok(st)
}

fn uniq(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "");
    let (data, st) = inputs(sh, io, "uniq", &args.operands);
    let mut groups: Vec<(String, usize)> = Vec::new();
    for line in lines(&data) {
        match groups.last_mut() {
            Some((l, n)) if *l == line => *n += 1,
            _ => groups.push((line, 1)),
        }
    }
    let mut out = String::new();
    for (l, n) in groups {
        if args.has('d') && n < 2 || args.has('u') && n > 1 {
            continue;
        }
        if args.has('c') {
            out.push_str(&format!("{n:7} {l}\n"));
        } else {
            out.push_str(&l);
            out.push('\n');
        }
    }
    sh.print(io, out);
    Ok(st)
}

fn tee(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "");
    let data = io.input.borrow_mut().rest();
    let mut st = 0;
    for f in &args.operands {
        let p = sh.abs(f);
        if let Err(e) = sh.write_file(&p, &data, args.has('a')) {
            sh.eprint(io, format!("tee: {e}\n"));
            st = 1;
        }
    }
    sh.print(io, data);
    Ok(st)
}

fn basename_cmd(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let Some(p) = a.get(1) else {
        sh.eprint(io, "basename: missing operand\n");
        return Ok(1);
    };
    let mut b = basename(p).to_string();
    if let Some(suffix) = a.get(2)
        && b != *suffix
    {
        b = b.strip_suffix(suffix.as_str()).unwrap_or(&b).to_string();
    }
    sh.print(io, format!("{b}\n"));
    Ok(0)
}

fn dirname_cmd(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let Some(p) = a.get(1) else {
        sh.eprint(io, "dirname: missing operand\n");
        return Ok(1);
    };
    let t = p.trim_end_matches('/');
    let d = match t.rfind('/') {
        None => ".".to_string(),
        Some(0) => "/".to_string(),
        Some(i) => t[..i].to_string(),
    };
    sh.print(io, format!("{d}\n"));
    Ok(0)
}

/// `date [-u] [+FORMAT]` on the simulator's clock (UTC; the simulated nodes have no time zone).
fn date(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let format = a[1..]
        .iter()
        .find_map(|x| x.strip_prefix('+'))
        .unwrap_or("%a %b %e %H:%M:%S UTC %Y")
        .to_string();
    if a[1..]
        .iter()
        .any(|x| !x.starts_with('+') && x != "-u" && x != "--utc")
    {
        sh.eprint(
            io,
            "kudo-sim: date: not simulated: only `date [-u] [+FORMAT]` is\n",
        );
        return Ok(127);
    }
    let secs = sh.now_ms().div_euclid(1000);
    match format_time(secs, &format) {
        Some(s) => {
            sh.print(io, format!("{s}\n"));
            Ok(0)
        }
        None => {
            sh.eprint(
                io,
                format!("kudo-sim: date: not simulated: the format {format:?}\n"),
            );
            Ok(127)
        }
    }
}

/// Days since 1970-01-01 → (year, month, day).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// strftime's common conversions for a UTC time.
pub(crate) fn format_time(secs: i64, format: &str) -> Option<String> {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    let (hh, mm, ss) = (tod / 3600, tod / 60 % 60, tod % 60);
    let mut out = String::new();
    let mut it = format.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let s = match it.next()? {
            'Y' => y.to_string(),
            'm' => format!("{m:02}"),
            'd' => format!("{d:02}"),
            'e' => format!("{d:2}"),
            'H' => format!("{hh:02}"),
            'M' => format!("{mm:02}"),
            'S' => format!("{ss:02}"),
            's' => secs.to_string(),
            'a' => DAYS[days.rem_euclid(7) as usize].to_string(),
            'b' => MONTHS[m as usize - 1].to_string(),
            'F' => format!("{y}-{m:02}-{d:02}"),
            'T' => format!("{hh:02}:{mm:02}:{ss:02}"),
            'Z' => "UTC".to_string(),
            'z' => "+0000".to_string(),
            '%' => "%".to_string(),
            _ => return None,
        };
        out.push_str(&s);
    }
    Some(out)
}

fn env(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    if basename(&a[0]) == "printenv" {
        let mut st = 0;
        if a.len() == 1 {
            for (k, v) in sh.environment() {
                sh.print(io, format!("{k}={v}\n"));
            }
        }
        for name in &a[1..] {
            match sh.environment().into_iter().find(|(k, _)| k == name) {
                Some((_, v)) => sh.print(io, format!("{v}\n")),
                None => st = 1,
            }
        }
        return Ok(st);
    }
    let mut i = 1;
    let mut assigns = Vec::new();
    while let Some(x) = a.get(i) {
        match x.split_once('=') {
            Some((k, v)) if !x.starts_with('-') => assigns.push((k.to_string(), v.to_string())),
            _ if x == "-i" || x == "-" => {}
            _ => break,
        }
        i += 1;
    }
    if i >= a.len() {
        let mut all = sh.environment();
        all.extend(assigns);
        for (k, v) in all {
            sh.print(io, format!("{k}={v}\n"));
        }
        return Ok(0);
    }
    match sh.invoke(&a[i..], assigns, io) {
        Flow::Next => Ok(sh.status),
        Flow::Exit(n) => Ok(n),
        other => Err(other),
    }
}

fn seq(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let nums: Vec<i64> = a[1..].iter().filter_map(|x| x.parse().ok()).collect();
    let (first, step, last) = match nums.as_slice() {
        [l] => (1, 1, *l),
        [f, l] => (*f, 1, *l),
        [f, s, l] => (*f, *s, *l),
        _ => {
            sh.eprint(io, "seq: missing operand\n");
            return Ok(1);
        }
    };
    let mut out = String::new();
    let mut v = first;
    let mut count = 0;
    while step != 0 && ((step > 0 && v <= last) || (step < 0 && v >= last)) && count < 1_000_000 {
        out.push_str(&format!("{v}\n"));
        v += step;
        count += 1;
    }
    sh.print(io, out);
    Ok(0)
}

fn id(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let text = if basename(&a[0]) == "whoami" || a.iter().any(|x| x == "-un" || x == "-nu") {
        "root\n".to_string()
    } else if a.iter().any(|x| x == "-u" || x == "-g") {
        "0\n".to_string()
    } else {
        "uid=0(root) gid=0(root) groups=0(root)\n".to_string()
    };
    sh.print(io, text);
    Ok(0)
}

fn hostname(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let c = sh.ctr;
    let name = match a.get(1).map(String::as_str) {
        Some("-f" | "--fqdn" | "-A") if !c.subdomain.is_empty() => {
            format!("{}.{}.{}.svc.cluster.local", c.hostname, c.subdomain, c.namespace)
        }
        Some("-i" | "-I") => c.ip.clone(),
        _ => c.hostname.clone(),
    };
    sh.print(io, format!("{name}\n"));
    Ok(0)
}

/// Parses GNU sleep's argument forms into milliseconds.
pub(crate) fn sleep_arg(s: &str) -> Option<i64> {
    if s == "infinity" || s == "inf" {
        return Some(i64::MAX);
    }
    let (num, mult) = match s.chars().last()? {
        's' => (&s[..s.len() - 1], 1000.0),
        'm' => (&s[..s.len() - 1], 60_000.0),
        'h' => (&s[..s.len() - 1], 3_600_000.0),
        'd' => (&s[..s.len() - 1], 86_400_000.0),
        _ => (s, 1000.0),
    };
    let n: f64 = num.parse().ok()?;
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    Some((n * mult).min(MAX_SLEEP_MS as f64 * 2.0) as i64)
}

fn sleep(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    if a.len() < 2 {
        sh.eprint(io, "sleep: missing operand\n");
        return Ok(1);
    }
    let mut total = 0i64;
    for x in &a[1..] {
        match sleep_arg(x) {
            Some(ms) => total = total.saturating_add(ms),
            None => {
                sh.eprint(io, format!("sleep: invalid time interval '{x}'\n"));
                return Ok(1);
            }
        }
    }
    sh.sleep(total)?;
    Ok(0)
}

fn base64(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let (args, _) = Args::parse(&a[1..], "w");
    let decode = args.has('d') || args.long.iter().any(|l| l == "decode");
    let (data, st) = inputs(sh, io, "base64", &args.operands);
    if decode {
        let text: String = String::from_utf8_lossy(&data)
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        match crate::shell::programs::openssl::b64_decode(&text) {
            Some(d) => sh.print(io, d),
            None => {
                sh.eprint(io, "base64: invalid input\n");
                return Ok(1);
            }
        }
    } else {
        let enc = crate::shell::programs::openssl::b64_encode(&data);
        let wrapped: Vec<String> = enc
            .as_bytes()
            .chunks(76)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        sh.print(io, format!("{}\n", wrapped.join("\n")));
    }
    Ok(st)
}

/// `sysctl [-w] NAME=VALUE` / `sysctl NAME`: the simulated kernel settings are files under
/// `/proc/sys` of the container.
fn sysctl(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let mut st = 0;
    for x in a[1..].iter().filter(|x| !x.starts_with('-')) {
        let (name, value) = match x.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (x.as_str(), None),
        };
        let path = format!("/proc/sys/{}", name.replace('.', "/"));
        match value {
            Some(v) => {
                let dir = parent(&path).to_string();
                let mut cur = String::new();
                for seg in dir.split('/').filter(|s| !s.is_empty()) {
                    cur = format!("{cur}/{seg}");
                    sh.mkdir(&cur);
                }
                if let Err(e) = sh.write_file(&path, format!("{v}\n").as_bytes(), false) {
                    sh.eprint(io, format!("sysctl: {e}\n"));
                    st = 1;
                    continue;
                }
                sh.print(io, format!("{name} = {v}\n"));
            }
            None => match sh.read_file(&path) {
                Some(d) => sh.print(io, format!("{name} = {}", String::from_utf8_lossy(&d))),
                None => {
                    sh.eprint(
                        io,
                        format!("sysctl: cannot stat {path}: No such file or directory\n"),
                    );
                    st = 255;
                }
            },
        }
    }
    Ok(st)
}

fn mktemp(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let dir = a.iter().any(|x| x == "-d");
    let mut n = 0;
    let path = loop {
        let p = format!("/tmp/tmp.kudosim{n:04}");
        if !sh.exists(&p) {
            break p;
        }
        n += 1;
    };
    if dir {
        sh.mkdir(&path);
    } else {
        let _ = sh.write_file(&path, b"", false);
    }
    sh.print(io, format!("{path}\n"));
    Ok(0)
}

fn realpath(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let mut st = 0;
    for x in a[1..].iter().filter(|x| !x.starts_with('-')) {
        let p = sh.abs(x);
        if basename(&a[0]) == "readlink" && !a.iter().any(|f| f == "-f") {
            st = 1;
            continue;
        }
        sh.print(io, format!("{p}\n"));
    }
    Ok(st)
}

fn which(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let mut st = 0;
    for x in &a[1..] {
        if super::lookup(x).is_some() || crate::shell::builtins::lookup(x).is_some() {
            sh.print(io, format!("/usr/bin/{x}\n"));
        } else {
            st = 1;
        }
    }
    Ok(st)
}

/// `expr`: integer arithmetic and comparisons of two operands, and `length`.
fn expr(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let args = &a[1..];
    let result = match args {
        [x] => Some(x.clone()),
        [l, s] if l == "length" => Some(s.chars().count().to_string()),
        [x, op, y] => {
            let (xi, yi) = (x.parse::<i64>(), y.parse::<i64>());
            match (op.as_str(), xi, yi) {
                ("+", Ok(x), Ok(y)) => Some((x + y).to_string()),
                ("-", Ok(x), Ok(y)) => Some((x - y).to_string()),
                ("*", Ok(x), Ok(y)) => Some((x * y).to_string()),
                ("/", Ok(x), Ok(y)) if y != 0 => Some((x / y).to_string()),
                ("%", Ok(x), Ok(y)) if y != 0 => Some((x % y).to_string()),
                ("=", _, _) => Some(i64::from(x == y).to_string()),
                ("!=", _, _) => Some(i64::from(x != y).to_string()),
                ("<", Ok(x), Ok(y)) => Some(i64::from(x < y).to_string()),
                (">", Ok(x), Ok(y)) => Some(i64::from(x > y).to_string()),
                _ => None,
            }
        }
        _ => None,
    };
    match result {
        Some(r) => {
            let st = i32::from(r == "0" || r.is_empty());
            sh.print(io, format!("{r}\n"));
            Ok(st)
        }
        None => {
            sh.eprint(
                io,
                "kudo-sim: expr: not simulated: only `expr A OP B` with + - * / % = != < > and `length` is\n",
            );
            Ok(127)
        }
    }
}
