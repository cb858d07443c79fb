//! Built-in kind behaviour added on top of plain CRUD: protobuf bodies from kubectl's typed
//! generators, graceful pod deletion, defaulting, `pods/binding`, and kubectl's table columns.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::require_kubectl;
use crate::util::Env;

fn get_json(env: &Env, args: &[&str]) -> Value {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&env.ok(&a)).expect("kubectl prints JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_generators_send_protobuf() {
    require_kubectl!();
    let env = Env::start().await;
    env.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=3",
        "--port=80",
    ]);
    let d = get_json(&env, &["deployment", "web"]);
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["spec"]["selector"], json!({"matchLabels": {"app": "web"}}));
    assert_eq!(d["spec"]["template"]["metadata"]["labels"], json!({"app": "web"}));
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["name"], "nginx");
    assert_eq!(c["image"], "nginx:1.27");
    assert_eq!(c["ports"], json!([{"containerPort": 80, "protocol": "TCP"}]));
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    // The protobuf body carries an empty strategy; defaulting must still fill it.
    assert_eq!(
        d["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert!(
        d["spec"]["template"]["metadata"]
            .get("creationTimestamp")
            .is_none_or(Value::is_null)
    );

    env.ok(&[
        "create",
        "job",
        "once",
        "--image=busybox",
        "--",
        "echo",
        "hi",
        "there",
    ]);
    let j = get_json(&env, &["job", "once"]);
    let c = &j["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["command"], json!(["echo", "hi", "there"]));
    assert_eq!(c["image"], "busybox");
    assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "Never");
    assert_eq!(j["spec"]["backoffLimit"], 6);

    env.ok(&[
        "create",
        "cronjob",
        "tick",
        "--image=busybox",
        "--schedule=*/5 * * * *",
        "--",
        "date",
    ]);
    let cj = get_json(&env, &["cronjob", "tick"]);
    assert_eq!(cj["spec"]["schedule"], "*/5 * * * *");
    assert_eq!(cj["spec"]["concurrencyPolicy"], "Allow");
    let pod = &cj["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "OnFailure");
    assert_eq!(pod["containers"][0]["command"], json!(["date"]));

    env.ok(&["create", "service", "clusterip", "api", "--tcp=5678:8080"]);
    let s = get_json(&env, &["service", "api"]);
    assert_eq!(s["spec"]["type"], "ClusterIP");
    assert_eq!(s["spec"]["selector"], json!({"app": "api"}));
    assert_eq!(
        s["spec"]["ports"],
        json!([{"name": "5678-8080", "port": 5678, "protocol": "TCP", "targetPort": 8080}])
    );

    env.ok(&[
        "create",
        "role",
        "reader",
        "--verb=get,list",
        "--resource=pods,configmaps",
    ]);
    let r = get_json(&env, &["role", "reader"]);
    assert_eq!(r["rules"][0]["verbs"], json!(["get", "list"]));
    assert_eq!(r["rules"][0]["resources"], json!(["pods", "configmaps"]));

    env.ok(&[
        "create",
        "rolebinding",
        "rb",
        "--role=reader",
        "--user=bob",
        "--serviceaccount=default:robot",
    ]);
    let rb = get_json(&env, &["rolebinding", "rb"]);
    assert_eq!(
        rb["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"})
    );
    assert_eq!(
        rb["subjects"][0],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"})
    );
    assert_eq!(
        rb["subjects"][1],
        json!({"kind": "ServiceAccount", "name": "robot", "namespace": "default"})
    );

    env.ok(&[
        "create",
        "clusterrole",
        "nodes-ro",
        "--verb=get",
        "--resource=nodes",
    ]);
    env.ok(&[
        "create",
        "clusterrolebinding",
        "crb",
        "--clusterrole=nodes-ro",
        "--group=ops",
    ]);
    let crb = get_json(&env, &["clusterrolebinding", "crb"]);
    assert_eq!(crb["subjects"][0]["kind"], "Group");
    assert_eq!(crb["roleRef"]["kind"], "ClusterRole");

    env.ok(&[
        "create",
        "poddisruptionbudget",
        "pdb",
        "--selector=app=web",
        "--min-available=50%",
    ]);
    let pdb = get_json(&env, &["pdb", "pdb"]);
    assert_eq!(pdb["spec"]["minAvailable"], "50%");
    assert_eq!(pdb["spec"]["selector"], json!({"matchLabels": {"app": "web"}}));

    env.ok(&[
        "create",
        "priorityclass",
        "high",
        "--value=1000",
        "--description=important",
    ]);
    let pc = get_json(&env, &["priorityclass", "high"]);
    assert_eq!(pc["value"], 1000);
    assert_eq!(pc["description"], "important");

    env.ok(&["create", "quota", "q", "--hard=cpu=1,memory=1G,pods=2"]);
    let q = get_json(&env, &["quota", "q"]);
    assert_eq!(
        q["spec"]["hard"],
        json!({"cpu": "1", "memory": "1G", "pods": "2"})
    );
    env.server.shutdown().await;
}

fn pod(name: &str, node: Option<&str>, grace: Option<i64>) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox:1"}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    if let Some(g) = grace {
        spec["terminationGracePeriodSeconds"] = json!(g);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("pod")
}

#[tokio::test]
async fn graceful_pod_deletion() {
    let env = Env::start().await;
    let api: Api<Pod> = Api::namespaced(env.client().await, "default");
    let pp = PostParams::default();

    // Unscheduled: removed at once.
    api.create(&pp, &pod("loose", None, None)).await.unwrap();
    api.delete("loose", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("loose").await.unwrap().is_none());

    // Bound: marked, with the pod's own grace period, until the kubelet deletes it with grace 0.
    api.create(&pp, &pod("bound", Some("node-1"), Some(45)))
        .await
        .unwrap();
    api.delete("bound", &DeleteParams::default()).await.unwrap();
    let p = api.get("bound").await.unwrap();
    assert!(p.metadata.deletion_timestamp.is_some());
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(45));
    // A status write during termination must not remove it.
    api.patch_status(
        "bound",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    // A longer grace period does not extend it; a shorter one shortens it.
    api.delete("bound", &DeleteParams::default().grace_period(60))
        .await
        .unwrap();
    assert_eq!(
        api.get("bound")
            .await
            .unwrap()
            .metadata
            .deletion_grace_period_seconds,
        Some(45)
    );
    api.delete("bound", &DeleteParams::default().grace_period(10))
        .await
        .unwrap();
    assert_eq!(
        api.get("bound")
            .await
            .unwrap()
            .metadata
            .deletion_grace_period_seconds,
        Some(10)
    );
    api.delete("bound", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert!(api.get_opt("bound").await.unwrap().is_none());

    // Default grace when the pod has none set is 30 seconds.
    api.create(&pp, &pod("dflt", Some("node-1"), None)).await.unwrap();
    api.delete("dflt", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        api.get("dflt")
            .await
            .unwrap()
            .metadata
            .deletion_grace_period_seconds,
        Some(30)
    );

    // No kubelet: the pod garbage collector removes it once grace + 1s have passed.
    api.create(&pp, &pod("orphaned", Some("gone-node"), Some(1)))
        .await
        .unwrap();
    api.delete("orphaned", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("orphaned").await.unwrap().is_some());
    let mut gone = false;
    for _ in 0..100 {
        if api.get_opt("orphaned").await.unwrap().is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "pod with expired grace period was not removed");
    env.server.shutdown().await;
}

#[tokio::test]
async fn pod_binding_subresource() {
    let env = Env::start().await;
    let client = env.client().await;
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &pod("p", None, None))
        .await
        .unwrap();
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-7"}
    });
    let req = |b: &Value| {
        http::Request::post("/api/v1/namespaces/default/pods/p/binding")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(b).unwrap())
            .unwrap()
    };
    let status: Value = client.request(req(&binding)).await.expect("binding accepted");
    assert_eq!(status["status"], "Success");
    let p = api.get("p").await.unwrap();
    // As kube-apiserver 1.28 does (observed on ../shared/real-cluster): the binding sets the
    // PodScheduled condition in the same write and records no managedFields entry of its own.
    let managers: Vec<String> = p
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers.len(), 1, "only the creator manages fields: {managers:?}");
    let conds = p.status.and_then(|s| s.conditions).unwrap_or_default();
    let scheduled = conds
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .expect("PodScheduled condition");
    assert_eq!(scheduled.status, "True");
    assert!(scheduled.last_transition_time.is_some());
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("node-7"));
    let err = client.request::<Value>(req(&binding)).await.unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert!(
                s.message.contains("already assigned to node \"node-7\""),
                "{}",
                s.message
            );
        }
        other => panic!("expected a 409, got {other:?}"),
    }
    env.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_and_storage_defaults() {
    require_kubectl!();
    let env = Env::start().await;
    env.apply(
        "apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: a, image: busybox}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: a, image: busybox}]}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
  annotations: {storageclass.kubernetes.io/is-default-class: \"true\"}
provisioner: example.com/fast
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: classless}
spec:
  storageClassName: \"\"
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
",
        &[],
    );
    let ds = get_json(&env, &["daemonset", "agent"]);
    assert_eq!(
        ds["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
    let sts = get_json(&env, &["statefulset", "db"]);
    assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        sts["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(sts["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        get_json(&env, &["pvc", "data"])["spec"]["storageClassName"],
        "fast"
    );
    // An explicit empty class is not defaulted.
    assert_eq!(
        get_json(&env, &["pvc", "classless"])["spec"]["storageClassName"],
        ""
    );

    // A claim created before any default class exists may be given one later, but a set class
    // stays immutable.
    env.ok(&["delete", "storageclass", "fast"]);
    env.apply(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: late}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
",
        &[],
    );
    assert!(
        get_json(&env, &["pvc", "late"])["spec"]
            .get("storageClassName")
            .is_none()
    );
    env.ok(&[
        "patch",
        "pvc",
        "late",
        "--type=merge",
        "-p",
        r#"{"spec":{"storageClassName":"slow"}}"#,
    ]);
    let out = env.kubectl(&[
        "patch",
        "pvc",
        "late",
        "--type=merge",
        "-p",
        r#"{"spec":{"storageClassName":"other"}}"#,
    ]);
    assert!(!out.status.success());
    assert!(Env::err(&out).contains("spec is immutable"), "{}", Env::err(&out));
    env.server.shutdown().await;
}

fn header(out: &str) -> Vec<String> {
    out.lines()
        .next()
        .unwrap_or("")
        .split("  ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_columns_match_a_real_cluster() {
    require_kubectl!();
    let env = Env::start().await;
    env.apply(
        "apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels: {node-role.kubernetes.io/control-plane: \"\"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {a: b}
---
apiVersion: v1
kind: Service
metadata: {name: svc}
spec:
  selector: {app: x}
  ports: [{name: mysql, port: 3306}, {name: sst, port: 4444}]
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, image: busybox}]}
",
        &[],
    );
    env.ok(&["create", "deployment", "web", "--image=nginx"]);
    env.ok(&["create", "job", "j", "--image=busybox"]);
    let expect = [
        ("nodes", vec!["NAME", "STATUS", "ROLES", "AGE", "VERSION"]),
        ("pods", vec!["NAME", "READY", "STATUS", "RESTARTS", "AGE"]),
        (
            "deployments",
            vec!["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        ),
        (
            "services",
            vec!["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
        ),
        ("configmaps", vec!["NAME", "DATA", "AGE"]),
        ("jobs", vec!["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]),
    ];
    for (kind, cols) in expect {
        let out = env.ok(&["get", kind]);
        assert_eq!(header(&out), cols, "{kind}:\n{out}");
    }
    let nodes = env.ok(&["get", "nodes"]);
    assert!(nodes.contains("control-plane"), "{nodes}");
    let svc = env.ok(&["get", "services", "svc"]);
    assert!(svc.contains("3306/TCP,4444/TCP"), "{svc}");
    assert!(svc.contains("<none>"), "{svc}");
    let jobs = env.ok(&["get", "jobs"]);
    assert!(jobs.contains("Running") && jobs.contains("0/1"), "{jobs}");
    env.server.shutdown().await;
}
