//! The object store: Kubernetes write semantics over a global resourceVersion, an event history for
//! watches, and write-through persistence.
//!
//! HTTP handlers and in-process users (simulated kubelet/controllers, tests) call the same methods, so
//! both see identical behaviour: uid/creationTimestamp/generation, optimistic concurrency, status
//! subresource rules, finalizers and deletionTimestamp, CRD registration.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};

use crate::backend::{Backend, BackendError, ObjKey};
use crate::error::{ApiError, Cause};
use crate::meta;
use crate::registry::{GroupResource, Registry, ResourceDef, split_api_version};
use crate::{crd, validate};

/// Kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed (the object is its last state, with the deletion's resourceVersion).
    Deleted,
}

impl EventType {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// resourceVersion of the change.
    pub rv: u64,
    /// What happened.
    pub type_: EventType,
    /// Object identity.
    pub key: ObjKey,
    /// New state (last state for `Deleted`).
    pub object: Arc<Value>,
    /// Previous state, so selector-filtered watches can turn "stopped matching" into DELETED.
    pub old: Option<Arc<Value>>,
}

/// Which part of an object a write targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The object itself (status ignored when the kind has a status subresource).
    Main,
    /// Only `.status`.
    Status,
    /// A pod's `binding`: kube-apiserver sets `spec.nodeName` and the `PodScheduled` condition in
    /// one write straight to storage, so status is taken as written and no `managedFields` entry
    /// is recorded (checked against kube-apiserver 1.28).
    Binding,
}

/// Options common to writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and return the result without storing it.
    pub dry_run: bool,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// The object comes from server-side apply, which already maintained `managedFields`; no
    /// `Update` entry is recorded on top.
    pub applied: bool,
    /// `fieldValidation=Strict`: unknown fields of custom resources are an error instead of being
    /// dropped silently.
    pub strict: bool,
}

/// How dependents are treated when an owner is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Delete the owner now; the garbage collector deletes dependents afterwards.
    #[default]
    Background,
    /// Keep the owner (with the `foregroundDeletion` finalizer) until blocking dependents are gone.
    Foreground,
    /// Remove the owner reference from dependents.
    Orphan,
}

/// Options of a DELETE.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `propagationPolicy`.
    pub propagation: Option<Propagation>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `gracePeriodSeconds`: for Pods bound to a node, how long the kubelet gets to stop them
    /// (`None` = the pod's `terminationGracePeriodSeconds`, 0 = remove at once).
    pub grace_period_seconds: Option<i64>,
}

/// Receiver of committed changes, in resourceVersion order.
pub type EventReceiver = broadcast::Receiver<Arc<WatchEvent>>;

type Objects = HashMap<GroupResource, BTreeMap<(String, String), Arc<Value>>>;

struct State {
    rv: u64,
    objects: Objects,
    history: VecDeque<Arc<WatchEvent>>,
    /// Events at or below this resourceVersion are no longer in `history`.
    compacted: u64,
    next_ip: u32,
}

struct Inner {
    registry: Registry,
    state: Mutex<State>,
    backend: Box<dyn Backend>,
    tx: broadcast::Sender<Arc<WatchEvent>>,
    history_cap: usize,
    gc_wakeup: Notify,
    gc_pending: Mutex<GcPending>,
}

/// What the garbage collector has to look at since it last ran: a whole sweep (something went
/// or started going, owner references changed, a namespace appeared), or only whether the owners
/// of newly created dependents exist. The second is by far the most common on a busy cluster
/// (every pod and ReplicaSet a workload controller creates) and costs a lookup per owner instead
/// of a pass over every object.
#[derive(Default)]
pub(crate) struct GcPending {
    pub(crate) full: bool,
    pub(crate) new_dependents: Vec<ObjKey>,
}

/// Handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("rv", &self.current_rv()).finish()
    }
}

const GENERATE_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn now() -> String {
    meta::now_rfc3339()
}

impl Store {
    /// Open a store over a backend, restoring its content and making sure the default namespaces exist.
    pub fn open(
        registry: Registry,
        backend: Box<dyn Backend>,
        history_cap: usize,
    ) -> Result<Store, BackendError> {
        let snapshot = backend.load()?;
        let (tx, _) = broadcast::channel(history_cap.max(1024));
        let mut objects: Objects = HashMap::new();
        for (k, v) in snapshot.objects {
            objects
                .entry(k.gr.clone())
                .or_default()
                .insert((k.namespace, k.name), Arc::new(v));
        }
        let store = Store {
            inner: Arc::new(Inner {
                registry,
                state: Mutex::new(State {
                    rv: snapshot.resource_version,
                    objects,
                    history: VecDeque::new(),
                    compacted: snapshot.resource_version,
                    next_ip: 10,
                }),
                backend,
                tx,
                history_cap: history_cap.max(16),
                gc_wakeup: Notify::new(),
                gc_pending: Mutex::new(GcPending {
                    full: true,
                    new_dependents: Vec::new(),
                }),
            }),
        };
        // Re-register CRDs restored from the backend.
        let crds = store.list_gr(
            &GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions"),
            None,
        );
        for c in crds {
            store
                .inner
                .registry
                .set_crd(meta::name(&c), crd::defs_from_crd(&c));
        }
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            if store
                .get_gr(&GroupResource::new("", "namespaces"), "", ns)
                .is_none()
            {
                let def =
                    store
                        .inner
                        .registry
                        .by_kind("v1", "Namespace")
                        .ok_or_else(|| BackendError::Corrupt {
                            path: Default::default(),
                            line: 0,
                            message: "namespace kind missing from registry".into(),
                        })?;
                let r = store.create(
                    &def,
                    "",
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                    &WriteOptions::default(),
                );
                if let Err(e) = r {
                    tracing::warn!("creating namespace {ns}: {e}");
                }
            }
        }
        Ok(store)
    }

    /// The type registry (built-ins plus CRDs).
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Latest committed resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Resolve `apiVersion` + `kind` to a served type.
    pub fn resolve(&self, api_version: &str, kind: &str) -> Result<Arc<ResourceDef>, ApiError> {
        self.inner.registry.by_kind(api_version, kind).ok_or_else(|| {
            ApiError::not_found(split_api_version(api_version).0, &kind.to_lowercase(), "").with_message(
                format!("no matches for kind \"{kind}\" in version \"{api_version}\""),
            )
        })
    }

    pub(crate) fn gc_wakeup(&self) -> &Notify {
        &self.inner.gc_wakeup
    }

    /// Takes what the garbage collector has to look at (see [`GcPending`]).
    pub(crate) fn take_gc_pending(&self) -> GcPending {
        std::mem::take(&mut *self.inner.gc_pending.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub(crate) fn get_gr(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.lock()
            .objects
            .get(gr)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    pub(crate) fn list_gr(&self, gr: &GroupResource, ns: Option<&str>) -> Vec<Arc<Value>> {
        let st = self.lock();
        list_locked(&st, gr, ns)
    }

    /// All objects of all types (for the garbage collector).
    pub(crate) fn snapshot_all(&self) -> Vec<(ObjKey, Arc<Value>)> {
        let st = self.lock();
        let mut out = Vec::new();
        for (gr, m) in &st.objects {
            for ((ns, name), v) in m {
                out.push((
                    ObjKey {
                        gr: gr.clone(),
                        namespace: ns.clone(),
                        name: name.clone(),
                    },
                    v.clone(),
                ));
            }
        }
        out
    }

    /// Get one object, presented in `def`'s version.
    pub fn get(&self, def: &ResourceDef, ns: &str, name: &str) -> Result<Value, ApiError> {
        let ns = if def.namespaced { ns } else { "" };
        self.get_gr(&def.gr(), ns, name)
            .map(|o| present(def, &o))
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))
    }

    /// List objects (all namespaces when `ns` is `None`), with the list's resourceVersion.
    pub fn list(&self, def: &ResourceDef, ns: Option<&str>) -> (Vec<Value>, u64) {
        let st = self.lock();
        let ns = if def.namespaced { ns } else { None };
        let items = list_locked(&st, &def.gr(), ns)
            .iter()
            .map(|o| present(def, o))
            .collect();
        (items, st.rv)
    }

    /// List stored objects without copying them (in the storage shape), with the list's
    /// resourceVersion; callers present only what they return.
    pub fn list_shared(&self, def: &ResourceDef, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let st = self.lock();
        let ns = if def.namespaced { ns } else { None };
        (list_locked(&st, &def.gr(), ns), st.rv)
    }

    /// Subscribe to changes after `from_rv` (0 = from now). Returns the replayed history and a receiver
    /// for everything later, with no gap and no duplicate between the two.
    pub fn subscribe(&self, from_rv: u64) -> Result<(Vec<Arc<WatchEvent>>, EventReceiver), ApiError> {
        let st = self.lock();
        let rx = self.inner.tx.subscribe();
        if from_rv == 0 || from_rv >= st.rv {
            return Ok((Vec::new(), rx));
        }
        if from_rv < st.compacted {
            return Err(ApiError::gone(format!(
                "too old resource version: {from_rv} ({})",
                st.compacted + 1
            )));
        }
        let replay = st.history.iter().filter(|e| e.rv > from_rv).cloned().collect();
        Ok((replay, rx))
    }

    /// Like [`Store::subscribe`] but also returns a consistent snapshot of current objects of one type,
    /// for list-then-watch and `sendInitialEvents`.
    pub fn snapshot_and_subscribe(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
    ) -> (Vec<Arc<Value>>, u64, broadcast::Receiver<Arc<WatchEvent>>) {
        let st = self.lock();
        let rx = self.inner.tx.subscribe();
        (list_locked(&st, gr, ns), st.rv, rx)
    }

    // ----- writes -----

    fn commit_put(
        &self,
        st: &mut State,
        key: ObjKey,
        mut obj: Value,
        old: Option<Arc<Value>>,
    ) -> Result<Arc<Value>, ApiError> {
        let rv = st.rv + 1;
        meta::meta_mut(&mut obj).insert("resourceVersion".into(), Value::String(rv.to_string()));
        self.inner
            .backend
            .put(&key, &obj, rv)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        st.rv = rv;
        let obj = Arc::new(obj);
        st.objects
            .entry(key.gr.clone())
            .or_default()
            .insert((key.namespace.clone(), key.name.clone()), obj.clone());
        let type_ = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.emit(
            st,
            WatchEvent {
                rv,
                type_,
                key,
                object: obj.clone(),
                old,
            },
        );
        Ok(obj)
    }

    fn commit_delete(&self, st: &mut State, key: &ObjKey) -> Result<Option<Arc<Value>>, ApiError> {
        let Some(old) = st
            .objects
            .get(&key.gr)
            .and_then(|m| m.get(&(key.namespace.clone(), key.name.clone())))
            .cloned()
        else {
            return Ok(None);
        };
        let rv = st.rv + 1;
        self.inner
            .backend
            .delete(key, rv)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        st.rv = rv;
        if let Some(m) = st.objects.get_mut(&key.gr) {
            m.remove(&(key.namespace.clone(), key.name.clone()));
        }
        let mut last = (*old).clone();
        meta::meta_mut(&mut last).insert("resourceVersion".into(), Value::String(rv.to_string()));
        let last = Arc::new(last);
        self.emit(
            st,
            WatchEvent {
                rv,
                type_: EventType::Deleted,
                key: key.clone(),
                object: last.clone(),
                old: Some(old),
            },
        );
        Ok(Some(last))
    }

    fn emit(&self, st: &mut State, ev: WatchEvent) {
        let ev = Arc::new(ev);
        let new_namespace =
            ev.type_ == EventType::Added && ev.key.gr.group.is_empty() && ev.key.gr.resource == "namespaces";
        // The garbage collector only has work when an object goes, starts going, or changes owner
        // references, or when a dependent is created (its owner may be gone already); a status
        // update of a dependent (most writes: pods, ReplicaSets) does not wake it, so a busy
        // cluster does not sweep after every write.
        let full = ev.type_ == EventType::Deleted
            || new_namespace
            || meta::is_deleting(&ev.object)
            || match (&ev.type_, &ev.old) {
                (EventType::Added, _) | (_, None) => false,
                (_, Some(old)) => meta::owner_refs(&ev.object) != meta::owner_refs(old),
            };
        let new_dependent = !full && ev.type_ == EventType::Added && !meta::owner_refs(&ev.object).is_empty();
        if full || new_dependent {
            let mut pending = self.inner.gc_pending.lock().unwrap_or_else(|e| e.into_inner());
            if full {
                pending.full = true;
                pending.new_dependents.clear();
            } else if !pending.full {
                pending.new_dependents.push(ev.key.clone());
            }
            drop(pending);
            self.inner.gc_wakeup.notify_one();
        }
        st.history.push_back(ev.clone());
        while st.history.len() > self.inner.history_cap {
            if let Some(e) = st.history.pop_front() {
                st.compacted = e.rv;
            }
        }
        let _ = self.inner.tx.send(ev);
    }

    /// Waits until the writes made so far are durable (a no-op without a data directory or with
    /// `SyncMode::Never`), outside the store lock so that concurrent writers share one flush. Every
    /// public write calls it before returning, so nothing is acknowledged before it is on disk.
    fn durable<T>(&self, r: Result<T, ApiError>) -> Result<T, ApiError> {
        let v = r?;
        let backend = &self.inner.backend;
        if !backend.syncs() {
            return Ok(v);
        }
        // The flush takes milliseconds: on a multi-threaded runtime, hand this worker's other tasks
        // to another thread meanwhile, so that requests keep being served and pile up behind one
        // shared flush instead of waiting for the worker.
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let synced = if multi_thread {
            tokio::task::block_in_place(|| backend.sync())
        } else {
            backend.sync()
        };
        synced.map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(v)
    }

    /// Create an object in namespace `ns` (ignored for cluster-scoped kinds).
    pub fn create(
        &self,
        def: &ResourceDef,
        ns: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        self.durable(self.create_unsynced(def, ns, obj, opts))
    }

    fn create_unsynced(
        &self,
        def: &ResourceDef,
        ns: &str,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the request body must be a JSON object"));
        }
        let ns = if def.namespaced {
            let body_ns = meta::namespace(&obj);
            if !body_ns.is_empty() && !ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            let ns = if ns.is_empty() {
                body_ns.to_string()
            } else {
                ns.to_string()
            };
            if ns.is_empty() {
                return Err(ApiError::bad_request(
                    "a namespace must be specified for a namespaced resource",
                ));
            }
            ns
        } else {
            String::new()
        };
        let presented_def = def;
        let def = &storage_def(def);
        obj["apiVersion"] = json!(def.api_version());
        obj["kind"] = json!(def.kind);
        if def.group.is_empty() && def.plural == "events" {
            obj = crate::events::to_core(&obj);
        }
        let mut st = self.lock();
        // Name, possibly generated.
        let mut name = meta::name(&obj).to_string();
        if name.is_empty() {
            let prefix = meta::meta_str(&obj, "generateName").to_string();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    &def.group,
                    &def.kind,
                    "",
                    vec![Cause::required(
                        "metadata.name",
                        "name or generateName is required",
                    )],
                ));
            }
            loop {
                let suffix: String = (0..5)
                    .map(|_| {
                        GENERATE_CHARS
                            [(uuid::Uuid::new_v4().as_u128() % GENERATE_CHARS.len() as u128) as usize]
                            as char
                    })
                    .collect();
                let candidate = format!("{prefix}{suffix}");
                if !exists(&st, &def.gr(), &ns, &candidate) {
                    name = candidate;
                    break;
                }
            }
        }
        if def.namespaced {
            match st
                .objects
                .get(&GroupResource::new("", "namespaces"))
                .and_then(|m| m.get(&(String::new(), ns.clone())))
            {
                None => return Err(ApiError::not_found("", "namespaces", &ns)),
                Some(n) if meta::is_deleting(n) => {
                    return Err(ApiError::forbidden(format!(
                        "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                        crate::error::qualified(&def.group, &def.plural)
                    ))
                    .with_reason("Forbidden"));
                }
                Some(_) => {}
            }
        }
        if exists(&st, &def.gr(), &ns, &name) {
            return Err(ApiError::already_exists(&def.group, &def.plural, &name));
        }
        {
            let md = meta::meta_mut(&mut obj);
            md.insert("name".into(), json!(name));
            if def.namespaced {
                md.insert("namespace".into(), json!(ns));
            } else {
                md.remove("namespace");
            }
            md.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            md.insert("creationTimestamp".into(), json!(now()));
            md.remove("resourceVersion");
            md.remove("deletionTimestamp");
            md.remove("deletionGracePeriodSeconds");
            if def.generation {
                md.insert("generation".into(), json!(1));
            } else {
                md.remove("generation");
            }
        }
        if def.status
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        let ip = if def.group.is_empty() && def.plural == "services" {
            Some(allocate_ip(&mut st))
        } else {
            None
        };
        validate::default_object(def, &mut obj, ip);
        if def.group.is_empty() && def.plural == "pods" {
            crate::admission::service_account(&mut obj);
        }
        if def.group.is_empty()
            && def.plural == "persistentvolumeclaims"
            && obj.pointer("/spec/storageClassName").is_none_or(|v| v.is_null())
            && let Some(class) = default_storage_class(&st)
            && let Some(spec) = obj.get_mut("spec").and_then(|s| s.as_object_mut())
        {
            spec.insert("storageClassName".into(), json!(class));
        }
        if let Some(c) = &def.custom {
            let pruned = crd::default_and_prune(c.schema.as_ref(), &mut obj);
            if opts.strict && !pruned.is_empty() {
                return Err(strict_error(def, &pruned));
            }
            let causes = crd::validate(c.schema.as_ref(), &obj, None);
            if !causes.is_empty() {
                return Err(ApiError::invalid(&def.group, &def.kind, meta::name(&obj), causes));
            }
        }
        let causes = validate::validate_create(def, &obj);
        if !causes.is_empty() {
            return Err(ApiError::invalid(&def.group, &def.kind, &name, causes));
        }
        let is_crd = def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions";
        if is_crd {
            crd::accept_crd(&self.inner.registry, &mut obj)?;
        }
        if !opts.applied {
            obj = crate::patch::record_update(None, &obj, opts.field_manager.as_deref(), def, None);
        }
        if opts.dry_run {
            return Ok(present(presented_def, &obj));
        }
        let key = ObjKey {
            gr: def.gr(),
            namespace: ns,
            name,
        };
        let stored = self.commit_put(&mut st, key, obj, None)?;
        drop(st);
        if is_crd {
            self.inner
                .registry
                .set_crd(meta::name(&stored), crd::defs_from_crd(&stored));
        }
        Ok(present(presented_def, &stored))
    }

    /// Replace an object (PUT). `obj.metadata.resourceVersion`, when set, must match.
    pub fn update(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        obj: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the request body must be a JSON object"));
        }
        let body_name = meta::name(&obj);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let rv = meta::meta_str(&obj, "resourceVersion").to_string();
        self.modify(def, ns, name, sub, opts, |cur| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(&def.group, &def.plural, name));
            };
            if rv.is_empty() {
                if def.custom.is_some() {
                    return Err(ApiError::invalid(
                        &def.group,
                        &def.kind,
                        name,
                        vec![Cause::invalid(
                            "metadata.resourceVersion",
                            &json!(0),
                            "must be specified for an update",
                        )],
                    ));
                }
            } else if rv != meta::meta_str(cur, "resourceVersion") {
                return Err(ApiError::stale(&def.group, &def.plural, name));
            }
            Ok(obj)
        })
        .map(|(v, _)| v)
    }

    /// Read-modify-write under the store lock: `f` gets the current object (None if absent) and returns
    /// the desired object. Returning a value for an absent object creates it (server-side apply).
    /// Returns the stored object and whether it was created.
    pub fn modify<F>(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        sub: Subresource,
        opts: &WriteOptions,
        f: F,
    ) -> Result<(Value, bool), ApiError>
    where
        F: FnOnce(Option<&Value>) -> Result<Value, ApiError>,
    {
        self.durable(self.modify_unsynced(def, ns, name, sub, opts, f))
    }

    fn modify_unsynced<F>(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        sub: Subresource,
        opts: &WriteOptions,
        f: F,
    ) -> Result<(Value, bool), ApiError>
    where
        F: FnOnce(Option<&Value>) -> Result<Value, ApiError>,
    {
        let ns = if def.namespaced {
            ns.to_string()
        } else {
            String::new()
        };
        let current = self.get_gr(&def.gr(), &ns, name);
        let Some(current) = current else {
            let desired = f(None)?;
            return self.create_unsynced(def, &ns, desired, opts).map(|v| (v, true));
        };
        let mut st = self.lock();
        // Re-read under the lock; if it changed between the two reads, the closure saw a stale object.
        let cur = match st
            .objects
            .get(&def.gr())
            .and_then(|m| m.get(&(ns.clone(), name.to_string())))
            .cloned()
        {
            Some(c) if Arc::ptr_eq(&c, &current) => c,
            _ => {
                drop(st);
                return self.modify_unsynced(def, &ns, name, sub, opts, f);
            }
        };
        let cur_presented = present_ref(def, &cur);
        let mut new = f(Some(&cur_presented))?;
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the resulting object must be a JSON object",
            ));
        }
        let presented_def = def;
        let def = &storage_def(def);
        if def.group.is_empty() && def.plural == "events" {
            new = crate::events::to_core(&new);
        }
        new["apiVersion"] = json!(def.api_version());
        new["kind"] = json!(def.kind);
        let old = &*cur;
        match sub {
            Subresource::Main => {
                if def.status {
                    restore_field(&mut new, old, "status");
                }
            }
            Subresource::Binding => {}
            Subresource::Status => {
                let status = new.as_object_mut().and_then(|m| m.remove("status"));
                let mut n = old.clone();
                match status {
                    Some(s) => n["status"] = s,
                    None => {
                        if let Some(m) = n.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                // managedFields written through /status are still recorded.
                if let Some(mf) = new.pointer("/metadata/managedFields").cloned() {
                    meta::meta_mut(&mut n).insert("managedFields".into(), mf);
                }
                new = n;
            }
        }
        {
            let old_md = old.get("metadata").cloned().unwrap_or(json!({}));
            let md = meta::meta_mut(&mut new);
            md.insert("name".into(), json!(name));
            if def.namespaced {
                md.insert("namespace".into(), json!(ns));
            } else {
                md.remove("namespace");
            }
            for k in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                match old_md.get(k) {
                    Some(v) => {
                        md.insert(k.into(), v.clone());
                    }
                    None => {
                        md.remove(k);
                    }
                }
            }
            md.insert(
                "resourceVersion".into(),
                old_md.get("resourceVersion").cloned().unwrap_or(Value::Null),
            );
        }
        if let Some(c) = &def.custom {
            let pruned = crd::default_and_prune(c.schema.as_ref(), &mut new);
            if opts.strict && !pruned.is_empty() {
                return Err(strict_error(def, &pruned));
            }
            let causes = crd::validate(c.schema.as_ref(), &new, Some(old));
            if !causes.is_empty() {
                return Err(ApiError::invalid(&def.group, &def.kind, meta::name(&new), causes));
            }
        }
        validate::default_update(def, old, &mut new);
        // Finalizers cannot be added once deletion started.
        if meta::is_deleting(old) {
            let before = meta::finalizers(old);
            let added: Vec<String> = meta::finalizers(&new)
                .into_iter()
                .filter(|f| !before.contains(f))
                .collect();
            if !added.is_empty() {
                return Err(ApiError::invalid(
                    &def.group,
                    &def.kind,
                    name,
                    vec![Cause::forbidden(
                        "metadata.finalizers",
                        &format!(
                            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                            added
                                .iter()
                                .map(|a| format!("{a:?}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )],
                ));
            }
        }
        let causes = validate::validate_update(def, old, &new);
        if !causes.is_empty() {
            return Err(ApiError::invalid(&def.group, &def.kind, name, causes));
        }
        // kube-apiserver's deployment strategy also bumps the generation when the annotations
        // change (they are copied to the ReplicaSets); other kinds only on a spec change.
        let annotations = |o: &Value| {
            o.pointer("/metadata/annotations")
                .cloned()
                .filter(|a| a != &json!({}))
        };
        let deployment_annotations =
            def.group == "apps" && def.plural == "deployments" && annotations(&new) != annotations(old);
        if def.generation && (meta::spec_differs(&new, old) || deployment_annotations) {
            let g = old
                .pointer("/metadata/generation")
                .and_then(|v| v.as_i64())
                .unwrap_or(0);
            meta::meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        let subname = match sub {
            Subresource::Main | Subresource::Binding => None,
            Subresource::Status => Some("status"),
        };
        if &new != old && !opts.applied && sub != Subresource::Binding {
            new = crate::patch::record_update(Some(old), &new, opts.field_manager.as_deref(), def, subname);
        }
        let is_crd = def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions";
        if is_crd {
            crd::accept_crd(&self.inner.registry, &mut new)?;
        }
        if &new == old {
            // A no-op write does not bump the resourceVersion (kubectl apply relies on this).
            return Ok((present(presented_def, old), false));
        }
        if opts.dry_run {
            return Ok((present(presented_def, &new), false));
        }
        let key = ObjKey {
            gr: def.gr(),
            namespace: ns.clone(),
            name: name.to_string(),
        };
        let stored =
            if meta::is_deleting(&new) && meta::finalizers(&new).is_empty() && !awaiting_kubelet(&new) {
                // Last finalizer removed: the object goes away now.
                self.commit_delete(&mut st, &key)?
                    .unwrap_or_else(|| Arc::new(new.clone()))
            } else {
                self.commit_put(&mut st, key, new, Some(cur.clone()))?
            };
        drop(st);
        if is_crd {
            self.inner.registry.set_crd(name, crd::defs_from_crd(&stored));
        }
        Ok((present(presented_def, &stored), false))
    }

    /// Delete an object. Returns the object: gone, or (with finalizers) marked with deletionTimestamp.
    pub fn delete(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        self.durable(self.delete_unsynced(def, ns, name, opts))
    }

    fn delete_unsynced(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let ns = if def.namespaced {
            ns.to_string()
        } else {
            String::new()
        };
        let mut st = self.lock();
        let key = ObjKey {
            gr: def.gr(),
            namespace: ns.clone(),
            name: name.to_string(),
        };
        let Some(cur) = st
            .objects
            .get(&key.gr)
            .and_then(|m| m.get(&(ns.clone(), name.to_string())))
            .cloned()
        else {
            return Err(ApiError::not_found(&def.group, &def.plural, name));
        };
        if let Some(uid) = &opts.uid
            && uid != meta::uid(&cur)
        {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta::uid(&cur)
                ),
            ));
        }
        if let Some(rv) = &opts.resource_version
            && rv != meta::meta_str(&cur, "resourceVersion")
        {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta::meta_str(&cur, "resourceVersion")
                ),
            ));
        }
        let mut obj = (*cur).clone();
        let is_ns = def.group.is_empty() && def.plural == "namespaces";
        let mut fins = meta::finalizers(&obj);
        match opts.propagation {
            Some(Propagation::Foreground) if !fins.iter().any(|f| f == "foregroundDeletion") => {
                fins.push("foregroundDeletion".into())
            }
            Some(Propagation::Orphan) if !fins.iter().any(|f| f == "orphan") => fins.push("orphan".into()),
            _ => {}
        }
        if is_ns && let Some(m) = obj.as_object_mut() {
            m.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
            m.insert("status".into(), json!({"phase": "Terminating"}));
        }
        if def.group.is_empty() && def.plural == "pods" {
            let grace = pod_grace(&obj, opts.grace_period_seconds);
            if grace > 0 {
                // Graceful: the kubelet stops the containers and removes the pod with grace 0;
                // until then it stays, marked with when it will be deleted at the latest.
                let current = obj
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(|v| v.as_i64());
                if meta::is_deleting(&obj) && current.is_some_and(|c| c <= grace) {
                    return Ok(present(def, &cur));
                }
                meta::set_finalizers(&mut obj, &fins);
                let at = chrono::Utc::now() + chrono::Duration::seconds(grace);
                let md = meta::meta_mut(&mut obj);
                md.insert(
                    "deletionTimestamp".into(),
                    json!(at.format("%Y-%m-%dT%H:%M:%SZ").to_string()),
                );
                md.insert("deletionGracePeriodSeconds".into(), json!(grace));
                if opts.dry_run {
                    return Ok(present(def, &obj));
                }
                let stored = self.commit_put(&mut st, key, obj, Some(cur))?;
                return Ok(present(def, &stored));
            }
        }
        if fins.is_empty() && !is_ns {
            if opts.dry_run {
                return Ok(present(def, &obj));
            }
            let last = self.commit_delete(&mut st, &key)?.unwrap_or(cur);
            drop(st);
            if def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions" {
                self.remove_crd(&last);
            }
            return Ok(present(def, &last));
        }
        meta::set_finalizers(&mut obj, &fins);
        if def.group.is_empty() && def.plural == "pods" && meta::is_deleting(&obj) {
            // A forced (grace 0) deletion of a pod still held by finalizers: it now goes as soon
            // as they are removed.
            meta::meta_mut(&mut obj).insert("deletionGracePeriodSeconds".into(), json!(0));
        }
        if !meta::is_deleting(&obj) {
            let md = meta::meta_mut(&mut obj);
            md.insert("deletionTimestamp".into(), json!(now()));
            md.insert("deletionGracePeriodSeconds".into(), json!(0));
            if def.generation {
                let g = md.get("generation").and_then(|v| v.as_i64()).unwrap_or(0);
                md.insert("generation".into(), json!(g + 1));
            }
        }
        if opts.dry_run || obj == *cur {
            return Ok(present(def, &obj));
        }
        let stored = self.commit_put(&mut st, key, obj, Some(cur))?;
        Ok(present(def, &stored))
    }

    /// Remove an object outright, bypassing finalizers (used by the garbage collector once they are done).
    pub(crate) fn force_remove(&self, key: &ObjKey) -> Result<Option<Arc<Value>>, ApiError> {
        let r = {
            let mut st = self.lock();
            self.commit_delete(&mut st, key)
        };
        self.durable(r)
    }

    /// Replace an object without any semantics except the resourceVersion (garbage collector bookkeeping).
    pub(crate) fn raw_update(&self, key: &ObjKey, f: impl FnOnce(&mut Value)) -> Result<(), ApiError> {
        self.durable(self.raw_update_unsynced(key, f))
    }

    fn raw_update_unsynced(&self, key: &ObjKey, f: impl FnOnce(&mut Value)) -> Result<(), ApiError> {
        let mut st = self.lock();
        let Some(cur) = st
            .objects
            .get(&key.gr)
            .and_then(|m| m.get(&(key.namespace.clone(), key.name.clone())))
            .cloned()
        else {
            return Ok(());
        };
        let mut new = (*cur).clone();
        f(&mut new);
        if new == *cur {
            return Ok(());
        }
        if meta::is_deleting(&new) && meta::finalizers(&new).is_empty() && !awaiting_kubelet(&new) {
            self.commit_delete(&mut st, key)?;
        } else {
            self.commit_put(&mut st, key.clone(), new, Some(cur))?;
        }
        Ok(())
    }

    fn remove_crd(&self, crd_obj: &Value) {
        let name = meta::name(crd_obj);
        let group = crd_obj
            .pointer("/spec/group")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let plural = crd_obj
            .pointer("/spec/names/plural")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let gr = GroupResource::new(group, plural);
        let keys: Vec<ObjKey> = {
            let st = self.lock();
            st.objects
                .get(&gr)
                .map(|m| {
                    m.keys()
                        .map(|(ns, n)| ObjKey {
                            gr: gr.clone(),
                            namespace: ns.clone(),
                            name: n.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        for k in keys {
            if let Err(e) = self.force_remove(&k) {
                tracing::warn!("removing {k:?} of deleted CRD {name}: {e}");
            }
        }
        self.inner.registry.set_crd(name, Vec::new());
    }

    // ----- convenience API for in-process users -----

    /// Get by `apiVersion`/`kind`; `Ok(None)` when absent.
    pub fn get_obj(
        &self,
        api_version: &str,
        kind: &str,
        ns: &str,
        name: &str,
    ) -> Result<Option<Value>, ApiError> {
        let def = self.resolve(api_version, kind)?;
        match self.get(&def, ns, name) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// List by `apiVersion`/`kind` in one namespace (or all when `None`).
    pub fn list_objs(&self, api_version: &str, kind: &str, ns: Option<&str>) -> Result<Vec<Value>, ApiError> {
        let def = self.resolve(api_version, kind)?;
        Ok(self.list(&def, ns).0)
    }

    /// Create an object whose `apiVersion`, `kind` and `metadata.namespace` say where it goes.
    pub fn create_obj(&self, obj: Value) -> Result<Value, ApiError> {
        let def = self.def_of(&obj)?;
        let ns = meta::namespace(&obj).to_string();
        self.create(&def, &ns, obj, &WriteOptions::default())
    }

    /// Replace an object (main resource); honours `metadata.resourceVersion` when set.
    pub fn update_obj(&self, obj: Value) -> Result<Value, ApiError> {
        let def = self.def_of(&obj)?;
        let (ns, name) = (meta::namespace(&obj).to_string(), meta::name(&obj).to_string());
        self.update(&def, &ns, &name, obj, Subresource::Main, &WriteOptions::default())
    }

    /// Replace only `.status` (what a kubelet or controller does).
    pub fn update_status_obj(&self, obj: Value) -> Result<Value, ApiError> {
        let def = self.def_of(&obj)?;
        let (ns, name) = (meta::namespace(&obj).to_string(), meta::name(&obj).to_string());
        let sub = if def.status {
            Subresource::Status
        } else {
            Subresource::Main
        };
        self.update(&def, &ns, &name, obj, sub, &WriteOptions::default())
    }

    /// JSON-merge-patch an object (or only its status with [`Subresource::Status`]) without a
    /// read-modify-write race: the patch is applied under the store lock to the current state.
    pub fn merge_patch_obj(
        &self,
        api_version: &str,
        kind: &str,
        ns: &str,
        name: &str,
        sub: Subresource,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        let def = self.resolve(api_version, kind)?;
        let sub = if def.status { sub } else { Subresource::Main };
        self.modify(&def, ns, name, sub, &WriteOptions::default(), |cur| match cur {
            Some(c) => Ok(crate::patch::merge_patch(c.clone(), patch)),
            None => Err(ApiError::not_found(&def.group, &def.plural, name)),
        })
        .map(|(v, _)| v)
    }

    /// Delete by `apiVersion`/`kind` with background propagation.
    pub fn delete_obj(&self, api_version: &str, kind: &str, ns: &str, name: &str) -> Result<Value, ApiError> {
        let def = self.resolve(api_version, kind)?;
        self.delete(&def, ns, name, &DeleteOptions::default())
    }

    fn def_of(&self, obj: &Value) -> Result<Arc<ResourceDef>, ApiError> {
        let av = obj.get("apiVersion").and_then(|v| v.as_str()).unwrap_or("");
        let kind = obj.get("kind").and_then(|v| v.as_str()).unwrap_or("");
        if av.is_empty() || kind.is_empty() {
            return Err(ApiError::bad_request("object has no apiVersion or kind"));
        }
        self.resolve(av, kind)
    }
}

/// A Pod in graceful deletion, which only the kubelet (or the expired-grace fallback in the
/// garbage collector) removes; status updates meanwhile must not delete it.
fn awaiting_kubelet(obj: &Value) -> bool {
    obj.get("kind").and_then(|k| k.as_str()) == Some("Pod")
        && obj.get("apiVersion").and_then(|k| k.as_str()) == Some("v1")
        && obj
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(|v| v.as_i64())
            .is_some_and(|g| g > 0)
}

/// The grace period a Pod deletion gets: 0 (immediate) unless the pod is bound to a node and not
/// finished; otherwise the request's value, else the pod's `terminationGracePeriodSeconds`, else 30.
fn pod_grace(pod: &Value, requested: Option<i64>) -> i64 {
    let bound = pod
        .pointer("/spec/nodeName")
        .and_then(|v| v.as_str())
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(
        pod.pointer("/status/phase").and_then(|v| v.as_str()),
        Some("Succeeded" | "Failed")
    );
    if !bound || finished {
        return 0;
    }
    requested
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(|v| v.as_i64())
        })
        .unwrap_or(30)
        .max(0)
}

/// The DefaultStorageClass admission plugin: the class annotated as default (the newest one when
/// several are), for claims created without `storageClassName`.
fn default_storage_class(st: &State) -> Option<String> {
    let classes = list_locked(st, &GroupResource::new("storage.k8s.io", "storageclasses"), None);
    classes
        .iter()
        .filter(|c| {
            [
                "storageclass.kubernetes.io/is-default-class",
                "storageclass.beta.kubernetes.io/is-default-class",
            ]
            .iter()
            .any(|a| {
                c.pointer("/metadata/annotations")
                    .and_then(|m| m.get(*a))
                    .and_then(|v| v.as_str())
                    == Some("true")
            })
        })
        .max_by(|a, b| {
            meta::meta_str(a, "creationTimestamp")
                .cmp(meta::meta_str(b, "creationTimestamp"))
                .then_with(|| meta::name(b).cmp(meta::name(a)))
        })
        .map(|c| meta::name(c).to_string())
}

fn exists(st: &State, gr: &GroupResource, ns: &str, name: &str) -> bool {
    st.objects
        .get(gr)
        .is_some_and(|m| m.contains_key(&(ns.to_string(), name.to_string())))
}

fn list_locked(st: &State, gr: &GroupResource, ns: Option<&str>) -> Vec<Arc<Value>> {
    let Some(m) = st.objects.get(gr) else {
        return Vec::new();
    };
    match ns {
        None => m.values().cloned().collect(),
        Some(ns) => m
            .range((ns.to_string(), String::new())..)
            .take_while(|((n, _), _)| n == ns)
            .map(|(_, v)| v.clone())
            .collect(),
    }
}

fn restore_field(new: &mut Value, old: &Value, field: &str) {
    if let Some(m) = new.as_object_mut() {
        match old.get(field) {
            Some(v) => {
                m.insert(field.into(), v.clone());
            }
            None => {
                m.remove(field);
            }
        }
    }
}

fn allocate_ip(st: &mut State) -> String {
    let used: std::collections::HashSet<String> = st
        .objects
        .get(&GroupResource::new("", "services"))
        .map(|m| {
            m.values()
                .filter_map(|s| {
                    s.pointer("/spec/clusterIP")
                        .and_then(|v| v.as_str())
                        .map(String::from)
                })
                .collect()
        })
        .unwrap_or_default();
    loop {
        let n = st.next_ip;
        st.next_ip = if n >= 65_000 { 10 } else { n + 1 };
        let ip = format!("10.96.{}.{}", n / 256, n % 256);
        if !n.is_multiple_of(256) && n % 256 != 255 && !used.contains(&ip) {
            return ip;
        }
    }
}

/// The real server's error for unknown fields under `fieldValidation=Strict`.
fn strict_error(def: &ResourceDef, pruned: &[String]) -> ApiError {
    let fields: Vec<String> = pruned.iter().map(|p| format!("unknown field \"{p}\"")).collect();
    ApiError::bad_request(format!(
        "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
        fields.join(", "),
        kind = def.kind,
        v = def.version
    ))
}

/// The definition objects are stored under: core Events for the events.k8s.io view.
fn storage_def(def: &ResourceDef) -> ResourceDef {
    if def.is_events_v1() {
        let mut d = def.clone();
        d.group = String::new();
        d.version = "v1".into();
        return d;
    }
    def.clone()
}

/// [`present`] without a copy when the stored object already has `def`'s apiVersion and kind
/// (every kind but the events.k8s.io view of core Events, in the version it is stored in): a
/// watch writes each event once per watcher, so copies of large objects added up.
pub fn present_ref<'a>(def: &ResourceDef, obj: &'a Value) -> std::borrow::Cow<'a, Value> {
    if !def.is_events_v1()
        && obj.get("apiVersion").and_then(Value::as_str) == Some(def.api_version().as_str())
        && obj.get("kind").and_then(Value::as_str) == Some(def.kind.as_str())
    {
        return std::borrow::Cow::Borrowed(obj);
    }
    std::borrow::Cow::Owned(present(def, obj))
}

/// The object as served in `def`'s version (CRDs without conversion webhooks only rewrite
/// apiVersion): the events.k8s.io view of a stored core Event, else the stored object with
/// `def`'s apiVersion and kind.
pub fn present(def: &ResourceDef, obj: &Value) -> Value {
    let mut o = if def.is_events_v1() {
        crate::events::from_core(obj)
    } else {
        obj.clone()
    };
    if let Some(m) = o.as_object_mut() {
        m.insert("apiVersion".into(), json!(def.api_version()));
        m.insert("kind".into(), json!(def.kind));
    }
    o
}

impl ApiError {
    /// Replace the message (keeping code/reason/details).
    pub fn with_message(mut self, message: String) -> Self {
        self.message = message;
        self
    }
    /// Replace the reason.
    pub fn with_reason(mut self, reason: &str) -> Self {
        self.reason = reason.into();
        self
    }
}
