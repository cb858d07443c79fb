//! Discovery documents: legacy (`/api`, `/apis`, `/apis/G/V`) and aggregated (`apidiscovery.k8s.io/v2`).

use serde_json::{Value, json};

use crate::registry::{Registry, ResourceDef};

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The `Content-Type` to answer an aggregated-discovery request with, if the `Accept` header asks for it.
pub fn aggregated_version(accept: &str) -> Option<&'static str> {
    for range in accept.split(',') {
        let params: Vec<&str> = range.split(';').map(str::trim).collect();
        let has = |p: &str| params.contains(&p);
        if has("g=apidiscovery.k8s.io") && has("as=APIGroupDiscoveryList") {
            if has("v=v2") {
                return Some("v2");
            }
            if has("v=v2beta1") {
                return Some("v2beta1");
            }
        }
        if params
            .first()
            .is_some_and(|p| *p == "application/json" || *p == "*/*")
            && params.len() == 1
        {
            return None;
        }
    }
    None
}

/// `/api`.
pub fn api_versions(addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}],
    })
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn api_group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg.groups().iter().map(|(g, vs)| group_json(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/G`.
pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    reg.groups().into_iter().find(|(g, _)| g == group).map(|(g, vs)| {
        let mut v = group_json(&g, &vs);
        v["kind"] = json!("APIGroup");
        v["apiVersion"] = json!("v1");
        v
    })
}

fn defs_of(reg: &Registry, group: &str, version: &str) -> Vec<std::sync::Arc<ResourceDef>> {
    reg.all()
        .into_iter()
        .filter(|d| d.group == group && d.version == version)
        .collect()
}

/// `/api/v1` or `/apis/G/V`.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = defs_of(reg, group, version);
    if defs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for d in &defs {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": VERBS,
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        if d.status {
            resources.push(json!({
                "name": format!("{}/status", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if d.scale.is_some() {
            resources.push(json!({
                "name": format!("{}/scale", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}

fn aggregated_resource(d: &ResourceDef) -> Value {
    let mut r = json!({
        "resource": d.plural,
        "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
        "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": d.singular,
        "verbs": VERBS,
    });
    if !d.short_names.is_empty() {
        r["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        r["categories"] = json!(d.categories);
    }
    let mut subs = Vec::new();
    if d.status {
        subs.push(json!({
            "subresource": "status",
            "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
            "verbs": ["get", "patch", "update"],
        }));
    }
    if d.scale.is_some() {
        subs.push(json!({
            "subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"],
        }));
    }
    if !subs.is_empty() {
        r["subresources"] = json!(subs);
    }
    r
}

/// Aggregated discovery for `/api` (`core = true`) or `/apis`.
pub fn aggregated(reg: &Registry, core: bool, version: &str) -> Value {
    let mut items = Vec::new();
    let groups: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_string()])]
    } else {
        reg.groups()
    };
    for (g, vs) in groups {
        let versions: Vec<Value> = vs
            .iter()
            .map(|v| {
                let resources: Vec<Value> = defs_of(reg, &g, v)
                    .iter()
                    .map(|d| aggregated_resource(d))
                    .collect();
                json!({"version": v, "resources": resources, "freshness": "Current"})
            })
            .collect();
        items.push(json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions}));
    }
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}
