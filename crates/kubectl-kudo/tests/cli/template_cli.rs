//! `kubectl-kudo template render`, run as a process. Expected outputs and messages are the Go
//! oracle's goldens from crates/kudo-template/tests/corpus (never produced by our own code).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kubectl-kudo"))
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kudo-template/tests/corpus")
}

fn golden(rel: &str) -> String {
    fs::read_to_string(corpus().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run kubectl-kudo")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn single_render_matches_oracle_golden() {
    let c = corpus().join("galera");
    let out = run(&[
        "template",
        "render",
        c.join("galera-config-v2-node-config-7.tmpl").to_str().unwrap(),
        "--data",
        c.join("galera-config-v2-node-config-7.json").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        golden("galera/galera-config-v2-node-config-7.out")
    );
    assert!(out.stderr.is_empty());
}

#[test]
fn yaml_data_by_extension() {
    let c = corpus().join("yaml");
    let out = run(&[
        "template",
        "render",
        c.join("kudo-params.tmpl").to_str().unwrap(),
        "-d",
        c.join("kudo-params.yaml").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), golden("yaml/kudo-params.out"));
}

#[test]
fn set_builds_kudo_params() {
    // galera-address-only renders .Name, .OperatorName and .Params.NODE_COUNT of the galera data.
    let t = corpus().join("galera/galera-address-only.tmpl");
    let out = run(&[
        "template",
        "render",
        t.to_str().unwrap(),
        "--set",
        "Name=galera-instance",
        "--set",
        "OperatorName=galera",
        "--set",
        "Params.NODE_COUNT=3",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), golden("galera/galera-address-only.out"));
}

#[test]
fn set_overrides_data_file() {
    // The data file says NODE_COUNT=1; --set applies after it.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.json");
    fs::write(
        &data,
        r#"{"Name":"galera-instance","OperatorName":"galera","Params":{"NODE_COUNT":"1"}}"#,
    )
    .unwrap();
    let t = corpus().join("galera/galera-address-only.tmpl");
    let out = run(&[
        "template",
        "render",
        t.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "--set",
        "Params.NODE_COUNT=3",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), golden("galera/galera-address-only.out"));
}

#[test]
fn template_from_stdin() {
    let mut child = bin()
        .args([
            "template",
            "render",
            "-",
            "--data",
            corpus().join("galera/data.json").to_str().unwrap(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(golden("galera/statefulset-anti-affinity.tmpl").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), golden("galera/statefulset-anti-affinity.out"));
}

#[test]
fn template_error_exit_1_with_oracle_message() {
    let c = corpus().join("errors");
    let out = run(&[
        "template",
        "render",
        c.join("missingkey-params.tmpl").to_str().unwrap(),
        "--data",
        c.join("data.json").to_str().unwrap(),
        "--name",
        "tpl",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "no partial output on error");
    assert_eq!(text(&out.stderr), golden("errors/missingkey-params.err"));

    let out = run(&[
        "template",
        "render",
        c.join("parse-undefined-function.tmpl").to_str().unwrap(),
        "--name",
        "tpl",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), golden("errors/parse-undefined-function.err"));
}

#[test]
fn template_name_defaults_to_file_name() {
    // Oracle: `gotmpl-oracle --profile kudo --name missingkey-top.tmpl missingkey-top.tmpl`.
    let t = corpus().join("errors/missingkey-top.tmpl");
    let out = run(&["template", "render", t.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error rendering template: template: missingkey-top.tmpl:1:3: executing \"missingkey-top.tmpl\" at <.Nope>: map has no entry for key \"Nope\"\n"
    );
}

#[test]
fn unreadable_files_and_bad_data_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.tmpl");
    let out = run(&["template", "render", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("nope.tmpl"),
        "stderr: {}",
        text(&out.stderr)
    );

    let t = corpus().join("galera/bootstrap-config.tmpl");
    let bad = dir.path().join("bad.json");
    fs::write(&bad, "{bad").unwrap();
    let out = run(&[
        "template",
        "render",
        t.to_str().unwrap(),
        "--data",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("bad.json"),
        "stderr: {}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());

    let bad_yaml = dir.path().join("bad.yaml");
    fs::write(&bad_yaml, "a: [unclosed\n").unwrap();
    let out = run(&[
        "template",
        "render",
        t.to_str().unwrap(),
        "--data",
        bad_yaml.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("bad.yaml"),
        "stderr: {}",
        text(&out.stderr)
    );

    let out = run(&[
        "template",
        "render",
        t.to_str().unwrap(),
        "--set",
        "no-equals-sign",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("KEY=VALUE"),
        "stderr: {}",
        text(&out.stderr)
    );
}

#[test]
fn batch_matches_oracle_goldens() {
    let src = corpus().join("galera");
    let dir = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    for e in fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if matches!(ext, "tmpl" | "json" | "yaml" | "yml") {
            fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
        }
        if ext == "tmpl" {
            names.push(p.file_stem().unwrap().to_string_lossy().into_owned());
        }
    }
    // A stale result of the other kind must be removed.
    fs::write(dir.path().join("bootstrap-config.err"), "stale\n").unwrap();

    let out = run(&["template", "render", "--batch", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let summary = text(&out.stderr);
    assert!(
        summary.contains(&format!("{} templates", names.len())),
        "summary: {summary}"
    );

    let mut mismatches = Vec::new();
    for name in &names {
        for kind in ["out", "err"] {
            let want = src.join(format!("{name}.{kind}"));
            let got = dir.path().join(format!("{name}.{kind}"));
            match (want.is_file(), got.is_file()) {
                (false, false) => {}
                (true, true) if fs::read(&want).unwrap() == fs::read(&got).unwrap() => {}
                (w, g) => mismatches.push(format!("{name}.{kind}: golden {w}, ours {g}")),
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "batch differs from the oracle: {mismatches:#?}"
    );

    let quiet = run(&[
        "template",
        "render",
        "--batch",
        dir.path().to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(quiet.status.code(), Some(0));
    assert!(quiet.stderr.is_empty());
}

#[test]
fn batch_case_with_bad_data_exits_3_and_others_still_render() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("good.tmpl"),
        golden("galera/bootstrap-config.tmpl"),
    )
    .unwrap();
    fs::write(dir.path().join("data.json"), golden("galera/data.json")).unwrap();
    fs::write(dir.path().join("bad.tmpl"), "{{ .x }}").unwrap();
    fs::write(dir.path().join("bad.json"), "{not json").unwrap();
    let out = run(&[
        "template",
        "render",
        "--batch",
        dir.path().to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("bad.json"),
        "stderr: {}",
        text(&out.stderr)
    );
    assert!(!dir.path().join("bad.out").exists() && !dir.path().join("bad.err").exists());
    assert_eq!(
        fs::read_to_string(dir.path().join("good.out")).unwrap(),
        golden("galera/bootstrap-config.out")
    );
}

#[test]
fn help_has_examples() {
    let out = run(&["template", "render", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for needle in [
        "--batch",
        "--set",
        "Params.NODE_COUNT=3",
        "Examples:",
        "Exit status",
    ] {
        assert!(help.contains(needle), "help lacks {needle:?}:\n{help}");
    }
}
