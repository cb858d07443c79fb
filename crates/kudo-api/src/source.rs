//! `kudo-rs.dev/v1alpha1` `OperatorSource` (a kudo-rs extension): a package in an OCI registry
//! that the manager pulls, verifies and stores as an Operator and OperatorVersion of the source's
//! namespace, re-checking on an interval for a newer tag.
//!
//! ```yaml
//! apiVersion: kudo-rs.dev/v1alpha1
//! kind: OperatorSource
//! metadata: {name: galera, namespace: kudo-packages}
//! spec:
//!   url: oci://registry.example.com/operators/galera
//!   ref: {semver: ">=0.2.0 <1.0.0"}      # or {tag: 0.2.0}, or {digest: "sha256:…"}
//!   interval: 10m
//!   secretRef: {name: regcred}            # kubernetes.io/dockerconfigjson
//!   certSecretRef: {name: registry-ca}    # key ca.crt: the registry's CA
//!   verify:
//!     provider: cosign                    # or none
//!     secretRef: {name: cosign-keys}      # every key ending .pub: a PEM public key
//! ```
//!
//! The fields follow Flux's `OCIRepository` where they mean the same, so that GitOps users read
//! them as they know them. `verify.provider: cosign` with `secretRef` is
//! `kudo_oci::TrustPolicy::Keys`; keyless verification, when it comes, is `provider: cosign`
//! with an identity to match instead of keys (Flux's `matchOIDCIdentity`).
//!
//! What the manager decides about a source is in `kudo_engine::source`; this module is the
//! object only.

use serde::{Deserialize, Serialize};

use crate::{Condition, ObjectMeta};

/// kudo-rs's own group, version and `apiVersion` (one definition for all its kinds).
pub use crate::{OWN_API_VERSION as API_VERSION, OWN_GROUP as GROUP, OWN_VERSION as VERSION};
/// The kind.
pub const KIND: &str = "OperatorSource";
/// Its resource name.
pub const PLURAL: &str = "operatorsources";

/// Label on the Operator and OperatorVersions a source stored: the source's name (in the same
/// namespace). No owner reference: deleting a source leaves what it stored, and the Instances
/// running it, alone.
pub const SOURCE_LABEL: &str = "kudo-rs.dev/operator-source";

/// `spec.verify.provider` of a cosign signature check.
pub const PROVIDER_COSIGN: &str = "cosign";
/// `spec.verify.provider` when no signature is checked.
pub const PROVIDER_NONE: &str = "none";

/// Condition types of a source's status (kstatus: `Ready`, and the abnormal-true `Reconciling`
/// and `Stalled`), and the outcome of the signature check.
pub mod conditions {
    /// True once the artifact asked for is stored as an OperatorVersion.
    pub const READY: &str = "Ready";
    /// True only while a check is under way or will be tried again (a registry or Secret error).
    pub const RECONCILING: &str = "Reconciling";
    /// True only when the spec cannot succeed without a change (unsigned, untrusted, invalid).
    pub const STALLED: &str = "Stalled";
    /// Whether the stored artifact's cosign signature verified with a trusted key.
    pub const SIGNATURE_VERIFIED: &str = "SignatureVerified";
}

/// An `OperatorSource`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorSource {
    /// `kudo-rs.dev/v1alpha1`.
    pub api_version: String,
    /// `OperatorSource`.
    pub kind: String,
    /// Its name and namespace: the OperatorVersions it stores are created in that namespace.
    pub metadata: ObjectMeta,
    /// The repository, which artifact of it, how often, and how signatures are checked.
    pub spec: OperatorSourceSpec,
    /// What the manager found, written by the manager only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<OperatorSourceStatus>,
}

impl OperatorSource {
    /// `metadata.generation` (set by the API server on every spec change).
    pub fn generation(&self) -> Option<i64> {
        self.metadata
            .other
            .get("generation")
            .and_then(serde_json::Value::as_i64)
    }
}

/// Where the package is and what must hold for it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorSourceSpec {
    /// The repository: `oci://HOST[:PORT]/REPOSITORY`, no tag or digest (those are `ref`).
    pub url: String,
    /// Which artifact of the repository.
    #[serde(default, rename = "ref")]
    pub reference: SourceRef,
    /// How often the registry is asked again (a Go duration, `10m` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// A `kubernetes.io/dockerconfigjson` Secret of the namespace with the registry's
    /// credentials (anonymous when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// A Secret of the namespace whose key `ca.crt` holds CA certificates (PEM) trusted for the
    /// registry beside the system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_secret_ref: Option<LocalObjectReference>,
    /// Plain HTTP instead of HTTPS; never chosen on its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// The signature check (required: `provider: none` says so explicitly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<SourceVerification>,
}

/// One of a tag, a semantic version range over the repository's tags, or a digest.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceRef {
    /// One tag of the repository, followed when it moves to another manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// A range (`>=0.2.0 <1.0.0`, `^1.2`, `~0.3`; Masterminds semver, as Flux and Helm read
    /// ranges): the highest version tag in it is taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semver: Option<String>,
    /// `sha256:…`: exactly this manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// `spec.verify`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceVerification {
    /// [`PROVIDER_COSIGN`] or [`PROVIDER_NONE`].
    pub provider: String,
    /// With `cosign`: a Secret of the namespace whose keys ending `.pub` hold the trusted public
    /// keys (PEM); a signature by any of them is accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
}

/// A Secret of the object's own namespace, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalObjectReference {
    /// The Secret's name.
    pub name: String,
}

/// What the manager found. Optional fields are written as `null` when empty, so that a merge
/// patch of the whole status removes what no longer holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorSourceStatus {
    /// The generation the conditions describe.
    #[serde(default)]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling`, `Stalled` and `SignatureVerified` ([`conditions`]).
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The artifact last stored (kept while a later check fails: it is what runs).
    #[serde(default)]
    pub artifact: Option<SourceArtifact>,
    /// Every OperatorVersion this source stored that still exists: what the manager's
    /// `--require-verified-sources` policy accepts (its spec digest must still match).
    #[serde(default)]
    pub operator_versions: Vec<StoredOperatorVersion>,
    /// When the registry was last asked (RFC 3339).
    #[serde(default)]
    pub last_check_time: Option<String>,
}

/// `status.artifact`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceArtifact {
    /// `oci://HOST/REPO@sha256:…`.
    pub url: String,
    /// The manifest's `sha256:…` digest.
    pub digest: String,
    /// The tag it was resolved from (`null` for a digest reference).
    #[serde(default)]
    pub tag: Option<String>,
    /// The package's operator name, operatorVersion and appVersion.
    pub operator: String,
    /// The package's `operatorVersion`.
    pub version: String,
    /// The package's `appVersion`, when it declares one.
    #[serde(default)]
    pub app_version: Option<String>,
    /// The OperatorVersion object stored.
    pub operator_version: String,
    /// `cosign key sha256:…` when a signature was verified, else `null`.
    #[serde(default)]
    pub signature: Option<String>,
}

/// One entry of `status.operatorVersions`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredOperatorVersion {
    /// The OperatorVersion's name.
    pub name: String,
    /// The artifact it came from, by digest (`oci://…@sha256:…`).
    pub url: String,
    /// `kudo_engine::source::spec_digest` of its spec as stored.
    pub spec_digest: String,
    /// `cosign key sha256:…` when its signature was verified (absent otherwise: an item of a
    /// list, which a merge patch replaces whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}
