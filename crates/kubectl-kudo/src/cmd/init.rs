//! `init`: installs (or prints, or removes) KUDO's server side: the three CRDs, the `kudo-system`
//! namespace, the manager's service account bound to cluster-admin (with `--least-privilege`: to
//! the ClusterRole `kudo-manager` of [`MANAGER_RULES`]), the ClusterRoles that let the built-in
//! `admin`/`edit`/`view` roles reach `kudo.dev` objects, and the manager Deployment.
//! No admission webhook and no cert-manager: the manager decides which plan runs itself.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kudo_kube::known_resource;
use serde_json::{Value, json};

use super::cluster::{ClusterOpts, connect};

/// Field manager for everything `init` applies.
const FIELD_MANAGER: &str = "kubectl-kudo-init";

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum InitOutput {
    Yaml,
    Json,
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum PullPolicy {
    #[value(name = "Always")]
    Always,
    #[value(name = "IfNotPresent")]
    IfNotPresent,
    #[value(name = "Never")]
    Never,
}

impl PullPolicy {
    fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo init --wait\n  kubectl kudo init --dry-run -o yaml\n  kubectl kudo init --dry-run -o yaml | kubectl delete -f -\n  kubectl kudo init --uninstall"
)]
pub struct InitArgs {
    /// Only set up the local $KUDO_HOME, install nothing in the cluster.
    #[arg(short = 'c', long, conflicts_with_all = ["crd_only", "upgrade", "verify", "uninstall", "wait"])]
    pub client_only: bool,
    /// Print the manifests instead of installing them (needs -o).
    #[arg(long, requires = "output")]
    pub dry_run: bool,
    /// Output format for --dry-run.
    #[arg(short = 'o', long)]
    pub output: Option<InitOutput>,
    /// Install only the CRDs.
    #[arg(long, conflicts_with_all = ["wait", "upgrade"])]
    pub crd_only: bool,
    /// Re-apply an existing installation with this version's manifests.
    #[arg(long, conflicts_with = "verify")]
    pub upgrade: bool,
    /// Check that an installation is complete, change nothing.
    #[arg(long, conflicts_with = "dry_run")]
    pub verify: bool,
    /// Remove everything `init` installs (Instances are deleted with their CRDs).
    #[arg(long, conflicts_with_all = ["dry_run", "upgrade", "verify", "crd_only"])]
    pub uninstall: bool,
    /// Wait until the manager is ready.
    #[arg(short = 'w', long)]
    pub wait: bool,
    /// How long --wait waits, in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub wait_timeout: u64,
    /// Manager image (default: the image of this version).
    #[arg(short = 'i', long, value_name = "IMAGE", conflicts_with = "version")]
    pub kudo_image: Option<String>,
    /// Version of the manager to install: the tag of the default image (`kudo-rs/manager:v<VERSION>`).
    #[arg(long, value_name = "VERSION")]
    pub version: Option<String>,
    /// Accepted for KUDO v0.19 scripts: KUDO needed a certificate for its admission webhook;
    /// kudo-rs has no webhook, so there is nothing to sign.
    #[arg(long)]
    pub unsafe_self_signed_webhook_ca: bool,
    /// Accepted for older KUDO scripts (`--webhook InstanceValidation`): kudo-rs has no webhook,
    /// the manager admits Instance changes itself.
    #[arg(long, value_name = "WEBHOOK")]
    pub webhook: Option<String>,
    /// Image pull policy of the manager (KUDO's default: Always).
    #[arg(long, value_enum, default_value = "Always")]
    pub kudo_image_pull_policy: PullPolicy,
    /// Use this existing service account (must be bound to cluster-admin) instead of creating one.
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,
    /// Manager replicas: one leads (holds the Lease and reconciles), the others stand by and take
    /// over within the lease duration when its pod goes. With --shards above 1 they all act,
    /// each on its share of the shards.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(i32).range(1..))]
    pub replicas: i32,
    /// Split the Instances into N shards (the manager's --shards): the replicas share them, each
    /// reconciling only its shards' Instances; a replica's shards move to the others within the
    /// lease duration when it goes. 1 keeps one acting replica.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: u32,
    /// Bind the manager to the ClusterRole `kudo-manager` (no wildcards: kudo.dev objects, Events,
    /// its Lease, impersonating ServiceAccounts, reading what it watches) instead of cluster-admin,
    /// and start it with --default-service-account: every Instance is then applied as a
    /// ServiceAccount of its own namespace, never as the manager.
    #[arg(long)]
    pub least_privilege: bool,
    /// With --least-privilege: the ServiceAccount, in each Instance's namespace, that Instances
    /// without spec.serviceAccountName are applied as (create it there and grant it what the
    /// Instance's package needs, e.g. a RoleBinding to `admin`).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_INSTANCE_ACCOUNT,
          requires = "least_privilege", value_parser = parse_account)]
    pub default_service_account: String,
}

/// The account Instances are applied as under `--least-privilege` unless they name one.
pub const DEFAULT_INSTANCE_ACCOUNT: &str = "kudo-instance";

/// `--default-service-account` of `init`: a ServiceAccount name, not empty.
fn parse_account(value: &str) -> std::result::Result<String, String> {
    match super::instance::parse_service_account(value)? {
        name if name.is_empty() => Err("a ServiceAccount name is required".to_string()),
        name => Ok(name),
    }
}

/// The manager's ClusterRole and its binding under `--least-privilege`.
const MANAGER_ROLE: &str = "kudo-manager";
const MANAGER_BINDING: &str = "kudo-manager-rolebinding";
/// The aggregated ClusterRole (and its binding) of the manager's rights on typed APIs.
const TYPED_APIS_ROLE: &str = "kudo-manager-typed-apis";

/// One rule of a ClusterRole: API groups, resources, verbs (never `*`).
pub struct Rule {
    pub api_groups: &'static [&'static str],
    pub resources: &'static [&'static str],
    pub verbs: &'static [&'static str],
}

impl Rule {
    fn to_json(&self) -> Value {
        json!({"apiGroups": self.api_groups, "resources": self.resources, "verbs": self.verbs})
    }
}

const READ: &[&str] = &["get", "list", "watch"];
const READ_WRITE: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete"];

/// The `kudo.dev` objects: the manager watches Instances (its work queue) and OperatorVersions
/// (cluster-wide cache: an Instance may use another namespace's), updates Instances (finalizer,
/// the admitted spec) and creates or deletes the child Instances of `KudoOperator` tasks when an
/// Instance runs as the manager. Operators and OperatorVersions are written only by the CLI
/// today; the rule grants them alike so that a package's dependencies never need cluster-admin.
const RULE_KUDO_OBJECTS: Rule = Rule {
    api_groups: &["kudo.dev"],
    resources: &["instances", "operators", "operatorversions"],
    verbs: READ_WRITE,
};
/// Plan progress is written to the Instance's status subresource.
const RULE_KUDO_STATUS: Rule = Rule {
    api_groups: &["kudo.dev"],
    resources: &["instances/status"],
    verbs: &["get", "update", "patch"],
};
/// Events about Instances and plans: `kudo_controller::events` publishes `events.k8s.io/v1`
/// Events only, creating the first of a series and merge-patching its count.
const RULE_EVENTS: Rule = Rule {
    api_groups: &["events.k8s.io"],
    resources: &["events"],
    verbs: &["create", "patch"],
};
/// Leader election (`kudo_controller::leader`): the lease manager gets, creates and patches the
/// Lease; standbys watch it (a list and watch with a name field selector). Sharded replicas
/// (`--shards`, `kudo_controller::shard`) list their group's Leases, create and update (with a
/// resourceVersion precondition) shard and member Leases, and delete member Leases of replicas
/// long gone and their own on shutdown.
const RULE_LEASES: Rule = Rule {
    api_groups: &["coordination.k8s.io"],
    resources: &["leases"],
    verbs: &["get", "list", "watch", "create", "update", "patch", "delete"],
};
/// Acting as an Instance's ServiceAccount (`spec.serviceAccountName` or the
/// `--default-service-account`): `impersonate`, and `get` to check that the account exists
/// before acting as it (a missing account is a plan error, not a fallback to the manager).
const RULE_SERVICE_ACCOUNTS: Rule = Rule {
    api_groups: &[""],
    resources: &["serviceaccounts"],
    verbs: &["impersonate", "get"],
};
/// The workload caches (`kudo_controller::cache::CHILD_KINDS`, watched with `heritage=kudo`) that
/// health checks and drift detection read, and the lists of health checks while a cache is not
/// synced yet. Not ReplicaSets: nothing of the manager reads them (see `CHILD_KINDS`).
const RULE_READ_WORKLOADS: Rule = Rule {
    api_groups: &["apps"],
    resources: &["deployments", "statefulsets", "daemonsets"],
    verbs: READ,
};
/// Jobs: a `CHILD_KINDS` cache too (a Job's completion is its health).
const RULE_READ_JOBS: Rule = Rule {
    api_groups: &["batch"],
    resources: &["jobs"],
    verbs: READ,
};
/// The core `CHILD_KINDS` caches; Secrets also for the `spec.parameterSources` watch (rotation;
/// the manager drops a Secret's data as it arrives) and, with ConfigMaps, for the
/// `kudo.dev/dependencies-hash` reads.
const RULE_READ_CORE: Rule = Rule {
    api_groups: &[""],
    resources: &[
        "pods",
        "services",
        "configmaps",
        "secrets",
        "persistentvolumeclaims",
    ],
    verbs: READ,
};
/// The revision history (`kudo_controller::revisions`): one ControllerRevision per plan run,
/// listed by label, its outcome merge-patched when the run ends, the oldest deleted beyond
/// `--revision-history-limit`.
const RULE_REVISIONS: Rule = Rule {
    api_groups: &["apps"],
    resources: &["controllerrevisions"],
    verbs: &["list", "create", "patch", "delete"],
};
/// Fleet rollouts (`kudo_controller::rollouts`): the manager watches every Rollout (cluster-scoped)
/// and writes their status; their specs are the users' (`kubectl kudo rollout`).
const RULE_ROLLOUTS: Rule = Rule {
    api_groups: &["kudo-rs.dev"],
    resources: &["rollouts"],
    verbs: READ,
};
const RULE_ROLLOUTS_STATUS: Rule = Rule {
    api_groups: &["kudo-rs.dev"],
    resources: &["rollouts/status"],
    verbs: &["get", "update", "patch"],
};
/// Drift repair is skipped in a namespace being deleted (`kudo_controller::drift`): one get of
/// the Instance's Namespace.
const RULE_READ_NAMESPACES: Rule = Rule {
    api_groups: &[""],
    resources: &["namespaces"],
    verbs: &["get"],
};

/// The rules of the manager's ClusterRole under `--least-privilege`: write access only to
/// `kudo.dev` objects, Events and its Lease, `impersonate` on ServiceAccounts, and read access to
/// what its caches and checks read. Everything an Instance applies is applied as the Instance's
/// ServiceAccount, so none of that is here. Not covered: autopilot rules (plan field `when`) may
/// watch any kind an OperatorVersion names, and the manager watches those itself; a kind not
/// listed here needs its own ClusterRole (get, list, watch) bound to the manager. No wildcard on
/// purpose.
pub const MANAGER_RULES: &[Rule] = &[
    RULE_KUDO_OBJECTS,
    RULE_KUDO_STATUS,
    RULE_EVENTS,
    RULE_LEASES,
    RULE_SERVICE_ACCOUNTS,
    RULE_READ_WORKLOADS,
    RULE_READ_JOBS,
    RULE_READ_CORE,
    RULE_READ_NAMESPACES,
    RULE_REVISIONS,
    RULE_ROLLOUTS,
    RULE_ROLLOUTS_STATUS,
];

/// The rules `kudo-rs:aggregate-to-ROLE` adds to the built-in ROLE (`admin`, `edit`, `view`), so
/// that whoever holds ROLE in a namespace (a user, or an Instance's ServiceAccount applying the
/// child Instances of `KudoOperator` tasks) manages the `kudo.dev` objects there.
fn aggregated_rules(role: &str) -> Vec<Value> {
    let instances = Rule {
        api_groups: &["kudo.dev"],
        resources: &["instances"],
        verbs: &[
            "get",
            "list",
            "watch",
            "create",
            "update",
            "patch",
            "delete",
            "deletecollection",
        ],
    };
    let packages = Rule {
        api_groups: &["kudo.dev"],
        resources: &["operators", "operatorversions"],
        verbs: READ_WRITE,
    };
    let view = Rule {
        api_groups: &["kudo.dev"],
        resources: &["instances", "operators", "operatorversions"],
        verbs: READ,
    };
    match role {
        "view" => vec![view.to_json()],
        _ => vec![instances.to_json(), packages.to_json()],
    }
}

/// The user the manager runs as: the image's `kudo` user (`scripts/manager-image.sh`, Dockerfile).
pub const MANAGER_UID: i64 = 65532;

/// The manifests of `--dry-run -o json` as one `v1` `List`.
fn dry_run_list(ms: &[Manifest]) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {},
        "items": ms.iter().map(|m| &m.object).collect::<Vec<_>>(),
    })
}

/// The manager image this CLI version deploys.
pub fn default_image() -> String {
    format!("kudo-rs/manager:v{}", env!("CARGO_PKG_VERSION"))
}

/// The manager image of another version (`--version 0.2.0` or `v0.2.0`).
pub fn image_for_version(version: &str) -> String {
    format!("kudo-rs/manager:v{}", version.trim_start_matches('v'))
}

/// Says, once per flag, that a flag only KUDO's admission webhook needed changes nothing here.
fn explain_webhook_flags(args: &InitArgs, io: &mut crate::Io<'_>) -> Result<()> {
    if args.unsafe_self_signed_webhook_ca {
        writeln!(
            io.err,
            "--unsafe-self-signed-webhook-ca: nothing to do, kudo-rs has no admission webhook (the manager admits Instance changes itself), so no certificate is needed"
        )?;
    }
    if let Some(w) = &args.webhook {
        writeln!(
            io.err,
            "--webhook {w}: nothing to do, kudo-rs has no admission webhook (the manager admits Instance changes itself)"
        )?;
    }
    Ok(())
}

/// One manifest and how to reach its API.
struct Manifest {
    resource: ApiResource,
    namespaced: bool,
    object: Value,
    /// What `init` reports once this group is installed.
    group: &'static str,
}

/// Every manifest `init` installs, in install order.
fn manifests(args: &InitArgs, namespace: &str) -> Result<Vec<Manifest>> {
    let mut out = Vec::new();
    for text in kudo_api::crd_manifests() {
        let object: Value = serde_saphyr::from_str(text).context("built-in CRD manifest")?;
        out.push(Manifest {
            resource: known_resource("apiextensions.k8s.io", "CustomResourceDefinition"),
            namespaced: false,
            object,
            group: "crds",
        });
    }
    if args.crd_only {
        return Ok(out);
    }
    out.push(Manifest {
        resource: known_resource("", "Namespace"),
        namespaced: false,
        object: json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"app": "kudo-manager", "control-plane": "controller-manager"}}}),
        group: "namespace",
    });
    let sa = args
        .service_account
        .clone()
        .unwrap_or_else(|| "kudo-manager".to_string());
    out.extend(manager_rbac(args, namespace, &sa));
    out.extend(["admin", "edit", "view"].map(aggregated_role));
    out.push(deployment(args, namespace, &sa));
    Ok(out)
}

const REQUIREMENTS: &str = "service accounts and other requirements for controller to run";

fn cluster_role(name: &str, labels: Value, rules: Vec<Value>, group: &'static str) -> Manifest {
    Manifest {
        resource: known_resource("rbac.authorization.k8s.io", "ClusterRole"),
        namespaced: false,
        object: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels}, "rules": rules}),
        group,
    }
}

/// The manager's ServiceAccount and what it may do: cluster-admin (KUDO's way), or with
/// `--least-privilege` the ClusterRole `kudo-manager` of [`MANAGER_RULES`]. An existing account
/// (`--service-account`) is not created; it is bound only under `--least-privilege` (KUDO's way
/// expects it bound to cluster-admin already).
fn manager_rbac(args: &InitArgs, namespace: &str, sa: &str) -> Vec<Manifest> {
    let labels = json!({"app": "kudo-manager"});
    let mut out = Vec::new();
    if args.service_account.is_none() {
        out.push(Manifest {
            resource: known_resource("", "ServiceAccount"),
            namespaced: true,
            object: json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": sa, "namespace": namespace, "labels": labels}}),
            group: REQUIREMENTS,
        });
    }
    let role = if args.least_privilege {
        let rules = MANAGER_RULES.iter().map(Rule::to_json).collect();
        out.push(cluster_role(MANAGER_ROLE, labels.clone(), rules, REQUIREMENTS));
        out.extend(typed_apis_rbac(namespace, sa));
        MANAGER_ROLE
    } else if args.service_account.is_none() {
        "cluster-admin"
    } else {
        return out;
    };
    out.push(manager_binding(MANAGER_BINDING, role, namespace, sa));
    out
}

/// A ClusterRoleBinding of `role` to the manager's ServiceAccount.
fn manager_binding(name: &str, role: &str, namespace: &str, sa: &str) -> Manifest {
    Manifest {
        resource: known_resource("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        namespaced: false,
        object: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {"app": "kudo-manager"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]}),
        group: REQUIREMENTS,
    }
}

/// Under `--least-privilege`, what the manager may do with typed objects (issue 26): the rules of
/// every ClusterRole labelled `kudo-rs.dev/aggregate-to-manager`, which `install` writes per typed
/// API (`kudo_package::typed_api::cluster_roles`), aggregated by the cluster into
/// `kudo-manager-typed-apis` and bound to the manager. Empty until an operator declares one.
fn typed_apis_rbac(namespace: &str, sa: &str) -> Vec<Manifest> {
    let labels = json!({"app": "kudo-manager"});
    let mut role = cluster_role(TYPED_APIS_ROLE, labels, Vec::new(), REQUIREMENTS);
    role.object["aggregationRule"] = json!({"clusterRoleSelectors": [
        {"matchLabels": {kudo_package::typed_api::AGGREGATE_TO_MANAGER: "true"}}]});
    // The cluster's aggregation controller owns the rules: applying `rules: []` again (`init
    // --upgrade`) would empty them until it fills them back.
    if let Some(o) = role.object.as_object_mut() {
        o.remove("rules");
    }
    vec![
        role,
        manager_binding(TYPED_APIS_ROLE, TYPED_APIS_ROLE, namespace, sa),
    ]
}

/// The three `kudo-rs:aggregate-to-ROLE` ClusterRoles (also installed by `kubectl kudo dev`).
pub(crate) fn aggregated_roles() -> Vec<Value> {
    ["admin", "edit", "view"]
        .into_iter()
        .map(|role| aggregated_role(role).object)
        .collect()
}

/// `kudo-rs:aggregate-to-ROLE`, whose rules the cluster adds to the built-in ROLE.
fn aggregated_role(role: &str) -> Manifest {
    let label = format!("rbac.authorization.k8s.io/aggregate-to-{role}");
    cluster_role(
        &format!("kudo-rs:aggregate-to-{role}"),
        json!({"app": "kudo-manager", label: "true"}),
        aggregated_rules(role),
        // Reported with the manager's requirements: KUDO's three `✅ installed` lines stay.
        REQUIREMENTS,
    )
}

/// The manager Deployment; under `--least-privilege` its manager runs with
/// `--default-service-account`.
fn deployment(args: &InitArgs, namespace: &str, sa: &str) -> Manifest {
    let image = match (&args.kudo_image, &args.version) {
        (Some(image), _) => image.clone(),
        (None, Some(v)) => image_for_version(v),
        (None, None) => default_image(),
    };
    // Probes reach the pod IP, so the metrics server listens on all addresses here (its own
    // default is loopback).
    let mut manager_args = vec![
        "manager",
        "--metrics-address",
        "0.0.0.0:8080",
        "--leader-elect=true",
        "--lease-name",
        "kudo-manager",
    ];
    if args.least_privilege {
        manager_args.extend(["--default-service-account", args.default_service_account.as_str()]);
    }
    let shards = args.shards.to_string();
    if args.shards > 1 {
        manager_args.extend(["--shards", shards.as_str()]);
    }
    Manifest {
        resource: known_resource("apps", "Deployment"),
        namespaced: true,
        object: json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "kudo-controller-manager", "namespace": namespace,
            "labels": {"app": "kudo-manager", "control-plane": "controller-manager"}},
        "spec": {
            "replicas": args.replicas,
            "selector": {"matchLabels": {"app": "kudo-manager", "control-plane": "controller-manager"}},
            "template": {
                "metadata": {"labels": {"app": "kudo-manager", "control-plane": "controller-manager"}},
                "spec": {
                    "serviceAccountName": sa,
                    "terminationGracePeriodSeconds": 10,
                    // The manager only talks to the API server and serves HTTP: it needs no
                    // root, no capability and no writable file (it logs to stderr).
                    "securityContext": {"runAsNonRoot": true, "runAsUser": MANAGER_UID,
                                        "runAsGroup": MANAGER_UID,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "manager",
                        "image": image,
                        "imagePullPolicy": args.kudo_image_pull_policy.as_str(),
                        "args": manager_args,
                        "env": [
                            {"name": "KUDO_POD_NAME",
                             "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "KUDO_POD_NAMESPACE",
                             "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
                        ],
                        "ports": [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"},
                                          "initialDelaySeconds": 5, "periodSeconds": 10},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "metrics"},
                                           "periodSeconds": 5},
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                      "limits": {"memory": "256Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": false,
                                            "readOnlyRootFilesystem": true,
                                            "capabilities": {"drop": ["ALL"]}}
                    }]
                }
            }
        }}),
        group: "kudo controller",
    }
}

fn api_for(client: &kube::Client, m: &Manifest) -> Api<DynamicObject> {
    if m.namespaced {
        let ns = m.object["metadata"]["namespace"].as_str().unwrap_or("default");
        Api::namespaced_with(client.clone(), ns, &m.resource)
    } else {
        Api::all_with(client.clone(), &m.resource)
    }
}

fn name_of(m: &Manifest) -> String {
    m.object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `--dry-run`: the manifests as YAML documents or one `v1` List.
fn print_dry_run(args: &InitArgs, namespace: &str, io: &mut crate::Io<'_>) -> Result<()> {
    let ms = manifests(args, namespace)?;
    match args.output.unwrap_or(InitOutput::Yaml) {
        InitOutput::Yaml => {
            for m in &ms {
                writeln!(io.out, "---")?;
                write!(io.out, "{}", serde_saphyr::to_string(&m.object)?)?;
            }
        }
        InitOutput::Json => {
            // A `v1` List, which `kubectl apply -f -` takes (a bare array it rejects).
            writeln!(io.out, "{}", serde_json::to_string_pretty(&dry_run_list(&ms))?)?;
        }
    }
    Ok(())
}

/// The one line `init` prints on stderr when it installs the manager the KUDO way.
pub const LEAST_PRIVILEGE_HINT: &str = "Hint: the manager is bound to cluster-admin and applies every Instance with that identity (KUDO's way); `kubectl kudo init --least-privilege` binds it to a ClusterRole without wildcards and applies each Instance as a ServiceAccount of its namespace";

pub async fn run(opts: &ClusterOpts, args: InitArgs, io: &mut crate::Io<'_>) -> Result<ExitCode> {
    let home = opts.home_dir();
    let namespace = opts
        .namespace
        .clone()
        .unwrap_or_else(|| "kudo-system".to_string());
    explain_webhook_flags(&args, io)?;
    let installs_manager = !(args.client_only || args.crd_only || args.verify || args.uninstall);
    if installs_manager && !args.least_privilege {
        writeln!(io.err, "{LEAST_PRIVILEGE_HINT}")?;
    }
    if args.dry_run {
        print_dry_run(&args, &namespace, io)?;
        return Ok(ExitCode::SUCCESS);
    }
    if !args.verify && !args.uninstall {
        ensure_home(&home)?;
        writeln!(io.out, "$KUDO_HOME has been configured at {}", home.display())?;
    }
    if args.client_only {
        return Ok(ExitCode::SUCCESS);
    }
    let cluster = connect(opts).await?;
    let ms = manifests(&args, &namespace)?;
    if args.uninstall {
        // Also what the other mode installs: `init --uninstall` removes either installation.
        let other = InitArgs {
            least_privilege: !args.least_privilege,
            ..args
        };
        let mut all = manifests(&other, &namespace)?;
        all.retain(|o| {
            !ms.iter()
                .any(|m| m.object["kind"] == o.object["kind"] && name_of(m) == name_of(o))
        });
        all.splice(0..0, ms);
        return uninstall(&cluster.client, &all, io).await;
    }
    let missing = missing_or_different(&cluster.client, &ms).await?;
    if args.verify {
        if missing.is_empty() {
            writeln!(io.out, "✅ KUDO is installed in namespace {namespace}")?;
            return Ok(ExitCode::SUCCESS);
        }
        writeln!(
            io.err,
            "KUDO installation is incomplete; missing: {}",
            missing.join(", ")
        )?;
        return Ok(ExitCode::from(1));
    }
    if missing.is_empty() && !args.upgrade && !args.crd_only {
        bail!("KUDO is already installed in namespace {namespace}. Did you mean to use --upgrade?");
    }
    install(&cluster.client, &ms, io).await?;
    if !args.crd_only && !args.least_privilege && args.service_account.is_none() {
        remove_least_privilege_role(&cluster.client, io).await?;
    }
    if args.wait && !args.crd_only {
        writeln!(io.out, "⌛Waiting for KUDO controller to be ready...")?;
        wait_ready(
            &cluster.client,
            &namespace,
            Duration::from_secs(args.wait_timeout),
        )
        .await?;
        writeln!(io.out, "✅ KUDO is ready!")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn kind_of(m: &Manifest) -> &str {
    m.object["kind"].as_str().unwrap_or_default()
}

/// `--uninstall`: deletes `ms` in reverse order, ignoring what does not exist.
async fn uninstall(client: &kube::Client, ms: &[Manifest], io: &mut crate::Io<'_>) -> Result<ExitCode> {
    for m in ms.iter().rev() {
        let name = name_of(m);
        match api_for(client, m)
            .delete(&name, &DeleteParams::background())
            .await
        {
            Ok(_) => writeln!(io.out, "{} {name} deleted", kind_of(m).to_lowercase())?,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e).with_context(|| format!("cannot delete {name}")),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The manifests the cluster lacks, and the ClusterRoleBindings whose role differs (the other
/// mode's binding: cluster-admin vs `kudo-manager`), as `KIND NAME` texts.
async fn missing_or_different(client: &kube::Client, ms: &[Manifest]) -> Result<Vec<String>> {
    let mut missing = Vec::new();
    for m in ms {
        match api_for(client, m).get_opt(&name_of(m)).await? {
            None => missing.push(format!("{} {}", kind_of(m), name_of(m))),
            Some(found) if role_ref_differs(m, &found) => missing.push(format!(
                "{} {} (bound to {}, expected {})",
                kind_of(m),
                name_of(m),
                found.data["roleRef"]["name"].as_str().unwrap_or_default(),
                m.object["roleRef"]["name"].as_str().unwrap_or_default()
            )),
            Some(_) => {}
        }
    }
    Ok(missing)
}

/// Is `found` a binding of another role than the manifest `m` binds?
fn role_ref_differs(m: &Manifest, found: &DynamicObject) -> bool {
    kind_of(m) == "ClusterRoleBinding" && found.data["roleRef"] != m.object["roleRef"]
}

/// Server-side applies every manifest, printing KUDO's `✅ installed GROUP` once per group.
async fn install(client: &kube::Client, ms: &[Manifest], io: &mut crate::Io<'_>) -> Result<()> {
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let mut reported = Vec::new();
    for m in ms {
        let name = name_of(m);
        let api = api_for(client, m);
        // A binding's roleRef is immutable: switching between cluster-admin and `kudo-manager`
        // (`init --upgrade` with or without --least-privilege) deletes the old binding and
        // creates the new one. The manager loses its old rights before it gets the new ones,
        // for the moment in between.
        if let Some(found) = api.get_opt(&name).await?
            && role_ref_differs(m, &found)
        {
            api.delete(&name, &DeleteParams::default())
                .await
                .with_context(|| format!("cannot replace {} {name}", kind_of(m)))?;
        }
        api.patch(&name, &pp, &Patch::Apply(&m.object))
            .await
            .with_context(|| format!("cannot install {} {name}", kind_of(m)))?;
        if !reported.contains(&m.group)
            && ms.iter().rev().find(|x| x.group == m.group).map(name_of) == Some(name)
        {
            writeln!(io.out, "✅ installed {}", m.group)?;
            reported.push(m.group);
        }
    }
    Ok(())
}

/// After installing the KUDO way, removes the ClusterRole `kudo-manager` an earlier
/// `--least-privilege` install left (only ours: labelled `app: kudo-manager`).
async fn remove_least_privilege_role(client: &kube::Client, io: &mut crate::Io<'_>) -> Result<()> {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let api: Api<ClusterRole> = Api::all(client.clone());
    let Some(role) = api.get_opt(MANAGER_ROLE).await? else {
        return Ok(());
    };
    let ours = role
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app"))
        .is_some_and(|a| a == "kudo-manager");
    if ours {
        api.delete(MANAGER_ROLE, &DeleteParams::default()).await?;
        writeln!(io.out, "clusterrole {MANAGER_ROLE} deleted (no longer used)")?;
    }
    Ok(())
}

fn ensure_home(home: &std::path::Path) -> Result<()> {
    let repo_dir = home.join("repository");
    std::fs::create_dir_all(&repo_dir).with_context(|| format!("cannot create {}", repo_dir.display()))?;
    let file = repo_dir.join("repositories.yaml");
    if !file.exists() {
        std::fs::write(&file, "repoVersion: v1\ncontext: \"\"\nrepositories: []\n")
            .with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok(())
}

async fn wait_ready(client: &kube::Client, namespace: &str, timeout: Duration) -> Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(d) = api.get_opt("kudo-controller-manager").await? {
            let want = d.spec.replicas.unwrap_or(1);
            let st = d.status.unwrap_or_default();
            if st.available_replicas.unwrap_or(0) >= want && st.updated_replicas.unwrap_or(0) >= want {
                return Ok(());
            }
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "timed out after {}s waiting for the KUDO manager to become available",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        init: InitArgs,
    }

    /// The manager Deployment (the last manifest).
    fn deploy(ms: &[Manifest]) -> &Value {
        let d = &ms.last().unwrap().object;
        assert_eq!(d["kind"], "Deployment");
        d
    }

    fn find<'a>(ms: &'a [Manifest], kind: &str, name: &str) -> Option<&'a Value> {
        ms.iter()
            .map(|m| &m.object)
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
    }

    fn manager_args(ms: &[Manifest]) -> Vec<String> {
        deploy(ms)["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn least_privilege_binds_a_role_without_wildcards() {
        let ms = manifests(&T::parse_from(["init", "--least-privilege"]).init, "kudo-system").unwrap();
        let binding = find(&ms, "ClusterRoleBinding", "kudo-manager-rolebinding").unwrap();
        assert_eq!(binding["roleRef"]["name"], "kudo-manager");
        assert_eq!(binding["subjects"][0]["name"], "kudo-manager");
        let typed = find(&ms, "ClusterRole", "kudo-manager-typed-apis").unwrap();
        assert_eq!(
            typed["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["kudo-rs.dev/aggregate-to-manager"],
            "true"
        );
        assert_eq!(
            find(&ms, "ClusterRoleBinding", "kudo-manager-typed-apis").unwrap()["subjects"][0]["name"],
            "kudo-manager"
        );
        let role = find(&ms, "ClusterRole", "kudo-manager").unwrap();
        assert_eq!(role["rules"].as_array().unwrap().len(), MANAGER_RULES.len());
        // No "*" anywhere: verbs, resources, apiGroups, of every ClusterRole installed.
        // (An aggregated ClusterRole has no rules of its own.)
        for m in ms.iter().filter(|m| m.object["kind"] == "ClusterRole") {
            for rule in m.object["rules"].as_array().into_iter().flatten() {
                for field in ["apiGroups", "resources", "verbs"] {
                    let values = rule[field].as_array().unwrap();
                    assert!(!values.is_empty(), "{rule}");
                    assert!(
                        values.iter().all(|v| !v.as_str().unwrap().contains('*')),
                        "{rule}"
                    );
                }
            }
        }
        let text = serde_json::to_string(&dry_run_list(&ms)).unwrap();
        assert!(!text.contains("cluster-admin"), "{text}");
        let args = manager_args(&ms);
        let at = args
            .iter()
            .position(|a| a == "--default-service-account")
            .unwrap();
        assert_eq!(args[at + 1], "kudo-instance");
    }

    #[test]
    fn least_privilege_role_writes_only_kudo_objects_events_leases_and_revisions() {
        let writes = ["create", "update", "patch", "delete", "deletecollection"];
        for rule in MANAGER_RULES {
            if rule.verbs.iter().any(|v| writes.contains(v)) {
                let own = ["kudo.dev", "events.k8s.io", "coordination.k8s.io"].contains(&rule.api_groups[0]);
                // The revision history is the manager's own record (ControllerRevisions it owns).
                let history = rule.api_groups[0] == "apps" && rule.resources == ["controllerrevisions"];
                assert!(
                    (own || history) && rule.api_groups.len() == 1,
                    "{:?}",
                    rule.resources
                );
            }
            if rule.verbs.contains(&"impersonate") {
                assert_eq!(rule.resources, ["serviceaccounts"]);
            }
        }
    }

    #[test]
    fn default_install_keeps_cluster_admin_and_no_default_account() {
        let ms = manifests(&T::parse_from(["init"]).init, "kudo-system").unwrap();
        let binding = find(&ms, "ClusterRoleBinding", "kudo-manager-rolebinding").unwrap();
        assert_eq!(binding["roleRef"]["name"], "cluster-admin");
        assert!(find(&ms, "ClusterRole", "kudo-manager").is_none());
        assert!(!manager_args(&ms).contains(&"--default-service-account".to_string()));
        // The aggregated roles come in both modes.
        for role in ["admin", "edit", "view"] {
            let r = find(&ms, "ClusterRole", &format!("kudo-rs:aggregate-to-{role}")).unwrap();
            assert_eq!(
                r["metadata"]["labels"][format!("rbac.authorization.k8s.io/aggregate-to-{role}")],
                "true"
            );
        }
        let view = find(&ms, "ClusterRole", "kudo-rs:aggregate-to-view").unwrap();
        assert_eq!(view["rules"][0]["verbs"], json!(["get", "list", "watch"]));
    }

    #[test]
    fn default_service_account_needs_least_privilege_and_a_valid_name() {
        let t = T::parse_from([
            "init",
            "--least-privilege",
            "--default-service-account",
            "deployer",
        ]);
        let ms = manifests(&t.init, "kudo-system").unwrap();
        let args = manager_args(&ms);
        assert!(args.ends_with(&["--default-service-account".to_string(), "deployer".to_string()]));
        assert!(T::try_parse_from(["init", "--default-service-account", "deployer"]).is_err());
        for bad in ["", "Deployer", "x-", "a_b"] {
            let e = T::try_parse_from(["init", "--least-privilege", "--default-service-account", bad]);
            let e = e.err().expect(bad).to_string();
            assert!(e.contains("--default-service-account"), "{e}");
        }
        // An existing account is bound to the role, not created.
        let t = T::parse_from(["init", "--least-privilege", "--service-account", "mine"]);
        let ms = manifests(&t.init, "kudo-system").unwrap();
        assert!(ms.iter().all(|m| m.object["kind"] != "ServiceAccount"));
        let binding = find(&ms, "ClusterRoleBinding", "kudo-manager-rolebinding").unwrap();
        assert_eq!(binding["subjects"][0]["name"], "mine");
    }

    #[test]
    fn dry_run_manifests_reference_this_versions_image_and_no_webhook() {
        let t = T::parse_from(["init"]);
        let ms = manifests(&t.init, "kudo-system").unwrap();
        let kinds: Vec<&str> = ms.iter().map(|m| m.object["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "Namespace",
                "ServiceAccount",
                "ClusterRoleBinding",
                "ClusterRole",
                "ClusterRole",
                "ClusterRole",
                "Deployment"
            ]
        );
        let image = deploy(&ms)["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap();
        assert_eq!(image, format!("kudo-rs/manager:v{}", env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn manager_runs_as_non_root_read_only_without_capabilities_and_replicates() {
        let ms = manifests(&T::parse_from(["init"]).init, "kudo-system").unwrap();
        let pod = &deploy(&ms)["spec"]["template"]["spec"];
        assert_eq!(deploy(&ms)["spec"]["replicas"], 1);
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(pod["securityContext"]["runAsUser"], MANAGER_UID);
        let c = &pod["containers"][0]["securityContext"];
        assert_eq!(c["readOnlyRootFilesystem"], true);
        assert_eq!(c["allowPrivilegeEscalation"], false);
        assert_eq!(c["capabilities"]["drop"], json!(["ALL"]));
        let ms = manifests(&T::parse_from(["init", "--replicas", "2"]).init, "kudo-system").unwrap();
        assert_eq!(deploy(&ms)["spec"]["replicas"], 2);
        let ms = manifests(
            &T::parse_from(["init", "--replicas", "2", "--shards", "4"]).init,
            "kudo-system",
        )
        .unwrap();
        let args = &deploy(&ms)["spec"]["template"]["spec"]["containers"][0]["args"];
        let args: Vec<&str> = args
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a.as_str())
            .collect();
        assert!(args.windows(2).any(|w| w == ["--shards", "4"]), "{args:?}");
        assert!(T::try_parse_from(["init", "--shards", "0"]).is_err());
        assert!(T::try_parse_from(["init", "--replicas", "0"]).is_err());
    }

    #[test]
    fn manager_deployment_serves_probes_on_all_addresses_and_knows_its_pod() {
        let t = T::parse_from(["init"]);
        let ms = manifests(&t.init, "kudo-system").unwrap();
        let c = &deploy(&ms)["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(args[0], "manager");
        let after = |flag: &str| args.iter().position(|a| *a == flag).map(|i| args[i + 1]);
        assert_eq!(after("--metrics-address"), Some("0.0.0.0:8080"));
        assert_eq!(after("--lease-name"), Some("kudo-manager"));
        assert!(args.contains(&"--leader-elect=true"));
        // Every flag the Deployment passes is one `kubectl kudo manager` accepts.
        #[derive(Parser)]
        struct M {
            #[command(flatten)]
            m: super::super::manager::ManagerArgs,
        }
        let parsed = M::try_parse_from(args.iter().copied()).expect("manager flags parse");
        assert!(parsed.m.leader_elect);
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name");
        assert_eq!(c["env"][1]["name"], "KUDO_POD_NAMESPACE");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert_eq!(c["readinessProbe"]["httpGet"]["port"], "metrics");
        assert_eq!(c["ports"][0]["containerPort"], 8080);
    }

    #[test]
    fn pull_policy_takes_kubernetes_spelling() {
        // KUDO pulled `Always` by default.
        let t = T::parse_from(["init"]);
        assert_eq!(t.init.kudo_image_pull_policy, PullPolicy::Always);
        let ms = manifests(&t.init, "kudo-system").unwrap();
        assert_eq!(
            deploy(&ms)["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Always"
        );
        let t = T::parse_from(["init", "--kudo-image-pull-policy", "IfNotPresent"]);
        assert_eq!(t.init.kudo_image_pull_policy, PullPolicy::IfNotPresent);
    }

    /// Issue 14, bug 4: `--dry-run -o json` is a `v1` List, not a bare array.
    #[test]
    fn dry_run_json_is_a_v1_list() {
        let t = T::parse_from(["init", "--dry-run", "-o", "json"]);
        let ms = manifests(&t.init, "kudo-system").unwrap();
        let list = dry_run_list(&ms);
        assert_eq!(list["apiVersion"], "v1");
        assert_eq!(list["kind"], "List");
        assert_eq!(list["items"].as_array().unwrap().len(), ms.len());
        assert_eq!(list["items"][9]["kind"], "Deployment");
    }

    #[test]
    fn version_chooses_the_image_tag_and_conflicts_with_an_image() {
        let image = |t: &T| {
            manifests(&t.init, "kudo-system").unwrap().last().unwrap().object["spec"]["template"]["spec"]
                ["containers"][0]["image"]
                .clone()
        };
        assert_eq!(
            image(&T::parse_from(["init", "--version", "0.2.0"])),
            "kudo-rs/manager:v0.2.0"
        );
        assert_eq!(
            image(&T::parse_from(["init", "--version", "v0.3.1"])),
            "kudo-rs/manager:v0.3.1"
        );
        assert!(T::try_parse_from(["init", "--version", "0.2.0", "-i", "x:y"]).is_err());
        // webhook flags change nothing in what is installed
        let plain = manifests(&T::parse_from(["init"]).init, "kudo-system").unwrap();
        let hooked = manifests(
            &T::parse_from([
                "init",
                "--unsafe-self-signed-webhook-ca",
                "--webhook",
                "InstanceValidation",
            ])
            .init,
            "kudo-system",
        )
        .unwrap();
        let objects = |ms: &[Manifest]| ms.iter().map(|m| m.object.clone()).collect::<Vec<_>>();
        assert_eq!(objects(&plain), objects(&hooked));
    }

    #[test]
    fn crd_only_and_custom_service_account() {
        let t = T::parse_from(["init", "--crd-only"]);
        assert_eq!(manifests(&t.init, "kudo-system").unwrap().len(), 3);
        let t = T::parse_from(["init", "--service-account", "mine"]);
        let ms = manifests(&t.init, "kudo-system").unwrap();
        assert!(ms.iter().all(|m| m.object["kind"] != "ServiceAccount"));
        assert_eq!(
            ms.last().unwrap().object["spec"]["template"]["spec"]["serviceAccountName"],
            "mine"
        );
    }
}
