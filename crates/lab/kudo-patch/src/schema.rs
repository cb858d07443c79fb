//! Per-type merge metadata: which lists are merged by key, which are sets, which maps and
//! structs are atomic.
//!
//! kube-apiserver derives this from the Go types' `+patchStrategy`, `+patchMergeKey`,
//! `+listType`, `+listMapKey`, `+mapType` and `+structType` markers. We do not carry the full
//! typed schemas, only the facts that change patch results, in a small table per kind; every
//! field not in the table behaves like an ordinary struct field (objects merge field by
//! field, lists are atomic), which is the Kubernetes default for unmarked fields.
//!
//! Custom resources use [`Schema::from_openapi_v3`] on their CRD's structural schema, or
//! [`Schema::deduced`] when no schema is known (everything granular, lists atomic — what
//! kube-apiserver does for `x-kubernetes-preserve-unknown-fields`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use crate::Gvk;

/// How a list field is merged. One value carries both the strategic-merge-patch metadata
/// (`x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key`) and the server-side
/// apply metadata (`x-kubernetes-list-type` / `x-kubernetes-list-map-keys`), because the two
/// differ for some fields (container ports merge on `containerPort` in SMP but are keyed by
/// `containerPort`+`protocol` in SSA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListStrategy {
    /// `x-kubernetes-patch-strategy`: `Some("merge")`, `Some("merge,retainKeys")` or `None`
    /// (strategic merge patch replaces the list).
    pub patch_strategy: Option<&'static str>,
    /// `x-kubernetes-patch-merge-key`; `None` with a merge strategy means a list of scalars
    /// merged as a set.
    pub merge_key: Option<&'static str>,
    /// Server-side apply list type.
    pub list_type: ListType,
}

impl ListStrategy {
    /// Whether strategic merge patch merges (rather than replaces) this list.
    pub fn smp_merges(&self) -> bool {
        self.patch_strategy
            .is_some_and(|s| s.split(',').any(|p| p == "merge"))
    }
}

/// `x-kubernetes-list-type` of a list field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole; a single owner.
    Atomic,
    /// A set of scalars; each value is owned separately.
    Set,
    /// An associative list keyed by these fields (`x-kubernetes-list-map-keys`).
    Map(&'static [&'static str]),
}

/// Shape of a non-list field that deviates from the "ordinary struct" default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldShape {
    /// A list, merged as described.
    List(ListStrategy),
    /// A `map[string]X` whose keys are owned separately (`x-kubernetes-map-type: granular`).
    Map,
    /// A map replaced as a whole (`x-kubernetes-map-type: atomic`).
    AtomicMap,
    /// A struct replaced as a whole (`+structType=atomic`, e.g. label selectors).
    AtomicStruct,
    /// A struct with `x-kubernetes-patch-strategy: retainKeys` (kubectl sends `$retainKeys`).
    RetainKeys,
    /// A non-pointer struct (`spec`, `template`, container `resources`, ...) or a slice
    /// without `omitempty` (`containers`): a stored typed object always has it, which decides
    /// the `.` markers of `Update` field sets. Applied to a list path after its list shape.
    ValueStruct,
}

const fn merge_map(key: &'static str, keys: &'static [&'static str]) -> FieldShape {
    FieldShape::List(ListStrategy {
        patch_strategy: Some("merge"),
        merge_key: Some(key),
        list_type: ListType::Map(keys),
    })
}

const fn merge_retain_map(key: &'static str, keys: &'static [&'static str]) -> FieldShape {
    FieldShape::List(ListStrategy {
        patch_strategy: Some("merge,retainKeys"),
        merge_key: Some(key),
        list_type: ListType::Map(keys),
    })
}

const fn ssa_only_map(keys: &'static [&'static str]) -> FieldShape {
    FieldShape::List(ListStrategy {
        patch_strategy: None,
        merge_key: None,
        list_type: ListType::Map(keys),
    })
}

const ATOMIC_LIST: FieldShape = FieldShape::List(ListStrategy {
    patch_strategy: None,
    merge_key: None,
    list_type: ListType::Atomic,
});

const MERGE_SET: FieldShape = FieldShape::List(ListStrategy {
    patch_strategy: Some("merge"),
    merge_key: None,
    list_type: ListType::Set,
});

/// Conditions are merged by `type` in both SMP and SSA on most kinds.
const CONDITIONS: FieldShape = merge_map("type", &["type"]);

type Table = &'static [(&'static str, FieldShape)];

/// `metadata` of every object (ObjectMeta).
const OBJECT_META: Table = &[
    ("labels", FieldShape::Map),
    ("annotations", FieldShape::Map),
    ("ownerReferences", merge_map("uid", &["uid"])),
    ("ownerReferences.*", FieldShape::AtomicStruct),
    ("finalizers", MERGE_SET),
    ("managedFields", ATOMIC_LIST),
];

/// A container (containers, initContainers, ephemeralContainers items).
const CONTAINER: Table = &[
    ("resources", FieldShape::ValueStruct),
    ("command", ATOMIC_LIST),
    ("args", ATOMIC_LIST),
    (
        "ports",
        merge_map("containerPort", &["containerPort", "protocol"]),
    ),
    ("env", merge_map("name", &["name"])),
    ("env.valueFrom.configMapKeyRef", FieldShape::AtomicStruct),
    ("env.valueFrom.secretKeyRef", FieldShape::AtomicStruct),
    ("env.valueFrom.fieldRef", FieldShape::AtomicStruct),
    ("env.valueFrom.resourceFieldRef", FieldShape::AtomicStruct),
    ("envFrom", ATOMIC_LIST),
    ("volumeMounts", merge_map("mountPath", &["mountPath"])),
    ("volumeDevices", merge_map("devicePath", &["devicePath"])),
    ("resources.limits", FieldShape::Map),
    ("resources.requests", FieldShape::Map),
    ("resources.claims", ssa_only_map(&["name"])),
    ("resizePolicy", ATOMIC_LIST),
    ("securityContext.capabilities.add", ATOMIC_LIST),
    ("securityContext.capabilities.drop", ATOMIC_LIST),
];

/// PodSpec; the container lists get [`CONTAINER`] appended under them.
const POD_SPEC: Table = &[
    ("volumes", merge_retain_map("name", &["name"])),
    ("initContainers", merge_map("name", &["name"])),
    ("containers", merge_map("name", &["name"])),
    ("containers", FieldShape::ValueStruct),
    ("ephemeralContainers", merge_map("name", &["name"])),
    ("imagePullSecrets", merge_map("name", &["name"])),
    ("imagePullSecrets.*", FieldShape::AtomicStruct),
    ("hostAliases", merge_map("ip", &["ip"])),
    ("hostAliases.hostnames", ATOMIC_LIST),
    ("tolerations", ATOMIC_LIST),
    (
        "topologySpreadConstraints",
        merge_map("topologyKey", &["topologyKey", "whenUnsatisfiable"]),
    ),
    ("readinessGates", ATOMIC_LIST),
    ("schedulingGates", merge_map("name", &["name"])),
    ("resourceClaims", merge_retain_map("name", &["name"])),
    ("nodeSelector", FieldShape::AtomicMap),
    ("overhead", FieldShape::Map),
    ("resources.limits", FieldShape::Map),
    ("resources.requests", FieldShape::Map),
    ("securityContext.sysctls", ATOMIC_LIST),
    ("securityContext.supplementalGroups", ATOMIC_LIST),
    (
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        FieldShape::AtomicStruct,
    ),
    ("dnsConfig.nameservers", ATOMIC_LIST),
    ("dnsConfig.searches", ATOMIC_LIST),
    ("dnsConfig.options", ATOMIC_LIST),
];

const CONTAINER_LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

/// Builds the flattened table for one kind: `(path segments, shape)`, in insertion order
/// (parents before children). `*` as a segment denotes the items of the list above it.
fn kind_table(gvk: &Gvk) -> Vec<(Vec<&'static str>, FieldShape)> {
    let mut t: Vec<(Vec<&'static str>, FieldShape)> = Vec::new();
    fn add(
        t: &mut Vec<(Vec<&'static str>, FieldShape)>,
        prefix: &[&'static str],
        table: &[(&'static str, FieldShape)],
    ) {
        for (path, shape) in table {
            let mut p = prefix.to_vec();
            if !path.is_empty() {
                p.extend(path.split('.'));
            }
            t.push((p, *shape));
        }
    }
    fn pod_spec(t: &mut Vec<(Vec<&'static str>, FieldShape)>, prefix: &[&'static str]) {
        add(t, prefix, POD_SPEC);
        for list in CONTAINER_LISTS {
            let mut p = prefix.to_vec();
            p.push(list);
            add(t, &p, CONTAINER);
        }
    }
    fn pod_template(t: &mut Vec<(Vec<&'static str>, FieldShape)>, prefix: &[&'static str]) {
        add(
            t,
            prefix,
            &[
                ("", FieldShape::ValueStruct),
                ("metadata", FieldShape::ValueStruct),
                ("spec", FieldShape::ValueStruct),
            ],
        );
        let mut m = prefix.to_vec();
        m.push("metadata");
        add(t, &m, OBJECT_META);
        let mut s = prefix.to_vec();
        s.push("spec");
        pod_spec(t, &s);
    }
    add(
        &mut t,
        &[],
        &[
            ("metadata", FieldShape::ValueStruct),
            ("spec", FieldShape::ValueStruct),
            ("status", FieldShape::ValueStruct),
        ],
    );
    add(&mut t, &["metadata"], OBJECT_META);
    let group = gvk.group.as_str();
    match (group, gvk.kind.as_str()) {
        ("", "Pod") => {
            pod_spec(&mut t, &["spec"]);
            add(
                &mut t,
                &["status"],
                &[
                    ("conditions", CONDITIONS),
                    ("podIPs", merge_map("ip", &["ip"])),
                    (
                        "hostIPs",
                        FieldShape::List(ListStrategy {
                            patch_strategy: Some("merge"),
                            merge_key: Some("ip"),
                            list_type: ListType::Atomic,
                        }),
                    ),
                    ("containerStatuses", ATOMIC_LIST),
                    ("initContainerStatuses", ATOMIC_LIST),
                    ("ephemeralContainerStatuses", ATOMIC_LIST),
                ],
            );
        }
        ("", "PodTemplate") => pod_template(&mut t, &["template"]),
        ("", "ReplicationController") => {
            add(&mut t, &["spec"], &[("selector", FieldShape::AtomicMap)]);
            pod_template(&mut t, &["spec", "template"]);
            add(&mut t, &["status"], &[("conditions", CONDITIONS)]);
        }
        ("", "Service") => add(
            &mut t,
            &[],
            &[
                ("spec.ports", merge_map("port", &["port", "protocol"])),
                ("spec.selector", FieldShape::AtomicMap),
                ("spec.externalIPs", ATOMIC_LIST),
                ("spec.clusterIPs", ATOMIC_LIST),
                ("spec.ipFamilies", ATOMIC_LIST),
                ("spec.loadBalancerSourceRanges", ATOMIC_LIST),
                ("status.conditions", CONDITIONS),
                ("status.loadBalancer", FieldShape::ValueStruct),
                ("status.loadBalancer.ingress", ATOMIC_LIST),
            ],
        ),
        ("", "Endpoints") => add(&mut t, &[], &[("subsets", ATOMIC_LIST)]),
        ("", "ConfigMap") => add(
            &mut t,
            &[],
            &[("data", FieldShape::Map), ("binaryData", FieldShape::Map)],
        ),
        ("", "Secret") => add(
            &mut t,
            &[],
            &[("data", FieldShape::Map), ("stringData", FieldShape::Map)],
        ),
        ("", "Namespace") => add(
            &mut t,
            &[],
            &[
                ("spec.finalizers", ATOMIC_LIST),
                ("status.conditions", CONDITIONS),
            ],
        ),
        ("", "ServiceAccount") => add(
            &mut t,
            &[],
            &[
                ("secrets", merge_map("name", &["name"])),
                ("imagePullSecrets", ATOMIC_LIST),
            ],
        ),
        ("", "PersistentVolumeClaim") => add(
            &mut t,
            &[],
            &[
                ("spec.accessModes", ATOMIC_LIST),
                ("spec.selector", FieldShape::AtomicStruct),
                ("spec.resources", FieldShape::ValueStruct),
                ("spec.resources.limits", FieldShape::Map),
                ("spec.resources.requests", FieldShape::Map),
                ("spec.dataSource", FieldShape::AtomicStruct),
                ("status.accessModes", ATOMIC_LIST),
                ("status.capacity", FieldShape::Map),
                ("status.conditions", CONDITIONS),
            ],
        ),
        ("", "PersistentVolume") => add(
            &mut t,
            &[],
            &[
                ("spec.capacity", FieldShape::Map),
                ("spec.accessModes", ATOMIC_LIST),
                ("spec.claimRef", FieldShape::AtomicStruct),
                ("spec.mountOptions", ATOMIC_LIST),
            ],
        ),
        ("", "Node") => add(
            &mut t,
            &[],
            &[
                ("spec.taints", ATOMIC_LIST),
                ("status.conditions", CONDITIONS),
                ("status.addresses", merge_map("type", &["type"])),
                ("status.capacity", FieldShape::Map),
                ("status.allocatable", FieldShape::Map),
            ],
        ),
        ("apps", "Deployment") => {
            add(
                &mut t,
                &["spec"],
                &[
                    ("selector", FieldShape::AtomicStruct),
                    ("strategy", FieldShape::RetainKeys),
                    ("strategy", FieldShape::ValueStruct),
                ],
            );
            pod_template(&mut t, &["spec", "template"]);
            add(&mut t, &["status"], &[("conditions", CONDITIONS)]);
        }
        ("apps", "ReplicaSet") | ("apps", "DaemonSet") => {
            add(
                &mut t,
                &["spec"],
                &[
                    ("selector", FieldShape::AtomicStruct),
                    ("updateStrategy", FieldShape::ValueStruct),
                ],
            );
            pod_template(&mut t, &["spec", "template"]);
            add(&mut t, &["status"], &[("conditions", CONDITIONS)]);
        }
        ("apps", "StatefulSet") => {
            add(
                &mut t,
                &["spec"],
                &[
                    ("selector", FieldShape::AtomicStruct),
                    ("volumeClaimTemplates", ATOMIC_LIST),
                    ("updateStrategy", FieldShape::ValueStruct),
                ],
            );
            pod_template(&mut t, &["spec", "template"]);
            add(&mut t, &["status"], &[("conditions", CONDITIONS)]);
        }
        ("batch", "Job") => {
            add(
                &mut t,
                &["spec"],
                &[
                    ("selector", FieldShape::AtomicStruct),
                    ("podFailurePolicy.rules", ATOMIC_LIST),
                ],
            );
            pod_template(&mut t, &["spec", "template"]);
            add(
                &mut t,
                &["status"],
                &[(
                    "conditions",
                    FieldShape::List(ListStrategy {
                        patch_strategy: Some("merge"),
                        merge_key: Some("type"),
                        list_type: ListType::Atomic,
                    }),
                )],
            );
        }
        ("batch", "CronJob") => {
            add(
                &mut t,
                &["spec"],
                &[
                    ("jobTemplate", FieldShape::ValueStruct),
                    ("jobTemplate.metadata", FieldShape::ValueStruct),
                    ("jobTemplate.spec", FieldShape::ValueStruct),
                ],
            );
            add(&mut t, &["spec", "jobTemplate", "metadata"], OBJECT_META);
            add(
                &mut t,
                &["spec", "jobTemplate", "spec"],
                &[
                    ("selector", FieldShape::AtomicStruct),
                    ("podFailurePolicy.rules", ATOMIC_LIST),
                ],
            );
            pod_template(&mut t, &["spec", "jobTemplate", "spec", "template"]);
            add(&mut t, &["status"], &[("active", ATOMIC_LIST)]);
        }
        ("rbac.authorization.k8s.io", "Role") | ("rbac.authorization.k8s.io", "ClusterRole") => add(
            &mut t,
            &[],
            &[
                ("rules", ATOMIC_LIST),
                ("aggregationRule.clusterRoleSelectors", ATOMIC_LIST),
            ],
        ),
        ("rbac.authorization.k8s.io", "RoleBinding")
        | ("rbac.authorization.k8s.io", "ClusterRoleBinding") => add(
            &mut t,
            &[],
            &[("subjects", ATOMIC_LIST), ("roleRef", FieldShape::AtomicStruct)],
        ),
        ("networking.k8s.io", "Ingress") => add(
            &mut t,
            &[],
            &[
                ("spec.rules", ATOMIC_LIST),
                ("spec.tls", ATOMIC_LIST),
                ("status.loadBalancer.ingress", ATOMIC_LIST),
            ],
        ),
        ("networking.k8s.io", "NetworkPolicy") => add(
            &mut t,
            &[],
            &[
                ("spec.podSelector", FieldShape::AtomicStruct),
                ("spec.ingress", ATOMIC_LIST),
                ("spec.egress", ATOMIC_LIST),
                ("spec.policyTypes", ATOMIC_LIST),
            ],
        ),
        ("policy", "PodDisruptionBudget") => add(
            &mut t,
            &[],
            &[
                ("spec.selector", FieldShape::AtomicStruct),
                ("status.conditions", CONDITIONS),
                ("status.disruptedPods", FieldShape::Map),
            ],
        ),
        ("autoscaling", "HorizontalPodAutoscaler") => add(
            &mut t,
            &[],
            &[
                ("spec.metrics", ATOMIC_LIST),
                ("status.conditions", CONDITIONS),
                ("status.currentMetrics", ATOMIC_LIST),
            ],
        ),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => add(
            &mut t,
            &[],
            &[
                ("spec.versions", ATOMIC_LIST),
                ("spec.names.shortNames", ATOMIC_LIST),
                ("spec.names.categories", ATOMIC_LIST),
                ("status.conditions", ssa_only_map(&["type"])),
                ("status.storedVersions", ATOMIC_LIST),
                ("status.acceptedNames.shortNames", ATOMIC_LIST),
                ("status.acceptedNames.categories", ATOMIC_LIST),
            ],
        ),
        _ => {}
    }
    t
}

/// API groups served by kube-apiserver itself (as opposed to CRDs). Only these support
/// strategic merge patch; custom resources get HTTP 415 for it.
const BUILTIN_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "coordination.k8s.io",
    "events.k8s.io",
    "rbac.authorization.k8s.io",
    "networking.k8s.io",
    "apiextensions.k8s.io",
    "admissionregistration.k8s.io",
    "apiregistration.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "discovery.k8s.io",
    "certificates.k8s.io",
    "node.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "resource.k8s.io",
];

/// Whether the kind is built into kube-apiserver (and therefore accepts strategic merge
/// patch and has typed merge metadata here).
pub fn is_builtin(gvk: &Gvk) -> bool {
    BUILTIN_GROUPS.contains(&gvk.group.as_str())
}

/// Merge metadata of the list at `path` (field names from the object root, list items
/// skipped), e.g. `["spec", "template", "spec", "containers", "ports"]` for a Deployment.
pub fn merge_key(gvk: &Gvk, path: &[&str]) -> Option<ListStrategy> {
    kind_table(gvk).into_iter().find_map(|(p, shape)| match shape {
        FieldShape::List(s) if p == path => Some(s),
        _ => None,
    })
}

/// Every list field of the kind with its merge metadata, so the API server can emit
/// `x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`, `x-kubernetes-list-type`
/// and `x-kubernetes-list-map-keys` in its OpenAPI documents.
pub fn list_fields(gvk: &Gvk) -> impl Iterator<Item = (Vec<&'static str>, ListStrategy)> {
    kind_table(gvk).into_iter().filter_map(|(p, shape)| match shape {
        FieldShape::List(s) => Some((p, s)),
        _ => None,
    })
}

/// Every field of the kind whose shape deviates from an ordinary struct field (lists, maps,
/// atomic structs, retainKeys), for OpenAPI emission (`x-kubernetes-map-type`,
/// `x-kubernetes-patch-strategy: retainKeys`). A `*` segment denotes a list's items.
pub fn field_shapes(gvk: &Gvk) -> impl Iterator<Item = (Vec<&'static str>, FieldShape)> {
    kind_table(gvk).into_iter()
}

/// Built schemas by (group, kind).
type SchemaCache = HashMap<(String, String), Arc<Schema>>;

/// Type information driving server-side apply (and strategic merge patch for lists): a tree
/// of the fields whose behaviour matters.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    pub(crate) root: Node,
}

/// What a field is, as far as merging and ownership are concerned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// An object with declared fields. `open` says what undeclared fields are: `Loose` for
    /// built-in structs (all real fields count as declared), `Deduced` for
    /// preserve-unknown-fields objects.
    Struct {
        fields: BTreeMap<String, Node>,
        open: Open,
        atomic: bool,
        /// A non-pointer Go struct: always present (possibly empty) in a stored built-in
        /// object, so it never appears as "added" or "removed" itself.
        value: bool,
    },
    /// `map[string]X`: keys are owned individually unless atomic.
    Map { elem: Box<Node>, atomic: bool },
    /// A list.
    List {
        item: Box<Node>,
        list_type: OwnedListType,
        smp: Option<ListStrategy>,
        /// A Go slice without `omitempty`: a stored typed object always has it (as `null`
        /// when empty), e.g. `containers`.
        value: bool,
    },
    /// A built-in field with no special marker: object fields are declared struct fields,
    /// lists are atomic.
    Loose,
    /// Schemaless data: object keys are map keys, lists atomic.
    Deduced,
}

/// Type of undeclared fields of a [`Node::Struct`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Open {
    Loose,
    Deduced,
}

/// [`ListType`] with owned keys (CRD schemas name their keys at runtime).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OwnedListType {
    Atomic,
    Set,
    Map(Vec<String>),
}

pub(crate) static LOOSE: Node = Node::Loose;
pub(crate) static DEDUCED: Node = Node::Deduced;

impl Node {
    fn loose_struct() -> Node {
        Node::Struct {
            fields: BTreeMap::new(),
            open: Open::Loose,
            atomic: false,
            value: false,
        }
    }

    /// Type of the value under object key `key`.
    pub(crate) fn child(&self, key: &str) -> &Node {
        match self {
            Node::Struct { fields, open, .. } => fields.get(key).unwrap_or(match open {
                Open::Loose => &LOOSE,
                Open::Deduced => &DEDUCED,
            }),
            Node::Map { elem, .. } => elem,
            Node::Loose => &LOOSE,
            _ => &DEDUCED,
        }
    }

    /// Whether `key` is a declared struct field (not a map key). structured-merge-diff only
    /// records non-empty declared fields through their children, whereas map keys are
    /// recorded themselves (the `.` marker in FieldsV1).
    pub(crate) fn is_declared_field(&self, key: &str) -> bool {
        match self {
            Node::Struct { fields, open, .. } => fields.contains_key(key) || *open == Open::Loose,
            Node::Loose => true,
            _ => false,
        }
    }

    /// Whether a stored built-in object always has this field (see [`FieldShape::ValueStruct`]).
    pub(crate) fn is_value_struct(&self) -> bool {
        matches!(self, Node::Struct { value: true, .. })
    }

    /// Whether a stored built-in object always has this list, as `null` when empty.
    pub(crate) fn is_value_list(&self) -> bool {
        matches!(self, Node::List { value: true, .. })
    }

    /// Whether an object value of this type is replaced as a whole.
    pub(crate) fn object_is_atomic(&self) -> bool {
        match self {
            Node::Struct { atomic, .. } | Node::Map { atomic, .. } => *atomic,
            Node::List { .. } => true,
            _ => false,
        }
    }

    /// List type of a list value of this type (atomic unless declared otherwise).
    pub(crate) fn list_type(&self) -> &OwnedListType {
        static ATOMIC: OwnedListType = OwnedListType::Atomic;
        match self {
            Node::List { list_type, .. } => list_type,
            _ => &ATOMIC,
        }
    }

    /// Item type of a list value of this type.
    pub(crate) fn item(&self) -> &Node {
        match self {
            Node::List { item, .. } => item,
            Node::Loose | Node::Struct { .. } => &LOOSE,
            _ => &DEDUCED,
        }
    }

    /// Strategic merge metadata of a list value of this type.
    pub(crate) fn smp_list(&self) -> Option<ListStrategy> {
        match self {
            Node::List { smp, .. } => *smp,
            _ => None,
        }
    }

    /// Descends to (creating as needed) the node at `path`; `*` enters list items.
    fn entry(&mut self, path: &[&str]) -> &mut Node {
        let Some((first, rest)) = path.split_first() else {
            return self;
        };
        let next: &mut Node = if *first == "*" {
            if !matches!(self, Node::List { .. }) {
                *self = Node::List {
                    item: Box::new(Node::loose_struct()),
                    list_type: OwnedListType::Atomic,
                    smp: None,
                    value: false,
                };
            }
            match self {
                Node::List { item, .. } => item,
                _ => unreachable!("converted to a list just above"),
            }
        } else {
            // Field access: lists and maps are entered through their items first.
            let container: &mut Node = match self {
                Node::List { item, .. } => item,
                Node::Map { elem, .. } => elem,
                other => other,
            };
            if !matches!(container, Node::Struct { .. }) {
                *container = Node::loose_struct();
            }
            match container {
                Node::Struct { fields, .. } => {
                    fields.entry((*first).to_string()).or_insert_with(|| Node::Loose)
                }
                _ => unreachable!("converted to a struct just above"),
            }
        };
        next.entry(rest)
    }

    fn set_shape(&mut self, shape: FieldShape) {
        match shape {
            FieldShape::List(s) => {
                let (item, value) = match std::mem::replace(self, Node::Loose) {
                    Node::List { item, value, .. } => (item, value),
                    Node::Struct { .. } | Node::Loose => (Box::new(Node::loose_struct()), false),
                    other => (Box::new(other), false),
                };
                let list_type = match s.list_type {
                    ListType::Atomic => OwnedListType::Atomic,
                    ListType::Set => OwnedListType::Set,
                    ListType::Map(keys) => OwnedListType::Map(keys.iter().map(|k| k.to_string()).collect()),
                };
                *self = Node::List {
                    item,
                    list_type,
                    smp: Some(s),
                    value,
                };
            }
            FieldShape::Map => {
                *self = Node::Map {
                    elem: Box::new(Node::Loose),
                    atomic: false,
                }
            }
            FieldShape::AtomicMap => {
                *self = Node::Map {
                    elem: Box::new(Node::Loose),
                    atomic: true,
                }
            }
            FieldShape::AtomicStruct => {
                *self = Node::Struct {
                    fields: BTreeMap::new(),
                    open: Open::Loose,
                    atomic: true,
                    value: false,
                }
            }
            FieldShape::RetainKeys => {
                if !matches!(self, Node::Struct { .. }) {
                    *self = Node::loose_struct();
                }
            }
            FieldShape::ValueStruct => {
                if !matches!(self, Node::Struct { .. } | Node::List { .. }) {
                    *self = Node::loose_struct();
                }
                if let Node::Struct { value, .. } | Node::List { value, .. } = self {
                    *value = true;
                }
            }
        }
    }
}

/// `metadata` as every object has it, for schemas built from CRDs.
fn object_meta_node() -> Node {
    let mut n = Node::loose_struct();
    for (path, shape) in OBJECT_META {
        let p: Vec<&str> = path.split('.').collect();
        n.entry(&p).set_shape(*shape);
    }
    n
}

impl Schema {
    /// The schema of a built-in kind (or of any kind, treating its fields as ordinary
    /// struct fields beyond `metadata`).
    pub fn builtin(gvk: &Gvk) -> Schema {
        let mut root = Node::loose_struct();
        for (path, shape) in kind_table(gvk) {
            root.entry(&path).set_shape(shape);
        }
        Schema { root }
    }

    /// The schema kube-apiserver uses for custom resources whose structure is unknown:
    /// typed `metadata`, everything else deduced (objects granular, lists atomic).
    pub fn deduced() -> Schema {
        let mut fields = BTreeMap::new();
        fields.insert("metadata".to_string(), object_meta_node());
        fields.insert("apiVersion".to_string(), Node::Loose);
        fields.insert("kind".to_string(), Node::Loose);
        Schema {
            root: Node::Struct {
                fields,
                open: Open::Deduced,
                atomic: false,
                value: false,
            },
        }
    }

    /// The schema for `gvk`: the built-in table for built-in groups, [`Schema::deduced`]
    /// otherwise.
    pub fn for_gvk(gvk: &Gvk) -> Schema {
        if is_builtin(gvk) {
            Schema::builtin(gvk)
        } else {
            Schema::deduced()
        }
    }

    /// [`Schema::for_gvk`], built once per group and kind and shared: every write to the
    /// API server goes through managedFields bookkeeping, so the tree is not rebuilt per
    /// request.
    pub fn cached(gvk: &Gvk) -> Arc<Schema> {
        static CACHE: OnceLock<Mutex<SchemaCache>> = OnceLock::new();
        let key = if is_builtin(gvk) {
            (gvk.group.clone(), gvk.kind.clone())
        } else {
            // Every custom resource shares the deduced schema.
            (String::from("*"), String::new())
        };
        let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
        let mut map = cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        map.entry(key)
            .or_insert_with(|| Arc::new(Schema::for_gvk(gvk)))
            .clone()
    }

    /// Builds the schema of a custom resource from its CRD version's
    /// `schema.openAPIV3Schema` (a structural schema), honouring `properties`,
    /// `additionalProperties`, `items`, `x-kubernetes-list-type`,
    /// `x-kubernetes-list-map-keys`, `x-kubernetes-map-type` and
    /// `x-kubernetes-preserve-unknown-fields`. `metadata` is always the standard ObjectMeta.
    pub fn from_openapi_v3(schema: &Value) -> Schema {
        let mut root = openapi_node(schema);
        if let Node::Struct { fields, .. } = &mut root {
            fields.insert("metadata".to_string(), object_meta_node());
            fields.insert("apiVersion".to_string(), Node::Loose);
            fields.insert("kind".to_string(), Node::Loose);
        }
        Schema { root }
    }
}

fn openapi_node(s: &Value) -> Node {
    let ty = s.get("type").and_then(Value::as_str);
    let preserve = s
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let map_atomic = s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
    if ty == Some("array") || s.get("items").is_some() {
        let item = s.get("items").map(openapi_node).unwrap_or(Node::Deduced);
        let list_type = match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => OwnedListType::Set,
            Some("map") => OwnedListType::Map(
                s.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(|k| k.as_str().map(str::to_string)).collect())
                    .unwrap_or_default(),
            ),
            _ => OwnedListType::Atomic,
        };
        return Node::List {
            item: Box::new(item),
            list_type,
            smp: None,
            value: false,
        };
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        let fields = props.iter().map(|(k, v)| (k.clone(), openapi_node(v))).collect();
        return Node::Struct {
            fields,
            open: Open::Deduced,
            atomic: map_atomic,
            value: false,
        };
    }
    match s.get("additionalProperties") {
        Some(ap @ Value::Object(_)) => {
            return Node::Map {
                elem: Box::new(openapi_node(ap)),
                atomic: map_atomic,
            };
        }
        Some(Value::Bool(true)) => {
            return Node::Map {
                elem: Box::new(Node::Deduced),
                atomic: map_atomic,
            };
        }
        _ => {}
    }
    if ty == Some("object") && !preserve {
        return Node::Struct {
            fields: BTreeMap::new(),
            open: Open::Deduced,
            atomic: map_atomic,
            value: false,
        };
    }
    if map_atomic {
        return Node::Map {
            elem: Box::new(Node::Deduced),
            atomic: true,
        };
    }
    Node::Deduced
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_container_ports() {
        let gvk = Gvk::new("apps", "v1", "Deployment");
        let s = merge_key(&gvk, &["spec", "template", "spec", "containers", "ports"]).unwrap();
        assert_eq!(s.merge_key, Some("containerPort"));
        assert_eq!(s.list_type, ListType::Map(&["containerPort", "protocol"]));
        assert!(
            merge_key(&gvk, &["spec", "template", "spec", "tolerations"]).is_some_and(|s| !s.smp_merges())
        );
    }

    #[test]
    fn finalizers_are_a_merged_set_everywhere() {
        let s = merge_key(&Gvk::new("example.com", "v1", "Foo"), &["metadata", "finalizers"]);
        assert_eq!(s.map(|s| s.list_type), Some(ListType::Set));
        assert!(s.unwrap().smp_merges());
    }

    #[test]
    fn builtin_tree_shapes() {
        let s = Schema::builtin(&Gvk::new("apps", "v1", "Deployment"));
        let containers = s
            .root
            .child("spec")
            .child("template")
            .child("spec")
            .child("containers");
        assert_eq!(
            containers.list_type(),
            &OwnedListType::Map(vec!["name".to_string()])
        );
        assert!(s.root.child("spec").child("selector").object_is_atomic());
        assert!(!s.root.child("metadata").child("labels").is_declared_field("app"));
        assert!(s.root.child("spec").is_declared_field("replicas"));
        let owner_item = s.root.child("metadata").child("ownerReferences").item();
        assert!(owner_item.object_is_atomic());
    }

    #[test]
    fn crd_schema_conversion() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "params": {"type": "object", "additionalProperties": {"type": "string"}},
                    "items": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
                }}
            }
        });
        let s = Schema::from_openapi_v3(&schema);
        let spec = s.root.child("spec");
        assert!(spec.is_declared_field("params"));
        assert!(!spec.child("params").is_declared_field("anything"));
        assert_eq!(
            spec.child("items").list_type(),
            &OwnedListType::Map(vec!["name".into()])
        );
        assert!(!s.root.child("metadata").child("labels").is_declared_field("x"));
    }
}
