//! `kubectl kudo plan status` and `plan history` text output, in KUDO v0.19's format.

use kudo_api::{ExecutionStatus, Instance, OperatorVersion};
use kudo_client::wait::{last_executed_plan, scheduled_run};

use super::tree::{self, Node};

/// Formats an RFC 3339 timestamp as KUDO did (`2006-01-02 15:04:05`, in the given offset).
pub fn format_timestamp(rfc3339: &str, offset: &chrono::FixedOffset) -> String {
    match chrono::DateTime::parse_from_rfc3339(rfc3339) {
        Ok(t) => t.with_timezone(offset).format("%Y-%m-%d %H:%M:%S").to_string(),
        Err(_) => rfc3339.to_string(),
    }
}

fn message_suffix(msg: &str) -> String {
    if msg.is_empty() {
        String::new()
    } else {
        format!(" ({msg})")
    }
}

/// A step of the active plan; while it runs (IN_PROGRESS or ERROR), one child line per object it
/// still waits for (kudo-rs extension: `status.…steps[].waitingFor`).
fn step_node(step: &kudo_api::StepStatus) -> Node {
    let mut node = Node::new(format!(
        "Step {} [{}]{}",
        step.name,
        step.status,
        message_suffix(&step.message)
    ));
    if step.status.is_running() {
        for line in &step.waiting_for {
            node.push(Node::new(format!("waiting for {line}")));
        }
    }
    node
}

/// The full `plan status` output for `instance` in `namespace`, given its OperatorVersion.
/// Timestamps are shown in `offset` (the CLI passes the local offset, as KUDO printed local time).
pub fn render(
    instance: &Instance,
    ov: &OperatorVersion,
    namespace: &str,
    offset: &chrono::FixedOffset,
) -> String {
    let name = &instance.metadata.name;
    let scheduled = scheduled_run(instance, ov);
    let Some(active) = scheduled.as_ref().or_else(|| last_executed_plan(instance)) else {
        return format!("No plan ever run for instance - nothing to show for instance {name}\n");
    };
    let phase_strategy = |plan: &str, phase: &str| -> String {
        ov.spec
            .plans
            .get(plan)
            .and_then(|p| p.phases.iter().find(|ph| ph.name == phase))
            .map(|ph| ph.strategy.0.clone())
            .unwrap_or_default()
    };
    let mut root = Node::new(format!(
        "{name} (Operator-Version: \"{}\" Active-Plan: \"{}\")",
        instance.spec.operator_version.name, active.name
    ));
    // kudo-rs extension: a scheduled plan's line ends with its next occurrence.
    let next_run = |plan: &str| -> String {
        instance
            .status
            .as_ref()
            .and_then(|s| s.schedules.get(plan))
            .and_then(|s| s.next_schedule_time.as_deref())
            .map(|t| format!(" (next scheduled run {})", format_timestamp(t, offset)))
            .unwrap_or_default()
    };
    for (plan_name, plan) in &ov.spec.plans {
        if *plan_name == active.name {
            let updated = active
                .last_updated_timestamp
                .as_deref()
                .map(|t| format!(", last updated {}", format_timestamp(t, offset)))
                .unwrap_or_default();
            let plan_node = root.push(Node::new(format!(
                "Plan {plan_name} ({} strategy) [{}]{}{updated}{}",
                plan.strategy.0,
                active.status,
                message_suffix(&active.message),
                next_run(plan_name)
            )));
            for phase in &active.phases {
                let phase_node = plan_node.push(Node::new(format!(
                    "Phase {} ({} strategy) [{}]{}",
                    phase.name,
                    phase_strategy(plan_name, &phase.name),
                    phase.status,
                    message_suffix(&phase.message)
                )));
                for step in &phase.steps {
                    phase_node.push(step_node(step));
                }
            }
        } else {
            let plan_node = root.push(Node::new(format!(
                "Plan {plan_name} ({} strategy) [NOT ACTIVE]{}",
                plan.strategy.0,
                next_run(plan_name)
            )));
            for phase in &plan.phases {
                let phase_node = plan_node.push(Node::new(format!(
                    "Phase {} ({} strategy) [NOT ACTIVE]",
                    phase.name, phase.strategy.0
                )));
                for step in &phase.steps {
                    phase_node.push(Node::new(format!("Step {} [NOT ACTIVE]", step.name)));
                }
            }
        }
    }
    format!(
        "Plan(s) for \"{name}\" in namespace \"{namespace}\":\n{}\n",
        tree::render(&[root])
    )
}

/// `plan history`: one line per plan of the OperatorVersion, sorted by name.
pub fn render_history(instance: &Instance, ov: &OperatorVersion, offset: &chrono::FixedOffset) -> String {
    let mut out = format!(
        "History of plan executions for instance \"{}\":\n",
        instance.metadata.name
    );
    for plan_name in ov.spec.plans.keys() {
        let status = instance
            .status
            .as_ref()
            .and_then(|s| s.plan_status.get(plan_name));
        let line = match status {
            Some(p) if p.status.is_running() => format!("{plan_name} (is running)"),
            Some(p) if p.status != ExecutionStatus::NeverRun => match p.last_updated_timestamp.as_deref() {
                Some(t) => format!(
                    "{plan_name} (last finished run at {} ({}))",
                    format_timestamp(t, offset).replace(' ', "T"),
                    p.status
                ),
                None => format!("{plan_name} ({})", p.status),
            },
            _ => format!("{plan_name} (never run)"),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc() -> chrono::FixedOffset {
        chrono::FixedOffset::east_opt(0).unwrap()
    }

    fn galera() -> (Instance, OperatorVersion) {
        let ov: OperatorVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
            "metadata": {"name": "galera-0.1.0"},
            "spec": {"version": "0.1.0", "plans": {"deploy": {"strategy": "serial", "phases": [
                {"name": "deploy", "strategy": "serial", "steps": [
                    {"name": "bootstrap_config", "tasks": ["bootstrap_config"]},
                    {"name": "bootstrap_service", "tasks": ["bootstrap_service"]},
                    {"name": "bootstrap_deploy", "tasks": ["bootstrap_deploy"]},
                    {"name": "firstboot_config", "tasks": ["firstboot_config"]}]}]}}}
        }))
        .unwrap();
        let step = |n: &str| serde_json::json!({"name": n, "status": "COMPLETE"});
        let inst: Instance = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
            "metadata": {"name": "galera-instance", "namespace": "default"},
            "spec": {"operatorVersion": {"name": "galera-0.1.0"}},
            "status": {"planStatus": {"deploy": {"name": "deploy", "status": "COMPLETE",
                "lastUpdatedTimestamp": "2020-06-24T14:32:26Z", "uid": "u1",
                "phases": [{"name": "deploy", "status": "COMPLETE", "steps": [
                    step("bootstrap_config"), step("bootstrap_service"), step("bootstrap_deploy"),
                    step("firstboot_config")]}]}}}
        }))
        .unwrap();
        (inst, ov)
    }

    /// The exact output shown in seeds/galera-part2.txt (lines 151–160).
    #[test]
    fn matches_the_seed_output() {
        let (inst, ov) = galera();
        let expected = "Plan(s) for \"galera-instance\" in namespace \"default\":\n\
.\n\
└── galera-instance (Operator-Version: \"galera-0.1.0\" Active-Plan: \"deploy\")\n\
\x20   └── Plan deploy (serial strategy) [COMPLETE], last updated 2020-06-24 14:32:26\n\
\x20       └── Phase deploy (serial strategy) [COMPLETE]\n\
\x20           ├── Step bootstrap_config [COMPLETE]\n\
\x20           ├── Step bootstrap_service [COMPLETE]\n\
\x20           ├── Step bootstrap_deploy [COMPLETE]\n\
\x20           └── Step firstboot_config [COMPLETE]\n\n";
        assert_eq!(render(&inst, &ov, "default", &utc()), expected);
    }

    /// KUDO's golden (kudo-behaviour.md §5.2): inactive plans from the OV, messages in parentheses.
    #[test]
    fn inactive_plans_and_messages() {
        let ov: OperatorVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion", "metadata": {"name": "test-1.0"},
            "spec": {"plans": {
                "deploy": {"phases": [{"name": "deploy", "steps": [{"name": "deploy"}]}]},
                "validate": {"phases": [{"name": "validate", "steps": [{"name": "validate"}]}]}}}
        }))
        .unwrap();
        let inst: Instance = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "metadata": {"name": "test"},
            "spec": {"operatorVersion": {"name": "test-1.0"}},
            "status": {"planStatus": {"deploy": {"name": "deploy", "status": "FATAL_ERROR",
                "lastUpdatedTimestamp": "2019-10-17T01:01:01Z",
                "phases": [{"name": "deploy", "status": "FATAL_ERROR", "steps": [
                    {"name": "deploy", "status": "FATAL_ERROR", "message": "error detail"}]}]}}}
        }))
        .unwrap();
        let out = render(&inst, &ov, "default", &utc());
        let expected = "Plan(s) for \"test\" in namespace \"default\":\n.\n\
└── test (Operator-Version: \"test-1.0\" Active-Plan: \"deploy\")\n\
\x20   ├── Plan deploy ( strategy) [FATAL_ERROR], last updated 2019-10-17 01:01:01\n\
\x20   │   └── Phase deploy ( strategy) [FATAL_ERROR]\n\
\x20   │       └── Step deploy [FATAL_ERROR] (error detail)\n\
\x20   └── Plan validate ( strategy) [NOT ACTIVE]\n\
\x20       └── Phase validate ( strategy) [NOT ACTIVE]\n\
\x20           └── Step validate [NOT ACTIVE]\n\n";
        assert_eq!(out, expected);
    }

    /// kudo-rs extension: scheduled plans show their next occurrence on the plan line, active or not.
    #[test]
    fn scheduled_plans_show_the_next_run() {
        let ov: OperatorVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion", "metadata": {"name": "test-1.0"},
            "spec": {"plans": {
                "backup": {"schedule": "@every 2s", "phases": [{"name": "b", "steps": [{"name": "b"}]}]},
                "deploy": {"phases": [{"name": "deploy", "steps": [{"name": "deploy"}]}]}}}
        }))
        .unwrap();
        let inst: Instance = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "metadata": {"name": "test"},
            "spec": {"operatorVersion": {"name": "test-1.0"}},
            "status": {"planStatus": {"deploy": {"name": "deploy", "status": "COMPLETE",
                "lastUpdatedTimestamp": "2019-10-17T01:01:01Z",
                "phases": [{"name": "deploy", "status": "COMPLETE", "steps": [
                    {"name": "deploy", "status": "COMPLETE"}]}]}},
                "schedules": {"backup": {"lastScheduleTime": "2019-10-17T01:01:00Z",
                    "nextScheduleTime": "2019-10-17T01:01:02Z"}}}
        }))
        .unwrap();
        let out = render(&inst, &ov, "default", &utc());
        assert!(
            out.contains("Plan backup ( strategy) [NOT ACTIVE] (next scheduled run 2019-10-17 01:01:02)\n"),
            "{out}"
        );
        assert!(
            out.contains("Plan deploy ( strategy) [COMPLETE], last updated 2019-10-17 01:01:01\n"),
            "{out}"
        );
    }

    #[test]
    fn no_plan_ever_run() {
        let (mut inst, ov) = galera();
        inst.status = None;
        assert_eq!(
            render(&inst, &ov, "default", &utc()),
            "No plan ever run for instance - nothing to show for instance galera-instance\n"
        );
    }

    /// A run the manager admitted (`spec.planExecution`) whose status it has not written yet (it
    /// does with the first waiting lines, or at the end): shown as it will be written, not the
    /// previous run.
    #[test]
    fn an_admitted_run_not_in_the_status_yet() {
        let (mut inst, ov) = galera();
        inst.spec.plan_execution = kudo_api::PlanExecution {
            plan_name: "deploy".into(),
            uid: "u2".into(),
            status: Some(ExecutionStatus::InProgress),
        };
        let expected = "Plan(s) for \"galera-instance\" in namespace \"default\":\n\
.\n\
└── galera-instance (Operator-Version: \"galera-0.1.0\" Active-Plan: \"deploy\")\n\
\x20   └── Plan deploy (serial strategy) [IN_PROGRESS]\n\
\x20       └── Phase deploy (serial strategy) [PENDING]\n\
\x20           ├── Step bootstrap_config [PENDING]\n\
\x20           ├── Step bootstrap_service [PENDING]\n\
\x20           ├── Step bootstrap_deploy [PENDING]\n\
\x20           └── Step firstboot_config [PENDING]\n\n";
        assert_eq!(render(&inst, &ov, "default", &utc()), expected);
        // A fresh Instance the manager has not admitted yet shows the run PENDING.
        inst.status = None;
        inst.spec.plan_execution.status = None;
        let out = render(&inst, &ov, "default", &utc());
        assert!(out.contains("Plan deploy (serial strategy) [PENDING]\n"), "{out}");
        // Once the status holds the run, the status is shown.
        let (mut inst, ov) = galera();
        inst.spec.plan_execution.plan_name = "deploy".into();
        inst.spec.plan_execution.uid = "u1".into();
        assert!(render(&inst, &ov, "default", &utc()).contains("[COMPLETE], last updated"));
    }

    #[test]
    fn history_lines() {
        let (inst, ov) = galera();
        assert_eq!(
            render_history(&inst, &ov, &utc()),
            "History of plan executions for instance \"galera-instance\":\n\
deploy (last finished run at 2020-06-24T14:32:26 (COMPLETE))\n"
        );
    }
}
