//! What an OperatorSource's status says, by the kstatus rules: `status.observedGeneration` is the
//! generation the conditions describe (each condition carries it too); `Ready` is True once the
//! artifact is stored; `Reconciling` (abnormal-true) is True only while a check of a new generation
//! runs; `Stalled` (abnormal-true) is True when a check failed, with the failure's reason; and
//! `SignatureVerified` says what the signature check found (absent under `provider: none`).

use kudo_api::Condition;
use kudo_api::source::{OperatorSourceStatus, SourceArtifact, StoredOperatorVersion, conditions};

use super::Failure;
use crate::readiness::set_condition;
use crate::time::Timestamp;

/// What one check came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The artifact is stored (created, adopted or kept).
    Stored(Stored),
    Failed(Failure),
}

/// A stored artifact and its OperatorVersion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub artifact: SourceArtifact,
    /// Its entry of `status.operatorVersions`.
    pub entry: StoredOperatorVersion,
}

/// What the check knew about the signature policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checking {
    /// `provider: cosign`.
    Signatures,
    /// `provider: none`: no `SignatureVerified` condition.
    Nothing,
    /// The spec could not be read.
    Unknown,
}

fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    g: Option<i64>,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        observed_generation: g,
        last_transition_time: now.to_string(),
        reason: reason.to_string(),
        message,
    }
}

/// The status while a check of a new generation runs: observed, `Reconciling=True`, `Ready`
/// Unknown. `None` when the generation was observed already (a periodic re-check is not written
/// before it ends).
pub fn reconciling(
    old: Option<&OperatorSourceStatus>,
    generation: Option<i64>,
    url: &str,
    now: Timestamp,
) -> Option<OperatorSourceStatus> {
    let mut st = old.cloned().unwrap_or_default();
    if old.is_some_and(|o| o.observed_generation == generation) {
        return None;
    }
    st.observed_generation = generation;
    let msg = format!("checking {url}");
    for (t, s) in [
        (conditions::READY, "Unknown"),
        (conditions::RECONCILING, "True"),
        (conditions::STALLED, "False"),
    ] {
        set_condition(
            &mut st.conditions,
            condition(t, s, "Progressing", msg.clone(), generation, now),
        );
    }
    Some(st)
}

/// The status after a check: the conditions for `outcome`, the artifact stored (a failure keeps
/// the last one: it is what runs), `operatorVersions` with the stored entry and without those
/// no longer in `existing` (the names of this source's OperatorVersions that exist; `None`: not
/// read, keep them all), and the check's time.
pub fn checked(
    old: Option<&OperatorSourceStatus>,
    generation: Option<i64>,
    outcome: &Outcome,
    checking: Checking,
    existing: Option<&[String]>,
    now: Timestamp,
) -> OperatorSourceStatus {
    let mut st = old.cloned().unwrap_or_default();
    st.observed_generation = generation;
    st.last_check_time = Some(now.to_string());
    if let Some(names) = existing {
        st.operator_versions.retain(|e| names.contains(&e.name));
    }
    let cond = |t: &str, s: &str, reason: &str, msg: String| condition(t, s, reason, msg, generation, now);
    let (ready, stalled, signature) = match outcome {
        Outcome::Stored(stored) => {
            st.operator_versions.retain(|e| e.name != stored.entry.name);
            st.operator_versions.push(stored.entry.clone());
            st.artifact = Some(stored.artifact.clone());
            let a = &stored.artifact;
            let msg = format!("operator version {} is stored from {}", a.operator_version, a.url);
            let signature = a.signature.as_ref().map(|s| {
                cond(
                    conditions::SIGNATURE_VERIFIED,
                    "True",
                    "Verified",
                    format!("{} is signed by {s}", a.url),
                )
            });
            (
                cond(conditions::READY, "True", "Stored", msg),
                cond(conditions::STALLED, "False", "Stored", String::new()),
                signature,
            )
        }
        Outcome::Failed(f) => {
            let reason = f.kind.reason();
            let signature = match (&f.signature, checking) {
                (Some(s), _) => Some(cond(
                    conditions::SIGNATURE_VERIFIED,
                    "True",
                    "Verified",
                    format!("signed by {s}"),
                )),
                (None, _) if f.kind.is_refused_signature() => Some(cond(
                    conditions::SIGNATURE_VERIFIED,
                    "False",
                    reason,
                    f.message.clone(),
                )),
                (None, Checking::Nothing) => None,
                (None, _) => Some(cond(
                    conditions::SIGNATURE_VERIFIED,
                    "Unknown",
                    reason,
                    format!("not known: the check failed ({reason})"),
                )),
            };
            (
                cond(conditions::READY, "False", reason, f.message.clone()),
                cond(conditions::STALLED, "True", reason, f.message.clone()),
                signature,
            )
        }
    };
    let reconciling = cond(
        conditions::RECONCILING,
        "False",
        ready.reason.as_str(),
        String::new(),
    );
    for c in [ready, reconciling, stalled] {
        set_condition(&mut st.conditions, c);
    }
    match signature {
        Some(c) => {
            set_condition(&mut st.conditions, c);
        }
        None => st
            .conditions
            .retain(|c| c.type_ != conditions::SIGNATURE_VERIFIED),
    }
    st
}
