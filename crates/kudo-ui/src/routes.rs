//! The routes, the access check in front of them ([`crate::auth`]) and the headers every answer
//! carries.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use kube::api::{Api, DynamicObject, ListParams};
use kudo_client::cluster::{Cluster, KudoKind};

use crate::auth::{Decision, Gate, Request as Facts};
use crate::{Ui, actions, assets, events, live, pages, rollouts, view};

/// Only the page's own origin: no outside script, style, font, frame or connection.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub(crate) fn router(ui: Ui, gate: Gate) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/assets/style.css", get(style))
        .route("/assets/app.js", get(script))
        .route("/instances/events", get(live::instances))
        .route("/rollouts", get(rollouts::list_page))
        .route("/rollouts/{name}", get(rollouts::rollout_page))
        .route("/rollouts/{name}/events", get(live::rollout))
        .route("/i/{ns}/{name}", get(instance_page))
        .route("/i/{ns}/{name}/events", get(live::events))
        .route("/i/{ns}/{name}/diff", get(history_diff))
        .route("/i/{ns}/{name}/trigger", post(actions::trigger))
        .route("/i/{ns}/{name}/cancel", post(actions::cancel))
        .route("/i/{ns}/{name}/retry", post(actions::retry))
        .route("/i/{ns}/{name}/rollback", post(actions::rollback))
        .layer(middleware::from_fn_with_state(Arc::new(gate), guard))
        .with_state(ui)
}

/// Applies [`Gate::decide`] and adds the security headers to every answer. The referrer policy is
/// `same-origin`, not `no-referrer`: under `no-referrer` a browser posts forms with `Origin: null`,
/// which the origin check must refuse.
async fn guard(State(gate): State<Arc<Gate>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let query_token = req
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("token=")));
    let facts = Facts {
        host: text(header::HOST),
        query_token,
        cookie: text(header::COOKIE),
        writes: req.method() == Method::POST,
        origin: text(header::ORIGIN),
    };
    let mut resp = match gate.decide(&facts) {
        Decision::Allow => next.run(req).await,
        Decision::TradeToken(cookie) => {
            let mut r = Redirect::to(req.uri().path()).into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Decision::Unauthorized(why) => refusal(StatusCode::UNAUTHORIZED, "Unauthorized", why),
        Decision::Forbidden(why) => refusal(StatusCode::FORBIDDEN, "Forbidden", why),
    };
    let h = resp.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

pub(crate) fn refusal(status: StatusCode, title: &str, why: &str) -> Response {
    (status, Html(pages::message(title, why))).into_response()
}

/// An error of the cluster, as a page: 404 for a missing Instance or OperatorVersion.
fn failed(err: kudo_client::Error) -> Response {
    use kudo_client::Error::{InstanceNotFound, OperatorVersionNotFound};
    let status = match err {
        InstanceNotFound { .. } | OperatorVersionNotFound { .. } => StatusCode::NOT_FOUND,
        _ => StatusCode::BAD_GATEWAY,
    };
    refusal(status, "Error", &err.to_string())
}

async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        assets::style_css(),
    )
}

async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        assets::APP_JS,
    )
}

/// The objects of `kind` in namespace `ns`, or in every namespace.
pub(crate) fn kind_api(client: &kube::Client, ns: Option<&str>, kind: KudoKind) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &kind.resource()),
        None => Api::all_with(client.clone(), &kind.resource()),
    }
}

/// The Instances of `ui.namespace`, or of every namespace; where listing every namespace is
/// forbidden, those of the kubeconfig's namespace, saying so.
async fn index(State(ui): State<Ui>) -> Response {
    let list = |ns: Option<&str>| {
        let (client, ns) = (ui.client.clone(), ns.map(str::to_string));
        async move {
            let api = |kind: KudoKind| kind_api(&client, ns.as_deref(), kind);
            let insts = api(KudoKind::Instance).list(&ListParams::default()).await?;
            let ovs = api(KudoKind::OperatorVersion)
                .list(&ListParams::default())
                .await?;
            Ok::<_, kube::Error>((insts.items, ovs.items))
        }
    };
    let mut note = None;
    let listed = match list(ui.namespace.as_deref()).await {
        Err(kube::Error::Api(e)) if e.code == 403 && ui.namespace.is_none() => {
            let ns = ui.client.default_namespace().to_string();
            note = Some(format!(
                "Listing every namespace is forbidden; the Instances of namespace {ns}:"
            ));
            list(Some(&ns)).await
        }
        other => other,
    };
    let (insts, ovs) = match listed {
        Ok(l) => l,
        Err(e) => return refusal(StatusCode::BAD_GATEWAY, "Error", &e.to_string()),
    };
    let rows = view::rows(live::typed(insts), &live::typed(ovs));
    let live = match (&ui.namespace, &note) {
        (None, Some(_)) => format!("/instances/events?namespace={}", ui.client.default_namespace()),
        _ => "/instances/events".to_string(),
    };
    Html(pages::instances(&rows, note.as_deref(), &live)).into_response()
}

pub(crate) fn cluster(ui: &Ui, ns: &str) -> Cluster {
    Cluster {
        client: ui.client.clone(),
        namespace: ns.to_string(),
    }
}

async fn instance_page(State(ui): State<Ui>, Path((ns, name)): Path<(String, String)>) -> Response {
    let cluster = cluster(&ui, &ns);
    let (inst, ov) = match cluster.instance_and_operator_version(&name).await {
        Ok(found) => found,
        Err(e) => return failed(e),
    };
    let (events, revisions) = futures::join!(
        events::read(&cluster, &name),
        kudo_client::revisions::of(&cluster.client, &inst)
    );
    let extras = pages::Extras {
        events: events.map_err(|e| e.to_string()),
        revisions: revisions.map_err(|e| e.to_string()),
    };
    Html(pages::instance(&inst, &ov, &extras)).into_response()
}

#[derive(serde::Deserialize)]
struct DiffQuery {
    from: u64,
    to: u64,
}

/// The differences between two revisions ([`kudo_engine::revision::differences`]).
async fn history_diff(
    State(ui): State<Ui>,
    Path((ns, name)): Path<(String, String)>,
    q: Result<Query<DiffQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(q)) = q else {
        let why = "choose two revisions to compare: ?from=N&to=M";
        return refusal(StatusCode::BAD_REQUEST, "Bad request", why);
    };
    let cluster = cluster(&ui, &ns);
    let (inst, ov) = match cluster.instance_and_operator_version(&name).await {
        Ok(found) => found,
        Err(e) => return failed(e),
    };
    let revs = match kudo_client::revisions::of(&cluster.client, &inst).await {
        Ok(revs) => revs,
        Err(e) => return refusal(StatusCode::BAD_GATEWAY, "Error", &e.to_string()),
    };
    let find = |n: u64| revs.iter().find(|r| r.number == n);
    let (Some(from), Some(to)) = (find(q.from), find(q.to)) else {
        let known: Vec<String> = revs.iter().map(|r| r.number.to_string()).collect();
        let why = format!(
            "revision {} or {} does not exist (revisions: {})",
            q.from,
            q.to,
            known.join(", ")
        );
        return refusal(StatusCode::NOT_FOUND, "No such revision", &why);
    };
    let defaults = kudo_engine::revision::defaults(&ov);
    let d = kudo_engine::revision::differences(&from.data, &to.data, &defaults);
    Html(pages::revision_diff(
        &inst,
        crate::history::diff(from, to, &d, &ov),
    ))
    .into_response()
}
