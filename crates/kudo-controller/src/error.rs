//! Why the manager could not start or stopped ([`Error`]).

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration cannot work.
    #[error("invalid controller configuration: {0}")]
    InvalidConfig(String),
    /// The global log subscriber could not be installed (one is already set).
    #[error("cannot install the log subscriber: {0}")]
    Logging(String),
    /// The `kudo.dev` CRDs could not be installed or did not become Established.
    #[error("cannot install the KUDO CRDs: {0}")]
    Crds(String),
    /// The metrics/health server could not listen.
    #[error("metrics server: {0}")]
    Metrics(String),
}
