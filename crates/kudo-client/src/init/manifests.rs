//! What `init` installs, in install order: the three CRDs, the `kudo-system` namespace, the
//! manager's service account bound to cluster-admin (with `--least-privilege`: to the ClusterRole
//! `kudo-manager` of [`kudo_api::rbac::MANAGER_RULES`]), the ClusterRoles that let the built-in
//! `admin`/`edit`/`view` roles reach `kudo.dev` objects, and the manager Deployment.
//! No admission webhook and no cert-manager: the manager decides which plan runs itself.

use kube::api::ApiResource;
use kudo_api::rbac::{self, MANAGER_RULES, Rule};
use kudo_kube::known_resource;
use serde_json::{Value, json};

use super::Setup;
use crate::{Error, Result};

/// The manager's ClusterRole under `--least-privilege`.
pub const MANAGER_ROLE: &str = "kudo-manager";
/// The binding of the manager's account to its role (cluster-admin or [`MANAGER_ROLE`]).
const MANAGER_BINDING: &str = "kudo-manager-rolebinding";
/// The aggregated ClusterRole (and its binding) of the manager's rights on typed APIs.
const TYPED_APIS_ROLE: &str = "kudo-manager-typed-apis";
/// How `init` reports the manager's account, roles and bindings (KUDO's wording).
const REQUIREMENTS: &str = "service accounts and other requirements for controller to run";

/// The user the manager runs as: the image's `kudo` user (`scripts/manager-image.sh`, Dockerfile).
pub const MANAGER_UID: i64 = 65532;

/// One manifest and how to reach its API.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub(super) resource: ApiResource,
    pub(super) namespaced: bool,
    /// The object.
    pub object: Value,
    /// What `init` reports once this group is installed.
    pub group: &'static str,
}

impl Manifest {
    /// The object's name.
    pub fn name(&self) -> String {
        self.object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The object's kind.
    pub fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }
}

/// The manifests of `--dry-run -o json` as one `v1` `List` (which `kubectl apply -f -` takes; a
/// bare array it rejects).
pub fn dry_run_list(ms: &[Manifest]) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {},
        "items": ms.iter().map(|m| &m.object).collect::<Vec<_>>(),
    })
}

/// The manager image this version deploys.
pub fn default_image() -> String {
    format!("kudo-rs/manager:v{}", env!("CARGO_PKG_VERSION"))
}

/// The manager image of another version (`--version 0.2.0` or `v0.2.0`).
pub fn image_for_version(version: &str) -> String {
    format!("kudo-rs/manager:v{}", version.trim_start_matches('v'))
}

/// Every manifest `init` installs for `setup` in `namespace`, in install order.
pub fn manifests(setup: &Setup, namespace: &str) -> Result<Vec<Manifest>> {
    let mut out = Vec::new();
    for text in kudo_api::crd_manifests() {
        let object: Value = serde_saphyr::from_str(text).map_err(|e| Error::BuiltinManifest(Box::new(e)))?;
        out.push(Manifest {
            resource: known_resource("apiextensions.k8s.io", "CustomResourceDefinition"),
            namespaced: false,
            object,
            group: "crds",
        });
    }
    if setup.crd_only {
        return Ok(out);
    }
    out.push(Manifest {
        resource: known_resource("", "Namespace"),
        namespaced: false,
        object: json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"app": "kudo-manager", "control-plane": "controller-manager"}}}),
        group: "namespace",
    });
    let sa = setup
        .service_account
        .clone()
        .unwrap_or_else(|| "kudo-manager".to_string());
    out.extend(manager_rbac(setup, namespace, &sa));
    out.extend(["admin", "edit", "view"].map(aggregated_role));
    out.push(deployment(setup, namespace, &sa));
    Ok(out)
}

fn cluster_role(name: &str, labels: Value, rules: &[Rule], group: &'static str) -> Manifest {
    let rules: Vec<Value> = rules.iter().map(Rule::to_json).collect();
    Manifest {
        resource: known_resource("rbac.authorization.k8s.io", "ClusterRole"),
        namespaced: false,
        object: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels}, "rules": rules}),
        group,
    }
}

/// The manager's ServiceAccount and what it may do: cluster-admin (KUDO's way), or with
/// `--least-privilege` the ClusterRole `kudo-manager` of [`MANAGER_RULES`]. An existing account
/// (`--service-account`) is not created; it is bound only under `--least-privilege` (KUDO's way
/// expects it bound to cluster-admin already).
fn manager_rbac(setup: &Setup, namespace: &str, sa: &str) -> Vec<Manifest> {
    let labels = json!({"app": "kudo-manager"});
    let mut out = Vec::new();
    if setup.service_account.is_none() {
        out.push(Manifest {
            resource: known_resource("", "ServiceAccount"),
            namespaced: true,
            object: json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": sa, "namespace": namespace, "labels": labels}}),
            group: REQUIREMENTS,
        });
    }
    let role = if setup.least_privilege {
        out.push(cluster_role(
            MANAGER_ROLE,
            labels.clone(),
            MANAGER_RULES,
            REQUIREMENTS,
        ));
        out.extend(typed_apis_rbac(namespace, sa));
        MANAGER_ROLE
    } else if setup.service_account.is_none() {
        "cluster-admin"
    } else {
        return out;
    };
    out.push(manager_binding(MANAGER_BINDING, role, namespace, sa));
    out
}

/// A ClusterRoleBinding of `role` to the manager's ServiceAccount.
fn manager_binding(name: &str, role: &str, namespace: &str, sa: &str) -> Manifest {
    Manifest {
        resource: known_resource("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        namespaced: false,
        object: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {"app": "kudo-manager"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]}),
        group: REQUIREMENTS,
    }
}

/// Under `--least-privilege`, what the manager may do with typed objects: the rules of every
/// ClusterRole labelled `kudo-rs.dev/aggregate-to-manager`, which `install` writes per typed API
/// (`kudo_package::typed_api::cluster_roles`), aggregated by the cluster into
/// `kudo-manager-typed-apis` and bound to the manager. Empty until an operator declares one.
fn typed_apis_rbac(namespace: &str, sa: &str) -> Vec<Manifest> {
    let labels = json!({"app": "kudo-manager"});
    let mut role = cluster_role(TYPED_APIS_ROLE, labels, &[], REQUIREMENTS);
    role.object["aggregationRule"] = json!({"clusterRoleSelectors": [
        {"matchLabels": {kudo_package::typed_api::AGGREGATE_TO_MANAGER: "true"}}]});
    // The cluster's aggregation controller owns the rules: applying `rules: []` again (`init
    // --upgrade`) would empty them until it fills them back.
    if let Some(o) = role.object.as_object_mut() {
        o.remove("rules");
    }
    vec![
        role,
        manager_binding(TYPED_APIS_ROLE, TYPED_APIS_ROLE, namespace, sa),
    ]
}

/// The three `kudo-rs:aggregate-to-ROLE` ClusterRoles (also installed by `kubectl kudo dev`).
pub fn aggregated_roles() -> Vec<Value> {
    ["admin", "edit", "view"]
        .into_iter()
        .map(|role| aggregated_role(role).object)
        .collect()
}

/// `kudo-rs:aggregate-to-ROLE`, whose rules the cluster adds to the built-in ROLE.
fn aggregated_role(role: &str) -> Manifest {
    let label = format!("rbac.authorization.k8s.io/aggregate-to-{role}");
    cluster_role(
        &format!("kudo-rs:aggregate-to-{role}"),
        json!({"app": "kudo-manager", label: "true"}),
        rbac::aggregated_rules(role),
        // Reported with the manager's requirements: KUDO's three `✅ installed` lines stay.
        REQUIREMENTS,
    )
}

/// The manager Deployment; under `--least-privilege` its manager runs with
/// `--default-service-account`.
fn deployment(setup: &Setup, namespace: &str, sa: &str) -> Manifest {
    let image = match (&setup.image, &setup.version) {
        (Some(image), _) => image.clone(),
        (None, Some(v)) => image_for_version(v),
        (None, None) => default_image(),
    };
    // Probes reach the pod IP, so the metrics server listens on all addresses here (its own
    // default is loopback).
    let mut manager_args = vec![
        "manager",
        "--metrics-address",
        "0.0.0.0:8080",
        "--leader-elect=true",
        "--lease-name",
        "kudo-manager",
    ];
    if setup.least_privilege {
        manager_args.extend([
            "--default-service-account",
            setup.default_service_account.as_str(),
        ]);
    }
    let shards = setup.shards.to_string();
    if setup.shards > 1 {
        manager_args.extend(["--shards", shards.as_str()]);
    }
    if setup.require_verified_sources {
        manager_args.push("--require-verified-sources");
    }
    let labels = json!({"app": "kudo-manager", "control-plane": "controller-manager"});
    Manifest {
        resource: known_resource("apps", "Deployment"),
        namespaced: true,
        object: json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": super::MANAGER_DEPLOYMENT, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": setup.replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": manager_pod(setup, sa, &image, &manager_args)},
        }}),
        group: "kudo controller",
    }
}

/// The manager's pod: it only talks to the API server and serves HTTP, so it needs no root, no
/// capability and no writable file (it logs to stderr).
fn manager_pod(setup: &Setup, sa: &str, image: &str, args: &[&str]) -> Value {
    json!({
        "serviceAccountName": sa,
        "terminationGracePeriodSeconds": 10,
        "securityContext": {"runAsNonRoot": true, "runAsUser": MANAGER_UID,
                            "runAsGroup": MANAGER_UID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "manager",
            "image": image,
            "imagePullPolicy": setup.image_pull_policy,
            "args": args,
            "env": [
                {"name": "KUDO_POD_NAME",
                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "KUDO_POD_NAMESPACE",
                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
            ],
            "ports": [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"},
                              "initialDelaySeconds": 5, "periodSeconds": 10},
            "readinessProbe": {"httpGet": {"path": "/readyz", "port": "metrics"},
                               "periodSeconds": 5},
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                          "limits": {"memory": "256Mi"}},
            "securityContext": {"allowPrivilegeEscalation": false,
                                "readOnlyRootFilesystem": true,
                                "capabilities": {"drop": ["ALL"]}}
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The manager Deployment (the last manifest).
    fn deploy(ms: &[Manifest]) -> &Value {
        let d = &ms.last().unwrap().object;
        assert_eq!(d["kind"], "Deployment");
        d
    }

    fn find<'a>(ms: &'a [Manifest], kind: &str, name: &str) -> Option<&'a Value> {
        ms.iter()
            .map(|m| &m.object)
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
    }

    fn manager_args(ms: &[Manifest]) -> Vec<String> {
        deploy(ms)["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    }

    fn least_privilege() -> Setup {
        Setup {
            least_privilege: true,
            ..Setup::default()
        }
    }

    #[test]
    fn least_privilege_binds_a_role_without_wildcards() {
        let ms = manifests(&least_privilege(), "kudo-system").unwrap();
        let binding = find(&ms, "ClusterRoleBinding", "kudo-manager-rolebinding").unwrap();
        assert_eq!(binding["roleRef"]["name"], "kudo-manager");
        assert_eq!(binding["subjects"][0]["name"], "kudo-manager");
        let typed = find(&ms, "ClusterRole", "kudo-manager-typed-apis").unwrap();
        assert_eq!(
            typed["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["kudo-rs.dev/aggregate-to-manager"],
            "true"
        );
        assert_eq!(
            find(&ms, "ClusterRoleBinding", "kudo-manager-typed-apis").unwrap()["subjects"][0]["name"],
            "kudo-manager"
        );
        let role = find(&ms, "ClusterRole", "kudo-manager").unwrap();
        assert_eq!(role["rules"].as_array().unwrap().len(), MANAGER_RULES.len());
        // No "*" anywhere: verbs, resources, apiGroups, of every ClusterRole installed.
        // (An aggregated ClusterRole has no rules of its own.)
        for m in ms.iter().filter(|m| m.object["kind"] == "ClusterRole") {
            for rule in m.object["rules"].as_array().into_iter().flatten() {
                for field in ["apiGroups", "resources", "verbs"] {
                    let values = rule[field].as_array().unwrap();
                    assert!(!values.is_empty(), "{rule}");
                    assert!(
                        values.iter().all(|v| !v.as_str().unwrap().contains('*')),
                        "{rule}"
                    );
                }
            }
        }
        let text = serde_json::to_string(&dry_run_list(&ms)).unwrap();
        assert!(!text.contains("cluster-admin"), "{text}");
        let args = manager_args(&ms);
        let at = args
            .iter()
            .position(|a| a == "--default-service-account")
            .unwrap();
        assert_eq!(args[at + 1], "kudo-instance");
    }

    #[test]
    fn default_install_keeps_cluster_admin_and_no_default_account() {
        let ms = manifests(&Setup::default(), "kudo-system").unwrap();
        let binding = find(&ms, "ClusterRoleBinding", "kudo-manager-rolebinding").unwrap();
        assert_eq!(binding["roleRef"]["name"], "cluster-admin");
        assert!(find(&ms, "ClusterRole", "kudo-manager").is_none());
        assert!(!manager_args(&ms).contains(&"--default-service-account".to_string()));
        // The aggregated roles come in both modes.
        for role in ["admin", "edit", "view"] {
            let r = find(&ms, "ClusterRole", &format!("kudo-rs:aggregate-to-{role}")).unwrap();
            assert_eq!(
                r["metadata"]["labels"][format!("rbac.authorization.k8s.io/aggregate-to-{role}")],
                "true"
            );
        }
        let view = find(&ms, "ClusterRole", "kudo-rs:aggregate-to-view").unwrap();
        assert_eq!(view["rules"][0]["verbs"], json!(["get", "list", "watch"]));
    }

    #[test]
    fn the_default_service_account_is_passed_and_an_existing_account_bound() {
        let setup = Setup {
            default_service_account: "deployer".into(),
            ..least_privilege()
        };
        let ms = manifests(&setup, "kudo-system").unwrap();
        let args = manager_args(&ms);
        assert!(args.ends_with(&["--default-service-account".to_string(), "deployer".to_string()]));
        // An existing account is bound to the role, not created.
        let setup = Setup {
            service_account: Some("mine".into()),
            ..least_privilege()
        };
        let ms = manifests(&setup, "kudo-system").unwrap();
        assert!(ms.iter().all(|m| m.object["kind"] != "ServiceAccount"));
        let binding = find(&ms, "ClusterRoleBinding", "kudo-manager-rolebinding").unwrap();
        assert_eq!(binding["subjects"][0]["name"], "mine");
    }

    #[test]
    fn the_source_policy_is_passed_to_the_manager() {
        let args = manager_args(&manifests(&Setup::default(), "kudo-system").unwrap());
        assert!(!args.contains(&"--require-verified-sources".to_string()));
        let setup = Setup {
            require_verified_sources: true,
            ..Setup::default()
        };
        let args = manager_args(&manifests(&setup, "kudo-system").unwrap());
        assert!(
            args.ends_with(&["--require-verified-sources".to_string()]),
            "{args:?}"
        );
    }

    #[test]
    fn dry_run_manifests_reference_this_versions_image_and_no_webhook() {
        let ms = manifests(&Setup::default(), "kudo-system").unwrap();
        let kinds: Vec<&str> = ms.iter().map(|m| m.object["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "Namespace",
                "ServiceAccount",
                "ClusterRoleBinding",
                "ClusterRole",
                "ClusterRole",
                "ClusterRole",
                "Deployment"
            ]
        );
        let image = deploy(&ms)["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap();
        assert_eq!(image, format!("kudo-rs/manager:v{}", env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn manager_runs_as_non_root_read_only_without_capabilities_and_replicates() {
        let ms = manifests(&Setup::default(), "kudo-system").unwrap();
        let pod = &deploy(&ms)["spec"]["template"]["spec"];
        assert_eq!(deploy(&ms)["spec"]["replicas"], 1);
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(pod["securityContext"]["runAsUser"], MANAGER_UID);
        let c = &pod["containers"][0]["securityContext"];
        assert_eq!(c["readOnlyRootFilesystem"], true);
        assert_eq!(c["allowPrivilegeEscalation"], false);
        assert_eq!(c["capabilities"]["drop"], json!(["ALL"]));
        let two = Setup {
            replicas: 2,
            ..Setup::default()
        };
        let ms = manifests(&two, "kudo-system").unwrap();
        assert_eq!(deploy(&ms)["spec"]["replicas"], 2);
        let ms = manifests(&Setup { shards: 4, ..two }, "kudo-system").unwrap();
        let args = &deploy(&ms)["spec"]["template"]["spec"]["containers"][0]["args"];
        let args: Vec<&str> = args
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a.as_str())
            .collect();
        assert!(args.windows(2).any(|w| w == ["--shards", "4"]), "{args:?}");
    }

    /// `--dry-run -o json` is a `v1` List, not a bare array.
    #[test]
    fn dry_run_json_is_a_v1_list() {
        let ms = manifests(&Setup::default(), "kudo-system").unwrap();
        let list = dry_run_list(&ms);
        assert_eq!(list["apiVersion"], "v1");
        assert_eq!(list["kind"], "List");
        assert_eq!(list["items"].as_array().unwrap().len(), ms.len());
        assert_eq!(list["items"][11]["kind"], "Deployment");
    }

    #[test]
    fn version_chooses_the_image_tag() {
        let image = |version: &str| {
            let setup = Setup {
                version: Some(version.into()),
                ..Setup::default()
            };
            manifests(&setup, "kudo-system").unwrap().last().unwrap().object["spec"]["template"]["spec"]
                ["containers"][0]["image"]
                .clone()
        };
        assert_eq!(image("0.2.0"), "kudo-rs/manager:v0.2.0");
        assert_eq!(image("v0.3.1"), "kudo-rs/manager:v0.3.1");
    }

    #[test]
    fn crd_only_and_custom_service_account() {
        let crds = Setup {
            crd_only: true,
            ..Setup::default()
        };
        assert_eq!(
            manifests(&crds, "kudo-system").unwrap().len(),
            kudo_api::crd_manifests().len()
        );
        let mine = Setup {
            service_account: Some("mine".into()),
            ..Setup::default()
        };
        let ms = manifests(&mine, "kudo-system").unwrap();
        assert!(ms.iter().all(|m| m.object["kind"] != "ServiceAccount"));
        assert_eq!(
            ms.last().unwrap().object["spec"]["template"]["spec"]["serviceAccountName"],
            "mine"
        );
    }
}
