//! The annotations of an Instance the manager reads and writes for its own bookkeeping.

use kudo_api::{Instance, InstanceSpec};

/// Annotation holding the Instance spec the manager last admitted (JSON). It replaces the
/// "old object" an admission webhook would have seen.
pub const ADMITTED_SPEC_ANNOTATION: &str = "kudo-rs.dev/admitted-spec";

/// Annotation written by `kubectl kudo plan retry` together with its plan trigger:
/// `"<plan>/<uid of the failed run>"` ([`crate::retry::annotation_value`]). The run the trigger
/// starts keeps the COMPLETE steps of exactly that failed run.
pub const RETRY_ANNOTATION: &str = "kudo-rs.dev/retry";

/// Instance annotation holding the fingerprints of the sourced values last acted on (JSON map,
/// see [`crate::rotation::Fingerprints`]).
pub const FINGERPRINTS_ANNOTATION: &str = "kudo-rs.dev/parameter-fingerprints";

/// The last spec the manager admitted (annotation [`ADMITTED_SPEC_ANNOTATION`]); `None` before the
/// first admission or when the annotation does not decode. The manager's admission and the CLI's
/// pre-check of a change both start from it.
pub fn admitted_spec(inst: &Instance) -> Option<InstanceSpec> {
    inst.metadata
        .annotations
        .get(ADMITTED_SPEC_ANNOTATION)
        .and_then(|s| serde_json::from_str(s).ok())
}
