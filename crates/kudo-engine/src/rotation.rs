//! Rotation of sensitive parameters (kudo-rs extension): a change of the data of a
//! Secret a parameter is sourced from (`spec.parameterSources`) counts as a change of that
//! parameter, so its trigger plan runs — KUDO's rule for `kubectl kudo update -p`, taken from
//! [`crate::triggers::triggered_by_parameter_update`] (the parameter's `trigger`, else `update`,
//! else `deploy`), not a second copy.
//!
//! The manager cannot keep the values to compare with (they must not be written anywhere a
//! reader of the Instance could see). It keeps a *fingerprint* per sourced parameter instead:
//! the Secret reference plus an HMAC of the value under a random key of the Instance's own, kept
//! in a Secret (see `kudo_controller::param_sources`). The fingerprints live in an Instance
//! annotation; without the key they reveal nothing (no offline guessing of a password from a
//! plain hash). This module is the pure decision over those fingerprints.
//!
//! Rules:
//! * No fingerprints recorded yet (first sight, or written by an older manager): record the
//!   current ones, run nothing — the plan that runs or ran already rendered those values.
//! * A plan is scheduled or running: decide later (nothing is recorded, so a rotation during a
//!   run triggers its plan once the run ended; at least once, never lost).
//! * A parameter whose source reference changed (a user's `update --parameter-secret`) is the
//!   admission's business (it already triggered the plan): its fingerprint is just recorded.
//! * Parameters whose source is the same and whose value fingerprint differs: their trigger plan
//!   runs; the new fingerprints are recorded in the same write that schedules the plan, so a
//!   manager restart neither loses nor repeats it.

use std::collections::BTreeMap;

use kudo_api::{OperatorVersion, Parameter};

use crate::triggers::triggered_by_parameter_update;

/// Fingerprint per parameter name: `"<secret>/<key>:<hmac hex>"`.
pub type Fingerprints = BTreeMap<String, String>;

/// The fingerprint of one sourced value: where it came from and its keyed digest (computed by
/// the caller, who holds the key).
pub fn fingerprint(secret: &str, key: &str, digest_hex: &str) -> String {
    format!("{secret}/{key}:{digest_hex}")
}

fn source_of(fp: &str) -> &str {
    fp.rsplit_once(':').map_or(fp, |(s, _)| s)
}

/// What to do about sourced values now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing changed (or a plan runs): keep what is recorded.
    Keep,
    /// Record these fingerprints; no plan.
    Record(Fingerprints),
    /// These parameters rotated: run `plan` (their trigger plan) and record the fingerprints.
    Trigger {
        /// The trigger plan of the rotated parameters.
        plan: String,
        /// Names of the rotated parameters.
        parameters: Vec<String>,
        /// The current fingerprints to record.
        record: Fingerprints,
    },
    /// The rotated parameters trigger no usable plan (KUDO's message); record, run nothing.
    Invalid {
        /// Why no plan can run, in KUDO's words.
        message: String,
        /// The current fingerprints to record.
        record: Fingerprints,
    },
}

/// Decides about the current fingerprints given the recorded ones (see the module docs).
pub fn decide(
    recorded: Option<&Fingerprints>,
    current: &Fingerprints,
    plan_running: bool,
    ov: &OperatorVersion,
) -> Decision {
    let Some(recorded) = recorded else {
        return Decision::Record(current.clone());
    };
    if plan_running {
        return Decision::Keep;
    }
    let rotated: Vec<String> = current
        .iter()
        .filter(|(name, fp)| {
            recorded
                .get(*name)
                .is_some_and(|old| old != *fp && source_of(old) == source_of(fp))
        })
        .map(|(name, _)| name.clone())
        .collect();
    if rotated.is_empty() {
        return if recorded == current {
            Decision::Keep
        } else {
            Decision::Record(current.clone())
        };
    }
    let defs: Vec<&Parameter> = ov
        .spec
        .parameters
        .iter()
        .filter(|p| rotated.contains(&p.name))
        .collect();
    match triggered_by_parameter_update(&defs, ov) {
        Ok(Some(plan)) => Decision::Trigger {
            plan,
            parameters: rotated,
            record: current.clone(),
        },
        Ok(None) => Decision::Record(current.clone()),
        Err(e) => Decision::Invalid {
            message: e.to_string(),
            record: current.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov(params: &[(&str, &str)], plans: &[&str]) -> OperatorVersion {
        let mut ov: OperatorVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
            "metadata": {"name": "x-0.1.0"}, "spec": {}
        }))
        .unwrap();
        ov.spec.parameters = params
            .iter()
            .map(|(n, t)| Parameter {
                name: n.to_string(),
                trigger: t.to_string(),
                ..Default::default()
            })
            .collect();
        for p in plans {
            ov.spec.plans.insert(p.to_string(), Default::default());
        }
        ov
    }
    fn fps(items: &[(&str, &str)]) -> Fingerprints {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn first_sight_records_without_a_run() {
        let cur = fps(&[("PW", "db/pw:aa")]);
        let o = ov(&[("PW", "")], &["deploy"]);
        assert_eq!(decide(None, &cur, false, &o), Decision::Record(cur.clone()));
        assert_eq!(decide(None, &cur, true, &o), Decision::Record(cur));
    }

    #[test]
    fn unchanged_keeps() {
        let cur = fps(&[("PW", "db/pw:aa")]);
        assert_eq!(
            decide(Some(&cur), &cur, false, &ov(&[("PW", "")], &["deploy"])),
            Decision::Keep
        );
    }

    #[test]
    fn a_rotation_runs_the_trigger_plan_else_update_else_deploy() {
        let old = fps(&[("PW", "db/pw:aa"), ("U", "db/u:11")]);
        let cur = fps(&[("PW", "db/pw:bb"), ("U", "db/u:11")]);
        let expect = |plan: &str| Decision::Trigger {
            plan: plan.into(),
            parameters: vec!["PW".into()],
            record: cur.clone(),
        };
        assert_eq!(
            decide(
                Some(&old),
                &cur,
                false,
                &ov(&[("PW", "rotate"), ("U", "")], &["deploy", "rotate"])
            ),
            expect("rotate")
        );
        assert_eq!(
            decide(
                Some(&old),
                &cur,
                false,
                &ov(&[("PW", ""), ("U", "")], &["deploy", "update"])
            ),
            expect("update")
        );
        assert_eq!(
            decide(
                Some(&old),
                &cur,
                false,
                &ov(&[("PW", ""), ("U", "")], &["deploy"])
            ),
            expect("deploy")
        );
    }

    #[test]
    fn while_a_plan_runs_nothing_is_recorded() {
        let old = fps(&[("PW", "db/pw:aa")]);
        let cur = fps(&[("PW", "db/pw:bb")]);
        assert_eq!(
            decide(Some(&old), &cur, true, &ov(&[("PW", "")], &["deploy"])),
            Decision::Keep
        );
    }

    #[test]
    fn a_changed_source_reference_is_only_recorded() {
        let old = fps(&[("PW", "db/pw:aa")]);
        let cur = fps(&[("PW", "other/pw:bb")]);
        assert_eq!(
            decide(Some(&old), &cur, false, &ov(&[("PW", "")], &["deploy"])),
            Decision::Record(cur.clone())
        );
        // a source added or removed: recorded too
        let cur2 = fps(&[("PW", "db/pw:aa"), ("N", "db/n:cc")]);
        assert_eq!(
            decide(Some(&old), &cur2, false, &ov(&[("PW", "")], &["deploy"])),
            Decision::Record(cur2.clone())
        );
    }

    #[test]
    fn conflicting_triggers_are_reported_not_run() {
        let old = fps(&[("A", "s/a:1"), ("B", "s/b:1")]);
        let cur = fps(&[("A", "s/a:2"), ("B", "s/b:2")]);
        let d = decide(
            Some(&old),
            &cur,
            false,
            &ov(&[("A", "p1"), ("B", "p2")], &["deploy", "p1", "p2"]),
        );
        assert!(matches!(d, Decision::Invalid { .. }), "{d:?}");
    }
}
