//! One module per command group.

pub mod cluster;
pub mod dev;
pub mod diagnostics;
pub mod get;
pub mod init;
pub mod instance;
pub mod manager;
pub mod package;
pub mod plan;
pub mod repo;
pub mod template;
pub mod test;
pub mod version;
pub mod wait;
