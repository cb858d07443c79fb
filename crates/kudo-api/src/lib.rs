//! Typed `kudo.dev/v1beta1` objects, serialising exactly to what KUDO v0.19's CRDs accept, so that
//! Instance/OperatorVersion YAML written for KUDO applies unchanged. Field names are the CRD's JSON
//! names (note `value-type` on parameters). Our additions, when they come, go in new optional fields.
//!
//! Plain serde structs rather than `kube::CustomResource` derives: the package crate and the pure
//! engine must not pull in a Kubernetes client, and the CRD manifests are written by hand to match
//! KUDO's schemas field for field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub mod duration;
pub mod kinds;
pub mod rbac;
pub mod source;
pub mod strconv;
mod task_kind;
pub use task_kind::TaskKind;

pub const GROUP: &str = "kudo.dev";
pub const VERSION: &str = "v1beta1";
pub const API_VERSION: &str = "kudo.dev/v1beta1";

/// Standard object metadata, reduced to what KUDO objects use; unknown fields are kept.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// `corev1.ObjectReference` as KUDO uses it (`kind`/`name`, optionally `namespace`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: String,
}

impl ObjectReference {
    /// The referenced namespace, or `default` (the referrer's own namespace) when the reference
    /// names none or an empty one.
    pub fn namespace_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.namespace
            .as_deref()
            .filter(|ns| !ns.is_empty())
            .unwrap_or(default)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Maintainer {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub email: String,
}

// ---------------------------------------------------------------- Operator

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kudo_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes_version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace_manifest: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Operator {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: OperatorSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

// ---------------------------------------------------------------- OperatorVersion

/// A step of a phase: tasks run (re-applied) together until all are done.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub name: String,
    #[serde(default)]
    pub tasks: Vec<String>,
    /// Our addition: fail the step with FATAL_ERROR when it has not completed within this time, a
    /// Go-style duration (`90s`, `10m`, `1h30m`) or bare seconds (KUDO had no timeouts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub name: String,
    #[serde(default)]
    pub strategy: Ordering,
    #[serde(default)]
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    #[serde(default)]
    pub strategy: Ordering,
    #[serde(default)]
    pub phases: Vec<Phase>,
    /// Our addition: plan-wide timeout (a Go-style duration such as `10m`), see [`Step::timeout`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// kudo-rs extension: run this plan on a schedule — a 5-field cron expression (UTC), `@hourly`
    /// and friends, or `@every <duration>`; may be a template over parameters (blank result = not
    /// scheduled). KUDO's package reader ignores the unknown field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// kudo-rs extension: autopilot rules that run this plan on their own when a
    /// watched resource meets a condition. KUDO ignores the field (its CRD preserves unknown plan
    /// fields), so a package using it still loads there, without the autopilot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<AutopilotRule>,
}

/// One autopilot rule of a plan (`when:` item): while `condition` holds on `resource` for `for`,
/// the manager sets `setParameters` and runs the plan, then waits `cooldown` before the rule may
/// fire again.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutopilotRule {
    /// The watched object, in the Instance's namespace; each field is a template over the
    /// Instance (`{{ .Name }}`, `{{ .Params.X }}`).
    pub resource: AutopilotResource,
    /// A CEL expression over `object` (the resource) and `params` (map of strings).
    pub condition: String,
    /// How long the condition must hold continuously (Go duration; empty = 0).
    #[serde(default, rename = "for", skip_serializing_if = "String::is_empty")]
    pub for_: String,
    /// How long after a firing the rule stays quiet (Go duration; empty = 0).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cooldown: String,
    /// Parameters to set on the Instance when the rule fires; values are templates.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set_parameters: BTreeMap<String, String>,
}

/// `resource:` of an autopilot rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutopilotResource {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

/// State of one autopilot rule in `status.autopilot` (kudo-rs extension).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutopilotRuleStatus {
    /// Since when the condition has held without interruption (RFC 3339); `None` when it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holding_since: Option<String>,
    /// When the rule last fired (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fired: Option<String>,
    /// The last evaluation error reported with a Warning Event (reported once per distinct error).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_error: String,
}

/// `serial` / `parallel`. Anything else (including empty) behaves like `parallel` in KUDO's engine,
/// so the original string is kept.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Ordering(pub String);

impl Ordering {
    pub fn serial() -> Ordering {
        Ordering("serial".into())
    }
    pub fn parallel() -> Ordering {
        Ordering("parallel".into())
    }
    pub fn is_serial(&self) -> bool {
        self.0 == "serial"
    }
}

/// `{file|envFile, kind, key}` of a Pipe task.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PipeSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub file: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env_file: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub key: String,
}

/// KUDO flattens every task kind's spec into one struct; any task may carry any field.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpec {
    // Apply / Delete / Toggle
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    // Toggle
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parameter: String,
    // Dummy
    #[serde(default, skip_serializing_if = "is_false")]
    pub want_err: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub fatal: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub done: bool,
    // Pipe
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipe: Vec<PipeSpec>,
    // KudoOperator
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub package: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operator_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parameter_file: String,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl TaskSpec {
    /// The OperatorVersion a `KudoOperator` task instantiates: `<package>-<appVersion>-<operatorVersion>`
    /// (or `<package>-<operatorVersion>` without an appVersion), the name the CLI gave it when it
    /// installed the dependency. `package` holds the operator name once the CLI resolved it.
    pub fn child_operator_version_name(&self) -> String {
        if self.app_version.is_empty() {
            format!("{}-{}", self.package, self.operator_version)
        } else {
            format!("{}-{}-{}", self.package, self.app_version, self.operator_version)
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub name: String,
    pub kind: TaskKind,
    #[serde(default)]
    pub spec: TaskSpec,
}

/// An OperatorVersion parameter: every value is a string in the API (see kudo-behaviour.md §2.5).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Parameter {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trigger: String,
    #[serde(rename = "value-type", default, skip_serializing_if = "String::is_empty")]
    pub value_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#enum: Option<Vec<String>>,
    /// kudo-rs extension: the value is a secret, supplied through `spec.parameterSources`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitive: Option<bool>,
    /// kudo-rs extension: JSON-Schema keywords that narrow the declared type. Every
    /// one is optional and written only when set, so OperatorVersions of packages that use none
    /// stay byte-identical to KUDO's. Bounds and nesting are in JSON-Schema 2020-12 form (numeric
    /// `exclusiveMinimum`), as in `params.yaml`; `kudo_package::schema` converts to kube's dialect.
    #[serde(flatten)]
    pub schema: ParameterSchema,
}

/// The JSON-Schema keywords of a [`Parameter`] (kudo-rs extension), flattened into the
/// parameter as `params.yaml` writes them. Nested `items`, `properties` and `additionalProperties`
/// are raw JSON-Schema 2020-12 values: their shape is checked by `package verify`, not here, so a
/// stored OperatorVersion always reads back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParameterSchema {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<serde_json::Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<serde_json::Number>,
    /// 2020-12 form: the value must be greater than this number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_minimum: Option<serde_json::Number>,
    /// 2020-12 form: the value must be less than this number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_maximum: Option<serde_json::Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// An ECMA-262-style regular expression the (string) value must match somewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// `quantity`, `duration`, `cron`, `dns1123-label` or one of kube's formats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// Schema of every element of an `array` parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<serde_json::Value>,
    /// Schemas of the known keys of a `map` parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<BTreeMap<String, serde_json::Value>>,
    /// `false`, or the schema of every other key of a `map` parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_properties: Option<serde_json::Value>,
}

impl ParameterSchema {
    /// Whether no keyword is set (the parameter is checked by KUDO's rules alone).
    pub fn is_empty(&self) -> bool {
        *self == ParameterSchema::default()
    }
}

/// A CEL rule over all parameter values at once (kudo-rs extension): `self` is the map
/// of parameter name to typed value, e.g. `self.REPLICAS % 2 == 1`. The shape of a CRD's
/// `x-kubernetes-validations` item, so the per-operator CRD can carry it unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationRule {
    pub rule: String,
    /// What a user is told when the rule does not hold; the rule itself when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl Parameter {
    /// Whether a value must be supplied. On a stored OperatorVersion an absent `required` means
    /// *not* required (KUDO's `*bool` nil); the `required: true` default of `params.yaml` is applied
    /// by the package reader, which always writes the field explicitly.
    pub fn is_required(&self) -> bool {
        self.required.unwrap_or(false)
    }
    /// Whether an install must supply a value: required and without a default (KUDO's
    /// `IsRequired() && !HasDefault()`). An `array` or `map` parameter always has a default on the
    /// cluster (the package reader stores `null` when `params.yaml` gives none, as KUDO does), so
    /// it never needs one.
    pub fn needs_value(&self) -> bool {
        self.is_required() && self.default.is_none()
    }
    /// THE "required" rule, for every type and every caller: whether `value` (`None`: not set)
    /// leaves a parameter that [needs a value](Self::needs_value) without one. KUDO's CLI refused
    /// an unset value and its admission webhook an empty one; both are refused here.
    pub fn lacks_required_value(&self, value: Option<&str>) -> bool {
        self.needs_value() && value.is_none_or(str::is_empty)
    }
    pub fn is_immutable(&self) -> bool {
        self.immutable.unwrap_or(false)
    }
    pub fn is_sensitive(&self) -> bool {
        self.sensitive.unwrap_or(false)
    }
    /// The declared type, `string` when omitted.
    pub fn value_type(&self) -> &str {
        if self.value_type.is_empty() {
            "string"
        } else {
            &self.value_type
        }
    }
}

impl OperatorVersionSpec {
    /// Names of the parameters that `values` leaves without a required value (see
    /// [`Parameter::lacks_required_value`]): what an Instance must be given before it can be
    /// created (by `install`, or by a parent's `KudoOperator` parameter file).
    pub fn missing_required(&self, values: &BTreeMap<String, String>) -> Vec<String> {
        self.parameters
            .iter()
            .filter(|p| p.lacks_required_value(values.get(&p.name).map(String::as_str)))
            .map(|p| p.name.clone())
            .collect()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorVersionSpec {
    #[serde(default)]
    pub operator: ObjectReference,
    #[serde(default)]
    pub version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app_version: String,
    /// Template file key (path below `templates/`) → content.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub templates: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<Task>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<Parameter>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plans: BTreeMap<String, Plan>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub connection_string: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upgradable_from: Vec<ObjectReference>,
    /// kudo-rs extension: the typed API of this operator, a CRD whose objects are its
    /// Instances with typed parameters. Absent: today's behaviour, Instances only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<TypedApi>,
    /// kudo-rs extension: cross-parameter CEL rules, `params.yaml`'s root
    /// `x-kubernetes-validations`. Written only when the package has some.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameter_validations: Vec<ValidationRule>,
}

/// The `api:` section of `operator.yaml`: group, kind and names of the CRD made for the operator.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypedApi {
    pub group: String,
    pub kind: String,
    /// `v1` when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Lower-case kind + `s` when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plural: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
}

impl TypedApi {
    pub fn version(&self) -> &str {
        if self.version.is_empty() {
            "v1"
        } else {
            &self.version
        }
    }
    pub fn plural(&self) -> String {
        if self.plural.is_empty() {
            format!("{}s", self.kind.to_lowercase())
        } else {
            self.plural.clone()
        }
    }
    /// `<plural>.<group>`, the CRD's name.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural(), self.group)
    }
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorVersion {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: OperatorVersionSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

// ---------------------------------------------------------------- Instance

/// `NEVER_RUN`, `PENDING`, `IN_PROGRESS`, `COMPLETE`, `ERROR`, `FATAL_ERROR` (plus our `CANCELLED`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExecutionStatus {
    #[default]
    #[serde(rename = "NEVER_RUN")]
    NeverRun,
    #[serde(rename = "PENDING")]
    Pending,
    #[serde(rename = "IN_PROGRESS")]
    InProgress,
    #[serde(rename = "COMPLETE")]
    Complete,
    #[serde(rename = "ERROR")]
    Error,
    #[serde(rename = "FATAL_ERROR")]
    FatalError,
    /// Our addition: the run was stopped by a cancel request (KUDO had no cancel).
    #[serde(rename = "CANCELLED")]
    Cancelled,
}

impl ExecutionStatus {
    /// COMPLETE, FATAL_ERROR (and our CANCELLED): the run will not progress any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Complete | Self::FatalError | Self::Cancelled)
    }
    pub fn is_finished(self) -> bool {
        self == Self::Complete
    }
    /// PENDING, IN_PROGRESS or ERROR.
    pub fn is_running(self) -> bool {
        matches!(self, Self::Pending | Self::InProgress | Self::Error)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NeverRun => "NEVER_RUN",
            Self::Pending => "PENDING",
            Self::InProgress => "IN_PROGRESS",
            Self::Complete => "COMPLETE",
            Self::Error => "ERROR",
            Self::FatalError => "FATAL_ERROR",
            Self::Cancelled => "CANCELLED",
        }
    }
}

impl std::fmt::Display for ExecutionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanExecution {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plan_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ExecutionStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSpec {
    #[serde(default)]
    pub operator_version: ObjectReference,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// kudo-rs extension: parameter values read from elsewhere at render time (sensitive
    /// parameters), keyed by parameter name. The shape of core/v1 `EnvVarSource`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameter_sources: BTreeMap<String, ParameterSource>,
    #[serde(default)]
    pub plan_execution: PlanExecution,
    /// kudo-rs extension: the ServiceAccount (in the Instance's namespace) the manager
    /// impersonates for every request it makes for this Instance, so an Instance can do no more
    /// than that account may. Empty: the manager's `--default-service-account`, or, without one,
    /// the manager's own identity (KUDO's behaviour).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_account_name: String,
}

/// Where a parameter's value comes from (core/v1 `EnvVarSource`; only `secretKeyRef` is supported).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParameterSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<SecretKeySelector>,
}

impl ParameterSource {
    /// A source reading `key` of the Secret `name` in the Instance's namespace.
    pub fn secret(name: impl Into<String>, key: impl Into<String>) -> ParameterSource {
        ParameterSource {
            secret_key_ref: Some(SecretKeySelector {
                name: name.into(),
                key: key.into(),
            }),
        }
    }
}

/// core/v1 `SecretKeySelector` without `optional`: a Secret of the Instance's namespace and a key.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SecretKeySelector {
    pub name: String,
    pub key: String,
}

impl std::fmt::Display for SecretKeySelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.name, self.key)
    }
}

impl InstanceSpec {
    /// The namespace of the referenced OperatorVersion: `spec.operatorVersion.namespace` when set
    /// and non-empty, else the Instance's own namespace. The one lookup rule the manager and every
    /// CLI command share (KUDO resolved the reference the same way).
    pub fn operator_version_namespace<'a>(&'a self, instance_namespace: &'a str) -> &'a str {
        self.operator_version.namespace_or(instance_namespace)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepStatus {
    pub name: String,
    #[serde(default)]
    pub status: ExecutionStatus,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// kudo-rs extension: what a running step waits for, one line per object that is not
    /// healthy yet (bounded: [`StepStatus::MAX_WAITING_LINES`], [`StepStatus::MAX_WAITING_BYTES`]).
    /// KUDO left a waiting step's message empty, so users could not tell why it waited.
    #[serde(default, rename = "waitingFor", skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<String>,
}

impl StepStatus {
    /// At most this many lines in [`StepStatus::waiting_for`].
    pub const MAX_WAITING_LINES: usize = 10;
    /// At most this many bytes over all lines of [`StepStatus::waiting_for`].
    pub const MAX_WAITING_BYTES: usize = 1024;
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseStatus {
    pub name: String,
    #[serde(default)]
    pub status: ExecutionStatus,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default)]
    pub steps: Vec<StepStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanStatus {
    pub name: String,
    #[serde(default)]
    pub status: ExecutionStatus,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// RFC 3339 timestamp of the last change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default)]
    pub phases: Vec<PhaseStatus>,
}

/// `metav1.Condition`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub last_transition_time: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    /// kudo-rs extension: the `metadata.generation` whose spec the manager admitted and acted on
    /// when it wrote this status (Kubernetes' convention, read by kstatus, Flux, Helm and kpt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plan_status: BTreeMap<String, PlanStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// kudo-rs extension: autopilot rule state keyed `PLAN/INDEX` (see [`AutopilotRuleStatus`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub autopilot: BTreeMap<String, AutopilotRuleStatus>,
    /// kudo-rs extension: per scheduled plan, its last and next occurrence. The last one is what
    /// keeps a restarted manager from firing an occurrence twice.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub schedules: BTreeMap<String, ScheduleStatus>,
}

/// `status.schedules.<plan>` (kudo-rs extension).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleStatus {
    /// The last occurrence handled (run or skipped), RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<String>,
    /// The next occurrence, RFC 3339; absent when the expression never matches again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: InstanceSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<InstanceStatus>,
}

/// The CustomResourceDefinitions (apiextensions v1) of the manager, in install order: the three
/// `kudo.dev/v1beta1` ones (operators, operatorversions, instances; schema-compatible with KUDO
/// v0.19's, so existing KUDO YAML applies unchanged; printer columns added for `kubectl get`), then
/// kudo-rs's own kinds (`kudo-rs.dev`: operatorsources, [`source`]).
pub fn crd_manifests() -> [&'static str; 4] {
    [
        include_str!("../crds/operators.yaml"),
        include_str!("../crds/operatorversions.yaml"),
        include_str!("../crds/instances.yaml"),
        include_str!("../crds/operatorsources.yaml"),
    ]
}

/// Finalizer KUDO puts on Instances whose OperatorVersion has a `cleanup` plan.
pub const CLEANUP_FINALIZER: &str = "kudo.dev.instance.cleanup";

/// Well-known labels and annotations.
pub mod labels {
    pub const HERITAGE: &str = "heritage";
    pub const OPERATOR: &str = "kudo.dev/operator";
    pub const INSTANCE: &str = "kudo.dev/instance";
    pub const PLAN: &str = "kudo.dev/plan";
    pub const PHASE: &str = "kudo.dev/phase";
    pub const STEP: &str = "kudo.dev/step";
    pub const PLAN_UID: &str = "kudo.dev/last-plan-execution-uid";
    pub const OPERATOR_VERSION: &str = "kudo.dev/operator-version";
    pub const DEPENDENCIES_HASH: &str = "kudo.dev/dependencies-hash";
    pub const SKIP_HASH: &str = "kudo.dev/skip-hash-calculation";
    /// A sharded manager's hash bucket of the Instance (`kudo_engine::shard::bucket_of`), on the
    /// Instance and on what its plans apply.
    pub const BUCKET: &str = "kudo.dev/bucket";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_uses_value_type_key_and_required_defaults_false() {
        let p: Parameter = serde_json::from_str(r#"{"name":"A","value-type":"integer"}"#).unwrap();
        assert_eq!(p.value_type(), "integer");
        assert!(
            !p.is_required(),
            "absent `required` on a stored OperatorVersion means optional"
        );
        let back = serde_json::to_value(&p).unwrap();
        assert_eq!(back["value-type"], "integer");
    }

    #[test]
    fn parameter_sources_use_the_env_var_source_shape() {
        let spec: InstanceSpec = serde_json::from_str(
            r#"{"parameterSources":{"PASSWORD":{"secretKeyRef":{"name":"db","key":"pw"}}}}"#,
        )
        .unwrap();
        assert_eq!(
            spec.parameter_sources["PASSWORD"],
            ParameterSource::secret("db", "pw")
        );
        let back = serde_json::to_value(&spec).unwrap();
        assert_eq!(back["parameterSources"]["PASSWORD"]["secretKeyRef"]["key"], "pw");
        let plain = serde_json::to_value(InstanceSpec::default()).unwrap();
        assert!(plain.get("parameterSources").is_none(), "{plain}");
    }

    #[test]
    fn crd_schemas_declare_the_extensions() {
        let inst = crd_manifests()[2];
        assert!(inst.contains("                parameterSources:\n"));
        assert!(inst.contains(
            "                      secretKeyRef:\n                        type: object\n                        required:\n                          - name\n                          - key\n"
        ));
        let ov = crd_manifests()[1];
        assert!(ov.contains("                      sensitive:\n                        type: boolean\n"));
    }

    #[test]
    fn the_operator_version_crd_declares_the_parameter_schema_fields() {
        // A real API server prunes what its CRD does not declare: every field of
        // `ParameterSchema` and `parameterValidations` must be in the schema.
        let ov = crd_manifests()[1];
        let p = Parameter {
            schema: ParameterSchema {
                minimum: Some(1.into()),
                maximum: Some(1.into()),
                exclusive_minimum: Some(1.into()),
                exclusive_maximum: Some(1.into()),
                min_length: Some(1),
                max_length: Some(1),
                pattern: Some("x".into()),
                format: Some("x".into()),
                min_items: Some(1),
                max_items: Some(1),
                items: Some(serde_json::json!({})),
                properties: Some(BTreeMap::new()),
                additional_properties: Some(false.into()),
            },
            ..Default::default()
        };
        let v = serde_json::to_value(&p).unwrap();
        for key in v.as_object().unwrap().keys().filter(|k| *k != "name") {
            assert!(
                ov.contains(&format!("\n                      {key}:\n")),
                "{key} is not declared"
            );
        }
        assert!(ov.contains("\n                parameterValidations:\n"));
    }

    #[test]
    fn crd_manifests_name_the_three_kinds() {
        let names: Vec<&str> = crd_manifests()
            .iter()
            .map(|m| {
                m.lines()
                    .find(|l| l.starts_with("  name: "))
                    .unwrap()
                    .trim_start_matches("  name: ")
            })
            .collect();
        assert_eq!(
            names,
            [
                "operators.kudo.dev",
                "operatorversions.kudo.dev",
                "instances.kudo.dev",
                "operatorsources.kudo-rs.dev"
            ]
        );
    }

    #[test]
    fn status_strings_round_trip() {
        let s: ExecutionStatus = serde_json::from_str("\"FATAL_ERROR\"").unwrap();
        assert_eq!(s, ExecutionStatus::FatalError);
        assert!(s.is_terminal());
        assert_eq!(
            serde_json::to_string(&ExecutionStatus::InProgress).unwrap(),
            "\"IN_PROGRESS\""
        );
    }
}
