//! The simulated cluster's network as the simulated containers see it: cluster DNS
//! (`svc.ns.svc.cluster.local` → the Service's ClusterIP, or its ready endpoints when headless;
//! `host.subdomain.ns.svc.cluster.local` → a StatefulSet pod's IP; the pod's search domains
//! applied; no other names), and routing of a connection to the stand-in of a pod (a pod IP
//! reaches that pod while it runs, a ClusterIP the first ready endpoint of the port's Service).
//!
//! Answers come from the objects of the kubelet's last pass ([`ClusterView`]), so what a
//! container reaches is what the cluster held when it started.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::shell::{Network, Resolved, Server};

/// The objects the network is made of, as of one pass.
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    /// The pods: their IPs, and the host names of pods below a Service's subdomain.
    pub pods: Vec<Arc<Pod>>,
    /// The Services, whose names and cluster IPs the cluster DNS and routing use.
    pub services: Vec<Arc<Service>>,
    /// The Endpoints: a Service's ready pods, for headless names and routing.
    pub endpoints: Vec<Arc<Endpoints>>,
}

const DOMAIN: &str = "svc.cluster.local";

fn running(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn pod_ip(p: &Pod) -> Option<&str> {
    p.status.as_ref()?.pod_ip.as_deref()
}

impl ClusterView {
    fn service(&self, ns: &str, name: &str) -> Option<&Service> {
        self.services
            .iter()
            .find(|s| s.metadata.namespace.as_deref() == Some(ns) && s.metadata.name.as_deref() == Some(name))
            .map(|s| s.as_ref())
    }

    /// Ready endpoint pods of a Service: `(pod name, ip)`.
    fn ready_endpoints(&self, ns: &str, name: &str) -> Vec<(String, String)> {
        self.endpoints
            .iter()
            .filter(|e| {
                e.metadata.namespace.as_deref() == Some(ns) && e.metadata.name.as_deref() == Some(name)
            })
            .flat_map(|e| e.subsets.iter().flatten())
            .flat_map(|s| s.addresses.iter().flatten())
            .map(|a| {
                (
                    a.target_ref
                        .as_ref()
                        .and_then(|r| r.name.clone())
                        .unwrap_or_default(),
                    a.ip.clone(),
                )
            })
            .collect()
    }

    /// An FQDN below `svc.cluster.local`.
    fn lookup_fqdn(&self, fqdn: &str) -> Option<Resolved> {
        let local = fqdn.strip_suffix(&format!(".{DOMAIN}"))?;
        let parts: Vec<&str> = local.split('.').collect();
        let ips: Vec<String> = match parts.as_slice() {
            [svc, ns] => {
                let s = self.service(ns, svc)?;
                match s.spec.as_ref().and_then(|sp| sp.cluster_ip.as_deref()) {
                    Some(ip) if ip != "None" && !ip.is_empty() => vec![ip.to_string()],
                    _ => self
                        .ready_endpoints(ns, svc)
                        .into_iter()
                        .map(|(_, ip)| ip)
                        .collect(),
                }
            }
            [host, svc, ns] => {
                self.service(ns, svc)?;
                let p = self.pods.iter().find(|p| {
                    let spec = p.spec.as_ref();
                    p.metadata.namespace.as_deref() == Some(*ns)
                        && spec.and_then(|s| s.subdomain.as_deref()) == Some(*svc)
                        && spec
                            .and_then(|s| s.hostname.as_deref())
                            .or(p.metadata.name.as_deref())
                            == Some(*host)
                        && p.metadata.deletion_timestamp.is_none()
                })?;
                vec![pod_ip(p)?.to_string()]
            }
            _ => return None,
        };
        (!ips.is_empty()).then(|| Resolved {
            canonical: fqdn.to_string(),
            ips,
        })
    }

    /// Cluster DNS for `name` from a pod of namespace `ns`.
    pub fn resolve(&self, ns: &str, name: &str) -> Option<Resolved> {
        let name = name.trim_end_matches('.');
        if name.ends_with(".cluster.local") {
            return self.lookup_fqdn(name);
        }
        [
            format!("{name}.{ns}.{DOMAIN}"),
            format!("{name}.{DOMAIN}"),
            format!("{name}.cluster.local"),
        ]
        .iter()
        .find_map(|f| self.lookup_fqdn(f))
    }

    /// The pod (uid) and container port a connection to `ip:port` reaches.
    pub fn route(&self, ip: &str, port: u16) -> Option<(String, u16)> {
        if let Some(p) = self.pods.iter().find(|p| pod_ip(p) == Some(ip) && running(p)) {
            return Some((p.metadata.uid.clone()?, port));
        }
        let svc = self
            .services
            .iter()
            .find(|s| s.spec.as_ref().and_then(|sp| sp.cluster_ip.as_deref()) == Some(ip))?;
        let ns = svc.metadata.namespace.as_deref()?;
        let sp = svc
            .spec
            .as_ref()?
            .ports
            .iter()
            .flatten()
            .find(|p| p.port == i32::from(port))?;
        let (pod_name, _) = self
            .ready_endpoints(ns, svc.metadata.name.as_deref()?)
            .into_iter()
            .next()?;
        let pod = self.pods.iter().find(|p| {
            p.metadata.namespace.as_deref() == Some(ns)
                && p.metadata.name.as_deref() == Some(pod_name.as_str())
        })?;
        let target = match &sp.target_port {
            None => i32::from(port),
            Some(IntOrString::Int(t)) => *t,
            Some(IntOrString::String(name)) => {
                pod.spec
                    .as_ref()?
                    .containers
                    .iter()
                    .flat_map(|c| c.ports.iter().flatten())
                    .find(|p| p.name.as_deref() == Some(name.as_str()))?
                    .container_port
            }
        };
        Some((pod.metadata.uid.clone()?, u16::try_from(target).ok()?))
    }
}

/// The network of one container: the cluster's view, and the stand-ins running in every pod
/// (`servers`, by pod uid; the container's own pod under `own`, reached at `127.0.0.1` and at
/// its own IP too).
pub(crate) struct PodNetwork<'a> {
    pub view: &'a ClusterView,
    pub servers: &'a mut HashMap<String, Vec<Server>>,
    pub own: &'a str,
    pub own_ip: &'a str,
}

impl Network for PodNetwork<'_> {
    fn resolve(&self, namespace: &str, name: &str) -> Option<Resolved> {
        self.view.resolve(namespace, name)
    }

    fn server(&mut self, ip: &str, port: u16) -> Option<&mut Server> {
        let (uid, port) = if ip == "127.0.0.1" || (!self.own_ip.is_empty() && ip == self.own_ip) {
            (self.own.to_string(), port)
        } else {
            self.view.route(ip, port)?
        };
        self.servers
            .get_mut(&uid)?
            .iter_mut()
            .find(|s| s.standin.ports.contains(&port))
    }
}
