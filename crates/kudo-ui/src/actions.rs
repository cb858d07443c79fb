//! The page's actions, each the library function its CLI command calls, never a second copy:
//! trigger ([`kudo_client::plan::prepare_trigger`] and [`kudo_client::plan::trigger`], as `plan
//! trigger`), cancel ([`kudo_client::plan::cancel`], as `plan cancel`), retry
//! ([`kudo_client::plan::retry`], as `plan retry`) and rollback ([`kudo_client::rollback`]'s
//! prepare, refusal over a running plan and write, as `rollback` without `--force`).
//!
//! Each is a form POST; the page asks for a confirmation first, and the access check in front of
//! every route ([`crate::auth`]: the token's cookie, and an `Origin` that is the page's own for a
//! POST) is the only one. Done: back to the Instance's page (303). Refused: 409 with the
//! library's message, nothing written.

use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use kudo_client::cluster::Cluster;

use crate::routes::{cluster, refusal};
use crate::{Ui, pages};

#[derive(serde::Deserialize)]
pub(crate) struct PlanForm {
    plan: String,
}

#[derive(serde::Deserialize)]
pub(crate) struct RollbackForm {
    revision: u64,
}

type Target = Path<(String, String)>;

/// Back to the Instance page when `done` is `Ok`, else the refusal titled `title`.
async fn answer<T>(
    ns: &str,
    name: &str,
    title: &str,
    done: impl Future<Output = kudo_client::Result<T>>,
) -> Response {
    match done.await {
        Ok(_) => Redirect::to(&pages::instance_path(ns, name)).into_response(),
        Err(e) => refusal(StatusCode::CONFLICT, title, &e.to_string()),
    }
}

/// `plan trigger`.
pub(crate) async fn trigger(
    State(ui): State<Ui>,
    Path((ns, name)): Target,
    Form(form): Form<PlanForm>,
) -> Response {
    let cluster = cluster(&ui, &ns);
    let req = kudo_client::plan::TriggerRequest {
        instance: name.clone(),
        plan: form.plan,
    };
    let done = async {
        let prepared = kudo_client::plan::prepare_trigger(&cluster, &req).await?;
        kudo_client::plan::trigger(&cluster, &prepared).await
    };
    answer(&ns, &name, "Not triggered", done).await
}

/// `plan cancel`: the plan scheduled now, whichever plan's button was pressed (the form names
/// it for the confirmation only; the CLI's command takes no plan either).
pub(crate) async fn cancel(State(ui): State<Ui>, Path((ns, name)): Target) -> Response {
    let cluster = cluster(&ui, &ns);
    answer(
        &ns,
        &name,
        "Not cancelled",
        kudo_client::plan::cancel(&cluster, &name),
    )
    .await
}

/// `plan retry --plan PLAN`.
pub(crate) async fn retry(
    State(ui): State<Ui>,
    Path((ns, name)): Target,
    Form(form): Form<PlanForm>,
) -> Response {
    let cluster = cluster(&ui, &ns);
    let done = kudo_client::plan::retry(&cluster, &name, Some(&form.plan));
    answer(&ns, &name, "Not retried", done).await
}

/// `rollback --to-revision N`.
pub(crate) async fn rollback(
    State(ui): State<Ui>,
    Path((ns, name)): Target,
    Form(form): Form<RollbackForm>,
) -> Response {
    let cluster = cluster(&ui, &ns);
    answer(
        &ns,
        &name,
        "Not rolled back",
        roll_back(&cluster, &name, form.revision),
    )
    .await
}

async fn roll_back(cluster: &Cluster, name: &str, to: u64) -> kudo_client::Result<()> {
    use kudo_client::rollback;
    let inst = cluster.instance(name).await?;
    let plan = rollback::prepare(cluster, &inst, Some(to)).await?;
    rollback::refuse_blocked(&inst, &plan)?;
    rollback::write(cluster, inst, plan).await.map(|_| ())
}
