//! The endpoints and EndpointSlice controllers: for every Service with a selector, an
//! `Endpoints` object listing the IPs of matching pods (ready ones under `addresses`, the rest
//! under `notReadyAddresses`) and one `discovery.k8s.io/v1` EndpointSlice with the same pods and
//! their readiness as conditions — what `kubectl describe service` (which reads slices since
//! kubectl 1.33) and clients resolving endpoints see.
//!
//! The slice is created with the first pod that has an IP and then kept, also when it empties.
//! (The real controller creates an empty placeholder slice at once, for which kubectl prints an
//! empty `Endpoints:`; without it kubectl prints `<none>`, as the Galera seeds — captured with a
//! kubectl that read Endpoints — show for a Service without pods.)
//!
//! Neither outlives its Service: slices carry an ownerReference to it (the garbage collector
//! removes them), and the Endpoints and slices this controller manages are deleted once their
//! Service is gone, being deleted, or has no selector any more.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use crate::engine::{Sim, Snapshot, ar};
use crate::util::{encode_hash, fnv64, owner_ref, pod_ready, selector_matches};

/// Label naming the Service of an EndpointSlice.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Label naming the controller that manages an EndpointSlice.
pub const SLICE_MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// The value the real EndpointSlice controller puts in [`SLICE_MANAGED_BY_LABEL`].
pub const SLICE_CONTROLLER: &str = "endpointslice-controller.k8s.io";
/// Label naming the controller that manages an Endpoints object (Kubernetes 1.33+).
pub const ENDPOINTS_MANAGED_BY_LABEL: &str = "endpoints.kubernetes.io/managed-by";
/// The value the real endpoints controller puts in [`ENDPOINTS_MANAGED_BY_LABEL`].
pub const ENDPOINTS_CONTROLLER: &str = "endpoint-controller";

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

/// The pods a Service's endpoints list: not being deleted, and with an IP.
fn endpoint_pods<'a>(pods: &[&'a Pod]) -> Vec<&'a Pod> {
    pods.iter()
        .copied()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some())
        .collect()
}

/// The `ports` and `endpoints` of the EndpointSlice for a Service and the pods it selects.
/// Ports are resolved against the first pod (one slice per Service, as long as the pods agree
/// on named ports); every port carries a `name`, empty for an unnamed Service port, as the real
/// controller writes it (kubectl matches slice ports to Service ports by name).
pub fn slice_content(svc: &Service, pods: &[&Pod]) -> (Value, Value) {
    let Some(spec) = svc.spec.as_ref() else {
        return (json!([]), json!([]));
    };
    let pods = endpoint_pods(pods);
    let publish_not_ready = spec.publish_not_ready_addresses == Some(true);
    let svc_name = svc.metadata.name.as_deref().unwrap_or("");
    let ports: Vec<Value> = match pods.first() {
        None => Vec::new(),
        Some(first) => spec
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                Some(json!({
                    "name": p.name.clone().unwrap_or_default(),
                    "port": target_port(p, first)?,
                    "protocol": p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                }))
            })
            .collect(),
    };
    let endpoints: Vec<Value> = pods
        .iter()
        .filter_map(|pod| {
            let ip = pod.status.as_ref()?.pod_ip.clone()?;
            let ready = pod_ready(pod) || publish_not_ready;
            let mut e = json!({
                "addresses": [ip],
                "conditions": {"ready": ready, "serving": ready, "terminating": false},
                "targetRef": {
                    "kind": "Pod",
                    "namespace": pod.metadata.namespace,
                    "name": pod.metadata.name,
                    "uid": pod.metadata.uid,
                },
            });
            let pod_spec = pod.spec.as_ref();
            if let Some(n) = pod_spec.and_then(|s| s.node_name.clone()) {
                e["nodeName"] = json!(n);
            }
            // A hostname is published for pods that name this Service as their subdomain.
            if let Some(h) = pod_spec.and_then(|s| s.hostname.clone())
                && pod_spec.and_then(|s| s.subdomain.as_deref()) == Some(svc_name)
            {
                e["hostname"] = json!(h);
            }
            Some(e)
        })
        .collect();
    (Value::Array(ports), Value::Array(endpoints))
}

/// The deterministic name of a Service's EndpointSlice: `SERVICE-xxxxx`, like the generated
/// names of the real controller, but stable across restarts so retries never duplicate it.
pub fn slice_name(svc: &Service) -> String {
    let uid = svc.metadata.uid.as_deref().unwrap_or("");
    let name = svc.metadata.name.as_deref().unwrap_or("");
    format!("{name}-{}", encode_hash(fnv64(&[uid, "endpointslice"]), 5))
}

pub async fn reconcile(sim: &mut Sim, snap: &Snapshot) {
    if !(snap.ready.services && snap.ready.endpoints && snap.ready.pods) {
        return;
    }
    // Endpoints and slices that should exist, by (namespace, name).
    let mut live_endpoints: HashSet<(String, String)> = HashSet::new();
    let mut live_slices: HashSet<(String, String)> = HashSet::new();
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
        live_endpoints.insert((ns.clone(), name.clone()));
        reconcile_endpoints(sim, snap, svc, &ns, &name, &pods).await;
        if snap.ready.endpointslices {
            live_slices.insert((ns.clone(), slice_name(svc)));
            reconcile_slice(sim, snap, svc, &ns, &pods).await;
        }
    }
    // What this controller manages must not outlive its Service.
    for e in &snap.endpoints {
        let managed = e
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ENDPOINTS_MANAGED_BY_LABEL))
            .is_some_and(|v| v == ENDPOINTS_CONTROLLER);
        let ns = e.metadata.namespace.clone().unwrap_or_default();
        let name = e.metadata.name.clone().unwrap_or_default();
        if managed
            && e.metadata.deletion_timestamp.is_none()
            && !live_endpoints.contains(&(ns.clone(), name.clone()))
        {
            sim.delete(
                &ar::<Endpoints>(),
                Some(&ns),
                &name,
                None,
                e.metadata.uid.as_deref(),
                true,
            )
            .await;
        }
    }
    if !snap.ready.endpointslices {
        return;
    }
    for s in &snap.endpointslices {
        let managed = s
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SLICE_MANAGED_BY_LABEL))
            .is_some_and(|v| v == SLICE_CONTROLLER);
        let ns = s.metadata.namespace.clone().unwrap_or_default();
        let name = s.metadata.name.clone().unwrap_or_default();
        if managed
            && s.metadata.deletion_timestamp.is_none()
            && !live_slices.contains(&(ns.clone(), name.clone()))
        {
            sim.delete(
                &ar::<EndpointSlice>(),
                Some(&ns),
                &name,
                None,
                s.metadata.uid.as_deref(),
                true,
            )
            .await;
        }
    }
}

async fn reconcile_endpoints(
    sim: &mut Sim,
    snap: &Snapshot,
    svc: &Service,
    ns: &str,
    name: &str,
    pods: &[&Pod],
) {
    let want = subsets(svc, pods);
    let existing = snap
        .endpoints
        .iter()
        .find(|e| e.metadata.namespace.as_deref() == Some(ns) && e.metadata.name.as_deref() == Some(name));
    match existing {
        None => {
            let mut labels = svc.metadata.labels.clone().unwrap_or_default();
            labels.insert(ENDPOINTS_MANAGED_BY_LABEL.into(), ENDPOINTS_CONTROLLER.into());
            let obj = json!({
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": {"name": name, "namespace": ns, "labels": labels},
                "subsets": want,
            });
            sim.create(&ar::<Endpoints>(), Some(ns), obj).await;
        }
        Some(e) => {
            let cur = serde_json::to_value(e.subsets.clone().unwrap_or_default()).unwrap_or_default();
            let labelled = e
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(ENDPOINTS_MANAGED_BY_LABEL));
            if !crate::util::equiv(&cur, &want) || !labelled {
                sim.merge(
                    &ar::<Endpoints>(),
                    Some(ns),
                    name,
                    false,
                    json!({
                        "metadata": {"labels": {ENDPOINTS_MANAGED_BY_LABEL: ENDPOINTS_CONTROLLER}},
                        "subsets": want,
                    }),
                )
                .await;
            }
        }
    }
}

async fn reconcile_slice(sim: &mut Sim, snap: &Snapshot, svc: &Service, ns: &str, pods: &[&Pod]) {
    let name = slice_name(svc);
    let (ports, endpoints) = slice_content(svc, pods);
    let existing = snap.endpointslices.iter().find(|s| {
        s.metadata.namespace.as_deref() == Some(ns) && s.metadata.name.as_deref() == Some(name.as_str())
    });
    match existing {
        // No placeholder slice before the first endpoint, so kubectl keeps printing `<none>`.
        None if endpoints.as_array().is_none_or(|a| a.is_empty()) => {}
        None => {
            let mut labels = svc.metadata.labels.clone().unwrap_or_default();
            labels.insert(
                SERVICE_NAME_LABEL.into(),
                svc.metadata.name.clone().unwrap_or_default(),
            );
            labels.insert(SLICE_MANAGED_BY_LABEL.into(), SLICE_CONTROLLER.into());
            let obj = json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": labels,
                    "ownerReferences": [owner_ref("v1", "Service", &svc.metadata)],
                },
                "addressType": "IPv4",
                "endpoints": endpoints,
                "ports": ports,
            });
            sim.create(&ar::<EndpointSlice>(), Some(ns), obj).await;
        }
        Some(s) => {
            let cur_eps = serde_json::to_value(&s.endpoints).unwrap_or_default();
            let cur_ports = serde_json::to_value(s.ports.clone().unwrap_or_default()).unwrap_or_default();
            if !crate::util::equiv(&cur_eps, &endpoints) || !crate::util::equiv(&cur_ports, &ports) {
                sim.merge(
                    &ar::<EndpointSlice>(),
                    Some(ns),
                    &name,
                    false,
                    json!({"endpoints": endpoints, "ports": ports}),
                )
                .await;
            }
        }
    }
}
