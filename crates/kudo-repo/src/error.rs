//! Errors of repository handling, worded so the CLI can print them as they are.

use std::path::PathBuf;

use thiserror::Error;

/// Everything that can go wrong reading configuration, indexes and packages.
#[derive(Debug, Error)]
pub enum RepoError {
    /// A local file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// An HTTP request failed or returned a non-success status.
    #[error("cannot download {url}: {message}")]
    Http {
        /// The URL requested.
        url: String,
        /// What happened.
        message: String,
    },
    /// A download or file is larger than we are willing to read.
    #[error("{what} is larger than the limit of {limit} bytes")]
    TooLarge {
        /// What was being read.
        what: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// A YAML document (index or repositories file) is malformed.
    #[error("invalid {what}: {message}")]
    Parse {
        /// Which document.
        what: String,
        /// Why.
        message: String,
    },
    /// A downloaded tarball does not match the digest the index promises.
    #[error("digest mismatch for {url}: index says sha256 {expected}, downloaded file has {actual}")]
    Digest {
        /// Where the tarball came from.
        url: String,
        /// Digest from the index.
        expected: String,
        /// Digest of the bytes received.
        actual: String,
    },
    /// Nothing in the index matches the request.
    #[error("{0}")]
    NotFound(String),
    /// A request the configuration cannot satisfy (unknown repository, duplicate name…).
    #[error("{0}")]
    Config(String),
    /// The tarball was fetched but is not a valid package.
    #[error(transparent)]
    Package(#[from] kudo_package::PackageError),
    /// A registry refused, or sent something that is not a (trusted) package.
    #[error(transparent)]
    Oci(Box<kudo_oci::OciError>),
}

impl RepoError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> RepoError {
        RepoError::Io {
            path: path.into(),
            source,
        }
    }
}
