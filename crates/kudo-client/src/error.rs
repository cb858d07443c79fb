//! The one error type of the crate. Each variant is one way an operation fails; its `Display` is
//! the message the CLI prints after `Error: ` (KUDO's wording where KUDO had one, pinned by the
//! CLI's tests), and a kept cause is its `source`, which the CLI prints after a colon.

use kudo_api::ExecutionStatus;

/// The result of this crate's operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a cluster operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--kubeconfig` could not be read.
    #[error("cannot read kubeconfig {path}")]
    ReadKubeconfig {
        /// The file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// `--kubeconfig` was read but does not make a client configuration.
    #[error("invalid kubeconfig {path}")]
    InvalidKubeconfig {
        /// The file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig and no in-cluster configuration.
    #[error("no cluster configured: pass --kubeconfig, set KUBECONFIG, or start one with `kubectl kudo dev`")]
    NoCluster(#[source] kube::config::InferConfigError),
    /// The configuration does not make a client (e.g. bad TLS data).
    #[error("cannot build a Kubernetes client")]
    BuildClient(#[source] kube::Error),
    /// A list of a KUDO kind was not found: the CRDs are not installed.
    #[error("the server does not serve {plural}.{group}: is KUDO installed? Run `kubectl kudo init`", group = kudo_api::GROUP)]
    NotServed {
        /// The kind's plural.
        plural: &'static str,
    },
    /// The API server refused a request on a KUDO object.
    #[error("{kind} {name}: {message}")]
    Api {
        /// The kind.
        kind: &'static str,
        /// The object's name.
        name: String,
        /// The server's message.
        message: String,
    },
    /// A request on a KUDO object did not get an answer.
    #[error("cannot reach the cluster: {0}")]
    Unreachable(kube::Error),
    /// A request on another object failed (as kube reports it).
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// An object does not convert to or from JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A KUDO object read from the cluster does not match the `kudo-api` types.
    #[error("object {name} does not match the kudo.dev/v1beta1 schema")]
    Schema {
        /// The object's name.
        name: String,
        /// The mismatch.
        source: serde_json::Error,
    },
    /// The Instance does not exist.
    #[error("Instance {namespace}/{name} does not exist")]
    InstanceNotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The OperatorVersion an Instance names does not exist.
    #[error("OperatorVersion {namespace}/{name} from instance {instance} does not exist")]
    OperatorVersionNotFound {
        /// The OperatorVersion's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The Instance, `NAMESPACE/NAME`.
        instance: String,
    },
    /// The package does not convert to KUDO objects.
    #[error(transparent)]
    Package(#[from] kudo_package::PackageError),
    /// A dependency's package does not convert to KUDO objects.
    #[error("dependency {name}")]
    Dependency {
        /// The dependency's OperatorVersion name.
        name: String,
        /// Why.
        source: kudo_package::PackageError,
    },
    /// Required parameters have no value (install).
    #[error("missing required parameters during installation: {}", .0.join(","))]
    MissingRequired(Vec<String>),
    /// Parameter values the OperatorVersion refuses, one problem per line.
    #[error("{}", .0.join("\n"))]
    InvalidParameters(Vec<String>),
    /// Schedules (`schedule:` of a plan) the manager could not use, one per line.
    #[error("{}", .0.join("\n"))]
    InvalidSchedules(Vec<String>),
    /// A refusal whose message had sensitive values replaced by `(redacted)`.
    #[error("{0}")]
    Refused(String),
    /// Autopilot rules (plan field `when`) the manager could not evaluate.
    #[error("operator version {operator_version} has invalid autopilot rules:\n{}", errors.join("\n"))]
    InvalidAutopilotRules {
        /// The OperatorVersion.
        operator_version: String,
        /// One line per problem.
        errors: Vec<String>,
    },
    /// KUDO's admission rules deny the change.
    #[error("updating instance {instance}: {denied}")]
    Denied {
        /// The Instance.
        instance: String,
        /// KUDO's message (not a `source`: it is part of this message already).
        denied: kudo_engine::triggers::ChangeDenied,
    },
    /// `install` of an Instance name that is taken.
    #[error(
        "cannot install instance '{name}' of operator '{operator}' because an instance of that name already exists in namespace {namespace}"
    )]
    InstanceExists {
        /// The Instance name.
        name: String,
        /// `OPERATOR-VERSION`.
        operator: String,
        /// The namespace.
        namespace: String,
    },
    /// `install --in-cluster` found no matching OperatorVersion.
    #[error(
        "no OperatorVersion of {wanted} is installed in namespace {namespace}; install the package without --in-cluster first (or see `kubectl kudo get operatorversions`)"
    )]
    NoOperatorVersion {
        /// What was looked for (`operator NAME[ operatorVersion V][ appVersion A]`).
        wanted: String,
        /// The namespace.
        namespace: String,
    },
    /// `--create-namespace` of a namespace that exists.
    #[error("namespace {0} already exists; drop --create-namespace to install into it")]
    NamespaceExists(String),
    /// The rendered `namespaceManifest` is not a Namespace.
    #[error("namespaceManifest is not a Namespace")]
    NotANamespace(#[source] serde_json::Error),
    /// The API server refused the namespace.
    #[error("cannot create the namespace")]
    CreateNamespace(#[source] kube::Error),
    /// Manifests for Git were asked for with the value of a sensitive parameter, which they
    /// would carry in clear.
    #[error(
        "sensitive parameter(s) {} given a value: manifests never carry sensitive values; give each as \
         --parameter-secret NAME=SECRET/KEY of a Secret you provide",
        names.join(", ")
    )]
    SensitiveValueInManifests {
        /// The parameters.
        names: Vec<String>,
    },
    /// `namespaceManifest` names a file the package does not have.
    #[error("namespaceManifest {file} is not in templates/")]
    ManifestMissing {
        /// The file named.
        file: String,
    },
    /// The `namespaceManifest` template fails.
    #[error("{0}")]
    ManifestTemplate(String),
    /// The rendered `namespaceManifest` is not YAML.
    #[error("rendered {file} is not valid YAML: {message}")]
    ManifestYaml {
        /// The file.
        file: String,
        /// Why, in our words (the reader's own mention its options).
        message: String,
    },
    /// A malformed `--parameter-secret`.
    #[error("invalid --parameter-secret {0:?}: expected NAME=SECRET/KEY")]
    InvalidParameterSecret(String),
    /// `--parameter-secret` of an undeclared parameter.
    #[error("--parameter-secret {name}: operator version {operator_version} has no parameter {name:?}")]
    UnknownParameterSecret {
        /// The parameter.
        name: String,
        /// The OperatorVersion.
        operator_version: String,
    },
    /// A parameter given as a value and as `--parameter-secret`.
    #[error("parameter {name:?} is given both as a value and with --parameter-secret")]
    ParameterGivenTwice {
        /// The parameter.
        name: String,
    },
    /// The parameters Secret of a new Instance exists already.
    #[error("cannot store the sensitive parameters: Secret {secret} already exists")]
    SecretExists {
        /// `NAMESPACE/NAME`.
        secret: String,
    },
    /// The parameters Secret could not be written (the server's reason, never a value).
    #[error("cannot store the sensitive parameters in Secret {secret}: {reason}")]
    StoreSecret {
        /// `NAMESPACE/NAME`.
        secret: String,
        /// `Reason (code)`.
        reason: String,
    },
    /// The parameters Secret could not be read.
    #[error("reading Secret {secret}: {reason}")]
    ReadSecret {
        /// `NAMESPACE/NAME`.
        secret: String,
        /// `Reason (code)`.
        reason: String,
    },
    /// The Instance could not be made the owner of its parameters Secret.
    #[error("setting the owner of Secret {secret}: {reason}")]
    OwnSecret {
        /// `NAMESPACE/NAME`.
        secret: String,
        /// The API error.
        reason: String,
    },
    /// `update -p` of a parameter whose value comes from a Secret.
    #[error(
        "parameter {name:?} takes its value from Secret key {from} (spec.parameterSources); use --parameter-secret to change it"
    )]
    ParameterFromSecret {
        /// The parameter.
        name: String,
        /// `SECRET/KEY`.
        from: String,
    },
    /// The typed API's CRD name belongs to something else.
    #[error(
        "CustomResourceDefinition {name} exists and belongs to {owner}: kudo-rs does not overwrite it (choose another api.group or api.kind in operator.yaml)"
    )]
    ForeignCrd {
        /// The CRD.
        name: String,
        /// Its owner.
        owner: String,
    },
    /// The new typed API schema would make existing typed objects invalid.
    #[error(
        "the typed API of {operator_version} would make existing objects invalid:\n  {}\nchange them first, or pass --allow-breaking-changes",
        objects.join("\n  ")
    )]
    BreakingTypedApi {
        /// The OperatorVersion.
        operator_version: String,
        /// `KIND NS/NAME: problem`, one per line.
        objects: Vec<String>,
    },
    /// The typed API's CRD was not served in time.
    #[error("CustomResourceDefinition {name} was not Established within 30 s")]
    CrdNotEstablished {
        /// The CRD.
        name: String,
    },
    /// Parameter values that do not fit the typed object's spec.
    #[error(transparent)]
    TypedSpec(#[from] kudo_package::typed_api::SpecFieldError),
    /// `upgrade` to another operator's package.
    #[error("instance {instance} runs operator {current}, not {new}")]
    OtherOperator {
        /// The Instance.
        instance: String,
        /// Its operator.
        current: String,
        /// The package's operator.
        new: String,
    },
    /// `upgrade` to an older version.
    #[error("upgraded version {new} is older than the current version {current}")]
    OlderVersion {
        /// The package's OperatorVersion.
        new: String,
        /// The Instance's.
        current: String,
    },
    /// `upgrade` with sensitive values.
    #[error(
        "upgrade does not take sensitive parameters or --parameter-secret yet: upgrade first, then use update --parameter-secret"
    )]
    SensitiveUpgrade,
    /// `upgrade` to the version the Instance runs, whose plan did not fail.
    #[error("instance {instance} already runs {current}; nothing to upgrade")]
    NothingToUpgrade {
        /// The Instance.
        instance: String,
        /// Its OperatorVersion.
        current: String,
    },
    /// `plan trigger` of a plan the OperatorVersion does not have.
    #[error("plan {plan} does not exist in operator version {operator_version} (plans: {})", known.join(", "))]
    UnknownPlan {
        /// The plan.
        plan: String,
        /// The OperatorVersion.
        operator_version: String,
        /// Its plans.
        known: Vec<String>,
    },
    /// `plan retry` refused by KUDO's rules.
    #[error(transparent)]
    Retry(#[from] kudo_engine::retry::RetryRefusal),
    /// `plan retry` of a plan the OperatorVersion no longer has.
    #[error("plan {plan} no longer exists in operator version {operator_version}: it cannot be retried")]
    RetriedPlanGone {
        /// The plan.
        plan: String,
        /// The OperatorVersion.
        operator_version: String,
    },
    /// A waited-for plan run did not finish in time.
    #[error(
        "timed out after {seconds}s waiting for the {plan} plan of instance {instance} to finish (it is {status})"
    )]
    PlanTimeout {
        /// The wait.
        seconds: u64,
        /// The plan.
        plan: String,
        /// The Instance.
        instance: String,
        /// Its status then.
        status: ExecutionStatus,
    },
    /// No plan run started for the change in time.
    #[error("timed out after {seconds}s waiting for instance {instance} to start a plan for the change")]
    NoPlanStarted {
        /// The wait.
        seconds: u64,
        /// The Instance.
        instance: String,
    },
    /// `plan status --wait` timed out.
    #[error("timed out after {seconds}s waiting for the plan of {instance} to finish")]
    SettleTimeout {
        /// The wait.
        seconds: u64,
        /// The Instance.
        instance: String,
    },
    /// `uninstall --wait` timed out.
    #[error("timed out after {seconds}s waiting for instance {instance} to be deleted")]
    DeleteTimeout {
        /// The wait.
        seconds: u64,
        /// The Instance.
        instance: String,
    },
    /// `plan cancel` on an Instance with no plan scheduled or running.
    #[error("no plan is running on instance {namespace}/{instance}")]
    NoPlanRunning {
        /// The namespace.
        namespace: String,
        /// The Instance.
        instance: String,
    },
    /// `rollback` refused before anything was written.
    #[error("rolling back instance {instance}: {message}")]
    RollbackRefused {
        /// The Instance.
        instance: String,
        /// Why.
        message: String,
    },
    /// `rollback` while a plan runs that KUDO's rules do not let the rollback through.
    #[error(
        "rolling back instance {instance}: plan '{running}' is scheduled (or running) and the rollback would run plan '{plan}'; KUDO does not override a running plan: use --force to cancel '{running}' first"
    )]
    RollbackBlocked {
        /// The Instance.
        instance: String,
        /// The running plan.
        running: String,
        /// The rollback's plan.
        plan: String,
    },
    /// A cancelled plan was not stopped in time.
    #[error(
        "plan {plan} of instance {instance} was not cancelled within {seconds}s; is the manager running?"
    )]
    NotCancelled {
        /// The plan.
        plan: String,
        /// The Instance.
        instance: String,
        /// The wait.
        seconds: u64,
    },
    /// A Rollout that cannot be used.
    #[error("rollout {name}: {source}")]
    InvalidRollout {
        /// The Rollout.
        name: String,
        /// Why.
        source: kudo_engine::rollout::SpecError,
    },
    /// The Rollout does not exist.
    #[error("Rollout {0} does not exist")]
    RolloutNotFound(String),
    /// An Instance changed since the rollout read it: its change is judged again.
    #[error("instance {0} changed since it was read")]
    Changed(String),
    /// A waited-for rollout did not settle in time.
    #[error("timed out after {seconds}s waiting for rollout {name} (it is {phase})")]
    RolloutTimeout {
        /// The wait.
        seconds: u64,
        /// The Rollout.
        name: String,
        /// Its phase then.
        phase: String,
    },
    /// A preview cannot resolve a parameter source of the proposed spec (`reason` names the
    /// parameter and the Secret, never a value).
    #[error("cannot preview instance {instance}: {reason}")]
    PreviewSources {
        /// The Instance.
        instance: String,
        /// Why.
        reason: String,
    },
    /// A previewed plan does not render (the message with sensitive values redacted).
    #[error("{0}")]
    PreviewRender(String),
    /// A live ConfigMap/Secret of the dependencies hash could not be read for a preview.
    #[error("reading {kind} {namespace}/{name}")]
    ReadDependency {
        /// `ConfigMap` or `Secret`.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API error (boxed: it is large, and rare).
        source: Box<kube::Error>,
    },
    /// An object of an API version the cluster no longer serves cannot be translated.
    #[error("{task}: {message}")]
    Untranslatable {
        /// `plan.phase.step.task`.
        task: String,
        /// Why.
        message: String,
    },
    /// A built-in manifest does not parse (a bug of this build).
    #[error("built-in CRD manifest")]
    BuiltinManifest(#[source] Box<serde_saphyr::Error>),
    /// `init` of a complete installation without `--upgrade`.
    #[error("KUDO is already installed in namespace {namespace}. Did you mean to use --upgrade?")]
    AlreadyInitialized {
        /// The manager's namespace.
        namespace: String,
    },
    /// `init` could not write one of its manifests.
    #[error("cannot {verb} {kind} {name}")]
    InitWrite {
        /// `install`, or `replace` (a binding whose role changes).
        verb: &'static str,
        /// The manifest's kind.
        kind: String,
        /// Its name.
        name: String,
        /// The API error (boxed: it is large, and rare).
        source: Box<kube::Error>,
    },
    /// `init --uninstall` could not delete one of its manifests.
    #[error("cannot delete {name}")]
    InitDelete {
        /// The object's name.
        name: String,
        /// The API error.
        source: Box<kube::Error>,
    },
    /// `init --wait` timed out.
    #[error("timed out after {seconds}s waiting for the KUDO manager to become available")]
    ManagerNotReady {
        /// The wait.
        seconds: u64,
    },
    /// `kubectl kudo dev` could not install one of its objects.
    #[error("cannot install {kind} {name} into the dev cluster")]
    DevInstall {
        /// The object's kind.
        kind: String,
        /// Its name.
        name: String,
        /// The API error.
        source: Box<kube::Error>,
    },
    /// `diagnostics collect` could not read what it must (the Instance, its OperatorVersion or
    /// its Operator).
    #[error("{0}")]
    Collect(String),
    /// A directory could not be created.
    #[error("cannot create {path}")]
    CreateDir {
        /// The directory.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {path}")]
    WriteFile {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// An object does not convert to YAML.
    #[error("cannot serialise to YAML")]
    ToYaml(#[source] serde_saphyr::ser::Error),
    /// The caller's [`Progress`](crate::Progress) (or observer) failed to report.
    #[error(transparent)]
    Report(#[from] std::io::Error),
}
