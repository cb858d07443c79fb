//! A plan graph as a mermaid flowchart, the diagram GitHub renders in a ```` ```mermaid ````
//! block of a README or a pull request.
//!
//! The output keeps to a small part of mermaid's flowchart grammar, so that it renders on any
//! mermaid since 9 and stays easy to check: the header `flowchart TB`; `subgraph ID["label"]` …
//! `end` per plan and per phase, each followed by a `direction` line (`TB` for a plan, `LR` for a
//! phase: serial steps in a row); one node per step, `ID["label"]`, whose label is the step and
//! its tasks separated by `<br>`; edges `ID --> ID` from [`super::flow`] (between the phase
//! subgraphs of a serial plan and between the steps of a serial phase, none between parallel
//! steps); and, when a run is shown, `classDef` lines of [`super::palette`] and `class ID NAME`
//! lines. IDs are generated (`p0`, `p0f1`, `p0f1s2`: plan, phase, step indexes), never names, so
//! no name can collide with a keyword such as `end`; labels are quoted, and `"`, `<`, `>`, `&`
//! and `#` in names are written as mermaid's entity codes (`#quot;`, `#lt;`, `#gt;`, `#amp;`,
//! `#35;`).

use std::collections::BTreeSet;
use std::fmt::Write;

use super::svg::task_line;
use super::{Node, PlanGraph, flow, palette, status_word};

/// The mermaid flowchart of `plans`.
pub fn render(plans: &[PlanGraph]) -> String {
    let mut out = String::from("flowchart TB\n");
    let mut classes: Vec<(String, &'static str)> = Vec::new();
    for (p, plan) in plans.iter().enumerate() {
        let mut head = format!("plan {} · {}", plan.name, plan.strategy.word());
        if let Some(s) = plan.status {
            let _ = write!(head, " · {s}");
        }
        let _ = writeln!(out, "  subgraph p{p}[\"{}\"]\n    direction TB", label(&head));
        for (f, phase) in plan.phases.iter().enumerate() {
            let head = format!("phase {} · {}", phase.name, phase.strategy.word());
            let _ = writeln!(
                out,
                "    subgraph p{p}f{f}[\"{}\"]\n      direction LR",
                label(&head)
            );
            for (s, step) in phase.steps.iter().enumerate() {
                let mut text = label(&step.name);
                if step.status.is_some() {
                    let _ = write!(text, "<br>{}", status_word(step.status));
                    classes.push((format!("p{p}f{f}s{s}"), palette::colors(step.status).class));
                }
                for t in &step.tasks {
                    let _ = write!(text, "<br>{}", label(&task_line(t)));
                }
                let _ = writeln!(out, "      p{p}f{f}s{s}[\"{text}\"]");
            }
            if phase.steps.is_empty() {
                let _ = writeln!(out, "      p{p}f{f}none[\"(no steps)\"]");
            }
            out.push_str("    end\n");
        }
        out.push_str("  end\n");
        for (from, to) in flow(plan) {
            let _ = writeln!(out, "  {} --> {}", id(p, from), id(p, to));
        }
    }
    let used: BTreeSet<&str> = classes.iter().map(|(_, c)| *c).collect();
    for (_, c) in palette::STATUSES.iter().filter(|(_, c)| used.contains(c.class)) {
        let _ = writeln!(
            out,
            "  classDef {} fill:{},color:{},stroke:{}",
            c.class.replace('-', "_"),
            c.bg,
            c.fg,
            c.border
        );
    }
    for (node, class) in &classes {
        let _ = writeln!(out, "  class {node} {}", class.replace('-', "_"));
    }
    out
}

fn id(plan: usize, node: Node) -> String {
    match node {
        Node::Phase(f) => format!("p{plan}f{f}"),
        Node::Step(f, s) => format!("p{plan}f{f}s{s}"),
    }
}

/// A name inside a quoted label, with mermaid's entity codes for what would end or change it.
fn label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '&' => out.push_str("#amp;"),
            '#' => out.push_str("#35;"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}
