//! Least privilege: an Instance's objects are applied as its ServiceAccount, and what
//! the account may not do fails the step FATAL with the API server's 403, on the embedded API
//! server (which enforces RBAC for impersonated identities) and on the real control plane.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use kudo_controller::ControllerConfig;
use serde_json::json;

use crate::harness::{self, Env, Pkg};

/// Steps `first`, `risky`, `after`, one ConfigMap each except `risky`, whose object the
/// parameter CASE chooses: `crb` a ClusterRoleBinding to cluster-admin, `escalate` a
/// RoleBinding to cluster-admin in the Instance's namespace, `elsewhere` a Deployment that names
/// another namespace (`OTHER`), anything else a ConfigMap.
fn tenant_package(dir: &Path) -> PathBuf {
    let step = |n: &str| format!("          - name: {n}\n            tasks: [{n}]\n");
    let task = |n: &str| format!("  - name: {n}\n    kind: Apply\n    spec:\n      resources: [{n}.yaml]\n");
    let cm = |n: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ .Name }}}}-{n}\ndata:\n  step: {n}\n"
        )
    };
    let operator = format!(
        "apiVersion: kudo.dev/v1beta1\nname: tenant\noperatorVersion: \"0.1.0\"\ntasks:\n{}{}{}plans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n{}{}{}",
        task("first"),
        task("risky"),
        task("after"),
        step("first"),
        step("risky"),
        step("after")
    );
    let risky = r#"{{ if eq .Params.CASE "crb" }}apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .Namespace }}-{{ .Name }}-root
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
  - kind: ServiceAccount
    name: default
    namespace: {{ .Namespace }}
{{ else if eq .Params.CASE "escalate" }}apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .Name }}-root
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
  - kind: ServiceAccount
    name: default
    namespace: {{ .Namespace }}
{{ else if eq .Params.CASE "elsewhere" }}apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}-web
  namespace: {{ .Params.OTHER }}
spec:
  replicas: 0
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx
{{ else }}apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-risky
{{ end }}"#;
    Pkg::new(dir, "tenant")
        .operator(&operator)
        .params("apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: CASE\n    default: none\n  - name: OTHER\n    default: default\n")
        .template("first.yaml", &cm("first"))
        .template("risky.yaml", risky)
        .template("after.yaml", &cm("after"))
        .write()
}

async fn create_account(env: &Env, name: &str, cluster_role: &str) {
    let sas: Api<ServiceAccount> = Api::namespaced(env.client.clone(), &env.ns);
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    sas.create(&PostParams::default(), &sa)
        .await
        .expect("service account");
    let rbs: Api<RoleBinding> = Api::namespaced(env.client.clone(), &env.ns);
    let rb: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-{cluster_role}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": env.ns}]
    }))
    .unwrap();
    rbs.create(&PostParams::default(), &rb)
        .await
        .expect("role binding");
}

/// Installs the Instance with `params` and `spec.serviceAccountName = account` ("" for none).
async fn install_as(env: &Env, pkg: &Path, instance: &str, account: &str, params: &[(&str, &str)]) {
    let params: BTreeMap<String, String> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut res = harness::resources(pkg, &env.ns, instance, params);
    res.instance.spec.service_account_name = account.to_string();
    env.create(serde_json::to_value(&res.instance).unwrap()).await;
}

/// The message of the FATAL `risky` step, once the plan is FATAL_ERROR.
async fn fatal_message(env: &Env, instance: &str) -> String {
    let inst = env.wait_plan(instance, "deploy", "FATAL_ERROR").await;
    let steps = &inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"];
    assert_eq!(steps[0]["status"], "COMPLETE", "{inst}");
    assert_eq!(steps[1]["status"], "FATAL_ERROR", "{inst}");
    assert_ne!(steps[2]["status"], "COMPLETE", "{inst}");
    steps[1]["message"].as_str().unwrap_or_default().to_string()
}

fn has_event_with(events: &[(String, String)], needle: &str) -> bool {
    events.iter().any(|(_, note)| note.contains(needle))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_can_do_no_more_than_its_service_account() {
    an_instance_can_do_no_more_than_its_service_account_on(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_an_instance_can_do_no_more_than_its_service_account() {
    an_instance_can_do_no_more_than_its_service_account_on(Env::real().await).await;
}

async fn an_instance_can_do_no_more_than_its_service_account_on(env: Env) {
    let dir = tempfile::tempdir().unwrap();
    let pkg = tenant_package(dir.path());
    env.install_operator(&pkg).await;
    create_account(&env, "tenant", "edit").await;
    let other = format!("{}-other", env.ns);
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": other}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("other namespace");
    let user = format!("system:serviceaccount:{}:tenant", env.ns);

    // Allowed objects work as the account.
    install_as(&env, &pkg, "fine", "tenant", &[]).await;
    env.wait_plan("fine", "deploy", "COMPLETE").await;
    for step in ["first", "risky", "after"] {
        assert!(
            env.get("v1", "ConfigMap", &format!("fine-{step}"))
                .await
                .is_some()
        );
    }

    // (a) A ClusterRoleBinding to cluster-admin: 403 naming the account, verb and resource (the
    // read that precedes a first apply, which checks whose the object is).
    install_as(&env, &pkg, "crb", "tenant", &[("CASE", "crb")]).await;
    let msg = fatal_message(&env, "crb").await;
    for needle in [
        user.as_str(),
        "forbidden",
        "\"clusterrolebindings\"",
        "cannot get",
    ] {
        assert!(msg.contains(needle), "{needle:?} not in {msg}");
    }
    let crbs: Api<ClusterRoleBinding> = Api::all(env.client.clone());
    let crb_name = format!("{}-crb-root", env.ns);
    assert!(crbs.get_opt(&crb_name).await.unwrap().is_none());
    assert!(
        env.get("v1", "ConfigMap", "crb-after").await.is_none(),
        "nothing after the denied step"
    );
    assert!(
        has_event_with(&env.events("crb").await, "forbidden"),
        "an Event says why"
    );

    // A RoleBinding to cluster-admin in its own namespace: RBAC's escalation check refuses it.
    install_as(&env, &pkg, "esc", "tenant", &[("CASE", "escalate")]).await;
    let msg = fatal_message(&env, "esc").await;
    assert!(msg.contains(&user) && msg.contains("forbidden"), "{msg}");
    assert!(
        env.get("rbac.authorization.k8s.io/v1", "RoleBinding", "esc-root")
            .await
            .is_none()
    );

    // (b) A Deployment naming another namespace lands in the Instance's own (KUDO forces
    // namespaced objects into it): the other namespace holds nothing.
    install_as(
        &env,
        &pkg,
        "away",
        "tenant",
        &[("CASE", "elsewhere"), ("OTHER", &other)],
    )
    .await;
    env.wait_plan("away", "deploy", "COMPLETE").await;
    assert!(env.get("apps/v1", "Deployment", "away-web").await.is_some());
    let elsewhere: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(env.client.clone(), &other);
    assert!(elsewhere.get_opt("away-web").await.unwrap().is_none());

    // An account that does not exist is a plan error, not the manager's identity.
    install_as(&env, &pkg, "ghost", "nobody", &[]).await;
    let inst = env.wait_plan("ghost", "deploy", "FATAL_ERROR").await;
    let step = &inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0];
    let want = format!(
        "ServiceAccount {}/nobody not found: the Instance's objects are applied as this account",
        env.ns
    );
    assert!(
        step["message"].as_str().unwrap_or_default().ends_with(&want),
        "{inst}"
    );
    assert!(env.get("v1", "ConfigMap", "ghost-first").await.is_none());

    let _ = namespaces.delete(&other, &DeleteParams::background()).await;
    env.stop().await;
}

/// `manager --default-service-account`: an Instance without an account of its own is applied as
/// the default one of its namespace; the account missing is a plan error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_service_account_locks_down_instances_without_one() {
    let env = Env::start_bare(kudo_sim::SimConfig::default()).await;
    let ctl = env
        .spawn_controller(
            ControllerConfig {
                default_service_account: Some("kudo-instance".into()),
                ..ControllerConfig::default()
            },
            false,
        )
        .await;
    let dir = tempfile::tempdir().unwrap();
    let pkg = tenant_package(dir.path());
    env.install_operator(&pkg).await;

    install_as(&env, &pkg, "early", "", &[]).await;
    let inst = env.wait_plan("early", "deploy", "FATAL_ERROR").await;
    let msg = inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let want = format!(
        "ServiceAccount {}/kudo-instance not found: the Instance's objects are applied as this account",
        env.ns
    );
    assert!(msg.ends_with(&want), "{msg}");

    create_account(&env, "kudo-instance", "edit").await;
    install_as(&env, &pkg, "crb", "", &[("CASE", "crb")]).await;
    let msg = fatal_message(&env, "crb").await;
    assert!(
        msg.contains(&format!("system:serviceaccount:{}:kudo-instance", env.ns)),
        "{msg}"
    );
    install_as(&env, &pkg, "fine", "", &[]).await;
    env.wait_plan("fine", "deploy", "COMPLETE").await;
    ctl.stop().await;
    env.stop().await;
}

/// A package with cluster-scoped objects (kafka's NodePort ClusterRole and binding, in small)
/// works under least privilege once its account is granted a ClusterRole for exactly those
/// kinds, and its uninstall deletes them as the same account.
fn cluster_scoped_package(dir: &Path) -> PathBuf {
    let operator = "apiVersion: kudo.dev/v1beta1\nname: clusterwide\noperatorVersion: \"0.1.0\"\ntasks:\n  - name: rbac\n    kind: Apply\n    spec:\n      resources: [clusterrole.yaml, binding.yaml]\nplans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: rbac\n            tasks: [rbac]\n";
    let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {{ .Namespace }}-{{ .Name }}-nodes\nrules:\n  - apiGroups: [\"\"]\n    resources: [nodes]\n    verbs: [get, list, watch]\n";
    let binding = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {{ .Namespace }}-{{ .Name }}-nodes\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {{ .Namespace }}-{{ .Name }}-nodes\nsubjects:\n  - kind: ServiceAccount\n    name: default\n    namespace: {{ .Namespace }}\n";
    Pkg::new(dir, "clusterwide")
        .operator(operator)
        .params("apiVersion: kudo.dev/v1beta1\nparameters: []\n")
        .template("clusterrole.yaml", role)
        .template("binding.yaml", binding)
        .write()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_scoped_objects_need_an_explicitly_granted_cluster_role() {
    cluster_scoped_objects_need_an_explicitly_granted_cluster_role_on(Env::start().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_cluster_scoped_objects_need_an_explicitly_granted_cluster_role() {
    cluster_scoped_objects_need_an_explicitly_granted_cluster_role_on(Env::real().await).await;
}

async fn cluster_scoped_objects_need_an_explicitly_granted_cluster_role_on(env: Env) {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let dir = tempfile::tempdir().unwrap();
    let pkg = cluster_scoped_package(dir.path());
    env.install_operator(&pkg).await;
    create_account(&env, "ops", "admin").await;
    let grant = format!("{}-ops-cluster-objects", env.ns);
    let roles: Api<ClusterRole> = Api::all(env.client.clone());
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": grant},
        "rules": [
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles", "clusterrolebindings"],
             "verbs": ["get", "create", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}
        ]
    }))
    .unwrap();
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("cluster role");

    // Without the grant: refused, as the account.
    install_as(&env, &pkg, "before", "ops", &[]).await;
    let inst = env.wait_plan("before", "deploy", "FATAL_ERROR").await;
    let msg = inst["status"]["planStatus"]["deploy"]["phases"][0]["steps"][0]["message"].to_string();
    assert!(
        msg.contains(&format!("system:serviceaccount:{}:ops", env.ns)),
        "{msg}"
    );

    let crbs: Api<ClusterRoleBinding> = Api::all(env.client.clone());
    let crb: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": grant},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": grant},
        "subjects": [{"kind": "ServiceAccount", "name": "ops", "namespace": env.ns}]
    }))
    .unwrap();
    crbs.create(&PostParams::default(), &crb).await.expect("grant");
    install_as(&env, &pkg, "cw", "ops", &[]).await;
    env.wait_plan("cw", "deploy", "COMPLETE").await;
    let made = format!("{}-cw-nodes", env.ns);
    assert!(roles.get_opt(&made).await.unwrap().is_some());
    assert!(crbs.get_opt(&made).await.unwrap().is_some());

    // Uninstall deletes them (as the account: it may).
    env.delete_instance("cw").await;
    env.wait_gone("kudo.dev/v1beta1", "Instance", "cw").await;
    assert!(roles.get_opt(&made).await.unwrap().is_none());
    assert!(crbs.get_opt(&made).await.unwrap().is_none());

    let _ = crbs.delete(&grant, &DeleteParams::default()).await;
    let _ = roles.delete(&grant, &DeleteParams::default()).await;
    env.stop().await;
}
