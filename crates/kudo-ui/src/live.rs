//! The live parts of an Instance page: per open page, one watch of that one Instance and one of
//! the Events about it, forwarded as server-sent events. Each change of the Instance sends an
//! event `plans` whose data is the plans' HTML fragment ([`crate::pages::plans`]), rendered by the
//! server as the page was; its deletion sends `gone`. Each change of its Events sends `events`,
//! the Events list ([`crate::events::list`]) from the watch's own store. The watches end when the
//! page closes the request.

use std::convert::Infallible;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kudo_api::Instance;
use kudo_client::cluster::{Cluster, KudoKind, from_dynamic};

use crate::{Ui, events, pages, routes};

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
    let events = event_stream(&cluster, &name);
    futures::stream::select(instance_stream(cluster, name), events)
}

fn instance_stream(cluster: Cluster, name: String) -> impl Stream<Item = Result<Event, Infallible>> {
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

/// The `events` events: the list again from the reflector's store once the first listing is
/// complete and at each change after it.
fn event_stream(cluster: &Cluster, name: &str) -> impl Stream<Item = Result<Event, Infallible>> + use<> {
    let (api, fields) = events::api(cluster, name);
    let (store, writer) = reflector::store();
    let watch = watcher(api, watcher::Config::default().fields(&fields)).default_backoff();
    reflector(writer, watch).filter_map(move |ev| {
        let ready = matches!(
            ev,
            Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_))
        );
        let html = ready.then(|| {
            let all: Vec<_> = store.state().iter().map(|e| (**e).clone()).collect();
            let rows = events::rows(&all, Timestamp::now());
            events::list(&Ok(rows)).into_string()
        });
        async move { html.map(|h| Ok(Event::default().event("events").data(h))) }
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
