//! The Rollouts pages: every fleet rollout (`kudo-rs.dev` Rollouts, read by
//! [`kudo_client::rollout`], the functions `rollout list|status` call) and one rollout's waves in
//! order with the Instances placed in each and their outcome, and its gate; the page of one
//! rollout follows it live through one watch (the live updates).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use kudo_api::ExecutionStatus;
use kudo_api::rollout::{InstanceRollout, Rollout, WaveStatus};
use kudo_client::cluster::Cluster;
use kudo_engine::rollout::{instance_phase as ip, phase, wave_phase as wp};
use kudo_package::graph::palette;
use maud::{Markup, html};

use crate::routes::refusal;
use crate::{Ui, pages};

/// Rollouts are cluster-scoped; the namespace of the [`Cluster`] is not used.
fn cluster(ui: &Ui) -> Cluster {
    crate::routes::cluster(ui, "")
}

/// The path of a rollout's page.
pub fn path(name: &str) -> String {
    format!("/rollouts/{}", pages::enc(name))
}

/// `GET /rollouts`.
pub(crate) async fn list_page(State(ui): State<Ui>) -> Response {
    match kudo_client::rollout::list(&cluster(&ui)).await {
        Ok(all) => Html(pages::page("Rollouts", list(&all))).into_response(),
        Err(e) => refusal(StatusCode::BAD_GATEWAY, "Rollouts", &e.to_string()),
    }
}

/// `GET /rollouts/{name}`.
pub(crate) async fn rollout_page(State(ui): State<Ui>, Path(name): Path<String>) -> Response {
    match kudo_client::rollout::get(&cluster(&ui), &name).await {
        Ok(r) => {
            let body = html! {
                h1 { "Rollout " (name) }
                div #rollout data-events=(format!("{}/events", path(&name))) aria-live="polite" {
                    (detail(&r))
                }
            };
            Html(pages::page(&name, body)).into_response()
        }
        Err(e @ kudo_client::Error::RolloutNotFound(_)) => {
            refusal(StatusCode::NOT_FOUND, "Error", &e.to_string())
        }
        Err(e) => refusal(StatusCode::BAD_GATEWAY, "Error", &e.to_string()),
    }
}

/// The colour of a rollout's, a wave's or an Instance's phase: that of the plan status it is
/// closest to (the phase is always written out too).
fn colour(p: &str) -> Option<ExecutionStatus> {
    match p {
        phase::COMPLETE | ip::SUCCEEDED | ip::ROLLED_BACK => Some(ExecutionStatus::Complete),
        phase::PROGRESSING | phase::ROLLING_BACK | ip::HEALTHY => Some(ExecutionStatus::InProgress),
        phase::PAUSED | phase::WAITING_FOR_APPROVAL | ip::PENDING | ip::WAITING => {
            Some(ExecutionStatus::Pending)
        }
        phase::HALTED | phase::ABORTED | phase::INVALID | ip::FAILED | ip::ROLLBACK_FAILED => {
            Some(ExecutionStatus::FatalError)
        }
        _ => None,
    }
}

fn badge(p: &str) -> Markup {
    let word = if p.is_empty() { "Pending" } else { p };
    html! { span class=(format!("badge {}", palette::colors(colour(word)).class)) { (word) } }
}

fn list(all: &[Rollout]) -> Markup {
    html! {
        h1 { "Rollouts" }
        @if all.is_empty() { p { "No Rollouts." } } @else {
            div.scroll { table #rollouts {
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Operator version" } th scope="col" { "Parameters" }
                    th scope="col" { "Phase" } th scope="col" { "Instances" } th scope="col" { "Message" }
                } }
                tbody {
                    @for r in all {
                        @let st = r.status.clone().unwrap_or_default();
                        tr data-rollout=(r.metadata.name) {
                            td { a href=(path(&r.metadata.name)) { (r.metadata.name) } }
                            td { (r.spec.target.operator_version.as_deref().unwrap_or("—")) }
                            td { (parameters(r)) }
                            td { (badge(&st.phase)) } td { (st.total) } td { (st.message) }
                        }
                    }
                }
            } }
        }
    }
}

fn parameters(r: &Rollout) -> Markup {
    html! {
        @for (i, (k, v)) in r.spec.target.parameters.iter().enumerate() {
            @if i > 0 { ", " } code { (k) "=" (v) }
        }
    }
}

/// One rollout: its phase, gate and waves: the fragment the live updates replace.
pub fn detail(r: &Rollout) -> Markup {
    let st = r.status.clone().unwrap_or_default();
    let gate = &r.spec.gate;
    html! {
        p data-phase=(st.phase) { "Phase " (badge(&st.phase)) " " (st.message) }
        p {
            "Changes " b { (r.spec.target.operator_version.as_deref().unwrap_or("no operator version")) }
            @if !r.spec.target.parameters.is_empty() { " and " (parameters(r)) }
            " on " (st.total) " Instances"
            @if r.spec.paused { " · paused" } @if r.spec.abort { " · abort asked" }
        }
        h2 { "Gate" }
        p {
            "Each wave's changed Instances stay healthy for "
            (gate.min_success_time.as_deref().unwrap_or("no set time"))
            @if gate.rules.is_empty() { "." } @else { ", and:" }
        }
        @if !gate.rules.is_empty() {
            ul { @for g in &gate.rules { li { b { (g.name) } ": " code { (g.condition) } } } }
        }
        h2 { "Waves" }
        ol.waves {
            @for w in &st.waves {
                (wave(w, st.instances.iter().filter(|e| e.wave == w.name).collect()))
            }
        }
        @if st.waves.is_empty() { p { "No wave has been decided yet." } }
    }
}

fn wave(w: &WaveStatus, instances: Vec<&InstanceRollout>) -> Markup {
    let succeeded = instances.iter().filter(|e| e.phase == ip::SUCCEEDED).count();
    let failed = instances.iter().filter(|e| !e.failure.is_empty()).count();
    html! {
        li.wave data-wave=(w.name) data-phase=(w.phase) {
            h3 {
                "wave " (w.name) " " (badge(&w.phase)) " "
                (instances.len()) " Instances, " (succeeded) " succeeded, " (failed) " failed"
            }
            p.updated {
                @if let Some(t) = &w.started_at { "started " time { (t) } }
                @if let Some(t) = &w.healthy_since { " · healthy since " time { (t) } }
                @if let Some(t) = &w.completed_at { " · completed " time { (t) } }
                @if w.phase == wp::WAITING_FOR_APPROVAL { " · waiting for `kubectl kudo rollout resume`" }
            }
            @if !instances.is_empty() { (wave_instances(&instances)) }
        }
    }
}

fn wave_instances(instances: &[&InstanceRollout]) -> Markup {
    html! {
        div.scroll { table.wave-instances {
            thead { tr {
                th scope="col" { "Instance" } th scope="col" { "Outcome" } th scope="col" { "Revision" }
                th scope="col" { "Plan" } th scope="col" { "Message" }
            } }
            tbody {
                @for e in instances {
                    tr data-instance=(e.name) data-phase=(e.phase) {
                        td { (instance_link(&e.name)) } td { (badge(&e.phase)) }
                        td { (revisions(e)) } td { (e.plan) }
                        td { (e.message) @if !e.failure.is_empty() { " " b { "failure: " } (e.failure) } }
                    }
                }
            }
        } }
    }
}

/// `namespace/name` as a link to the Instance's page.
fn instance_link(full: &str) -> Markup {
    match full.split_once('/') {
        Some((ns, name)) => html! { a href=(pages::instance_path(ns, name)) { (full) } },
        None => html! { (full) },
    }
}

fn revisions(e: &InstanceRollout) -> String {
    match (e.from_revision, e.to_revision) {
        (Some(f), Some(t)) => format!("{f} → {t}"),
        (None, Some(t)) => format!("→ {t}"),
        _ => "—".to_string(),
    }
}
