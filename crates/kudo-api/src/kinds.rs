//! The one table of known kinds: group, preferred version, kind, plural resource name and scope,
//! as a real API server (v1.28) serves them. The embedded API server serves exactly
//! [`BUILTIN_KINDS`]; clients that name a resource without asking discovery (the CLI, the
//! manager's watches and readiness lists) take its plural from here. Where the manager talks to a
//! cluster about an arbitrary object, discovery still decides; this is the known set.

/// One known kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownKind {
    /// API group, `""` for core.
    pub group: &'static str,
    /// Preferred version the API server serves, e.g. `v1`.
    pub version: &'static str,
    /// The kind as objects carry it, e.g. `Deployment`.
    pub kind: &'static str,
    /// The resource name in URLs (`deployments`).
    pub plural: &'static str,
    /// Whether objects of the kind live in a namespace (`false` for cluster-scoped kinds).
    pub namespaced: bool,
}

impl KnownKind {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// A type's identity as objects carry it: `apiVersion` and `kind` (the key of discovery lookups).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GvkKey {
    /// `apiVersion`, `group/version` or bare `version` for core.
    pub api_version: String,
    /// `kind`, e.g. `Deployment`.
    pub kind: String,
}

impl GvkKey {
    /// The key of `api_version` and `kind`.
    pub fn new(api_version: &str, kind: &str) -> GvkKey {
        GvkKey {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        }
    }
}

impl std::fmt::Display for GvkKey {
    /// `kind apiVersion`, e.g. `Deployment apps/v1`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.api_version)
    }
}

const fn k(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> KnownKind {
    KnownKind {
        group,
        version,
        kind,
        plural,
        namespaced,
    }
}

/// The built-in Kubernetes kinds, in the order the embedded API server lists them.
pub const BUILTIN_KINDS: &[KnownKind] = &[
    k("", "v1", "Namespace", "namespaces", false),
    k("", "v1", "ConfigMap", "configmaps", true),
    k("", "v1", "Secret", "secrets", true),
    k("", "v1", "Service", "services", true),
    k("", "v1", "ServiceAccount", "serviceaccounts", true),
    k("", "v1", "Pod", "pods", true),
    k("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true),
    k("", "v1", "PersistentVolume", "persistentvolumes", false),
    k("", "v1", "Event", "events", true),
    k("", "v1", "Endpoints", "endpoints", true),
    k("", "v1", "Node", "nodes", false),
    k("apps", "v1", "Deployment", "deployments", true),
    k("apps", "v1", "ReplicaSet", "replicasets", true),
    k("apps", "v1", "StatefulSet", "statefulsets", true),
    k("apps", "v1", "DaemonSet", "daemonsets", true),
    k("apps", "v1", "ControllerRevision", "controllerrevisions", true),
    k("batch", "v1", "Job", "jobs", true),
    k("batch", "v1", "CronJob", "cronjobs", true),
    k(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    k("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    k(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    k(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    k(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    k("coordination.k8s.io", "v1", "Lease", "leases", true),
    k("", "v1", "ResourceQuota", "resourcequotas", true),
    k("", "v1", "LimitRange", "limitranges", true),
    k("", "v1", "PodTemplate", "podtemplates", true),
    k("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", true),
    k("networking.k8s.io", "v1", "Ingress", "ingresses", true),
    k(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    k("networking.k8s.io", "v1", "IngressClass", "ingressclasses", false),
    k(
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        true,
    ),
    k("storage.k8s.io", "v1", "StorageClass", "storageclasses", false),
    k(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
    k("events.k8s.io", "v1", "Event", "events", true),
    k(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
];

/// KUDO's own kinds (`kudo.dev/v1beta1`) and kudo-rs's (`kudo-rs.dev`), served through the CRDs
/// of [`crate::crd_manifests`].
pub const KUDO_KINDS: &[KnownKind] = &[
    k(crate::GROUP, crate::VERSION, "Operator", "operators", true),
    k(
        crate::GROUP,
        crate::VERSION,
        "OperatorVersion",
        "operatorversions",
        true,
    ),
    k(crate::GROUP, crate::VERSION, "Instance", "instances", true),
    k(
        crate::source::GROUP,
        crate::source::VERSION,
        crate::source::KIND,
        crate::source::PLURAL,
        true,
    ),
];

/// kudo-rs's own kinds (`kudo-rs.dev`), served through the CRDs of [`crate::crd_manifests`]
/// too; nothing a package applies.
pub const KUDO_RS_KINDS: &[KnownKind] = &[k(
    crate::rollout::GROUP,
    crate::rollout::VERSION,
    crate::rollout::KIND,
    crate::rollout::PLURAL,
    false,
)];

/// The known kind `kind` of API group `group` (`""` for core), built-in, KUDO's or kudo-rs's.
pub fn known_kind(group: &str, kind: &str) -> Option<&'static KnownKind> {
    BUILTIN_KINDS
        .iter()
        .chain(KUDO_KINDS)
        .chain(KUDO_RS_KINDS)
        .find(|k| k.group == group && k.kind == kind)
}

/// [`known_kind`] for a kind the caller names in its own code: a kind missing from the table is a
/// programming error, caught by the callers' tests.
pub fn known(group: &str, kind: &str) -> &'static KnownKind {
    known_kind(group, kind).unwrap_or_else(|| panic!("{kind} of group {group:?} is not in kudo_api::kinds"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_and_kind_name_one_entry() {
        let all: Vec<_> = BUILTIN_KINDS
            .iter()
            .chain(KUDO_KINDS)
            .chain(KUDO_RS_KINDS)
            .collect();
        for (i, a) in all.iter().enumerate() {
            assert!(
                all[i + 1..]
                    .iter()
                    .all(|b| (a.group, a.kind) != (b.group, b.kind)),
                "{a:?} twice"
            );
            assert_eq!(known_kind(a.group, a.kind), Some(*a));
        }
        assert_eq!(known("apps", "Deployment").api_version(), "apps/v1");
        assert_eq!(known("", "Pod").api_version(), "v1");
        assert_eq!(known(crate::GROUP, "Instance").plural, "instances");
        assert_eq!(
            known("kudo-rs.dev", "Rollout").api_version(),
            "kudo-rs.dev/v1alpha1"
        );
        assert_eq!(known_kind("apps", "Pod"), None);
    }
}
