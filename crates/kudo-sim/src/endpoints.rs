//! The endpoints controller: an `Endpoints` object per Service with a selector, listing the IPs
//! of matching pods (ready ones under `addresses`, the rest under `notReadyAddresses`), so
//! `kubectl describe service` and clients resolving endpoints see the simulated pods.

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use crate::engine::{Sim, Snapshot, ar};
use crate::util::{pod_ready, selector_matches};

fn target_port(svc_port: &k8s_openapi::api::core::v1::ServicePort, pod: &Pod) -> Option<i32> {
    match &svc_port.target_port {
        None => Some(svc_port.port),
        Some(IntOrString::Int(p)) => Some(*p),
        Some(IntOrString::String(name)) => pod
            .spec
            .as_ref()?
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| p.container_port),
    }
}

fn address(pod: &Pod) -> Option<Value> {
    let ip = pod.status.as_ref()?.pod_ip.clone()?;
    let mut a = json!({
        "ip": ip,
        "targetRef": {
            "kind": "Pod",
            "namespace": pod.metadata.namespace,
            "name": pod.metadata.name,
            "uid": pod.metadata.uid,
        },
    });
    if let Some(n) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
        a["nodeName"] = json!(n);
    }
    if let Some(h) = pod.spec.as_ref().and_then(|s| s.hostname.clone()) {
        a["hostname"] = json!(h);
    }
    Some(a)
}

/// The `subsets` an Endpoints object should have for a Service and the pods it selects.
pub fn subsets(svc: &Service, pods: &[&Pod]) -> Value {
    let Some(spec) = svc.spec.as_ref() else {
        return json!([]);
    };
    let ports = spec.ports.clone().unwrap_or_default();
    let publish_not_ready = spec.publish_not_ready_addresses == Some(true);
    let mut ready = Vec::new();
    let mut not_ready = Vec::new();
    let mut endpoint_ports: Option<Vec<Value>> = None;
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(addr) = address(pod) else { continue };
        if endpoint_ports.is_none() {
            endpoint_ports = Some(
                ports
                    .iter()
                    .filter_map(|p| {
                        let port = target_port(p, pod)?;
                        let mut v = json!({"port": port, "protocol": p.protocol.clone().unwrap_or_else(|| "TCP".into())});
                        if let Some(n) = &p.name {
                            v["name"] = json!(n);
                        }
                        Some(v)
                    })
                    .collect(),
            );
        }
        if pod_ready(pod) || publish_not_ready {
            ready.push(addr);
        } else {
            not_ready.push(addr);
        }
    }
    if ready.is_empty() && not_ready.is_empty() {
        return json!([]);
    }
    let mut subset = json!({"ports": endpoint_ports.unwrap_or_default()});
    if !ready.is_empty() {
        subset["addresses"] = Value::Array(ready);
    }
    if !not_ready.is_empty() {
        subset["notReadyAddresses"] = Value::Array(not_ready);
    }
    json!([subset])
}

pub async fn reconcile(sim: &mut Sim, snap: &Snapshot) {
    if !(snap.ready.services && snap.ready.endpoints && snap.ready.pods) {
        return;
    }
    for svc in &snap.services {
        let Some(selector) = svc
            .spec
            .as_ref()
            .and_then(|s| s.selector.clone())
            .filter(|s| !s.is_empty())
        else {
            continue;
        };
        if svc.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let ns = svc.metadata.namespace.clone().unwrap_or_default();
        let name = svc.metadata.name.clone().unwrap_or_default();
        let sel = LabelSelector {
            match_labels: Some(selector),
            match_expressions: None,
        };
        let pods: Vec<&Pod> = snap
            .pods
            .iter()
            .map(|p| p.as_ref())
            .filter(|p| {
                p.metadata.namespace.as_deref() == Some(&ns)
                    && selector_matches(&sel, p.metadata.labels.as_ref())
            })
            .collect();
        let want = subsets(svc, &pods);
        let existing = snap.endpoints.iter().find(|e| {
            e.metadata.namespace.as_deref() == Some(&ns) && e.metadata.name.as_deref() == Some(&name)
        });
        match existing {
            None => {
                let obj = json!({
                    "apiVersion": "v1",
                    "kind": "Endpoints",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "labels": svc.metadata.labels.clone().unwrap_or_default(),
                    },
                    "subsets": want,
                });
                sim.create(&ar::<Endpoints>(), Some(&ns), obj).await;
            }
            Some(e) => {
                let cur = serde_json::to_value(e.subsets.clone().unwrap_or_default()).unwrap_or_default();
                if !crate::util::equiv(&cur, &want) {
                    sim.merge(
                        &ar::<Endpoints>(),
                        Some(&ns),
                        &name,
                        false,
                        json!({ "subsets": want }),
                    )
                    .await;
                }
            }
        }
    }
}
