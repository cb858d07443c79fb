use kudo_api::{ExecutionStatus, OperatorVersionSpec, PlanStatus};
use serde_json::json;

use super::layout::{GAP_X, MAX_COLUMNS, STEP_W, layout};
use super::*;

fn spec(plans: serde_json::Value) -> OperatorVersionSpec {
    serde_json::from_value(json!({
        "tasks": [
            {"name": "app", "kind": "Apply", "spec": {"resources": ["deploy.yaml", "svc.yaml"]}},
            {"name": "wipe", "kind": "Delete", "spec": {"resources": ["deploy.yaml"]}}
        ],
        "plans": plans
    }))
    .unwrap()
}

fn steps(n: usize) -> serde_json::Value {
    (0..n)
        .map(|i| json!({"name": format!("s{i}"), "tasks": ["app"]}))
        .collect()
}

#[test]
fn the_model_reads_kudo_strategies_and_tasks() {
    let s = spec(json!({
        "deploy": {"strategy": "serial", "phases": [
            {"name": "a", "strategy": "serial", "steps": [{"name": "x", "tasks": ["app", "wipe", "gone"]}]},
            {"name": "b", "strategy": "parallel", "steps": steps(2)},
            {"name": "c", "steps": steps(1)}]},
        "other": {"phases": []}
    }));
    let plans = plans_of(&s);
    assert_eq!(
        plans.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["deploy", "other"]
    );
    let deploy = &plans[0];
    assert_eq!(deploy.strategy, Strategy::Serial);
    // KUDO's engine runs anything but `serial` in parallel, an empty strategy included.
    assert_eq!(plans[1].strategy, Strategy::Parallel);
    assert_eq!(deploy.phases[2].strategy, Strategy::Parallel);
    let tasks = &deploy.phases[0].steps[0].tasks;
    assert_eq!(tasks[0].kind, "Apply");
    assert_eq!(tasks[0].resources, ["deploy.yaml", "svc.yaml"]);
    assert_eq!(tasks[1].kind, "Delete");
    assert_eq!((tasks[2].name.as_str(), tasks[2].kind.as_str()), ("gone", ""));
}

#[test]
fn flow_links_serial_children_in_order_and_parallel_ones_not_at_all() {
    let cases = [
        // (plan strategy, phase strategies with step counts, expected edges)
        (
            "serial",
            vec![("serial", 3)],
            vec![
                (Node::Step(0, 0), Node::Step(0, 1)),
                (Node::Step(0, 1), Node::Step(0, 2)),
            ],
        ),
        ("serial", vec![("parallel", 3)], vec![]),
        (
            "serial",
            vec![("parallel", 2), ("serial", 2)],
            vec![
                (Node::Phase(0), Node::Phase(1)),
                (Node::Step(1, 0), Node::Step(1, 1)),
            ],
        ),
        ("parallel", vec![("parallel", 1), ("parallel", 1)], vec![]),
    ];
    for (strategy, phases, want) in cases {
        let phases: Vec<_> = phases
            .iter()
            .enumerate()
            .map(|(i, (st, n))| json!({"name": format!("f{i}"), "strategy": st, "steps": steps(*n)}))
            .collect();
        let plan = &plans_of(&spec(json!({"p": {"strategy": strategy, "phases": phases}})))[0];
        assert_eq!(flow(plan), want, "{strategy} {phases:?}");
    }
}

#[test]
fn serial_steps_fill_rows_that_wrap_and_parallel_plans_put_phases_side_by_side() {
    let s = spec(json!({
        "wrap": {"strategy": "serial", "phases": [
            {"name": "a", "strategy": "serial", "steps": steps(MAX_COLUMNS + 2)},
            {"name": "b", "strategy": "parallel", "steps": steps(2)}]},
        "side": {"strategy": "parallel", "phases": [
            {"name": "a", "strategy": "serial", "steps": steps(1)},
            {"name": "b", "strategy": "serial", "steps": steps(1)}]}
    }));
    let plans = plans_of(&s);
    let side = layout(&plans[0]);
    let wrap = layout(&plans[1]);
    // Rows of MAX_COLUMNS: step 4 starts the second row, under step 0.
    let a = &wrap.phases[0];
    assert_eq!(a.columns, MAX_COLUMNS);
    let grid: Vec<(usize, usize)> = a.steps.iter().map(|b| (b.row, b.col)).collect();
    assert_eq!(grid, [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]);
    assert_eq!(a.steps[1].rect.x - a.steps[0].rect.x, STEP_W + GAP_X);
    assert_eq!(a.steps[4].rect.x, a.steps[0].rect.x);
    assert!(a.steps[4].rect.y > a.steps[0].rect.bottom());
    // The serial plan's second phase is below the first; its two parallel steps share a row.
    let b = &wrap.phases[1];
    assert!(b.rect.y > a.rect.bottom());
    assert_eq!((b.row, b.col), (1, 0));
    assert_eq!(b.steps[0].rect.y, b.steps[1].rect.y);
    // Arrows: along the row (horizontal), the wrap (down, left, down), and phase a → phase b.
    let arrow = |from, to| wrap.arrows.iter().find(|x| x.from == from && x.to == to).unwrap();
    let along = arrow(Node::Step(0, 0), Node::Step(0, 1));
    assert_eq!(along.points.len(), 2);
    assert_eq!(along.points[0].1, along.points[1].1);
    assert_eq!(along.points[0].0, a.steps[0].rect.right());
    assert_eq!(along.points[1].0, a.steps[1].rect.x);
    let wrapped = arrow(Node::Step(0, 3), Node::Step(0, 4));
    assert_eq!(wrapped.points.len(), 4);
    assert_eq!(
        *wrapped.points.last().unwrap(),
        (a.steps[4].rect.center_x(), a.steps[4].rect.y)
    );
    let down = arrow(Node::Phase(0), Node::Phase(1));
    assert_eq!((down.points[0].1, down.points[1].1), (a.rect.bottom(), b.rect.y));
    assert_eq!(
        wrap.arrows.len(),
        MAX_COLUMNS + 1 + 1,
        "5 step arrows, 1 phase arrow, none in b"
    );
    // The parallel plan: phases side by side, no arrow.
    assert_eq!(side.phases[0].rect.y, side.phases[1].rect.y);
    assert!(side.phases[1].rect.x > side.phases[0].rect.right());
    assert!(side.arrows.is_empty());
    // Everything lies inside the drawing.
    for l in [&side, &wrap] {
        for p in &l.phases {
            assert!(p.rect.right() <= l.width && p.rect.bottom() <= l.height);
            for s in &p.steps {
                assert!(s.rect.x >= p.rect.x && s.rect.right() <= p.rect.right());
                assert!(s.rect.y >= p.rect.y && s.rect.bottom() <= p.rect.bottom());
            }
        }
    }
}

#[test]
fn a_run_laid_over_the_plan_colours_and_names_each_step() {
    let s = spec(json!({"deploy": {"strategy": "serial", "phases": [
        {"name": "a", "strategy": "serial", "steps": steps(2)}]}}));
    let status: PlanStatus = serde_json::from_value(json!({
        "name": "deploy", "status": "IN_PROGRESS", "phases": [{"name": "a", "status": "IN_PROGRESS",
            "steps": [{"name": "s0", "status": "COMPLETE"},
                      {"name": "s1", "status": "IN_PROGRESS", "waitingFor": ["Deployment web: 0/1 ready"]}]}]
    }))
    .unwrap();
    let plan = plans_of(&s).remove(0).with_status(&status);
    assert_eq!(plan.status, Some(ExecutionStatus::InProgress));
    let st = &plan.phases[0].steps;
    assert_eq!(st[1].waiting_for, ["Deployment web: 0/1 ready"]);
    let svg = svg::render("t", std::slice::from_ref(&plan));
    assert!(
        svg.contains(">COMPLETE</text>") && svg.contains(">IN_PROGRESS</text>"),
        "{svg}"
    );
    assert!(svg.contains(&format!(
        "fill=\"{}\"",
        palette::colors(Some(ExecutionStatus::Complete)).bg
    )));
    let m = mermaid::render(std::slice::from_ref(&plan));
    assert!(
        m.contains("  class p0f0s0 st_complete\n") && m.contains("  class p0f0s1 st_in_progress\n"),
        "{m}"
    );
    check_mermaid(&m);
}

#[test]
fn svg_shortens_long_names_keeps_them_in_the_title_and_escapes_markup() {
    let long = "a_step_with_a_name_far_too_long_for_its_box";
    let s = spec(json!({"p<&>": {"strategy": "serial", "phases": [
        {"name": "x\"y", "strategy": "serial", "steps": [{"name": long, "tasks": ["app"]}]}]}}));
    let svg = svg::render("graph of <pkg>", &plans_of(&s));
    assert!(svg.contains("a_step_with_a_name_far_to…</text>"), "{svg}");
    assert!(svg.contains(&format!(
        "<title>step {long}\ntask app (Apply): deploy.yaml, svc.yaml</title>"
    )));
    assert!(svg.contains("graph of &lt;pkg&gt;") && svg.contains("plan p&lt;&amp;&gt; · serial"));
    assert!(svg.contains("phase x&quot;y · serial"));
    assert!(!svg.contains("<pkg>"));
    // XML 1.0 cannot carry most control characters: dropped, so the document stays well-formed.
    assert_eq!(svg::esc("a\u{1}b\tc<"), "ab\tc&lt;");
}

#[test]
fn mermaid_and_dot_name_nodes_by_index_and_quote_names() {
    let s = spec(json!({
        "deploy": {"strategy": "serial", "phases": [
            {"name": "end", "strategy": "serial", "steps": [
                {"name": "say \"hi\" #1 <b>", "tasks": ["app"]}, {"name": "b", "tasks": []}]},
            {"name": "two", "strategy": "parallel", "steps": steps(2)},
            {"name": "empty", "strategy": "serial", "steps": []}]}
    }));
    let plans = plans_of(&s);
    let m = mermaid::render(&plans);
    check_mermaid(&m);
    assert!(
        m.contains("p0f0s0[\"say #quot;hi#quot; #35;1 #lt;b#gt;<br>app (Apply)\"]"),
        "{m}"
    );
    assert!(m.contains("subgraph p0f0[\"phase end · serial\"]"), "{m}");
    assert!(
        m.contains("  p0f0 --> p0f1\n  p0f1 --> p0f2\n  p0f0s0 --> p0f0s1\n"),
        "{m}"
    );
    assert!(
        !m.contains("p0f1s0 --> p0f1s1"),
        "parallel steps have no edge: {m}"
    );
    let d = dot::render("g", &plans);
    assert!(
        d.contains("p0f0s0 [label=\"say \\\"hi\\\" #1 <b>\\napp (Apply)\"];"),
        "{d}"
    );
    assert!(
        d.contains("p0f0s1 -> p0f1s0 [ltail=cluster_p0f0, lhead=cluster_p0f1];"),
        "{d}"
    );
    assert!(
        d.contains("p0f1s1 -> p0f2none [ltail=cluster_p0f1, lhead=cluster_p0f2];"),
        "{d}"
    );
    assert!(d.contains("{ rank=same; p0f1s0; p0f1s1; }"), "{d}");
    assert_eq!(d.matches('{').count(), d.matches('}').count());
}

/// Checks `src` against the part of mermaid's flowchart grammar [`mermaid`] documents: every
/// line one of its forms, subgraphs closed, ids unique, edges and classes between declared ids,
/// labels quoted with no raw quote, bracket or markup other than `<br>` inside.
pub(crate) fn check_mermaid(src: &str) {
    let mut lines = src.lines();
    assert_eq!(lines.next(), Some("flowchart TB"), "{src}");
    let id_ok = |id: &str| {
        !id.is_empty()
            && id.chars().all(|c| c.is_ascii_alphanumeric())
            && id.starts_with(|c: char| c.is_ascii_alphabetic())
    };
    let label_ok = |l: &str| {
        let bare = l.replace("<br>", "");
        !bare.contains(['"', '<', '>', '[', ']', '\n'])
            && bare.split('#').skip(1).all(|rest| {
                let code = rest.split(';').next().unwrap_or("");
                rest.contains(';')
                    && (["quot", "lt", "gt", "amp"].contains(&code) || code.parse::<u32>().is_ok())
            })
    };
    let (mut depth, mut ids, mut classes) = (0usize, std::collections::BTreeSet::new(), Vec::new());
    let mut expect_direction = false;
    for line in lines {
        let t = line.trim();
        if expect_direction {
            assert!(t == "direction TB" || t == "direction LR", "{t:?} in\n{src}");
            expect_direction = false;
            continue;
        }
        let node = |t: &str| -> Option<(String, String)> {
            let (id, rest) = t.split_once("[\"")?;
            let label = rest.strip_suffix("\"]")?;
            Some((id.to_string(), label.to_string()))
        };
        if let Some(rest) = t.strip_prefix("subgraph ") {
            let (id, label) = node(rest).unwrap_or_else(|| panic!("subgraph {t:?}"));
            assert!(id_ok(&id) && label_ok(&label) && ids.insert(id.clone()), "{t:?}");
            depth += 1;
            expect_direction = true;
        } else if t == "end" {
            depth = depth.checked_sub(1).expect("end without subgraph");
        } else if let Some((a, b)) = t.split_once(" --> ") {
            assert!(
                ids.contains(a) && ids.contains(b),
                "edge between undeclared ids: {t:?}"
            );
        } else if let Some(rest) = t.strip_prefix("classDef ") {
            let (name, style) = rest.split_once(' ').expect("classDef NAME STYLE");
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{t:?}"
            );
            for kv in style.split(',') {
                let (k, v) = kv.split_once(':').expect("key:value");
                assert!(
                    ["fill", "color", "stroke"].contains(&k) && v.starts_with('#'),
                    "{t:?}"
                );
            }
            classes.push(name.to_string());
        } else if let Some(rest) = t.strip_prefix("class ") {
            let (id, name) = rest.split_once(' ').expect("class ID NAME");
            assert!(ids.contains(id) && classes.iter().any(|c| c == name), "{t:?}");
        } else {
            let (id, label) = node(t).unwrap_or_else(|| panic!("not a node: {t:?}\n{src}"));
            assert!(id_ok(&id) && label_ok(&label), "{t:?}");
            assert!(ids.insert(id), "duplicate id: {t:?}");
        }
    }
    assert_eq!(depth, 0, "unclosed subgraph:\n{src}");
}
