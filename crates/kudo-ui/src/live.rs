//! The live parts of an Instance page: per open page, one watch of that one Instance, one of the
//! Events about it and one of its revisions, forwarded as server-sent events. Each change of the
//! Instance sends an event `plans` whose data is the plans' HTML fragment
//! ([`crate::pages::plans`]), rendered by the server as the page was; its deletion sends `gone`.
//! Each change of its Events sends `events`, the Events list ([`crate::events::list`]), and each
//! change of its revisions (its ControllerRevisions) sends `revisions`
//! ([`crate::history::section`]), each rendered from its watch's own store. The watches end when
//! the page closes the request.

use std::convert::Infallible;

use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kudo_api::Instance;
use kudo_api::rollout::Rollout;
use kudo_client::cluster::{Cluster, KudoKind, from_dynamic};

use crate::{Ui, events, history, pages, rollouts, routes, view};

/// `GET /i/{ns}/{name}/events`.
pub(crate) async fn events(State(ui): State<Ui>, Path((ns, name)): Path<(String, String)>) -> Response {
    let cluster = routes::cluster(&ui, &ns);
    let inst = match cluster.instance(&name).await {
        Ok(inst) => inst,
        Err(e) => return (axum::http::StatusCode::NOT_FOUND, e.to_string()).into_response(),
    };
    let revisions = revision_stream(&cluster, &name, inst.uid().to_string());
    let events = event_stream(&cluster, &name);
    let all = futures::stream::select(instance_stream(cluster, name), events);
    Sse::new(futures::stream::select(all, revisions))
        .keep_alive(KeepAlive::default())
        .into_response()
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
    let config = watcher::Config::default().fields(&fields);
    stored(api, (), config, "events", |all| {
        events::list(&Ok(events::rows(all, Timestamp::now())))
    })
}

/// The `revisions` events: the revision history (its ControllerRevisions, one watch) as it
/// changes: a run admitted, an outcome recorded, an old revision pruned.
fn revision_stream(
    cluster: &Cluster,
    name: &str,
    uid: String,
) -> impl Stream<Item = Result<Event, Infallible>> + use<> {
    let (api, selector) = kudo_client::revisions::api(&cluster.client, &cluster.namespace, name);
    let base = pages::instance_path(&cluster.namespace, name);
    let config = watcher::Config::default().labels(&selector);
    stored(
        api,
        kudo_client::revisions::resource(),
        config,
        "revisions",
        move |all| history::section(&base, &Ok(kudo_client::revisions::of_objects(all, &uid))),
    )
}

/// A watch (of objects of type `dyntype`) with its own store, sending the event `name` rendered by
/// `render` from everything stored, once the first listing is complete and at each change after
/// it.
fn stored<K>(
    api: Api<K>,
    dyntype: K::DynamicType,
    config: watcher::Config,
    name: &'static str,
    render: impl Fn(&[K]) -> maud::Markup,
) -> impl Stream<Item = Result<Event, Infallible>>
where
    K: kube::Resource<DynamicType: Eq + std::hash::Hash + Clone> + Clone,
    K: serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (store, changed) = changes(api, dyntype, config);
    changed.map(move |()| {
        Ok(Event::default()
            .event(name)
            .data(render(&all(&store)).into_string()))
    })
}

/// A watch with its own store: the store, and a stream that yields once the first listing is
/// complete and at each change after it (errors are retried by the watcher with a backoff).
fn changes<K>(
    api: Api<K>,
    dyntype: K::DynamicType,
    config: watcher::Config,
) -> (reflector::Store<K>, impl Stream<Item = ()>)
where
    K: kube::Resource<DynamicType: Eq + std::hash::Hash + Clone> + Clone,
    K: serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let writer = reflector::store::Writer::new(dyntype);
    let store = writer.as_reader();
    let watch = watcher(api, config).default_backoff();
    let changed = reflector(writer, watch).filter_map(|ev| {
        let ready = matches!(
            ev,
            Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_))
        );
        futures::future::ready(ready.then_some(()))
    });
    (store, changed)
}

/// Everything in `store`.
fn all<K: kube::Resource<DynamicType: Eq + std::hash::Hash + Clone> + Clone>(
    store: &reflector::Store<K>,
) -> Vec<K> {
    store.state().iter().map(|o| (**o).clone()).collect()
}

#[derive(serde::Deserialize)]
pub(crate) struct ListQuery {
    namespace: Option<String>,
}

/// `GET /instances/events`: the Instances table's rows (event `instances`) from one watch of the
/// Instances and one of the OperatorVersions (of `ui.namespace`, else of `?namespace=`, else of
/// every namespace), at each change of either.
pub(crate) async fn instances(State(ui): State<Ui>, Query(q): Query<ListQuery>) -> Response {
    let ns = ui.namespace.clone().or(q.namespace);
    let api = |kind: KudoKind| routes::kind_api(&ui.client, ns.as_deref(), kind);
    let (kinds, ovs) = (KudoKind::Instance, KudoKind::OperatorVersion);
    let (insts, a) = changes(api(kinds), kinds.resource(), watcher::Config::default());
    let (ovs, b) = changes(api(ovs), ovs.resource(), watcher::Config::default());
    // Each stream yields first when its listing is complete: no rows until both are, so no row
    // is drawn without its OperatorVersion. Nothing here may wait on one stream while the other
    // is not polled.
    let (a, b) = (a.map(|()| 0), b.map(|()| 1));
    let stream = futures::stream::select(a, b)
        .scan([false; 2], |listed, which: usize| {
            listed[which] = true;
            futures::future::ready(Some(listed[0] && listed[1]))
        })
        .filter_map(move |both| {
            let rows = both.then(|| view::rows(typed(all(&insts)), &typed(all(&ovs))));
            let html = rows.map(|r| pages::instance_rows(&r).into_string());
            futures::future::ready(
                html.map(|h| Ok::<_, Infallible>(Event::default().event("instances").data(h))),
            )
        });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

/// `GET /rollouts/{name}/events`: the rollout's page fragment ([`crate::rollouts::detail`]) at
/// each change of it, from one watch of that one Rollout.
pub(crate) async fn rollout(State(ui): State<Ui>, Path(name): Path<String>) -> Response {
    let resource = kudo_client::rollout::resource();
    let api: Api<DynamicObject> = Api::all_with(ui.client.clone(), &resource);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = stored(api, resource, config, "rollout", |all| {
        match typed::<Rollout>(all.to_vec()).first() {
            Some(r) => rollouts::detail(r),
            None => maud::html! { p.message { "The Rollout was deleted." } },
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

/// The objects that parse as `T`.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(objs: Vec<DynamicObject>) -> Vec<T> {
    objs.into_iter().filter_map(|o| from_dynamic(o).ok()).collect()
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
