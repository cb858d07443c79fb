//! A plan graph as SVG, written by hand from [`super::layout`] (no Graphviz needed): one block per
//! plan, stacked, on a white background so it reads on a dark page too. Statuses, when a run is
//! shown, colour the boxes ([`super::palette`]) and are written in them; names too long for a box
//! are shortened with `…` and kept whole in a `<title>` (a tooltip, and what a screen reader
//! reads).

use std::fmt::Write;

use super::layout::{LINE_H, PlanLayout, Rect, STEP_PAD, STEP_W, layout, step_lines};
use super::{PlanGraph, StepNode, TaskNode, palette, status_word};

/// The gap between two plans' blocks.
const PLAN_GAP: i32 = 24;
/// Characters of 12 px text that fit a step's box (DejaVu Sans averages under 7 px a character).
const FIT: usize = ((STEP_W - 2 * STEP_PAD) / 7) as usize;
const INK: &str = "#24292f";
const MUTED: &str = "#57606a";

/// The SVG document of `plans`, under the heading `title`.
pub fn render(title: &str, plans: &[PlanGraph]) -> String {
    let layouts: Vec<PlanLayout> = plans.iter().map(layout).collect();
    let width = layouts.iter().map(|l| l.width).max().unwrap_or(STEP_W);
    let top = 36;
    let height = top + layouts.iter().map(|l| l.height + PLAN_GAP).sum::<i32>();
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" role=\"img\" aria-labelledby=\"graph-title\">\n\
         <title id=\"graph-title\">{}</title>\n{}\
         <rect width=\"{width}\" height=\"{height}\" fill=\"#ffffff\"/>\n\
         <text class=\"title\" x=\"18\" y=\"24\">{}</text>\n",
        esc(title),
        preamble(),
        esc(title)
    );
    let mut y = top;
    for (plan, l) in plans.iter().zip(&layouts) {
        let _ = writeln!(out, "<g transform=\"translate(0,{y})\">");
        draw_plan(&mut out, plan, l);
        out.push_str("</g>\n");
        y += l.height + PLAN_GAP;
    }
    out.push_str("</svg>\n");
    out
}

fn preamble() -> String {
    format!(
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" \
         markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"{MUTED}\"/>\
         </marker></defs>\n\
         <style>text{{font-family:'DejaVu Sans',Verdana,Arial,sans-serif;font-size:12px;fill:{INK}}}\
         .title{{font-size:16px;font-weight:bold}}.plan{{font-size:14px;font-weight:bold}}\
         .phase{{font-weight:bold;fill:{MUTED}}}.name{{font-weight:bold}}</style>\n"
    )
}

fn draw_plan(out: &mut String, plan: &PlanGraph, l: &PlanLayout) {
    let head = format!("plan {} · {}", plan.name, plan.strategy.word());
    let head = match plan.status {
        Some(s) => format!("{head} · {s}"),
        None => head,
    };
    let _ = writeln!(
        out,
        "<text class=\"plan\" x=\"18\" y=\"20\">{}</text>",
        esc(&head)
    );
    for (phase, pb) in plan.phases.iter().zip(&l.phases) {
        let r = pb.rect;
        let _ = writeln!(
            out,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"8\" \
             fill=\"#f6f8fa\" stroke=\"#d0d7de\"/>",
            r.x, r.y, r.w, r.h
        );
        let mut label = format!("phase {} · {}", phase.name, phase.strategy.word());
        if phase.strategy == super::Strategy::Parallel && phase.steps.len() > 1 {
            label.push_str(" (steps run at the same time)");
        }
        if let Some(s) = phase.status {
            let _ = write!(label, " · {s}");
        }
        let _ = writeln!(
            out,
            "<text class=\"phase\" x=\"{}\" y=\"{}\">{}</text>",
            r.x + 12,
            r.y + 18,
            esc(&label)
        );
        for (step, sb) in phase.steps.iter().zip(&pb.steps) {
            draw_step(out, step, sb.rect);
        }
    }
    for a in &l.arrows {
        let pts: Vec<String> = a.points.iter().map(|(x, y)| format!("{x},{y}")).collect();
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{MUTED}\" stroke-width=\"1.5\" \
             marker-end=\"url(#arrow)\"/>",
            pts.join(" ")
        );
    }
}

fn draw_step(out: &mut String, step: &StepNode, r: Rect) {
    let c = palette::colors(step.status);
    let (fill, ink, stroke) = match step.status {
        Some(_) => (c.bg, c.fg, c.border),
        None => ("#ffffff", INK, "#8c959f"),
    };
    let mut lines: Vec<(String, &str)> = vec![(step.name.clone(), "name")];
    if step.status.is_some() {
        lines.push((status_word(step.status).to_string(), ""));
    }
    lines.extend(step.tasks.iter().map(|t| (task_line(t), "")));
    debug_assert_eq!(lines.len(), step_lines(step));
    let _ = writeln!(
        out,
        "<g><title>{}</title><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\" \
         fill=\"{fill}\" stroke=\"{stroke}\"/>",
        esc(&step_title(step)),
        r.x,
        r.y,
        r.w,
        r.h
    );
    for (i, (text, class)) in lines.iter().enumerate() {
        let y = r.y + STEP_PAD + LINE_H * i as i32 + 12;
        let class = if class.is_empty() {
            String::new()
        } else {
            format!(" class=\"{class}\"")
        };
        let _ = writeln!(
            out,
            "<text{class} x=\"{}\" y=\"{y}\" style=\"fill:{ink}\">{}</text>",
            r.x + STEP_PAD,
            esc(&fit(text))
        );
    }
    out.push_str("</g>\n");
}

/// `name (Kind)`, or the name alone for a task the OperatorVersion lacks.
pub fn task_line(t: &TaskNode) -> String {
    if t.kind.is_empty() {
        t.name.clone()
    } else {
        format!("{} ({})", t.name, t.kind)
    }
}

/// The whole text of a step: name, status, tasks and their templates.
fn step_title(step: &StepNode) -> String {
    let mut s = format!("step {}", step.name);
    if step.status.is_some() {
        let _ = write!(s, ": {}", status_word(step.status));
    }
    for t in &step.tasks {
        let _ = write!(s, "\ntask {}", task_line(t));
        if !t.resources.is_empty() {
            let _ = write!(s, ": {}", t.resources.join(", "));
        }
    }
    s
}

fn fit(text: &str) -> String {
    if text.chars().count() <= FIT {
        return text.to_string();
    }
    let kept: String = text.chars().take(FIT - 1).collect();
    format!("{kept}…")
}

/// Text for XML content and attributes; control characters XML 1.0 cannot carry are dropped.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}
