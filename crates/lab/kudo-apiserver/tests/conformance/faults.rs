//! Fault injection, observed from the outside: kubectl and kube-rs against a server whose faults
//! are set through the Rust handle or the `/kudo-admin/faults` endpoint.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kudo_apiserver::{ErrorRule, FaultConfig, FaultCounters};
use serde_json::{Value, json};

use crate::require_kubectl;
use crate::util::Env;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"k": "v"}
    }))
    .unwrap()
}

fn rules(specs: &[&str]) -> Vec<ErrorRule> {
    specs.iter().map(|s| s.parse().expect("valid rule")).collect()
}

fn api_status(e: &kube::Error) -> &kube::core::Status {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A raw request over the client (no retries), returning status, headers and JSON body.
async fn raw(
    client: &kube::Client,
    method: &str,
    url: &str,
    body: Option<Value>,
) -> (u16, http::HeaderMap, Value) {
    let mut req = http::Request::builder().method(method).uri(url);
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let req = req.body(kube::client::Body::from(bytes)).unwrap();
    let res = client.send(req).await.expect("request sent");
    let (parts, body) = res.into_parts();
    let bytes = body.collect_bytes().await.expect("body read");
    let v = serde_json::from_slice(&bytes).unwrap_or_else(|_| json!(String::from_utf8_lossy(&bytes)));
    (parts.status.as_u16(), parts.headers, v)
}

/// A client that does not retry 429s by itself, to see exactly what the server answers.
fn no_retry_client(env: &Env) -> kube::Client {
    let mut config = kube::Config::new(env.server.url().parse().unwrap());
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_500_on_get_fails_kubectl_get_but_not_list() {
    require_kubectl!();
    let env = Env::start().await;
    env.ok(&["create", "configmap", "x", "--from-literal=k=v"]);
    env.server
        .faults()
        .set(FaultConfig {
            errors: rules(&["get:500:1"]),
            ..Default::default()
        })
        .unwrap();
    let out = env.kubectl(&["get", "configmap", "x"]);
    assert!(!out.status.success());
    assert_eq!(
        Env::err(&out).trim(),
        "Error from server (InternalError): Internal error occurred: injected fault: get configmaps \"x\""
    );
    // A list is another verb: unaffected.
    assert!(
        env.ok(&["get", "configmaps", "-o", "name"])
            .contains("configmap/x")
    );
    assert!(env.server.faults().counters().internal_errors >= 1);
}

#[tokio::test]
async fn error_429_carries_retry_after_and_clients_retry() {
    let env = Env::start().await;
    let client = no_retry_client(&env);
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cm("busy"))
        .await
        .unwrap();
    env.server
        .faults()
        .set(FaultConfig {
            errors: rules(&["get:429:1"]),
            ..Default::default()
        })
        .unwrap();
    let url = format!("{}/api/v1/namespaces/default/configmaps/busy", env.server.url());
    let (code, headers, body) = raw(&client, "GET", &url, None).await;
    assert_eq!(code, 429);
    assert_eq!(
        headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("1")
    );
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["details"]["retryAfterSeconds"], 1);
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let e = api.get("busy").await.unwrap_err();
    assert_eq!(
        (api_status(&e).code, api_status(&e).reason.as_str()),
        (429, "TooManyRequests")
    );

    // kube-rs's default client honours Retry-After: with half the gets refused, all succeed.
    env.server
        .faults()
        .set(FaultConfig {
            errors: rules(&["get:429:0.5"]),
            seed: Some(3),
            ..Default::default()
        })
        .unwrap();
    let before = env.server.faults().counters().too_many_requests;
    let retrying: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    for _ in 0..4 {
        retrying.get("busy").await.expect("retried past the 429s");
    }
    assert!(env.server.faults().counters().too_many_requests > before);
}

#[tokio::test]
async fn conflict_on_update_is_a_kube_conflict_and_not_executed() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    let created = api.create(&PostParams::default(), &cm("c")).await.unwrap();
    env.server
        .faults()
        .set(FaultConfig {
            errors: rules(&["update:409:1"]),
            ..Default::default()
        })
        .unwrap();
    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "new".to_string())].into());
    let e = api
        .replace("c", &PostParams::default(), &changed)
        .await
        .unwrap_err();
    let s = api_status(&e);
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let now = api.get("c").await.unwrap();
    assert_eq!(now.data.unwrap()["k"], "v", "the update was not executed");
    assert_eq!(now.metadata.resource_version, created.metadata.resource_version);
    assert_eq!(env.server.faults().counters().conflicts, 1);
}

#[tokio::test]
async fn seeded_rate_fails_some_requests_and_repeats() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    api.create(&PostParams::default(), &cm("s")).await.unwrap();
    let config = FaultConfig {
        errors: rules(&["get:500:0.5"]),
        seed: Some(42),
        ..Default::default()
    };
    let mut runs = Vec::new();
    for _ in 0..2 {
        env.server.faults().set(config.clone()).unwrap();
        let mut pattern = Vec::new();
        for _ in 0..40 {
            pattern.push(api.get("s").await.is_err());
        }
        runs.push(pattern);
    }
    let failed = runs[0].iter().filter(|f| **f).count();
    assert!(failed > 0 && failed < 40, "{failed} of 40 failed");
    assert_eq!(runs[0], runs[1], "the same seed gives the same faults");
    assert_eq!(env.server.faults().counters().internal_errors, 2 * failed as u64);
}

#[tokio::test]
async fn latency_delays_requests() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    api.create(&PostParams::default(), &cm("slow")).await.unwrap();
    env.server
        .faults()
        .set(FaultConfig {
            latency: Duration::from_millis(300),
            ..Default::default()
        })
        .unwrap();
    let start = Instant::now();
    api.get("slow").await.unwrap();
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(300), "took {took:?}");
    assert_eq!(env.server.faults().counters().delayed_requests, 1);
}

#[tokio::test]
async fn watch_cut_ends_the_stream_and_a_new_watch_resumes() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    let rv0 = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    env.server
        .faults()
        .set(FaultConfig {
            watch_cut: Some(Duration::from_secs(1)),
            ..Default::default()
        })
        .unwrap();
    let wp = WatchParams::default().disable_bookmarks();
    let mut stream = api.watch(&wp, &rv0).await.unwrap().boxed();
    api.create(&PostParams::default(), &cm("first")).await.unwrap();
    let mut last_rv = rv0.clone();
    let mut seen = Vec::new();
    // The stream must end by itself (cleanly: no error) well within the cut plus slack.
    let ended = tokio::time::timeout(Duration::from_secs(15), async {
        while let Some(ev) = stream.try_next().await.expect("no stream error") {
            match ev {
                WatchEvent::Added(o) => {
                    last_rv = o.metadata.resource_version.clone().unwrap();
                    seen.push(o.metadata.name.unwrap());
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the watch was not cut");
    assert_eq!(seen, ["first"]);
    assert_eq!(env.server.faults().counters().watch_cuts, 1);
    // Changes made while nobody watches arrive on the next watch from the last seen version.
    api.create(&PostParams::default(), &cm("second")).await.unwrap();
    let mut stream = api.watch(&wp, &last_rv).await.unwrap().boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Added(o)) => assert_eq!(o.metadata.name.as_deref(), Some("second")),
        other => panic!("expected ADDED second, got {other:?}"),
    }
}

#[tokio::test]
async fn a_watch_cut_set_at_runtime_ends_open_watches() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    // The namespace's root CA ConfigMap would be the first initial event.
    let wp = WatchParams::default()
        .fields("metadata.name!=kube-root-ca.crt")
        .disable_bookmarks();
    let mut stream = api.watch(&wp, "0").await.unwrap().boxed();
    api.create(&PostParams::default(), &cm("before")).await.unwrap();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Added(o)) => assert_eq!(o.metadata.name.as_deref(), Some("before")),
        other => panic!("expected ADDED before, got {other:?}"),
    }
    env.server
        .faults()
        .set(FaultConfig {
            watch_cut: Some(Duration::from_millis(500)),
            ..Default::default()
        })
        .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(15), stream.try_next())
        .await
        .expect("the open watch was cut");
    assert!(next.unwrap().is_none(), "the stream ended cleanly");
    assert_eq!(env.server.faults().counters().watch_cuts, 1);
}

#[tokio::test]
async fn lost_write_is_applied_but_reported_failed() {
    let env = Env::start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    env.server
        .faults()
        .set(FaultConfig {
            lost_write_rate: 1.0,
            ..Default::default()
        })
        .unwrap();
    let e = api
        .create(&PostParams::default(), &cm("ghost"))
        .await
        .unwrap_err();
    let s = api_status(&e);
    assert_eq!((s.code, s.reason.as_str()), (500, "InternalError"));
    assert!(s.message.contains("lost its acknowledgement"), "{}", s.message);
    // Reads are not writes: the object is there.
    assert!(api.get_opt("ghost").await.unwrap().is_some());
    // A retry of a write that failed on its own returns its own error, uncounted.
    let e = api
        .create(&PostParams::default(), &cm("ghost"))
        .await
        .unwrap_err();
    assert_eq!(api_status(&e).reason, "AlreadyExists");
    let e = api.delete("ghost", &DeleteParams::default()).await.unwrap_err();
    assert_eq!(api_status(&e).code, 500);
    assert!(
        api.get_opt("ghost").await.unwrap().is_none(),
        "the delete happened"
    );
    assert_eq!(env.server.faults().counters().lost_writes, 2);
}

#[tokio::test]
async fn verb_filter_and_exempt_paths() {
    let env = Env::start().await;
    let client = env.client().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &cm("kept")).await.unwrap();
    env.server
        .faults()
        .set(FaultConfig {
            errors: rules(&["create:500:1"]),
            ..Default::default()
        })
        .unwrap();
    assert!(api.get("kept").await.is_ok());
    assert!(api.list(&ListParams::default()).await.is_ok());
    let e = api.create(&PostParams::default(), &cm("new")).await.unwrap_err();
    assert_eq!(
        api_status(&e).message,
        "Internal error occurred: injected fault: create configmaps \"new\""
    );
    // `*` fails every resource request, but discovery, OpenAPI, health and version stay up.
    env.server
        .faults()
        .set(FaultConfig {
            errors: rules(&["*:500:1"]),
            ..Default::default()
        })
        .unwrap();
    let nss: Api<Namespace> = Api::all(client.clone());
    assert_eq!(
        api_status(&nss.list(&ListParams::default()).await.unwrap_err()).code,
        500
    );
    let url = env.server.url();
    for path in [
        "/version",
        "/healthz",
        "/readyz",
        "/livez",
        "/api",
        "/api/v1",
        "/apis",
        "/apis/apps",
        "/apis/apps/v1",
        "/openapi/v3",
        "/openapi/v3/api/v1",
        "/kudo-admin/faults",
    ] {
        let (code, _, body) = raw(&client, "GET", &format!("{url}{path}"), None).await;
        assert_eq!(code, 200, "{path}: {body}");
    }
}

#[tokio::test]
async fn admin_endpoint_round_trip() {
    let env = Env::start().await;
    let client = env.client().await;
    let url = env.server.faults_url();
    let (code, _, body) = raw(&client, "GET", &url, None).await;
    assert_eq!(code, 200);
    assert_eq!(
        body,
        json!({
            "config": {"errors": [], "latencyMs": 0, "jitterMs": 0, "lostWriteRate": 0.0, "staleReplayRate": 0.0},
            "counters": serde_json::to_value(FaultCounters::default()).unwrap(),
        })
    );
    let config = json!({
        "errors": [{"verb": "list", "status": 500, "rate": 1.0}, {"verb": "*", "status": 409, "rate": 0.25}],
        "latencyMs": 10, "jitterMs": 5, "watchCutMs": 2000, "lostWriteRate": 0.5, "seed": 7,
        "staleReplayRate": 0.25, "staleReplayAgent": "kudo-manager"
    });
    let (code, _, body) = raw(&client, "PUT", &url, Some(config.clone())).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["config"], config);
    let (_, _, body) = raw(&client, "GET", &url, None).await;
    assert_eq!(body["config"], config);
    let handle = env.server.faults().config();
    assert_eq!(handle.watch_cut, Some(Duration::from_secs(2)));
    assert_eq!(handle.errors.len(), 2);
    // The faults are live: a list fails (and is counted, visible on the endpoint).
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert_eq!(
        api_status(&api.list(&ListParams::default()).await.unwrap_err()).code,
        500
    );
    let (_, _, body) = raw(&client, "GET", &url, None).await;
    assert_eq!(body["counters"]["internalErrors"], 1);
    // Invalid settings are refused with a clear message, and change nothing.
    let (code, _, body) = raw(
        &client,
        "PUT",
        &url,
        Some(json!({"errors": [{"verb": "get", "status": 503, "rate": 1.0}]})),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        body["message"],
        "invalid fault configuration: unsupported status 503: expected 500, 429 or 409"
    );
    let (code, _, body) = raw(&client, "PUT", &url, Some(json!({"latency": "5ms"}))).await;
    assert_eq!(code, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `latency`"),
        "{body}"
    );
    assert_eq!(env.server.faults().config().seed, Some(7));
    // DELETE switches everything off and resets the counters.
    let (code, _, body) = raw(&client, "DELETE", &url, None).await;
    assert_eq!(code, 200);
    assert_eq!(body["config"]["errors"], json!([]));
    assert_eq!(body["counters"]["internalErrors"], 0);
    assert!(!env.server.faults().is_active());
    assert!(api.list(&ListParams::default()).await.is_ok());
}
