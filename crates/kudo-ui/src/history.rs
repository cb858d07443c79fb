//! The revision history of an Instance page (the ControllerRevisions `kubectl kudo history`
//! lists, read by [`kudo_client::revisions`]), the diff of two chosen revisions (the differences
//! [`kudo_engine::revision::differences`] finds, the same the CHANGE column is written from) and
//! a rollback button per earlier revision. Revisions never record a sensitive value; a parameter
//! the OperatorVersion marks sensitive is masked even where its default would show.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kudo_api::{ExecutionStatus, OperatorVersion};
use kudo_engine::revision::{Differences, Revision};
use kudo_package::graph::palette;
use maud::{Markup, html};

/// How long a revision's run took, when it ended: `42s`, `3m05s`, `2h10m`.
pub fn took(rev: &Revision) -> Option<String> {
    let parse = |t: &str| t.parse::<Timestamp>().ok();
    let (start, end) = (parse(&rev.created)?, parse(rev.finished.as_deref()?)?);
    Some(duration_words(end.duration_since(start)))
}

/// A duration in at most two units (seconds when under a minute).
pub fn duration_words(d: SignedDuration) -> String {
    let s = d.as_secs().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// A revision's status word with the colour of the plan status of that name, if any.
fn badge(word: &str) -> Markup {
    let status: Option<ExecutionStatus> = serde_json::from_value(serde_json::json!(word)).ok();
    html! { span class=(format!("badge {}", palette::colors(status).class)) { (word) } }
}

/// The section: the compare form and the table, newest first, with a rollback form on every
/// revision but the newest. `base`: the Instance page's path.
pub fn section(base: &str, revs: &Result<Vec<Revision>, String>) -> Markup {
    html! {
        h2 #revisions { "Revisions" }
        @match revs {
            Err(e) => p.message { "Cannot list the revisions: " (e) },
            Ok(revs) if revs.is_empty() => p { "No revisions recorded yet." },
            Ok(revs) => {
                (compare_form(base, revs))
                (table(base, revs))
            }
        }
    }
}

fn compare_form(base: &str, revs: &[Revision]) -> Markup {
    let newest = revs.last().map_or(0, |r| r.number);
    let before = revs.iter().rev().nth(1).map_or(newest, |r| r.number);
    let select = |name: &str, chosen: u64| {
        html! {
            select id=(format!("diff-{name}")) name=(name) {
                @for r in revs.iter().rev() {
                    option value=(r.number) selected[r.number == chosen] { (r.number) }
                }
            }
        }
    };
    html! {
        form.compare method="get" action=(format!("{base}/diff")) {
            label for="diff-from" { "Compare revision " } (select("from", before))
            label for="diff-to" { " with " } (select("to", newest))
            " " button type="submit" { "Show the differences" }
        }
    }
}

fn table(base: &str, revs: &[Revision]) -> Markup {
    let newest = revs.last().map_or(0, |r| r.number);
    html! {
        div.scroll { table.revisions {
            thead { tr {
                th scope="col" { "Revision" } th scope="col" { "Updated" }
                th scope="col" { "Operator version" }
                th scope="col" { "Plan" } th scope="col" { "Status" } th scope="col" { "Took" }
                th scope="col" { "By" } th scope="col" { "Change" } th scope="col" { "Action" }
            } }
            tbody {
                @for r in revs.iter().rev() {
                    tr data-revision=(r.number) {
                        td { (r.number) } td { time { (r.updated()) } } td { (r.data.operator_version) }
                        td { (r.data.plan) } td { (badge(r.status())) }
                        td { (took(r).unwrap_or_else(|| "—".into())) }
                        td { (r.data.started_by.word()) } td { (r.data.change) }
                        td { @if r.number != newest { (rollback_form(base, r.number)) } }
                    }
                }
            }
        } }
    }
}

fn rollback_form(base: &str, number: u64) -> Markup {
    html! {
        form.rollback method="post" action=(format!("{base}/rollback"))
            data-confirm=(format!("Roll back to revision {number}: its parameters and operator version?")) {
            input type="hidden" name="revision" value=(number);
            button type="submit" { "Roll back to " (number) }
        }
    }
}

/// The diff of revisions `from` and `to` of the Instance `title` names; values of parameters
/// `ov` marks sensitive masked.
pub fn diff(from: &Revision, to: &Revision, d: &Differences, ov: &OperatorVersion) -> Markup {
    let sensitive = |p: &str| ov.spec.parameters.iter().any(|d| d.name == p && d.is_sensitive());
    let value = |name: &str, v: &Option<String>| match v {
        _ if sensitive(name) => html! { "(sensitive)" },
        Some(v) => html! { code { (v) } },
        None => html! { "(unset)" },
    };
    let (a, b) = (from.number, to.number);
    html! {
        div.scroll { table.diff {
            thead { tr {
                th scope="col" { "" } th scope="col" { "Revision " (a) } th scope="col" { "Revision " (b) }
            } }
            tbody {
                tr { th scope="row" { "Plan" } td { (from.data.plan) } td { (to.data.plan) } }
                tr { th scope="row" { "Status" } td { (badge(from.status())) } td { (badge(to.status())) } }
                @if let Some((x, y)) = &d.version {
                    tr.changed { th scope="row" { "Operator version" } td { (x) } td { (y) } }
                }
                @for c in &d.values {
                    tr.changed data-parameter=(c.name) {
                        th scope="row" { (c.name) }
                        td { (value(&c.name, &c.before)) } td { (value(&c.name, &c.after)) }
                    }
                }
                @for k in &d.sources {
                    tr.changed data-parameter=(k) {
                        th scope="row" { (k) } td colspan="2" { "(sensitive) its Secret reference changed" }
                    }
                }
            }
        } }
        @if d == &Differences::default() {
            p { "Revisions " (a) " and " (b) " record the same operator version and values." }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudo_engine::revision::ValueChange;
    use serde_json::json;

    fn revision(number: u64, params: serde_json::Value) -> Revision {
        Revision {
            number,
            name: format!("db-{number}"),
            created: "2026-01-01T00:00:00Z".into(),
            finished: Some("2026-01-01T00:01:05Z".into()),
            outcome: None,
            data: serde_json::from_value(json!({
                "operatorVersion": "db-0.1.0", "plan": "deploy", "planUid": "u",
                "parameters": params, "startedBy": {"by": "user"}
            }))
            .unwrap(),
        }
    }

    #[test]
    fn the_diff_masks_what_the_operator_version_marks_sensitive() {
        let ov: OperatorVersion = serde_json::from_value(json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
            "metadata": {"name": "db-0.1.0", "namespace": "ns"},
            "spec": {"version": "0.1.0", "parameters": [
                {"name": "NODE_COUNT"}, {"name": "PASSWORD", "sensitive": true, "default": "hunter22"}
            ]}
        }))
        .unwrap();
        let (a, b) = (
            revision(1, json!({"NODE_COUNT": "3"})),
            revision(2, json!({"NODE_COUNT": "5"})),
        );
        let change = |name: &str, before: &str, after: Option<&str>| ValueChange {
            name: name.into(),
            before: Some(before.into()),
            after: after.map(str::to_string),
        };
        let d = Differences {
            version: None,
            values: vec![
                change("NODE_COUNT", "3", Some("5")),
                change("PASSWORD", "hunter22", None),
            ],
            sources: vec!["PASSWORD".into()],
        };
        let html = diff(&a, &b, &d, &ov).into_string();
        assert!(
            html.contains("<code>3</code>") && html.contains("<code>5</code>"),
            "{html}"
        );
        assert!(!html.contains("hunter22"), "{html}");
        assert_eq!(html.matches("(sensitive)").count(), 3, "{html}");
        assert_eq!(took(&a).as_deref(), Some("1m05s"));
        let same = diff(&a, &a, &Differences::default(), &ov).into_string();
        assert!(
            same.contains("record the same operator version and values"),
            "{same}"
        );
    }

    #[test]
    fn durations_use_two_units_at_most() {
        let cases = [(-1, "0s"), (42, "42s"), (185, "3m05s"), (7800, "2h10m")];
        for (secs, want) in cases {
            assert_eq!(duration_words(SignedDuration::from_secs(secs)), want);
        }
    }
}
