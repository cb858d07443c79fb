//! The rule matcher: whether one `PolicyRule` of a Role or ClusterRole covers a request.
//!
//! Kept free of the store so the matching semantics (wildcards, `resource/subresource`,
//! `*/subresource`, resourceNames, nonResourceURLs) can be tested table by table.

use serde_json::Value;

/// What is being asked, the way kube-apiserver's request info describes a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// `impersonate`, … (for non-resource requests the lower-cased HTTP method).
    pub verb: String,
    /// Whether this is a resource request (else `path` is what is asked for).
    pub resource_request: bool,
    /// API group, `""` for core.
    pub group: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource (`log`, `status`, `scale`…), empty for the main resource.
    pub subresource: String,
    /// Namespace, empty for cluster-scoped requests and lists across namespaces.
    pub namespace: String,
    /// Object name, empty for lists and creates (unless a `metadata.name` field selector names one).
    pub name: String,
    /// URL path of a non-resource request.
    pub path: String,
}

impl Attributes {
    /// A resource request.
    pub fn resource(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Self {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
            path: String::new(),
        }
    }

    /// A non-resource request (`/apis`, `/version`, …).
    pub fn non_resource(verb: &str, path: &str) -> Self {
        Attributes {
            verb: verb.into(),
            path: path.into(),
            ..Default::default()
        }
    }

    /// `resource` or `resource/subresource`: what rules name.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// One `PolicyRule`, read leniently from stored JSON (a missing list is an empty one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    /// `verbs`.
    pub verbs: Vec<String>,
    /// `apiGroups`.
    pub api_groups: Vec<String>,
    /// `resources`.
    pub resources: Vec<String>,
    /// `resourceNames`: empty means every name.
    pub resource_names: Vec<String>,
    /// `nonResourceURLs`.
    pub non_resource_urls: Vec<String>,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(|a| a.as_array())
        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

impl Rule {
    /// From a stored rule object.
    pub fn from_json(v: &Value) -> Self {
        Rule {
            verbs: strings(v, "verbs"),
            api_groups: strings(v, "apiGroups"),
            resources: strings(v, "resources"),
            resource_names: strings(v, "resourceNames"),
            non_resource_urls: strings(v, "nonResourceURLs"),
        }
    }

    /// The `rules` of a Role or ClusterRole object.
    pub fn all_of(role: &Value) -> Vec<Rule> {
        role.get("rules")
            .and_then(|r| r.as_array())
            .map(|a| a.iter().map(Rule::from_json).collect())
            .unwrap_or_default()
    }

    /// Whether this rule allows the request.
    pub fn allows(&self, a: &Attributes) -> bool {
        if !has_or_star(&self.verbs, &a.verb) {
            return false;
        }
        if !a.resource_request {
            return self.non_resource_urls.iter().any(|u| url_matches(u, &a.path));
        }
        has_or_star(&self.api_groups, &a.group)
            && self.resources.iter().any(|r| resource_matches(r, a))
            && (self.resource_names.is_empty() || self.resource_names.contains(&a.name))
    }
}

/// `list` contains `value` or the wildcard `*`.
fn has_or_star(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

/// A rule's resource entry against `resource[/subresource]`: `*` matches everything, an exact
/// `resource/sub` matches that subresource only, and `*/sub` matches `sub` of any resource.
/// (`pods/*` is not a wildcard: RBAC only knows the two forms above.)
fn resource_matches(rule: &str, a: &Attributes) -> bool {
    if rule == "*" || rule == a.combined_resource() {
        return true;
    }
    !a.subresource.is_empty() && rule.strip_prefix("*/") == Some(a.subresource.as_str())
}

/// A `nonResourceURLs` entry: exact, `*`, or a prefix ending in `*`.
fn url_matches(rule: &str, path: &str) -> bool {
    match rule.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => rule == path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(v: Value) -> Rule {
        Rule::from_json(&v)
    }

    #[test]
    #[rustfmt::skip]
    fn resource_rules_match_like_the_rbac_authorizer() {
        let pods_get = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        let star = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        let sub_any = json!({"apiGroups": [""], "resources": ["*/log"], "verbs": ["get"]});
        let pods_star = json!({"apiGroups": [""], "resources": ["pods/*"], "verbs": ["get"]});
        let named = json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "update"], "resourceNames": ["web"]});
        let scale = json!({"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["patch"]});
        let no_groups = json!({"resources": ["pods"], "verbs": ["get"]});
        let r = |verb: &str, g: &str, res: &str, sub: &str, name: &str| {
            Attributes::resource(verb, g, res, sub, "ns", name)
        };
        let cases: Vec<(&str, &Value, Attributes, bool)> = vec![
            ("exact", &pods_get, r("get", "", "pods", "", "a"), true),
            ("other verb", &pods_get, r("list", "", "pods", "", ""), false),
            ("other group", &pods_get, r("get", "apps", "pods", "", "a"), false),
            ("subresource needs its own entry", &pods_get, r("get", "", "pods", "log", "a"), false),
            ("all wildcards", &star, r("deletecollection", "x.io", "foos", "status", ""), true),
            ("*/log on pods/log", &sub_any, r("get", "", "pods", "log", "a"), true),
            ("*/log not on pods", &sub_any, r("get", "", "pods", "", "a"), false),
            ("*/log not on pods/exec", &sub_any, r("get", "", "pods", "exec", "a"), false),
            ("pods/* is no wildcard", &pods_star, r("get", "", "pods", "log", "a"), false),
            ("resourceNames match", &named, r("get", "apps", "deployments", "", "web"), true),
            ("resourceNames other", &named, r("get", "apps", "deployments", "", "db"), false),
            ("resourceNames no name (list)", &named, r("list", "apps", "deployments", "", ""), false),
            ("resourceNames create", &named, r("create", "apps", "deployments", "", ""), false),
            ("scale sub", &scale, r("patch", "apps", "deployments", "scale", "web"), true),
            ("scale not main", &scale, r("patch", "apps", "deployments", "", "web"), false),
            ("missing apiGroups", &no_groups, r("get", "", "pods", "", "a"), false),
        ];
        for (what, v, a, want) in cases {
            assert_eq!(rule(v.clone()).allows(&a), want, "{what}: {a:?}");
        }
    }

    #[test]
    fn non_resource_rules_match_exact_or_prefix() {
        let api = json!({"nonResourceURLs": ["/api", "/api/*", "/healthz"], "verbs": ["get"]});
        let pods = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        let cases: Vec<(&Value, Attributes, bool)> = vec![
            (&api, Attributes::non_resource("get", "/api"), true),
            (&api, Attributes::non_resource("get", "/api/v1"), true),
            (&api, Attributes::non_resource("get", "/apis"), false),
            (&api, Attributes::non_resource("post", "/api"), false),
            (&api, Attributes::non_resource("get", "/healthz/etcd"), false),
            (&pods, Attributes::non_resource("get", "/api"), false),
        ];
        for (v, a, want) in cases {
            assert_eq!(rule(v.clone()).allows(&a), want, "{a:?}");
        }
    }
}
