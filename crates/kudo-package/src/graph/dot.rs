//! A plan graph in Graphviz's DOT language, for tools that take it (`dot -Tpng`, editors'
//! previews). One cluster per plan and per phase; the rows of each phase are those of
//! [`super::layout`] (`rank=same`), so serial steps stand in rows of at most
//! [`super::layout::MAX_COLUMNS`] as on the page; the edges are [`super::flow`]'s (between phases
//! from the last step of one to the first of the next, clipped at the clusters' borders).

use std::fmt::Write;

use super::layout::{StepBox, layout};
use super::svg::task_line;
use super::{Node, PhaseNode, PlanGraph, flow, palette, status_word};

/// The DOT digraph of `plans`, labelled `title`.
pub fn render(title: &str, plans: &[PlanGraph]) -> String {
    let mut out = format!(
        "digraph plans {{\n  graph [label={}, labelloc=t, fontname=\"sans-serif\", compound=true, \
         rankdir=TB, newrank=true];\n  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", \
         fontname=\"sans-serif\", fontsize=11];\n  edge [color=\"#57606a\"];\n",
        quote(title)
    );
    for (p, plan) in plans.iter().enumerate() {
        let mut head = format!("plan {} · {}", plan.name, plan.strategy.word());
        if let Some(s) = plan.status {
            let _ = write!(head, " · {s}");
        }
        let _ = writeln!(out, "  subgraph cluster_p{p} {{\n    label={};", quote(&head));
        let placed = layout(plan);
        for (f, phase) in plan.phases.iter().enumerate() {
            phase_cluster(&mut out, p, f, phase, &placed.phases[f].steps);
        }
        out.push_str("  }\n");
        for (from, to) in flow(plan) {
            out.push_str(&edge(plan, p, from, to));
        }
    }
    out.push_str("}\n");
    out
}

/// The cluster of phase `f` of plan `p`: its steps, and one `rank=same` group per row of `boxes`.
fn phase_cluster(out: &mut String, p: usize, f: usize, phase: &PhaseNode, boxes: &[StepBox]) {
    let head = format!("phase {} · {}", phase.name, phase.strategy.word());
    let _ = writeln!(
        out,
        "    subgraph cluster_p{p}f{f} {{\n      label={};",
        quote(&head)
    );
    for (s, step) in phase.steps.iter().enumerate() {
        let mut text = step.name.clone();
        if step.status.is_some() {
            let _ = write!(text, "\n{}", status_word(step.status));
        }
        for t in &step.tasks {
            let _ = write!(text, "\n{}", task_line(t));
        }
        let mut attrs = format!("label={}", quote(&text));
        if step.status.is_some() {
            let c = palette::colors(step.status);
            let _ = write!(
                attrs,
                ", fillcolor=\"{}\", fontcolor=\"{}\", color=\"{}\"",
                c.bg, c.fg, c.border
            );
        }
        let _ = writeln!(out, "      p{p}f{f}s{s} [{attrs}];");
    }
    if phase.steps.is_empty() {
        let _ = writeln!(out, "      p{p}f{f}none [label=\"(no steps)\"];");
    }
    for row in 0..boxes.iter().map(|b| b.row + 1).max().unwrap_or(0) {
        let ids: Vec<String> = (0..boxes.len())
            .filter(|s| boxes[*s].row == row)
            .map(|s| format!("p{p}f{f}s{s}"))
            .collect();
        let _ = writeln!(out, "      {{ rank=same; {}; }}", ids.join("; "));
    }
    out.push_str("    }\n");
}

fn edge(plan: &PlanGraph, p: usize, from: Node, to: Node) -> String {
    match (from, to) {
        (Node::Step(f, a), Node::Step(_, b)) => format!("  p{p}f{f}s{a} -> p{p}f{f}s{b};\n"),
        (Node::Phase(a), Node::Phase(b)) => {
            let last = plan.phases[a].steps.len().checked_sub(1);
            let tail = last.map_or(format!("p{p}f{a}none"), |s| format!("p{p}f{a}s{s}"));
            let head = if plan.phases[b].steps.is_empty() {
                format!("p{p}f{b}none")
            } else {
                format!("p{p}f{b}s0")
            };
            format!("  {tail} -> {head} [ltail=cluster_p{p}f{a}, lhead=cluster_p{p}f{b}];\n")
        }
        _ => String::new(),
    }
}

/// A DOT quoted string.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
