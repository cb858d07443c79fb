//! The RBAC rules of KUDO's server side: the manager's own ClusterRole (what `kubectl kudo init
//! --least-privilege` binds it to instead of cluster-admin) and the rules the built-in `admin`,
//! `edit` and `view` roles gain for `kudo.dev` objects.
//!
//! The rules describe what the manager (`kudo-controller`) does, so they change with it; they
//! live here, beside the CRDs ([`crate::crd_manifests`]) that the same install writes, because
//! both sides reach this crate: the client library that installs them (`kudo-client`, which must
//! not depend on the manager) and the manager, whose tests check that the rules cover what it
//! reads. Data only, no IO: a kind the manager starts watching adds its rule here.

use serde_json::{Value, json};

/// One rule of a ClusterRole: API groups, resources, verbs (never `*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The API groups (`""`: the core group).
    pub api_groups: &'static [&'static str],
    /// The resources (plurals, `instances/status` for a subresource).
    pub resources: &'static [&'static str],
    /// The verbs.
    pub verbs: &'static [&'static str],
}

impl Rule {
    /// The rule as a ClusterRole's `rules` entry.
    pub fn to_json(&self) -> Value {
        json!({"apiGroups": self.api_groups, "resources": self.resources, "verbs": self.verbs})
    }

    /// Whether the rule grants `verb` on `resource` of `group`.
    pub fn allows(&self, group: &str, resource: &str, verb: &str) -> bool {
        self.api_groups.contains(&group) && self.resources.contains(&resource) && self.verbs.contains(&verb)
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
    api_groups: &[crate::rollout::GROUP],
    resources: &["rollouts"],
    verbs: READ,
};
const RULE_ROLLOUTS_STATUS: Rule = Rule {
    api_groups: &[crate::rollout::GROUP],
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

/// Package sources (`kudo_controller`'s source controller): the manager watches OperatorSources and
/// writes their status; the Operators and OperatorVersions it stores are `RULE_KUDO_OBJECTS`, the
/// pull and key Secrets `RULE_READ_CORE`.
const RULE_OPERATOR_SOURCES: Rule = Rule {
    api_groups: &[crate::OWN_GROUP],
    resources: &["operatorsources"],
    verbs: READ,
};
const RULE_OPERATOR_SOURCE_STATUS: Rule = Rule {
    api_groups: &[crate::OWN_GROUP],
    resources: &["operatorsources/status"],
    verbs: &["get", "update", "patch"],
};
/// The typed API of a package a source stores: its CRD and its ClusterRoles, written as `install`
/// writes them. The API server lets the manager write only ClusterRoles granting what it holds
/// itself (RBAC's escalation check), so under `--least-privilege` a typed API's roles are refused
/// unless the manager is also granted the typed kind (docs/security.md).
const RULE_TYPED_API_CRDS: Rule = Rule {
    api_groups: &["apiextensions.k8s.io"],
    resources: &["customresourcedefinitions"],
    verbs: &["get", "create", "patch"],
};
const RULE_TYPED_API_ROLES: Rule = Rule {
    api_groups: &["rbac.authorization.k8s.io"],
    resources: &["clusterroles"],
    verbs: &["get", "create", "patch"],
};

/// The rules of the manager's ClusterRole under `--least-privilege`: write access only to
/// `kudo.dev` objects, the status of `kudo-rs.dev` Rollouts and OperatorSources, Events and its
/// Lease, the typed API of a package an OperatorSource stores (its CRD and ClusterRoles, no
/// delete), `impersonate` on ServiceAccounts, and read access to
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
    RULE_OPERATOR_SOURCES,
    RULE_OPERATOR_SOURCE_STATUS,
    RULE_TYPED_API_CRDS,
    RULE_TYPED_API_ROLES,
];

/// What the built-in `admin` and `edit` roles gain: managing Instances, Operators and
/// OperatorVersions of their namespace.
const AGGREGATE_TO_EDIT: &[Rule] = &[
    Rule {
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
    },
    Rule {
        api_groups: &["kudo.dev"],
        resources: &["operators", "operatorversions"],
        verbs: READ_WRITE,
    },
];

/// Reading OperatorSources: `view` (and through it `edit` and `admin`) may see them, but only
/// whoever is granted it explicitly may create one, since a source decides which keys a namespace
/// trusts (docs/security.md).
const RULE_VIEW_SOURCES: Rule = Rule {
    api_groups: &[crate::OWN_GROUP],
    resources: &["operatorsources"],
    verbs: READ,
};

/// What the built-in `view` role gains: reading them.
const AGGREGATE_TO_VIEW: &[Rule] = &[
    Rule {
        api_groups: &["kudo.dev"],
        resources: &["instances", "operators", "operatorversions"],
        verbs: READ,
    },
    RULE_VIEW_SOURCES,
];

/// The rules `kudo-rs:aggregate-to-ROLE` adds to the built-in ROLE (`admin`, `edit`, `view`), so
/// that whoever holds ROLE in a namespace (a user, or an Instance's ServiceAccount applying the
/// child Instances of `KudoOperator` tasks) manages the `kudo.dev` objects there.
pub fn aggregated_rules(role: &str) -> &'static [Rule] {
    match role {
        "view" => AGGREGATE_TO_VIEW,
        _ => AGGREGATE_TO_EDIT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_privilege_role_writes_only_kudo_objects_events_leases_and_revisions() {
        let writes = ["create", "update", "patch", "delete", "deletecollection"];
        for rule in MANAGER_RULES {
            if rule.verbs.iter().any(|v| writes.contains(v)) {
                let own = [
                    crate::GROUP,
                    crate::OWN_GROUP,
                    "events.k8s.io",
                    "coordination.k8s.io",
                ]
                .contains(&rule.api_groups[0]);
                // A stored package's typed API: its CRD and ClusterRoles (no delete, no bind, no
                // escalate: the API server's escalation check applies).
                let typed_api = [RULE_TYPED_API_CRDS, RULE_TYPED_API_ROLES].contains(rule)
                    && !rule
                        .verbs
                        .iter()
                        .any(|v| ["delete", "bind", "escalate"].contains(v));
                // The revision history is the manager's own record (ControllerRevisions it owns).
                let history = rule.api_groups[0] == "apps" && rule.resources == ["controllerrevisions"];
                assert!(
                    (own || history || typed_api) && rule.api_groups.len() == 1,
                    "{:?}",
                    rule.resources
                );
            }
            if rule.verbs.contains(&"impersonate") {
                assert_eq!(rule.resources, ["serviceaccounts"]);
            }
        }
    }
}
