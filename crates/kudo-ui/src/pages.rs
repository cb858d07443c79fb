//! The HTML of the pages ([`maud`]: escaped by default, checked at compile time). Every status is
//! written out as a word beside its colour; controls carry names a screen reader reads.

use kudo_api::{ExecutionStatus, Instance, OperatorVersion};
use kudo_engine::revision::Revision;
use kudo_package::graph::{PhaseNode, PlanGraph, StepNode, Strategy, palette, status_word, svg::task_line};
use maud::{DOCTYPE, Markup, html};

use crate::events::{self, EventRow};
use crate::history;
use crate::view::{self, Row};

/// A whole page: `title`, the navigation and `body`.
pub(crate) fn page(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · kubectl kudo ui" }
                link rel="stylesheet" href="/assets/style.css";
                script src="/assets/app.js" defer {}
            }
            body {
                header { nav aria-label="main" { a href="/" { "Instances" } " " a href="/rollouts" { "Rollouts" } } }
                main { (body) }
            }
        }
    }
    .into_string()
}

/// The Instances table; `note`: a line above it (e.g. listing fell back to one namespace);
/// `live`: where its rows come from as they change.
pub fn instances(rows: &[Row], note: Option<&str>, live: &str) -> String {
    page(
        "Instances",
        html! {
            h1 { "Instances" }
            @if let Some(n) = note { p.note { (n) } }
            label for="filter" { "Filter " }
            input #filter type="search" placeholder="name, operator, plan, status…";
            div.scroll { table #instances data-events=(live) {
                thead { tr {
                    th scope="col" { "Namespace" } th scope="col" { "Name" } th scope="col" { "Operator" }
                    th scope="col" { "Version" } th scope="col" { "Active plan" } th scope="col" { "Status" }
                    th scope="col" { "Health" } th scope="col" { "Last change" }
                } }
                tbody aria-live="polite" { (instance_rows(rows)) }
            } }
        },
    )
}

/// The rows of the Instances table: the fragment the live updates replace.
pub fn instance_rows(rows: &[Row]) -> Markup {
    html! {
        @for r in rows {
            tr {
                td { (r.namespace) }
                td { a href=(instance_path(&r.namespace, &r.name)) { (r.name) } }
                td { (r.operator) } td { (r.operator_version) }
                @match &r.plan {
                    Some((plan, st)) => {
                        td { (plan) }
                        td { (badge(Some(*st))) }
                    }
                    None => { td { "—" } td { "—" } }
                }
                td { (r.health) } td { time { (r.changed) } }
            }
        }
        @if rows.is_empty() { tr { td colspan="8" { "No Instances." } } }
    }
}

/// The path of an Instance's page.
pub fn instance_path(namespace: &str, name: &str) -> String {
    format!("/i/{}/{}", enc(namespace), enc(name))
}

/// A path segment: everything but RFC 3986's unreserved characters escaped (names are DNS
/// labels, so this rarely escapes anything).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

pub(crate) fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, SEGMENT).to_string()
}

/// What an Instance page shows besides the Instance: its Events and its revisions (each the
/// error's text when it could not be read).
pub struct Extras {
    /// The Events about it.
    pub events: Result<Vec<EventRow>, String>,
    /// Its revisions, oldest first.
    pub revisions: Result<Vec<Revision>, String>,
}

/// An Instance's page: what it runs, its plans and Events (live), its revisions and parameters.
pub fn instance(inst: &Instance, ov: &OperatorVersion, extras: &Extras) -> String {
    let ns = inst.metadata.namespace.clone().unwrap_or_default();
    let name = &inst.metadata.name;
    let base = instance_path(&ns, name);
    page(
        name,
        html! {
            h1 { "Instance " (ns) "/" (name) }
            p {
                "Operator version " b { (ov.metadata.name) }
                " · health " b #health { (view::health(inst)) }
            }
            nav aria-label="sections" {
                a href="#events-title" { "Events" } " · " a href="#revisions" { "Revisions" }
                " · " a href="#parameters" { "Parameters" }
            }
            div #plans data-events=(format!("{base}/events")) aria-live="polite" { (plans(inst, ov)) }
            h2 #events-title { "Events" }
            div #events aria-live="polite" { (events::list(&extras.events)) }
            div #history aria-live="polite" { (history::section(&base, &extras.revisions)) }
            (parameters(inst, ov))
        },
    )
}

/// The diff page of two revisions of an Instance.
pub fn revision_diff(inst: &Instance, body: Markup) -> String {
    let ns = inst.metadata.namespace.clone().unwrap_or_default();
    let name = &inst.metadata.name;
    page(
        &format!("{name}: revisions"),
        html! {
            h1 { "Instance " (ns) "/" (name) ": differences between revisions" }
            p { a href=(format!("{}#revisions", instance_path(&ns, name))) { "Back to the Instance" } }
            (body)
        },
    )
}

/// The plans of an Instance: the fragment the live updates replace.
pub fn plans(inst: &Instance, ov: &OperatorVersion) -> Markup {
    let ns = inst.metadata.namespace.clone().unwrap_or_default();
    let base = instance_path(&ns, &inst.metadata.name);
    let on = format!("on {ns}/{}", inst.metadata.name);
    let active = view::active_plan(inst, Some(ov)).map(|(p, _)| p);
    let scheduled = &inst.spec.plan_execution.plan_name;
    // The active plan first, then the others by name.
    let mut all = view::plans(inst, ov);
    all.sort_by_key(|(p, _)| active.as_deref() != Some(p.name.as_str()));
    html! {
        @for (plan, uid) in all {
            @let updated = inst.status.as_ref().and_then(|s| s.plan_status.get(&plan.name))
                .and_then(|p| p.last_updated_timestamp.clone());
            section.plan data-plan=(plan.name) data-status=(status_word(plan.status)) data-uid=(uid) {
                h2 {
                    "plan " (plan.name) " " span.strategy { (plan.strategy.word()) } " "
                    (badge(plan.status))
                    @if active.as_deref() == Some(plan.name.as_str()) { " " span.active { "active" } }
                }
                @if let Some(t) = updated { p.updated { "updated " time { (t) } } }
                @let (p, ask) = (&plan.name, |verb: &str| format!("{verb} plan {} {on}?", plan.name));
                div.actions {
                    (action(&base, "trigger", p, &ask("Trigger"), "Trigger"))
                    @if scheduled == p { (action(&base, "cancel", p, &ask("Cancel"), "Cancel")) }
                    @if plan.status == Some(ExecutionStatus::FatalError) {
                        (action(&base, "retry", &plan.name,
                            &format!("Retry plan {} {on} from its first failed step?", plan.name), "Retry"))
                    }
                }
                (phases(&plan))
            }
        }
    }
}

/// A button posting `plan` to `base/verb`, behind the confirmation `ask`.
fn action(base: &str, verb: &str, plan: &str, ask: &str, label: &str) -> Markup {
    html! {
        form class=(verb) method="post" action=(format!("{base}/{verb}")) data-confirm=(ask) {
            input type="hidden" name="plan" value=(plan);
            button type="submit" { (label) " " (plan) }
        }
    }
}

fn phases(plan: &PlanGraph) -> Markup {
    let layout = kudo_package::graph::layout::layout(plan);
    html! {
        ol class=(format!("phases {}", plan.strategy.word())) {
            @for (phase, placed) in plan.phases.iter().zip(&layout.phases) {
                (phase_item(phase, placed.columns))
            }
        }
    }
}

fn phase_item(phase: &PhaseNode, columns: usize) -> Markup {
    let together = phase.strategy == Strategy::Parallel && phase.steps.len() > 1;
    html! {
        li.phase data-phase=(phase.name) data-status=(status_word(phase.status)) {
            h3 {
                "phase " (phase.name) " " span.strategy { (phase.strategy.word()) }
                @if together { " (steps run at the same time)" }
                " " (badge(phase.status))
            }
            ol class=(format!("steps {} cols-{columns}", phase.strategy.word())) {
                @for step in &phase.steps { (step_item(step)) }
            }
        }
    }
}

fn step_item(step: &StepNode) -> Markup {
    let class = format!("step {}", palette::colors(step.status).class);
    html! {
        li class=(class) data-step=(step.name) data-status=(status_word(step.status)) {
            span.name { (step.name) } " " span.status { (status_word(step.status)) }
            ul.tasks {
                @for t in &step.tasks {
                    li { (task_line(t)) @if !t.resources.is_empty() { ": " (t.resources.join(", ")) } }
                }
            }
            @for w in &step.waiting_for { p.waiting { "waiting for " (w) } }
            @if !step.message.is_empty() { p.message { (step.message) } }
        }
    }
}

fn badge(status: Option<kudo_api::ExecutionStatus>) -> Markup {
    html! { span class=(format!("badge {}", palette::colors(status).class)) { (status_word(status)) } }
}

/// The parameters as set on the Instance, sensitive ones masked (their values stay in Secrets).
fn parameters(inst: &Instance, ov: &OperatorVersion) -> Markup {
    let sensitive = |p: &str| ov.spec.parameters.iter().any(|d| d.name == p && d.is_sensitive());
    html! {
        h2 #parameters { "Parameters" }
        @if inst.spec.parameters.is_empty() && inst.spec.parameter_sources.is_empty() {
            p { "All parameters at their defaults." }
        } @else {
            table.params {
                thead { tr { th scope="col" { "Parameter" } th scope="col" { "Value" } } }
                tbody {
                    @for (k, v) in &inst.spec.parameters {
                        tr { td { (k) } td { @if sensitive(k) { "(sensitive)" } @else { code { (v) } } } }
                    }
                    @for k in inst.spec.parameter_sources.keys() {
                        tr { td { (k) } td { "(sensitive, from a Secret)" } }
                    }
                }
            }
        }
    }
}

/// A short page for a refusal or an error.
pub fn message(title: &str, text: &str) -> String {
    page(title, html! { h1 { (title) } p { (text) } })
}
