//! Package sources in the cluster (a kudo-rs extension): what the manager decides about an
//! `OperatorSource` (`kudo_api::source`). Pure; the controller (`kudo_controller`'s source
//! controller) reads the source, its Secrets, the registry and the OperatorVersions, and does what
//! these functions say:
//!
//! * [`read_spec`]: what the spec asks for, or why it cannot be done ([`Wanted`]);
//! * [`due`]: whether to ask the registry now, else how soon;
//! * [`policy_refusal`]: a source the manager's `--require-verified-sources` refuses before any pull;
//! * [`choose_tag`]: the highest tag in a range (the order is the caller's: kudo-repo's);
//! * [`admit`]: whether the pulled package may be stored as an OperatorVersion ([`Admission`]);
//! * [`status`]: what the source's status says after a check ([`status::checked`]) and while one
//!   runs ([`status::reconciling`]);
//! * [`policy`]: whether an Instance may run an OperatorVersion under `--require-verified-sources`.
//!
//! An OperatorVersion is never stored from an artifact that failed a check: the controller pulls
//! through `kudo_oci::Registry::pull_package`, which verifies before it fetches the layer and
//! returns an error for every refusal, and only an [`Admission::Create`] or [`Admission::Adopt`]
//! writes anything but the source's status.

use kudo_api::OperatorVersionSpec;
use kudo_api::source::{OperatorSourceSpec, OperatorSourceStatus, PROVIDER_COSIGN, PROVIDER_NONE};
use kudo_api::source::{StoredOperatorVersion, conditions};
use kudo_template::sprig::VersionRange;
use sha2::{Digest as _, Sha256};

use crate::time::Timestamp;

pub mod policy;
pub mod status;

/// How often the registry is asked again when `spec.interval` is unset.
pub const DEFAULT_INTERVAL_SECS: u64 = 600;
/// The longest wait before a failed check is tried again (shorter intervals are kept).
pub const FAILURE_RETRY_SECS: u64 = 60;

/// What a source's spec asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// `spec.url`, trimmed.
    pub url: String,
    /// Which artifact of the repository (`spec.ref`).
    pub pick: Pick,
    /// `spec.interval` in seconds.
    pub interval_secs: u64,
    /// The signature check (`spec.verify`).
    pub verify: Verify,
}

/// Which artifact of the repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pick {
    /// `ref.tag`: that tag, whatever manifest it names at each check.
    Tag(String),
    /// A range over the version tags (Masterminds semver).
    Range(String),
    /// `ref.digest`: exactly that manifest.
    Digest(String),
}

/// The signature check: `kudo_oci::TrustPolicy` once the keys are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verify {
    /// `provider: none`.
    None,
    /// `provider: cosign` with the public keys of this Secret.
    Keys {
        /// The Secret of the source's namespace whose `*.pub` keys are trusted.
        secret: String,
    },
}

/// Why a check did not store its artifact, for the status (see [`FailureKind::reason`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What failed, which decides the condition reason and whether it is retried.
    pub kind: FailureKind,
    /// The error as the user reads it in the conditions' message.
    pub message: String,
    /// `cosign key sha256:…` when the signature was verified before the failure (the package
    /// itself, or storing it, failed after).
    pub signature: Option<String>,
}

impl Failure {
    /// A failure with no verified signature recorded.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
            signature: None,
        }
    }
}

/// The kinds of failure a check reports, each its own `Stalled` reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The spec cannot work (bad URL, no or two refs, a bad range or interval, an unknown
    /// provider); checked again only when the spec changes.
    Spec,
    /// A Secret the spec names is missing or holds no usable content.
    Secret,
    /// `provider: none` under the manager's `--require-verified-sources`.
    VerificationRequired,
    /// The registry: unreachable, 401/403/404, another error.
    Registry,
    /// No version tag is in the range.
    NoMatchingTag,
    /// Not a kudo package, a digest mismatch, a truncated or oversized blob, an invalid package
    /// (the package reader's limits: a gzip bomb), a tag that is not its package's version.
    Artifact,
    /// The artifact has no signature.
    Unsigned,
    /// No signature verifies with a trusted key.
    Untrusted,
    /// A trusted key signed another artifact (the payload names another digest).
    WrongDigest,
    /// An OperatorVersion (or typed API CRD) of that name exists with other content.
    Conflict,
}

impl FailureKind {
    /// The condition reason.
    pub fn reason(self) -> &'static str {
        match self {
            FailureKind::Spec => "InvalidSpec",
            FailureKind::Secret => "SecretUnavailable",
            FailureKind::VerificationRequired => "VerificationRequired",
            FailureKind::Registry => "RegistryError",
            FailureKind::NoMatchingTag => "NoMatchingTag",
            FailureKind::Artifact => "InvalidArtifact",
            FailureKind::Unsigned => "Unsigned",
            FailureKind::Untrusted => "UntrustedSignature",
            FailureKind::WrongDigest => "SignatureForAnotherArtifact",
            FailureKind::Conflict => "OperatorVersionConflict",
        }
    }

    /// Whether the next check may succeed with nothing changed but time: the registry answers
    /// again, the Secret is applied (Git applies objects in any order). Such a failure is
    /// `Reconciling` (retried), every other one `Stalled` (it needs a change by someone).
    pub fn is_transient(self) -> bool {
        matches!(self, FailureKind::Registry | FailureKind::Secret)
    }

    /// Whether the failure is the signature check's refusal (`SignatureVerified=False`).
    pub fn is_refused_signature(self) -> bool {
        matches!(
            self,
            FailureKind::Unsigned
                | FailureKind::Untrusted
                | FailureKind::WrongDigest
                | FailureKind::VerificationRequired
        )
    }
}

/// Reads the spec: exactly one ref, a range that parses, a positive interval, a known provider
/// with what it needs. The OCI grammar of the URL, tag and digest is kudo-oci's and is checked
/// by the caller.
pub fn read_spec(spec: &OperatorSourceSpec) -> Result<Wanted, String> {
    let url = spec.url.trim().to_string();
    let r = &spec.reference;
    let pick = match (&r.tag, &r.semver, &r.digest) {
        (Some(t), None, None) => Pick::Tag(t.trim().to_string()),
        (None, Some(range), None) => {
            VersionRange::parse(range).map_err(|e| format!("spec.ref.semver {range:?}: {e}"))?;
            Pick::Range(range.trim().to_string())
        }
        (None, None, Some(d)) => Pick::Digest(d.trim().to_string()),
        _ => return Err("spec.ref: set exactly one of tag, semver and digest".into()),
    };
    let interval_secs = match spec.interval.as_deref().map(str::trim) {
        None | Some("") => DEFAULT_INTERVAL_SECS,
        Some(text) => match kudo_api::duration::parse(text) {
            Ok(nanos) if nanos >= 1_000_000_000 => (nanos / 1_000_000_000) as u64,
            Ok(_) => return Err(format!("spec.interval {text:?}: at least 1s")),
            Err(e) => return Err(format!("spec.interval: {e}")),
        },
    };
    Ok(Wanted {
        url,
        pick,
        interval_secs,
        verify: read_verify(spec)?,
    })
}

fn read_verify(spec: &OperatorSourceSpec) -> Result<Verify, String> {
    let Some(v) = &spec.verify else {
        return Err(format!(
            "spec.verify is required: provider {PROVIDER_COSIGN} with secretRef (the trusted public \
             keys), or provider {PROVIDER_NONE} to store packages without checking a signature"
        ));
    };
    match (v.provider.as_str(), &v.secret_ref) {
        (PROVIDER_NONE, _) => Ok(Verify::None),
        (PROVIDER_COSIGN, Some(s)) if !s.name.is_empty() => Ok(Verify::Keys {
            secret: s.name.clone(),
        }),
        (PROVIDER_COSIGN, _) => Err(
            "spec.verify.secretRef: provider cosign needs the Secret of the trusted public keys \
             (keyless verification is not supported)"
                .into(),
        ),
        (other, _) => Err(format!(
            "spec.verify.provider {other:?}: {PROVIDER_COSIGN} or {PROVIDER_NONE}"
        )),
    }
}

/// Whether to ask the registry now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Check at once.
    Now,
    /// In this many seconds.
    After(u64),
}

/// When the next check is: at once for a new generation, a check that never finished
/// (`Reconciling=True`, reason `Progressing`) or no recorded check; else `interval` after the
/// last one, or at most [`FAILURE_RETRY_SECS`] after a failed one.
pub fn due(
    status: Option<&OperatorSourceStatus>,
    generation: Option<i64>,
    interval_secs: u64,
    now: Timestamp,
) -> Due {
    let Some(st) = status else {
        return Due::Now;
    };
    let is_true = |t: &str| st.conditions.iter().any(|c| c.type_ == t && c.status == "True");
    // `Reconciling` of a check still running, not of a failure being retried.
    let unfinished = st
        .conditions
        .iter()
        .any(|c| c.type_ == conditions::RECONCILING && c.status == "True" && c.reason == status::PROGRESSING);
    if st.observed_generation != generation || unfinished {
        return Due::Now;
    }
    let Some(last) = st
        .last_check_time
        .as_deref()
        .and_then(|t| Timestamp::parse(t).ok())
    else {
        return Due::Now;
    };
    let period = if is_true(conditions::READY) {
        interval_secs
    } else {
        interval_secs.min(FAILURE_RETRY_SECS)
    };
    let elapsed = u64::try_from(now.seconds_since(last)).unwrap_or(0);
    if elapsed >= period {
        Due::Now
    } else {
        Due::After(period - elapsed)
    }
}

/// `--require-verified-sources` refuses a source that checks no signature, before anything is
/// pulled.
pub fn policy_refusal(require_verified: bool, verify: &Verify) -> Option<Failure> {
    (require_verified && *verify == Verify::None).then(|| {
        Failure::new(
            FailureKind::VerificationRequired,
            "the manager requires verified sources (--require-verified-sources): spec.verify.provider \
             none is refused; name the trusted public keys with provider cosign and secretRef",
        )
    })
}

/// The version a tag stands for: a tag cannot hold `+`, so a version's build metadata is written
/// with `_` (kudo_oci::reference::version_tag).
fn tag_version(tag: &str) -> String {
    tag.replace('_', "+")
}

/// The tag a range picks among `newest_first` (the repository's version tags, newest first, as
/// kudo-repo orders them): the first in the range.
pub fn choose_tag(url: &str, range: &str, newest_first: &[String]) -> Result<String, Failure> {
    let parsed = VersionRange::parse(range)
        .map_err(|e| Failure::new(FailureKind::Spec, format!("spec.ref.semver {range:?}: {e}")))?;
    if let Some(t) = newest_first.iter().find(|t| parsed.matches(&tag_version(t))) {
        return Ok(t.clone());
    }
    let shown = if newest_first.is_empty() {
        "it has no version tags".to_string()
    } else {
        let mut list: Vec<&str> = newest_first.iter().take(10).map(String::as_str).collect();
        if newest_first.len() > 10 {
            list.push("…");
        }
        format!("its version tags are {}", list.join(", "))
    };
    Err(Failure::new(
        FailureKind::NoMatchingTag,
        format!("no tag of {url} is in the range {range:?}: {shown}"),
    ))
}

/// The artifact a check pulled and verified, and the OperatorVersion it would store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// `oci://HOST/REPO@sha256:…`.
    pub url: &'a str,
    /// The tag a range picked (`None` otherwise).
    pub range_tag: Option<&'a str>,
    /// The package's operatorVersion.
    pub package_version: &'a str,
    /// The OperatorVersion's name.
    pub operator_version: &'a str,
    /// [`spec_digest`] of the OperatorVersion the package makes.
    pub spec_digest: &'a str,
    /// `cosign key sha256:…` when verified.
    pub signature: Option<&'a str>,
}

/// An OperatorVersion of the candidate's name that exists already.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Existing<'a> {
    /// [`spec_digest`] of its spec.
    pub spec_digest: &'a str,
    /// Its `kudo-rs.dev/source` annotation.
    pub source: Option<&'a str>,
}

/// What a check does with its candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// No such OperatorVersion: create it.
    Create,
    /// This source stored it from this artifact, unchanged since: nothing to write.
    Keep,
    /// It exists with exactly the package's content (installed before, e.g. by `kubectl kudo
    /// install`): label and annotate it as this source's.
    Adopt,
    /// Nothing is written; the status says why.
    Refuse(Failure),
}

/// Whether the candidate may be stored: a tag a range picked must be its package's version; an
/// existing OperatorVersion of that name is kept only when this source stored it from this
/// artifact and it is unchanged, adopted only when its content is the package's, else refused
/// (the cluster would run content that was not what was pulled and verified).
pub fn admit(
    cand: &Candidate<'_>,
    existing: Option<&Existing<'_>>,
    recorded: &[StoredOperatorVersion],
) -> Admission {
    let with_signature = |mut f: Failure| {
        f.signature = cand.signature.map(str::to_string);
        Admission::Refuse(f)
    };
    if let Some(tag) = cand.range_tag
        && tag_version(tag) != cand.package_version
    {
        return with_signature(Failure::new(
            FailureKind::Artifact,
            format!(
                "{} (tag {tag}) holds operator version {}: a tag picked by a range must be its \
                 package's operatorVersion",
                cand.url, cand.package_version
            ),
        ));
    }
    let Some(e) = existing else {
        return Admission::Create;
    };
    let ours = recorded.iter().find(|r| r.name == cand.operator_version);
    if ours.is_some_and(|r| r.url == cand.url && r.spec_digest == e.spec_digest) {
        return Admission::Keep;
    }
    if e.spec_digest == cand.spec_digest {
        return Admission::Adopt;
    }
    let from = match (ours, e.source) {
        (Some(_), _) => "was changed after this source stored it".to_string(),
        (None, Some(s)) => format!("was installed from {s}"),
        (None, None) => "was not installed from a registry".to_string(),
    };
    with_signature(Failure::new(
        FailureKind::Conflict,
        format!(
            "operator version {} exists with other content and {from}; {} was not stored: delete \
             that OperatorVersion or publish a new version",
            cand.operator_version, cand.url
        ),
    ))
}

/// `sha256:` and the hex SHA-256 of the OperatorVersion spec as JSON with sorted keys: what a
/// source records of each OperatorVersion it stores and what the `--require-verified-sources`
/// policy compares, so that an OperatorVersion edited after it was stored no longer counts.
pub fn spec_digest(spec: &OperatorVersionSpec) -> String {
    let value = serde_json::to_value(spec).unwrap_or_default();
    let canonical = serde_json::to_vec(&sorted(value)).unwrap_or_default();
    format!("sha256:{}", hex::encode(Sha256::digest(&canonical)))
}

/// `v` with the keys of every object sorted (serde_json keeps insertion order in this workspace).
fn sorted(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}
