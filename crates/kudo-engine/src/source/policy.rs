//! The manager's `--require-verified-sources` policy: every OperatorVersion it runs must have been
//! stored by an OperatorSource that verified its signature, and be unchanged since.
//!
//! Annotations prove nothing: anyone allowed to create an OperatorVersion can write
//! `kudo-rs.dev/source` and `kudo-rs.dev/signature` on it (a verified `kubectl kudo install` writes
//! them from the user's machine). What counts is the OperatorSource's *status*, which only the
//! manager writes (`operatorsources/status`; no built-in role grants it): the OperatorVersion's
//! label names the source, the source's `status.operatorVersions` must list it with the key that
//! verified it, and the digest of its spec must be the one recorded when it was stored.

use kudo_api::OperatorVersion;
use kudo_api::source::{OperatorSource, SOURCE_LABEL};

/// The reason of the Instance's `Ready=False` (and of the Warning Event) when the policy refuses
/// its OperatorVersion.
pub const UNVERIFIED_REASON: &str = "UnverifiedOperatorVersion";

/// The OperatorSource an OperatorVersion names (its label), to read from the OperatorVersion's
/// namespace.
pub fn source_of(ov: &OperatorVersion) -> Option<&str> {
    ov.metadata
        .labels
        .get(SOURCE_LABEL)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// Whether the policy admits `ov` (of namespace `ns`), given the source its label names (`None`:
/// no label, or no such source). `Ok`: the key that verified it; `Err`: why not, a sentence about
/// the OperatorVersion.
pub fn verified(ov: &OperatorVersion, ns: &str, source: Option<&OperatorSource>) -> Result<String, String> {
    let Some(name) = source_of(ov) else {
        return Err(format!(
            "was not stored by an OperatorSource (it has no {SOURCE_LABEL} label: installed with \
             kubectl kudo install or by hand)"
        ));
    };
    let Some(src) = source else {
        return Err(format!(
            "names OperatorSource {name}, which does not exist in namespace {ns}"
        ));
    };
    let entry = src
        .status
        .as_ref()
        .and_then(|s| s.operator_versions.iter().find(|e| e.name == ov.metadata.name));
    let Some(entry) = entry else {
        return Err(format!(
            "is not among the OperatorVersions OperatorSource {name} stored"
        ));
    };
    if entry.spec_digest != super::spec_digest(&ov.spec) {
        return Err(format!(
            "was changed after OperatorSource {name} stored it from {} (its spec is not what was \
             verified)",
            entry.url
        ));
    }
    entry.signature.clone().ok_or_else(|| {
        format!(
            "was stored by OperatorSource {name} from {} without a signature check \
             (spec.verify.provider none)",
            entry.url
        )
    })
}

/// The Instance's message when the policy refuses its OperatorVersion `ns/name`.
pub fn refusal(instance: &str, ns: &str, name: &str, why: &str) -> String {
    format!(
        "the manager runs only verified OperatorVersions (--require-verified-sources): OperatorVersion \
         {ns}/{name} {why}; nothing is applied for instance {instance}"
    )
}
