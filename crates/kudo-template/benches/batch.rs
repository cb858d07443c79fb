//! The batch loop of `kubectl kudo template render --batch DIR`, in a binary that builds without
//! the CLI's Kubernetes dependencies: for every `DIR/NAME.tmpl` (sorted), data from `NAME.json` /
//! `.yaml` / `.yml` else the shared `data.*` else `{}` (read and decoded anew per case), parse,
//! execute, write `NAME.out` or `NAME.err`. Same file layout and results as the Go oracle's
//! `--batch`, so `user CPU` of this process against `gotmpl-oracle --jobs 1 --batch` is the
//! like-for-like engine comparison (`scripts/bench-template.sh` runs both). Data is
//! decoded with `data::decode_value` (JSON straight into template values), as the CLI does; the
//! differential fuzz test checks it against the two-step `decode_data` + `Value::from_json`.
//!
//! `cargo bench -p kudo-template --bench batch -- DIR [ROUNDS]` renders the directory ROUNDS times
//! (default 1) and prints the per-case time of the rendering loop.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use kudo_template::{FuncEnv, Template, Value, data, kudo_funcs};

fn find_data(dir: &Path, stem: &str) -> Option<(PathBuf, String)> {
    ["json", "yaml", "yml"].iter().find_map(|ext| {
        let p = dir.join(format!("{stem}.{ext}"));
        fs::read_to_string(&p).ok().map(|raw| (p, raw))
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let Some(dir) = args.first().map(PathBuf::from) else {
        eprintln!("usage: batch DIR [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(1);
    let mut tmpls: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            eprintln!("{}: {e}", dir.display());
            std::process::exit(2)
        })
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "tmpl"))
        .collect();
    tmpls.sort();
    let funcs = kudo_funcs();
    let shared = find_data(&dir, "data");
    let start = Instant::now();
    let (mut ok, mut err) = (0usize, 0usize);
    for _ in 0..rounds {
        for tmpl in &tmpls {
            let stem = tmpl.file_stem().unwrap().to_string_lossy().into_owned();
            let out_path = dir.join(format!("{stem}.out"));
            let err_path = dir.join(format!("{stem}.err"));
            let _ = fs::remove_file(&out_path);
            let _ = fs::remove_file(&err_path);
            let text = fs::read_to_string(tmpl).expect("template readable");
            let own = find_data(&dir, &stem);
            let value = match own.as_ref().or(shared.as_ref()) {
                Some((p, raw)) => match data::decode_value(p, raw) {
                    Ok(v) => v,
                    Err(e) => {
                        eprintln!("{}: data: {e}", tmpl.display());
                        continue;
                    }
                },
                None => Value::from_json(&serde_json::json!({})),
            };
            let r = Template::parse("tpl", &text, &funcs)
                .and_then(|t| t.execute(&value, &mut FuncEnv::with_seed(0)));
            match r {
                Ok(s) => {
                    fs::write(&out_path, s).expect("write .out");
                    ok += 1;
                }
                Err(e) => {
                    fs::write(&err_path, format!("{e}\n")).expect("write .err");
                    err += 1;
                }
            }
        }
    }
    let n = (ok + err).max(1);
    eprintln!(
        "batch: {} cases x {rounds}: {ok} ok, {err} errors, {:.2} us/case",
        tmpls.len(),
        start.elapsed().as_secs_f64() * 1e6 / n as f64
    );
}
