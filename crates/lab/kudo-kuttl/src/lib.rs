//! A kuttl-compatible declarative test harness (`kubectl kudo test`).
//!
//! KUDO shipped its operator test harness (later spun out as kuttl) and operator authors wrote
//! their tests in its format; this crate runs those suites unchanged: a `TestSuite`
//! (`kuttl-test.yaml`), test case directories of numbered step files, objects applied with
//! create-or-update semantics, `NN-assert.yaml` objects that must eventually be a subset of the
//! live ones, `NN-errors.yaml` objects that must not, `TestStep` deletes and commands, and one
//! fresh namespace per test case. With `startControlPlane`/`startKIND` it runs the suite against
//! an embedded cluster (our API server, simulated workloads and the KUDO controller) instead of a
//! kubeconfig's cluster.
//!
//! Modules: [`config`] (harness objects), [`load`] (directories → cases and steps), [`matching`]
//! (subset rule and diffs), [`command`] (commands and `$VAR`s), [`k8s`] (dynamic API access),
//! [`embedded`] (the in-process cluster), [`runner`] (execution), [`report`] (JUnit/JSON).

pub mod command;
pub mod config;
pub mod embedded;
pub mod k8s;
pub mod load;
pub mod log;
pub mod matching;
pub mod report;
pub mod runner;

use std::path::PathBuf;

pub use config::{TestAssert, TestStep, TestSuite};
pub use embedded::{EmbeddedCluster, EmbeddedOptions};
pub use log::Log;
pub use report::ReportFormat;
pub use runner::{RunOptions, RunSummary, run};

/// Why a run could not be carried out (test failures are not errors: see [`RunSummary`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A suite or test file is malformed.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The run is misconfigured.
    #[error("{0}")]
    Config(String),
    /// Talking to the cluster failed.
    #[error("{0}")]
    Cluster(String),
    /// A suite command failed.
    #[error("suite setup failed: {0}")]
    Setup(String),
}
