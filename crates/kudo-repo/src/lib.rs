//! KUDO operator repositories: the `index.yaml` a repository serves, the user's
//! `repositories.yaml`, fetching indexes and package tarballs (local, `file://`, `http(s)://`) with
//! digest checks and size limits, and resolving `install NAME` to a package — also from OCI
//! registries (`oci://…` arguments and `oci://HOST/NAMESPACE` repositories, through kudo-oci).
//!
//! Blocking I/O on purpose: repository commands are one-shot CLI calls with at most a couple of
//! downloads, and keeping them off the async runtime keeps `kubectl kudo repo` free of tokio. The
//! registry client is async; each registry operation runs on a runtime of its own
//! (`kudo_oci::block_on`).

pub mod config;
pub mod dependencies;
pub mod error;
pub mod fetch;
pub mod index;
pub mod oci;
pub mod resolve;

pub use config::{RepoEntry, RepositoryConfig};
pub use dependencies::{Dependencies, resolve_dependencies};
pub use error::RepoError;
pub use fetch::{Fetcher, Location};
pub use index::{IndexFile, PackageVersion, VersionFilter};
pub use oci::OciSettings;
pub use resolve::{Request, Source, resolve};
