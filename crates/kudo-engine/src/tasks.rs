//! Pure task-level rules the controller needs around executing a task: build-time validation
//! (KUDO's `task.Build`), the parameter values tasks and templates see, and Toggle's choice
//! between Apply and Delete.

use std::collections::BTreeMap;

use kudo_api::{Parameter, Task, TaskKind};

/// Why a task fails build-time validation ([`validate_task`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskBuildError {
    /// An Apply or Delete task lists no `resources` (holds the kind).
    #[error("task validation error: {0} task has an empty resource list, use a Dummy task instead")]
    EmptyResources(TaskKind),
    /// A Toggle task lists no `resources`.
    #[error("task validation error: Toggle task has an empty resource list")]
    ToggleWithoutResources,
    /// A Toggle task names no `parameter`.
    #[error("task validation error: Toggle task has no parameter")]
    ToggleWithoutParameter,
    /// A Pipe task names no `pod` template.
    #[error("task validation error: Pipe task has no pod template")]
    PipeWithoutPod,
    /// A Pipe task has no `pipe` entries.
    #[error("task validation error: Pipe task has no pipe entries")]
    PipeWithoutEntries,
    /// A pipe entry sets both or neither of `file` and `envFile` (holds the entry's key).
    #[error("task validation error: pipe entry {0:?} must set exactly one of file or envFile")]
    PipeFileOrEnvFile(String),
    /// A pipe entry's `kind` is neither `Secret` nor `ConfigMap`.
    #[error("task validation error: pipe entry {key:?} has kind {kind:?}, expected Secret or ConfigMap")]
    PipeKind {
        /// The entry's `key`.
        key: String,
        /// The `kind` it gives.
        kind: String,
    },
    /// A pipe entry's `key` is empty or has characters other than `[a-zA-Z0-9_-]` (holds it).
    #[error("task validation error: pipe key {0:?} must match ^[a-zA-Z0-9_\\-]+$")]
    PipeKey(String),
    /// A KudoOperator task names no `package`.
    #[error("task validation error: KudoOperator task has no package")]
    KudoOperatorWithoutPackage,
    /// A KudoOperator task names no `operatorVersion`.
    #[error("task validation error: KudoOperator task has no operatorVersion")]
    KudoOperatorWithoutVersion,
    /// The task's `kind` is none KUDO knows (holds the spelling).
    #[error("unknown task kind {0}")]
    UnknownKind(String),
}

/// Why a Toggle task cannot decide between Apply and Delete ([`toggle_action`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToggleError {
    /// The Toggle task's `parameter` is not a parameter of the OperatorVersion.
    #[error("toggle task {task}: parameter {parameter:?} is not declared in the OperatorVersion")]
    Undeclared {
        /// The Toggle task's name.
        task: String,
        /// The parameter it names.
        parameter: String,
    },
    /// The parameter's value is not a boolean as Go's `strconv.ParseBool` reads it.
    #[error("toggle task {task}: value {value:?} of parameter {parameter:?} is not a boolean")]
    NotBoolean {
        /// The Toggle task's name.
        task: String,
        /// The parameter it names.
        parameter: String,
        /// The value that is not a boolean.
        value: String,
    },
}

/// Build-time validation of a task (KUDO's `task.Build`): a task failing it makes the plan FATAL
/// before anything is applied, instead of misbehaving at runtime.
pub fn validate_task(task: &Task) -> Result<(), TaskBuildError> {
    let s = &task.spec;
    match &task.kind {
        TaskKind::Apply | TaskKind::Delete => {
            if s.resources.is_empty() {
                return Err(TaskBuildError::EmptyResources(task.kind.clone()));
            }
        }
        TaskKind::Toggle => {
            if s.resources.is_empty() {
                return Err(TaskBuildError::ToggleWithoutResources);
            }
            if s.parameter.is_empty() {
                return Err(TaskBuildError::ToggleWithoutParameter);
            }
        }
        TaskKind::Pipe => {
            if s.pod.is_empty() {
                return Err(TaskBuildError::PipeWithoutPod);
            }
            if s.pipe.is_empty() {
                return Err(TaskBuildError::PipeWithoutEntries);
            }
            for p in &s.pipe {
                if p.file.is_empty() == p.env_file.is_empty() {
                    return Err(TaskBuildError::PipeFileOrEnvFile(p.key.clone()));
                }
                if p.kind != "Secret" && p.kind != "ConfigMap" {
                    return Err(TaskBuildError::PipeKind {
                        key: p.key.clone(),
                        kind: p.kind.clone(),
                    });
                }
                if p.key.is_empty()
                    || !p
                        .key
                        .bytes()
                        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
                {
                    return Err(TaskBuildError::PipeKey(p.key.clone()));
                }
            }
        }
        TaskKind::Dummy => {}
        TaskKind::KudoOperator => {
            if s.package.is_empty() {
                return Err(TaskBuildError::KudoOperatorWithoutPackage);
            }
            if s.operator_version.is_empty() {
                return Err(TaskBuildError::KudoOperatorWithoutVersion);
            }
        }
        TaskKind::Unknown(other) => return Err(TaskBuildError::UnknownKind(other.clone())),
    }
    Ok(())
}

/// The values a run sees for the OV's parameters (KUDO's `ParamsMap` before type conversion):
/// for every parameter *declared in the OperatorVersion*, the instance value if the key exists,
/// else the default, else the empty string. Instance values of undeclared names are ignored.
pub fn effective_parameters(
    defs: &[Parameter],
    instance: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    defs.iter()
        .map(|p| {
            let v = instance
                .get(&p.name)
                .or(p.default.as_ref())
                .cloned()
                .unwrap_or_default();
            (p.name.clone(), v)
        })
        .collect()
}

/// What a Toggle task does in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToggleAction {
    /// The parameter is true: behave exactly like an Apply task over the same resources.
    Apply,
    /// The parameter is false: behave exactly like a Delete task over the same resources.
    Delete,
}

/// Resolves a Toggle task against the effective parameters (see [`effective_parameters`]). The
/// value must be one of Go's `strconv.ParseBool` spellings; a missing or unparseable value is a
/// fatal task error (KUDO's `ToggleTaskError`).
pub fn toggle_action(task: &Task, params: &BTreeMap<String, String>) -> Result<ToggleAction, ToggleError> {
    let name = &task.spec.parameter;
    let Some(value) = params.get(name) else {
        return Err(ToggleError::Undeclared {
            task: task.name.clone(),
            parameter: name.clone(),
        });
    };
    match crate::triggers::parse_go_bool(value) {
        Some(true) => Ok(ToggleAction::Apply),
        Some(false) => Ok(ToggleAction::Delete),
        None => Err(ToggleError::NotBoolean {
            task: task.name.clone(),
            parameter: name.clone(),
            value: value.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudo_api::TaskSpec;

    #[test]
    fn effective_parameters_use_value_then_default_then_empty() {
        let defs = vec![
            Parameter {
                name: "A".into(),
                default: Some("da".into()),
                ..Default::default()
            },
            Parameter {
                name: "B".into(),
                default: Some("db".into()),
                ..Default::default()
            },
            Parameter {
                name: "C".into(),
                ..Default::default()
            },
        ];
        let inst = BTreeMap::from([
            ("A".to_string(), "va".to_string()),
            ("X".to_string(), "ignored".to_string()),
        ]);
        let got = effective_parameters(&defs, &inst);
        let want = BTreeMap::from([
            ("A".to_string(), "va".to_string()),
            ("B".to_string(), "db".to_string()),
            ("C".to_string(), String::new()),
        ]);
        assert_eq!(got, want);
    }

    #[test]
    fn toggle_follows_go_parse_bool() {
        let task = Task {
            name: "feature".into(),
            kind: TaskKind::Toggle,
            spec: TaskSpec {
                parameter: "ON".into(),
                ..Default::default()
            },
        };
        let p = |v: &str| BTreeMap::from([("ON".to_string(), v.to_string())]);
        assert_eq!(toggle_action(&task, &p("true")), Ok(ToggleAction::Apply));
        assert_eq!(toggle_action(&task, &p("T")), Ok(ToggleAction::Apply));
        assert_eq!(toggle_action(&task, &p("1")), Ok(ToggleAction::Apply));
        assert_eq!(toggle_action(&task, &p("False")), Ok(ToggleAction::Delete));
        assert_eq!(toggle_action(&task, &p("0")), Ok(ToggleAction::Delete));
        assert_eq!(
            toggle_action(&task, &p("yes")).map_err(|e| e.to_string()),
            Err("toggle task feature: value \"yes\" of parameter \"ON\" is not a boolean".into())
        );
        assert!(toggle_action(&task, &p("")).is_err());
        assert!(
            toggle_action(&task, &BTreeMap::new())
                .unwrap_err()
                .to_string()
                .contains("not declared")
        );
    }
}
