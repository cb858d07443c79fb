//! Kubernetes IO helpers that both the manager (`kudo-controller`) and the CLI's cluster
//! operations (`kudo-client`) need: resolving an object's `apiVersion`/`kind` to an API resource
//! through the discovery API ([`discovery::Cache`]), the API resources of the kinds the code
//! names itself ([`known_resource`]), and a sensitive parameter's value read from its Secret
//! ([`param_sources`]), and the order of two resourceVersions ([`resource_version`]).
//!
//! A crate of its own so that the client library does not pull in the whole manager (watches,
//! caches, leader election, the metrics server) for a few lookups; and not part of `kudo-engine`,
//! which does no IO and knows no kube-rs types.

pub mod discovery;
pub mod failpoint;
pub mod param_sources;
pub mod resource_version;

pub use discovery::known_resource;
