//! What a simulated container sees of the cluster's network: names that resolve (the Services and
//! pods of cluster DNS), the simulated servers listening on pod and Service addresses, and other
//! pods' containers to `exec` into. The simulator's runtime implements it from the cluster's
//! objects ([`crate::Runtime`]); [`NoNetwork`] has nothing in it.

use super::standins::Server;

/// An address a name resolved to, as a resolver answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The fully qualified name (`svc.ns.svc.cluster.local`).
    pub canonical: String,
    /// IPv4 addresses.
    pub ips: Vec<String>,
}

/// The cluster as seen from one container.
pub trait Network {
    /// Cluster DNS for `name` from a pod of namespace `namespace` (its search domains applied).
    fn resolve(&self, namespace: &str, name: &str) -> Option<Resolved>;
    /// The simulated server listening on `ip:port` (a Service address reaches one of its ready
    /// endpoints), if any.
    fn server(&mut self, ip: &str, port: u16) -> Option<&mut Server>;
}

/// A network with nothing on it: no name resolves, nothing listens.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoNetwork;

impl Network for NoNetwork {
    fn resolve(&self, _namespace: &str, _name: &str) -> Option<Resolved> {
        None
    }
    fn server(&mut self, _ip: &str, _port: u16) -> Option<&mut Server> {
        None
    }
}
