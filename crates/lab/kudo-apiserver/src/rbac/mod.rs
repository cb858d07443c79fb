//! RBAC for impersonated identities, as kube-apiserver's `Node,RBAC` authorization does it.
//!
//! The embedded server has a single authenticated client, the unimpersonated admin of `dev`
//! ([`UserInfo::admin`], in the group `system:masters`, which is always allowed, as on a real
//! server). Requests that carry `Impersonate-*` headers are authorized as the impersonated identity
//! against the stored Roles, ClusterRoles and their bindings, so a test or an operator can check
//! what a ServiceAccount may do. Where the rules do not allow a request the answer is the 403
//! `Status` a real server gives, word for word.
//!
//! The built-in ClusterRoles (`cluster-admin`, `admin`, `edit`, `view` and what they aggregate,
//! `system:basic-user`, `system:discovery`, `system:public-info-viewer`) and their default
//! ClusterRoleBindings come from a real v1.28.7 server (`data/rbac-bootstrap-v1.28.7.json`);
//! [`aggregate`] fills aggregated ClusterRoles as the clusterrole-aggregation controller does.

pub(crate) mod aggregate;
pub mod escalation;
pub(crate) mod request;
pub(crate) mod review;
pub mod rules;

use std::sync::Arc;

use serde_json::Value;

use crate::error::{ApiError, qualified};
use crate::registry::ResourceDef;
use crate::store::{Store, WriteOptions};
pub use rules::{Attributes, Rule};

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";
/// The group whose members are always allowed (kube-apiserver's privileged group).
pub const MASTERS: &str = "system:masters";

/// Who a request is authorized as.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name (`system:serviceaccount:NS:NAME` for a ServiceAccount).
    pub name: String,
    /// UID, if impersonated with one.
    pub uid: String,
    /// Groups, including the ones kube-apiserver adds (`system:authenticated`, …).
    pub groups: Vec<String>,
    /// Extra attributes (`Impersonate-Extra-*`).
    pub extra: Vec<(String, Vec<String>)>,
}

impl UserInfo {
    /// The unimpersonated client of `dev`: an administrator, like kubeadm's `kubernetes-admin`.
    pub fn admin() -> Self {
        UserInfo {
            name: "kubernetes-admin".into(),
            groups: vec![MASTERS.into(), "system:authenticated".into()],
            ..Default::default()
        }
    }
}

/// The authorizer's answer, with the reason kube-apiserver would give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; the reason names the binding (empty for `system:masters`).
    Allow(String),
    /// Not allowed; the reason lists unresolvable role references (usually empty).
    Deny(String),
}

impl Decision {
    /// Whether allowed.
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }
}

fn rbac_def(store: &Store, plural: &str) -> Option<Arc<ResourceDef>> {
    store.registry().by_path(GROUP, "v1", plural)
}

/// Authorize `attrs` for `user`: `system:masters` first, then every ClusterRoleBinding and, for a
/// namespaced request, every RoleBinding of that namespace that names the user, one of its groups
/// or its ServiceAccount.
pub fn authorize(store: &Store, user: &UserInfo, attrs: &Attributes) -> Decision {
    if user.groups.iter().any(|g| g == MASTERS) {
        return Decision::Allow(String::new());
    }
    let mut errors: Vec<String> = Vec::new();
    let mut bindings: Vec<Arc<Value>> = Vec::new();
    if let Some(def) = rbac_def(store, "clusterrolebindings") {
        bindings.extend(store.list_shared(&def, None).0);
    }
    if !attrs.namespace.is_empty()
        && let Some(def) = rbac_def(store, "rolebindings")
    {
        bindings.extend(store.list_shared(&def, Some(&attrs.namespace)).0);
    }
    for b in &bindings {
        let ns = crate::meta::namespace(b);
        let Some(subject) = subjects(b).into_iter().find(|s| applies_to(s, user, ns)) else {
            continue;
        };
        match role_rules(store, b) {
            Ok(rules) if rules.iter().any(|r| r.allows(attrs)) => {
                return Decision::Allow(format!("RBAC: allowed by {}", describe(b, subject)));
            }
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
    }
    Decision::Deny(match errors.len() {
        0 => String::new(),
        1 => format!("RBAC: {}", errors[0]),
        _ => format!("RBAC: [{}]", errors.join(", ")),
    })
}

fn subjects(binding: &Value) -> Vec<&Value> {
    binding
        .get("subjects")
        .and_then(|s| s.as_array())
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// Whether a binding subject is `user`: a User by name, a Group by membership, a ServiceAccount
/// by its user name (its namespace defaults to the RoleBinding's; a ClusterRoleBinding must name it).
fn applies_to(subject: &Value, user: &UserInfo, binding_ns: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or("");
    match subject["kind"].as_str().unwrap_or("") {
        "User" => user.name == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = subject["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_ns);
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

/// The rules of the role a binding refers to, or the reason why there are none (the wording of
/// kube-apiserver's lister: `role.rbac.authorization.k8s.io "x" not found`).
fn role_rules(store: &Store, binding: &Value) -> Result<Vec<Rule>, String> {
    let kind = binding
        .pointer("/roleRef/kind")
        .and_then(|k| k.as_str())
        .unwrap_or("");
    let name = binding
        .pointer("/roleRef/name")
        .and_then(|k| k.as_str())
        .unwrap_or("");
    let is_role_binding = binding["kind"] == "RoleBinding";
    let (plural, ns, singular) = match kind {
        "ClusterRole" => ("clusterroles", "", "clusterrole"),
        "Role" if is_role_binding => ("roles", crate::meta::namespace(binding), "role"),
        other => return Err(format!("unsupported role reference kind: {other:?}")),
    };
    let not_found = || format!("{} \"{name}\" not found", qualified(GROUP, singular));
    let def = rbac_def(store, plural).ok_or_else(not_found)?;
    store
        .get(&def, ns, name)
        .map(|role| Rule::all_of(&role))
        .map_err(|_| not_found())
}

/// `ClusterRoleBinding "x" of ClusterRole "y" to Group "z"`, as in a real allow reason.
fn describe(binding: &Value, subject: &Value) -> String {
    let name = crate::meta::name(binding);
    let ns = crate::meta::namespace(binding);
    let role_kind = binding
        .pointer("/roleRef/kind")
        .and_then(|k| k.as_str())
        .unwrap_or("");
    let role = binding
        .pointer("/roleRef/name")
        .and_then(|k| k.as_str())
        .unwrap_or("");
    let kind = subject["kind"].as_str().unwrap_or("");
    let mut who = subject["name"].as_str().unwrap_or("").to_string();
    if kind == "ServiceAccount" {
        let sa_ns = subject["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(ns);
        who = format!("{who}/{sa_ns}");
    }
    if ns.is_empty() {
        format!("ClusterRoleBinding {name:?} of {role_kind} {role:?} to {kind} {who:?}")
    } else {
        format!("RoleBinding \"{name}/{ns}\" of {role_kind} {role:?} to {kind} {who:?}")
    }
}

/// The 403 kube-apiserver answers when `user` may not do `attrs`.
pub fn forbidden(user: &UserInfo, attrs: &Attributes, reason: &str) -> ApiError {
    let who = &user.name;
    let mut msg = if !attrs.resource_request {
        format!("User {who:?} cannot {} path {:?}", attrs.verb, attrs.path)
    } else if attrs.namespace.is_empty() {
        format!(
            "User {who:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
            attrs.verb,
            attrs.combined_resource(),
            attrs.group
        )
    } else {
        format!(
            "User {who:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
            attrs.verb,
            attrs.combined_resource(),
            attrs.group,
            attrs.namespace
        )
    };
    if !reason.is_empty() {
        msg = format!("{msg}: {reason}");
    }
    if !attrs.resource_request {
        return ApiError::forbidden_of("", "", "", format!("forbidden: {msg}"));
    }
    let what = qualified(&attrs.group, &attrs.resource);
    let message = if attrs.name.is_empty() {
        format!("{what} is forbidden: {msg}")
    } else {
        format!("{what} {:?} is forbidden: {msg}", attrs.name)
    };
    ApiError::forbidden_of(&attrs.group, &attrs.resource, &attrs.name, message)
}

/// The built-in ClusterRoles and ClusterRoleBindings, dumped from kube-apiserver v1.28.7.
const BOOTSTRAP: &str = include_str!("../../data/rbac-bootstrap-v1.28.7.json");

/// Create the built-in ClusterRoles and ClusterRoleBindings that are missing (a restarted
/// server keeps the stored ones, including changes made to them), then aggregate.
pub(crate) fn ensure_bootstrap(store: &Store) {
    let doc: Value = match serde_json::from_str(BOOTSTRAP) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!("built-in RBAC data does not parse: {e}");
            return;
        }
    };
    let opts = WriteOptions {
        field_manager: Some("kube-apiserver".into()),
        ..Default::default()
    };
    for obj in doc["items"].as_array().into_iter().flatten() {
        let plural = if obj["kind"] == "ClusterRole" {
            "clusterroles"
        } else {
            "clusterrolebindings"
        };
        let Some(def) = rbac_def(store, plural) else {
            continue;
        };
        if store.get(&def, "", crate::meta::name(obj)).is_ok() {
            continue;
        }
        if let Err(e) = store.create(&def, "", obj.clone(), &opts) {
            tracing::warn!("creating built-in {plural} {}: {e}", crate::meta::name(obj));
        }
    }
    aggregate::aggregate_all(store);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store() -> Store {
        let s = Store::open(crate::Registry::new(), Box::new(crate::MemoryBackend), 100).expect("store");
        ensure_bootstrap(&s);
        let objs = [
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "reader", "namespace": "a"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "app-reader", "namespace": "a"},
                "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "app"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "dangling", "namespace": "a"},
                "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "missing"},
                "subjects": [{"kind": "User", "name": "dave"}]}),
        ];
        for o in objs {
            s.create_obj(o).expect("create");
        }
        s
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn bindings_grant_what_their_roles_allow_to_their_subjects() {
        let s = store();
        let get_pod = |ns: &str| Attributes::resource("get", "", "pods", "", ns, "p");
        let app = user("system:serviceaccount:a:app", &["system:authenticated"]);
        let other_app = user("system:serviceaccount:b:app", &["system:authenticated"]);
        let cases: Vec<(UserInfo, Attributes, Decision)> = vec![
            (app.clone(), get_pod("a"), Decision::Allow(
                "RBAC: allowed by RoleBinding \"app-reader/a\" of Role \"reader\" to ServiceAccount \"app/a\"".into())),
            (app.clone(), get_pod("b"), Decision::Deny(String::new())),
            (app.clone(), get_pod(""), Decision::Deny(String::new())),
            (other_app.clone(), get_pod("a"), Decision::Deny(String::new())),
            (app.clone(), Attributes::resource("create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", ""),
                Decision::Allow("RBAC: allowed by ClusterRoleBinding \"system:basic-user\" of ClusterRole \"system:basic-user\" to Group \"system:authenticated\"".into())),
            (user("dave", &[]), get_pod("a"), Decision::Deny(
                "RBAC: role.rbac.authorization.k8s.io \"missing\" not found".into())),
            (user("root", &[MASTERS]), Attributes::resource("delete", "", "nodes", "", "", "n"), Decision::Allow(String::new())),
            (user("x", &["system:authenticated"]), Attributes::non_resource("get", "/apis/apps"), Decision::Allow(
                "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\"".into())),
            (user("system:anonymous", &["system:unauthenticated"]), Attributes::non_resource("get", "/apis"), Decision::Deny(String::new())),
        ];
        for (u, a, want) in cases {
            assert_eq!(authorize(&s, &u, &a), want, "{} {a:?}", u.name);
        }
    }

    #[test]
    fn denials_read_like_kube_apiserver() {
        let u = user("system:serviceaccount:t:app", &[]);
        let cases = [
            (
                Attributes::resource("create", "apps", "deployments", "", "b", ""),
                "",
                "deployments.apps is forbidden: User \"system:serviceaccount:t:app\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"b\"",
            ),
            (
                Attributes::resource("get", "", "pods", "log", "t", "web"),
                "",
                "pods \"web\" is forbidden: User \"system:serviceaccount:t:app\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"t\"",
            ),
            (
                Attributes::resource("list", "rbac.authorization.k8s.io", "clusterroles", "", "", ""),
                "",
                "clusterroles.rbac.authorization.k8s.io is forbidden: User \"system:serviceaccount:t:app\" cannot list resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope",
            ),
            (
                Attributes::resource("get", "", "pods", "", "t", ""),
                "RBAC: role.rbac.authorization.k8s.io \"x\" not found",
                "pods is forbidden: User \"system:serviceaccount:t:app\" cannot get resource \"pods\" in API group \"\" in the namespace \"t\": RBAC: role.rbac.authorization.k8s.io \"x\" not found",
            ),
            (
                Attributes::non_resource("get", "/apis"),
                "",
                "forbidden: User \"system:serviceaccount:t:app\" cannot get path \"/apis\"",
            ),
        ];
        for (a, reason, want) in cases {
            let e = forbidden(&u, &a, reason);
            assert_eq!((e.code, e.message.as_str()), (403, want));
        }
        let e = forbidden(
            &u,
            &Attributes::resource("get", "apps", "deployments", "scale", "t", "d"),
            "",
        );
        assert_eq!(
            e.to_status()["details"],
            json!({"name": "d", "group": "apps", "kind": "deployments"})
        );
    }
}
