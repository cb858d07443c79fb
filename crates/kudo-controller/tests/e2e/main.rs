//! End-to-end tests of the controller: each test starts its own embedded API server on
//! 127.0.0.1:0, the simulated kubelet/controllers and the KUDO controller in-process, installs the
//! CRDs through kube-rs, installs an operator package (read and converted with kudo-package) and
//! waits, with a bounded timeout, for the observable outcome.

mod autopilot;
mod dependencies;
mod drift_report;
mod faults;
mod galera_backup;
mod harness;
mod leader_election;
mod least_privilege;
mod malformed;
mod ops_endpoints;
mod revisions;
mod schedule;
mod sensitive;
mod shards;
mod steps;
mod translate;

use std::collections::BTreeMap;

use harness::{Env, Pkg};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, ListParams};
use serde_json::json;

fn first_operator(dir: &std::path::Path) -> std::path::PathBuf {
    Pkg::new(dir, "first-operator")
        .operator(
            r#"apiVersion: kudo.dev/v1beta1
name: first-operator
operatorVersion: "0.2.0"
appVersion: "1.7.9"
kubernetesVersion: 1.15.0
maintainers:
  - name: Your name
    email: you@example.com
url: https://kudo.dev
tasks:
  - name: app
    kind: Apply
    spec:
      resources:
        - deployment.yaml
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: parallel
        steps:
          - name: everything
            tasks:
              - app
"#,
        )
        .params(
            r#"apiVersion: kudo.dev/v1beta1
parameters:
  - name: REPLICAS
    description: Number of replicas that should be run as part of the deployment
    default: 2
"#,
        )
        .template(
            "deployment.yaml",
            r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}-nginx
spec:
  selector:
    matchLabels:
      app: nginx
  replicas: {{ .Params.REPLICAS }}
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
        - name: nginx
          image: nginx:{{ .AppVersion }}
          ports:
            - containerPort: 80
"#,
        )
        .write()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_operator_deploys_and_updates() {
    first_operator_deploys_and_updates_on(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_first_operator_deploys_and_updates() {
    first_operator_deploys_and_updates_on(Env::real().await).await;
}

async fn first_operator_deploys_and_updates_on(env: Env) {
    let dir = tempfile::tempdir().unwrap();
    let pkg = first_operator(dir.path());
    env.install(&pkg, "fo", BTreeMap::new()).await;

    let inst = env.wait_plan("fo", "deploy", "COMPLETE").await;
    let uid1 = inst["status"]["planStatus"]["deploy"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0]["status"],
        "COMPLETE"
    );
    let dep = env
        .wait_ready_replicas("apps/v1", "Deployment", "fo-nginx", 2)
        .await;
    assert_eq!(dep["spec"]["replicas"], 2);
    // Enhancement: KUDO labels, owner reference to the Instance, SSA field manager `kudo`.
    assert_eq!(dep["metadata"]["labels"]["heritage"], "kudo");
    assert_eq!(dep["metadata"]["labels"]["kudo.dev/instance"], "fo");
    assert_eq!(dep["metadata"]["ownerReferences"][0]["kind"], "Instance");
    let managers: Vec<&str> = dep["metadata"]["managedFields"]
        .as_array()
        .map(|a| a.iter().filter_map(|m| m["manager"].as_str()).collect())
        .unwrap_or_default();
    assert!(managers.contains(&"kudo"), "managers: {managers:?}");
    // The finished plan is unscheduled and the instance reports Ready.
    let inst = env
        .wait_instance("fo", "planExecution cleared and Ready=True", |i| {
            i["spec"]["planExecution"]["planName"]
                .as_str()
                .unwrap_or("")
                .is_empty()
                && harness::condition(i, "Ready").is_some_and(|c| c["status"] == "True")
        })
        .await;
    assert_eq!(
        harness::condition(&inst, "Ready").unwrap()["reason"],
        "ResourcesReady"
    );
    // Events PlanStarted/PlanFinished were published for the Instance.
    let reasons = env.event_reasons("fo").await;
    assert!(reasons.contains(&"PlanStarted".to_string()), "{reasons:?}");
    assert!(reasons.contains(&"PlanFinished".to_string()), "{reasons:?}");

    // Parameter update: REPLICAS has no trigger and the OV has no `update` plan → deploy again.
    env.patch_instance("fo", json!({"spec": {"parameters": {"REPLICAS": "3"}}}))
        .await;
    let inst = env
        .wait_instance("fo", "a new deploy run COMPLETE", |i| {
            let ps = &i["status"]["planStatus"]["deploy"];
            ps["status"] == "COMPLETE" && ps["uid"].as_str() != Some(uid1.as_str())
        })
        .await;
    assert_ne!(
        inst["status"]["planStatus"]["deploy"]["uid"].as_str(),
        Some(uid1.as_str())
    );
    let dep = env
        .wait_ready_replicas("apps/v1", "Deployment", "fo-nginx", 3)
        .await;
    assert_eq!(dep["spec"]["replicas"], 3);
    env.stop().await;
}

fn galera_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/galera")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn galera_deploy_scale_and_uninstall() {
    galera_deploy_scale_and_uninstall_on(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_galera_deploy_scale_and_uninstall() {
    galera_deploy_scale_and_uninstall_on(Env::real().await).await;
}

async fn galera_deploy_scale_and_uninstall_on(env: Env) {
    env.install(&galera_dir(), "db", BTreeMap::new()).await;
    let inst = env.wait_plan("db", "deploy", "COMPLETE").await;
    for phase in inst["status"]["planStatus"]["deploy"]["phases"]
        .as_array()
        .unwrap()
    {
        assert_eq!(phase["status"], "COMPLETE", "{phase}");
        for step in phase["steps"].as_array().unwrap() {
            assert_eq!(step["status"], "COMPLETE", "{step}");
        }
    }
    let sts = env
        .wait_ready_replicas("apps/v1", "StatefulSet", "db-galera", 3)
        .await;
    assert_eq!(sts["spec"]["serviceName"], "db-hs");
    // The cleanup step deleted the bootstrap objects.
    assert!(env.get("apps/v1", "Deployment", "db-bootstrap").await.is_none());
    assert!(env.get("v1", "Service", "db-bootstrap-svc").await.is_none());
    assert!(env.get("v1", "ConfigMap", "db-bootstrap").await.is_none());
    // The final node config lists every node and no longer the bootstrap service.
    let cm = env
        .get("v1", "ConfigMap", "db-nodeconfig")
        .await
        .expect("node ConfigMap");
    let cnf = cm["data"]["galera.cnf"].as_str().unwrap();
    assert!(
        cnf.contains(
            "wsrep_cluster_address = gcomm://db-galera-0.db-hs,db-galera-1.db-hs,db-galera-2.db-hs\n"
        ),
        "{cnf}"
    );
    assert!(!cnf.contains("bootstrap"), "{cnf}");

    // The real kubectl sees the instance and the ConfigMaps.
    if let Some(out) = env.kubectl(&["get", "instances"]) {
        assert!(out.lines().any(|l| l.starts_with("db ")), "{out}");
    }
    if let Some(out) = env.kubectl(&["get", "configmaps"]) {
        assert!(out.contains("db-nodeconfig"), "{out}");
        assert!(out.contains("db-node-scripts"), "{out}");
    }

    // NODE_COUNT has trigger node_update.
    env.patch_instance("db", json!({"spec": {"parameters": {"NODE_COUNT": "5"}}}))
        .await;
    let inst = env.wait_plan("db", "node_update", "COMPLETE").await;
    assert_eq!(inst["spec"]["parameters"]["NODE_COUNT"], "5");
    env.wait_ready_replicas("apps/v1", "StatefulSet", "db-galera", 5)
        .await;
    let cm = env
        .get("v1", "ConfigMap", "db-nodeconfig")
        .await
        .expect("node ConfigMap");
    assert!(
        cm["data"]["galera.cnf"]
            .as_str()
            .unwrap()
            .contains(",db-galera-4.db-hs\n")
    );

    // Uninstall: the garbage collector removes everything the Instance owns.
    env.delete_instance("db").await;
    env.wait_gone("kudo.dev/v1beta1", "Instance", "db").await;
    env.wait_gone("apps/v1", "StatefulSet", "db-galera").await;
    env.wait_gone("v1", "ConfigMap", "db-nodeconfig").await;
    env.wait_gone("v1", "Secret", "db-secret").await;
    env.wait_gone("v1", "Service", "db-hs").await;
    env.stop().await;
}

/// A one-step operator whose task applies the given templates.
fn single_step(
    dir: &std::path::Path,
    name: &str,
    params: &str,
    templates: &[(&str, &str)],
) -> std::path::PathBuf {
    let resources: String = templates
        .iter()
        .map(|(n, _)| format!("        - {n}\n"))
        .collect();
    let mut pkg = Pkg::new(dir, name)
        .operator(&format!(
            r#"apiVersion: kudo.dev/v1beta1
name: {name}
operatorVersion: "0.1.0"
tasks:
  - name: main
    kind: Apply
    spec:
      resources:
{resources}plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: main
            tasks:
              - main
"#
        ))
        .params(params);
    for (n, t) in templates {
        pkg = pkg.template(n, t);
    }
    pkg.write()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendering_error_is_fatal_with_template_message() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = single_step(
        dir.path(),
        "broken",
        "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: {{ .Params.X | nosuchfunction }}\n",
        )],
    );
    env.install(&pkg, "broken", BTreeMap::new()).await;
    let inst = env.wait_plan("broken", "deploy", "FATAL_ERROR").await;
    let msg = inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("nosuchfunction"), "{msg}");
    assert!(msg.contains("cm.yaml"), "{msg}");
    assert_eq!(
        harness::condition(&inst, "Ready").unwrap()["reason"],
        "PlanInFatalError"
    );
    let reasons = env.event_reasons("broken").await;
    assert!(reasons.contains(&"TaskRenderingError".to_string()), "{reasons:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_job_is_fatal() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = single_step(
        dir.path(),
        "jobs",
        "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
        &[(
            "job.yaml",
            r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Name }}-migrate
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: busybox
          command: ["false"]
"#,
        )],
    );
    env.install(&pkg, "jobs", BTreeMap::new()).await;
    let inst = env.wait_plan("jobs", "deploy", "FATAL_ERROR").await;
    let msg = inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("jobs-migrate"), "{msg}");
    let reasons = env.event_reasons("jobs").await;
    assert!(
        reasons.contains(&"FailedTerminalStateError".to_string()),
        "{reasons:?}"
    );
    env.stop().await;
}

/// A one-step operator whose Job runs `command` (a YAML flow list) with the given spec lines.
fn job_operator(dir: &std::path::Path, name: &str, spec: &str, command: &str) -> std::path::PathBuf {
    single_step(
        dir,
        name,
        "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
        &[(
            "job.yaml",
            &format!(
                r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {{{{ .Name }}}}-job
spec:
{spec}
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: busybox
          command: {command}
"#
            ),
        )],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_exit_code_and_deadline_failures_are_fatal() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    // exit N with backoffLimit 0: the pod fails with that code, the Job with BackoffLimitExceeded
    let a = job_operator(
        &dir.path().join("a"),
        "exiter",
        "  backoffLimit: 0",
        r#"["sh", "-c", "echo migrating; exit 3"]"#,
    );
    env.install(&a, "exiter", BTreeMap::new()).await;
    let inst = env.wait_plan("exiter", "deploy", "FATAL_ERROR").await;
    let msg = inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("exiter-job") && msg.contains("backoff limit"),
        "{msg}"
    );
    let job = env.get("batch/v1", "Job", "exiter-job").await.unwrap();
    let failed = harness::condition(&job, "Failed").expect("Failed condition");
    assert_eq!(failed["reason"], "BackoffLimitExceeded");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.client.clone(), harness::NS);
    let list = pods
        .list(&ListParams::default().labels("job-name=exiter-job"))
        .await
        .unwrap();
    let code = list.items[0]
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap()
        .exit_code;
    assert_eq!(code, 3);
    let log = pods
        .logs(
            list.items[0].metadata.name.as_deref().unwrap(),
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(log, "migrating\n");

    // a Job still sleeping at its activeDeadlineSeconds fails with DeadlineExceeded
    let b = job_operator(
        &dir.path().join("b"),
        "sleeper",
        "  activeDeadlineSeconds: 1",
        r#"["sleep", "60"]"#,
    );
    env.install(&b, "sleeper", BTreeMap::new()).await;
    let inst = env.wait_plan("sleeper", "deploy", "FATAL_ERROR").await;
    let msg = inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("sleeper-job") && msg.contains("deadline"), "{msg}");
    let job = env.get("batch/v1", "Job", "sleeper-job").await.unwrap();
    assert_eq!(
        harness::condition(&job, "Failed").unwrap()["reason"],
        "DeadlineExceeded"
    );

    // `sleep 1` finishes within the deadline: the plan completes
    let c = job_operator(
        &dir.path().join("c"),
        "napper",
        "  activeDeadlineSeconds: 30",
        r#"["sh", "-c", "sleep 1 && touch /tmp/done"]"#,
    );
    env.install(&c, "napper", BTreeMap::new()).await;
    env.wait_plan("napper", "deploy", "COMPLETE").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immutable_field_change_is_fatal_with_api_message() {
    immutable_field_change_is_fatal_with_api_message_on(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_immutable_field_change_is_fatal_with_api_message() {
    immutable_field_change_is_fatal_with_api_message_on(Env::real().await).await;
}

async fn immutable_field_change_is_fatal_with_api_message_on(env: Env) {
    let dir = tempfile::tempdir().unwrap();
    let pkg = single_step(
        dir.path(),
        "sts",
        "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: SERVICE\n    default: one\n",
        &[(
            "sts.yaml",
            r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Name }}-db
spec:
  serviceName: {{ .Params.SERVICE }}
  replicas: 1
  selector:
    matchLabels:
      app: db
  template:
    metadata:
      labels:
        app: db
    spec:
      containers:
        - name: db
          image: mariadb
"#,
        )],
    );
    env.install(&pkg, "sts", BTreeMap::new()).await;
    let inst = env.wait_plan("sts", "deploy", "COMPLETE").await;
    let uid1 = inst["status"]["planStatus"]["deploy"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    env.patch_instance("sts", json!({"spec": {"parameters": {"SERVICE": "two"}}}))
        .await;
    let inst = env
        .wait_instance("sts", "deploy re-run in FATAL_ERROR", |i| {
            let ps = &i["status"]["planStatus"]["deploy"];
            ps["status"] == "FATAL_ERROR" && ps["uid"].as_str() != Some(uid1.as_str())
        })
        .await;
    let msg = inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains(&format!("StatefulSet {}/sts-db", env.ns)), "{msg}");
    assert!(msg.contains("forbidden"), "{msg}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toggle_applies_and_deletes() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = Pkg::new(dir.path(), "toggler")
        .operator(
            r#"apiVersion: kudo.dev/v1beta1
name: toggler
operatorVersion: "0.1.0"
tasks:
  - name: feature
    kind: Toggle
    spec:
      parameter: FEATURE
      resources:
        - feature.yaml
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: feature
            tasks:
              - feature
"#,
        )
        .params("apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: FEATURE\n    default: \"false\"\n")
        .template(
            "feature.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-feature\ndata:\n  on: \"yes\"\n",
        )
        .write();
    env.install(&pkg, "tg", BTreeMap::new()).await;
    let inst = env.wait_plan("tg", "deploy", "COMPLETE").await;
    assert!(env.get("v1", "ConfigMap", "tg-feature").await.is_none());
    let mut uid = inst["status"]["planStatus"]["deploy"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    for (value, present) in [("true", true), ("false", false)] {
        env.patch_instance("tg", json!({"spec": {"parameters": {"FEATURE": value}}}))
            .await;
        let inst = env
            .wait_instance("tg", "toggle run COMPLETE", |i| {
                let ps = &i["status"]["planStatus"]["deploy"];
                ps["status"] == "COMPLETE" && ps["uid"].as_str() != Some(uid.as_str())
            })
            .await;
        uid = inst["status"]["planStatus"]["deploy"]["uid"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            env.get("v1", "ConfigMap", "tg-feature").await.is_some(),
            present,
            "FEATURE={value}"
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_plan_runs_before_the_instance_goes() {
    cleanup_plan_runs_before_the_instance_goes_on(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_cleanup_plan_runs_before_the_instance_goes() {
    cleanup_plan_runs_before_the_instance_goes_on(Env::real().await).await;
}

async fn cleanup_plan_runs_before_the_instance_goes_on(env: Env) {
    let dir = tempfile::tempdir().unwrap();
    let pkg = Pkg::new(dir.path(), "cleaner")
        .operator(
            r#"apiVersion: kudo.dev/v1beta1
name: cleaner
operatorVersion: "0.1.0"
tasks:
  - name: app
    kind: Apply
    spec:
      resources:
        - cm.yaml
  - name: goodbye
    kind: Apply
    spec:
      resources:
        - goodbye.yaml
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: app
            tasks:
              - app
  cleanup:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: goodbye
            tasks:
              - goodbye
"#,
        )
        .params("apiVersion: kudo.dev/v1beta1\nparameters: []\n")
        .template(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-app\ndata:\n  a: b\n",
        )
        .template(
            "goodbye.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-goodbye\ndata:\n  a: b\n",
        )
        .write();
    env.install(&pkg, "cl", BTreeMap::new()).await;
    let inst = env.wait_plan("cl", "deploy", "COMPLETE").await;
    assert_eq!(
        inst["metadata"]["finalizers"],
        json!(["kudo.dev.instance.cleanup"])
    );
    env.delete_instance("cl").await;
    // The cleanup plan ran (its ConfigMap was created) and the Instance was then released.
    env.wait_gone("kudo.dev/v1beta1", "Instance", "cl").await;
    let events = env.events("cl").await;
    assert!(
        events
            .iter()
            .any(|(r, n)| r == "PlanFinished" && n.contains("cleanup") && n.contains("COMPLETE")),
        "{events:?}"
    );
    env.wait_gone("v1", "ConfigMap", "cl-app").await;
    env.wait_gone("v1", "ConfigMap", "cl-goodbye").await;
    env.stop().await;
}

/// An operator whose deploy plan never finishes (a Dummy task that is not done), with a
/// `backup` plan that a parameter and a manual trigger can start.
fn blocking_operator(dir: &std::path::Path) -> std::path::PathBuf {
    Pkg::new(dir, "blocker")
        .operator(
            r#"apiVersion: kudo.dev/v1beta1
name: blocker
operatorVersion: "0.1.0"
tasks:
  - name: app
    kind: Apply
    spec:
      resources:
        - cm.yaml
  - name: wait
    kind: Dummy
    spec:
      done: {{DONE}}
  - name: backup
    kind: Apply
    spec:
      resources:
        - backup.yaml
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: app
            tasks:
              - app
          - name: wait
            tasks:
              - wait
  backup:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: backup
            tasks:
              - backup
"#,
        )
        .params(
            "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: BACKUP_NAME\n    default: first\n    trigger: backup\n",
        )
        .template("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-app\ndata:\n  a: b\n")
        .template(
            "backup.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-backup\ndata:\n  name: {{ .Params.BACKUP_NAME }}\n",
        )
        .write()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_triggering_another_plan_is_denied_while_a_plan_runs() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = blocking_operator(dir.path());
    let text = std::fs::read_to_string(pkg.join("operator.yaml")).unwrap();
    std::fs::write(pkg.join("operator.yaml"), text.replace("{{DONE}}", "false")).unwrap();
    env.install(&pkg, "bl", BTreeMap::new()).await;
    env.wait_instance("bl", "deploy waiting in step wait", |i| {
        let ps = &i["status"]["planStatus"]["deploy"];
        ps["status"] == "IN_PROGRESS" && ps["phases"][0]["steps"][0]["status"] == "COMPLETE"
    })
    .await;
    // BACKUP_NAME triggers `backup` while `deploy` runs: KUDO's webhook would have denied it.
    env.patch_instance("bl", json!({"spec": {"parameters": {"BACKUP_NAME": "second"}}}))
        .await;
    let inst = env
        .wait_instance("bl", "ChangeAccepted=False", |i| {
            harness::condition(i, "ChangeAccepted").is_some_and(|c| c["status"] == "False")
        })
        .await;
    let msg = harness::condition(&inst, "ChangeAccepted").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("plan 'deploy' is scheduled"), "{msg}");
    assert!(msg.contains("'backup'"), "{msg}");
    // The stored (denied) value stays, the running plan is still deploy, backup never ran.
    assert_eq!(inst["spec"]["parameters"]["BACKUP_NAME"], "second");
    assert_eq!(inst["spec"]["planExecution"]["planName"], "deploy");
    assert_eq!(inst["status"]["planStatus"]["backup"]["status"], "NEVER_RUN");
    assert!(env.get("v1", "ConfigMap", "bl-backup").await.is_none());
    let reasons = env.event_reasons("bl").await;
    assert!(reasons.contains(&"ChangeDenied".to_string()), "{reasons:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_plan_trigger_and_parameter_trigger_run_their_plan() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = blocking_operator(dir.path());
    let text = std::fs::read_to_string(pkg.join("operator.yaml")).unwrap();
    std::fs::write(pkg.join("operator.yaml"), text.replace("{{DONE}}", "true")).unwrap();
    env.install(&pkg, "bk", BTreeMap::new()).await;
    env.wait_instance("bk", "deploy COMPLETE and unscheduled", |i| {
        i["status"]["planStatus"]["deploy"]["status"] == "COMPLETE"
            && i["spec"]["planExecution"]["planName"]
                .as_str()
                .unwrap_or("")
                .is_empty()
    })
    .await;
    // `kubectl kudo plan trigger --name backup`: set planExecution.planName with no plan scheduled.
    env.patch_instance("bk", json!({"spec": {"planExecution": {"planName": "backup"}}}))
        .await;
    let inst = env.wait_plan("bk", "backup", "COMPLETE").await;
    assert!(
        !inst["status"]["planStatus"]["backup"]["uid"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    let cm = env
        .get("v1", "ConfigMap", "bk-backup")
        .await
        .expect("backup ConfigMap");
    assert_eq!(cm["data"]["name"], "first");
    let uid1 = inst["status"]["planStatus"]["backup"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    // A parameter with `trigger: backup` runs backup again with the new value.
    env.patch_instance("bk", json!({"spec": {"parameters": {"BACKUP_NAME": "second"}}}))
        .await;
    env.wait_instance("bk", "a second backup run COMPLETE", |i| {
        let ps = &i["status"]["planStatus"]["backup"];
        ps["status"] == "COMPLETE" && ps["uid"].as_str() != Some(uid1.as_str())
    })
    .await;
    let cm = env
        .get("v1", "ConfigMap", "bk-backup")
        .await
        .expect("backup ConfigMap");
    assert_eq!(cm["data"]["name"], "second");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_operator_version_is_reported_then_picked_up() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = first_operator(dir.path());
    let p = kudo_package::read_path(&pkg).unwrap();
    let res = kudo_package::resources::to_resources(
        &p,
        &kudo_package::resources::ConvertOptions {
            instance_name: Some("late".into()),
            namespace: Some("default".into()),
            parameters: BTreeMap::new(),
            ..Default::default()
        },
    )
    .unwrap();
    env.create(serde_json::to_value(&res.instance).unwrap()).await;
    harness::wait_for("InvalidOperatorVersion event", || async {
        env.event_reasons("late")
            .await
            .contains(&"InvalidOperatorVersion".to_string())
            .then_some(())
    })
    .await;
    // The Instance itself says why nothing happens (KUDO's webhook refused such an Instance).
    let inst = env
        .wait_instance("late", "Ready=False OperatorVersionNotFound", |i| {
            i["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| {
                    c["type"] == "Ready" && c["status"] == "False" && c["reason"] == "OperatorVersionNotFound"
                })
        })
        .await;
    let ready = inst["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(
        ready["message"],
        "OperatorVersion default/first-operator-1.7.9-0.2.0 of instance default/late does not exist"
    );
    // Creating the OperatorVersion re-triggers the Instance through the OV watch.
    env.create(serde_json::to_value(&res.operator).unwrap()).await;
    env.create(serde_json::to_value(&res.operator_version).unwrap())
        .await;
    env.wait_plan("late", "deploy", "COMPLETE").await;
    env.wait_ready_replicas("apps/v1", "Deployment", "late-nginx", 2)
        .await;
    env.wait_instance("late", "Ready=True", |i| {
        i["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
    .await;
    env.stop().await;
}

/// A two-step operator: a Pipe task `gen` with `pod.yaml`, then an Apply task using `.Pipes`.
fn piper(dir: &std::path::Path, init_script: &str) -> std::path::PathBuf {
    Pkg::new(dir, "piper")
        .operator(
            r#"apiVersion: kudo.dev/v1beta1
name: piper
operatorVersion: "0.1.0"
tasks:
  - name: gen
    kind: Pipe
    spec:
      pod: pod.yaml
      pipe:
        - file: /tmp/out.txt
          kind: ConfigMap
          key: out
        - envFile: /tmp/vars.env
          kind: Secret
          key: vars
  - name: use
    kind: Apply
    spec:
      resources:
        - user.yaml
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: gen
            tasks:
              - gen
          - name: use
            tasks:
              - use
"#,
        )
        .params("apiVersion: kudo.dev/v1beta1\nparameters: []\n")
        .template(
            "pod.yaml",
            &format!(
                r#"apiVersion: v1
kind: Pod
spec:
  volumes:
    - name: shared
      emptyDir: {{}}
  initContainers:
    - name: init
      image: busybox
      command: ["sh", "-c"]
      args: [{init_script:?}]
      volumeMounts:
        - name: shared
          mountPath: /tmp
"#
            ),
        )
        .template(
            "user.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: user\ndata:\n  out: {{ .Pipes.out }}\n  vars: {{ .Pipes.vars }}\n",
        )
        .write()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipe_task_copies_files_into_artifacts_through_exec() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = piper(
        dir.path(),
        "echo hi > /tmp/out.txt && printf 'USER=admin\\n# note\\nPASS=s3cret\\n' > /tmp/vars.env",
    );
    env.install(&pkg, "pp", BTreeMap::new()).await;
    env.wait_plan("pp", "deploy", "COMPLETE").await;
    let cm = env
        .get("v1", "ConfigMap", "pp.deploy.main.gen.gen.out")
        .await
        .expect("ConfigMap artifact");
    assert_eq!(cm["binaryData"]["out.txt"], "aGkK", "{cm}");
    assert_eq!(cm["metadata"]["labels"]["kudo.dev/instance"], "pp");
    assert_eq!(cm["metadata"]["ownerReferences"][0]["kind"], "Instance");
    let secret = env
        .get("v1", "Secret", "pp.deploy.main.gen.gen.vars")
        .await
        .expect("Secret artifact");
    assert_eq!(
        secret["data"],
        serde_json::json!({"PASS": "czNjcmV0", "USER": "YWRtaW4="}),
        "{secret}"
    );
    let user = env
        .get("v1", "ConfigMap", "user")
        .await
        .expect("later step applied");
    assert_eq!(user["data"]["out"], "pp.deploy.main.gen.gen.out");
    env.wait_gone("v1", "Pod", "pp.deploy.main.gen.gen.pipepod").await;
    env.stop().await;
}

/// A generator whose command the simulated shell does not run exits 127 saying so: its init
/// container crash-loops (`restartPolicy: OnFailure`), and the Pipe step waits on it, naming the
/// pod, as on a cluster where the program fails. Nothing after the step is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipe_task_whose_command_is_not_simulated_waits_on_its_failing_pod() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = piper(dir.path(), "keytool -genkeypair -keystore /tmp/out.txt");
    env.install(&pkg, "pq", BTreeMap::new()).await;
    let pod = "pq.deploy.main.gen.gen.pipepod";
    let inst = env
        .wait_instance("pq", "the Pipe step waiting on its crash-looping pod", |i| {
            let step = &i["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0];
            step["status"] == "IN_PROGRESS"
                && step["waitingFor"].as_array().is_some_and(|l| {
                    l.iter().any(|w| {
                        w.as_str()
                            .is_some_and(|w| w.contains(pod) && w.contains("CrashLoopBackOff"))
                    })
                })
        })
        .await;
    assert_eq!(inst["status"]["planStatus"]["deploy"]["status"], "IN_PROGRESS");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.client.clone(), harness::NS);
    let lp = kube::api::LogParams {
        container: Some("init".into()),
        ..Default::default()
    };
    let log = pods.logs(pod, &lp).await.unwrap();
    assert!(log.contains("kudo-sim: keytool: not simulated"), "{log}");
    assert!(
        env.get("v1", "ConfigMap", "user").await.is_none(),
        "nothing after the waiting step"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipe_pod_breaking_kudo_constraints_is_fatal() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = piper(dir.path(), "touch /tmp/out.txt /tmp/vars.env");
    // a main container is not allowed in a pipe pod
    let pod = pkg.join("templates/pod.yaml");
    let text = std::fs::read_to_string(&pod).unwrap();
    std::fs::write(
        &pod,
        text.replace(
            "  initContainers:",
            "  containers:\n    - name: extra\n      image: busybox\n  initContainers:",
        ),
    )
    .unwrap();
    env.install(&pkg, "pc", BTreeMap::new()).await;
    let inst = env.wait_plan("pc", "deploy", "FATAL_ERROR").await;
    let msg = inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0]["message"]
        .as_str()
        .unwrap();
    assert!(msg.contains("pipe pod should define no containers"), "{msg}");
    assert!(
        env.get("v1", "Pod", "pc.deploy.main.gen.gen.pipepod")
            .await
            .is_none()
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_controller_resumes_the_running_plan() {
    // Slow pods, so the deploy plan is still waiting when the controller goes away, and past
    // the grace after which a waiting run's status is written (`WAITING_GRACE_SECS`).
    let sim = kudo_sim::SimConfig {
        delays: kudo_sim::Delays {
            running_to_ready: std::time::Duration::from_secs(kudo_engine::pass::WAITING_GRACE_SECS + 4),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut env = Env::start_with(sim).await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = first_operator(dir.path());
    env.install(&pkg, "rs", BTreeMap::new()).await;
    let inst = env.wait_plan("rs", "deploy", "IN_PROGRESS").await;
    let uid = inst["status"]["planStatus"]["deploy"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    env.stop_controller().await;
    // Without a controller nothing moves on, even once the Deployment is ready.
    env.wait_ready_replicas("apps/v1", "Deployment", "rs-nginx", 2)
        .await;
    let inst = env.get("kudo.dev/v1beta1", "Instance", "rs").await.unwrap();
    assert_eq!(inst["status"]["planStatus"]["deploy"]["status"], "IN_PROGRESS");
    // A new controller continues the same run (same uid) from the Instance's status.
    env.start_controller();
    let inst = env.wait_plan("rs", "deploy", "COMPLETE").await;
    assert_eq!(
        inst["status"]["planStatus"]["deploy"]["uid"].as_str(),
        Some(uid.as_str())
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_version_change_runs_deploy_with_the_new_templates() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = first_operator(dir.path());
    env.install(&pkg, "up", BTreeMap::new()).await;
    let inst = env.wait_plan("up", "deploy", "COMPLETE").await;
    let uid1 = inst["status"]["planStatus"]["deploy"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    // Version 0.3.0 of the package ships a new app version (image tag).
    let text = std::fs::read_to_string(pkg.join("operator.yaml")).unwrap();
    std::fs::write(
        pkg.join("operator.yaml"),
        text.replace("operatorVersion: \"0.2.0\"", "operatorVersion: \"0.3.0\"")
            .replace("appVersion: \"1.7.9\"", "appVersion: \"1.8.0\""),
    )
    .unwrap();
    let p = kudo_package::read_path(&pkg).unwrap();
    let res = kudo_package::resources::to_resources(
        &p,
        &kudo_package::resources::ConvertOptions {
            instance_name: Some("up".into()),
            namespace: Some("default".into()),
            parameters: BTreeMap::new(),
            ..Default::default()
        },
    )
    .unwrap();
    let new_ov = res.operator_version.metadata.name.clone();
    env.create(serde_json::to_value(&res.operator_version).unwrap())
        .await;
    env.patch_instance("up", json!({"spec": {"operatorVersion": {"name": new_ov}}}))
        .await;
    // No `upgrade` or `update` plan: the upgrade runs `deploy`.
    env.wait_instance("up", "deploy re-run COMPLETE", |i| {
        let ps = &i["status"]["planStatus"]["deploy"];
        ps["status"] == "COMPLETE" && ps["uid"].as_str() != Some(uid1.as_str())
    })
    .await;
    let dep = env.get("apps/v1", "Deployment", "up-nginx").await.unwrap();
    assert_eq!(
        dep["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.8.0"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_scoped_objects_are_deleted_on_uninstall() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = single_step(
        dir.path(),
        "rbac",
        "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
        &[
            (
                "role.yaml",
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {{ .Name }}-reader\nrules:\n  - apiGroups: [\"\"]\n    resources: [\"pods\"]\n    verbs: [\"get\"]\n",
            ),
            (
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-cm\ndata:\n  a: b\n",
            ),
        ],
    );
    env.install(&pkg, "rb", BTreeMap::new()).await;
    env.wait_plan("rb", "deploy", "COMPLETE").await;
    let roles: Api<ClusterRole> = Api::all(env.client.clone());
    let role = roles.get("rb-reader").await.expect("ClusterRole applied");
    // Cluster-scoped: no namespace, no owner reference, but recorded on the Instance.
    assert!(role.metadata.namespace.is_none());
    assert!(role.metadata.owner_references.unwrap_or_default().is_empty());
    let inst = env
        .wait_instance("rb", "cluster objects recorded", |i| {
            i["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x == "kudo-rs.dev/cluster-objects"))
        })
        .await;
    assert!(
        inst["metadata"]["annotations"]["kudo-rs.dev/cluster-objects"]
            .as_str()
            .unwrap()
            .contains("rb-reader")
    );
    env.delete_instance("rb").await;
    env.wait_gone("kudo.dev/v1beta1", "Instance", "rb").await;
    harness::wait_for("ClusterRole deleted", || async {
        roles.get_opt("rb-reader").await.unwrap().is_none().then_some(())
    })
    .await;
    env.wait_gone("v1", "ConfigMap", "rb-cm").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_applied_in_declaration_order() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    // Files listed z, a, m; the second file holds two documents.
    let pkg = single_step(
        dir.path(),
        "order",
        "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
        &[
            (
                "z.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: z1\ndata: {}\n",
            ),
            (
                "a.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a2\ndata: {}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a1\ndata: {}\n",
            ),
            (
                "m.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m1\ndata: {}\n",
            ),
        ],
    );
    env.install(&pkg, "or", BTreeMap::new()).await;
    env.wait_plan("or", "deploy", "COMPLETE").await;
    let mut versions = Vec::new();
    for name in ["z1", "a2", "a1", "m1"] {
        let cm = env.get("v1", "ConfigMap", name).await.expect("ConfigMap exists");
        let rv: u64 = cm["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .expect("numeric resourceVersion");
        versions.push(rv);
    }
    let mut sorted = versions.clone();
    sorted.sort_unstable();
    assert_eq!(versions, sorted, "creation order z1, a2, a1, m1");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_timeout_ends_a_stuck_plan() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = Pkg::new(dir.path(), "slow")
        .operator(
            r#"apiVersion: kudo.dev/v1beta1
name: slow
operatorVersion: "0.1.0"
tasks:
  - name: wait
    kind: Dummy
    spec:
      done: false
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: wait
            timeout: 2s
            tasks:
              - wait
"#,
        )
        .params("apiVersion: kudo.dev/v1beta1\nparameters: []\n")
        .write();
    env.install(&pkg, "sl", BTreeMap::new()).await;
    // Nothing changes in the cluster: only the controller's deadline requeue can end the step.
    let inst = env.wait_plan("sl", "deploy", "FATAL_ERROR").await;
    let msg = inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("did not complete within 2s"), "{msg}");
    let reasons = env.event_reasons("sl").await;
    assert!(reasons.contains(&"StepTimeout".to_string()), "{reasons:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_creation_is_reported_until_the_parameters_are_fixed() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = single_step(
        dir.path(),
        "strict",
        "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: PASSWORD\n    required: true\n",
        &[(
            "secret.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Name }}-pw\nstringData:\n  pw: {{ .Params.PASSWORD }}\n",
        )],
    );
    env.install(&pkg, "st", BTreeMap::new()).await;
    let inst = env
        .wait_instance("st", "ChangeAccepted=False", |i| {
            harness::condition(i, "ChangeAccepted").is_some_and(|c| c["status"] == "False")
        })
        .await;
    let msg = harness::condition(&inst, "ChangeAccepted").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("PASSWORD"), "{msg}");
    assert!(
        inst["spec"]["planExecution"]["planName"]
            .as_str()
            .unwrap_or("")
            .is_empty()
    );
    assert!(env.get("v1", "Secret", "st-pw").await.is_none());
    // Supplying the value makes the creation admissible: deploy runs and the condition goes away.
    env.patch_instance("st", json!({"spec": {"parameters": {"PASSWORD": "s3cret"}}}))
        .await;
    let inst = env.wait_plan("st", "deploy", "COMPLETE").await;
    assert!(harness::condition(&inst, "ChangeAccepted").is_none());
    assert!(env.get("v1", "Secret", "st-pw").await.is_some());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_plan_even_with_a_denied_change_and_retrigger_restarts_it() {
    cancel_stops_the_plan_even_with_a_denied_change_and_retrigger_restarts_it_on(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_cancel_stops_the_plan_even_with_a_denied_change_and_retrigger_restarts_it() {
    cancel_stops_the_plan_even_with_a_denied_change_and_retrigger_restarts_it_on(Env::real().await).await;
}

async fn cancel_stops_the_plan_even_with_a_denied_change_and_retrigger_restarts_it_on(env: Env) {
    let dir = tempfile::tempdir().unwrap();
    let pkg = blocking_operator(dir.path());
    let text = std::fs::read_to_string(pkg.join("operator.yaml")).unwrap();
    std::fs::write(pkg.join("operator.yaml"), text.replace("{{DONE}}", "false")).unwrap();
    env.install(&pkg, "cx", BTreeMap::new()).await;
    let running = env
        .wait_instance("cx", "deploy waiting in step wait", |i| {
            let ps = &i["status"]["planStatus"]["deploy"];
            ps["status"] == "IN_PROGRESS" && ps["phases"][0]["steps"][0]["status"] == "COMPLETE"
        })
        .await;
    let first_uid = running["spec"]["planExecution"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    // A change KUDO denies while deploy runs stays stored...
    env.patch_instance("cx", json!({"spec": {"parameters": {"BACKUP_NAME": "second"}}}))
        .await;
    env.wait_instance("cx", "ChangeAccepted=False", |i| {
        harness::condition(i, "ChangeAccepted").is_some_and(|c| c["status"] == "False")
    })
    .await;
    // ... and does not block the cancellation.
    env.patch_instance("cx", kudo_engine::reconcile::cancel_patch())
        .await;
    let inst = env.wait_plan("cx", "deploy", "CANCELLED").await;
    let ps = &inst["status"]["planStatus"]["deploy"];
    assert_eq!(ps["phases"][0]["steps"][0]["status"], "COMPLETE", "{ps}");
    assert_eq!(ps["phases"][0]["steps"][1]["status"], "CANCELLED", "{ps}");
    assert!(ps["message"].as_str().unwrap().contains("cancelled"), "{ps}");
    let reasons = env.event_reasons("cx").await;
    assert!(reasons.contains(&"PlanCancelled".to_string()), "{reasons:?}");
    // Once deploy is unscheduled the stored change is admissible: it triggers backup.
    env.wait_plan("cx", "backup", "COMPLETE").await;
    let cm = env
        .get("v1", "ConfigMap", "cx-backup")
        .await
        .expect("backup applied");
    assert_eq!(cm["data"]["name"], "second");
    let inst = env
        .wait_instance("cx", "backup unscheduled", |i| {
            i["spec"]["planExecution"]["planName"]
                .as_str()
                .unwrap_or("")
                .is_empty()
        })
        .await;
    assert_eq!(inst["status"]["planStatus"]["deploy"]["status"], "CANCELLED");

    // Re-triggering deploy restarts it from the beginning with a new run.
    env.patch_instance("cx", json!({"spec": {"planExecution": {"planName": "deploy"}}}))
        .await;
    let again = env
        .wait_instance("cx", "deploy running again", |i| {
            let ps = &i["status"]["planStatus"]["deploy"];
            ps["status"] == "IN_PROGRESS"
                && ps["uid"].as_str().is_some_and(|u| u != first_uid)
                && ps["phases"][0]["steps"][0]["status"] == "COMPLETE"
        })
        .await;
    assert_eq!(
        again["status"]["planStatus"]["deploy"]["phases"][0]["steps"][1]["status"],
        "IN_PROGRESS"
    );
    // the cancelled Run's plan message does not stay on the new run.
    let message = &again["status"]["planStatus"]["deploy"]["message"];
    assert!(
        message.is_null() || message == "",
        "the new run kept the old message: {message}"
    );
    // Clearing planName is a cancellation too.
    env.patch_instance("cx", json!({"spec": {"planExecution": null}}))
        .await;
    let inst = env.wait_plan("cx", "deploy", "CANCELLED").await;
    assert!(harness::condition(&inst, "ChangeAccepted").is_none(), "{inst}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_timeout_ends_a_stuck_plan() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = Pkg::new(dir.path(), "slowplan")
        .operator(
            r#"apiVersion: kudo.dev/v1beta1
name: slowplan
operatorVersion: "0.1.0"
tasks:
  - name: wait
    kind: Dummy
    spec:
      done: false
plans:
  deploy:
    strategy: serial
    timeout: 2s
    phases:
      - name: main
        strategy: serial
        steps:
          - name: wait
            tasks:
              - wait
"#,
        )
        .params("apiVersion: kudo.dev/v1beta1\nparameters: []\n")
        .write();
    env.install(&pkg, "sp", BTreeMap::new()).await;
    let inst = env.wait_plan("sp", "deploy", "FATAL_ERROR").await;
    let msg = inst["status"]["planStatus"]["deploy"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let text = inst["status"]["planStatus"]["deploy"].to_string();
    assert!(text.contains("did not complete within 2s"), "{msg} / {text}");
    let reasons = env.event_reasons("sp").await;
    assert!(reasons.contains(&"PlanTimeout".to_string()), "{reasons:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_is_repaired_by_default() {
    drift_is_repaired_by_default_on(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_drift_is_repaired_by_default() {
    drift_is_repaired_by_default_on(Env::real().await).await;
}

async fn drift_is_repaired_by_default_on(env: Env) {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{DeleteParams, Patch, PatchParams};
    let dir = tempfile::tempdir().unwrap();
    let pkg = first_operator(dir.path());
    env.install(&pkg, "dr", BTreeMap::new()).await;
    env.wait_plan("dr", "deploy", "COMPLETE").await;
    let dep = env
        .wait_ready_replicas("apps/v1", "Deployment", "dr-nginx", 2)
        .await;
    let first_uid = dep["metadata"]["uid"].as_str().unwrap().to_string();
    let deps: Api<Deployment> = Api::namespaced(env.client.clone(), &env.ns);

    // Deleted outside a plan: applied again.
    deps.delete("dr-nginx", &DeleteParams::default()).await.unwrap();
    harness::wait_for("dr-nginx re-created", || async {
        let d = env.get("apps/v1", "Deployment", "dr-nginx").await?;
        (d["metadata"]["uid"].as_str() != Some(first_uid.as_str())).then_some(())
    })
    .await;
    harness::wait_for("DriftRepaired event", || async {
        env.event_reasons("dr")
            .await
            .contains(&"DriftRepaired".to_string())
            .then_some(())
    })
    .await;

    // Scaled by someone else (another field manager, like `kubectl scale`): reverted.
    let kubectl = PatchParams {
        field_manager: Some("kubectl".into()),
        ..Default::default()
    };
    let scale = |n: i64| {
        let (deps, kubectl) = (&deps, &kubectl);
        async move {
            deps.patch(
                "dr-nginx",
                kubectl,
                &Patch::Merge(json!({"spec": {"replicas": n}})),
            )
            .await
        }
    };
    scale(5).await.unwrap();
    env.wait_ready_replicas("apps/v1", "Deployment", "dr-nginx", 2)
        .await;
    let inst = env.get("kudo.dev/v1beta1", "Instance", "dr").await.unwrap();
    assert!(harness::condition(&inst, "Drifted").is_none(), "{inst}");

    // Each repair of the same object is one occurrence of one Event series (same reason, action
    // and related object): the first creates the Event, repeats raise `series.count` with a
    // merge patch the API server must accept.
    let repairs = || env.event_occurrences("dr", "DriftRepaired");
    harness::wait_for("two DriftRepaired occurrences", || async {
        (repairs().await.iter().sum::<i32>() >= 2).then_some(())
    })
    .await;
    scale(6).await.unwrap();
    harness::wait_for("three DriftRepaired occurrences", || async {
        (repairs().await.iter().sum::<i32>() >= 3).then_some(())
    })
    .await;
    let counts = repairs().await;
    assert!(counts.iter().sum::<i32>() >= 3, "{counts:?}");
    assert!(
        counts.len() < 3 && counts.iter().any(|c| *c >= 2),
        "repeats of one repair are counted in a series: {counts:?}"
    );
    env.wait_ready_replicas("apps/v1", "Deployment", "dr-nginx", 2)
        .await;

    // Policy `report`: drift_report.rs.
    env.stop().await;
}

/// two objects Repaired one after the other give two `DriftRepaired` Events,
/// each naming its object (kube-runtime's recorder merged them into one series that named only
/// the first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_repairs_are_one_event_per_object() {
    drift_repairs_are_one_event_per_object_on(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_drift_repairs_are_one_event_per_object() {
    drift_repairs_are_one_event_per_object_on(Env::real().await).await;
}

async fn drift_repairs_are_one_event_per_object_on(env: Env) {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{DeleteParams, Patch, PatchParams};
    let dir = tempfile::tempdir().unwrap();
    let pkg = single_step(
        dir.path(),
        "two",
        "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
        &[
            (
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-conf\ndata:\n  a: b\n",
            ),
            (
                "deploy.yaml",
                r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}-web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: nginx
"#,
            ),
        ],
    );
    env.install(&pkg, "dt", BTreeMap::new()).await;
    env.wait_plan("dt", "deploy", "COMPLETE").await;
    env.wait_ready_replicas("apps/v1", "Deployment", "dt-web", 1)
        .await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let deps: Api<Deployment> = Api::namespaced(env.client.clone(), &env.ns);
    let repaired = |name: &'static str| {
        let env = &env;
        async move {
            env.events("dt")
                .await
                .into_iter()
                .filter(|(r, n)| r == "DriftRepaired" && n.contains(name))
                .count()
        }
    };
    cms.delete("dt-conf", &DeleteParams::default()).await.unwrap();
    harness::wait_for("DriftRepaired naming the ConfigMap", || async {
        (repaired("dt-conf").await > 0).then_some(())
    })
    .await;
    let scale = PatchParams {
        field_manager: Some("kubectl".into()),
        ..Default::default()
    };
    deps.patch("dt-web", &scale, &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await
        .unwrap();
    harness::wait_for("DriftRepaired naming the Deployment", || async {
        (repaired("dt-web").await > 0).then_some(())
    })
    .await;
    let events = env.instance_events("dt").await;
    let drift: Vec<_> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("DriftRepaired"))
        .collect();
    assert_eq!(drift.len(), 2, "{drift:#?}");
    let related: Vec<_> = drift
        .iter()
        .filter_map(|e| e.related.as_ref()?.name.clone())
        .collect();
    assert!(related.contains(&"dt-conf".to_string()), "{drift:#?}");
    assert!(related.contains(&"dt-web".to_string()), "{drift:#?}");
    env.stop().await;
}

/// deleting the Namespace of an Instance makes the manager neither re-create
/// the objects being deleted (403 "being terminated") nor report the OperatorVersion the
/// deletion removed as missing. Real cluster only: it reads the stage manager's log
/// (`$KUDO_REAL_CLUSTER_MANAGER_LOG`), the only place those attempts show once the namespace and
/// its Events are gone. The namespace controller deletes resource types in a random order, and
/// the manager only has something to repair when the Deployment goes before the Instance: four
/// namespaces make that all but certain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_deleting_the_namespace_repairs_nothing() {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::DeleteParams;
    let log = kudo_testkit::real_cluster::manager_log()
        .expect("$KUDO_REAL_CLUSTER_MANAGER_LOG: run by scripts/real-cluster-stage.sh");
    let dir = tempfile::tempdir().unwrap();
    let pkg = first_operator(dir.path());
    let mut envs = Vec::new();
    for _ in 0..4 {
        let env = Env::real().await;
        env.install(&pkg, "nd", BTreeMap::new()).await;
        envs.push(env);
    }
    for env in &envs {
        env.wait_plan("nd", "deploy", "COMPLETE").await;
        env.wait_ready_replicas("apps/v1", "Deployment", "nd-nginx", 2)
            .await;
    }
    let namespaces: Api<Namespace> = Api::all(envs[0].client.clone());
    for env in &envs {
        namespaces
            .delete(&env.ns, &DeleteParams::background())
            .await
            .expect("namespace deleted");
    }
    for env in &envs {
        harness::wait_for("the namespace to be gone", || async {
            namespaces.get_opt(&env.ns).await.ok()?.is_none().then_some(())
        })
        .await;
    }
    // Reconciles queued by the last deletions have run by now.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let text = std::fs::read_to_string(&log).expect("manager log");
    let noise: Vec<&str> = text
        .lines()
        .filter(|l| envs.iter().any(|e| l.contains(&e.ns)))
        .filter(|l| {
            l.contains("being terminated") || l.contains("does not exist") || l.contains("re-applying")
        })
        .collect();
    assert!(
        noise.is_empty(),
        "the manager fought the namespace deletion:\n{}",
        noise.join("\n")
    );
    for env in envs {
        env.stop().await;
    }
}

/// Crash safety: the manager is killed (task aborted mid-reconcile, see
/// `Env::kill_controller`) and restarted at 20 pseudo-random moments of the galera deploy. The
/// run must still complete with exactly the expected objects, and restarts must not cause an
/// Event storm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn galera_deploy_survives_twenty_controller_kills() {
    let mut env = Env::start().await;
    env.install(&galera_dir(), "cr", BTreeMap::new()).await;
    // Deterministic pseudo-random kill moments (xorshift, fixed seed): 30–330 ms apart.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut kills = 0;
    while kills < 20 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        tokio::time::sleep(std::time::Duration::from_millis(30 + seed % 300)).await;
        env.kill_controller().await;
        kills += 1;
        env.start_controller();
    }
    let inst = env.wait_plan("cr", "deploy", "COMPLETE").await;
    let ps = &inst["status"]["planStatus"]["deploy"];
    for phase in ps["phases"].as_array().unwrap() {
        assert_eq!(phase["status"], "COMPLETE", "{phase}");
        for step in phase["steps"].as_array().unwrap() {
            assert_eq!(step["status"], "COMPLETE", "{step}");
        }
    }
    // One run from start to end: the uid admitted at install is the one that completed.
    let admitted: serde_json::Value = serde_json::from_str(
        inst["metadata"]["annotations"][kudo_controller::ADMITTED_SPEC_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert!(
        admitted["planExecution"]["planName"]
            .as_str()
            .unwrap_or("")
            .is_empty(),
        "{admitted}"
    );
    env.wait_ready_replicas("apps/v1", "StatefulSet", "cr-galera", 3)
        .await;
    // Exactly the expected objects: the bootstrap ones were cleaned up, the final ones exist.
    assert!(env.get("apps/v1", "Deployment", "cr-bootstrap").await.is_none());
    assert!(env.get("v1", "Service", "cr-bootstrap-svc").await.is_none());
    assert!(env.get("v1", "ConfigMap", "cr-bootstrap").await.is_none());
    for (av, kind, name) in [
        ("v1", "ConfigMap", "cr-nodeconfig"),
        ("v1", "ConfigMap", "cr-node-scripts"),
        ("v1", "Secret", "cr-secret"),
        ("v1", "Service", "cr-hs"),
    ] {
        assert!(env.get(av, kind, name).await.is_some(), "{kind} {name} missing");
    }
    let cm = env.get("v1", "ConfigMap", "cr-nodeconfig").await.unwrap();
    assert!(
        cm["data"]["galera.cnf"]
            .as_str()
            .unwrap()
            .contains("gcomm://cr-galera-0.cr-hs,cr-galera-1.cr-hs,cr-galera-2.cr-hs\n")
    );
    // Bound on Events: PlanStarted is published before the status write that records the start,
    // so only a kill inside that window can repeat it (at most once per kill in that window; we
    // allow 2). Every other Event object is bounded by one per restart per step transition:
    // a storm (e.g. re-publishing on every reconcile) would exceed 20 restarts x 3 easily.
    let reasons = env.event_reasons("cr").await;
    let started = reasons.iter().filter(|r| *r == "PlanStarted").count();
    assert!((1..=2).contains(&started), "PlanStarted x{started}: {reasons:?}");
    let finished = reasons.iter().filter(|r| *r == "PlanFinished").count();
    assert!(
        (1..=2).contains(&finished),
        "PlanFinished x{finished}: {reasons:?}"
    );
    assert!(reasons.len() <= 60, "{} events: {reasons:?}", reasons.len());
    env.stop().await;
}
