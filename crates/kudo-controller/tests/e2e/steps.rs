//! Whole reconciles, one at a time, against the API server in-process
//! (`kudo_apiserver::ApiServer::in_process`: no socket, the server's own semantics) driven by
//! `kudo_controller::Stepper` (the manager's reconcile without watches or queue). Each case
//! installs a small operator, steps the manager, changes the world between steps (a Deployment
//! becomes ready, a user edits the spec, an object drifts, the server fails) and checks what the
//! reconciles wrote. No kubelet runs: readiness is written by the test. Each case takes
//! milliseconds; `cargo test -p kudo-controller --test e2e steps::` runs them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kudo_apiserver::{ApiServer, Config, ErrorRule, FaultConfig, InProcess};
use kudo_controller::{ControllerConfig, Stepper};
use serde_json::{Value, json};

use crate::harness::{Pkg, ar, condition, metric, resources};

const NS: &str = "default";
const NAME: &str = "db";

/// The fields every test operator.yaml starts with, after `name:`.
macro_rules! header {
    () => {
        r#"operatorVersion: "0.1.0"
kubernetesVersion: 1.15.0
maintainers:
  - name: Test
    email: test@example.com
url: https://kudo.dev
"#
    };
}

const OPERATOR: &str = concat!(
    "apiVersion: kudo.dev/v1beta1\nname: steps\n",
    header!(),
    r#"tasks:
  - name: config
    kind: Apply
    spec:
      resources: [config.yaml]
  - name: app
    kind: Apply
    spec:
      resources: [deployment.yaml]
  - name: remove-config
    kind: Delete
    spec:
      resources: [config.yaml]
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: config
            tasks: [config]
          - name: app
            tasks: [app]
  update:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: all
            tasks: [config, app]
  backup:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: config
            tasks: [config]
  cleanup:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: remove
            tasks: [remove-config]
"#
);

const PARAMS: &str = r#"apiVersion: kudo.dev/v1beta1
parameters:
  - name: REPLICAS
    default: 1
    trigger: update
  - name: STORAGE
    default: 1Gi
    immutable: true
  - name: CONFIG_NAME
    default: config
  - name: PASSWORD
    default: none
    sensitive: true
    trigger: backup
"#;

const CONFIG: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-{{ .Params.CONFIG_NAME }}
data:
  replicas: "{{ .Params.REPLICAS }}"
"#;

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}-app
spec:
  replicas: {{ .Params.REPLICAS }}
  selector:
    matchLabels:
      app: steps
  template:
    metadata:
      labels:
        app: steps
    spec:
      containers:
        - name: app
          image: nginx:1.25
"#;

/// The test package with this operator.yaml and params.yaml, written under `dir`.
fn write_package(dir: &std::path::Path, operator: &str, params: &str) -> PathBuf {
    Pkg::new(dir, "steps")
        .operator(operator)
        .params(params)
        .template("config.yaml", CONFIG)
        .template("deployment.yaml", DEPLOYMENT)
        .write()
}

/// One in-process cluster with the KUDO CRDs, a manager to step, and the test's package.
struct World {
    server: InProcess,
    client: kube::Client,
    mgr: Stepper,
    pkg: PathBuf,
    _dir: tempfile::TempDir,
}

impl World {
    async fn new() -> World {
        World::with_operator(OPERATOR).await
    }

    async fn with_operator(operator: &str) -> World {
        let server = ApiServer::in_process(Config::default()).expect("in-process server");
        let client = kube::Client::new(server.service(), NS);
        kudo_controller::install_crds(&client, "steps", Duration::from_secs(10))
            .await
            .expect("CRDs installed");
        let dir = tempfile::tempdir().expect("tempdir");
        let pkg = write_package(dir.path(), operator, PARAMS);
        let mgr = Stepper::new(client.clone(), ControllerConfig::default());
        World {
            server,
            client,
            mgr,
            pkg,
            _dir: dir,
        }
    }

    fn api(&self, api_version: &str, kind: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), NS, &ar(api_version, kind))
    }

    async fn create(&self, obj: Value) {
        let (av, kind) = (
            obj["apiVersion"].as_str().unwrap().to_string(),
            obj["kind"].as_str().unwrap().to_string(),
        );
        let d: DynamicObject = serde_json::from_value(obj).expect("object");
        self.api(&av, &kind)
            .create(&PostParams::default(), &d)
            .await
            .expect("created");
    }

    /// Creates Operator, OperatorVersion and Instance `db` as `kubectl kudo install` does.
    async fn install(&self, params: &[(&str, &str)]) {
        let values: BTreeMap<String, String> = params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let res = resources(&self.pkg, NS, NAME, values);
        self.create(serde_json::to_value(&res.operator).unwrap()).await;
        self.create(serde_json::to_value(&res.operator_version).unwrap())
            .await;
        self.create(serde_json::to_value(&res.instance).unwrap()).await;
    }

    /// One reconcile of `db`.
    async fn step(&self) -> Result<(), kudo_controller::ReconcileError> {
        self.mgr.reconcile(NS, NAME).await
    }

    /// Reconciles until `pred` holds on the Instance (at most `n` reconciles).
    async fn step_until(&self, n: usize, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..n {
            let _ = self.step().await;
            let inst = self.instance().await;
            if pred(&inst) {
                return inst;
            }
        }
        panic!(
            "{what}: not reached in {n} reconciles: {:#}",
            self.instance().await
        );
    }

    async fn get(&self, api_version: &str, kind: &str, name: &str) -> Option<Value> {
        let got = self.api(api_version, kind).get_opt(name).await.expect("get");
        got.map(|o| serde_json::to_value(o).unwrap())
    }

    async fn instance(&self) -> Value {
        self.get("kudo.dev/v1beta1", "Instance", NAME)
            .await
            .expect("instance exists")
    }

    /// A user's change of the Instance, then one reconcile; the Instance after it.
    async fn change(&self, patch: Value) -> Value {
        self.patch_instance(patch).await;
        self.step().await.expect("reconcile");
        self.instance().await
    }

    async fn patch_instance(&self, patch: Value) {
        self.api("kudo.dev/v1beta1", "Instance")
            .patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("instance patched");
    }

    /// The Deployment reports all its replicas ready (what the kubelet and controllers would do).
    async fn ready(&self, name: &str) {
        let d = self
            .get("apps/v1", "Deployment", name)
            .await
            .expect("deployment exists");
        let n = d["spec"]["replicas"].as_i64().unwrap_or(1);
        let status = json!({"status": {
            "observedGeneration": d["metadata"]["generation"], "replicas": n, "readyReplicas": n,
            "updatedReplicas": n, "availableReplicas": n,
        }});
        self.api("apps/v1", "Deployment")
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("status patched");
    }

    /// `(type, reason)` of the Instance's Events, oldest first.
    async fn events(&self) -> Vec<(String, String)> {
        let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(self.client.clone(), NS);
        let mut evs = api.list(&Default::default()).await.expect("events").items;
        evs.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
        evs.into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(NAME))
            .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default()))
            .collect()
    }

    /// Whether an Event of this type and reason was published on the Instance.
    async fn saw_event(&self, type_: &str, reason: &str) -> bool {
        self.events().await.iter().any(|(t, r)| t == type_ && r == reason)
    }

    fn requests(&self, verb: &str) -> f64 {
        metric(
            &self.mgr.metrics().encode(),
            &format!("kudo_api_requests_total{{verb=\"{verb}\"}}"),
        )
        .unwrap_or(0.0)
    }
}

fn plan(inst: &Value, name: &str) -> String {
    inst["status"]["planStatus"][name]["status"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn step_status(inst: &Value, plan: &str, step: &str) -> String {
    let phases = inst["status"]["planStatus"][plan]["phases"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    phases
        .iter()
        .flat_map(|p| p["steps"].as_array().cloned().unwrap_or_default())
        .find(|s| s["name"] == step)
        .map(|s| s["status"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// Installed with the defaults and reconciled once: deploy IN_PROGRESS, waiting for the
/// Deployment.
async fn installed() -> World {
    let w = World::new().await;
    w.install(&[]).await;
    w.step().await.expect("reconcile");
    w
}

/// Installed and deployed: deploy COMPLETE.
async fn deployed() -> World {
    deployed_with(OPERATOR).await
}

/// [`deployed`] with another operator.yaml.
async fn deployed_with(operator: &str) -> World {
    let w = World::with_operator(operator).await;
    w.install(&[]).await;
    w.step().await.expect("reconcile");
    w.ready("db-app").await;
    w.step_until(3, "deploy COMPLETE", |i| plan(i, "deploy") == "COMPLETE")
        .await;
    w
}

#[tokio::test]
async fn first_deploy_applies_the_first_steps_objects_and_waits_for_the_deployment() {
    let w = installed().await;
    let inst = w.instance().await;
    assert_eq!(plan(&inst, "deploy"), "IN_PROGRESS");
    assert_eq!(step_status(&inst, "deploy", "config"), "COMPLETE");
    assert_eq!(step_status(&inst, "deploy", "app"), "IN_PROGRESS");
    let cm = w
        .get("v1", "ConfigMap", "db-config")
        .await
        .expect("config applied");
    assert_eq!(cm["data"]["replicas"], "1");
    assert_eq!(cm["metadata"]["labels"]["heritage"], "kudo");
    let d = w
        .get("apps/v1", "Deployment", "db-app")
        .await
        .expect("deployment applied");
    assert_eq!(d["metadata"]["ownerReferences"][0]["kind"], "Instance");
    assert!(
        inst["metadata"]["finalizers"]
            .to_string()
            .contains("kudo.dev.instance.cleanup")
    );
}

#[tokio::test]
async fn the_plan_completes_when_the_deployment_is_ready_and_the_instance_becomes_ready() {
    let w = deployed().await;
    let inst = w.instance().await;
    assert_eq!(step_status(&inst, "deploy", "app"), "COMPLETE");
    let inst = w
        .step_until(2, "Ready", |i| {
            condition(i, "Ready").is_some_and(|c| c["status"] == "True")
        })
        .await;
    assert_eq!(plan(&inst, "deploy"), "COMPLETE");
    let reasons: Vec<String> = w.events().await.into_iter().map(|e| e.1).collect();
    assert!(reasons.contains(&"PlanStarted".to_string()), "{reasons:?}");
    assert!(reasons.contains(&"PlanFinished".to_string()), "{reasons:?}");
}

#[tokio::test]
async fn a_deployment_that_is_not_ready_keeps_the_step_in_progress() {
    let w = World::new().await;
    w.install(&[]).await;
    for _ in 0..3 {
        w.step().await.expect("reconcile");
    }
    let inst = w.instance().await;
    assert_eq!(step_status(&inst, "deploy", "app"), "IN_PROGRESS");
    assert_eq!(plan(&inst, "deploy"), "IN_PROGRESS");
}

#[tokio::test]
async fn a_parameter_update_runs_its_trigger_plan_with_the_new_value() {
    let w = deployed().await;
    let inst = w.change(json!({"spec": {"parameters": {"REPLICAS": "3"}}})).await;
    // The run is admitted; its status is written with its first waiting lines or its end.
    assert_eq!(inst["spec"]["planExecution"]["planName"], "update", "{inst}");
    assert_eq!(inst["spec"]["planExecution"]["status"], "IN_PROGRESS", "{inst}");
    let d = w.get("apps/v1", "Deployment", "db-app").await.unwrap();
    assert_eq!(d["spec"]["replicas"], 3);
    w.ready("db-app").await;
    w.step_until(3, "update COMPLETE", |i| plan(i, "update") == "COMPLETE")
        .await;
    let cm = w.get("v1", "ConfigMap", "db-config").await.unwrap();
    assert_eq!(cm["data"]["replicas"], "3");
}

#[tokio::test]
async fn an_immutable_parameter_change_is_refused_with_a_condition_and_an_event() {
    let w = deployed().await;
    let inst = w
        .change(json!({"spec": {"parameters": {"STORAGE": "5Gi"}}}))
        .await;
    let c = condition(&inst, "ChangeAccepted").expect("ChangeAccepted condition");
    assert_eq!(c["status"], "False");
    assert!(c["message"].as_str().unwrap().contains("STORAGE"), "{c}");
    assert!(w.saw_event("Warning", "ChangeDenied").await);
    assert_eq!(plan(&inst, "update"), "NEVER_RUN");
}

#[tokio::test]
async fn an_unknown_parameter_is_refused() {
    let w = deployed().await;
    let inst = w.change(json!({"spec": {"parameters": {"NOPE": "1"}}})).await;
    let c = condition(&inst, "ChangeAccepted").expect("condition");
    assert_eq!(c["status"], "False");
    assert!(c["message"].as_str().unwrap().contains("NOPE"), "{c}");
}

#[tokio::test]
async fn an_object_the_server_refuses_fails_the_plan_fatally() {
    let w = World::new().await;
    w.install(&[("CONFIG_NAME", "Not_A_Name")]).await;
    w.step().await.expect("reconcile");
    let inst = w.instance().await;
    assert_eq!(plan(&inst, "deploy"), "FATAL_ERROR");
    // The step that failed says why (the server's 422 message names the bad name).
    let msg = inst["status"]["planStatus"]["deploy"]["phases"].to_string();
    assert!(msg.contains("Not_A_Name"), "{msg}");
    assert!(
        w.get("apps/v1", "Deployment", "db-app").await.is_none(),
        "later steps do not run"
    );
}

#[tokio::test]
async fn server_errors_are_retried_and_the_plan_goes_on() {
    let w = World::new().await;
    w.install(&[]).await;
    w.server
        .faults()
        .set(FaultConfig {
            errors: vec!["patch:500:1".parse::<ErrorRule>().unwrap()],
            ..Default::default()
        })
        .unwrap();
    assert!(
        w.step().await.is_err(),
        "a failed status write fails the reconcile (retried)"
    );
    assert!(w.get("v1", "ConfigMap", "db-config").await.is_none());
    w.server.faults().clear();
    w.step().await.expect("reconcile");
    let inst = w.instance().await;
    assert_eq!(step_status(&inst, "deploy", "config"), "COMPLETE");
    assert_ne!(plan(&inst, "deploy"), "FATAL_ERROR");
}

/// Deployed, with drift policy `policy` (none: the default, repair), idle once; then the
/// ConfigMap's data is changed outside the plan and the manager reconciles once more.
async fn drifted(policy: Option<&str>) -> World {
    let w = deployed().await;
    if let Some(p) = policy {
        w.patch_instance(json!({"metadata": {"annotations": {"kudo-rs.dev/drift-policy": p}}}))
            .await;
    }
    w.step().await.expect("idle reconcile");
    let change = json!({"data": {"replicas": "99"}});
    w.api("v1", "ConfigMap")
        .patch("db-config", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap();
    w.step().await.expect("idle reconcile");
    w
}

async fn config_replicas(w: &World) -> Value {
    w.get("v1", "ConfigMap", "db-config").await.unwrap()["data"]["replicas"].clone()
}

#[tokio::test]
async fn a_drifted_object_is_applied_again_when_idle() {
    let w = drifted(None).await;
    assert_eq!(config_replicas(&w).await, "1");
    assert!(w.saw_event("Normal", "DriftRepaired").await);
}

#[tokio::test]
async fn drift_policy_ignore_leaves_changed_objects_alone() {
    let w = drifted(Some("ignore")).await;
    assert_eq!(config_replicas(&w).await, "99");
}

#[tokio::test]
async fn drift_policy_report_says_what_drifted_and_repairs_nothing() {
    let w = drifted(Some("report")).await;
    let inst = w.instance().await;
    let c = condition(&inst, "Drifted").expect("Drifted condition");
    assert!(c["message"].as_str().unwrap().contains("db-config"), "{c}");
    assert_eq!(config_replicas(&w).await, "99");
}

#[tokio::test]
async fn a_missing_operator_version_is_said_on_the_instance() {
    let w = World::new().await;
    let res = resources(&w.pkg, NS, NAME, BTreeMap::new());
    w.create(serde_json::to_value(&res.instance).unwrap()).await;
    w.step().await.expect("reconcile");
    let inst = w.instance().await;
    let c = condition(&inst, "Ready").expect("Ready condition");
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("False"), Some("OperatorVersionNotFound"))
    );
    // Created later, it is picked up.
    w.create(serde_json::to_value(&res.operator_version).unwrap())
        .await;
    w.step().await.expect("reconcile");
    assert_eq!(plan(&w.instance().await, "deploy"), "IN_PROGRESS");
}

#[tokio::test]
async fn a_restarted_manager_continues_the_plan_from_the_instance() {
    let w = installed().await;
    let uid = w.instance().await["status"]["planStatus"]["deploy"]["uid"].clone();
    // A fresh manager: no memory but the Instance.
    let fresh = Stepper::new(w.client.clone(), ControllerConfig::default());
    w.ready("db-app").await;
    fresh.reconcile(NS, NAME).await.expect("reconcile");
    let inst = w.instance().await;
    assert_eq!(plan(&inst, "deploy"), "COMPLETE");
    assert_eq!(
        inst["status"]["planStatus"]["deploy"]["uid"], uid,
        "the same run, not a new one"
    );
}

#[tokio::test]
async fn deletion_runs_the_cleanup_plan_then_releases_the_instance() {
    let w = deployed().await;
    w.api("kudo.dev/v1beta1", "Instance")
        .delete(NAME, &DeleteParams::background())
        .await
        .unwrap();
    // The ConfigMap goes through the server's foreground deletion: a few reconciles.
    for _ in 0..10 {
        let _ = w.step().await;
        if w.get("kudo.dev/v1beta1", "Instance", NAME).await.is_none() {
            break;
        }
    }
    assert!(
        w.get("kudo.dev/v1beta1", "Instance", NAME).await.is_none(),
        "released"
    );
    assert!(
        w.get("v1", "ConfigMap", "db-config").await.is_none(),
        "cleanup deleted it"
    );
}

#[tokio::test]
async fn deletion_without_a_cleanup_plan_holds_nothing() {
    let w = World::with_operator(&OPERATOR.replace("  cleanup:", "  unused:")).await;
    w.install(&[]).await;
    w.step().await.expect("reconcile");
    let inst = w.instance().await;
    assert!(
        !inst["metadata"]["finalizers"]
            .to_string()
            .contains("kudo.dev.instance.cleanup")
    );
    w.api("kudo.dev/v1beta1", "Instance")
        .delete(NAME, &DeleteParams::background())
        .await
        .unwrap();
    assert!(w.get("kudo.dev/v1beta1", "Instance", NAME).await.is_none());
}

#[tokio::test]
async fn a_direct_plan_trigger_runs_that_plan() {
    let w = deployed().await;
    w.change(json!({"spec": {"planExecution": {"planName": "backup"}}}))
        .await;
    let inst = w
        .step_until(3, "backup COMPLETE", |i| plan(i, "backup") == "COMPLETE")
        .await;
    assert_eq!(plan(&inst, "deploy"), "COMPLETE");
}

#[tokio::test]
async fn first_deploy_request_budget() {
    let w = installed().await;
    // Writes of the first reconcile: the admission, two server-side applies, the status, the
    // spec (run state) — and Events. Pinned so a change in the request count is seen.
    let writes = w.requests("patch") + w.requests("create") + w.requests("update");
    assert!(writes <= 8.0, "writes {writes}: {}", w.mgr.metrics().encode());
}

/// Writes `status.schedules.backup` as a previous reconcile would have: the last occurrence
/// `ago` seconds back.
async fn last_backup(w: &World, ago: i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let t = kudo_engine::Timestamp::from_unix(now.as_secs() as i64 - ago);
    let st = json!({"status": {"schedules": {"backup": {
        "lastScheduleTime": t.to_string()
    }}}});
    w.api("kudo.dev/v1beta1", "Instance")
        .patch_status(NAME, &PatchParams::default(), &Patch::Merge(&st))
        .await
        .expect("status patched");
}

fn scheduled() -> String {
    OPERATOR.replace("  backup:\n", "  backup:\n    schedule: \"@every 1m\"\n")
}

#[tokio::test]
async fn a_due_schedule_starts_its_plan_with_an_event() {
    let w = deployed_with(&scheduled()).await;
    w.step().await.expect("idle reconcile");
    last_backup(&w, 120).await;
    let inst = w
        .step_until(3, "backup COMPLETE", |i| plan(i, "backup") == "COMPLETE")
        .await;
    assert!(
        inst["status"]["schedules"]["backup"]["nextScheduleTime"].is_string(),
        "{inst}"
    );
    assert!(w.saw_event("Normal", "PlanStarted").await);
}

#[tokio::test]
async fn a_due_schedule_while_a_plan_runs_is_skipped_and_said() {
    let w = World::with_operator(&scheduled()).await;
    w.install(&[]).await;
    w.step().await.expect("reconcile");
    last_backup(&w, 120).await;
    w.step().await.expect("reconcile");
    let inst = w.instance().await;
    assert_eq!(plan(&inst, "backup"), "NEVER_RUN");
    assert!(w.saw_event("Normal", "ScheduledPlanSkipped").await);
}

#[tokio::test]
async fn a_rotated_secret_runs_the_parameters_trigger_plan_once() {
    let w = World::new().await;
    let creds = |pw: &str| {
        json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds", "namespace": NS}, "stringData": {"pw": pw}})
    };
    w.create(creds("one")).await;
    let res = resources(&w.pkg, NS, NAME, BTreeMap::new());
    w.create(serde_json::to_value(&res.operator).unwrap()).await;
    w.create(serde_json::to_value(&res.operator_version).unwrap())
        .await;
    let mut inst = serde_json::to_value(&res.instance).unwrap();
    inst["spec"]["parameterSources"] = json!({"PASSWORD": {"secretKeyRef": {"name": "creds", "key": "pw"}}});
    w.create(inst).await;
    w.step().await.expect("reconcile");
    w.ready("db-app").await;
    w.step_until(3, "deploy COMPLETE", |i| plan(i, "deploy") == "COMPLETE")
        .await;
    w.step().await.expect("idle reconcile");
    assert_eq!(plan(&w.instance().await, "backup"), "NEVER_RUN");
    w.api("v1", "Secret")
        .patch(
            "creds",
            &PatchParams::default(),
            &Patch::Merge(&json!({"stringData": {"pw": "two"}})),
        )
        .await
        .unwrap();
    let done = w
        .step_until(3, "backup COMPLETE", |i| plan(i, "backup") == "COMPLETE")
        .await;
    let uid = done["status"]["planStatus"]["backup"]["uid"].clone();
    assert!(w.saw_event("Normal", "ParameterRotated").await);
    for _ in 0..3 {
        w.step().await.expect("idle reconcile");
    }
    assert_eq!(
        w.instance().await["status"]["planStatus"]["backup"]["uid"],
        uid,
        "run once"
    );
}

#[tokio::test]
async fn an_upgrade_runs_against_the_new_operator_version() {
    let w = deployed().await;
    let upgraded = OPERATOR.replace("operatorVersion: \"0.1.0\"", "operatorVersion: \"0.2.0\"");
    let dir = tempfile::tempdir().unwrap();
    let params = PARAMS.replace("default: config", "default: config2");
    let pkg = write_package(dir.path(), &upgraded, &params);
    let res = resources(&pkg, NS, NAME, BTreeMap::new());
    let ov = serde_json::to_value(&res.operator_version).unwrap();
    let ov_name = ov["metadata"]["name"].as_str().unwrap().to_string();
    w.create(ov).await;
    w.change(json!({"spec": {"operatorVersion": {"name": ov_name}}}))
        .await;
    w.ready("db-app").await;
    let inst = w
        .step_until(3, "deploy COMPLETE again", |i| {
            i["status"]["planStatus"]["deploy"]["status"] == "COMPLETE"
                && i["spec"]["planExecution"]["planName"].is_null()
        })
        .await;
    assert!(
        w.get("v1", "ConfigMap", "db-config2").await.is_some(),
        "rendered by 0.2.0: {inst}"
    );
}

#[tokio::test]
async fn a_cancelled_run_stops_at_its_next_task_boundary() {
    let w = installed().await;
    let inst = w.change(kudo_engine::reconcile::cancel_patch()).await;
    assert_eq!(plan(&inst, "deploy"), "CANCELLED");
    w.ready("db-app").await;
    w.step().await.expect("reconcile");
    assert_eq!(
        plan(&w.instance().await, "deploy"),
        "CANCELLED",
        "nothing resumes it"
    );
}

#[tokio::test]
async fn a_trigger_while_a_plan_runs_is_refused() {
    let w = installed().await;
    let inst = w
        .change(kudo_engine::reconcile::trigger_patch("backup", "t1", None))
        .await;
    assert_eq!(condition(&inst, "ChangeAccepted").unwrap()["status"], "False");
    assert_eq!(plan(&inst, "backup"), "NEVER_RUN");
}

#[tokio::test]
async fn fixing_the_parameter_of_a_failed_run_runs_its_trigger_plan() {
    let w = World::new().await;
    w.install(&[("CONFIG_NAME", "Bad_Name")]).await;
    w.step().await.expect("reconcile");
    assert_eq!(plan(&w.instance().await, "deploy"), "FATAL_ERROR");
    w.change(json!({"spec": {"parameters": {"CONFIG_NAME": "fixed"}}}))
        .await;
    w.ready("db-app").await;
    // KUDO's rule: a parameter without a trigger runs `update` when the operator has one.
    let inst = w
        .step_until(3, "update COMPLETE", |i| plan(i, "update") == "COMPLETE")
        .await;
    assert_eq!(
        plan(&inst, "deploy"),
        "FATAL_ERROR",
        "the failed run stays as it ended"
    );
    assert!(w.get("v1", "ConfigMap", "db-fixed").await.is_some());
}

#[tokio::test]
async fn a_step_past_its_timeout_fails_the_plan() {
    let with_timeout = OPERATOR.replacen(
        "          - name: app\n            tasks: [app]",
        "          - name: app\n            timeout: 10m\n            tasks: [app]",
        1,
    );
    let w = World::with_operator(&with_timeout).await;
    w.install(&[]).await;
    w.step().await.expect("reconcile");
    // The step started an hour ago, as a manager that ran then would have recorded it: the
    // timing lives in the Instance, so this is what a restart mid-plan finds too.
    let inst = w.instance().await;
    let uid = inst["status"]["planStatus"]["deploy"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let hour_ago = kudo_engine::Timestamp::from_unix(now.as_secs() as i64 - 3600).to_string();
    let timing = json!({"uid": uid, "planStarted": hour_ago, "steps": {"main": {"app": hour_ago}}});
    let annotation = json!({"metadata": {"annotations": {"kudo-rs.dev/plan-timing": timing.to_string()}}});
    let inst = w.change(annotation).await;
    assert_eq!(plan(&inst, "deploy"), "FATAL_ERROR", "{inst}");
    assert!(w.saw_event("Warning", "StepTimeout").await);
}

#[tokio::test]
async fn a_kudo_operator_task_creates_the_child_instance() {
    let parent = concat!(
        "apiVersion: kudo.dev/v1beta1\nname: parent\n",
        header!(),
        r#"tasks:
  - name: child
    kind: KudoOperator
    spec:
      package: steps
      operatorVersion: "0.1.0"
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: child
            tasks: [child]
"#
    );
    let w = World::with_operator(parent).await;
    // The dependency as `kubectl kudo install` leaves it: Operator and OperatorVersion only.
    let dir = tempfile::tempdir().unwrap();
    let child_pkg = write_package(dir.path(), OPERATOR, PARAMS);
    let child = resources(&child_pkg, NS, "unused", BTreeMap::new());
    w.create(serde_json::to_value(&child.operator).unwrap()).await;
    w.create(serde_json::to_value(&child.operator_version).unwrap())
        .await;
    w.install(&[]).await;
    w.step().await.expect("reconcile");
    let inst = w.instance().await;
    // Running: the admission stored the run; its status tree is written with the step's first
    // waiting lines (the child is not ready within the grace).
    assert_eq!(inst["spec"]["planExecution"]["planName"], "deploy", "{inst}");
    assert_eq!(inst["spec"]["planExecution"]["status"], "IN_PROGRESS", "{inst}");
    let api = w.api("kudo.dev/v1beta1", "Instance");
    let children: Vec<String> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|i| i.metadata.name.as_deref() != Some(NAME))
        .filter_map(|i| i.metadata.name)
        .collect();
    assert_eq!(children.len(), 1, "{children:?}");
    let kid = w.get("kudo.dev/v1beta1", "Instance", &children[0]).await.unwrap();
    assert_eq!(kid["metadata"]["ownerReferences"][0]["name"], NAME);
    assert_eq!(kid["spec"]["operatorVersion"]["name"], "steps-0.1.0");
}

// ---- what the status says to kstatus and `kubectl wait` ----------------------------------------

use kudo_testkit::kstatus::{Status as Kstatus, compute as kstatus};

/// `status.observedGeneration` equals `metadata.generation`, and no condition claims more.
fn says_its_generation(inst: &Value) {
    let generation = inst["metadata"]["generation"].as_i64().unwrap();
    assert_eq!(inst["status"]["observedGeneration"], generation, "{inst:#}");
    for c in inst["status"]["conditions"].as_array().into_iter().flatten() {
        let observed = c["observedGeneration"].as_i64().unwrap_or(0);
        assert!(
            observed <= generation,
            "{c} claims more than generation {generation}"
        );
    }
}

#[tokio::test]
async fn the_first_reconcile_writes_a_status_that_says_the_run_goes_on() {
    let w = installed().await;
    let inst = w.instance().await;
    says_its_generation(&inst);
    let c = condition(&inst, "Reconciling").expect("Reconciling");
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("True"), Some("deploy"))
    );
    assert_eq!(c["message"], "plan deploy, phase main, step app");
    assert_eq!(kstatus(&inst), Kstatus::InProgress);
}

#[tokio::test]
async fn the_end_is_written_after_the_unscheduling_with_its_generation() {
    let w = deployed().await;
    let inst = w.instance().await;
    says_its_generation(&inst);
    assert!(inst["spec"]["planExecution"]["planName"].is_null(), "{inst:#}");
    let ready = condition(&inst, "Ready").expect("Ready");
    assert_eq!(ready["status"], "True");
    assert_eq!(ready["observedGeneration"], inst["metadata"]["generation"]);
    assert!(condition(&inst, "Reconciling").is_none(), "{inst:#}");
    assert_eq!(kstatus(&inst), Kstatus::Current);
    let record = inst["metadata"]["annotations"][kudo_engine::reconcile::ENDED_RUN_ANNOTATION]
        .as_str()
        .expect("the unscheduling records the run");
    let recorded: Value = serde_json::from_str(record).unwrap();
    assert_eq!(recorded, inst["status"]["planStatus"]["deploy"]);
}

#[tokio::test]
async fn a_failed_run_stalls_naming_its_step_and_error() {
    let w = World::new().await;
    w.install(&[("CONFIG_NAME", "Not_A_Name")]).await;
    w.step().await.expect("reconcile");
    let inst = w.instance().await;
    says_its_generation(&inst);
    let c = condition(&inst, "Stalled").expect("Stalled");
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("True"), Some("PlanInFatalError"))
    );
    let msg = c["message"].as_str().unwrap();
    assert!(msg.starts_with("plan deploy, phase main, step config: "), "{msg}");
    assert!(msg.contains("Not_A_Name"), "{msg}");
    assert_eq!(kstatus(&inst), Kstatus::Failed);
}

#[tokio::test]
async fn an_update_is_in_progress_from_the_users_write_to_its_end() {
    let w = deployed().await;
    w.patch_instance(json!({"spec": {"parameters": {"REPLICAS": "3"}}}))
        .await;
    assert_eq!(
        kstatus(&w.instance().await),
        Kstatus::InProgress,
        "before the manager saw it"
    );
    w.step().await.expect("reconcile");
    let inst = w.instance().await;
    assert_eq!(inst["spec"]["planExecution"]["planName"], "update", "{inst:#}");
    assert_eq!(kstatus(&inst), Kstatus::InProgress, "{inst:#}");
    let ready = condition(&inst, "Ready").unwrap();
    assert!(
        ready["observedGeneration"].as_i64() < inst["metadata"]["generation"].as_i64(),
        "kubectl wait --for=condition=Ready must not return yet: {ready}"
    );
    w.ready("db-app").await;
    let inst = w
        .step_until(3, "update COMPLETE", |i| plan(i, "update") == "COMPLETE")
        .await;
    says_its_generation(&inst);
    assert_eq!(kstatus(&inst), Kstatus::Current);
}

#[tokio::test]
async fn a_refused_change_stalls_and_leaves_ready_on_the_generation_it_judged() {
    let w = deployed().await;
    let before = condition(&w.instance().await, "Ready").unwrap().clone();
    let inst = w
        .change(json!({"spec": {"parameters": {"STORAGE": "5Gi"}}}))
        .await;
    says_its_generation(&inst);
    let c = condition(&inst, "Stalled").expect("Stalled");
    assert_eq!(c["reason"], "ChangeDenied");
    assert!(c["message"].as_str().unwrap().contains("STORAGE"), "{c}");
    assert_eq!(
        condition(&inst, "Ready").unwrap()["observedGeneration"],
        before["observedGeneration"]
    );
    assert_eq!(kstatus(&inst), Kstatus::Failed);
}

#[tokio::test]
async fn the_end_of_a_run_whose_status_write_was_lost_is_restored() {
    let w = deployed().await;
    let done = w.instance().await;
    // As a manager stopped between the unscheduling and the status write leaves it.
    let mut lost = done["status"]["planStatus"]["deploy"].clone();
    lost["status"] = json!("IN_PROGRESS");
    lost["phases"][0]["status"] = json!("IN_PROGRESS");
    lost["phases"][0]["steps"][1]["status"] = json!("IN_PROGRESS");
    w.api("kudo.dev/v1beta1", "Instance")
        .patch_status(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"planStatus": {"deploy": lost}}})),
        )
        .await
        .expect("status patched");
    w.step().await.expect("reconcile");
    let inst = w.instance().await;
    assert_eq!(
        inst["status"]["planStatus"]["deploy"],
        done["status"]["planStatus"]["deploy"]
    );
    assert_eq!(kstatus(&inst), Kstatus::Current);
}

#[tokio::test]
async fn a_new_instance_is_in_progress_after_its_first_reconcile() {
    // One step that waits at once: the first pass only starts the run.
    let w = World::with_operator(&OPERATOR.replace(
        "          - name: config\n            tasks: [config]\n          - name: app\n",
        "          - name: app\n",
    ))
    .await;
    w.install(&[]).await;
    w.step().await.expect("reconcile");
    let inst = w.instance().await;
    assert_eq!(inst["spec"]["planExecution"]["planName"], "deploy", "{inst:#}");
    // Written although only the start happened: without it kstatus reads the Instance as ready.
    says_its_generation(&inst);
    let c = condition(&inst, "Reconciling").expect("Reconciling");
    assert_eq!(c["message"], "plan deploy, phase main, step app");
    assert_eq!(kstatus(&inst), Kstatus::InProgress);
}
