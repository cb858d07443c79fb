//! The package model: `operator.yaml`, `params.yaml` and the templates.
//!
//! Tasks, plans, maintainers and parameter definitions are the `kudo-api` types the
//! OperatorVersion holds, so a package and the cluster objects built from it share one model
//! (read leniently, as KUDO reads package files, by [`crate::lenient`]). What only a package file
//! has stays here: the file-level fields, the YAML-typed parameter defaults and enums that
//! `package verify` checks, and the UI-only `group`, `advanced`, `hint` and `groups`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::lenient::de as lenient;
pub use kudo_api::TaskKind;
use kudo_api::{Maintainer, Plan, Task};

/// The only `apiVersion` a package file may declare (an empty one is read as this).
pub const API_VERSION: &str = "kudo.dev/v1beta1";
/// File name of the operator definition (metadata, tasks and plans) at the package root.
pub const OPERATOR_FILE: &str = "operator.yaml";
/// File name of the parameter declarations at the package root.
pub const PARAMS_FILE: &str = "params.yaml";

/// `operator.yaml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorFile {
    /// `apiVersion`: [`API_VERSION`] (the reader fills it in when absent).
    #[serde(default, deserialize_with = "lenient::string")]
    pub api_version: String,
    /// `name`: the operator's name, which names the Operator object and the package.
    #[serde(default, deserialize_with = "lenient::string")]
    pub name: String,
    /// `description`: free text about the operator, carried into the Operator's spec.
    #[serde(default, deserialize_with = "lenient::string")]
    pub description: String,
    /// `operatorVersion`: the version of the package itself (the OperatorVersion's `spec.version`).
    #[serde(default, deserialize_with = "lenient::string")]
    pub operator_version: String,
    /// `appVersion`: the version of the application the package deploys; optional.
    #[serde(default, deserialize_with = "lenient::string")]
    pub app_version: String,
    /// `kudoVersion`: the lowest KUDO version the package declares it needs.
    #[serde(default, rename = "kudoVersion", deserialize_with = "lenient::string")]
    pub kudo_version: String,
    /// `kubernetesVersion`: the lowest Kubernetes version the package declares it needs.
    #[serde(default, deserialize_with = "lenient::string")]
    pub kubernetes_version: String,
    /// `maintainers`: who maintains the package.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub maintainers: Vec<Maintainer>,
    /// `url`: home page or source URL of the operator.
    #[serde(default, deserialize_with = "lenient::string")]
    pub url: String,
    /// `tasks`: every task the plans' steps may refer to, by name.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub tasks: Vec<Task>,
    /// `plans`: the plans by name (`deploy`, `update`, …), each made of phases, steps and tasks.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub plans: BTreeMap<String, Plan>,
    /// `namespaceManifest`: template rendered to create the Instance's namespace, or empty.
    #[serde(default, deserialize_with = "lenient::string")]
    pub namespace_manifest: String,
    /// kudo-rs extension: the operator's typed API (a CRD per operator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<kudo_api::TypedApi>,
}

impl OperatorFile {
    /// The task `name`, as a step of a plan refers to it; `None` when not declared.
    pub fn task(&self, name: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.name == name)
    }
}

/// A parameter group (UI only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Group {
    /// The group's name, as a parameter's `group` refers to it.
    #[serde(default, deserialize_with = "lenient::string")]
    pub name: String,
    /// The title shown for the group.
    #[serde(default, deserialize_with = "lenient::string")]
    pub display_name: String,
    /// Free-text description of the group.
    #[serde(default, deserialize_with = "lenient::string")]
    pub description: String,
    /// Priority for ordering the groups in a UI.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub prio: i64,
}

/// A parameter as declared in `params.yaml`: the definition the OperatorVersion stores (its
/// values already the strings the cluster keeps, `required` defaulted to `true`), plus what only
/// the package file has. Dereferences to the definition, so `p.name` and `p.is_required()` read
/// as on the cluster's parameter.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeclaredParameter {
    /// What the OperatorVersion stores.
    pub def: kudo_api::Parameter,
    /// `default` as decoded YAML (`None` when absent or `null`): `package verify` checks its YAML
    /// type, which the stored string no longer shows.
    pub yaml_default: Option<serde_json::Value>,
    /// `enum` as decoded YAML, for the same checks.
    pub yaml_enum: Option<Vec<serde_json::Value>>,
    /// UI only: the group the parameter is shown in.
    pub group: String,
    /// UI only: hidden unless advanced parameters are shown.
    pub advanced: bool,
    /// UI only: a one-line hint.
    pub hint: String,
}

impl std::ops::Deref for DeclaredParameter {
    type Target = kudo_api::Parameter;
    fn deref(&self) -> &kudo_api::Parameter {
        &self.def
    }
}

/// `params.yaml`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParamsFile {
    /// `apiVersion`: [`API_VERSION`] (the reader fills it in when absent).
    #[serde(default, deserialize_with = "lenient::string")]
    pub api_version: String,
    /// `groups`: the parameter groups parameters may be shown in (UI only).
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub groups: Vec<Group>,
    /// kudo-rs extension: cross-parameter CEL rules (root `x-kubernetes-validations`).
    #[serde(
        default,
        rename = "x-kubernetes-validations",
        deserialize_with = "lenient::or_default"
    )]
    pub validations: Vec<kudo_api::ValidationRule>,
    /// Filled by the reader ([`crate::reader::parse_params`]), which splits each entry into its
    /// definition and the package-only fields.
    #[serde(skip)]
    pub parameters: Vec<DeclaredParameter>,
}

impl ParamsFile {
    /// The parameter declared as `name`, if any.
    pub fn get(&self, name: &str) -> Option<&DeclaredParameter> {
        self.parameters.iter().find(|p| p.name == name)
    }

    /// The definitions as the OperatorVersion stores them, in declaration order.
    pub fn definitions(&self) -> Vec<kudo_api::Parameter> {
        self.parameters.iter().map(|p| p.def.clone()).collect()
    }
}

/// A whole package as read from a directory or tarball.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Package {
    /// The parsed `operator.yaml`.
    pub operator: OperatorFile,
    /// The parsed `params.yaml`.
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
