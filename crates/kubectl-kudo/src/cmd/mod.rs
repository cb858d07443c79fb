//! One module per command group. A command's `run` takes the parsed flags and the [`Io`](crate::Io)
//! it writes through, and returns `anyhow::Result<ExitCode>`; [`crate::run`] dispatches to it. The
//! long-running `dev`, `manager` and `test` print to the process's stdout/stderr instead.

pub mod cluster;
pub mod dev;
pub mod diagnostics;
pub mod format;
pub mod get;
pub mod init;
pub mod instance;
pub mod manager;
pub mod migrate;
pub mod oci;
pub mod package;
pub mod plan;
pub mod preview;
pub mod registry;
pub mod repo;
pub mod revision;
pub mod rollout;
pub mod template;
pub mod test;
pub mod ui;
pub mod version;
