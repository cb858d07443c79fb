//! End-to-end tests: our embedded API server, the simulator, and the real `kubectl`.
//!
//! Each test starts its own server on an ephemeral loopback port and its own simulator, and
//! drives them with kubectl (isolated HOME and kubeconfig) and kube-rs, checking what the real
//! controllers and kubelet would have produced.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use kudo_apiserver::{ApiServer, Config, RunningServer};
use kudo_sim::{ManualClock, SimConfig, SimHandle};

mod containers;
mod endpointslices;
mod faults;
mod loadbalancers;
mod managers;

struct Env {
    server: Option<RunningServer>,
    sim: Option<SimHandle>,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    client: kube::Client,
}

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Env {
    async fn start(cfg: SimConfig) -> Env {
        // `RUST_LOG=kudo_sim=debug` shows the simulator's warnings while debugging a test.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let server = ApiServer::start(Config::default()).await.expect("server starts");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let url: http::Uri = server.url().parse().expect("url");
        let client = kube::Client::try_from(kube::Config::new(url)).expect("client");
        let sim = kudo_sim::spawn(client.clone(), cfg);
        Env {
            server: Some(server),
            sim: Some(sim),
            dir,
            kubeconfig,
            client,
        }
    }

    async fn kubectl(&self, args: &[&str]) -> Out {
        self.kubectl_in(args, None).await
    }

    async fn kubectl_in(&self, args: &[&str], stdin: Option<&str>) -> Out {
        use tokio::io::AsyncWriteExt;
        let mut cmd = tokio::process::Command::new("kubectl");
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("kubectl starts");
        let mut input = child.stdin.take().expect("stdin");
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).await.expect("write stdin");
        }
        drop(input);
        let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .expect("kubectl finished within 120s")
            .expect("kubectl output");
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn ok(&self, args: &[&str]) -> String {
        let o = self.kubectl(args).await;
        assert!(
            o.ok,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            o.stdout, o.stderr
        );
        o.stdout
    }

    /// Runs a kubectl generator (`create deployment`, `create job`…) client-side and applies
    /// its output: our server does not accept the protobuf request bodies kubectl sends for
    /// built-in kinds when it creates them directly.
    async fn create_via_apply(&self, args: &[&str]) {
        // Flags go before any `--` so they are not taken as the container command.
        let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        let mut full: Vec<&str> = args[..split].to_vec();
        full.extend(["--dry-run=client", "-o", "yaml"]);
        full.extend(&args[split..]);
        let yaml = self.ok(&full).await;
        self.apply(&yaml).await;
    }

    async fn apply(&self, yaml: &str) {
        let o = self.kubectl_in(&["apply", "-f", "-"], Some(yaml)).await;
        assert!(o.ok, "apply failed: {}\n{}", o.stdout, o.stderr);
    }

    async fn stop(mut self) {
        if let Some(sim) = self.sim.take() {
            sim.shutdown().await.expect("simulator stops cleanly");
        }
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
    }
}

/// Polls `f` until it returns Some, for at most 60 s.
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn pod_ready(p: &Pod) -> bool {
    p.status.as_ref().is_some_and(|s| {
        s.phase.as_deref() == Some("Running")
            && s.conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// Records pod lifecycle moments in the order a watcher saw them: "added web-0",
/// "ready web-0", "deleted web-0".
fn record_pods(client: kube::Client) -> (Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let l = log.clone();
    let task = tokio::spawn(async move {
        let api: Api<Pod> = Api::namespaced(client, "default");
        let mut seen: BTreeMap<String, (bool, bool)> = BTreeMap::new();
        let mut s = std::pin::pin!(watcher(api, watcher::Config::default()));
        while let Some(ev) = s.next().await {
            let Ok(ev) = ev else { continue };
            let push = |m: String| l.lock().expect("log").push(m);
            match ev {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let entry = seen
                        .entry(format!("{name}/{}", p.metadata.uid.clone().unwrap_or_default()))
                        .or_default();
                    if !entry.0 {
                        entry.0 = true;
                        push(format!("added {name}"));
                    }
                    if !entry.1 && pod_ready(&p) {
                        entry.1 = true;
                        push(format!("ready {name}"));
                    }
                }
                watcher::Event::Delete(p) => {
                    push(format!("deleted {}", p.metadata.name.clone().unwrap_or_default()))
                }
                _ => {}
            }
        }
    });
    (log, task)
}

fn position(log: &[String], what: &str) -> usize {
    log.iter()
        .position(|l| l == what)
        .unwrap_or_else(|| panic!("{what:?} not in {log:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_are_created_ready() {
    let env = Env::start(SimConfig {
        nodes: 2,
        ..Default::default()
    })
    .await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    eventually("two ready nodes", || async {
        let list = nodes.list(&ListParams::default()).await.ok()?;
        let ready = list
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        (ready == 2).then_some(())
    })
    .await;
    let out = env
        .ok(&[
            "get",
            "nodes",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}"#,
        ])
        .await;
    assert_eq!(out.trim(), "kudo-node-0=True kudo-node-1=True");
    let cap = env
        .ok(&[
            "get",
            "node",
            "kudo-node-0",
            "-o",
            "jsonpath={.status.capacity.pods}",
        ])
        .await;
    assert_eq!(cap, "110");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_rolls_out_updates_and_is_garbage_collected() {
    let env = Env::start(SimConfig {
        nodes: 2,
        ..Default::default()
    })
    .await;
    env.create_via_apply(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=3",
    ])
    .await;
    let out = env
        .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    assert!(
        out.contains("deployment \"web\" successfully rolled out"),
        "{out}"
    );
    let out = env
        .ok(&[
            "wait",
            "--for=condition=Available",
            "deployment/web",
            "--timeout=30s",
        ])
        .await;
    assert!(out.contains("condition met"), "{out}");

    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("pods");
    assert_eq!(list.items.len(), 3);
    let mut nodes = std::collections::BTreeSet::new();
    for p in &list.items {
        assert!(pod_ready(p), "pod not ready: {:?}", p.status);
        let st = p.status.as_ref().expect("status");
        assert!(
            st.pod_ip.as_deref().is_some_and(|ip| ip.starts_with("10.244.")),
            "{st:?}"
        );
        let cs = &st.container_statuses.as_ref().expect("container statuses")[0];
        assert!(cs.ready && cs.started == Some(true) && cs.restart_count == 0);
        assert!(cs.state.as_ref().and_then(|s| s.running.as_ref()).is_some());
        assert!(
            cs.container_id
                .as_deref()
                .is_some_and(|c| c.starts_with("containerd://"))
        );
        let owner = &p.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(owner.kind, "ReplicaSet");
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.block_owner_deletion, Some(true));
        nodes.insert(
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .expect("scheduled"),
        );
    }
    assert_eq!(nodes.len(), 2, "round-robin over both nodes");

    let d: Api<Deployment> = Api::namespaced(env.client.clone(), "default");
    let dep = d.get("web").await.expect("deployment");
    let st = dep.status.expect("status");
    assert_eq!(
        (
            st.replicas,
            st.updated_replicas,
            st.ready_replicas,
            st.available_replicas
        ),
        (Some(3), Some(3), Some(3), Some(3))
    );
    assert_eq!(st.observed_generation, dep.metadata.generation);
    let progressing = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_.as_deref() == Some("Progressing"))
        .expect("Progressing condition");
    assert_eq!(progressing.reason.as_deref(), Some("NewReplicaSetAvailable"));

    // Converged: nothing is rewritten while nothing changes (no write loops).
    let versions = |d: Deployment, r: Vec<ReplicaSet>, p: Vec<Pod>| {
        let mut v = vec![d.metadata.resource_version.unwrap_or_default()];
        v.extend(
            r.into_iter()
                .map(|x| x.metadata.resource_version.unwrap_or_default()),
        );
        v.extend(
            p.into_iter()
                .map(|x| x.metadata.resource_version.unwrap_or_default()),
        );
        v
    };
    let rs_api: Api<ReplicaSet> = Api::namespaced(env.client.clone(), "default");
    let before = versions(
        d.get("web").await.expect("d"),
        rs_api.list(&ListParams::default()).await.expect("rs").items,
        pods.list(&ListParams::default()).await.expect("pods").items,
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = versions(
        d.get("web").await.expect("d"),
        rs_api.list(&ListParams::default()).await.expect("rs").items,
        pods.list(&ListParams::default()).await.expect("pods").items,
    );
    assert_eq!(before, after, "objects keep changing after convergence");

    // An image change rolls every pod onto a new ReplicaSet.
    env.ok(&["set", "image", "deployment/web", "nginx=nginx:1.28"])
        .await;
    let out = env
        .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let rs: Api<ReplicaSet> = Api::namespaced(env.client.clone(), "default");
    let mut sets = rs.list(&ListParams::default()).await.expect("rs").items;
    sets.sort_by_key(|r| {
        r.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("deployment.kubernetes.io/revision").cloned())
            .unwrap_or_default()
    });
    assert_eq!(sets.len(), 2);
    assert_eq!(sets[0].spec.replicas, Some(0), "old ReplicaSet scaled to 0");
    assert_eq!(sets[1].spec.replicas, Some(3));
    let hash = sets[1]
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-template-hash"))
        .expect("hash label");
    assert_eq!(
        sets[1].metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    let list = eventually("old pods gone", || async {
        let l = pods.list(&ListParams::default().labels("app=web")).await.ok()?;
        (l.items.len() == 3).then_some(l)
    })
    .await;
    for p in &list.items {
        assert_eq!(
            p.spec.as_ref().expect("spec").containers[0].image.as_deref(),
            Some("nginx:1.28")
        );
    }
    let history = env.ok(&["rollout", "history", "deployment/web"]).await;
    assert!(history.contains('1') && history.contains('2'), "{history}");
    let events = env
        .ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=web",
            "-o",
            "jsonpath={.items[*].reason}",
        ])
        .await;
    assert!(events.contains("ScalingReplicaSet"), "{events}");

    // Deleting the Deployment garbage-collects ReplicaSets and Pods (server GC + kubelet).
    env.ok(&["delete", "deployment", "web", "--wait=false"]).await;
    eventually("replicasets and pods collected", || async {
        let r = rs.list(&ListParams::default()).await.ok()?;
        let p = pods.list(&ListParams::default().labels("app=web")).await.ok()?;
        (r.items.is_empty() && p.items.is_empty()).then_some(())
    })
    .await;
    env.stop().await;
}

const STS: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_ordered_scaling_and_rolling_update() {
    let env = Env::start(SimConfig::default()).await;
    let (log, recorder) = record_pods(env.client.clone());
    // Let the recorder's initial list finish so it sees every pod appear.
    tokio::time::sleep(Duration::from_millis(300)).await;
    env.apply(STS).await;
    let out = env
        .ok(&["rollout", "status", "statefulset/web", "--timeout=60s"])
        .await;
    // The server defaults rollingUpdate.partition to 0, as kube-apiserver does, so kubectl
    // reports the partitioned form.
    assert!(
        out.contains("partitioned roll out complete: 3 new pods have been updated"),
        "{out}"
    );
    {
        let log = log.lock().expect("log").clone();
        // OrderedReady: each pod is created only after its predecessor is ready.
        assert!(
            position(&log, "ready web-0") < position(&log, "added web-1"),
            "{log:?}"
        );
        assert!(
            position(&log, "ready web-1") < position(&log, "added web-2"),
            "{log:?}"
        );
    }
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let p1 = pods.get("web-1").await.expect("web-1");
    let labels = p1.metadata.labels.clone().expect("labels");
    assert_eq!(
        labels
            .get("statefulset.kubernetes.io/pod-name")
            .map(String::as_str),
        Some("web-1")
    );
    assert!(
        labels
            .get("controller-revision-hash")
            .is_some_and(|h| h.starts_with("web-"))
    );
    let spec = p1.spec.expect("spec");
    assert_eq!(spec.hostname.as_deref(), Some("web-1"));
    assert_eq!(spec.subdomain.as_deref(), Some("web"));
    let claim = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "data")
        .and_then(|v| v.persistent_volume_claim.as_ref())
        .expect("claim volume");
    assert_eq!(claim.claim_name, "data-web-1");

    // Claims are bound to generated volumes.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), "default");
    let pvs: Api<PersistentVolume> = Api::all(env.client.clone());
    eventually("claims bound", || async {
        let l = pvcs.list(&ListParams::default()).await.ok()?;
        let bound = l
            .items
            .iter()
            .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
            .count();
        (bound == 3).then_some(())
    })
    .await;
    let c0 = pvcs.get("data-web-0").await.expect("pvc");
    let pv_name = format!("pvc-{}", c0.metadata.uid.clone().expect("uid"));
    assert_eq!(
        c0.spec.as_ref().and_then(|s| s.volume_name.clone()),
        Some(pv_name.clone())
    );
    let pv = eventually("pv bound", || async {
        let pv = pvs.get(&pv_name).await.ok()?;
        (pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")).then_some(pv)
    })
    .await;
    let cref = pv.spec.and_then(|s| s.claim_ref).expect("claimRef");
    assert_eq!(cref.name.as_deref(), Some("data-web-0"));

    // Scale up to 5, then down to 2: highest ordinals go first, one at a time; claims stay.
    env.ok(&["scale", "statefulset/web", "--replicas=5"]).await;
    env.ok(&["rollout", "status", "statefulset/web", "--timeout=60s"])
        .await;
    for i in 0..5 {
        assert!(pod_ready(&pods.get(&format!("web-{i}")).await.expect("pod")));
    }
    env.ok(&["scale", "statefulset/web", "--replicas=2"]).await;
    eventually("scaled down to 2", || async {
        let l = pods.list(&ListParams::default().labels("app=web")).await.ok()?;
        let mut names: Vec<String> = l.items.iter().filter_map(|p| p.metadata.name.clone()).collect();
        names.sort();
        (names == ["web-0", "web-1"]).then_some(())
    })
    .await;
    {
        let log = log.lock().expect("log").clone();
        assert!(
            position(&log, "deleted web-4") < position(&log, "deleted web-3"),
            "{log:?}"
        );
        assert!(
            position(&log, "deleted web-3") < position(&log, "deleted web-2"),
            "{log:?}"
        );
    }
    let claims = pvcs.list(&ListParams::default()).await.expect("pvcs");
    assert_eq!(claims.items.len(), 5, "claims are retained on scale down");

    // Image change: pods are replaced from the highest ordinal down.
    log.lock().expect("log").clear();
    env.ok(&["set", "image", "statefulset/web", "app=nginx:1.28"])
        .await;
    let out = env
        .ok(&["rollout", "status", "statefulset/web", "--timeout=60s"])
        .await;
    assert!(
        out.contains("partitioned roll out complete: 2 new pods have been updated"),
        "{out}"
    );
    let sts: Api<StatefulSet> = Api::namespaced(env.client.clone(), "default");
    let st = sts.get("web").await.expect("sts").status.expect("status");
    assert_eq!(st.current_revision, st.update_revision);
    assert_eq!(
        (st.replicas, st.ready_replicas, st.updated_replicas),
        (2, Some(2), Some(2))
    );
    for i in 0..2 {
        let p = pods.get(&format!("web-{i}")).await.expect("pod");
        assert_eq!(
            p.spec.expect("spec").containers[0].image.as_deref(),
            Some("nginx:1.28")
        );
        assert_eq!(
            p.metadata.labels.expect("labels").get("controller-revision-hash"),
            st.update_revision.as_ref()
        );
    }
    {
        let log = log.lock().expect("log").clone();
        assert!(
            position(&log, "deleted web-1") < position(&log, "deleted web-0"),
            "{log:?}"
        );
    }

    // A partition keeps lower ordinals on the old revision.
    env.ok(&[
        "patch",
        "statefulset/web",
        "-p",
        r#"{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":1}}}}"#,
    ])
    .await;
    env.ok(&["set", "image", "statefulset/web", "app=nginx:1.29"])
        .await;
    let out = env
        .ok(&["rollout", "status", "statefulset/web", "--timeout=60s"])
        .await;
    assert!(
        out.contains("partitioned roll out complete: 1 new pods have been updated"),
        "{out}"
    );
    let img = |p: Pod| {
        p.spec.expect("spec").containers[0]
            .image
            .clone()
            .unwrap_or_default()
    };
    assert_eq!(img(pods.get("web-1").await.expect("pod")), "nginx:1.29");
    assert_eq!(img(pods.get("web-0").await.expect("pod")), "nginx:1.28");
    recorder.abort();
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_complete_or_fail() {
    let env = Env::start(SimConfig::default()).await;
    env.create_via_apply(&["create", "job", "hello", "--image=busybox", "--", "echo", "hi"])
        .await;
    let out = env
        .ok(&["wait", "--for=condition=Complete", "job/hello", "--timeout=60s"])
        .await;
    assert!(out.contains("condition met"), "{out}");
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let st = jobs.get("hello").await.expect("job").status.expect("status");
    assert_eq!(st.succeeded, Some(1));
    assert!(st.start_time.is_some() && st.completion_time.is_some());
    let types: Vec<String> = st.conditions.iter().flatten().map(|c| c.type_.clone()).collect();
    assert!(
        types.contains(&"SuccessCriteriaMet".to_string()) && types.contains(&"Complete".to_string()),
        "{types:?}"
    );
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let p = pods
        .list(&ListParams::default().labels("job-name=hello"))
        .await
        .expect("pods");
    assert_eq!(p.items.len(), 1);
    let ps = p.items[0].status.as_ref().expect("status");
    assert_eq!(ps.phase.as_deref(), Some("Succeeded"));
    let term = ps.container_statuses.as_ref().expect("cs")[0]
        .state
        .as_ref()
        .and_then(|s| s.terminated.clone())
        .expect("terminated");
    assert_eq!(term.exit_code, 0);

    // The failure convention: "fail" in the command makes containers exit 1.
    env.apply(
        r#"
apiVersion: batch/v1
kind: Job
metadata: {name: broken}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: ["sh", "-c", "fail"]
"#,
    )
    .await;
    let out = env
        .ok(&["wait", "--for=condition=Failed", "job/broken", "--timeout=60s"])
        .await;
    assert!(out.contains("condition met"), "{out}");
    let st = jobs.get("broken").await.expect("job").status.expect("status");
    assert_eq!(st.failed, Some(2), "backoffLimit 1 allows one retry");
    let failed = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Failed")
        .expect("Failed");
    assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert!(st.conditions.iter().flatten().any(|c| c.type_ == "FailureTarget"));
    let p = pods
        .list(&ListParams::default().labels("job-name=broken"))
        .await
        .expect("pods");
    for pod in &p.items {
        let ps = pod.status.as_ref().expect("status");
        assert_eq!(ps.phase.as_deref(), Some("Failed"));
        let code = ps.container_statuses.as_ref().expect("cs")[0]
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code);
        assert_eq!(code, Some(1));
    }

    // Init containers run in order before the main container; parallel completions.
    env.apply(
        r#"
apiVersion: batch/v1
kind: Job
metadata: {name: multi}
spec:
  completions: 3
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      initContainers:
      - {name: first, image: busybox}
      - {name: second, image: busybox}
      containers:
      - {name: main, image: busybox}
"#,
    )
    .await;
    env.ok(&["wait", "--for=condition=Complete", "job/multi", "--timeout=60s"])
        .await;
    let st = jobs.get("multi").await.expect("job").status.expect("status");
    assert_eq!(st.succeeded, Some(3));
    let p = pods
        .list(&ListParams::default().labels("job-name=multi"))
        .await
        .expect("pods");
    assert_eq!(p.items.len(), 3);
    let inits = p.items[0]
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.clone())
        .expect("init statuses");
    let names: Vec<&str> = inits.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["first", "second"]);
    for s in &inits {
        let t = s
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("terminated");
        assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_deadline_exceeded() {
    let env = Env::start(SimConfig {
        delays: kudo_sim::Delays {
            running_to_ready: Duration::from_secs(3600),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    env.apply(
        r#"
apiVersion: batch/v1
kind: Job
metadata: {name: slow}
spec:
  activeDeadlineSeconds: 1
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox}]
"#,
    )
    .await;
    env.ok(&["wait", "--for=condition=Failed", "job/slow", "--timeout=60s"])
        .await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let st = jobs.get("slow").await.expect("job").status.expect("status");
    let failed = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Failed")
        .expect("Failed");
    assert_eq!(failed.reason.as_deref(), Some("DeadlineExceeded"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashing_pod_and_deletion_with_prestop() {
    let env = Env::start(SimConfig::default()).await;
    env.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  containers: [{name: main, image: "busybox:fail"}]
---
apiVersion: v1
kind: Pod
metadata:
  name: graceful
  # Our server removes pods at once on delete (no graceful deletion), so a finalizer keeps the
  # pod visible with a deletionTimestamp, which is what the kubelet reacts to.
  finalizers: [kudo.dev/test-hold]
spec:
  containers:
  - name: main
    image: nginx
    lifecycle:
      preStop:
        exec: {command: ["sh", "-c", "sleep 1"]}
"#,
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let crash = eventually("crash loop", || async {
        let p = pods.get("crash").await.ok()?;
        let cs = p.status.as_ref()?.container_statuses.as_ref()?.first()?.clone();
        (cs.state.as_ref()?.waiting.as_ref()?.reason.as_deref() == Some("CrashLoopBackOff")).then_some(cs)
    })
    .await;
    assert_eq!(crash.restart_count, 1);
    assert!(!crash.ready);
    assert_eq!(
        crash.last_state.and_then(|s| s.terminated).map(|t| t.exit_code),
        Some(1)
    );
    eventually("graceful ready", || async {
        pod_ready(&pods.get("graceful").await.ok()?).then_some(())
    })
    .await;
    env.ok(&["delete", "pod", "graceful", "--wait=false"]).await;
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let reasons = eventually("killing events", || async {
        let reasons: Vec<String> = events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("graceful"))
            .filter_map(|e| e.reason)
            .collect();
        reasons.iter().any(|r| r == "Killing").then_some(reasons)
    })
    .await;
    for r in [
        "Scheduled",
        "Pulled",
        "Created",
        "Started",
        "PreStopHook",
        "Killing",
    ] {
        assert!(reasons.iter().any(|x| x == r), "missing event {r}: {reasons:?}");
    }
    // The kubelet asked for removal (grace 0); only the test's finalizer holds the pod now.
    env.ok(&[
        "patch",
        "pod",
        "graceful",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .await;
    eventually("pod removed", || async {
        pods.get_opt("graceful").await.ok()?.is_none().then_some(())
    })
    .await;
    let describe = env.ok(&["describe", "pod", "crash"]).await;
    assert!(describe.contains("CrashLoopBackOff"), "{describe}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_runs_one_pod_per_node() {
    let env = Env::start(SimConfig {
        nodes: 3,
        ..Default::default()
    })
    .await;
    env.apply(
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  updateStrategy: {type: RollingUpdate}
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: "agent:1"}]
"#,
    )
    .await;
    let out = env
        .ok(&["rollout", "status", "daemonset/agent", "--timeout=60s"])
        .await;
    assert!(
        out.contains("daemon set \"agent\" successfully rolled out"),
        "{out}"
    );
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let l = pods
        .list(&ListParams::default().labels("app=agent"))
        .await
        .expect("pods");
    let mut nodes: Vec<String> = l
        .items
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    nodes.sort();
    assert_eq!(nodes, ["kudo-node-0", "kudo-node-1", "kudo-node-2"]);
    env.ok(&["set", "image", "daemonset/agent", "agent=agent:2"])
        .await;
    env.ok(&["rollout", "status", "daemonset/agent", "--timeout=60s"])
        .await;
    let l = eventually("three updated pods", || async {
        let l = pods.list(&ListParams::default().labels("app=agent")).await.ok()?;
        (l.items.len() == 3
            && l.items.iter().all(|p| {
                p.spec
                    .as_ref()
                    .is_some_and(|s| s.containers[0].image.as_deref() == Some("agent:2"))
            }))
        .then_some(l)
    })
    .await;
    assert_eq!(l.items.len(), 3);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjob_follows_the_clock() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let clock = Arc::new(ManualClock::new(now));
    let env = Env::start(SimConfig {
        clock: clock.clone(),
        resync: Duration::from_millis(100),
        ..Default::default()
    })
    .await;
    env.apply(
        r#"
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: main, image: busybox}]
"#,
    )
    .await;
    // Next 5-minute boundary after now (plus a minute of margin past the creation time).
    let next = ((now / 60_000) / 5 + 1) * 5 * 60_000;
    let expected_job = format!("tick-{}", next / 60_000);
    clock.set(next + 30_000);
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    eventually("scheduled job", || async {
        jobs.get_opt(&expected_job).await.ok()?
    })
    .await;
    env.ok(&[
        "wait",
        "--for=condition=Complete",
        &format!("job/{expected_job}"),
        "--timeout=60s",
    ])
    .await;
    let last = env
        .ok(&[
            "get",
            "cronjob",
            "tick",
            "-o",
            "jsonpath={.status.lastScheduleTime}",
        ])
        .await;
    let secs = next / 1000;
    let expected = kudo_sim_time(secs);
    assert_eq!(last, expected);
    // Suspended: no more jobs even when the clock passes another boundary.
    env.ok(&["patch", "cronjob/tick", "-p", r#"{"spec":{"suspend":true}}"#])
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    clock.set(next + 5 * 60_000 + 30_000);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let all = jobs.list(&ListParams::default()).await.expect("jobs");
    assert_eq!(all.items.len(), 1, "suspended cron job must not start jobs");
    env.stop().await;
}

/// RFC 3339 (UTC, seconds) through `date`, independent of the crate's own formatter.
fn kudo_sim_time(secs: i64) -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .expect("date runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_claim_is_bound() {
    let env = Env::start(SimConfig::default()).await;
    env.apply(
        r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: scratch}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 5Gi}}
"#,
    )
    .await;
    let out = env
        .ok(&[
            "wait",
            "--for=jsonpath={.status.phase}=Bound",
            "pvc/scratch",
            "--timeout=60s",
        ])
        .await;
    assert!(out.contains("condition met"), "{out}");
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), "default");
    let c = pvcs.get("scratch").await.expect("pvc");
    let uid = c.metadata.uid.clone().expect("uid");
    let spec = c.spec.expect("spec");
    assert_eq!(spec.volume_name, Some(format!("pvc-{uid}")));
    let pvs: Api<PersistentVolume> = Api::all(env.client.clone());
    let pv = pvs.get(&format!("pvc-{uid}")).await.expect("pv");
    assert_eq!(
        pv.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()),
        Some("standard")
    );
    let cap = c
        .status
        .and_then(|s| s.capacity)
        .and_then(|c| c.get("storage").cloned())
        .expect("capacity");
    assert_eq!(cap.0, "5Gi");
    // Deleting the claim releases (deletes) its dynamically provisioned volume.
    env.ok(&["delete", "pvc", "scratch", "--timeout=60s"]).await;
    let pv_name = format!("pvc-{uid}");
    eventually("volume deleted", || async {
        pvs.get_opt(&pv_name).await.ok()?.is_none().then_some(())
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_strategy_and_service_endpoints() {
    let env = Env::start(SimConfig::default()).await;
    env.apply(
        r#"
apiVersion: v1
kind: Service
metadata: {name: api}
spec:
  selector: {app: api}
  ports: [{name: http, port: 80, targetPort: web}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 2
  strategy: {type: Recreate}
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: api
        image: "api:1"
        ports: [{name: web, containerPort: 8080}]
"#,
    )
    .await;
    env.ok(&["rollout", "status", "deployment/api", "--timeout=60s"])
        .await;
    let endpoints: Api<k8s_openapi::api::core::v1::Endpoints> =
        Api::namespaced(env.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let (ips, port) = eventually("endpoints with two ready addresses", || async {
        let e = endpoints.get_opt("api").await.ok()??;
        let subset = e.subsets?.into_iter().next()?;
        let ips: Vec<String> = subset.addresses?.into_iter().map(|a| a.ip).collect();
        let port = subset.ports?.first()?.port;
        (ips.len() == 2).then_some((ips, port))
    })
    .await;
    assert_eq!(port, 8080, "named targetPort resolved through the container port");
    let pod_ips: Vec<String> = pods
        .list(&ListParams::default().labels("app=api"))
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter_map(|p| p.status?.pod_ip)
        .collect();
    for ip in &ips {
        assert!(pod_ips.contains(ip), "{ip} not a pod IP: {pod_ips:?}");
    }

    // Recreate: every old pod is gone before the first new one is created.
    let (log, recorder) = record_pods(env.client.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let old: Vec<String> = pods
        .list(&ListParams::default().labels("app=api"))
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    log.lock().expect("log").clear();
    env.ok(&["set", "image", "deployment/api", "api=api:2"]).await;
    let out = env
        .ok(&["rollout", "status", "deployment/api", "--timeout=60s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let log = log.lock().expect("log").clone();
    let first_added = log
        .iter()
        .position(|l| l.starts_with("added "))
        .expect("new pods were added");
    for name in &old {
        assert!(
            position(&log, &format!("deleted {name}")) < first_added,
            "{log:?}"
        );
    }
    recorder.abort();
    env.stop().await;
}

/// The state of container 0 of pod `name` once `pred` holds.
async fn pod_when(pods: &Api<Pod>, name: &str, pred: impl Fn(&Pod) -> bool) -> Pod {
    eventually(name, || async {
        let p = pods.get(name).await.ok()?;
        pred(&p).then_some(p)
    })
    .await
}

fn phase(p: &Pod) -> &str {
    p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_decide_container_states_logs_and_exec() {
    use tokio::io::AsyncReadExt;
    let cfg = SimConfig::default();
    let runtime = cfg.runtime.clone();
    let env = Env::start(cfg).await;
    env.server
        .as_ref()
        .unwrap()
        .set_pod_runtime(std::sync::Arc::new(runtime));
    env.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: exits-never}
spec:
  restartPolicy: Never
  containers: [{name: main, image: busybox, command: ["sh", "-c", "echo bye; exit 7"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: exits-always}
spec:
  containers: [{name: main, image: busybox, command: ["/bin/false"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: done-never}
spec:
  restartPolicy: Never
  containers: [{name: main, image: busybox, command: ["echo", "fine"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: server}
spec:
  volumes: [{name: v, emptyDir: {}}]
  containers:
  - name: main
    image: nginx
    volumeMounts: [{name: v, mountPath: /v}]
"#,
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let p = pod_when(&pods, "exits-never", |p| phase(p) == "Failed").await;
    let st = &p.status.unwrap().container_statuses.unwrap()[0];
    let t = st.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!((t.exit_code, t.reason.as_deref()), (7, Some("Error")));
    assert_eq!(
        pods.logs("exits-never", &Default::default()).await.unwrap(),
        "bye\n"
    );

    let p = pod_when(&pods, "exits-always", |p| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|c| c[0].restart_count == 1)
    })
    .await;
    let st = &p.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(
        st.state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("CrashLoopBackOff")
    );
    assert_eq!(
        st.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        1
    );

    let p = pod_when(&pods, "done-never", |p| phase(p) == "Succeeded").await;
    let st = &p.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(
        st.state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code,
        0
    );

    // The image's entrypoint of a long-running container: kudo-sim stands in for nginx, which
    // runs and is ready, and kube-rs's exec (v5.channel.k8s.io) reaches its filesystem.
    pod_when(&pods, "server", pod_ready).await;
    let run = |cmd: Vec<&'static str>| {
        let pods = pods.clone();
        let ap = kube::api::AttachParams::default().container("main");
        async move {
            let mut at = pods.exec("server", cmd, &ap).await.expect("exec starts");
            let mut out = String::new();
            at.stdout().unwrap().read_to_string(&mut out).await.unwrap();
            let status = at.take_status().unwrap().await.unwrap();
            (
                out,
                status.status.unwrap_or_default(),
                status.message.unwrap_or_default(),
            )
        }
    };
    let (_, s, _) = run(vec!["sh", "-c", "mkdir -p /v/a && echo 12345 > /v/a/f"]).await;
    assert_eq!(s, "Success");
    let (out, s, _) = run(vec!["stat", "-c", "%s", "/v/a/f"]).await;
    assert_eq!((out.as_str(), s.as_str()), ("6\n", "Success"));
    let (_, s, m) = run(vec!["cat", "/v/missing"]).await;
    assert_eq!(s, "Failure");
    assert!(m.contains("exit code 1"), "{m}");
    // a completed pod cannot be exec'ed into, as on a real cluster
    let e = pods
        .exec("done-never", vec!["true"], &kube::api::AttachParams::default())
        .await
        .err()
        .expect("exec into a completed pod fails");
    assert!(e.to_string().contains("completed pod"), "{e}");
    env.stop().await;
}
