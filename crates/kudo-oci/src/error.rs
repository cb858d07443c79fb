//! Errors of registry work, each naming the reference (or file) involved, worded so the CLI can
//! print them as they are.

use std::path::PathBuf;

use thiserror::Error;

/// Everything that can go wrong pushing, pulling, signing or verifying a package artifact.
#[derive(Debug, Error)]
pub enum OciError {
    /// A reference that is not `oci://HOST/REPO[:TAG][@sha256:…]`.
    #[error("invalid OCI reference {reference:?}: {message}")]
    Reference {
        /// What was given.
        reference: String,
        /// Which part is wrong.
        message: String,
    },
    /// The registry cannot be reached (connection refused, DNS, TLS handshake, timeout).
    #[error("cannot reach the registry {registry} for {reference}: {message}")]
    Unreachable {
        /// The reference being worked on.
        reference: String,
        /// `host[:port]`.
        registry: String,
        /// What failed, with its causes.
        message: String,
    },
    /// 401: no credentials, wrong ones, or expired ones.
    #[error(
        "the registry {registry} refused {reference} with 401 Unauthorized ({credentials}); \
         log in with `kubectl kudo registry login {registry}` (credentials may have expired)"
    )]
    Unauthorized {
        /// The reference being worked on.
        reference: String,
        /// `host[:port]`.
        registry: String,
        /// Which credentials were sent, never their value (`no credentials`, `user "u" from FILE`).
        credentials: String,
    },
    /// 403: the credentials are valid but may not do this.
    #[error("the registry {registry} denied access to {reference} (403 Forbidden, {credentials}): {message}")]
    Denied {
        /// The reference being worked on.
        reference: String,
        /// `host[:port]`.
        registry: String,
        /// Which credentials were sent.
        credentials: String,
        /// The registry's own words.
        message: String,
    },
    /// 404 or the registry's `*_UNKNOWN` codes.
    #[error("{reference} not found in the registry: {message}")]
    NotFound {
        /// The reference being worked on.
        reference: String,
        /// The registry's own words.
        message: String,
    },
    /// Another answer of the registry that is not success.
    #[error("the registry {registry} failed on {reference}: {message}")]
    Registry {
        /// The reference being worked on.
        reference: String,
        /// `host[:port]`.
        registry: String,
        /// The status and the registry's words.
        message: String,
    },
    /// The manifest is not a kudo package: an index, another media type, another layer count.
    #[error("{reference} is not a kudo package: {message}")]
    NotAPackage {
        /// The reference being worked on.
        reference: String,
        /// What it is instead.
        message: String,
    },
    /// Content whose sha256 is not the digest it was asked for or announced with.
    #[error("digest mismatch for {what} of {reference}: expected {expected}, received {actual}")]
    Digest {
        /// The reference being worked on.
        reference: String,
        /// `manifest` or `layer`.
        what: String,
        /// The digest asked for.
        expected: String,
        /// The digest of the bytes received.
        actual: String,
    },
    /// A blob that ended before its descriptor's size.
    #[error("the {what} of {reference} is truncated: received {received} of {size} bytes")]
    Truncated {
        /// The reference being worked on.
        reference: String,
        /// `layer`, `signature payload`.
        what: String,
        /// Bytes received.
        received: u64,
        /// Bytes announced.
        size: u64,
    },
    /// A manifest or blob over the limits this client reads.
    #[error("the {what} of {reference} is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// The reference being worked on.
        reference: String,
        /// What was being read.
        what: String,
        /// Its announced size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The layer was fetched but is not a valid package (the package reader's limits included).
    #[error("the package in {reference} is invalid")]
    Package {
        /// The reference being worked on.
        reference: String,
        /// The reader's error.
        source: kudo_package::PackageError,
    },
    /// The trust policy asks for a signature and the artifact has none.
    #[error("{reference} is not signed: no cosign signature at {signature_tag}")]
    Unsigned {
        /// The artifact, by digest.
        reference: String,
        /// The tag a signature would have.
        signature_tag: String,
    },
    /// Signatures exist, but none verifies with a trusted key.
    #[error("no signature of {reference} verifies with {keys}: {details}")]
    Untrusted {
        /// The artifact, by digest.
        reference: String,
        /// The trusted keys, by name and fingerprint.
        keys: String,
        /// One line per signature checked.
        details: String,
    },
    /// A signature by a trusted key whose payload names another manifest (a copied signature).
    #[error(
        "the signature of {reference} by {key} is for another artifact: its payload names {signed}, \
         not {expected}"
    )]
    WrongDigest {
        /// The artifact, by digest.
        reference: String,
        /// The key that made the signature.
        key: String,
        /// The digest the payload names.
        signed: String,
        /// The artifact's digest.
        expected: String,
    },
    /// A key file that cannot be read or is not an ECDSA P-256 key in the expected form.
    #[error("key {}: {message}", path.display())]
    Key {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The Docker config file or a credential helper failed.
    #[error("credentials: {0}")]
    Credentials(String),
    /// A local file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

impl OciError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> OciError {
        OciError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn not_a_package(reference: impl ToString, message: impl Into<String>) -> OciError {
        OciError::NotAPackage {
            reference: reference.to_string(),
            message: message.into(),
        }
    }
}

/// A PEM text that is not a key of the form asked for ([`crate::TrustedKey::from_pem`],
/// [`crate::PrivateKey::from_pem`]); a file's refusal becomes [`OciError::Key`] naming the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// A private key where a verification needs the public one.
    #[error("this is a private key; --key of a verification takes the public key (BEGIN PUBLIC KEY)")]
    PrivateKeyGiven,
    /// cosign's own password-encrypted format, which this client does not decrypt.
    #[error(
        "cosign's password-encrypted key format is not read; make a key with \
         `kubectl kudo package keygen` or openssl (docs/distributing.md)"
    )]
    Encrypted,
    /// Not an ECDSA P-256 public key in SubjectPublicKeyInfo PEM.
    #[error("not an ECDSA P-256 public key in SubjectPublicKeyInfo PEM (BEGIN PUBLIC KEY): {0}")]
    NotPublicKey(String),
    /// Not an ECDSA P-256 private key in PKCS#8 or SEC1 PEM.
    #[error("not an ECDSA P-256 private key in PKCS#8 (BEGIN PRIVATE KEY) or SEC1 PEM: {0}")]
    NotPrivateKey(String),
}

/// An operatorVersion that cannot be an OCI tag ([`crate::reference::version_tag`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tag {tag:?} is not 1-128 characters of letters, digits, '_', '.' and '-' (not starting with \
     '.' or '-')"
)]
pub struct TagError {
    /// The tag as it would be written.
    pub tag: String,
}

/// A `SOURCE_DATE_EPOCH` that gives no push time ([`crate::artifact::created_timestamp`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EpochError {
    /// Not an integer number of seconds.
    #[error("SOURCE_DATE_EPOCH={0:?} is not a number of seconds")]
    NotANumber(String),
    /// Seconds outside what a timestamp can hold.
    #[error("SOURCE_DATE_EPOCH={0} is out of range")]
    OutOfRange(i64),
}
