//! Operator dependencies: `KudoOperator` tasks create, update and wait for child Instances.
//!
//! The packages here are written as `kubectl kudo install` leaves them in the cluster: the
//! dependency's Operator and OperatorVersion installed without an Instance, and the parent's task
//! pinned to `{package: <operator>, operatorVersion}` (the CLI's resolution is tested with the
//! examples/wordpress-on-mysql kuttl suite).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::harness::{self, Env, Pkg, wait_for};

const PARAMS_NONE: &str = "apiVersion: kudo.dev/v1beta1\nparameters: []\n";

/// The child operator `kid`: a Deployment of `IMAGE`, then a Job running `JOB_COMMAND`.
fn kid(dir: &Path) -> PathBuf {
    Pkg::new(dir, "kid")
        .operator(
            r#"apiVersion: kudo.dev/v1beta1
name: kid
operatorVersion: "0.1.0"
tasks:
  - name: app
    kind: Apply
    spec:
      resources: [deploy.yaml]
  - name: check
    kind: Apply
    spec:
      resources: [job.yaml]
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: app
            tasks: [app]
          - name: check
            tasks: [check]
"#,
        )
        .params(
            "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: IMAGE\n    required: true\n  - name: JOB_COMMAND\n    default: \"true\"\n",
        )
        .template(
            "deploy.yaml",
            r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}
spec:
  replicas: 1
  selector:
    matchLabels: {app: {{ .Name }}}
  template:
    metadata:
      labels: {app: {{ .Name }}}
    spec:
      containers:
        - name: app
          image: {{ .Params.IMAGE }}
"#,
        )
        .template(
            "job.yaml",
            r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Name }}-check
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: check
          image: busybox
          command: ["sh", "-c", {{ .Params.JOB_COMMAND | quote }}]
"#,
        )
        .write()
}

/// The parent operator `mom`: the `kid` dependency (parameters from `kid-params.yaml`), then a
/// ConfigMap.
fn mom(dir: &Path, param_file: &str) -> PathBuf {
    Pkg::new(dir, "mom")
        .operator(
            r#"apiVersion: kudo.dev/v1beta1
name: mom
operatorVersion: "1.0.0"
tasks:
  - name: kid
    kind: KudoOperator
    spec:
      package: kid
      operatorVersion: "0.1.0"
      parameterFile: kid-params.yaml
  - name: own
    kind: Apply
    spec:
      resources: [cm.yaml]
plans:
  deploy:
    strategy: serial
    phases:
      - name: deps
        strategy: serial
        steps:
          - name: kid
            tasks: [kid]
      - name: self
        strategy: serial
        steps:
          - name: own
            tasks: [own]
"#,
        )
        .params(
            "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: KID_IMAGE\n    default: busybox:1\n  - name: KID_JOB\n    default: \"true\"\n",
        )
        .template("kid-params.yaml", param_file)
        .template(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-own\ndata:\n  kid: {{ .Name }}-kid\n",
        )
        .write()
}

const KID_PARAMS: &str =
    "IMAGE: {{ .Params.KID_IMAGE | quote }}\nJOB_COMMAND: {{ .Params.KID_JOB | quote }}\n";

fn step_message(inst: &Value, phase: usize, step: usize) -> String {
    inst["status"]["planStatus"]["deploy"]["phases"][phase]["steps"][step]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_instance_is_created_owned_and_awaited_then_updated_from_the_parent() {
    child_instance_is_created_owned_and_awaited_then_updated_from_the_parent_on(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_child_instance_is_created_owned_and_awaited_then_updated_from_the_parent() {
    child_instance_is_created_owned_and_awaited_then_updated_from_the_parent_on(Env::real().await).await;
}

async fn child_instance_is_created_owned_and_awaited_then_updated_from_the_parent_on(env: Env) {
    let dir = tempfile::tempdir().unwrap();
    env.install_operator(&kid(dir.path())).await;
    env.install(&mom(dir.path(), KID_PARAMS), "mom", BTreeMap::new())
        .await;
    let parent = env.wait_plan("mom", "deploy", "COMPLETE").await;

    // The child: named <parent>-<operator>, owned by the parent, watched through its labels,
    // parameters from the rendered parameter file.
    let child = env
        .get("kudo.dev/v1beta1", "Instance", "mom-kid")
        .await
        .expect("child instance exists");
    let owner = &child["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Instance");
    assert_eq!(owner["name"], "mom");
    assert_eq!(owner["uid"], parent["metadata"]["uid"]);
    let labels = &child["metadata"]["labels"];
    assert_eq!(labels["kudo.dev/operator"], "kid");
    assert_eq!(labels["kudo.dev/instance"], "mom");
    assert_eq!(labels["heritage"], "kudo");
    assert_eq!(child["spec"]["operatorVersion"]["name"], "kid-0.1.0");
    assert_eq!(
        child["spec"]["parameters"],
        json!({"IMAGE": "busybox:1", "JOB_COMMAND": "true"})
    );
    // The parent's plan completed only after the child's: read right after the parent finished.
    assert_eq!(child["status"]["planStatus"]["deploy"]["status"], "COMPLETE");
    assert!(env.get("batch/v1", "Job", "mom-kid-check").await.is_some());
    assert!(env.get("v1", "ConfigMap", "mom-own").await.is_some());

    // A parent parameter that flows into the child: the child runs again (new uid) and the
    // parent completes only once the child has.
    let child_uid = child["status"]["planStatus"]["deploy"]["uid"].clone();
    let parent_uid = parent["status"]["planStatus"]["deploy"]["uid"].clone();
    env.patch_instance("mom", json!({"spec": {"parameters": {"KID_IMAGE": "busybox:2"}}}))
        .await;
    env.wait_instance("mom", "a new deploy run to complete", |i| {
        let ps = &i["status"]["planStatus"]["deploy"];
        ps["uid"] != parent_uid && ps["status"] == "COMPLETE"
    })
    .await;
    let child = env.get("kudo.dev/v1beta1", "Instance", "mom-kid").await.unwrap();
    assert_eq!(child["spec"]["parameters"]["IMAGE"], "busybox:2");
    let cps = &child["status"]["planStatus"]["deploy"];
    assert_ne!(cps["uid"], child_uid, "the child ran a new plan");
    assert_eq!(cps["status"], "COMPLETE", "{child}");
    let deploy = env.get("apps/v1", "Deployment", "mom-kid").await.unwrap();
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["image"],
        "busybox:2"
    );

    // Uninstalling the parent removes the child (owner reference) and the child's objects.
    env.delete_instance("mom").await;
    env.wait_gone("kudo.dev/v1beta1", "Instance", "mom-kid").await;
    env.wait_gone("apps/v1", "Deployment", "mom-kid").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_child_plan_fails_the_parent() {
    // The simulated kubelet fails a container whose command has the word "fail".
    failed_child_plan_fails_the_parent_on(Env::start().await, "exit 1 # fail").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_failed_child_plan_fails_the_parent() {
    // The real cluster's fake kubelet fails exactly `sh -c "exit N"`.
    failed_child_plan_fails_the_parent_on(Env::real().await, "exit 1").await;
}

async fn failed_child_plan_fails_the_parent_on(env: Env, failing_command: &str) {
    let dir = tempfile::tempdir().unwrap();
    env.install_operator(&kid(dir.path())).await;
    env.install(
        &mom(dir.path(), KID_PARAMS),
        "mom",
        BTreeMap::from([("KID_JOB".to_string(), failing_command.to_string())]),
    )
    .await;
    // KUDO counted a child without a scheduled plan as done, failed or not.
    let parent = env.wait_plan("mom", "deploy", "FATAL_ERROR").await;
    let msg = step_message(&parent, 0, 0);
    assert!(msg.contains("mom-kid"), "{msg}");
    assert!(msg.contains("FATAL_ERROR"), "{msg}");
    let child = env.get("kudo.dev/v1beta1", "Instance", "mom-kid").await.unwrap();
    assert_eq!(child["status"]["planStatus"]["deploy"]["status"], "FATAL_ERROR");
    // The parent's own step never ran.
    assert!(env.get("v1", "ConfigMap", "mom-own").await.is_none());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_required_child_parameter_is_fatal_before_creating_the_child() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    env.install_operator(&kid(dir.path())).await;
    env.install(
        &mom(dir.path(), "JOB_COMMAND: \"true\"\n"),
        "mom",
        BTreeMap::new(),
    )
    .await;
    let parent = env.wait_plan("mom", "deploy", "FATAL_ERROR").await;
    let msg = step_message(&parent, 0, 0);
    assert!(
        msg.contains("required parameter IMAGE is not set by the parameter file"),
        "{msg}"
    );
    assert!(env.get("kudo.dev/v1beta1", "Instance", "mom-kid").await.is_none());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependency_cycles_and_missing_operator_versions_are_rejected() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let looped = |name: &str, other: &str| {
        Pkg::new(dir.path(), name)
            .operator(&format!(
                r#"apiVersion: kudo.dev/v1beta1
name: {name}
operatorVersion: "0.1.0"
tasks:
  - name: dep
    kind: KudoOperator
    spec:
      package: {other}
      operatorVersion: "0.1.0"
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: dep
            tasks: [dep]
"#
            ))
            .params(PARAMS_NONE)
            .write()
    };
    env.install_operator(&looped("b", "a")).await;
    env.install(&looped("a", "b"), "a", BTreeMap::new()).await;
    let inst = env.wait_plan("a", "deploy", "FATAL_ERROR").await;
    let msg = step_message(&inst, 0, 0);
    assert!(
        msg.contains("circular operator dependency: a-0.1.0 → b-0.1.0 → a-0.1.0"),
        "{msg}"
    );
    wait_for("CircularDependency event for a", || async {
        env.event_reasons("a")
            .await
            .contains(&"CircularDependency".to_string())
            .then_some(())
    })
    .await;
    assert!(env.get("kudo.dev/v1beta1", "Instance", "a-b").await.is_none());

    // A dependency whose OperatorVersion was never installed.
    env.install(&looped("c", "nowhere"), "c", BTreeMap::new()).await;
    let inst = env.wait_plan("c", "deploy", "FATAL_ERROR").await;
    let msg = step_message(&inst, 0, 0);
    assert!(
        msg.contains("needs operator version nowhere-0.1.0, which is not installed"),
        "{msg}"
    );
    // Wait for the event to be visible before stopping (events are written asynchronously).
    wait_for("CircularDependency event for c", || async {
        env.event_reasons("c")
            .await
            .contains(&"CircularDependency".to_string())
            .then_some(())
    })
    .await;
    env.stop().await;
}

/// A KudoOperator child is applied as its parent's ServiceAccount and inherits it: the
/// child can do no more than the parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_instance_inherits_the_parents_service_account() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::api::{Api, PostParams};
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(env.client.clone(), &env.ns);
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "tenant"}})).unwrap(),
    )
    .await
    .unwrap();
    let roles: Api<Role> = Api::namespaced(env.client.clone(), &env.ns);
    let role = json!({"metadata": {"name": "instances"}, "rules": [{"apiGroups": ["kudo.dev"],
        "resources": ["instances"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]});
    roles
        .create(&PostParams::default(), &serde_json::from_value(role).unwrap())
        .await
        .unwrap();
    let rbs: Api<RoleBinding> = Api::namespaced(env.client.clone(), &env.ns);
    for (name, kind) in [("instances", "Role"), ("edit", "ClusterRole")] {
        let rb = json!({"metadata": {"name": format!("tenant-{name}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": env.ns}]});
        rbs.create(&PostParams::default(), &serde_json::from_value(rb).unwrap())
            .await
            .unwrap();
    }
    env.install_operator(&kid(dir.path())).await;
    let mut res = harness::resources(&mom(dir.path(), KID_PARAMS), &env.ns, "mom", BTreeMap::new());
    res.instance.spec.service_account_name = "tenant".into();
    env.create(serde_json::to_value(&res.operator).unwrap()).await;
    env.create(serde_json::to_value(&res.operator_version).unwrap())
        .await;
    env.create(serde_json::to_value(&res.instance).unwrap()).await;
    env.wait_plan("mom", "deploy", "COMPLETE").await;
    let child = env.get("kudo.dev/v1beta1", "Instance", "mom-kid").await.unwrap();
    assert_eq!(child["spec"]["serviceAccountName"], "tenant", "{child}");
    env.stop().await;
}
