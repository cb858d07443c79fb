//! The package model: `operator.yaml`, `params.yaml` and the templates, with every field of KUDO's
//! v1beta1 package schema.
//!
//! These are package-level types, distinct from the cluster objects in `kudo-api`: a package
//! parameter keeps its `default`/`enum` as decoded YAML (typed), and carries the UI-only fields
//! (`group`, `advanced`, `hint`) and `groups` that never reach the cluster. String fields accept
//! YAML scalars of any type (`appVersion: 10.5` reads as `"10.5"`) as `sigs.k8s.io/yaml` does when
//! the target field is a string; `null` anywhere reads as the field's zero value.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::yaml::go_sprint;
pub use kudo_api::TaskKind;

pub const API_VERSION: &str = "kudo.dev/v1beta1";
pub const OPERATOR_FILE: &str = "operator.yaml";
pub const PARAMS_FILE: &str = "params.yaml";

/// Deserialisers tolerant in the way Kubernetes' YAML reader is.
pub(crate) mod lenient {
    use super::*;

    /// Any scalar → its string form; `null` → "".
    pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        scalar_string(&v).map_err(serde::de::Error::custom)
    }

    pub fn scalar_string(v: &serde_json::Value) -> Result<String, String> {
        match v {
            serde_json::Value::Null => Ok(String::new()),
            serde_json::Value::String(s) => Ok(s.clone()),
            serde_json::Value::Bool(_) | serde_json::Value::Number(_) => Ok(go_sprint(v)),
            serde_json::Value::Array(_) => Err("expected a string, found a list".into()),
            serde_json::Value::Object(_) => Err("expected a string, found a map".into()),
        }
    }

    /// Any scalar → its string form, then into `T` (e.g. a `TaskKind`); `null` → "".
    pub fn string_into<'de, D: Deserializer<'de>, T: From<String>>(d: D) -> Result<T, D::Error> {
        string(d).map(T::from)
    }

    /// A list of scalars → strings; `null` → empty list.
    pub fn string_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        match v {
            serde_json::Value::Null => Ok(Vec::new()),
            serde_json::Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, it)| scalar_string(it).map_err(|e| serde::de::Error::custom(format!("[{i}]: {e}"))))
                .collect(),
            serde_json::Value::String(_) => Err(serde::de::Error::custom("expected a list, found a string")),
            _ => Err(serde::de::Error::custom("expected a list")),
        }
    }

    /// `null` → default, else the normal deserialisation.
    pub fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de> + Default,
    {
        Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
    }
}

/// A maintainer as written in `operator.yaml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Maintainer {
    #[serde(default, deserialize_with = "lenient::string")]
    pub name: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub email: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    #[serde(default, deserialize_with = "lenient::string")]
    pub name: String,
    #[serde(default, deserialize_with = "lenient::string_list")]
    pub tasks: Vec<String>,
    /// Our addition (see `kudo_api::Step::timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    #[serde(default, deserialize_with = "lenient::string")]
    pub name: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub strategy: String,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    #[serde(default, deserialize_with = "lenient::string")]
    pub strategy: String,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub phases: Vec<Phase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// kudo-rs extension: when to run the plan by itself (see `kudo_engine::schedule`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// kudo-rs extension: autopilot rules (see [`kudo_api::AutopilotRule`] and
    /// [`crate::autopilot`] for their checks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<kudo_api::AutopilotRule>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PipeSpec {
    #[serde(default, deserialize_with = "lenient::string")]
    pub file: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub env_file: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub kind: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub key: String,
}

/// All task kinds' fields, flattened as in KUDO.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpec {
    #[serde(default, deserialize_with = "lenient::string_list")]
    pub resources: Vec<String>,
    #[serde(default, deserialize_with = "lenient::string")]
    pub parameter: String,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub want_err: bool,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub fatal: bool,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub done: bool,
    #[serde(default, deserialize_with = "lenient::string")]
    pub pod: String,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub pipe: Vec<PipeSpec>,
    #[serde(default, deserialize_with = "lenient::string")]
    pub package: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub instance_name: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub app_version: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub operator_version: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub parameter_file: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Task {
    #[serde(default, deserialize_with = "lenient::string")]
    pub name: String,
    #[serde(default, deserialize_with = "lenient::string_into")]
    pub kind: TaskKind,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub spec: TaskSpec,
}

/// `operator.yaml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorFile {
    #[serde(default, deserialize_with = "lenient::string")]
    pub api_version: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub name: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub description: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub operator_version: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub app_version: String,
    #[serde(default, rename = "kudoVersion", deserialize_with = "lenient::string")]
    pub kudo_version: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub kubernetes_version: String,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub maintainers: Vec<Maintainer>,
    #[serde(default, deserialize_with = "lenient::string")]
    pub url: String,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub tasks: Vec<Task>,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub plans: BTreeMap<String, Plan>,
    #[serde(default, deserialize_with = "lenient::string")]
    pub namespace_manifest: String,
}

impl OperatorFile {
    pub fn task(&self, name: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.name == name)
    }
}

/// A parameter group (UI only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Group {
    #[serde(default, deserialize_with = "lenient::string")]
    pub name: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub display_name: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub description: String,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub prio: i64,
}

/// A parameter as declared in `params.yaml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Parameter {
    #[serde(default, deserialize_with = "lenient::string")]
    pub display_name: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub name: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub description: String,
    /// `None` only before reading finished: the reader applies KUDO's default of `true`.
    #[serde(default)]
    pub required: Option<bool>,
    /// The decoded YAML value; `None` when absent or `null` (no default).
    #[serde(default, deserialize_with = "de_default")]
    pub default: Option<serde_json::Value>,
    #[serde(default, deserialize_with = "lenient::string")]
    pub trigger: String,
    /// `string` (also when empty), `integer`, `number`, `boolean`, `array`, `map`.
    #[serde(default, rename = "type", deserialize_with = "lenient::string")]
    pub type_: String,
    #[serde(default)]
    pub immutable: Option<bool>,
    #[serde(default, rename = "enum")]
    pub enum_: Option<Vec<serde_json::Value>>,
    #[serde(default, deserialize_with = "lenient::string")]
    pub group: String,
    #[serde(default)]
    pub advanced: Option<bool>,
    #[serde(default, deserialize_with = "lenient::string")]
    pub hint: String,
    /// kudo-rs extension (KUDO ignores the field): the value is a secret. The CLI stores it in a
    /// Secret and references it from `spec.parameterSources` instead of `spec.parameters`.
    #[serde(default)]
    pub sensitive: Option<bool>,
}

fn de_default<'de, D: Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(if v.is_null() { None } else { Some(v) })
}

impl Parameter {
    pub fn is_required(&self) -> bool {
        self.required.unwrap_or(true)
    }
    pub fn is_sensitive(&self) -> bool {
        self.sensitive.unwrap_or(false)
    }
    pub fn is_immutable(&self) -> bool {
        self.immutable.unwrap_or(false)
    }
    pub fn is_advanced(&self) -> bool {
        self.advanced.unwrap_or(false)
    }
    pub fn has_default(&self) -> bool {
        self.default.is_some()
    }
    /// The effective type name (`string` when not declared).
    pub fn value_type(&self) -> &str {
        if self.type_.is_empty() {
            "string"
        } else {
            &self.type_
        }
    }
    /// The default as the OperatorVersion stores it (see [`crate::params::wrap_value`]).
    pub fn default_string(&self) -> Option<String> {
        self.default
            .as_ref()
            .map(|d| crate::params::wrap_value(d, self.value_type()))
    }
    /// The enum values as the OperatorVersion stores them.
    pub fn enum_strings(&self) -> Option<Vec<String>> {
        self.enum_.as_ref().map(|vs| {
            vs.iter()
                .map(|v| crate::params::wrap_value(v, self.value_type()))
                .collect()
        })
    }
}

/// `params.yaml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParamsFile {
    #[serde(default, deserialize_with = "lenient::string")]
    pub api_version: String,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub groups: Vec<Group>,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub parameters: Vec<Parameter>,
}

impl ParamsFile {
    pub fn get(&self, name: &str) -> Option<&Parameter> {
        self.parameters.iter().find(|p| p.name == name)
    }
}

/// A whole package as read from a directory or tarball.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Package {
    pub operator: OperatorFile,
    pub params: ParamsFile,
    /// Template key (path below `templates/`) → content. Sorted by key.
    pub templates: BTreeMap<String, String>,
    /// Raw bytes of the package files as found (root-relative paths, `/`-separated): what
    /// `package create` archives.
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Package {
    /// `<name>-<appVersion>-<operatorVersion>` or `<name>-<operatorVersion>`: the OperatorVersion
    /// object name.
    pub fn operator_version_name(&self) -> String {
        let o = &self.operator;
        if o.app_version.is_empty() {
            format!("{}-{}", o.name, o.operator_version)
        } else {
            format!("{}-{}-{}", o.name, o.app_version, o.operator_version)
        }
    }

    /// `<name>-<appVersion>_<operatorVersion>.tgz` or `<name>-<operatorVersion>.tgz`.
    pub fn tarball_name(&self) -> String {
        let o = &self.operator;
        if o.app_version.is_empty() {
            format!("{}-{}.tgz", o.name, o.operator_version)
        } else {
            format!("{}-{}_{}.tgz", o.name, o.app_version, o.operator_version)
        }
    }

    /// `<name>-instance`: the Instance name `install` uses when none is given.
    pub fn default_instance_name(&self) -> String {
        format!("{}-instance", self.operator.name)
    }
}
