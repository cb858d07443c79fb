//! ClusterRole aggregation: a ClusterRole with an `aggregationRule` gets the rules of every
//! ClusterRole its selectors match, as kube-controller-manager's clusterrole-aggregation
//! controller keeps them (matching roles in name order, each rule once). This is how `admin`,
//! `edit` and `view` grow when a ClusterRole labelled
//! `rbac.authorization.k8s.io/aggregate-to-…: "true"` is created, changed or deleted.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::selector::LabelSelector;
use crate::store::{Store, Subresource, WriteOptions};

/// One `clusterRoleSelectors` entry in the query-string form the selector parser reads.
fn selector_of(sel: &Value) -> Option<LabelSelector> {
    let mut terms: Vec<String> = Vec::new();
    for (k, v) in sel["matchLabels"].as_object().into_iter().flatten() {
        terms.push(format!("{k}={}", v.as_str().unwrap_or("")));
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or("");
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect();
        terms.push(match e["operator"].as_str().unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        });
    }
    LabelSelector::parse(&terms.join(",")).ok()
}

/// The rules an aggregated ClusterRole should have, given all ClusterRoles.
fn aggregated_rules(role: &Value, all: &[Arc<Value>]) -> Vec<Value> {
    let selectors: Vec<LabelSelector> = role
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(|s| s.as_array())
        .into_iter()
        .flatten()
        .filter_map(selector_of)
        .collect();
    let me = crate::meta::name(role);
    let mut sources: Vec<&Arc<Value>> = all
        .iter()
        .filter(|r| crate::meta::name(r) != me && selectors.iter().any(|s| s.matches(r)))
        .collect();
    sources.sort_by(|a, b| crate::meta::name(a).cmp(crate::meta::name(b)));
    let mut rules: Vec<Value> = Vec::new();
    for src in sources {
        for rule in src["rules"].as_array().into_iter().flatten() {
            if !rules.contains(rule) {
                rules.push(rule.clone());
            }
        }
    }
    rules
}

/// Bring every aggregated ClusterRole up to date; whether any changed.
pub(crate) fn aggregate_all(store: &Store) -> bool {
    let Some(def) = super::rbac_def(store, "clusterroles") else {
        return false;
    };
    let opts = WriteOptions {
        field_manager: Some("clusterrole-aggregation-controller".into()),
        ..Default::default()
    };
    let mut changed = false;
    // Aggregated roles may feed others (view → edit → admin): repeat until nothing moves.
    for _ in 0..8 {
        let all = store.list_shared(&def, None).0;
        let mut round = false;
        for role in all
            .iter()
            .filter(|r| r.get("aggregationRule").is_some_and(|a| !a.is_null()))
        {
            let want = json!(aggregated_rules(role, &all));
            if role.get("rules").cloned().unwrap_or(json!([])) == want {
                continue;
            }
            let name = crate::meta::name(role).to_string();
            let r = store.modify(&def, "", &name, Subresource::Main, &opts, |cur| {
                let mut new = cur
                    .cloned()
                    .ok_or_else(|| crate::ApiError::not_found(super::GROUP, "clusterroles", &name))?;
                new["rules"] = want.clone();
                Ok(new)
            });
            round |= r.is_ok();
        }
        changed |= round;
        if !round {
            break;
        }
    }
    changed
}

/// The controller: aggregate whenever a ClusterRole changes, until shutdown.
pub(crate) async fn run(store: Store, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let Ok((_, mut rx)) = store.subscribe(store.current_rv()) else {
        return;
    };
    aggregate_all(&store);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            ev = rx.recv() => match ev {
                Ok(ev) if ev.key.gr.group == super::GROUP && ev.key.gr.resource == "clusterroles" => {
                    // Let a burst of writes (kubectl apply of several roles) settle first.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    aggregate_all(&store);
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => { aggregate_all(&store); }
                Err(RecvError::Closed) => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The aggregated rules of `admin`, `edit` and `view` on a fresh v1.28.7 server.
    const REAL: &str = include_str!("../../data/rbac-aggregated-v1.28.7.json");

    fn store() -> Store {
        let s = Store::open(crate::Registry::new(), Box::new(crate::MemoryBackend), 100).expect("store");
        super::super::ensure_bootstrap(&s);
        s
    }

    fn rules_of(s: &Store, name: &str) -> Value {
        let def = super::super::rbac_def(s, "clusterroles").expect("def");
        s.get(&def, "", name).expect("role")["rules"].clone()
    }

    #[test]
    fn built_in_aggregated_roles_equal_the_real_servers() {
        let s = store();
        let real: Value = serde_json::from_str(REAL).expect("json");
        for name in ["admin", "edit", "view"] {
            assert_eq!(rules_of(&s, name), real["rules"][name], "{name}");
        }
    }

    #[test]
    fn a_labelled_cluster_role_extends_view_edit_and_admin() {
        let s = store();
        s.create_obj(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "gadgets", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"apiGroups": ["example.com"], "resources": ["gadgets"], "verbs": ["get"]}],
        }))
        .expect("create");
        assert!(aggregate_all(&s));
        let has = |name: &str| rules_of(&s, name).to_string().contains("gadgets");
        assert!(has("view") && has("edit") && has("admin"));
        assert!(!has("cluster-admin"));
        let def = super::super::rbac_def(&s, "clusterroles").expect("def");
        s.delete(&def, "", "gadgets", &Default::default())
            .expect("delete");
        aggregate_all(&s);
        assert!(!has("view") && !has("edit") && !has("admin"));
        assert!(!aggregate_all(&s), "stable once aggregated");
    }
}
