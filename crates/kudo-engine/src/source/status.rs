//! What an OperatorSource's status says, by the kstatus rules: `status.observedGeneration` is the
//! generation the conditions describe (each condition carries it too); `Ready` is True once the
//! artifact is stored, False when the last check failed; the abnormal-true `Reconciling` and
//! `Stalled` are present only while True, as on Instances (`crate::progress`): `Reconciling` while
//! a check of a new generation runs and after a failure that a later check may overcome
//! ([`super::FailureKind::is_transient`]: the registry, a Secret not there yet), `Stalled` after
//! any other failure (it needs a change: the spec, a signature, the package); and
//! `SignatureVerified` says what the signature check found (absent under `provider: none`).

use kudo_api::Condition;
use kudo_api::source::{OperatorSourceStatus, SourceArtifact, StoredOperatorVersion, conditions};

use super::Failure;
use crate::progress::keep;
use crate::readiness::set_condition;
use crate::time::Timestamp;

/// What one check came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The artifact is stored (created, adopted or kept).
    Stored(Box<Stored>),
    /// The check failed; the artifact stored before, if any, stays.
    Failed(Failure),
}

/// A stored artifact and its OperatorVersion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// `status.artifact`.
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
/// Unknown, no `Stalled`. `None` when the generation was observed already (a periodic re-check is
/// not written before it ends).
pub fn reconciling(
    old: Option<&OperatorSourceStatus>,
    generation: Option<i64>,
    url: &str,
    now: Timestamp,
) -> Option<OperatorSourceStatus> {
    if old.is_some_and(|o| o.observed_generation == generation) {
        return None;
    }
    let mut st = old.cloned().unwrap_or_default();
    st.observed_generation = generation;
    let msg = format!("checking {url}");
    let ready = condition(
        conditions::READY,
        "Unknown",
        PROGRESSING,
        msg.clone(),
        generation,
        now,
    );
    set_condition(&mut st.conditions, ready);
    let progressing = Some((PROGRESSING.to_string(), msg));
    keep(
        &mut st.conditions,
        conditions::RECONCILING,
        progressing,
        generation,
        now,
    );
    keep(&mut st.conditions, conditions::STALLED, None, generation, now);
    Some(st)
}

/// The reason of `Ready=Unknown` and `Reconciling` while a check runs.
pub(crate) const PROGRESSING: &str = "Progressing";

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
    let (ready, abnormal, signature) = match outcome {
        Outcome::Stored(stored) => {
            st.operator_versions.retain(|e| e.name != stored.entry.name);
            st.operator_versions.push(stored.entry.clone());
            st.artifact = Some(stored.artifact.clone());
            let a = &stored.artifact;
            let msg = format!("operator version {} is stored from {}", a.operator_version, a.url);
            let signature = a.signature.as_ref().map(|s| {
                let msg = format!("{} is signed by {s}", a.url);
                cond(conditions::SIGNATURE_VERIFIED, "True", "Verified", msg)
            });
            (cond(conditions::READY, "True", "Stored", msg), None, signature)
        }
        Outcome::Failed(f) => {
            let reason = f.kind.reason();
            let ready = cond(conditions::READY, "False", reason, f.message.clone());
            let which = if f.kind.is_transient() {
                conditions::RECONCILING
            } else {
                conditions::STALLED
            };
            let abnormal = (which, (reason.to_string(), f.message.clone()));
            (ready, Some(abnormal), failed_signature(f, checking, &cond))
        }
    };
    set_condition(&mut st.conditions, ready);
    for t in [conditions::RECONCILING, conditions::STALLED] {
        let value = abnormal.clone().filter(|(which, _)| *which == t).map(|(_, v)| v);
        keep(&mut st.conditions, t, value, generation, now);
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

/// `SignatureVerified` after a failed check: True when the signature verified before the failure,
/// False when the failure is the signature check's refusal, absent under `provider: none`, else
/// Unknown (the check stopped before the signature).
fn failed_signature(
    f: &Failure,
    checking: Checking,
    cond: &dyn Fn(&str, &str, &str, String) -> Condition,
) -> Option<Condition> {
    let reason = f.kind.reason();
    match (&f.signature, checking) {
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
    }
}
