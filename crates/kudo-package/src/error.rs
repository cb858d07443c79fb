//! Errors of reading and converting packages. Every variant names the file (and where possible the
//! field) so that a broken package can be fixed from the message alone.

/// Why a package could not be read or converted.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// The YAML of a package file does not parse.
    #[error("{file}: invalid YAML: {message}")]
    Yaml { file: String, message: String },
    /// The YAML parses but a field has the wrong shape.
    #[error("{file}: field `{field}`: {message}")]
    Field {
        file: String,
        field: String,
        message: String,
    },
    /// `operator.yaml` or `params.yaml` is absent.
    #[error("operator package missing {0}")]
    Missing(String),
    /// `apiVersion` is set to something other than `kudo.dev/v1beta1`.
    #[error("{file}: expecting supported API version kudo.dev/v1beta1 but got {got}")]
    ApiVersion { file: String, got: String },
    /// The file system or archive could not be read.
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    /// A tarball entry (or a directory entry) that a package must not contain: absolute or `..`
    /// paths, links, devices, oversize files or archives.
    #[error("{path}: rejected: {message}")]
    Unsafe { path: String, message: String },
    /// A file that must be text is not UTF-8.
    #[error("{path}: file is not valid UTF-8 (byte offset {offset})")]
    NotUtf8 { path: String, offset: usize },
    /// A task references something that does not exist, or has an invalid spec.
    #[error("{0}")]
    Invalid(String),
}

impl PackageError {
    pub(crate) fn io(path: impl std::fmt::Display, e: impl std::fmt::Display) -> PackageError {
        PackageError::Io {
            path: path.to_string(),
            message: e.to_string(),
        }
    }
    pub(crate) fn unsafe_entry(path: impl std::fmt::Display, msg: impl Into<String>) -> PackageError {
        PackageError::Unsafe {
            path: path.to_string(),
            message: msg.into(),
        }
    }
}
