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
    spawn_server_with(dir, &[])
}

fn spawn_server_with(dir: &std::path::Path, extra: &[&str]) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kudo-apiserver"))
        .arg("--data-dir")
        .arg(dir)
        .args(extra)
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

/// One acknowledged create: name, resourceVersion and the data sent.
type Acked = (String, String, std::collections::BTreeMap<String, String>);

/// The durability test: several clients create ConfigMaps as fast as they can, every create answered
/// 201 is recorded, the server process is SIGKILLed in the middle of the stream, restarted on the same
/// directory, and every recorded object must be there with its content and resourceVersion.
///
/// Power loss itself cannot be simulated here (a test cannot drop the kernel's page cache for one
/// file or cut the machine's power), so this checks the parts a test can reach: the log is complete up
/// to every acknowledged record, the torn record of a write cut by the kill is tolerated at load, and
/// the server starts. What makes `--data-dir-sync always` survive power loss as well is that the 201
/// is only sent after `fdatasync` of the log covered the record (see `FileBackend`).
async fn acknowledged_writes_survive_kill_during_writes(sync: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, url) = spawn_server_with(dir.path(), &["--data-dir-sync", sync]);
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let acked: std::sync::Arc<std::sync::Mutex<Vec<Acked>>> = Default::default();
    let mut tasks = Vec::new();
    for t in 0..6 {
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(client.clone(), "default");
        let acked = acked.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0.. {
                // Multi-byte characters, so that a record cut by the kill may end inside one.
                let data: std::collections::BTreeMap<String, String> = [
                    ("task".to_string(), t.to_string()),
                    ("i".to_string(), i.to_string()),
                    ("pad".to_string(), "é€😀".repeat(40 + i % 50)),
                ]
                .into();
                let cm =
                    serde_json::from_value(json!({"metadata": {"name": format!("t{t}-{i}")}, "data": data}))
                        .unwrap();
                match api.create(&kube::api::PostParams::default(), &cm).await {
                    Ok(created) => {
                        let rv = created.metadata.resource_version.unwrap();
                        acked.lock().unwrap().push((format!("t{t}-{i}"), rv, data));
                    }
                    // The server is gone: stop.
                    Err(_) => return,
                }
            }
        }));
    }
    // Kill in the middle of the stream, once enough writes were acknowledged.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while acked.lock().unwrap().len() < 300 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.0.kill().unwrap(); // SIGKILL
    child.0.wait().unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    assert!(
        acked.len() >= 300,
        "only {} writes acknowledged in 30 s",
        acked.len()
    );

    let (_child, url) = spawn_server_with(dir.path(), &["--data-dir-sync", sync]);
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "default");
    let stored: std::collections::HashMap<String, k8s_openapi::api::core::v1::ConfigMap> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| (c.metadata.name.clone().unwrap(), c))
        .collect();
    let mut max_rv = 0u64;
    for (name, rv, data) in &acked {
        let cm = stored
            .get(name)
            .unwrap_or_else(|| panic!("acknowledged {name} (rv {rv}) lost after SIGKILL ({sync})"));
        assert_eq!(cm.metadata.resource_version.as_ref(), Some(rv), "{name}");
        assert_eq!(cm.data.as_ref(), Some(data), "{name}");
        max_rv = max_rv.max(rv.parse().unwrap());
    }
    // Writes continue after every acknowledged resourceVersion.
    let cm = serde_json::from_value(json!({"metadata": {"name": "after"}})).unwrap();
    let after = api.create(&kube::api::PostParams::default(), &cm).await.unwrap();
    let rv: u64 = after.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv > max_rv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_during_writes_with_fsync() {
    acknowledged_writes_survive_kill_during_writes("always").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_during_writes_without_fsync() {
    acknowledged_writes_survive_kill_during_writes("never").await;
}

/// Writes `records` as the data directory's log, then the given tail bytes.
fn write_log(dir: &std::path::Path, records: &[serde_json::Value], tail: &[u8]) {
    let mut bytes = Vec::new();
    for r in records {
        bytes.extend_from_slice(r.to_string().as_bytes());
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(tail);
    std::fs::write(dir.join("objects.jsonl"), bytes).unwrap();
}

fn cm_record(name: &str, rv: u64) -> serde_json::Value {
    json!({"op": "put", "k": ["", "configmaps", "default", name], "rv": rv,
        "o": {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": name, "namespace": "default", "resourceVersion": rv.to_string()},
              "data": {"x": "é"}}})
}

#[tokio::test]
async fn torn_final_record_is_dropped_at_load() {
    let dir = tempfile::tempdir().unwrap();
    // The last record was cut inside the two bytes of "é", with no newline: invalid UTF-8 too.
    let torn = cm_record("torn", 3).to_string();
    let cut = torn.find('é').unwrap() + 1;
    write_log(
        dir.path(),
        &[cm_record("a", 1), cm_record("b", 2)],
        &torn.as_bytes()[..cut],
    );
    let (_child, url) = spawn_server(dir.path());
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "default");
    assert_eq!(api.get("b").await.unwrap().data.unwrap()["x"], "é");
    assert!(api.get_opt("torn").await.unwrap().is_none());
    // The torn bytes were compacted away: new records do not follow garbage.
    let cm = serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap();
    api.create(&kube::api::PostParams::default(), &cm).await.unwrap();
    let log = std::fs::read_to_string(dir.path().join("objects.jsonl")).unwrap();
    for line in log.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
}

#[tokio::test]
async fn corrupt_record_before_the_end_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    write_log(
        dir.path(),
        &[cm_record("a", 1)],
        format!("{{\"op\": \"put\", garbage\n{}\n", cm_record("b", 2)).as_bytes(),
    );
    let err = ApiServer::start(Config {
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    })
    .await
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("objects.jsonl:2"), "{msg}");
    assert!(msg.contains("would be lost"), "{msg}");
    // The log is left as it was, for repair.
    assert!(
        std::fs::read_to_string(dir.path().join("objects.jsonl"))
            .unwrap()
            .contains("garbage")
    );
}
