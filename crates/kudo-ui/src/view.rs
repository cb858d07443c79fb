//! What the pages show of an Instance, from the Instance and its OperatorVersion alone (pure):
//! a row of the Instances table and the plans laid over with their runs.

use kudo_api::{ExecutionStatus, Instance, OperatorVersion};
use kudo_client::wait::{last_executed_plan, scheduled_run};
use kudo_package::graph::{PlanGraph, plans_of};

/// A row of the Instances table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The operator (label `kudo.dev/operator`, else the OperatorVersion's name).
    pub operator: String,
    /// The OperatorVersion it runs.
    pub operator_version: String,
    /// The plan shown live ([`active_plan`]), if any ran.
    pub plan: Option<(String, ExecutionStatus)>,
    /// kstatus-style health ([`health`]).
    pub health: &'static str,
    /// When its plan status changed last (RFC 3339), if it did.
    pub changed: String,
}

/// The run `plan status` shows: the scheduled run the status does not show yet, else the running
/// plan updated last, else the plan that ran last.
pub fn active_plan(inst: &Instance, ov: Option<&OperatorVersion>) -> Option<(String, ExecutionStatus)> {
    if let Some(run) = ov.and_then(|ov| scheduled_run(inst, ov)) {
        return Some((run.name, run.status));
    }
    last_executed_plan(inst).map(|p| (p.name.clone(), p.status))
}

/// kstatus's reading of the Instance's conditions: `Failed` (Stalled), `InProgress` (Reconciling,
/// or a spec the manager has not observed yet), `Current` (Ready), else `Unknown`.
pub fn health(inst: &Instance) -> &'static str {
    let Some(status) = &inst.status else {
        return "InProgress";
    };
    let is_true = |t: &str| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == t && c.status == "True")
    };
    let generation = inst.metadata.other.get("generation").and_then(|g| g.as_i64());
    let unobserved = matches!((generation, status.observed_generation), (Some(g), Some(o)) if o < g);
    if is_true("Stalled") {
        "Failed"
    } else if is_true("Reconciling") || unobserved {
        "InProgress"
    } else if is_true("Ready") {
        "Current"
    } else {
        "Unknown"
    }
}

/// The row of `inst` (`ov`: its OperatorVersion, when found).
pub fn row(inst: &Instance, ov: Option<&OperatorVersion>) -> Row {
    let changed = inst
        .status
        .iter()
        .flat_map(|s| s.plan_status.values())
        .filter_map(|p| p.last_updated_timestamp.clone())
        .max()
        .unwrap_or_default();
    Row {
        namespace: inst.metadata.namespace.clone().unwrap_or_default(),
        name: inst.metadata.name.clone(),
        operator: inst
            .metadata
            .labels
            .get("kudo.dev/operator")
            .cloned()
            .unwrap_or_else(|| inst.spec.operator_version.name.clone()),
        operator_version: inst.spec.operator_version.name.clone(),
        plan: active_plan(inst, ov),
        health: health(inst),
        changed,
    }
}

/// The rows of `insts`, each with its OperatorVersion from `ovs` when there, by namespace and name.
pub fn rows(insts: Vec<Instance>, ovs: &[OperatorVersion]) -> Vec<Row> {
    let mut rows: Vec<Row> = insts
        .into_iter()
        .map(|inst| {
            let ns = inst.metadata.namespace.clone().unwrap_or_default();
            let ov_ns = inst.spec.operator_version_namespace(&ns).to_string();
            let ov = ovs.iter().find(|o| {
                o.metadata.name == inst.spec.operator_version.name
                    && o.metadata.namespace.as_deref() == Some(ov_ns.as_str())
            });
            row(&inst, ov)
        })
        .collect();
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    rows
}

/// Every plan of `ov` with the run the Instance's status records for it (or the run scheduled
/// and not yet shown, as `plan status` draws it), with the run's uid.
pub fn plans(inst: &Instance, ov: &OperatorVersion) -> Vec<(PlanGraph, String)> {
    let scheduled = scheduled_run(inst, ov);
    plans_of(&ov.spec)
        .into_iter()
        .map(|graph| {
            let recorded = inst.status.as_ref().and_then(|s| s.plan_status.get(&graph.name));
            let run = scheduled.as_ref().filter(|r| r.name == graph.name).or(recorded);
            match run {
                Some(r) if r.status != ExecutionStatus::NeverRun => (graph.with_status(r), r.uid.clone()),
                _ => (graph, String::new()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn instance(status: serde_json::Value, generation: i64) -> Instance {
        serde_json::from_value(json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
            "metadata": {"name": "web", "namespace": "ns", "generation": generation,
                         "labels": {"kudo.dev/operator": "first-operator"}},
            "spec": {"operatorVersion": {"name": "first-operator-0.2.0"}},
            "status": status
        }))
        .unwrap()
    }

    #[test]
    fn health_reads_the_conditions_as_kstatus_does() {
        let cond = |t: &str| {
            let mut c = json!({"type": t, "status": "True"});
            for k in ["lastTransitionTime", "reason", "message"] {
                c[k] = json!("");
            }
            c
        };
        let cases = [
            (
                json!({"observedGeneration": 2, "conditions": [cond("Ready")]}),
                2,
                "Current",
            ),
            (
                json!({"observedGeneration": 1, "conditions": [cond("Ready")]}),
                2,
                "InProgress",
            ),
            (
                json!({"observedGeneration": 2, "conditions": [cond("Reconciling")]}),
                2,
                "InProgress",
            ),
            (
                json!({"observedGeneration": 2, "conditions": [cond("Stalled"), cond("Ready")]}),
                2,
                "Failed",
            ),
            (json!({"observedGeneration": 2}), 2, "Unknown"),
        ];
        for (status, generation, want) in cases {
            assert_eq!(health(&instance(status.clone(), generation)), want, "{status}");
        }
    }

    #[test]
    fn the_row_names_the_operator_and_the_plan_run_last() {
        let inst = instance(
            json!({"planStatus": {
                "deploy": {"name": "deploy", "status": "COMPLETE", "uid": "u1",
                           "lastUpdatedTimestamp": "2026-01-01T00:00:02Z", "phases": []},
                "backup": {"name": "backup", "status": "NEVER_RUN", "phases": []}}}),
            1,
        );
        let r = row(&inst, None);
        assert_eq!(
            (r.namespace.as_str(), r.operator.as_str()),
            ("ns", "first-operator")
        );
        assert_eq!(r.plan, Some(("deploy".into(), ExecutionStatus::Complete)));
        assert_eq!(r.changed, "2026-01-01T00:00:02Z");
    }
}
