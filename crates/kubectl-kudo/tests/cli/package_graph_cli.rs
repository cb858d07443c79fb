//! `package graph` through the real binary on the Galera example: SVG that is well-formed XML
//! naming every step, DOT that Graphviz's `dot` reads and draws, mermaid naming every step, and
//! an unknown plan refused with the plans there are.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::common::{self, BIN};

fn galera() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/galera")
}

fn graph(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["package", "graph"])
        .arg(galera())
        .args(args)
        .output()
        .expect("kubectl-kudo runs")
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// The deploy plan's step names, read from the package itself (not from our output).
fn deploy_steps() -> Vec<String> {
    let text = std::fs::read_to_string(galera().join("operator.yaml")).unwrap();
    let doc: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    doc["plans"]["deploy"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|ph| ph["steps"].as_array().unwrap().iter())
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn svg_mermaid_and_dot_of_the_galera_deploy_plan() {
    let steps = deploy_steps();
    assert!(steps.len() > 4, "galera's deploy plan has many steps: {steps:?}");
    let svg = stdout(&graph(&["--plan", "deploy"]));
    assert!(
        svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{svg}"
    );
    assert!(svg.contains("plan deploy · serial"));
    for s in &steps {
        assert!(
            svg.contains(&format!("<title>step {s}")),
            "step {s} missing in\n{svg}"
        );
    }
    let mermaid = stdout(&graph(&["--plan", "deploy", "-o", "mermaid"]));
    assert!(mermaid.starts_with("flowchart TB\n"));
    for s in &steps {
        assert!(
            mermaid.contains(&format!("[\"{s}<br>")),
            "step {s} missing in\n{mermaid}"
        );
    }
    let all = stdout(&graph(&["-o", "dot"]));
    assert!(all.starts_with("digraph plans {"));
    if !common::tool_or_skip("dot", &["-V"], "the DOT output is checked by Graphviz") {
        return;
    }
    // Graphviz reads our DOT and draws it: an SVG that names every step of deploy.
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(all.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.trim().is_empty(), "dot: {err}");
    let drawn = String::from_utf8(o.stdout).unwrap();
    for s in &steps {
        assert!(drawn.contains(&format!(">{s}</text>")), "dot did not draw {s}");
    }
}

#[test]
fn an_unknown_plan_is_refused_naming_the_plans_there_are() {
    let o = graph(&["--plan", "nope"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("plan \"nope\" not found") && err.contains("deploy"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}
