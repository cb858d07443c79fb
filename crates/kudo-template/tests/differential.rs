//! Differential test against the Go oracle: every case of `tests/corpus/<category>/` is rendered by
//! our engine and compared with the golden the real Go `text/template` + Sprig produced
//! (`scripts/regen-template-goldens.sh`, `--profile kudo`).
//!
//! * `NAME.out` golden: our output must be byte-equal.
//! * `NAME.err` golden: we must fail too; the message is compared and reported, but a different
//!   wording is not a failure (it is counted as "same message" or not).
//!
//! Data follows the oracle's batch conventions: `NAME.json`/`.yaml`/`.yml`, else the category's
//! `data.json`/`.yaml`/`.yml`, else `{}`; decoded anew for every case (templates may mutate it).
//! Set `KUDO_DIFF_FILTER=substring` to run only matching `category/name` cases.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use kudo_template::{FuncEnv, Template, Value, kudo_funcs};

use kudo_template::data as godata;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("corpus")
}

enum Expected {
    Out(Vec<u8>),
    Err(String),
}

struct Case {
    id: String,
    template: String,
    data_path: Option<PathBuf>,
    expected: Expected,
}

fn find_data(dir: &Path, stem: &str) -> Option<PathBuf> {
    ["json", "yaml", "yml"]
        .iter()
        .map(|ext| dir.join(format!("{stem}.{ext}")))
        .find(|p| p.is_file())
}

fn load_cases() -> Vec<Case> {
    let root = corpus_dir();
    let filter = std::env::var("KUDO_DIFF_FILTER").unwrap_or_default();
    let mut cases = Vec::new();
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot read corpus {}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let category = dir.file_name().unwrap().to_string_lossy().into_owned();
        let shared = find_data(&dir, "data");
        let mut tmpls: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "tmpl"))
            .collect();
        tmpls.sort();
        for tmpl in tmpls {
            let stem = tmpl.file_stem().unwrap().to_string_lossy().into_owned();
            let id = format!("{category}/{stem}");
            if !id.contains(&filter) {
                continue;
            }
            let out = dir.join(format!("{stem}.out"));
            let err = dir.join(format!("{stem}.err"));
            let expected = if out.is_file() {
                Expected::Out(fs::read(&out).unwrap())
            } else if err.is_file() {
                let msg = fs::read_to_string(&err).unwrap();
                Expected::Err(msg.strip_suffix('\n').unwrap_or(&msg).to_string())
            } else {
                panic!("{id}: no golden (.out/.err); run scripts/regen-template-goldens.sh");
            };
            let template = fs::read_to_string(&tmpl).unwrap_or_else(|e| panic!("{id}: {e}"));
            let data_path = find_data(&dir, &stem).or_else(|| shared.clone());
            cases.push(Case {
                id,
                template,
                data_path,
                expected,
            });
        }
    }
    cases
}

/// Our result for one case: output, or the one-line error message.
fn render_case(case: &Case) -> Result<Vec<u8>, String> {
    let data = match &case.data_path {
        Some(p) => {
            let raw = fs::read_to_string(p).map_err(|e| format!("HARNESS: read {}: {e}", p.display()))?;
            let json =
                godata::decode_data(p, &raw).map_err(|e| format!("HARNESS: data {}: {e}", p.display()))?;
            Value::from_json(&json)
        }
        None => Value::from_json(&serde_json::json!({})),
    };
    let funcs = kudo_funcs();
    let tpl = Template::parse("tpl", &case.template, &funcs).map_err(|e| e.to_string())?;
    let mut env = FuncEnv::with_seed(0);
    tpl.execute(&data, &mut env)
        .map(String::into_bytes)
        .map_err(|e| e.to_string())
}

fn short(s: &str, max: usize) -> String {
    let s = s.replace('\n', "\\n");
    if s.chars().count() > max {
        format!("{}…", s.chars().take(max).collect::<String>())
    } else {
        s
    }
}

/// A short description of where two outputs first differ.
fn first_difference(want_bytes: &[u8], got_bytes: &[u8]) -> String {
    let want = String::from_utf8_lossy(want_bytes);
    let got = String::from_utf8_lossy(got_bytes);
    let (wl, gl): (Vec<&str>, Vec<&str>) = (want.split('\n').collect(), got.split('\n').collect());
    for i in 0..wl.len().max(gl.len()) {
        let (w, g) = (wl.get(i).copied(), gl.get(i).copied());
        if w != g {
            return format!(
                "line {}: want {:?} got {:?}",
                i + 1,
                w.map(|s| short(s, 100)).unwrap_or_else(|| "<eof>".into()),
                g.map(|s| short(s, 100)).unwrap_or_else(|| "<eof>".into())
            );
        }
    }
    let i = want_bytes
        .iter()
        .zip(got_bytes)
        .take_while(|(a, b)| a == b)
        .count();
    format!("first differing byte at {i} (a side is not valid UTF-8: Go output can hold any bytes)")
}

/// `tests/corpus/known-deviations.txt`: `category/name  reason` per line (`#` comments). A listed
/// case is a deliberate, documented difference (docs/differences-from-kudo.md): it is reported but
/// does not fail the test, and it must still differ, so a stale entry is caught.
fn known_deviations() -> BTreeMap<String, String> {
    let path = corpus_dir().join("known-deviations.txt");
    let Ok(text) = fs::read_to_string(&path) else {
        return BTreeMap::new();
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (id, reason) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            (id.to_string(), reason.trim().to_string())
        })
        .collect()
}

#[test]
fn differential_against_go_oracle() {
    let cases = load_cases();
    let filtered = std::env::var("KUDO_DIFF_FILTER").is_ok_and(|f| !f.is_empty());
    assert!(
        !cases.is_empty(),
        "no corpus cases found (filter: {:?})",
        std::env::var("KUDO_DIFF_FILTER").ok()
    );
    let deviations = known_deviations();

    // Panics are turned into mismatches so one broken case does not hide the others.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));

    let (mut out_match, mut err_cases, mut err_same) = (0usize, 0usize, 0usize);
    let mut mismatches: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut message_diffs: Vec<String> = Vec::new();
    let mut known: Vec<String> = Vec::new();
    let mut stale: Vec<String> = Vec::new();
    for case in &cases {
        let got = catch_unwind(AssertUnwindSafe(|| render_case(case))).unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic".into());
            Err(format!("PANIC: {msg}"))
        });
        let mismatch = match (&case.expected, got) {
            (Expected::Out(want), Ok(got)) if *want == got => {
                out_match += 1;
                None
            }
            (Expected::Out(want), Ok(got)) => Some(format!(
                "{}: output differs, {}",
                case.id,
                first_difference(want, &got)
            )),
            (Expected::Out(want), Err(msg)) => Some(format!(
                "{}: want output {:?}, got error {}",
                case.id,
                short(&String::from_utf8_lossy(want), 60),
                short(&msg, 200)
            )),
            (Expected::Err(want), Err(msg)) => {
                err_cases += 1;
                if *want == msg {
                    err_same += 1;
                } else {
                    message_diffs.push(format!(
                        "{}:\n      want {}\n      got  {}",
                        case.id,
                        want,
                        short(&msg, 300)
                    ));
                }
                None
            }
            (Expected::Err(want), Ok(got)) => Some(format!(
                "{}: want error {}, got output {:?}",
                case.id,
                short(want, 200),
                short(&String::from_utf8_lossy(&got), 80)
            )),
        };
        match (mismatch, deviations.get(&case.id)) {
            (Some(m), Some(reason)) => known.push(format!("{m}\n      (known deviation: {reason})")),
            (Some(m), None) => {
                let category = case.id.split('/').next().unwrap_or("").to_string();
                mismatches.entry(category).or_default().push(m);
            }
            (None, Some(_)) => stale.push(case.id.clone()),
            (None, None) => {}
        }
    }
    std::panic::set_hook(default_hook);
    if !filtered {
        let ids: Vec<&String> = cases.iter().map(|c| &c.id).collect();
        stale.extend(
            deviations
                .keys()
                .filter(|k| !ids.contains(k))
                .map(|k| format!("{k} (no such case)")),
        );
    }

    let n_mismatch: usize = mismatches.values().map(Vec::len).sum();
    let mut report = String::new();
    for (category, list) in &mismatches {
        let _ = writeln!(report, "  [{category}] {} mismatches", list.len());
        for m in list {
            let _ = writeln!(report, "    {m}");
        }
    }
    if !message_diffs.is_empty() {
        let _ = writeln!(
            report,
            "  error cases with a different message ({}):",
            message_diffs.len()
        );
        for m in &message_diffs {
            let _ = writeln!(report, "    {m}");
        }
    }
    if !known.is_empty() {
        let _ = writeln!(report, "  known deviations ({}):", known.len());
        for m in &known {
            let _ = writeln!(report, "    {m}");
        }
    }
    let summary = format!(
        "differential: {} cases, {} output matches, {} error cases ({} same message), {} mismatches, {} known deviations",
        cases.len(),
        out_match,
        err_cases,
        err_same,
        n_mismatch,
        known.len()
    );
    eprintln!("{report}{summary}");
    assert!(
        stale.is_empty(),
        "known-deviations.txt lists cases that now match the oracle (remove them): {stale:?}"
    );
    assert_eq!(n_mismatch, 0, "{summary}");
}

/// Names in the oracle's `--profile kudo --list-funcs` (checked in next to the corpus by
/// scripts/regen-template-goldens.sh).
fn oracle_function_names() -> Vec<String> {
    let path = corpus_dir().join("kudo-funcs.txt");
    fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// Counts identifier tokens in a template that are used as function names: not a field (`.x`) and
/// not a variable (`$x`).
fn count_function_tokens(text: &str, counts: &mut BTreeMap<String, usize>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let prev = if start > 0 { bytes[start - 1] } else { b' ' };
            if prev != b'.'
                && prev != b'$'
                && let Some(n) = counts.get_mut(&text[start..i])
            {
                *n += 1;
            }
        } else {
            i += 1;
        }
    }
}

#[test]
fn corpus_uses_every_kudo_function_at_least_twice() {
    let names = oracle_function_names();
    assert_eq!(names.len(), 144, "the kudo profile lists 144 functions");
    let mut counts: BTreeMap<String, usize> = names.iter().map(|n| (n.clone(), 0)).collect();
    let mut n_templates = 0;
    for dir in fs::read_dir(corpus_dir())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
    {
        if !dir.is_dir() {
            continue;
        }
        for f in fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
        {
            if f.extension().is_some_and(|e| e == "tmpl") {
                n_templates += 1;
                count_function_tokens(&fs::read_to_string(&f).unwrap(), &mut counts);
            }
        }
    }
    assert!(n_templates >= 500, "corpus has only {n_templates} cases");
    let rare: Vec<String> = counts
        .iter()
        .filter(|(_, n)| **n < 2)
        .map(|(k, n)| format!("{k} ({n})"))
        .collect();
    assert!(
        rare.is_empty(),
        "functions used fewer than twice in the corpus: {}",
        rare.join(", ")
    );
}

#[test]
fn kudo_funcs_has_exactly_the_oracle_names() {
    let want = oracle_function_names();
    let have = kudo_funcs().names();
    let missing: Vec<&String> = want.iter().filter(|n| !have.contains(n)).collect();
    let extra: Vec<&String> = have.iter().filter(|n| !want.contains(n)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "kudo_funcs() vs oracle: missing {missing:?}, extra {extra:?}"
    );
}
