//! RBAC's escalation prevention: an identity may only write a Role or ClusterRole whose rules it
//! already holds (or has the `escalate` verb on it), and only bind a role whose rules it holds (or
//! has the `bind` verb on it). Without this an impersonated `admin` of one namespace could grant
//! itself anything, which a real server refuses.

use serde_json::Value;

use super::{Attributes, GROUP, Rule, UserInfo, authorize, rbac_def};
use crate::error::ApiError;
use crate::store::Store;

/// Every single permission a rule grants, as the request that would use it (a `*` in the rule is
/// asked for literally, so only an identity holding `*` itself covers it).
fn atomic(rule: &Rule, ns: &str) -> Vec<Attributes> {
    let mut out = Vec::new();
    for verb in &rule.verbs {
        for url in &rule.non_resource_urls {
            out.push(Attributes::non_resource(verb, url));
        }
        for group in &rule.api_groups {
            for res in &rule.resources {
                let (r, sub) = res.split_once('/').unwrap_or((res, ""));
                let names: Vec<&str> = if rule.resource_names.is_empty() {
                    vec![""]
                } else {
                    rule.resource_names.iter().map(String::as_str).collect()
                };
                for name in names {
                    out.push(Attributes::resource(verb, group, r, sub, ns, name));
                }
            }
        }
    }
    out
}

/// The first permission of `rules` that `user` does not hold in `ns`.
fn not_held(store: &Store, user: &UserInfo, rules: &[Rule], ns: &str) -> Option<Attributes> {
    rules
        .iter()
        .flat_map(|r| atomic(r, ns))
        .find(|a| !authorize(store, user, a).allowed())
}

/// Go's `%q` of a string list: `["a" "b"]`.
fn go_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// kube-apiserver's refusal, naming the (first) permission not held in its compact rule form.
fn refusal(attrs: &Attributes, user: &UserInfo, missing: &Attributes) -> ApiError {
    let what = crate::error::qualified(&attrs.group, &attrs.resource);
    let name = if attrs.name.is_empty() {
        String::new()
    } else {
        format!(" {:?}", attrs.name)
    };
    let groups: Vec<&str> = user.groups.iter().map(String::as_str).collect();
    let rule = if missing.resource_request {
        let names = if missing.name.is_empty() {
            String::new()
        } else {
            format!(" ResourceNames:{},", go_list(&[&missing.name]))
        };
        format!(
            "{{APIGroups:{}, Resources:{},{names} Verbs:{}}}",
            go_list(&[&missing.group]),
            go_list(&[&missing.combined_resource()]),
            go_list(&[&missing.verb])
        )
    } else {
        format!(
            "{{NonResourceURLs:{}, Verbs:{}}}",
            go_list(&[&missing.path]),
            go_list(&[&missing.verb])
        )
    };
    ApiError::forbidden_of(
        &attrs.group,
        &attrs.resource,
        &attrs.name,
        format!(
            "{what}{name} is forbidden: user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{rule}",
            user.name,
            go_list(&groups)
        ),
    )
}

/// Check a write of an RBAC object by a (non-`system:masters`) identity. `obj` is the object
/// written; `None` (a patch, whose result is not known yet) requires `escalate`/`bind` itself.
pub fn check_write(
    store: &Store,
    user: &UserInfo,
    attrs: &Attributes,
    obj: Option<&Value>,
) -> Result<(), ApiError> {
    if attrs.group != GROUP || !matches!(attrs.verb.as_str(), "create" | "update" | "patch") {
        return Ok(());
    }
    let ns = attrs.namespace.as_str();
    let (is_binding, special) = match attrs.resource.as_str() {
        "roles" | "clusterroles" => (false, "escalate"),
        "rolebindings" | "clusterrolebindings" => (true, "bind"),
        _ => return Ok(()),
    };
    let name = obj
        .map(crate::meta::name)
        .filter(|n| !n.is_empty())
        .unwrap_or(attrs.name.as_str());
    let rules: Vec<Rule> = match (obj, is_binding) {
        (Some(o), false) => Rule::all_of(o),
        (Some(o), true) => {
            let kind = o.pointer("/roleRef/kind").and_then(|k| k.as_str()).unwrap_or("");
            let role = o.pointer("/roleRef/name").and_then(|k| k.as_str()).unwrap_or("");
            let (plural, role_ns) = if kind == "Role" {
                ("roles", ns)
            } else {
                ("clusterroles", "")
            };
            let bind = Attributes::resource("bind", GROUP, plural, "", ns, role);
            if authorize(store, user, &bind).allowed() {
                return Ok(());
            }
            let def = rbac_def(store, plural);
            match def.and_then(|d| store.get(&d, role_ns, role).ok()) {
                Some(r) => Rule::all_of(&r),
                // Rules that cannot be read cannot be shown to be held.
                None => return Err(ApiError::not_found(GROUP, plural, role)),
            }
        }
        (None, _) => Vec::new(),
    };
    let own = Attributes::resource(special, GROUP, &attrs.resource, "", ns, name);
    if !is_binding && authorize(store, user, &own).allowed() {
        return Ok(());
    }
    let attrs = &Attributes {
        name: name.to_string(),
        ..attrs.clone()
    };
    let missing = match obj {
        None => Some(own),
        Some(_) => not_held(store, user, &rules, ns),
    };
    match missing {
        Some(m) => Err(refusal(attrs, user, &m)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    #[rustfmt::skip]
    fn a_namespace_admin_grants_only_what_it_holds() {
        let s = Store::open(crate::Registry::new(), Box::new(crate::MemoryBackend), 100).expect("store");
        super::super::ensure_bootstrap(&s);
        s.create_obj(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}))
            .expect("namespace");
        s.create_obj(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "alice-admin", "namespace": "a"},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "User", "name": "alice"}]}))
        .expect("binding");
        let alice = UserInfo {
            name: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        };
        let role = |rules: Value| json!({"kind": "Role", "metadata": {"name": "r"}, "rules": rules});
        let binding = |kind: &str, name: &str| {
            json!({"kind": "RoleBinding", "metadata": {"name": "b"}, "roleRef": {"kind": kind, "name": name}})
        };
        let create = |res: &str| Attributes::resource("create", GROUP, res, "", "a", "");
        let cases: Vec<(&str, Attributes, Option<Value>, bool)> = vec![
            ("held rule", create("roles"), Some(role(json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]))), true),
            ("held subresource", create("roles"), Some(role(json!([{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]))), true),
            ("cluster resource", create("roles"), Some(role(json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]))), false),
            ("wildcard verb", create("roles"), Some(role(json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]))), false),
            ("bind admin", create("rolebindings"), Some(binding("ClusterRole", "admin")), true),
            ("bind view", create("rolebindings"), Some(binding("ClusterRole", "view")), true),
            ("bind cluster-admin", create("rolebindings"), Some(binding("ClusterRole", "cluster-admin")), false),
            ("bind missing", create("rolebindings"), Some(binding("Role", "missing")), false),
            ("patch a role", Attributes::resource("patch", GROUP, "roles", "", "a", "r"), None, false),
            ("not rbac", Attributes::resource("create", "", "configmaps", "", "a", ""), None, true),
        ];
        for (what, attrs, obj, ok) in cases {
            assert_eq!(check_write(&s, &alice, &attrs, obj.as_ref()).is_ok(), ok, "{what}");
        }
    }
}
