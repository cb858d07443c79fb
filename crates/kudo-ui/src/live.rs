//! The live plans of an Instance page: one watch of that one Instance per open page, forwarded as
//! server-sent events. Each change of the Instance sends an event `plans` whose data is the plans'
//! HTML fragment ([`crate::pages::plans`]), rendered by the server as the page was; the deletion
//! of the Instance sends `gone`. The watch ends when the page closes the request.

use std::convert::Infallible;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kudo_api::Instance;
use kudo_client::cluster::{Cluster, KudoKind, from_dynamic};

use crate::{Ui, pages, routes};

/// `GET /i/{ns}/{name}/events`.
pub(crate) async fn events(State(ui): State<Ui>, Path((ns, name)): Path<(String, String)>) -> Response {
    let cluster = routes::cluster(&ui, &ns);
    if let Err(e) = cluster.instance(&name).await {
        return (axum::http::StatusCode::NOT_FOUND, e.to_string()).into_response();
    }
    Sse::new(stream(cluster, name))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn stream(cluster: Cluster, name: String) -> impl Stream<Item = Result<Event, Infallible>> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &cluster.namespace,
        &KudoKind::Instance.resource(),
    );
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let cluster = std::sync::Arc::new(cluster);
    watcher(api, config).default_backoff().filter_map(move |ev| {
        let cluster = cluster.clone();
        async move {
            match ev {
                Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                    Some(Ok(render(&cluster, obj).await))
                }
                Ok(watcher::Event::Delete(obj)) => {
                    let text = format!("Instance {} was deleted.", obj.metadata.name.unwrap_or_default());
                    Some(Ok(Event::default().event("gone").data(text)))
                }
                // Init, InitDone, and errors (the watcher retries with a backoff).
                _ => None,
            }
        }
    })
}

/// The `plans` event of the Instance `obj`.
async fn render(cluster: &Cluster, obj: DynamicObject) -> Event {
    let html = match from_dynamic::<Instance>(obj) {
        Ok(inst) => match cluster.operator_version_of(&inst).await {
            Ok(ov) => pages::plans(&inst, &ov).into_string(),
            Err(e) => maud::html! { p.message { (e.to_string()) } }.into_string(),
        },
        Err(e) => maud::html! { p.message { (e.to_string()) } }.into_string(),
    };
    Event::default().event("plans").data(html)
}
