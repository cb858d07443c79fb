//! `tar cf - PATH…` (a ustar archive on stdout, leading `/` removed as GNU tar does) and
//! `tar xf -` (an archive from stdin), with `-C DIR`: what `kubectl cp` runs in a container.

use crate::shell::exec::{Flow, Io, Shell};
use crate::shell::fs::basename;

pub(crate) fn tar(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let Some(mode) = a.get(1).map(|m| m.trim_start_matches('-').to_string()) else {
        sh.eprint(io, "tar: You must specify one of the '-Acdtrux' options\n");
        return Ok(2);
    };
    let mut rest: Vec<String> = a[2..].to_vec();
    let mut dir = None;
    if let Some(k) = rest.iter().position(|x| x == "-C") {
        dir = rest.get(k + 1).cloned();
        rest.drain(k..(k + 2).min(rest.len()));
    }
    let ok_flags = mode.chars().all(|c| "cxfvmop".contains(c));
    if !ok_flags || !mode.contains('f') || rest.first().map(String::as_str) != Some("-") {
        sh.eprint(
            io,
            format!("kudo-sim: tar: not simulated: only `tar cf - PATH…` and `tar xf -` are (got {mode})\n"),
        );
        return Ok(127);
    }
    let saved = sh.cwd.clone();
    if let Some(d) = &dir {
        sh.cwd = sh.abs(d);
    }
    let result = if mode.contains('c') {
        create(sh, io, &rest[1..])
    } else if mode.contains('x') {
        extract(sh, io)
    } else {
        Err("only c and x are simulated".into())
    };
    sh.cwd = saved;
    match result {
        Ok(st) => Ok(st),
        Err(e) => {
            sh.eprint(io, format!("tar: {e}\n"));
            Ok(2)
        }
    }
}

fn create(sh: &mut Shell<'_>, io: &Io, paths: &[String]) -> Result<i32, String> {
    let mut entries: Vec<(String, Option<Vec<u8>>)> = Vec::new();
    let mut st = 0;
    let mut stripped = false;
    for p in paths {
        let abs = sh.abs(p);
        if !sh.exists(&abs) {
            sh.eprint(io, format!("tar: {p}: Cannot stat: No such file or directory\n"));
            st = 2;
            continue;
        }
        let name = if p.starts_with('/') {
            stripped = true;
            p.trim_start_matches('/').to_string()
        } else {
            p.clone()
        };
        collect(sh, &abs, &name, &mut entries);
    }
    if stripped {
        sh.eprint(io, "tar: Removing leading `/' from member names\n");
    }
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in entries {
        let mut h = tar::Header::new_ustar();
        h.set_mode(if data.is_some() { 0o644 } else { 0o755 });
        h.set_mtime(0);
        h.set_entry_type(if data.is_some() {
            tar::EntryType::Regular
        } else {
            tar::EntryType::Directory
        });
        let body = data.unwrap_or_default();
        h.set_size(body.len() as u64);
        let n = if h.entry_type().is_dir() {
            format!("{}/", name.trim_end_matches('/'))
        } else {
            name
        };
        b.append_data(&mut h, &n, body.as_slice())
            .map_err(|e| e.to_string())?;
    }
    let data = b.into_inner().map_err(|e| e.to_string())?;
    sh.print(io, data);
    if st != 0 {
        sh.eprint(io, "tar: Exiting with failure status due to previous errors\n");
    }
    Ok(st)
}

fn collect(sh: &mut Shell<'_>, abs: &str, name: &str, out: &mut Vec<(String, Option<Vec<u8>>)>) {
    if sh.is_dir(abs) {
        out.push((name.to_string(), None));
        for c in sh.children(abs) {
            let n = format!("{}/{}", name.trim_end_matches('/'), basename(&c));
            collect(sh, &c, &n, out);
        }
    } else if let Some(d) = sh.read_file(abs) {
        out.push((name.to_string(), Some(d)));
    }
}

fn extract(sh: &mut Shell<'_>, io: &Io) -> Result<i32, String> {
    let data = io.input.borrow_mut().rest();
    let mut archive = tar::Archive::new(data.as_slice());
    let entries = archive.entries().map_err(|e| e.to_string())?;
    for e in entries {
        let mut e = e.map_err(|e| e.to_string())?;
        let path = e.path().map_err(|e| e.to_string())?.display().to_string();
        let abs = sh.abs(&path);
        if e.header().entry_type().is_dir() {
            mkdirs(sh, &abs);
            continue;
        }
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut body).map_err(|e| e.to_string())?;
        mkdirs(sh, crate::shell::fs::parent(&abs));
        sh.write_file(&abs, &body, false)?;
    }
    Ok(0)
}

fn mkdirs(sh: &mut Shell<'_>, abs: &str) {
    let mut cur = String::new();
    for seg in abs.split('/').filter(|s| !s.is_empty()) {
        cur = format!("{cur}/{seg}");
        sh.mkdir(&cur);
    }
}
