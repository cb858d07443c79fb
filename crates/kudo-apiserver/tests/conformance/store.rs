//! The in-process Store API and durable storage.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use kudo_apiserver::{ApiServer, Config, EventType};
use serde_json::json;

#[tokio::test]
async fn store_api_semantics_match_http() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let store = server.store().clone();
    let (replay, mut rx) = store.subscribe(store.current_rv()).unwrap();
    assert!(replay.is_empty());
    let created = store
        .create_obj(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
        .unwrap();
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(created["spec"]["replicas"], 1, "defaulted like the real server");
    let ev = rx.recv().await.unwrap();
    assert_eq!(ev.type_, EventType::Added);
    assert_eq!(ev.key.name, "d");

    // A simulated controller writes status; generation stays.
    let mut with_status = created.clone();
    with_status["status"] = json!({"readyReplicas": 1});
    let s = store.update_status_obj(with_status).unwrap();
    assert_eq!(s["status"]["readyReplicas"], 1);
    assert_eq!(s["metadata"]["generation"], 1);
    assert_eq!(rx.recv().await.unwrap().type_, EventType::Modified);

    // Race-free status patch, as a simulated kubelet/controller would do it.
    let p = store
        .merge_patch_obj(
            "apps/v1",
            "Deployment",
            "default",
            "d",
            kudo_apiserver::Subresource::Status,
            &json!({"status": {"availableReplicas": 1}, "spec": {"replicas": 9}}),
        )
        .unwrap();
    assert_eq!(p["status"]["availableReplicas"], 1);
    assert_eq!(p["status"]["readyReplicas"], 1);
    assert_eq!(p["spec"]["replicas"], 1, "spec untouched through /status");
    assert_eq!(rx.recv().await.unwrap().type_, EventType::Modified);

    // Stale update conflicts.
    let e = store.update_obj(created.clone()).unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));

    // Visible over HTTP too.
    let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    let api: kube::Api<k8s_openapi::api::apps::v1::Deployment> = kube::Api::namespaced(client, "default");
    let d = api.get("d").await.unwrap();
    assert_eq!(d.status.unwrap().ready_replicas, Some(1));

    let listed = store.list_objs("apps/v1", "Deployment", Some("default")).unwrap();
    assert_eq!(listed.len(), 1);
    store.delete_obj("apps/v1", "Deployment", "default", "d").unwrap();
    assert!(
        store
            .get_obj("apps/v1", "Deployment", "default", "d")
            .unwrap()
            .is_none()
    );
    assert_eq!(rx.recv().await.unwrap().type_, EventType::Deleted);
    assert_eq!(store.resolve("nope/v1", "Thing").unwrap_err().code, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn file_backend_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let server = ApiServer::start(config.clone()).await.unwrap();
    let store = server.store();
    store
        .create_obj(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep", "namespace": "default"}, "data": {"x": "1"}}))
        .unwrap();
    store
        .create_obj(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gone", "namespace": "default"}}))
        .unwrap();
    store.delete_obj("v1", "ConfigMap", "default", "gone").unwrap();
    let rv = store.current_rv();
    server.shutdown().await;

    let server = ApiServer::start(config).await.unwrap();
    let store = server.store();
    let keep = store
        .get_obj("v1", "ConfigMap", "default", "keep")
        .unwrap()
        .unwrap();
    assert_eq!(keep["data"]["x"], "1");
    assert!(
        store
            .get_obj("v1", "ConfigMap", "default", "gone")
            .unwrap()
            .is_none()
    );
    assert_eq!(store.current_rv(), rv, "resourceVersion counter restored");
    server.shutdown().await;
}

/// Kills the server process even when an assertion fails first.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_server(dir: &std::path::Path) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kudo-apiserver"))
        .arg("--data-dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .expect("ready line")
        .to_string();
    (Server(child), url)
}

#[tokio::test]
async fn data_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, url) = spawn_server(dir.path());
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "default");
    for i in 0..20 {
        let cm = serde_json::from_value(
            json!({"metadata": {"name": format!("cm{i}")}, "data": {"i": i.to_string()}}),
        )
        .unwrap();
        api.create(&kube::api::PostParams::default(), &cm).await.unwrap();
    }
    let last_rv = api.get("cm19").await.unwrap().metadata.resource_version.unwrap();
    // SIGKILL: no chance to flush anything at exit.
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let (_child, url) = spawn_server(dir.path());
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "default");
    let all = api.list(&Default::default()).await.unwrap();
    let ours = all
        .items
        .iter()
        .filter(|c| c.metadata.name.as_deref() != Some("kube-root-ca.crt"))
        .count();
    assert_eq!(ours, 20);
    let cm19 = api.get("cm19").await.unwrap();
    assert_eq!(cm19.metadata.resource_version.unwrap(), last_rv);
    assert_eq!(cm19.data.unwrap()["i"], "19");
    // New writes continue after the restored resourceVersion.
    let cm = serde_json::from_value(json!({"metadata": {"name": "after"}})).unwrap();
    let after = api.create(&kube::api::PostParams::default(), &cm).await.unwrap();
    let rv: u64 = after.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv > last_rv.parse::<u64>().unwrap());
}
