//! Server-side apply and `metadata.managedFields` bookkeeping.
//!
//! Behaviour follows the Kubernetes documentation of server-side apply
//! (<https://kubernetes.io/docs/reference/using-api/server-side-apply/>) and the shape of
//! the managedFields kube-apiserver writes:
//!
//! * every write records, per *field manager*, the set of fields it owns (FieldsV1);
//!   `Apply` entries hold exactly the fields of the manager's last applied configuration,
//!   `Update` entries accumulate the fields a manager changed with PUT/PATCH/POST;
//! * an apply that changes a field (adds it or gives it a different value) owned by another
//!   manager is a conflict, unless forced, which transfers the ownership; applying the same
//!   value as another manager shares ownership instead;
//! * fields a manager applied before and omits now are removed from the object when nobody
//!   else owns them (struct fields stay while anything below them is owned; list items and
//!   map entries need an owner of their own);
//! * a non-apply write takes ownership of the fields it changed away from every other
//!   manager, so a later apply by them conflicts;
//! * `apiVersion`, `kind`, `metadata.name`/`namespace`/`uid`/`resourceVersion`/
//!   `generation`/`creationTimestamp`/`managedFields` are never owned; `status` is not owned
//!   through the main resource of kinds with a status subresource, and only `status` is
//!   owned through `/status`;
//! * a write that changes neither the object nor any field set keeps the old timestamps, so
//!   re-applying an unchanged manifest is a no-op.
//!
//! Lists merge by schema: associative lists by their keys, sets by value, everything else
//! atomically; maps and structs merge field by field unless atomic.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use crate::fieldpath::{FieldSet, KeyValue, Path, PathElement, path_to_string};
use crate::json_patch::json_equal;
use crate::schema::{self, Node, OwnedListType, Schema};
use crate::{Conflict, Gvk, SsaError};

/// Per-request settings beyond the plain [`apply`]/[`record_update`] parameters.
#[derive(Debug, Clone, Default)]
pub struct Options<'a> {
    /// Type information; defaults to [`Schema::for_gvk`] (built-in table, or deduced for
    /// custom resources). Pass [`Schema::from_openapi_v3`] for CRDs with a schema.
    pub schema: Option<&'a Schema>,
    /// The subresource written (`Some("status")` for `/status`), recorded in the entry.
    pub subresource: Option<&'a str>,
    /// Whether the kind has a `/status` subresource (then the main resource does not own
    /// `status`). Defaults to `true` for built-in kinds and `false` otherwise.
    pub status_subresource: Option<bool>,
}

/// One decoded `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedFieldsEntry {
    /// Field manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// API version the fields are expressed in.
    pub api_version: String,
    /// RFC 3339 time of the last change by this manager.
    pub time: Option<String>,
    /// Subresource written through, if any.
    pub subresource: Option<String>,
    /// The owned fields.
    pub fields: FieldSet,
}

impl ManagedFieldsEntry {
    fn same_identity(&self, other: &ManagedFieldsEntry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == "Apply" || self.api_version == other.api_version)
    }

    /// JSON form, with kube-apiserver's key order.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if let Some(s) = &self.subresource {
            m.insert("subresource".into(), json!(s));
        }
        Value::Object(m)
    }
}

/// Why `metadata.managedFields` cannot be read ([`managed_fields`]).
#[derive(Debug, thiserror::Error)]
pub enum ManagedFieldsError {
    /// `metadata.managedFields` is present but not a list.
    #[error("metadata.managedFields must be a list")]
    NotAList,
    /// An entry's `fieldsType` is something other than `FieldsV1`.
    #[error("managedFields[{index}]: unsupported fieldsType {fields_type:?}")]
    FieldsType {
        /// Index of the entry in `metadata.managedFields`.
        index: usize,
        /// The `fieldsType` it declares.
        fields_type: String,
    },
    /// An entry's `fieldsV1` cannot be read.
    #[error("managedFields[{index}]: {source}")]
    Fields {
        /// Index of the entry in `metadata.managedFields`.
        index: usize,
        /// Why its `fieldsV1` cannot be read.
        source: crate::fieldpath::FieldsV1Error,
    },
}

/// An object whose fields cannot be listed against its schema ([`field_set`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FieldSetError(pub String);

/// Decodes `metadata.managedFields` of an object (empty when absent).
pub fn managed_fields(obj: &Value) -> Result<Vec<ManagedFieldsEntry>, ManagedFieldsError> {
    let Some(list) = obj.pointer("/metadata/managedFields") else {
        return Ok(Vec::new());
    };
    if list.is_null() {
        return Ok(Vec::new());
    }
    let list = list.as_array().ok_or(ManagedFieldsError::NotAList)?;
    let mut out = Vec::new();
    for (i, e) in list.iter().enumerate() {
        let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
        if let Some(ft) = s("fieldsType")
            && ft != "FieldsV1"
        {
            return Err(ManagedFieldsError::FieldsType {
                index: i,
                fields_type: ft,
            });
        }
        let fields = match e.get("fieldsV1") {
            Some(v) if !v.is_null() => FieldSet::from_fields_v1(v)
                .map_err(|source| ManagedFieldsError::Fields { index: i, source })?,
            _ => FieldSet::new(),
        };
        out.push(ManagedFieldsEntry {
            manager: s("manager").unwrap_or_default(),
            operation: s("operation").unwrap_or_default(),
            api_version: s("apiVersion").unwrap_or_default(),
            time: s("time"),
            subresource: s("subresource").filter(|s| !s.is_empty()),
            fields,
        });
    }
    Ok(out)
}

/// Encodes entries in kube-apiserver's order: `Apply` before `Update`, then by time,
/// manager, apiVersion and subresource.
fn encode(mut entries: Vec<ManagedFieldsEntry>) -> Value {
    entries.sort_by(|a, b| {
        a.operation
            .cmp(&b.operation)
            .then_with(|| {
                a.time
                    .as_deref()
                    .unwrap_or("")
                    .cmp(b.time.as_deref().unwrap_or(""))
            })
            .then_with(|| a.manager.cmp(&b.manager))
            .then_with(|| a.api_version.cmp(&b.api_version))
            .then_with(|| a.subresource.cmp(&b.subresource))
    });
    Value::Array(entries.iter().map(ManagedFieldsEntry::to_json).collect())
}

fn set_managed_fields(obj: &mut Value, entries: Vec<ManagedFieldsEntry>) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let meta = map.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    meta.shift_remove("managedFields");
    if !entries.is_empty() {
        meta.insert("managedFields".into(), encode(entries));
    }
}

fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.shift_remove("managedFields");
    }
    v
}

fn entries_equal_ignoring_time(a: &[ManagedFieldsEntry], b: &[ManagedFieldsEntry]) -> bool {
    a.len() == b.len()
        && a.iter().all(|x| {
            b.iter()
                .any(|y| x.same_identity(y) && x.fields == y.fields && x.api_version == y.api_version)
        })
}

/// Which fields a write may own.
struct Tracking {
    subresource: Option<String>,
    status_subresource: bool,
}

impl Tracking {
    fn new(gvk: &Gvk, opts: &Options<'_>) -> Self {
        Tracking {
            subresource: opts.subresource.map(str::to_string),
            status_subresource: opts.status_subresource.unwrap_or_else(|| schema::is_builtin(gvk)),
        }
    }

    fn is_status_write(&self) -> bool {
        self.subresource.as_deref() == Some("status")
    }

    /// Removes the never-owned server fields and the fields this endpoint cannot write.
    fn filter(&self, mut set: FieldSet) -> FieldSet {
        let f = |s: &str| PathElement::Field(s.to_string());
        for k in ["apiVersion", "kind", "metadata"] {
            set.remove_member(&f(k));
        }
        set.with_child_mut(&f("metadata"), |meta| {
            for k in [
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "clusterName",
                "generation",
                "managedFields",
                "resourceVersion",
            ] {
                meta.remove_member(&f(k));
            }
        });
        let status = f("status");
        if self.is_status_write() {
            set.retain_elements(|pe| *pe == status);
        } else if self.status_subresource {
            set.remove_element(&status);
        }
        set
    }

    /// Restricts an applied configuration to what this endpoint may change.
    fn restrict_config(&self, config: &mut Value) {
        let Some(map) = config.as_object_mut() else {
            return;
        };
        if self.is_status_write() {
            map.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
            if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.retain(|k, _| k == "name" || k == "namespace");
            }
        } else if self.status_subresource {
            map.shift_remove("status");
        }
    }
}

/// Manager that owns the fields of an object without managedFields when it is first applied.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Metadata the server owns: an applied configuration cannot set it (kube-apiserver restores
/// it from the stored object), so it must neither be merged nor delete the live value when
/// sent as `null` (e.g. `creationTimestamp: null` from `kubectl create --dry-run -o yaml`).
/// The API server checks `resourceVersion`/`uid` preconditions itself before applying.
const SERVER_METADATA: [&str; 8] = [
    "creationTimestamp",
    "uid",
    "resourceVersion",
    "generation",
    "selfLink",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

fn strip_server_metadata(config: &mut Value) {
    if let Some(meta) = config.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in SERVER_METADATA {
            meta.shift_remove(k);
        }
    }
}

/// Server-side apply of `applied` by `manager` onto `live` (`None` creates the object).
///
/// Returns the new object with `metadata.managedFields` updated. `now` is the RFC 3339 time
/// written into the applier's entry. The result equals `live` exactly when the apply
/// changes nothing (the server then skips the write and keeps the resourceVersion).
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    gvk: &Gvk,
    now: &str,
) -> Result<Value, SsaError> {
    apply_with(live, applied, manager, force, gvk, now, &Options::default())
}

/// [`apply`] with explicit [`Options`] (CRD schema, `/status`, status subresource).
pub fn apply_with(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    gvk: &Gvk,
    now: &str,
    opts: &Options<'_>,
) -> Result<Value, SsaError> {
    let applied_map = applied
        .as_object()
        .ok_or_else(|| SsaError::BadRequest("the applied configuration must be a JSON object".into()))?;
    if manager.is_empty() {
        return Err(SsaError::BadRequest(
            "PATCH, application/apply-patch+yaml requests require a fieldManager".into(),
        ));
    }
    match applied_map.get("apiVersion").and_then(Value::as_str) {
        None => {
            return Err(SsaError::BadRequest(format!(
                "Object 'apiVersion' is missing in '{applied}'"
            )));
        }
        Some(v) if v != gvk.api_version() => {
            return Err(SsaError::BadRequest(format!(
                "Incorrect version specified in apply patch. Specified patch version: {v}, expected: {}",
                gvk.api_version()
            )));
        }
        Some(_) => {}
    }
    if applied_map.get("kind").and_then(Value::as_str).is_none() {
        return Err(SsaError::BadRequest(format!(
            "Object 'Kind' is missing in '{applied}'"
        )));
    }
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(SsaError::BadRequest("metadata.managedFields must be nil".into()));
    }

    let cached;
    let schema = match opts.schema {
        Some(s) => s,
        None => {
            cached = Schema::cached(gvk);
            &*cached
        }
    };
    let tracking = Tracking::new(gvk, opts);
    let typed_err =
        |e: String| SsaError::Invalid(format!("failed to create typed patch object ({gvk}): {e}"));

    let mut managers = live
        .map(managed_fields)
        .unwrap_or_else(|| Ok(Vec::new()))
        .map_err(|e| SsaError::Invalid(format!("failed to decode managed fields: {e}")))?;
    let old_managers = managers.clone();
    let live_clean = live.map_or_else(|| Value::Object(Map::new()), without_managed_fields);
    if live.is_some() && managers.is_empty() {
        // An existing object nobody manages yet: kube-apiserver hands all its fields to a
        // placeholder updater, so that a first apply conflicts instead of silently
        // overwriting values it did not set.
        if let Ok(existing) = to_field_set(&live_clean, &schema.root, false) {
            let existing = tracking.filter(existing);
            if !existing.is_empty() {
                managers.push(ManagedFieldsEntry {
                    manager: BEFORE_FIRST_APPLY.into(),
                    operation: "Update".into(),
                    api_version: live_clean
                        .get("apiVersion")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| gvk.api_version()),
                    time: None,
                    subresource: None,
                    fields: existing,
                });
            }
        }
    }

    let mut config = applied.clone();
    tracking.restrict_config(&mut config);
    strip_server_metadata(&mut config);
    let config_set = tracking.filter(to_field_set(&config, &schema.root, true).map_err(typed_err)?);

    // Merge the configuration into the live object.
    let mut merged = merge_value(Some(live_clean.clone()), &config, &schema.root)
        .unwrap_or_else(|| Value::Object(Map::new()));

    let me = ManagedFieldsEntry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: gvk.api_version(),
        time: Some(now.to_string()),
        subresource: tracking.subresource.clone(),
        fields: config_set,
    };
    let last_set = match managers.iter().position(|e| e.same_identity(&me)) {
        Some(i) => managers.remove(i).fields,
        None => FieldSet::new(),
    };

    // Remove what this manager applied before, omits now, and nobody else owns.
    if !last_set.is_empty() {
        let mut owned = me.fields.clone();
        for e in &managers {
            owned = owned.union(&e.fields);
        }
        prune(&mut merged, &last_set, Some(&owned), &schema.root);
    }

    let mut cmp = compare(&live_clean, &merged, &schema.root);
    let changed = tracking.filter(cmp.added.union(&cmp.modified));
    let removed = tracking.filter(std::mem::take(&mut cmp.removed));

    let mut causes: Vec<(Path, Conflict)> = Vec::new();
    let mut conflict_sets: Vec<FieldSet> = Vec::new();
    for e in &managers {
        let c = e.fields.intersection(&changed);
        for p in c.paths() {
            let conflict = Conflict {
                path: path_to_string(&p),
                manager: e.manager.clone(),
                operation: e.operation.clone(),
                api_version: e.api_version.clone(),
                time: e.time.clone(),
                subresource: e.subresource.clone(),
            };
            causes.push((p, conflict));
        }
        conflict_sets.push(c);
    }
    if !force && !causes.is_empty() {
        // `kubectl apply --server-side` over a client-side-applied object: conflicts on
        // fields whose live value is still the one in the last-applied annotation are the
        // user's own earlier intent, and are taken over silently.
        let allowed = (manager == KUBECTL)
            .then(|| last_applied_fields(&live_clean, &schema.root))
            .flatten();
        let remaining: Vec<Conflict> = causes
            .into_iter()
            .filter(|(p, _)| !allowed.as_ref().is_some_and(|a| a.has(p)))
            .map(|(_, c)| c)
            .collect();
        if !remaining.is_empty() {
            return Err(SsaError::Conflict { causes: remaining });
        }
    }
    for (e, c) in managers.iter_mut().zip(&conflict_sets) {
        e.fields = e.fields.difference(c).difference(&removed);
    }
    managers.push(me);
    managers.retain(|e| !e.fields.is_empty());

    if manager == KUBECTL {
        sync_last_applied(&mut merged, applied);
    }

    if json_equal(&merged, &live_clean) && entries_equal_ignoring_time(&managers, &old_managers) {
        // Nothing changed: keep the old timestamps so the write is a no-op.
        return Ok(live.cloned().unwrap_or(live_clean));
    }
    set_managed_fields(&mut merged, managers);
    Ok(merged)
}

/// The field manager `kubectl apply --server-side` uses by default; kube-apiserver keeps the
/// client-side-apply annotation in sync for it.
const KUBECTL: &str = "kubectl";

/// kubectl's client-side apply annotation.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Fields of the live object's last-applied annotation whose live value still equals the
/// annotation's (`None` without a usable annotation).
fn last_applied_fields(live: &Value, root: &Node) -> Option<FieldSet> {
    let text = live
        .pointer("/metadata/annotations")?
        .get(LAST_APPLIED_ANNOTATION)?
        .as_str()?;
    let last: Value = serde_json::from_str(text).ok()?;
    if !last.is_object() {
        return None;
    }
    let set = to_field_set(&last, root, false).ok()?;
    let cmp = compare(&last, live, root);
    Some(set.difference(&cmp.modified))
}

/// When the object carries the client-side apply annotation, kube-apiserver rewrites it
/// with the configuration `kubectl` just applied (without the annotation itself), encoded
/// like Go's `encoding/json` (sorted keys, HTML-safe escapes, trailing newline).
fn sync_last_applied(obj: &mut Value, applied: &Value) {
    let Some(annotations) = obj
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if !annotations.contains_key(LAST_APPLIED_ANNOTATION) {
        return;
    }
    let mut config = applied.clone();
    if let Some(a) = config
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        a.shift_remove(LAST_APPLIED_ANNOTATION);
    }
    let text = format!("{}\n", go_json(&config));
    annotations.insert(LAST_APPLIED_ANNOTATION.to_string(), Value::String(text));
}

/// Compact JSON as Go's `encoding/json` writes a `map[string]interface{}`: object keys
/// sorted, and `<`, `>`, `&`, U+2028, U+2029 escaped.
pub fn go_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v)
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// Records a non-apply write (create, update, patch) by `manager` in the managedFields of
/// `new`, which is returned. `old` is the stored object before the write (`None` for a
/// create); `operation` is normally `"Update"`; `subresource` is `Some("status")` for
/// `/status` writes.
///
/// Managed fields sent by the client in `new` are honoured (that is how clients edit or
/// reset them: a single empty entry `[{}]` clears them), otherwise `old`'s are carried over.
pub fn record_update(
    old: Option<&Value>,
    new: &Value,
    manager: &str,
    operation: &str,
    subresource: Option<&str>,
    gvk: &Gvk,
    now: &str,
) -> Value {
    let opts = Options {
        subresource,
        ..Options::default()
    };
    record_update_with(old, new, manager, operation, gvk, now, &opts)
}

/// [`record_update`] with explicit [`Options`].
pub fn record_update_with(
    old: Option<&Value>,
    new: &Value,
    manager: &str,
    operation: &str,
    gvk: &Gvk,
    now: &str,
    opts: &Options<'_>,
) -> Value {
    let cached;
    let schema = match opts.schema {
        Some(s) => s,
        None => {
            cached = Schema::cached(gvk);
            &*cached
        }
    };
    let tracking = Tracking::new(gvk, opts);
    let old_managers = old.map(managed_fields).and_then(Result::ok).unwrap_or_default();

    let requested = new.pointer("/metadata/managedFields");
    let reset = requested
        .and_then(Value::as_array)
        .is_some_and(|a| a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty));
    let mut managers = if reset {
        Vec::new()
    } else if tracking.subresource.is_some() {
        old_managers.clone()
    } else {
        match managed_fields(new) {
            Ok(m) if !m.is_empty() => m,
            _ => old_managers.clone(),
        }
    };

    let old_clean = old.map_or_else(|| Value::Object(Map::new()), without_managed_fields);
    let mut out = without_managed_fields(new);
    let mut cmp = compare(&old_clean, &out, &schema.root);
    let current = tracking.filter(cmp.added.union(&cmp.modified));
    let removed = tracking.filter(std::mem::take(&mut cmp.removed));
    for e in &mut managers {
        e.fields = e.fields.difference(&current).difference(&removed);
    }
    let api_version = new
        .get("apiVersion")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| gvk.api_version());
    if !current.is_empty() {
        let me = ManagedFieldsEntry {
            manager: manager.to_string(),
            operation: operation.to_string(),
            api_version,
            time: Some(now.to_string()),
            subresource: tracking.subresource.clone(),
            fields: current,
        };
        match managers.iter_mut().find(|e| e.same_identity(&me)) {
            Some(e) => {
                e.fields = e.fields.union(&me.fields);
                e.time = me.time;
            }
            None => managers.push(me),
        }
    }
    managers.retain(|e| !e.fields.is_empty());
    cap_update_managers(&mut managers);
    set_managed_fields(&mut out, managers);
    out
}

/// kube-apiserver keeps at most this many `Update` entries; older ones are folded into one
/// entry named `ancient-changes`.
pub const MAX_UPDATE_MANAGERS: usize = 10;

fn cap_update_managers(managers: &mut Vec<ManagedFieldsEntry>) {
    let updates = managers.iter().filter(|e| e.operation == "Update").count();
    if updates <= MAX_UPDATE_MANAGERS {
        return;
    }
    let mut idx: Vec<usize> = (0..managers.len())
        .filter(|&i| managers[i].operation == "Update" && managers[i].manager != "ancient-changes")
        .collect();
    idx.sort_by(|&a, &b| managers[a].time.cmp(&managers[b].time));
    let excess = updates - MAX_UPDATE_MANAGERS + 1;
    let fold: HashSet<usize> = idx.into_iter().take(excess).collect();
    let mut ancient = FieldSet::new();
    let mut api_version = String::new();
    let mut kept = Vec::new();
    for (i, e) in managers.drain(..).enumerate() {
        if fold.contains(&i) || (e.operation == "Update" && e.manager == "ancient-changes") {
            ancient = ancient.union(&e.fields);
            api_version = e.api_version.clone();
        } else {
            kept.push(e);
        }
    }
    kept.push(ManagedFieldsEntry {
        manager: "ancient-changes".into(),
        operation: "Update".into(),
        api_version,
        time: None,
        subresource: None,
        fields: ancient,
    });
    *managers = kept;
}

/// The fields `obj` sets, as an applier of it would own them (without the never-owned
/// server fields). Useful to inspect ownership in tests and tools.
pub fn field_set(obj: &Value, gvk: &Gvk) -> Result<FieldSet, FieldSetError> {
    let schema = Schema::cached(gvk);
    let set = to_field_set(obj, &schema.root, true).map_err(FieldSetError)?;
    let tracking = Tracking {
        subresource: None,
        status_subresource: false,
    };
    Ok(tracking.filter(set))
}

// ---------------------------------------------------------------------------------------
// Typed walks over values
// ---------------------------------------------------------------------------------------

/// Default values of list-map key fields, as the typed schemas declare them: every
/// `protocol` key (container and service ports) defaults to `TCP`.
fn key_default(name: &str) -> Option<Value> {
    (name == "protocol").then(|| json!("TCP"))
}

/// Path element of a list item, by the list's type.
fn item_element(item: &Value, list_type: &OwnedListType) -> Result<PathElement, String> {
    match list_type {
        OwnedListType::Set => match item {
            Value::Object(_) | Value::Array(_) => Err(format!("expected a scalar in a set, got {item}")),
            v => Ok(PathElement::Value(KeyValue(v.clone()))),
        },
        OwnedListType::Map(keys) => {
            let obj = item
                .as_object()
                .ok_or_else(|| format!("expected an object in an associative list, got {item}"))?;
            let mut fields = Vec::new();
            for k in keys {
                let v = match obj.get(k) {
                    Some(v) if !v.is_null() => v.clone(),
                    _ => key_default(k).ok_or_else(|| {
                        format!(
                            "associative list with keys has an element that omits key field {k:?} (and doesn't have default value)"
                        )
                    })?,
                };
                fields.push((k.clone(), KeyValue(v)));
            }
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(PathElement::Key(fields))
        }
        OwnedListType::Atomic => Err("atomic lists have no item elements".into()),
    }
}

/// Collects the fields `v` sets (structured-merge-diff's rules: leaves, list items, map
/// keys, empty or null struct fields and atomic values are members; declared struct fields
/// with content are recorded only through their children). `strict` rejects duplicate
/// associative-list keys, as for applied configurations.
fn to_field_set(v: &Value, node: &Node, strict: bool) -> Result<FieldSet, String> {
    let mut set = FieldSet::new();
    if granular(v, node) {
        fill_level(v, node, &mut set, strict).map_err(|e| e.render())?;
    }
    Ok(set)
}

/// A typing error, with the path collected while unwinding (innermost element first).
struct FieldError {
    rev_path: Vec<PathElement>,
    detail: String,
}

impl FieldError {
    fn under(mut self, pe: &PathElement) -> Self {
        self.rev_path.push(pe.clone());
        self
    }

    fn render(self) -> String {
        let path: Vec<PathElement> = self.rev_path.into_iter().rev().collect();
        format!("{}: {}", path_to_string(&path), self.detail)
    }
}

/// Fills `level` with the members and sub-sets of the children of the granular value `v`.
fn fill_level(v: &Value, node: &Node, level: &mut FieldSet, strict: bool) -> Result<(), FieldError> {
    match v {
        Value::Object(m) => {
            for (k, cv) in m {
                let child = node.child(k);
                let pe = PathElement::Field(k.clone());
                let g = granular(cv, child);
                let mut sub = FieldSet::new();
                if g {
                    fill_level(cv, child, &mut sub, strict).map_err(|e| e.under(&pe))?;
                }
                let member = !g || cv.as_object().is_some_and(Map::is_empty) || !node.is_declared_field(k);
                level.put(pe, member, sub);
            }
        }
        Value::Array(items) => {
            let lt = node.list_type();
            let item_node = node.item();
            let mut seen = HashSet::new();
            for (i, item) in items.iter().enumerate() {
                let pe = item_element(item, lt).map_err(|e| FieldError {
                    rev_path: Vec::new(),
                    detail: format!("element {i}: {e}"),
                })?;
                if strict && matches!(lt, OwnedListType::Map(_)) && !seen.insert(pe.clone()) {
                    return Err(FieldError {
                        rev_path: Vec::new(),
                        detail: format!("duplicate entries for key {pe}"),
                    });
                }
                let mut sub = FieldSet::new();
                if granular(item, item_node) {
                    fill_level(item, item_node, &mut sub, strict).map_err(|e| e.under(&pe))?;
                }
                level.put(pe, true, sub);
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether a value of this type is tracked granularly (has children in field sets).
fn granular(v: &Value, node: &Node) -> bool {
    match v {
        Value::Object(_) => !node.object_is_atomic(),
        Value::Array(_) => *node.list_type() != OwnedListType::Atomic,
        _ => false,
    }
}

fn is_empty_container(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Drops `null` members of objects: the stored object never keeps explicit nulls (typed
/// decoding turns them into absent fields).
fn clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(clean).collect()),
        other => other.clone(),
    }
}

/// Merges the applied configuration `rhs` into `lhs`; `None` means "field absent".
fn merge_value(lhs: Option<Value>, rhs: &Value, node: &Node) -> Option<Value> {
    if rhs.is_null() {
        return None;
    }
    match (lhs, rhs) {
        (Some(Value::Object(mut out)), Value::Object(r)) if !node.object_is_atomic() => {
            for (k, rv) in r {
                let current = out.get_mut(k).map(std::mem::take);
                match merge_value(current, rv, node.child(k)) {
                    Some(v) => {
                        out.insert(k.clone(), v);
                    }
                    None => {
                        out.shift_remove(k);
                    }
                }
            }
            Some(Value::Object(out))
        }
        (Some(Value::Array(l)), Value::Array(r)) if granular(rhs, node) => {
            let lt = node.list_type();
            let item_node = node.item();
            Some(Value::Array(merge_items(
                l,
                r,
                |v| item_element(v, lt).ok(),
                |lv, rv| merge_value(lv, rv, item_node),
            )))
        }
        _ => Some(clean(rhs)),
    }
}

/// Merges list items identified by `element`, in structured-merge-diff's order: walking
/// both lists, items only in `l` are emitted where they stand, shared items in the order of
/// `r`, and new items of `r` where `r` has them.
fn merge_items(
    l: Vec<Value>,
    r: &[Value],
    element: impl Fn(&Value) -> Option<PathElement>,
    mut merge: impl FnMut(Option<Value>, &Value) -> Option<Value>,
) -> Vec<Value> {
    let lkeys: Vec<Option<PathElement>> = l.iter().map(&element).collect();
    let rkeys: Vec<Option<PathElement>> = r.iter().map(&element).collect();
    let mut l: Vec<Option<Value>> = l.into_iter().map(Some).collect();
    let mut lindex: HashMap<&PathElement, usize> = HashMap::new();
    for (i, k) in lkeys.iter().enumerate() {
        if let Some(k) = k {
            lindex.entry(k).or_insert(i);
        }
    }
    let rset: HashSet<&PathElement> = rkeys.iter().flatten().collect();
    let shared: Vec<&PathElement> = rkeys
        .iter()
        .flatten()
        .filter(|k| lindex.contains_key(k))
        .collect();
    let mut next_shared = 0;
    let mut merged: HashSet<&PathElement> = HashSet::new();
    let mut out = Vec::with_capacity(l.len().max(r.len()));
    let (mut li, mut ri) = (0, 0);
    let in_r = |k: &Option<PathElement>| k.as_ref().is_some_and(|k| rset.contains(k));
    let take_l = |l: &mut Vec<Option<Value>>, i: usize| l[i].take();
    while li < l.len() || ri < r.len() {
        if li < l.len() && ri < r.len() {
            if let (Some(lk), Some(rk)) = (&lkeys[li], &rkeys[ri])
                && lk == rk
            {
                if merged.insert(lk) {
                    let lv = lindex.get(lk).and_then(|&p| take_l(&mut l, p));
                    if let Some(v) = merge(lv, &r[ri]) {
                        out.push(v);
                    }
                }
                if shared.get(next_shared) == Some(&lk) {
                    next_shared += 1;
                }
                li += 1;
                ri += 1;
                continue;
            }
            if in_r(&lkeys[li])
                && shared
                    .get(next_shared)
                    .is_some_and(|n| Some(*n) != lkeys[li].as_ref())
            {
                li += 1;
                continue;
            }
        }
        if li < l.len() {
            if !in_r(&lkeys[li]) {
                out.extend(take_l(&mut l, li));
                li += 1;
                continue;
            }
            if lkeys[li].as_ref().is_some_and(|k| merged.contains(k)) {
                li += 1;
                continue;
            }
        }
        if ri < r.len() {
            let k = rkeys[ri].as_ref();
            let fresh = k.is_none_or(|k| merged.insert(k));
            if fresh {
                let lv = k.and_then(|k| lindex.get(k)).and_then(|&p| take_l(&mut l, p));
                if let Some(v) = merge(lv, &r[ri]) {
                    out.push(v);
                }
            }
            if k.is_some() && shared.get(next_shared).copied() == k {
                next_shared += 1;
            }
            ri += 1;
        } else {
            // Unreachable for consistent keys; guarantees progress regardless.
            out.extend(take_l(&mut l, li));
            li += 1;
        }
    }
    out
}

/// Paths added, modified and removed between two versions of an object.
#[derive(Debug, Default)]
struct Comparison {
    added: FieldSet,
    modified: FieldSet,
    removed: FieldSet,
}

/// Children of a granular value: `(element, child value, object key or "" for list items)`;
/// duplicate list keys keep their first item.
fn children_of<'v>(v: Option<&'v Value>, node: &Node) -> Vec<(PathElement, &'v Value, &'v str)> {
    match v {
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, cv)| (PathElement::Field(k.clone()), cv, k.as_str()))
            .collect(),
        Some(Value::Array(a)) => {
            let lt = node.list_type();
            let mut seen = HashSet::new();
            a.iter()
                .filter_map(|item| item_element(item, lt).ok().map(|pe| (pe, item, "")))
                .filter(|(pe, _, _)| seen.insert(pe.clone()))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Compares two versions of an object (roots are objects; anything else has no fields).
fn compare(lhs: &Value, rhs: &Value, root: &Node) -> Comparison {
    let mut out = Comparison::default();
    compare_level(Some(lhs), Some(rhs), root, &mut out);
    out
}

/// Compares the children of two versions of a granular value into `out` (one level).
fn compare_level(l: Option<&Value>, r: Option<&Value>, node: &Node, out: &mut Comparison) {
    let lc = children_of(l, node);
    let rc = children_of(r, node);
    let rindex: HashMap<&PathElement, usize> = rc.iter().enumerate().map(|(i, (pe, _, _))| (pe, i)).collect();
    // A value struct missing on one side of an existing object stands for its empty value,
    // as in the typed object kube-apiserver compares.
    let stand_in = |parent: Option<&Value>, pe: &PathElement, key: &str| -> Option<&Value> {
        if !parent.is_some_and(Value::is_object) || !matches!(pe, PathElement::Field(_)) {
            return None;
        }
        let child = node.child(key);
        if child.is_value_struct() {
            Some(empty_object())
        } else if child.is_value_list() {
            Some(&Value::Null)
        } else {
            None
        }
    };
    let child_node = |pe: &PathElement, key: &str| {
        if matches!(pe, PathElement::Field(_)) {
            node.child(key)
        } else {
            node.item()
        }
    };
    let mut matched = vec![false; rc.len()];
    for (pe, lv, key) in &lc {
        let rv = match rindex.get(pe) {
            Some(&i) => {
                matched[i] = true;
                Some(rc[i].1)
            }
            None => stand_in(r, pe, key),
        };
        compare_node(Some(*lv), rv, child_node(pe, key), pe, out);
    }
    for (i, (pe, rv, key)) in rc.iter().enumerate() {
        if !matched[i] {
            compare_node(stand_in(l, pe, key), Some(*rv), child_node(pe, key), pe, out);
        }
    }
}

/// Compares one child `pe` of two versions, recording it (and what lies below) in `out`.
fn compare_node(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    node: &Node,
    pe: &PathElement,
    out: &mut Comparison,
) {
    // Equal versions differ nowhere below: most writes change one part of an object (a status
    // patch leaves spec and metadata alone), and walking the unchanged parts was most of the
    // cost of recording a write's managed fields.
    if let (Some(l), Some(r)) = (lhs, rhs)
        && l == r
    {
        return;
    }
    let lg = lhs.is_some_and(|v| granular(v, node));
    let rg = rhs.is_some_and(|v| granular(v, node));
    let same_kind = match (lhs, rhs) {
        (Some(a), Some(b)) => a.is_object() == b.is_object() && a.is_array() == b.is_array(),
        _ => false,
    };
    let descend = |out: &mut Comparison, l: Option<&Value>, r: Option<&Value>| {
        let mut sub = Comparison::default();
        compare_level(l, r, node, &mut sub);
        out.added.put(pe.clone(), false, sub.added);
        out.modified.put(pe.clone(), false, sub.modified);
        out.removed.put(pe.clone(), false, sub.removed);
    };
    match (lhs, rhs) {
        (None, None) => {}
        (Some(l), Some(r)) if lg && rg && same_kind => {
            if !(is_empty_container(l) && is_empty_container(r)) {
                descend(out, lhs, rhs);
            }
        }
        (None, Some(r)) if rg && !is_empty_container(r) => {
            out.added.put(pe.clone(), true, FieldSet::new());
            descend(out, None, rhs);
        }
        (Some(l), None) if lg && !is_empty_container(l) => {
            out.removed.put(pe.clone(), true, FieldSet::new());
            descend(out, lhs, None);
        }
        (Some(Value::Null), Some(r)) if rg && !is_empty_container(r) => descend(out, None, rhs),
        (Some(l), Some(Value::Null)) if lg && !is_empty_container(l) => descend(out, lhs, None),
        (None, Some(_)) => out.added.put(pe.clone(), true, FieldSet::new()),
        (Some(_), None) => out.removed.put(pe.clone(), true, FieldSet::new()),
        (Some(l), Some(r)) => {
            if !json_equal(l, r) {
                out.modified.put(pe.clone(), true, FieldSet::new());
            }
        }
    }
}

/// Removes from `v` what `last` owned and no current manager (`owned`) owns.
///
/// As in structured-merge-diff, a declared struct field counts as owned (and as previously
/// applied) when anything below it is, so it survives while another manager owns one of its
/// fields; a list item or map key counts only when owned itself, so an item the applier
/// dropped disappears as a whole even if another manager changed one of its fields.
fn prune(v: &mut Value, last: &FieldSet, owned: Option<&FieldSet>, node: &Node) {
    let holds = |set: Option<&FieldSet>, pe: &PathElement, declared: bool| {
        set.is_some_and(|s| s.has_member(pe) || (declared && s.child(pe).is_some()))
    };
    match v {
        Value::Object(m) if !node.object_is_atomic() => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let pe = PathElement::Field(k.clone());
                let declared = node.is_declared_field(&k);
                if holds(Some(last), &pe, declared) && !holds(owned, &pe, declared) {
                    m.shift_remove(&k);
                    continue;
                }
                if let (Some(lc), Some(cv)) = (last.child(&pe), m.get_mut(&k)) {
                    prune(cv, lc, owned.and_then(|o| o.child(&pe)), node.child(&k));
                }
            }
        }
        Value::Array(items) if granular(v_array_probe(), node) => {
            let lt = node.list_type().clone();
            let item_node = node.item();
            let mut kept = Vec::with_capacity(items.len());
            for mut item in std::mem::take(items) {
                let Ok(pe) = item_element(&item, &lt) else {
                    kept.push(item);
                    continue;
                };
                if last.has_member(&pe) && !holds(owned, &pe, false) {
                    continue;
                }
                if let Some(lc) = last.child(&pe) {
                    prune(&mut item, lc, owned.and_then(|o| o.child(&pe)), item_node);
                }
                kept.push(item);
            }
            *items = kept;
        }
        _ => {}
    }
}

fn empty_object() -> &'static Value {
    static EMPTY: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Value::Object(Map::new()))
}

/// An empty array, to ask [`granular`] about a list type without borrowing the list.
fn v_array_probe() -> &'static Value {
    static EMPTY: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Value::Array(Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm() -> Gvk {
        Gvk::new("", "v1", "ConfigMap")
    }

    #[test]
    fn apply_sets_shape_for_map_keys() {
        let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "labels": {"app": "x"}}, "data": {"k": "v"}});
        let out = apply(None, &applied, "kubectl", false, &cm(), "2026-01-01T00:00:00Z").unwrap();
        assert_eq!(
            out["metadata"]["managedFields"],
            json!([{
                "manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
            }])
        );
    }

    #[test]
    fn compare_marks_new_maps() {
        let schema = Schema::for_gvk(&cm());
        let cmp = compare(&json!({}), &json!({"data": {"a": "1"}}), &schema.root);
        assert_eq!(cmp.added.to_fields_v1(), json!({"f:data": {".": {}, "f:a": {}}}));
    }

    #[test]
    fn merge_items_order() {
        let l = vec![json!("a"), json!("b"), json!("c")];
        let r = vec![json!("c"), json!("a")];
        let out = merge_items(
            l,
            &r,
            |v| Some(PathElement::Value(KeyValue(v.clone()))),
            |_, r| Some(r.clone()),
        );
        assert_eq!(out, vec![json!("b"), json!("c"), json!("a")]);
    }
}
