//! Errors of reading and converting packages. Every variant names the file (and where possible the
//! field) so that a broken package can be fixed from the message alone.

/// Why a package could not be read or converted.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// The YAML of a package file does not parse.
    #[error("{file}: invalid YAML: {message}")]
    Yaml {
        /// The package file (root-relative path).
        file: String,
        /// The YAML reader's message.
        message: String,
    },
    /// The YAML parses but a field has the wrong shape.
    #[error("{file}: field `{field}`: {message}")]
    Field {
        /// The file the field is in.
        file: String,
        /// The field's path within the file.
        field: String,
        /// What is wrong with its value.
        message: String,
    },
    /// `operator.yaml` or `params.yaml` is absent.
    #[error("operator package missing {0}")]
    Missing(String),
    /// `apiVersion` is set to something other than `kudo.dev/v1beta1`.
    #[error("{file}: expecting supported API version kudo.dev/v1beta1 but got {got}")]
    ApiVersion {
        /// `operator.yaml` or `params.yaml`.
        file: String,
        /// The `apiVersion` the file declares.
        got: String,
    },
    /// The file system or archive could not be read.
    #[error("{path}: {message}")]
    Io {
        /// The file, directory or archive that could not be read.
        path: String,
        /// The underlying error's message.
        message: String,
    },
    /// A tarball entry (or a directory entry) that a package must not contain: absolute or `..`
    /// paths, links, devices, oversize files or archives.
    #[error("{path}: rejected: {message}")]
    Unsafe {
        /// The offending entry (or the archive itself when it is too large).
        path: String,
        /// Why the entry is rejected.
        message: String,
    },
    /// A file that must be text is not UTF-8.
    #[error("{path}: file is not valid UTF-8 (byte offset {offset})")]
    NotUtf8 {
        /// The offending file.
        path: String,
        /// Byte offset of the first invalid UTF-8 sequence.
        offset: usize,
    },
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
