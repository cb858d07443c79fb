//! Who a request acts as (`Impersonate-*` headers) and what it asks for (the request's
//! attributes, read from its path like kube-apiserver's request info), and the check between them.

use http::{HeaderMap, Method};

use super::{Attributes, Decision, UserInfo, authorize, forbidden};
use crate::error::ApiError;
use crate::store::Store;

/// Why a request is refused before it is served.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The identity may not do this: a 403 `Status`.
    #[error(transparent)]
    Forbidden(#[from] ApiError),
    /// `Impersonate-Group`/`-Uid`/`-Extra-*` without `Impersonate-User`: kube-apiserver answers
    /// 500 with a plain-text message.
    #[error("Internal Server Error: {path:?}: requested {what} without impersonating a user")]
    NoUser {
        /// The request path.
        path: String,
        /// What was requested.
        what: String,
    },
}

/// What the `Impersonate-*` headers ask for (`None` without any).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Impersonation {
    user: Option<String>,
    groups: Vec<String>,
    uid: Option<String>,
    extra: Vec<(String, Vec<String>)>,
}

fn impersonation(headers: &HeaderMap) -> Option<Impersonation> {
    let mut imp = Impersonation::default();
    let mut any = false;
    for (name, value) in headers {
        let Ok(value) = value.to_str() else { continue };
        let name = name.as_str();
        if name == "impersonate-user" {
            imp.user = Some(value.to_string());
        } else if name == "impersonate-group" {
            imp.groups.push(value.to_string());
        } else if name == "impersonate-uid" {
            imp.uid = Some(value.to_string());
        } else if let Some(key) = name.strip_prefix("impersonate-extra-") {
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .into_owned();
            match imp.extra.iter_mut().find(|(k, _)| *k == key) {
                Some((_, vs)) => vs.push(value.to_string()),
                None => imp.extra.push((key, vec![value.to_string()])),
            }
        } else {
            continue;
        }
        any = true;
    }
    any.then_some(imp)
}

/// The identity a request acts as: the admin without `Impersonate-*` headers, else the
/// impersonated user once the admin's right to impersonate each part is checked.
pub fn identity(store: &Store, headers: &HeaderMap, path: &str) -> Result<UserInfo, Refusal> {
    let requester = UserInfo::admin();
    let Some(imp) = impersonation(headers) else {
        return Ok(requester);
    };
    let Some(name) = imp.user.clone() else {
        return Err(Refusal::NoUser {
            path: path.to_string(),
            what: format!("groups {:?}", imp.groups),
        });
    };
    let sa = name
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains(':'))
        .map(|(ns, n)| (ns.to_string(), n.to_string()));
    let mut checks = vec![match &sa {
        Some((ns, n)) => Attributes::resource("impersonate", "", "serviceaccounts", "", ns, n),
        None => Attributes::resource("impersonate", "", "users", "", "", &name),
    }];
    checks.extend(
        imp.groups
            .iter()
            .map(|g| Attributes::resource("impersonate", "", "groups", "", "", g)),
    );
    if let Some(uid) = &imp.uid {
        checks.push(Attributes::resource(
            "impersonate",
            "authentication.k8s.io",
            "uids",
            "",
            "",
            uid,
        ));
    }
    for (k, vs) in &imp.extra {
        for v in vs {
            checks.push(Attributes::resource(
                "impersonate",
                "authentication.k8s.io",
                "userextras",
                k,
                "",
                v,
            ));
        }
    }
    for a in &checks {
        if let Decision::Deny(reason) = authorize(store, &requester, a) {
            return Err(forbidden(&requester, a, &reason).into());
        }
    }
    Ok(impersonated(
        name,
        sa.as_ref().map(|(ns, n)| (ns.as_str(), n.as_str())),
        imp,
    ))
}

/// The impersonated user with the groups kube-apiserver adds: a ServiceAccount impersonated
/// without groups gets `system:serviceaccounts` and `system:serviceaccounts:NS`; everyone but
/// `system:anonymous` gets `system:authenticated` (that one `system:unauthenticated`).
fn impersonated(name: String, sa: Option<(&str, &str)>, imp: Impersonation) -> UserInfo {
    let mut groups = imp.groups;
    if let (Some((ns, _)), true) = (sa, groups.is_empty()) {
        groups = vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
        ];
    }
    let implied = if name == "system:anonymous" {
        "system:unauthenticated"
    } else {
        "system:authenticated"
    };
    if !groups.iter().any(|g| g == implied) {
        groups.push(implied.into());
    }
    UserInfo {
        name,
        uid: imp.uid.unwrap_or_default(),
        groups,
        extra: imp.extra,
    }
}

/// The attributes of a request, from its method, path (`/api/v1/…`, `/apis/G/V/…`, else a
/// non-resource path) and query (`watch`, a `metadata.name` field selector naming the object of a
/// list or watch).
pub fn attributes(
    method: &Method,
    path: &str,
    query: &std::collections::HashMap<String, String>,
) -> Attributes {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, mut parts) = match segs.as_slice() {
        ["api", _v, rest @ ..] if !rest.is_empty() => ("", rest.to_vec()),
        ["apis", g, _v, rest @ ..] if !rest.is_empty() => (*g, rest.to_vec()),
        _ => return Attributes::non_resource(&method.as_str().to_lowercase(), path),
    };
    let mut watch = false;
    if parts.first() == Some(&"watch") {
        watch = true;
        parts.remove(0);
    }
    let mut ns = "";
    if parts.first() == Some(&"namespaces") && parts.len() > 1 {
        ns = parts[1];
        if parts.len() > 2 && !["status", "finalize"].contains(&parts[2]) {
            parts.drain(..2);
        }
    }
    let resource = parts.first().copied().unwrap_or("");
    let mut name = parts.get(1).copied().unwrap_or("").to_string();
    let sub = parts.get(2).copied().unwrap_or("");
    let verb = match *method {
        Method::GET | Method::HEAD if watch => "watch",
        Method::GET | Method::HEAD if !name.is_empty() => "get",
        Method::GET | Method::HEAD => match query.get("watch").map(String::as_str) {
            Some("true") | Some("1") => "watch",
            _ => "list",
        },
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if name.is_empty() => "deletecollection",
        Method::DELETE => "delete",
        _ => return Attributes::resource(&method.as_str().to_lowercase(), group, resource, sub, ns, &name),
    };
    if matches!(verb, "list" | "watch") && name.is_empty() {
        name = named_by_field_selector(query).unwrap_or_default();
    }
    Attributes::resource(verb, group, resource, sub, ns, &name)
}

/// `metadata.name=X` (or `==`) among a field selector's terms.
fn named_by_field_selector(query: &std::collections::HashMap<String, String>) -> Option<String> {
    let sel = query.get("fieldSelector")?;
    sel.split(',').find_map(|term| {
        let t = term.trim();
        t.strip_prefix("metadata.name==")
            .or_else(|| t.strip_prefix("metadata.name="))
            .map(String::from)
    })
}

/// Authorize a whole request: who it acts as, then whether that identity may do what it asks.
/// The admin (no `Impersonate-*` headers) is never refused.
pub fn check(
    store: &Store,
    method: &Method,
    path: &str,
    query: &std::collections::HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<UserInfo, Refusal> {
    let user = identity(store, headers, path)?;
    if user.groups.iter().any(|g| g == super::MASTERS) {
        return Ok(user);
    }
    let attrs = attributes(method, path, query);
    match authorize(store, &user, &attrs) {
        Decision::Allow(_) => Ok(user),
        Decision::Deny(reason) => Err(forbidden(&user, &attrs, &reason).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    #[rustfmt::skip]
    fn request_attributes_follow_kube_apiserver_request_info() {
        let q = |s: &str| -> HashMap<String, String> {
            s.split('&')
                .filter(|p| !p.is_empty())
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let cases: Vec<(Method, &str, &str, Attributes)> = vec![
            (Method::GET, "/api/v1/namespaces/a/pods", "", Attributes::resource("list", "", "pods", "", "a", "")),
            (Method::GET, "/api/v1/namespaces/a/pods", "watch=true", Attributes::resource("watch", "", "pods", "", "a", "")),
            (Method::GET, "/api/v1/watch/namespaces/a/pods", "", Attributes::resource("watch", "", "pods", "", "a", "")),
            (Method::GET, "/api/v1/namespaces/a/pods", "fieldSelector=metadata.name=web", Attributes::resource("list", "", "pods", "", "a", "web")),
            (Method::GET, "/api/v1/namespaces/a/pods/web/log", "", Attributes::resource("get", "", "pods", "log", "a", "web")),
            (Method::POST, "/api/v1/namespaces/a/pods/web/exec", "", Attributes::resource("create", "", "pods", "exec", "a", "web")),
            (Method::PATCH, "/apis/apps/v1/namespaces/a/deployments/d/scale", "", Attributes::resource("patch", "apps", "deployments", "scale", "a", "d")),
            (Method::DELETE, "/apis/apps/v1/namespaces/a/deployments", "", Attributes::resource("deletecollection", "apps", "deployments", "", "a", "")),
            (Method::GET, "/api/v1/namespaces/a", "", Attributes::resource("get", "", "namespaces", "", "a", "a")),
            (Method::PUT, "/api/v1/namespaces/a/finalize", "", Attributes::resource("update", "", "namespaces", "finalize", "a", "a")),
            (Method::GET, "/api/v1/namespaces", "", Attributes::resource("list", "", "namespaces", "", "", "")),
            (Method::GET, "/api/v1/pods", "", Attributes::resource("list", "", "pods", "", "", "")),
            (Method::POST, "/apis/rbac.authorization.k8s.io/v1/clusterroles", "", Attributes::resource("create", "rbac.authorization.k8s.io", "clusterroles", "", "", "")),
            (Method::GET, "/apis", "", Attributes::non_resource("get", "/apis")),
            (Method::GET, "/apis/apps/v1", "", Attributes::non_resource("get", "/apis/apps/v1")),
        ];
        for (m, path, query, want) in cases {
            assert_eq!(attributes(&m, path, &q(query)), want, "{m} {path}?{query}");
        }
    }

    #[test]
    fn impersonated_users_get_the_groups_kube_apiserver_adds() {
        let imp = |groups: &[&str]| Impersonation {
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        };
        let sa = impersonated("system:serviceaccount:t:app".into(), Some(("t", "app")), imp(&[]));
        assert_eq!(
            sa.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:t",
                "system:authenticated"
            ]
        );
        let sa_g = impersonated(
            "system:serviceaccount:t:app".into(),
            Some(("t", "app")),
            imp(&["g"]),
        );
        assert_eq!(sa_g.groups, ["g", "system:authenticated"]);
        let anon = impersonated("system:anonymous".into(), None, imp(&[]));
        assert_eq!(anon.groups, ["system:unauthenticated"]);
        let bob = impersonated("bob".into(), None, imp(&["system:authenticated", "devs"]));
        assert_eq!(bob.groups, ["system:authenticated", "devs"]);
    }
}
