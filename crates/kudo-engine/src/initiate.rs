//! Plans the manager starts on its own (a scheduled plan, an autopilot rule): the Instance spec
//! such an initiation proposes, which then goes through the same admission as a user's change.
//!
//! Keeping the proposal a plain spec means there is one set of rules for what may change: an
//! unknown or immutable parameter set by a rule is denied exactly as it is for `kubectl kudo update`.

use std::collections::BTreeMap;

use kudo_api::InstanceSpec;

/// Why the manager starts a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A `schedule:` occurrence that fell due at `due` (RFC 3339).
    Schedule { due: String },
    /// An autopilot rule (`rule` names plan and index, e.g. `recover/0`) whose condition held;
    /// `observed` describes what was seen (for the Event).
    Autopilot { rule: String, observed: String },
}

/// A plan start the manager proposes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Initiation {
    pub plan: String,
    /// Parameter values to set first (rendered already).
    pub set_parameters: BTreeMap<String, String>,
    pub origin: Origin,
}

/// The spec a user's `kubectl kudo update -p …` followed by `kubectl kudo plan trigger PLAN`
/// would write: parameters merged, `planExecution.planName = plan` (uid and status are left to the
/// admission, which gives a scheduled plan a fresh uid).
pub fn proposed_spec(current: &InstanceSpec, init: &Initiation) -> InstanceSpec {
    let mut spec = current.clone();
    for (k, v) in &init.set_parameters {
        spec.parameters.insert(k.clone(), v.clone());
    }
    spec.plan_execution.plan_name = init.plan.clone();
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_parameters_and_names_the_plan() {
        let mut cur = InstanceSpec::default();
        cur.parameters.insert("A".into(), "1".into());
        cur.parameters.insert("B".into(), "2".into());
        let init = Initiation {
            plan: "recover".into(),
            set_parameters: BTreeMap::from([("B".to_string(), "3".to_string())]),
            origin: Origin::Autopilot {
                rule: "recover/0".into(),
                observed: "readyReplicas=1".into(),
            },
        };
        let p = proposed_spec(&cur, &init);
        assert_eq!(p.parameters["A"], "1");
        assert_eq!(p.parameters["B"], "3");
        assert_eq!(p.plan_execution.plan_name, "recover");
        assert_eq!(p.operator_version, cur.operator_version);
    }
}
