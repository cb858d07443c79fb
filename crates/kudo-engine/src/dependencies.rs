//! Operator dependencies (`KudoOperator` tasks): the graph check run before a child Instance is
//! created or updated.
//!
//! A `KudoOperator` task names the OperatorVersion of a child operator; that OperatorVersion may
//! itself have `KudoOperator` tasks, and so on. Before the controller touches a child it checks,
//! with every OperatorVersion of the namespace in hand, that the whole graph below the parent is
//! installed and acyclic — KUDO did the same on every reconcile of a scheduled plan and failed the
//! plan with `CircularDependency`. Like KUDO, tasks of *every* plan count, not only the running one:
//! a cycle through an upgrade plan is still a cycle. Also checked here (KUDO did not): the
//! parameters a parent passes satisfy the child's required parameters, so a child that could
//! never be admitted fails the parent's plan at once instead of leaving it waiting forever.

use std::collections::{BTreeMap, BTreeSet};

use kudo_api::{OperatorVersion, Task, TaskKind};

/// Why a dependency graph cannot be used. The message names the OperatorVersions involved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DependencyError {
    /// A task refers to an OperatorVersion that is not installed in the namespace.
    #[error(
        "task {task} of operator version {parent} needs operator version {missing}, which is not installed in the namespace (install the parent package with `kubectl kudo install`, which installs its dependencies)"
    )]
    Missing {
        /// Name of the OperatorVersion whose task needs the dependency.
        parent: String,
        /// Name of the `KudoOperator` task.
        task: String,
        /// Name of the OperatorVersion the task instantiates, not found in the namespace.
        missing: String,
    },
    /// Following `KudoOperator` tasks leads back to an OperatorVersion already on the path.
    #[error("circular operator dependency: {}", .0.join(" → "))]
    Cycle(Vec<String>),
    /// The child parameters do not satisfy the child OperatorVersion.
    #[error("task {task}: parameters for operator version {child} are invalid: {}", .problems.join("; "))]
    InvalidParameters {
        /// Name of the `KudoOperator` task.
        task: String,
        /// Name of the child OperatorVersion.
        child: String,
        /// One message per parameter problem.
        problems: Vec<String>,
    },
}

/// The `KudoOperator` tasks of an OperatorVersion, in declaration order.
pub fn dependency_tasks(ov: &OperatorVersion) -> impl Iterator<Item = &Task> {
    ov.spec.tasks.iter().filter(|t| t.kind == TaskKind::KudoOperator)
}

/// Checks the graph reachable from `root` through `KudoOperator` tasks. `installed` holds the
/// namespace's OperatorVersions by name (`root` itself may or may not be among them).
pub fn check_graph(
    root: &OperatorVersion,
    installed: &BTreeMap<String, OperatorVersion>,
) -> Result<(), DependencyError> {
    let mut done = BTreeSet::new();
    let mut path = vec![root.metadata.name.clone()];
    visit(root, installed, &mut path, &mut done)
}

fn visit(
    ov: &OperatorVersion,
    installed: &BTreeMap<String, OperatorVersion>,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Result<(), DependencyError> {
    for task in dependency_tasks(ov) {
        let child = task.spec.child_operator_version_name();
        if let Some(pos) = path.iter().position(|p| *p == child) {
            let mut cycle = path[pos..].to_vec();
            cycle.push(child);
            return Err(DependencyError::Cycle(cycle));
        }
        if done.contains(&child) {
            continue;
        }
        let Some(child_ov) = installed.get(&child) else {
            return Err(DependencyError::Missing {
                parent: ov.metadata.name.clone(),
                task: task.name.clone(),
                missing: child,
            });
        };
        path.push(child.clone());
        visit(child_ov, installed, path, done)?;
        path.pop();
        done.insert(child);
    }
    Ok(())
}

/// Checks the parameters a `KudoOperator` task passes against the child's declared parameters:
/// every required parameter without a default must be given. (Values are strings in the API; the
/// child's own admission validates types and enums with its usual messages.)
pub fn check_child_parameters(
    task: &str,
    child: &OperatorVersion,
    params: &BTreeMap<String, String>,
) -> Result<(), DependencyError> {
    let problems: Vec<String> = child
        .spec
        .missing_required(params)
        .into_iter()
        .map(|name| format!("required parameter {name} is not set by the parameter file"))
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(DependencyError::InvalidParameters {
            task: task.to_string(),
            child: child.metadata.name.clone(),
            problems,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An OV named `name` whose KudoOperator tasks point at `deps` (`package-version` names
    /// without appVersion).
    fn ov(name: &str, deps: &[&str]) -> OperatorVersion {
        let tasks: Vec<serde_json::Value> = deps
            .iter()
            .map(|d| {
                let (pkg, ver) = d.rsplit_once('-').unwrap();
                serde_json::json!({"name": format!("dep-{pkg}"), "kind": "KudoOperator",
                    "spec": {"package": pkg, "operatorVersion": ver}})
            })
            .chain(std::iter::once(
                serde_json::json!({"name": "app", "kind": "Apply",
                "spec": {"resources": ["a.yaml"]}}),
            ))
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
            "metadata": {"name": name},
            "spec": {"version": name.rsplit_once('-').unwrap().1, "tasks": tasks,
                "parameters": [
                    {"name": "NEEDED", "required": true},
                    {"name": "DEFAULTED", "required": true, "default": "x"},
                    {"name": "OPTIONAL"}
                ]}
        }))
        .unwrap()
    }

    fn installed(ovs: &[OperatorVersion]) -> BTreeMap<String, OperatorVersion> {
        ovs.iter().map(|o| (o.metadata.name.clone(), o.clone())).collect()
    }

    #[test]
    fn no_dependencies_is_fine() {
        assert_eq!(check_graph(&ov("a-1", &[]), &BTreeMap::new()), Ok(()));
    }

    #[test]
    fn installed_chain_is_fine() {
        let all = installed(&[ov("b-1", &["c-2"]), ov("c-2", &[])]);
        assert_eq!(check_graph(&ov("a-1", &["b-1"]), &all), Ok(()));
    }

    #[test]
    fn diamond_is_not_a_cycle() {
        let all = installed(&[ov("b-1", &["d-1"]), ov("c-1", &["d-1"]), ov("d-1", &[])]);
        assert_eq!(check_graph(&ov("a-1", &["b-1", "c-1"]), &all), Ok(()));
    }

    #[test]
    fn missing_child_names_parent_task_and_child() {
        let all = installed(&[ov("b-1", &["c-2"])]);
        let err = check_graph(&ov("a-1", &["b-1"]), &all).unwrap_err();
        assert_eq!(
            err,
            DependencyError::Missing {
                parent: "b-1".into(),
                task: "dep-c".into(),
                missing: "c-2".into()
            }
        );
        assert!(err.to_string().contains("needs operator version c-2"), "{err}");
    }

    #[test]
    fn cycle_through_the_root_is_reported_with_its_path() {
        let root = ov("a-1", &["b-1"]);
        let all = installed(&[root.clone(), ov("b-1", &["c-1"]), ov("c-1", &["a-1"])]);
        let err = check_graph(&root, &all).unwrap_err();
        assert_eq!(
            err,
            DependencyError::Cycle(vec!["a-1".into(), "b-1".into(), "c-1".into(), "a-1".into()])
        );
        assert_eq!(
            err.to_string(),
            "circular operator dependency: a-1 → b-1 → c-1 → a-1"
        );
    }

    #[test]
    fn cycle_below_the_root_is_reported() {
        let all = installed(&[ov("b-1", &["c-1"]), ov("c-1", &["b-1"])]);
        let err = check_graph(&ov("a-1", &["b-1"]), &all).unwrap_err();
        assert_eq!(
            err,
            DependencyError::Cycle(vec!["b-1".into(), "c-1".into(), "b-1".into()])
        );
    }

    #[test]
    fn self_dependency_is_a_cycle() {
        let root = ov("a-1", &["a-1"]);
        let err = check_graph(&root, &installed(std::slice::from_ref(&root))).unwrap_err();
        assert_eq!(err, DependencyError::Cycle(vec!["a-1".into(), "a-1".into()]));
    }

    #[test]
    fn app_version_is_part_of_the_child_name() {
        let mut root = ov("a-1", &[]);
        root.spec.tasks[0] = serde_json::from_value(serde_json::json!({"name": "db", "kind": "KudoOperator",
            "spec": {"package": "mysql", "appVersion": "8.0", "operatorVersion": "0.2.0"}}))
        .unwrap();
        let err = check_graph(&root, &BTreeMap::new()).unwrap_err();
        assert!(matches!(err, DependencyError::Missing { ref missing, .. } if missing == "mysql-8.0-0.2.0"));
    }

    #[test]
    fn required_parameters_without_default_must_be_passed() {
        let child = ov("b-1", &[]);
        let err = check_child_parameters("db", &child, &BTreeMap::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "task db: parameters for operator version b-1 are invalid: required parameter NEEDED is not set by the parameter file"
        );
        let given = BTreeMap::from([("NEEDED".to_string(), "v".to_string())]);
        assert_eq!(check_child_parameters("db", &child, &given), Ok(()));
    }
}
