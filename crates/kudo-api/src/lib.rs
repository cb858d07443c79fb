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
pub mod rollout;
pub mod source;
pub mod strconv;
mod task_kind;
pub use task_kind::TaskKind;

/// API group of KUDO's objects, `kudo.dev`.
pub const GROUP: &str = "kudo.dev";
/// API group of kudo-rs's own kinds (Rollout, OperatorSource), apart from KUDO's `kudo.dev` so that
/// KUDO's group keeps exactly the kinds KUDO v0.19 served.
pub const OWN_GROUP: &str = "kudo-rs.dev";
/// Version of kudo-rs's own kinds: alpha while their fields may still change.
pub const OWN_VERSION: &str = "v1alpha1";
/// `apiVersion` of kudo-rs's own kinds: [`OWN_GROUP`]/[`OWN_VERSION`].
pub const OWN_API_VERSION: &str = "kudo-rs.dev/v1alpha1";
/// API version of KUDO's objects, `v1beta1` (the only one KUDO v0.19 served).
pub const VERSION: &str = "v1beta1";
/// `apiVersion` of every Operator, OperatorVersion and Instance: `kudo.dev/v1beta1`.
pub const API_VERSION: &str = "kudo.dev/v1beta1";

/// Standard object metadata, reduced to what KUDO objects use; unknown fields are kept.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// `metadata.name`; empty only on objects not yet named (e.g. before `generateName` applies).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `metadata.namespace`; `None` for cluster-scoped objects and unset in fresh manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `metadata.labels`, e.g. the [`labels`] KUDO puts on what it manages.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// `metadata.finalizers`, e.g. [`CLEANUP_FINALIZER`] on an Instance with a `cleanup` plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
    /// Every other metadata field (`uid`, `resourceVersion`, `generation`, …), kept verbatim.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl ObjectMeta {
    /// `uid` (empty before the server assigned one).
    pub fn uid(&self) -> &str {
        self.other.get("uid").and_then(|v| v.as_str()).unwrap_or("")
    }
}

/// `corev1.ObjectReference` as KUDO uses it (`kind`/`name`, optionally `namespace`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// Kind of the referenced object, e.g. `OperatorVersion`; often left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Namespace of the referenced object; absent or empty means the referrer's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the referenced object.
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

/// A maintainer of an operator as `operator.yaml` lists it (`spec.maintainers` of an Operator).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Maintainer {
    /// The maintainer's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The maintainer's e-mail address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub email: String,
}

// ---------------------------------------------------------------- Operator

/// `spec` of an Operator: package metadata that `operator.yaml` declares once for all versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorSpec {
    /// Free-text description of the operator.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `kudoVersion`: the lowest KUDO version the package declares it needs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kudo_version: String,
    /// `kubernetesVersion`: the lowest Kubernetes version the package declares it needs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes_version: String,
    /// The operator's maintainers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    /// Home page or source URL of the operator.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// `namespaceManifest`: template file (below `templates/`) rendered to create the Instance's
    /// namespace when installing with `--create-namespace`; empty when the package has none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace_manifest: String,
}

/// A `kudo.dev/v1beta1` Operator: the package as a whole, owner of its OperatorVersions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Operator {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// Always `Operator`.
    pub kind: String,
    /// The Operator's metadata; its name is the package name.
    pub metadata: ObjectMeta,
    /// The package metadata shared by all versions.
    pub spec: OperatorSpec,
    /// Whatever the cluster stores in `status`; KUDO writes none, so it is kept opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

// ---------------------------------------------------------------- OperatorVersion

/// A step of a phase: tasks run (re-applied) together until all are done.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The step's name, unique within its phase (`kudo.dev/step` annotation on what it applies).
    pub name: String,
    /// Names of the tasks (of `spec.tasks`) the step runs.
    #[serde(default)]
    pub tasks: Vec<String>,
    /// Our addition: fail the step with FATAL_ERROR when it has not completed within this time, a
    /// Go-style duration (`90s`, `10m`, `1h30m`) or bare seconds (KUDO had no timeouts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// A phase of a plan: its steps run one after another (`serial`) or all at once (`parallel`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// The phase's name, unique within its plan (`kudo.dev/phase` annotation on what it applies).
    pub name: String,
    /// Whether the steps run `serial` or `parallel`; empty behaves like `parallel`.
    #[serde(default)]
    pub strategy: Ordering,
    /// The phase's steps, in declaration order.
    #[serde(default)]
    pub steps: Vec<Step>,
}

/// A plan of an OperatorVersion (`deploy`, `update`, `cleanup`, …), keyed by name in `spec.plans`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Whether the phases run `serial` or `parallel`; empty behaves like `parallel`.
    #[serde(default)]
    pub strategy: Ordering,
    /// The plan's phases, in declaration order.
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
    /// `apiVersion` of the watched object, e.g. `apps/v1`; may be a template.
    #[serde(default)]
    pub api_version: String,
    /// `kind` of the watched object, e.g. `StatefulSet`; may be a template.
    #[serde(default)]
    pub kind: String,
    /// Name of the watched object in the Instance's namespace; may be a template.
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
    /// The `serial` strategy: one child after another, each waiting for the previous to complete.
    pub fn serial() -> Ordering {
        Ordering("serial".into())
    }
    /// The `parallel` strategy: all children at once.
    pub fn parallel() -> Ordering {
        Ordering("parallel".into())
    }
    /// Whether this is `serial`; any other string, empty included, means `parallel`.
    pub fn is_serial(&self) -> bool {
        self.0 == "serial"
    }
}

/// `{file|envFile, kind, key}` of a Pipe task.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PipeSpec {
    /// Path in the generator Pod of a file copied whole into the artifact, under its base name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub file: String,
    /// Path in the generator Pod of an env file (`KEY=value` lines) whose entries become the
    /// artifact's keys; used when `file` is empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env_file: String,
    /// Kind of the artifact to create: `Secret` or `ConfigMap`.
    #[serde(default)]
    pub kind: String,
    /// Name templates use for the artifact (`{{ .Pipes.<key> }}` is its generated name).
    #[serde(default)]
    pub key: String,
}

/// KUDO flattens every task kind's spec into one struct; any task may carry any field.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpec {
    // Apply / Delete / Toggle
    /// Template files (below `templates/`) the task applies, deletes or toggles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    // Toggle
    /// Name of the boolean parameter deciding whether a Toggle task applies (`true`) or deletes
    /// (`false`) its resources.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parameter: String,
    // Dummy
    /// Dummy: make the task fail.
    #[serde(default, skip_serializing_if = "is_false")]
    pub want_err: bool,
    /// Dummy: with `wantErr`, fail fatally (FATAL_ERROR) instead of with a retried error.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fatal: bool,
    /// Dummy: without `wantErr`, report the task done; otherwise it stays in progress.
    #[serde(default, skip_serializing_if = "is_false")]
    pub done: bool,
    // Pipe
    /// Pipe: template file (below `templates/`) of the generator Pod whose files become artifacts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod: String,
    /// Pipe: the files to copy out of the generator Pod and the Secret/ConfigMap each becomes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipe: Vec<PipeSpec>,
    // KudoOperator
    /// KudoOperator: the child package; the operator name once the CLI resolved it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub package: String,
    /// KudoOperator: name of the child Instance; `<parent instance>-<package>` when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance_name: String,
    /// KudoOperator: `appVersion` of the child OperatorVersion, if it has one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app_version: String,
    /// KudoOperator: `operatorVersion` of the child OperatorVersion.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operator_version: String,
    /// KudoOperator: template file rendered to the YAML parameter values of the child Instance.
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

/// A task of an OperatorVersion (`spec.tasks`): a named unit of work that steps refer to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// The task's name, which steps list in `tasks`.
    pub name: String,
    /// What the task does: Apply, Delete, Toggle, Pipe, Dummy or KudoOperator.
    pub kind: TaskKind,
    /// The kind's settings; KUDO flattens all kinds into one struct.
    #[serde(default)]
    pub spec: TaskSpec,
}

/// An OperatorVersion parameter: every value is a string in the API (see kudo-behaviour.md §2.5).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Parameter {
    /// `displayName`: a human-readable name for UIs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// The parameter's name, as templates use it (`{{ .Params.NAME }}`).
    pub name: String,
    /// What the parameter is for, shown to users.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Whether an install must supply a value; see [`Parameter::is_required`] for an absent field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// The value used when the Instance gives none; `None` when there is no default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// The plan a change of this parameter runs; empty means `update`, or `deploy` without one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trigger: String,
    /// `value-type`: `string`, `integer`, `number`, `boolean`, `array` or `map`; empty is `string`.
    #[serde(rename = "value-type", default, skip_serializing_if = "String::is_empty")]
    pub value_type: String,
    /// Whether the value may not change once the Instance is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutable: Option<bool>,
    /// `enum`: the only values the parameter may take, when set.
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
    /// The smallest allowed value of a numeric parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<serde_json::Number>,
    /// The largest allowed value of a numeric parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<serde_json::Number>,
    /// 2020-12 form: the value must be greater than this number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_minimum: Option<serde_json::Number>,
    /// 2020-12 form: the value must be less than this number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_maximum: Option<serde_json::Number>,
    /// The shortest allowed length of a `string` value, in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    /// The longest allowed length of a `string` value, in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// An ECMA-262-style regular expression the (string) value must match somewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// `quantity`, `duration`, `cron`, `dns1123-label` or one of kube's formats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The fewest elements an `array` value may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// The most elements an `array` value may have.
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
    /// The CEL expression that must hold, e.g. `self.REPLICAS % 2 == 1`.
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
    /// Whether the value may not change after install (absent `immutable` means mutable).
    pub fn is_immutable(&self) -> bool {
        self.immutable.unwrap_or(false)
    }
    /// Whether the value is a secret, supplied through `spec.parameterSources` (kudo-rs extension).
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

/// `spec` of an OperatorVersion: one version of a package, with everything its Instances run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorVersionSpec {
    /// The Operator this is a version of (by name, in the same namespace).
    #[serde(default)]
    pub operator: ObjectReference,
    /// `version`: the operator's own version, e.g. `0.3.0`.
    #[serde(default)]
    pub version: String,
    /// `appVersion`: the version of the software the operator runs, e.g. `3.6.1`; may be empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app_version: String,
    /// Template file key (path below `templates/`) → content.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub templates: BTreeMap<String, String>,
    /// The tasks that the plans' steps refer to by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<Task>,
    /// The parameters an Instance may set, with their defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<Parameter>,
    /// The plans, keyed by name (`deploy`, `update`, `cleanup`, or any other).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plans: BTreeMap<String, Plan>,
    /// `connectionString`: KUDO's templated string to connect to an Instance; kept for round-trips.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub connection_string: String,
    /// `upgradableFrom`: OperatorVersions an Instance may upgrade from to this one.
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
    /// API group of the operator's CRD, e.g. `databases.example.com`.
    pub group: String,
    /// Kind of the operator's typed objects, e.g. `Database`.
    pub kind: String,
    /// `v1` when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Lower-case kind + `s` when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plural: String,
    /// `shortNames` of the CRD, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
}

impl TypedApi {
    /// The CRD's version: `version`, or `v1` when empty.
    pub fn version(&self) -> &str {
        if self.version.is_empty() {
            "v1"
        } else {
            &self.version
        }
    }
    /// The CRD's plural resource name: `plural`, or lower-case kind + `s` when empty.
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
    /// `<group>/<version>`, the `apiVersion` of the typed objects.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version())
    }
}

/// A `kudo.dev/v1beta1` OperatorVersion: one version of a package, stored in the cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorVersion {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// Always `OperatorVersion`.
    pub kind: String,
    /// The OperatorVersion's metadata; KUDO names it `<operator>-<appVersion>-<version>`.
    pub metadata: ObjectMeta,
    /// The templates, tasks, parameters and plans of this version.
    pub spec: OperatorVersionSpec,
    /// Whatever the cluster stores in `status`; KUDO writes none, so it is kept opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

// ---------------------------------------------------------------- Instance

/// `NEVER_RUN`, `PENDING`, `IN_PROGRESS`, `COMPLETE`, `ERROR`, `FATAL_ERROR` (plus our `CANCELLED`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExecutionStatus {
    /// The plan (phase, step) has not run on this Instance yet.
    #[default]
    #[serde(rename = "NEVER_RUN")]
    NeverRun,
    /// Scheduled but not started yet, e.g. a step waiting behind a serial predecessor.
    #[serde(rename = "PENDING")]
    Pending,
    /// The run is executing.
    #[serde(rename = "IN_PROGRESS")]
    InProgress,
    /// The run finished successfully.
    #[serde(rename = "COMPLETE")]
    Complete,
    /// A transient error; the manager retries.
    #[serde(rename = "ERROR")]
    Error,
    /// A permanent error: the run stops and is not retried.
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
    /// COMPLETE only: the run succeeded.
    pub fn is_finished(self) -> bool {
        self == Self::Complete
    }
    /// PENDING, IN_PROGRESS or ERROR.
    pub fn is_running(self) -> bool {
        matches!(self, Self::Pending | Self::InProgress | Self::Error)
    }
    /// The wire spelling, e.g. `IN_PROGRESS`.
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

/// `spec.planExecution` of an Instance: the plan run the Instance asks for (KUDO's webhook sets
/// it on a create or update; `kubectl kudo plan trigger` sets it by hand).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanExecution {
    /// The plan to run; empty when no run is requested.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plan_name: String,
    /// UID of this run; a new one means a new run, even of the same plan.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The running run's status as the manager mirrors it (cleared once the run ends); a user
    /// sets `CANCELLED` to cancel the run (kudo-rs extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ExecutionStatus>,
}

/// `spec` of an Instance: which OperatorVersion it runs, with which parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSpec {
    /// The OperatorVersion the Instance runs; see [`InstanceSpec::operator_version_namespace`].
    #[serde(default)]
    pub operator_version: ObjectReference,
    /// Parameter values by name, all strings; unset parameters take the OperatorVersion's default.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// kudo-rs extension: parameter values read from elsewhere at render time (sensitive
    /// parameters), keyed by parameter name. The shape of core/v1 `EnvVarSource`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameter_sources: BTreeMap<String, ParameterSource>,
    /// The plan run requested for the Instance.
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
    /// Read the value from a key of a Secret in the Instance's namespace.
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
    /// Name of the Secret.
    pub name: String,
    /// Key within the Secret's `data`.
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

/// Status of one step of a phase in a plan run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepStatus {
    /// The step's name, as the plan declares it.
    pub name: String,
    /// Where the step is.
    #[serde(default)]
    pub status: ExecutionStatus,
    /// Why the step failed or what it reports; empty while it runs normally.
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

/// Status of one phase of a plan run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseStatus {
    /// The phase's name, as the plan declares it.
    pub name: String,
    /// Where the phase is.
    #[serde(default)]
    pub status: ExecutionStatus,
    /// Why the phase failed, if it did.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Status of each step of the phase, in declaration order.
    #[serde(default)]
    pub steps: Vec<StepStatus>,
}

/// Status of one plan in `status.planStatus` of an Instance: its last (or current) run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanStatus {
    /// The plan's name.
    pub name: String,
    /// Where the plan's last run is.
    #[serde(default)]
    pub status: ExecutionStatus,
    /// Why the run failed, if it did.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// RFC 3339 timestamp of the last change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated_timestamp: Option<String>,
    /// UID of the run this status is about (the `planExecution.uid` that started it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Status of each phase, in declaration order.
    #[serde(default)]
    pub phases: Vec<PhaseStatus>,
}

/// `metav1.Condition`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's `type`, e.g. `Ready` or `Drifted`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The `metadata.generation` the condition was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When `status` last changed, RFC 3339.
    #[serde(default)]
    pub last_transition_time: String,
    /// A CamelCase machine-readable reason for the last transition.
    #[serde(default)]
    pub reason: String,
    /// A human-readable description of the last transition.
    #[serde(default)]
    pub message: String,
}

/// `status` of an Instance, written by the manager.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    /// kudo-rs extension: the `metadata.generation` whose spec the manager admitted and acted on
    /// when it wrote this status (Kubernetes' convention, read by kstatus, Flux, Helm and kpt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `planStatus`: the last run of each plan of the OperatorVersion, keyed by plan name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plan_status: BTreeMap<String, PlanStatus>,
    /// Standard conditions of the Instance.
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

/// A `kudo.dev/v1beta1` Instance: one installation of an OperatorVersion, run by the manager.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// Always `Instance`.
    pub kind: String,
    /// The Instance's metadata.
    pub metadata: ObjectMeta,
    /// The OperatorVersion, parameters and requested plan run.
    pub spec: InstanceSpec,
    /// The plan statuses and conditions the manager writes; `None` on a new Instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<InstanceStatus>,
}

impl Instance {
    /// `metadata.uid` (empty before the server assigned one).
    pub fn uid(&self) -> &str {
        self.metadata.uid()
    }
}

/// The CustomResourceDefinitions (apiextensions v1) the manager serves, in install order: the
/// three `kudo.dev/v1beta1` ones (operators, operatorversions, instances), schema-compatible with
/// KUDO v0.19's so existing KUDO YAML applies unchanged, printer columns added for `kubectl get`;
/// then kudo-rs's own kinds (`kudo-rs.dev`): rollouts ([`rollout`]) and operatorsources
/// ([`source`]).
pub fn crd_manifests() -> [&'static str; 5] {
    [
        include_str!("../crds/operators.yaml"),
        include_str!("../crds/operatorversions.yaml"),
        include_str!("../crds/instances.yaml"),
        include_str!("../crds/rollouts.yaml"),
        include_str!("../crds/operatorsources.yaml"),
    ]
}

/// Finalizer KUDO puts on Instances whose OperatorVersion has a `cleanup` plan.
pub const CLEANUP_FINALIZER: &str = "kudo.dev.instance.cleanup";

/// Well-known labels and annotations.
pub mod labels {
    /// Label `heritage: kudo` on everything KUDO applies.
    pub const HERITAGE: &str = "heritage";
    /// Label naming the Operator whose plan applied an object.
    pub const OPERATOR: &str = "kudo.dev/operator";
    /// Label naming the Instance that applied an object.
    pub const INSTANCE: &str = "kudo.dev/instance";
    /// Annotation naming the plan that last applied an object.
    pub const PLAN: &str = "kudo.dev/plan";
    /// Annotation naming the phase that last applied an object.
    pub const PHASE: &str = "kudo.dev/phase";
    /// Annotation naming the step that last applied an object.
    pub const STEP: &str = "kudo.dev/step";
    /// Annotation holding the `planExecution.uid` of the run that last applied an object.
    pub const PLAN_UID: &str = "kudo.dev/last-plan-execution-uid";
    /// Annotation on applied pod templates naming the OperatorVersion that rendered them.
    pub const OPERATOR_VERSION: &str = "kudo.dev/operator-version";
    /// Annotation on a pod template: hash of the ConfigMaps and Secrets its workload mounts, so a
    /// change to them rolls the pods.
    pub const DEPENDENCIES_HASH: &str = "kudo.dev/dependencies-hash";
    /// Annotation on a ConfigMap or Secret that leaves it out of the dependencies hash.
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
    fn crd_manifests_name_the_kinds() {
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
                "rollouts.kudo-rs.dev",
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
