//! The set of served resource types: built-in kinds plus every kind registered through a CRD.
//!
//! Discovery, OpenAPI, routing and the store all read this one table, so a CRD that is created shows up
//! everywhere at once, as it does on a real server.

use std::sync::{Arc, RwLock};

use kudo_api::kinds::{KnownKind, known};
use serde_json::Value;

/// Storage identity of a resource type: one per group + plural, shared by all served versions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// API group, `""` for core.
    pub group: String,
    /// Plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// Build from parts.
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

/// Where `/scale` reads and writes replicas (from a CRD's `subresources.scale`, or built-in).
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleSpec {
    /// JSON path such as `.spec.replicas`.
    pub spec_replicas: String,
    /// JSON path such as `.status.replicas`.
    pub status_replicas: String,
    /// Optional JSON path of the label selector string in status.
    pub label_selector: Option<String>,
}

/// One additional printer column of a CRD version.
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type (`string`, `integer`, `date`...).
    pub type_: String,
    /// Optional format.
    pub format: String,
    /// Simple JSON path, e.g. `.spec.replicas`.
    pub json_path: String,
    /// Shown only with `-o wide` when > 0.
    pub priority: i64,
    /// Description.
    pub description: String,
}

/// Everything about one served group/version/resource.
#[derive(Debug, Clone)]
pub struct ResourceDef {
    /// API group.
    pub group: String,
    /// API version within the group.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name (URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Namespaced or cluster scoped.
    pub namespaced: bool,
    /// Short names for kubectl.
    pub short_names: Vec<String>,
    /// Categories (e.g. `all`).
    pub categories: Vec<String>,
    /// Has a `/status` subresource (main writes ignore status).
    pub status: bool,
    /// Has a `/scale` subresource.
    pub scale: Option<ScaleSpec>,
    /// Whether `metadata.generation` is maintained.
    pub generation: bool,
    /// Set for CRD-defined kinds.
    pub custom: Option<CustomInfo>,
    /// Version used for storage and as preferred version in discovery.
    pub storage_version: bool,
}

/// CRD-specific data for a custom kind.
#[derive(Debug, Clone)]
pub struct CustomInfo {
    /// Name of the defining CRD.
    pub crd_name: String,
    /// The version's `openAPIV3Schema`, if any.
    pub schema: Option<Value>,
    /// `additionalPrinterColumns`.
    pub printer_columns: Vec<PrinterColumn>,
    /// `selectableFields` JSON paths.
    pub selectable_fields: Vec<String>,
}

impl ResourceDef {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    /// The storage key. `events.k8s.io` Events share storage with core Events.
    pub fn gr(&self) -> GroupResource {
        if self.is_events_v1() {
            return GroupResource::new("", "events");
        }
        GroupResource::new(&self.group, &self.plural)
    }

    /// The `events.k8s.io` view of core Events.
    pub fn is_events_v1(&self) -> bool {
        self.group == "events.k8s.io" && self.plural == "events"
    }
    /// Whether strategic merge patch is accepted (built-in kinds only, as on a real server).
    pub fn supports_smp(&self) -> bool {
        self.custom.is_none()
    }
}

/// A built-in kind: its group, version, plural and scope from [`kudo_api::kinds::BUILTIN_KINDS`],
/// the rest (short names, subresources) the way kube-apiserver serves it.
fn builtin(known: &KnownKind, short: &[&str], status: bool, scale: bool, generation: bool) -> ResourceDef {
    ResourceDef {
        group: known.group.into(),
        version: known.version.into(),
        kind: known.kind.into(),
        plural: known.plural.into(),
        singular: known.kind.to_lowercase(),
        namespaced: known.namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        status,
        scale: scale.then(|| ScaleSpec {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        }),
        generation,
        custom: None,
        storage_version: true,
    }
}

fn builtins() -> Vec<ResourceDef> {
    let mut v = vec![
        builtin(known("", "Namespace"), &["ns"], true, false, false),
        builtin(known("", "ConfigMap"), &["cm"], false, false, false),
        builtin(known("", "Secret"), &[], false, false, false),
        builtin(known("", "Service"), &["svc"], true, false, false),
        builtin(known("", "ServiceAccount"), &["sa"], false, false, false),
        builtin(known("", "Pod"), &["po"], true, false, true),
        builtin(known("", "PersistentVolumeClaim"), &["pvc"], true, false, false),
        builtin(known("", "PersistentVolume"), &["pv"], true, false, false),
        builtin(known("", "Event"), &["ev"], false, false, false),
        builtin(known("", "Endpoints"), &["ep"], false, false, false),
        builtin(known("", "Node"), &["no"], true, false, false),
        builtin(known("apps", "Deployment"), &["deploy"], true, true, true),
        builtin(known("apps", "ReplicaSet"), &["rs"], true, true, true),
        builtin(known("apps", "StatefulSet"), &["sts"], true, true, true),
        builtin(known("apps", "DaemonSet"), &["ds"], true, false, true),
        builtin(known("apps", "ControllerRevision"), &[], false, false, false),
        builtin(known("batch", "Job"), &[], true, false, true),
        builtin(known("batch", "CronJob"), &["cj"], true, false, true),
        builtin(
            known("policy", "PodDisruptionBudget"),
            &["pdb"],
            true,
            false,
            true,
        ),
        builtin(
            known("rbac.authorization.k8s.io", "Role"),
            &[],
            false,
            false,
            false,
        ),
        builtin(
            known("rbac.authorization.k8s.io", "RoleBinding"),
            &[],
            false,
            false,
            false,
        ),
        builtin(
            known("rbac.authorization.k8s.io", "ClusterRole"),
            &[],
            false,
            false,
            false,
        ),
        builtin(
            known("rbac.authorization.k8s.io", "ClusterRoleBinding"),
            &[],
            false,
            false,
            false,
        ),
        builtin(known("coordination.k8s.io", "Lease"), &[], false, false, false),
        builtin(known("", "ResourceQuota"), &["quota"], true, false, false),
        builtin(known("", "LimitRange"), &["limits"], false, false, false),
        builtin(known("", "PodTemplate"), &[], false, false, false),
        builtin(
            known("discovery.k8s.io", "EndpointSlice"),
            &[],
            false,
            false,
            false,
        ),
        builtin(known("networking.k8s.io", "Ingress"), &["ing"], true, false, true),
        builtin(
            known("networking.k8s.io", "NetworkPolicy"),
            &["netpol"],
            false,
            false,
            true,
        ),
        builtin(
            known("networking.k8s.io", "IngressClass"),
            &[],
            false,
            false,
            true,
        ),
        builtin(
            known("autoscaling", "HorizontalPodAutoscaler"),
            &["hpa"],
            true,
            false,
            false,
        ),
        builtin(
            known("storage.k8s.io", "StorageClass"),
            &["sc"],
            false,
            false,
            false,
        ),
        builtin(
            known("scheduling.k8s.io", "PriorityClass"),
            &["pc"],
            false,
            false,
            false,
        ),
        builtin(known("events.k8s.io", "Event"), &["ev"], false, false, false),
        builtin(
            known("apiextensions.k8s.io", "CustomResourceDefinition"),
            &["crd", "crds"],
            true,
            false,
            true,
        ),
    ];
    for d in v.iter_mut() {
        if matches!(
            d.plural.as_str(),
            "pods"
                | "services"
                | "deployments"
                | "replicasets"
                | "statefulsets"
                | "daemonsets"
                | "jobs"
                | "cronjobs"
        ) {
            d.categories = vec!["all".into()];
        }
        if d.kind == "PersistentVolumeClaim" {
            d.singular = "persistentvolumeclaim".into();
        }
    }
    v
}

/// The live table of served types.
#[derive(Debug, Clone)]
pub struct Registry {
    defs: Arc<RwLock<Vec<Arc<ResourceDef>>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// A registry with all built-in kinds.
    pub fn new() -> Self {
        Registry {
            defs: Arc::new(RwLock::new(builtins().into_iter().map(Arc::new).collect())),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<ResourceDef>>> {
        self.defs.read().unwrap_or_else(|p| p.into_inner())
    }

    /// All served definitions.
    pub fn all(&self) -> Vec<Arc<ResourceDef>> {
        self.read().clone()
    }

    /// Look up by URL parts.
    pub fn by_path(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.read()
            .iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
            .cloned()
    }

    /// Look up by `apiVersion` + `kind`.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        let (group, version) = split_api_version(api_version);
        self.read()
            .iter()
            .find(|d| d.group == group && d.version == version && d.kind == kind)
            .cloned()
    }

    /// The storage-version definition of a group/resource.
    pub fn by_gr(&self, gr: &GroupResource) -> Option<Arc<ResourceDef>> {
        let defs = self.read();
        defs.iter()
            .find(|d| d.group == gr.group && d.plural == gr.resource && d.storage_version)
            .or_else(|| {
                defs.iter()
                    .find(|d| d.group == gr.group && d.plural == gr.resource)
            })
            .cloned()
    }

    /// Whether any version of a group is served.
    pub fn has_group_version(&self, group: &str, version: &str) -> bool {
        self.read()
            .iter()
            .any(|d| d.group == group && d.version == version)
    }

    /// Replace all definitions belonging to one CRD (empty `defs` unregisters it).
    pub fn set_crd(&self, crd_name: &str, defs: Vec<ResourceDef>) {
        let mut w = self.defs.write().unwrap_or_else(|p| p.into_inner());
        w.retain(|d| d.custom.as_ref().map(|c| c.crd_name.as_str()) != Some(crd_name));
        w.extend(defs.into_iter().map(Arc::new));
    }

    /// Groups in discovery order (core excluded), each with its versions, preferred first.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for d in self.read().iter().filter(|d| !d.group.is_empty()) {
            match out.iter_mut().find(|(g, _)| *g == d.group) {
                Some((_, vs)) => {
                    if !vs.contains(&d.version) {
                        if d.storage_version {
                            vs.insert(0, d.version.clone());
                        } else {
                            vs.push(d.version.clone());
                        }
                    }
                }
                None => out.push((d.group.clone(), vec![d.version.clone()])),
            }
        }
        out
    }
}

/// `apps/v1` → (`apps`, `v1`); `v1` → (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_exactly_the_builtin_kinds_of_the_shared_table() {
        let served: Vec<(String, String)> = builtins().into_iter().map(|d| (d.group, d.kind)).collect();
        let table: Vec<(String, String)> = kudo_api::kinds::BUILTIN_KINDS
            .iter()
            .map(|k| (k.group.to_string(), k.kind.to_string()))
            .collect();
        assert_eq!(served, table);
    }
}
