//! kube-rs 5 against the server.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use crate::util::Env;

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"}
    }))
    .unwrap()
}

fn status_code(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn reason(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.reason.clone(),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn crud_conflicts_and_errors() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    let created = api
        .create(&PostParams::default(), &cm("a", json!({"x": "1"})))
        .await
        .unwrap();
    let md = &created.metadata;
    assert!(md.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(md.creation_timestamp.is_some());
    let rv1: u64 = md.resource_version.as_deref().unwrap().parse().unwrap();

    let e = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap_err();
    assert_eq!((status_code(&e), reason(&e).as_str()), (409, "AlreadyExists"));

    // Replace with the current resourceVersion works and bumps it; replaying the stale one conflicts.
    let mut c = created.clone();
    c.data = Some([("k".to_string(), "v2".to_string())].into());
    let replaced = api.replace("a", &PostParams::default(), &c).await.unwrap();
    let rv2: u64 = replaced
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);
    let e = api.replace("a", &PostParams::default(), &c).await.unwrap_err();
    assert_eq!((status_code(&e), reason(&e).as_str()), (409, "Conflict"));
    match &e {
        kube::Error::Api(s) => assert_eq!(
            s.message,
            "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
        ),
        _ => unreachable!(),
    }

    let e = api.get("missing").await.unwrap_err();
    assert_eq!((status_code(&e), reason(&e).as_str()), (404, "NotFound"));
    assert!(api.get_opt("missing").await.unwrap().is_none());

    // Invalid name → 422 with a cause.
    let e = api
        .create(&PostParams::default(), &cm("Bad_Name", json!({})))
        .await
        .unwrap_err();
    assert_eq!((status_code(&e), reason(&e).as_str()), (422, "Invalid"));

    // Label values are validated.
    let e = api
        .create(&PostParams::default(), &cm("lbl", json!({"ok": "not valid!"})))
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 422);
    // resourceVersion must not be set on create.
    let mut with_rv = cm("with-rv", json!({}));
    with_rv.metadata.resource_version = Some("5".into());
    let e = api.create(&PostParams::default(), &with_rv).await.unwrap_err();
    assert_eq!(status_code(&e), 400);

    // generateName.
    let mut g = cm("", json!({}));
    g.metadata.name = None;
    g.metadata.generate_name = Some("gen-".into());
    let made = api.create(&PostParams::default(), &g).await.unwrap();
    let n = made.metadata.name.unwrap();
    assert!(n.starts_with("gen-") && n.len() == 9, "{n}");

    // Namespace must exist.
    let nope: Api<ConfigMap> = Api::namespaced(env.client().await, "does-not-exist");
    let e = nope
        .create(&PostParams::default(), &cm("x", json!({})))
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 404);

    // dryRun does not store.
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    api.create(&dry, &cm("dry", json!({}))).await.unwrap();
    assert!(api.get_opt("dry").await.unwrap().is_none());

    // Delete then 404.
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let e = api.delete("a", &DeleteParams::default()).await.unwrap_err();
    assert_eq!(status_code(&e), 404);
}

#[tokio::test]
async fn wrong_scope_is_not_found() {
    let env = Env::start().await;
    let client = env.client().await;
    let url = env.server.url();
    let http = |path: &str| {
        let client = client.clone();
        let req = http::Request::get(format!("{url}{path}"))
            .body(Vec::new())
            .unwrap();
        async move { client.request_text(req).await }
    };
    // Namespaces are cluster-scoped: a namespaced path for them does not exist.
    assert!(http("/api/v1/namespaces/default/nodes").await.is_err());
    assert!(http("/api/v1/configmaps/x").await.is_err());
    assert!(http("/api/v1/nodes").await.is_ok());
    assert!(http("/api/v1/configmaps").await.is_ok());
}

#[tokio::test]
async fn selectors_and_pagination() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    for (name, labels) in [
        ("one", json!({"app": "a", "tier": "web"})),
        ("two", json!({"app": "b", "tier": "web"})),
        ("three", json!({"app": "c"})),
    ] {
        api.create(&PostParams::default(), &cm(name, labels))
            .await
            .unwrap();
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        // The namespace's root CA ConfigMap (made by the controller) is not part of the test.
        let mut v: Vec<String> = l
            .items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .filter(|n| n != "kube-root-ca.crt")
            .collect();
        v.sort();
        v
    };
    let q = |sel: &str| ListParams::default().labels(sel);
    assert_eq!(names(api.list(&q("app=a")).await.unwrap()), ["one"]);
    assert_eq!(names(api.list(&q("app!=a")).await.unwrap()), ["three", "two"]);
    assert_eq!(
        names(api.list(&q("app in (a,c)")).await.unwrap()),
        ["one", "three"]
    );
    assert_eq!(names(api.list(&q("app notin (a,c)")).await.unwrap()), ["two"]);
    assert_eq!(names(api.list(&q("tier")).await.unwrap()), ["one", "two"]);
    assert_eq!(names(api.list(&q("!tier")).await.unwrap()), ["three"]);
    assert_eq!(names(api.list(&q("tier=web,app=b")).await.unwrap()), ["two"]);
    let f = ListParams::default().fields("metadata.name=two");
    assert_eq!(names(api.list(&f).await.unwrap()), ["two"]);
    let f = ListParams::default().fields("metadata.name!=two,metadata.namespace=default");
    assert_eq!(names(api.list(&f).await.unwrap()), ["one", "three"]);
    let bad = ListParams::default().fields("data.k=v");
    assert_eq!(status_code(&api.list(&bad).await.unwrap_err()), 400);

    // Pagination: 2 + 1 (of the labelled ones: the namespace's root CA ConfigMap has none).
    let page1 = api
        .list(&ListParams::default().labels("app").limit(2))
        .await
        .unwrap();
    assert_eq!(page1.items.len(), 2);
    let token = page1.metadata.continue_.clone().expect("continue token");
    assert_eq!(page1.metadata.remaining_item_count, Some(1));
    let page2 = api
        .list(
            &ListParams::default()
                .labels("app")
                .limit(2)
                .continue_token(&token),
        )
        .await
        .unwrap();
    assert_eq!(page2.items.len(), 1);
    assert!(page2.metadata.continue_.as_deref().unwrap_or("").is_empty());

    // deletecollection with a selector.
    api.delete_collection(&DeleteParams::default(), &q("tier=web"))
        .await
        .unwrap();
    assert_eq!(names(api.list(&ListParams::default()).await.unwrap()), ["three"]);
}

#[tokio::test]
async fn watcher_sees_changes_both_list_strategies() {
    let env = Env::start().await;
    let client = env.client().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for streaming in [false, true] {
        let label = format!("s{streaming}");
        api.create(
            &PostParams::default(),
            &cm(&format!("pre-{label}"), json!({"w": label})),
        )
        .await
        .unwrap();
        let mut cfg = watcher::Config::default().labels(&format!("w={label}"));
        if streaming {
            cfg = cfg.streaming_lists();
        }
        let mut stream = watcher(api.clone(), cfg).applied_objects().boxed();
        let first = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(first.metadata.name, Some(format!("pre-{label}")));
        api.create(
            &PostParams::default(),
            &cm(&format!("other-{label}"), json!({"w": "other"})),
        )
        .await
        .unwrap();
        api.create(
            &PostParams::default(),
            &cm(&format!("live-{label}"), json!({"w": label})),
        )
        .await
        .unwrap();
        let next = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(next.metadata.name, Some(format!("live-{label}")));
        // A label change that stops matching is seen as a deletion.
        let mut deletes = watcher(
            api.clone(),
            watcher::Config::default().labels(&format!("w={label}")),
        )
        .boxed();
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(10), deletes.try_next())
                .await
                .unwrap()
                .unwrap();
            if matches!(ev, Some(watcher::Event::InitDone)) {
                break;
            }
        }
        api.patch(
            &format!("live-{label}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"w": "gone"}}})),
        )
        .await
        .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let ev = tokio::time::timeout_at(deadline, deletes.try_next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            if let watcher::Event::Delete(o) = ev {
                assert_eq!(o.metadata.name, Some(format!("live-{label}")));
                break;
            }
        }
    }
}

#[tokio::test]
async fn raw_watch_replays_history_and_reports_gone() {
    let server = kudo_apiserver::ApiServer::start(kudo_apiserver::Config {
        history_capacity: 16,
        ..Default::default()
    })
    .await
    .unwrap();
    let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = api
        .create(&PostParams::default(), &cm("h0", json!({})))
        .await
        .unwrap();
    let rv0 = first.metadata.resource_version.unwrap();
    api.create(&PostParams::default(), &cm("h1", json!({})))
        .await
        .unwrap();
    // Replay from rv0: the next change (h1) arrives first.
    let mut w = api
        .watch(&WatchParams::default().timeout(5), &rv0)
        .await
        .unwrap()
        .boxed();
    match w.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("h1")),
        other => panic!("unexpected {other:?}"),
    }
    // Push rv0 out of the 16-event history; watching from it is now 410 Gone.
    for i in 2..40 {
        api.create(&PostParams::default(), &cm(&format!("h{i}"), json!({})))
            .await
            .unwrap();
    }
    let mut w = api
        .watch(&WatchParams::default().timeout(5), &rv0)
        .await
        .unwrap()
        .boxed();
    match w.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(s) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {other:?}"),
    }
    // Bookmarks when asked.
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut w = api
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    let ev = tokio::time::timeout(Duration::from_secs(5), w.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(ev, WatchEvent::Bookmark(_)), "{ev:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn generation_and_status_subresource() {
    let env = Env::start().await;
    let api: Api<Deployment> = Api::namespaced(env.client().await, "default");
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}
        },
        "status": {"replicas": 99}
    }))
    .unwrap();
    let d = api.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    assert!(
        d.status.is_none() || d.status.as_ref().unwrap().replicas.is_none(),
        "status ignored on create"
    );

    // Metadata-only change: no generation bump.
    let d = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    // Spec change: bump.
    let d = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(2));
    // Status via main resource is ignored; via /status it sticks and leaves generation alone.
    let d = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert!(d.status.and_then(|s| s.replicas).is_none());
    let d = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 3, "readyReplicas": 3}, "spec": {"replicas": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(d.status.as_ref().unwrap().ready_replicas, Some(3));
    assert_eq!(d.spec.replicas, Some(3), "spec ignored on /status");
    assert_eq!(d.metadata.generation, Some(2));

    // Scale subresource.
    let s = api.get_scale("web").await.unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(3));
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .unwrap();
    assert_eq!(api.get("web").await.unwrap().spec.replicas, Some(4));

    // Selector is immutable.
    let e = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"selector": {"matchLabels": {"app": "other"}}}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 422);
}

#[tokio::test]
async fn json_patch_test_null_for_finalizer_helper() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    api.create(&PostParams::default(), &cm("f", json!({})))
        .await
        .unwrap();
    // What kube-runtime's finalizer() sends for an object without finalizers.
    let p: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["kudo.dev/test"]}
    ]))
    .unwrap();
    let got = api
        .patch("f", &PatchParams::default(), &Patch::Json::<()>(p))
        .await
        .unwrap();
    assert_eq!(got.metadata.finalizers, Some(vec!["kudo.dev/test".to_string()]));
    // A failing test is 422.
    let p: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/k", "value": "nope"}])).unwrap();
    let e = api
        .patch("f", &PatchParams::default(), &Patch::Json::<()>(p))
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 422);
}

#[tokio::test]
async fn finalizers_and_deletion_timestamp() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    let mut c = cm("fin", json!({}));
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    let res = api.delete("fin", &DeleteParams::default()).await.unwrap();
    let obj = res.left().expect("object returned while finalizers remain");
    assert!(obj.metadata.deletion_timestamp.is_some());
    // Still there.
    let live = api.get("fin").await.unwrap();
    assert!(live.metadata.deletion_timestamp.is_some());
    // No new finalizers after deletion started.
    let e = api
        .patch(
            "fin",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 422);
    // Removing the last finalizer removes the object.
    api.patch(
        "fin",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(api.get_opt("fin").await.unwrap().is_none());
}

#[tokio::test]
async fn kube_runtime_finalizer_helper() {
    use kube::runtime::controller::Action;
    use kube::runtime::finalizer::{Event, finalizer};
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    api.create(&PostParams::default(), &cm("rf", json!({})))
        .await
        .unwrap();
    let run = |obj: ConfigMap| {
        let api = api.clone();
        async move {
            finalizer(
                &api,
                "kudo.dev/cleanup",
                std::sync::Arc::new(obj),
                |ev| async move {
                    Ok::<_, std::convert::Infallible>(match ev {
                        Event::Apply(_) => Action::await_change(),
                        Event::Cleanup(_) => Action::await_change(),
                    })
                },
            )
            .await
        }
    };
    run(api.get("rf").await.unwrap()).await.unwrap();
    assert_eq!(
        api.get("rf").await.unwrap().metadata.finalizers,
        Some(vec!["kudo.dev/cleanup".to_string()])
    );
    api.delete("rf", &DeleteParams::default()).await.unwrap();
    run(api.get("rf").await.unwrap()).await.unwrap();
    assert!(api.get_opt("rf").await.unwrap().is_none());
}

#[tokio::test]
async fn discovery_legacy_and_aggregated() {
    let env = Env::start().await;
    let client = env.client().await;
    for aggregated in [false, true] {
        let d = kube::Discovery::new(client.clone());
        let d = if aggregated {
            d.run_aggregated().await
        } else {
            d.run().await
        }
        .unwrap();
        let (ar, caps) = d
            .resolve_gvk(&GroupVersionKind::gvk("apps", "v1", "Deployment"))
            .expect("deployments discovered");
        assert_eq!(ar.plural, "deployments");
        assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
        assert!(
            caps.subresources.iter().any(|(s, _)| s.plural == "status"),
            "aggregated={aggregated}"
        );
        let (_, caps) = d
            .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Namespace"))
            .unwrap();
        assert_eq!(caps.scope, kube::discovery::Scope::Cluster);
    }
}

const CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.example.com"},
  "spec": {
    "group": "example.com",
    "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
    "versions": [{
      "name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
      "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
      "schema": {"openAPIV3Schema": {
        "type": "object",
        "properties": {
          "spec": {"type": "object", "properties": {
            "size": {"type": "integer", "default": 3},
            "replicas": {"type": "integer"},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
          }},
          "status": {"type": "object", "properties": {"replicas": {"type": "integer"}, "phase": {"type": "string"}}}
        }
      }}
    }]
  }
}"#;

#[tokio::test]
async fn crd_lifecycle_defaulting_pruning_subresources() {
    let env = Env::start().await;
    let client = env.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_str(CRD).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let established = kube::runtime::wait::await_condition(
        crds.clone(),
        "widgets.example.com",
        kube::runtime::wait::conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(10), established)
        .await
        .unwrap()
        .unwrap();

    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let ar = ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let w: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"replicas": 1, "unknown": "dropped", "free": {"anything": {"goes": 1}}},
        "status": {"phase": "ignored-on-create"},
        "extra": true
    }))
    .unwrap();
    let got = api.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(
        got.data["spec"],
        json!({"size": 3, "replicas": 1, "free": {"anything": {"goes": 1}}})
    );
    assert!(got.data.get("extra").is_none());
    assert!(got.data.get("status").is_none());
    assert_eq!(got.metadata.generation, Some(1));

    // Schema validation: wrong type is 422 with the real server's wording.
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w2"}, "spec": {"size": "big"}
    }))
    .unwrap();
    match api.create(&PostParams::default(), &bad).await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert_eq!(
                s.message,
                "Widget.example.com \"w2\" is invalid: spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""
            );
        }
        other => panic!("{other:?}"),
    }

    // Strategic merge patch is refused for custom resources.
    let e = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 4}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 415);

    let st = api
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready", "replicas": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["phase"], "Ready");
    let scale = api.get_scale("w1").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(scale.status.unwrap().replicas, 1);

    // Discovery sees it.
    let d = kube::Discovery::new(client.clone()).run().await.unwrap();
    assert!(d.resolve_gvk(&gvk).is_some());

    // Deleting the CRD removes its objects and its API.
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let e = api.get("w1").await.unwrap_err();
    assert_eq!(status_code(&e), 404);
}

async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

fn owned(name: &str, owner: &ConfigMap, block: bool) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap",
            "name": owner.metadata.name, "uid": owner.metadata.uid,
            "blockOwnerDeletion": block
        }]}
    }))
    .unwrap()
}

#[tokio::test]
async fn garbage_collection_background_foreground_orphan() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    // Background.
    let owner = api
        .create(&PostParams::default(), &cm("bg-owner", json!({})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &owned("bg-dep", &owner, false))
        .await
        .unwrap();
    api.delete("bg-owner", &DeleteParams::background()).await.unwrap();
    eventually("background dependent deleted", || async {
        api.get_opt("bg-dep").await.unwrap().is_none()
    })
    .await;

    // Foreground: the owner waits (with the foregroundDeletion finalizer) for a blocking dependent.
    let owner = api
        .create(&PostParams::default(), &cm("fg-owner", json!({})))
        .await
        .unwrap();
    let mut dep = owned("fg-dep", &owner, true);
    dep.metadata.finalizers = Some(vec!["example.com/slow".into()]);
    api.create(&PostParams::default(), &dep).await.unwrap();
    api.delete("fg-owner", &DeleteParams::foreground()).await.unwrap();
    eventually("dependent marked for deletion", || async {
        api.get("fg-dep")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    let o = api.get("fg-owner").await.unwrap();
    assert!(
        o.metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    api.patch(
        "fg-dep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("foreground owner gone", || async {
        api.get_opt("fg-owner").await.unwrap().is_none()
    })
    .await;

    // Orphan: dependents stay, without the owner reference.
    let owner = api
        .create(&PostParams::default(), &cm("or-owner", json!({})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &owned("or-dep", &owner, false))
        .await
        .unwrap();
    api.delete("or-owner", &DeleteParams::orphan()).await.unwrap();
    eventually("orphan owner gone", || async {
        api.get_opt("or-owner").await.unwrap().is_none()
    })
    .await;
    let d = api.get("or-dep").await.unwrap();
    assert!(d.metadata.owner_references.unwrap_or_default().is_empty());
}

/// The collector looks at a newly created dependent on its own (without a whole sweep): one
/// whose owner is already gone (or has another uid) is collected, one whose owner lives stays,
/// even while a stream of status-only writes keeps the server busy.
#[tokio::test]
async fn a_dependent_created_after_its_owner_went_is_collected() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    let owner = api
        .create(&PostParams::default(), &cm("live-owner", json!({})))
        .await
        .unwrap();
    let gone = api
        .create(&PostParams::default(), &cm("gone-owner", json!({})))
        .await
        .unwrap();
    api.delete("gone-owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually("owner gone", || async {
        api.get_opt("gone-owner").await.unwrap().is_none()
    })
    .await;
    // Let the sweep the deletion asked for pass, so only the creates below are pending.
    tokio::time::sleep(Duration::from_millis(100)).await;
    api.create(&PostParams::default(), &owned("keeps", &owner, false))
        .await
        .unwrap();
    api.create(&PostParams::default(), &owned("dangling", &gone, false))
        .await
        .unwrap();
    for i in 0..20 {
        api.patch(
            "keeps",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"n": i.to_string()}})),
        )
        .await
        .unwrap();
    }
    eventually("dependent of a gone owner collected", || async {
        api.get_opt("dangling").await.unwrap().is_none()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        api.get_opt("keeps").await.unwrap().is_some(),
        "a dependent of a live owner must stay"
    );
}

#[tokio::test]
async fn namespace_deletion_cascades() {
    let env = Env::start().await;
    let client = env.client().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap(),
    )
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    api.create(&PostParams::default(), &cm("x", json!({})))
        .await
        .unwrap();
    let mut held = cm("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    nss.delete("doomed", &DeleteParams::default()).await.unwrap();
    let ns = nss.get("doomed").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    // No new content while terminating.
    let e = api
        .create(&PostParams::default(), &cm("late", json!({})))
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 403);
    eventually("plain content deleted", || async {
        api.get_opt("x").await.unwrap().is_none()
    })
    .await;
    assert!(
        nss.get_opt("doomed").await.unwrap().is_some(),
        "held by the finalizer of its content"
    );
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("namespace gone", || async {
        nss.get_opt("doomed").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn services_get_cluster_ips_which_are_immutable() {
    let env = Env::start().await;
    let api: Api<Service> = Api::namespaced(env.client().await, "default");
    let svc = |name: &str, ip: Option<&str>| -> Service {
        let mut spec = json!({"ports": [{"port": 80}], "selector": {"app": "x"}});
        if let Some(ip) = ip {
            spec["clusterIP"] = json!(ip);
        }
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };
    let a = api.create(&PostParams::default(), &svc("a", None)).await.unwrap();
    let ip = a.spec.as_ref().unwrap().cluster_ip.clone().unwrap();
    assert!(ip.starts_with("10.96."), "{ip}");
    let port = &a.spec.as_ref().unwrap().ports.as_ref().unwrap()[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    let b = api.create(&PostParams::default(), &svc("b", None)).await.unwrap();
    assert_ne!(b.spec.unwrap().cluster_ip.unwrap(), ip);
    let h = api
        .create(&PostParams::default(), &svc("headless", Some("None")))
        .await
        .unwrap();
    assert_eq!(h.spec.unwrap().cluster_ip.as_deref(), Some("None"));
    let e = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"clusterIP": "10.96.200.200"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 422);
}

#[tokio::test]
async fn immutable_fields_are_rejected() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let env = Env::start().await;
    let client = env.client().await;
    let pp = PatchParams::default();
    let invalid = |e: kube::Error| match e {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
            s.message
        }
        other => panic!("{other:?}"),
    };

    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    sts.create(&PostParams::default(), &serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "replicas": 1, "selector": {"matchLabels": {"a": "db"}},
                 "template": {"metadata": {"labels": {"a": "db"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    })).unwrap()).await.unwrap();
    // Allowed: replicas and template.
    sts.patch("db", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await
        .unwrap();
    let msg = invalid(
        sts.patch(
            "db",
            &pp,
            &Patch::Merge(json!({"spec": {"serviceName": "other"}})),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        msg.contains("Forbidden: updates to statefulset spec for fields other than"),
        "{msg}"
    );

    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job = jobs.create(&PostParams::default(), &serde_json::from_value(json!({
        "metadata": {"name": "once"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}
    })).unwrap()).await.unwrap();
    // The server generated the selector and template labels, as kube-apiserver does.
    let uid = job.metadata.uid.clone().unwrap();
    let sel = job
        .spec
        .as_ref()
        .unwrap()
        .selector
        .clone()
        .unwrap()
        .match_labels
        .unwrap();
    assert_eq!(sel["batch.kubernetes.io/controller-uid"], uid);
    let msg = invalid(
        jobs.patch(
            "once",
            &pp,
            &Patch::Merge(
                json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "j"}]}}}}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert!(msg.contains("spec.template"), "{msg}");

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut frozen = cm("frozen", json!({}));
    frozen.immutable = Some(true);
    cms.create(&PostParams::default(), &frozen).await.unwrap();
    let msg = invalid(
        cms.patch("frozen", &pp, &Patch::Merge(json!({"data": {"k": "changed"}})))
            .await
            .unwrap_err(),
    );
    assert!(
        msg.contains("field is immutable when `immutable` is set"),
        "{msg}"
    );
    // Labels can still change.
    cms.patch(
        "frozen",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"ok": "yes"}}})),
    )
    .await
    .unwrap();

    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    pvcs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    pvcs.patch(
        "data",
        &pp,
        &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})),
    )
    .await
    .unwrap();
    let msg = invalid(
        pvcs.patch(
            "data",
            &pp,
            &Patch::Merge(json!({"spec": {"accessModes": ["ReadWriteMany"]}})),
        )
        .await
        .unwrap_err(),
    );
    assert!(msg.contains("spec is immutable after creation"), "{msg}");
}

#[tokio::test]
async fn server_side_apply_with_kube_rs() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1", "b": "2"}});
    let pp = PatchParams::apply("kudo-test");
    let got = api.patch("ssa", &pp, &Patch::Apply(&desired)).await.unwrap();
    assert_eq!(got.data.unwrap().len(), 2);
    let mf = got.metadata.managed_fields.unwrap();
    assert_eq!(mf[0].manager.as_deref(), Some("kudo-test"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    // Another manager: conflict on an owned field, with causes.
    let other =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "x"}});
    let e = api
        .patch("ssa", &PatchParams::apply("other"), &Patch::Apply(&other))
        .await
        .unwrap_err();
    match e {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
            assert!(s.message.contains("conflict with \"kudo-test\""), "{}", s.message);
        }
        other => panic!("{other:?}"),
    }
    let forced = api
        .patch("ssa", &PatchParams::apply("other").force(), &Patch::Apply(&other))
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["a"], "x");
    // A field manager is required.
    let e = api
        .patch("ssa", &PatchParams::default(), &Patch::Apply(&other))
        .await
        .unwrap_err();
    assert_eq!(status_code(&e), 400);
}

#[tokio::test]
async fn openapi_v3_documents() {
    let env = Env::start().await;
    let client = env.client().await;
    let url = env.server.url();
    let get = |path: String| {
        let client = client.clone();
        let url = url.clone();
        async move {
            let req = http::Request::get(format!("{url}{path}"))
                .body(Vec::new())
                .unwrap();
            client
                .request_text(req)
                .await
                .map(|t| serde_json::from_str::<serde_json::Value>(&t).unwrap())
        }
    };
    let index = get("/openapi/v3".into()).await.unwrap();
    let apps = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(index["paths"]["api/v1"]["serverRelativeURL"].is_string());
    let doc = get(apps).await.unwrap();
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
    );
    let schema = &doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
    let containers = &schema["properties"]["spec"]["properties"]["template"]["properties"]["spec"]["properties"]
        ["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    assert!(get("/openapi/v2".into()).await.is_err());

    // A CRD's group appears once it is created.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &serde_json::from_str(CRD).unwrap())
        .await
        .unwrap();
    let index = get("/openapi/v3".into()).await.unwrap();
    let url = index["paths"]["apis/example.com/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let doc = get(url).await.unwrap();
    let schema = &doc["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(schema["properties"]["spec"]["properties"]["size"]["default"], 3);
}

#[tokio::test]
async fn pod_field_selectors() {
    use k8s_openapi::api::core::v1::Pod;
    let env = Env::start().await;
    let api: Api<Pod> = Api::namespaced(env.client().await, "default");
    for (name, node) in [("p1", "node-a"), ("p2", "node-b")] {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox:1"}]}
        }))
        .unwrap();
        let created = api.create(&PostParams::default(), &p).await.unwrap();
        assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    }
    api.patch_status(
        "p1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    let names = |l: kube::core::ObjectList<Pod>| {
        l.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("status.phase=Running"))
                .await
                .unwrap()
        ),
        ["p1"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("spec.nodeName=node-b"))
                .await
                .unwrap()
        ),
        ["p2"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("status.phase!=Running,spec.nodeName=node-b"))
                .await
                .unwrap()
        ),
        ["p2"]
    );
}

#[tokio::test]
async fn method_not_allowed_dry_run_and_watch_timeout() {
    let env = Env::start().await;
    let client = env.client().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &cm("d", json!({})))
        .await
        .unwrap();

    // POST to a named object is not a thing.
    let req = http::Request::post(format!(
        "{}/api/v1/namespaces/default/configmaps/d",
        env.server.url()
    ))
    .header("Content-Type", "application/json")
    .body(b"{}".to_vec())
    .unwrap();
    match client.request_text(req).await.unwrap_err() {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (405, "MethodNotAllowed")),
        other => panic!("{other:?}"),
    }
    // An unknown patch content type is 415.
    let req = http::Request::patch(format!(
        "{}/api/v1/namespaces/default/configmaps/d",
        env.server.url()
    ))
    .header("Content-Type", "text/plain")
    .body(b"{}".to_vec())
    .unwrap();
    match client.request_text(req).await.unwrap_err() {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (415, "UnsupportedMediaType")),
        other => panic!("{other:?}"),
    }

    // dryRun on patch and delete changes nothing.
    let pp = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let p = api
        .patch("d", &pp, &Patch::Merge(json!({"data": {"k": "dry"}})))
        .await
        .unwrap();
    assert_eq!(p.data.unwrap()["k"], "dry");
    assert_eq!(api.get("d").await.unwrap().data.unwrap()["k"], "v");
    let dp = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    api.delete("d", &dp).await.unwrap();
    assert!(api.get_opt("d").await.unwrap().is_some());

    // Server-side apply with dryRun=All (what `kubectl kudo update --dry-run=server` sends): the
    // merged object comes back, nothing is stored, the resourceVersion stays, a new object is
    // not created.
    let rv_before = api.get("d").await.unwrap().metadata.resource_version;
    let ssa = PatchParams::apply("kudo").force().dry_run();
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"},
        "data": {"k": "ssa"}});
    let merged = api.patch("d", &ssa, &Patch::Apply(&applied)).await.unwrap();
    assert_eq!(merged.data.unwrap()["k"], "ssa");
    let now = api.get("d").await.unwrap();
    assert_eq!(
        (now.data.unwrap()["k"].as_str(), now.metadata.resource_version),
        ("v", rv_before)
    );
    let fresh = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa-new"}});
    api.patch("ssa-new", &ssa, &Patch::Apply(&fresh)).await.unwrap();
    assert!(api.get_opt("ssa-new").await.unwrap().is_none());
    // Any dryRun value but All is refused, as kube-apiserver does, never taken as a real write.
    for (method, path) in [
        (
            "POST",
            "/api/v1/namespaces/default/configmaps?dryRun=all".to_string(),
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/d?dryRun=true".to_string(),
        ),
    ] {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", env.server.url()))
            .header("Content-Type", "application/merge-patch+json")
            .body(br#"{"metadata": {"name": "bad"}, "data": {"k": "written"}}"#.to_vec())
            .unwrap();
        match client.request_text(req).await.unwrap_err() {
            kube::Error::Api(s) => {
                assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{method}");
                assert!(s.message.contains("dryRun: Unsupported value"), "{}", s.message);
                if method == "POST" {
                    // kube-apiserver v1.28's answer, word for word.
                    assert_eq!(
                        s.message,
                        r#"CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"all"}: supported values: "All""#
                    );
                }
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(api.get("d").await.unwrap().data.unwrap()["k"], "v");
    assert!(api.get_opt("bad").await.unwrap().is_none());

    // timeoutSeconds ends the watch stream.
    let rv = api.get("d").await.unwrap().metadata.resource_version.unwrap();
    let mut w = api
        .watch(
            &WatchParams::default()
                .fields("metadata.name=d")
                .timeout(1)
                .disable_bookmarks(),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    let end = tokio::time::timeout(Duration::from_secs(10), w.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none(), "stream ended without events: {end:?}");
}
