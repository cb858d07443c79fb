//! Watch-fed caches the manager reads from instead of asking the API server at every reconcile
//! (reading everything from the server, a first-operator deploy cost ~36 GETs and LISTs;
//! controller-runtime, KUDO's base, reads from informer caches too).
//!
//! One cache per watched kind: Instances and OperatorVersions (all of them, in the manager's
//! scope; kube-runtime reflector stores) and the child kinds KUDO applies (label `heritage=kudo`;
//! [`crate::child_store`], kept as text). The same watch streams trigger the reconciles, so
//! caching costs no extra connection.
//!
//! A cache can lag behind the server, most visibly right after our own write. Where a stale read
//! would be wrong, the callers fall back to a GET:
//!
//! * **Instances**: the resourceVersion of the newest copy this manager has seen (its own writes'
//!   answers, its GETs, the watch's events; [`InstanceVersions`]) is remembered; the cached
//!   Instance is used only when it carries exactly that version (or nothing was remembered).
//!   Otherwise the Instance is read from the server.
//! * **Objects we applied**: the cached copy is used only when it is at least the generation the
//!   apply answered with and has the same uid (see [`crate::execute`]); else a GET.
//! * **Absent from the cache** (not yet seen, or deleted): a GET decides, wherever absence would
//!   lead to an action (apply again, skip a delete, report drift).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use serde_json::Value;

use crate::child_store::ChildStore;

/// The namespaced child kinds KUDO applies that are watched and cached: (group, version, kind,
/// plural). Not ReplicaSets: KUDO's readiness (KEP-34) listed them but judged them all healthy,
/// and a step's waiting line finds a Deployment's pods without them
/// ([`kudo_engine::waiting::owned_pods`]); their watch was a third of what a rollout sent.
pub(crate) const CHILD_KINDS: &[(&str, &str, &str, &str)] = &[
    ("apps", "v1", "Deployment", "deployments"),
    ("apps", "v1", "StatefulSet", "statefulsets"),
    ("apps", "v1", "DaemonSet", "daemonsets"),
    ("batch", "v1", "Job", "jobs"),
    ("", "v1", "Pod", "pods"),
    ("", "v1", "Service", "services"),
    ("", "v1", "ConfigMap", "configmaps"),
    ("", "v1", "Secret", "secrets"),
    ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
];

/// Top-level `spec` fields health rules read ([`kudo_engine::health`]); the only part of the spec
/// kept by [`slim`] for objects no plan applied.
const HEALTH_SPEC_FIELDS: &[&str] = &[
    "replicas",
    "updateStrategy",
    "completions",
    "type",
    "clusterIP",
    "externalIPs",
];

/// Strips a watched child before it is cached ([`crate::child_store`] then keeps what is left as
/// text, once the watch has decided whom the event wakes): what the manager never reads is not
/// kept, and what it keeps takes as little room as it can.
///
/// * `managedFields` of every object (never read, and the bulk of a small object).
/// * For objects no plan applied — those without a controller owner reference to an Instance,
///   e.g. the Pods of a Deployment, half of the cached objects of the `scale 1000` bench — only
///   what readiness and health (KEP-34's workloads) read is kept: the name, namespace, uid,
///   labels (KUDO's two, and a pod's `pod-template-hash`), generation, deletion timestamp and
///   finalizers of the metadata, `status`, and the few spec fields health reads. Pods keep only
///   the status fields health reads (phase, conditions, reason, message).
/// * The store keeps the object as compact JSON text, metadata included. A parsed JSON tree took
///   about five times the room of its text, and the cached children were most of the manager's
///   heap in the `scale 1000` bench (docs/benchmarks.md). Reading a cached copy costs
///   a parse.
///
/// Objects a plan applied (owned by their Instance) are kept whole: drift detection compares
/// them with the rendered templates. A stripped copy is never wrong, only incomplete: every reader
/// that compares contents (drift, the cached-apply check) falls back to a GET when the cached copy
/// does not show what it needs.
pub(crate) fn slim(kind: &str, o: &mut DynamicObject) {
    o.metadata.managed_fields = None;
    if owned_by_instance(&o.metadata) {
        return;
    }
    let m = &mut o.metadata;
    if let Some(labels) = &mut m.labels {
        let pod = kind == "Pod";
        labels.retain(|k, _| {
            k == kudo_api::labels::INSTANCE
                || k == "heritage"
                || (pod && k == kudo_engine::waiting::POD_TEMPLATE_HASH)
        });
    }
    m.annotations = None;
    // Pods keep their owners and template hash: which workload a pod belongs to is what a
    // step's `waitingFor` needs to name the pods of a workload that is not healthy.
    if kind != "Pod" {
        m.owner_references = None;
    }
    m.creation_timestamp = None;
    m.generate_name = None;
    if let Value::Object(data) = &mut o.data {
        data.retain(|k, v| match unapplied_keep(Some(kind), k) {
            Keep::All => true,
            Keep::Nothing => false,
            Keep::Only(fields) => {
                if let Value::Object(kept) = v {
                    kept.retain(|k, _| fields.contains(&k.as_str()));
                }
                true
            }
        });
        if kind == "Pod"
            && let Some(Value::Object(status)) = data.get_mut("status")
        {
            slim_container_statuses(status);
        }
    }
}

/// What of a top-level body field (`spec`, `status`, `data`…) of an object no plan applied the
/// child cache keeps (see [`slim`]); `kind` is `None` when it is not known yet.
pub(crate) enum Keep {
    All,
    Only(&'static [&'static str]),
    Nothing,
}

/// The status fields kept of a pod no plan applied: what health and a waiting line read.
const POD_STATUS_FIELDS: &[&str] = &[
    "phase",
    "conditions",
    "reason",
    "message",
    "containerStatuses",
    "initContainerStatuses",
];

/// See [`Keep`]; [`crate::lean`] applies the same rule while it decodes a watch event.
pub(crate) fn unapplied_keep(kind: Option<&str>, field: &str) -> Keep {
    match field {
        "spec" => Keep::Only(HEALTH_SPEC_FIELDS),
        "status" if kind == Some("Pod") => Keep::Only(POD_STATUS_FIELDS),
        "status" => Keep::All,
        _ => Keep::Nothing,
    }
}

/// Of a pod's container statuses, only the containers that wait or ended (their name, reason,
/// message and exit code): what [`kudo_engine::waiting::pod_problem`] reads. A running pod keeps
/// none.
fn slim_container_statuses(status: &mut serde_json::Map<String, Value>) {
    for key in ["initContainerStatuses", "containerStatuses"] {
        let Some(Value::Array(list)) = status.get_mut(key) else {
            continue;
        };
        list.retain_mut(|c| {
            let state = &c["state"];
            let kept = ["waiting", "terminated"].into_iter().find_map(|s| {
                let v = &state[s];
                v.is_object().then(|| {
                    let fields = ["reason", "message", "exitCode"];
                    let small: serde_json::Map<String, Value> = fields
                        .iter()
                        .filter_map(|f| v.get(*f).map(|x| (f.to_string(), x.clone())))
                        .collect();
                    serde_json::json!({ "name": c["name"].clone(), "state": { s: small } })
                })
            });
            match kept {
                Some(k) => {
                    *c = k;
                    true
                }
                None => false,
            }
        });
        if list.is_empty() {
            status.remove(key);
        }
    }
}

/// Keeps an object's body (everything but its metadata: spec, status, data…) as compact JSON
/// text in `data`, a JSON string: the form the caches hold objects in (see [`slim`]).
/// [`body`] and [`unpacked`] read it back.
pub(crate) fn pack(o: &mut DynamicObject) {
    if o.data.is_object() {
        let body = std::mem::take(&mut o.data);
        o.data = Value::String(serde_json::to_string(&body).unwrap_or_default());
    }
}

/// The body of a cached object ([`pack`]ed or not).
pub(crate) fn body(o: &DynamicObject) -> Value {
    match &o.data {
        Value::String(packed) => serde_json::from_str(packed).unwrap_or(Value::Null),
        other => other.clone(),
    }
}

/// Whether the body of a cached object may contain the string `s`: a packed body whose text does
/// not contain it cannot (names need no JSON escaping), so the watch mappers that look for the
/// Instances naming a Secret or an OperatorVersion parse only the few that may (every Secret
/// event of the namespace asked about every Instance).
pub(crate) fn body_may_contain(o: &DynamicObject, s: &str) -> bool {
    match &o.data {
        Value::String(packed) => packed.contains(s),
        _ => true,
    }
}

/// A cached object as the API server gave it (less what the cache dropped), body unpacked.
pub(crate) fn unpacked(o: &DynamicObject) -> DynamicObject {
    DynamicObject {
        types: o.types.clone(),
        metadata: o.metadata.clone(),
        data: body(o),
    }
}

/// Which watch events of a child kind wake the owning Instance (one per watched kind).
///
/// Objects a plan applied (owned by their Instance) wake it when something drift detection, the
/// running plan's health checks or readiness read changed ([`applied_digest`]). The other
/// children — the Pods of a Deployment — are only read by readiness and health, so their events
/// wake the Instance only when something those can see changed: the health verdict (with its
/// message), the generation, the deletion timestamp, or the object appeared or went away. The
/// `scale 1000` bench's 2000 Pods change about four times each (scheduled, IPs, container
/// statuses, ready) while their health changes once or twice; every wake costs a reconcile with a
/// readiness and drift check.
/// While the owning Instance runs a plan, such a change wakes it only when it is a pod's problem a
/// step's waiting line shows (see [`crate::running`]).
///
/// The digests are filed by a 64-bit fingerprint of the object's namespace and name rather than by
/// the two strings: one entry per cached child (50,000 at `scale 10000`) is 16 bytes instead of
/// two strings' ~100, and two objects sharing a fingerprint (odds about 2⁻⁶⁴ a pair) would at
/// worst cost or save one reconcile.
#[derive(Default)]
pub(crate) struct Wakes(Mutex<HashMap<u64, u64>>);

impl Wakes {
    /// The Instance to reconcile for this watch event of a `kind` object, if any. The object is
    /// slim ([`slim`]) and its body not text yet, so it is read without a parse.
    pub fn owner_to_wake(
        &self,
        api_version: &str,
        kind: &str,
        ev: &watcher::Event<DynamicObject>,
        running: &crate::running::Running,
    ) -> Option<ObjectRef<DynamicObject>> {
        let key = |o: &DynamicObject| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (o.metadata.namespace.as_deref(), o.metadata.name.as_deref()).hash(&mut h);
            h.finish()
        };
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match ev {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                let owner = crate::resources::owner_of(o)?;
                let busy = running.runs(&owner);
                let (digest, quiet) = if owned_by_instance(&o.metadata) {
                    (applied_digest(&with_type(o, api_version, kind), busy), false)
                } else {
                    let seen_by_health = health_view(o, api_version, kind);
                    let problem = busy && shows_a_problem(kind, &seen_by_health);
                    (visible_digest(&seen_by_health, o), busy && !problem)
                };
                if seen.insert(key(o), digest) == Some(digest) || quiet {
                    return None;
                }
                Some(owner)
            }
            watcher::Event::Delete(o) => {
                seen.remove(&key(o));
                crate::resources::owner_of(o)
            }
            watcher::Event::Init | watcher::Event::InitDone => None,
        }
    }
}

/// Whether a plan applied the object: it has an owner reference to an Instance (the enhancer
/// sets one on every namespaced object it renders).
pub(crate) fn owned_by_instance(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    meta.owner_references.as_ref().is_some_and(|refs| {
        refs.iter()
            .any(|r| r.kind == "Instance" && r.api_version.starts_with("kudo.dev/"))
    })
}

/// What of an object a plan applied (`typed` as [`with_type`] gives it) can make a difference to
/// its Instance: what drift detection compares (everything but the status and the
/// resourceVersion; metadata with the generation, labels, annotations, owners), and its
/// health — while a plan runs only the verdict's kind (progressing, healthy, failed), since the
/// step waiting on it moves only then; idle, the verdict with its message, which readiness shows.
/// A rollout's replica counts therefore do not wake a running plan at every step:
/// the waiting line written after the grace keeps the counts it saw.
fn applied_digest(typed: &Value, running: bool) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let verdict = kudo_engine::health(typed);
    if running {
        std::mem::discriminant(&verdict).hash(&mut h);
    } else {
        format!("{verdict:?}").hash(&mut h);
    }
    for (k, v) in typed.as_object().into_iter().flatten() {
        if k == "status" {
            continue;
        }
        k.hash(&mut h);
        match v.as_object().filter(|_| k == "metadata") {
            Some(meta) => meta
                .iter()
                .filter(|(f, _)| *f != "resourceVersion")
                .for_each(|(f, x)| hash_json(&mut h, f, x)),
            None => hash_json(&mut h, k, v),
        }
    }
    h.finish()
}

/// Feeds a field's name and JSON text to a hasher, without building the text.
fn hash_json(h: &mut impl std::hash::Hasher, name: &str, v: &Value) {
    struct Feed<'a, H>(&'a mut H);
    impl<H: std::hash::Hasher> std::io::Write for Feed<'_, H> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.write(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    h.write(name.as_bytes());
    let _ = serde_json::to_writer(Feed(h), v);
}

/// Whether a step's waiting line would show something of this object (as [`health_view`]
/// gives it): a pod's problem.
fn shows_a_problem(kind: &str, typed: &Value) -> bool {
    kind == "Pod" && kudo_engine::waiting::pod_problem(typed).is_some()
}

/// A hash of what readiness and health can see of an object (see [`Wakes`]); `typed` is the
/// object as [`health_view`] gives it.
fn visible_digest(typed: &Value, o: &DynamicObject) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    format!("{:?}", kudo_engine::health(typed)).hash(&mut h);
    o.metadata.generation.hash(&mut h);
    o.metadata.deletion_timestamp.is_some().hash(&mut h);
    o.metadata.uid.hash(&mut h);
    h.finish()
}

/// What [`kudo_engine::health`] and a waiting line's pod problem read of an object: its type,
/// the name, namespace and generation of its metadata, its body (unpacked).
fn health_view(o: &DynamicObject, api_version: &str, kind: &str) -> Value {
    let m = &o.metadata;
    let metadata = serde_json::json!({"name": m.name, "namespace": m.namespace, "generation": m.generation});
    typed_view(o, api_version, kind, metadata)
}

/// The API resource of a child kind of [`CHILD_KINDS`].
pub(crate) fn child_resource(g: &str, v: &str, k: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), plural)
}

/// A decoded OperatorVersion and the resourceVersion it was decoded at.
type DecodedOv = (String, Arc<kudo_api::OperatorVersion>);

/// The caches shared by all reconciles.
pub(crate) struct Caches {
    /// Every Instance in the manager's scope (the controller's own store).
    pub instances: Store<DynamicObject>,
    /// Every OperatorVersion (cluster-wide: an Instance may reference another namespace).
    pub operator_versions: Store<DynamicObject>,
    /// `(apiVersion, kind)` → store of the `heritage=kudo` objects of that kind.
    children: HashMap<(String, String), Arc<ChildStore>>,
    /// The newest resourceVersion seen of each Instance.
    instance_versions: Arc<InstanceVersions>,
    /// `(namespace, name)` → a cached OperatorVersion decoded, with the resourceVersion it was
    /// decoded at: every reconcile needs the typed OperatorVersion, and decoding it (to JSON and
    /// back) was 6 % of the manager's CPU in the `scale 1000` bench.
    decoded_ovs: Mutex<HashMap<(String, String), DecodedOv>>,
}

/// Whether a store has received its first full list (an unready store is empty, not "nothing
/// exists"). Never blocks. Polling an unready store replaces the waker of another task waiting
/// for it (its readiness is a oneshot channel); nothing else waits on the OperatorVersion, child
/// and autopilot stores, and the Instance store is ready before any reconcile runs (the applier
/// waits for it), so no waiter is lost.
pub(crate) fn ready(store: &Store<DynamicObject>) -> bool {
    store.wait_until_ready().now_or_never().is_some_and(|r| r.is_ok())
}

/// `(namespace, name)` → resourceVersion of the newest copy of each Instance seen: this
/// manager's writes' answers, its GETs, and the Instance watch's events. Newest by
/// [`kudo_kube::resource_version`], so that a watch event carrying an older copy than one seen
/// before (a view going back in time, as after a re-list from a lagging API server) does not
/// lower it: the cache then holds an older copy than the newest seen, and is not used.
#[derive(Default)]
pub(crate) struct InstanceVersions(Mutex<HashMap<(String, String), String>>);

impl InstanceVersions {
    /// Notes `rv` as seen of the Instance (`None`: it is gone, forget it).
    pub fn saw(&self, ns: &str, name: &str, rv: Option<&str>) {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = (ns.to_string(), name.to_string());
        match (rv, seen.get_mut(&key)) {
            (None, _) => {
                seen.remove(&key);
            }
            (Some(rv), Some(known)) => {
                kudo_kube::resource_version::advance(known, rv);
            }
            (Some(rv), None) => {
                seen.insert(key, rv.to_string());
            }
        }
    }

    fn get(&self, key: &(String, String)) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned()
    }
}

impl Caches {
    pub fn new(
        instances: Store<DynamicObject>,
        operator_versions: Store<DynamicObject>,
        children: HashMap<(String, String), Arc<ChildStore>>,
        instance_versions: Arc<InstanceVersions>,
    ) -> Caches {
        Caches {
            instances,
            operator_versions,
            children,
            instance_versions,
            decoded_ovs: Mutex::default(),
        }
    }

    /// The cached Instance when it is known to be current (see the module docs): `Ok(Some)`
    /// current copy, `Ok(None)` gone (its delete event arrived), `Err(())` read it from the server.
    pub fn instance(&self, ns: &str, name: &str) -> Result<Option<DynamicObject>, ()> {
        if !ready(&self.instances) {
            return Err(());
        }
        let key = (ns.to_string(), name.to_string());
        let cached = self
            .instances
            .get(&ObjectRef::new_with(name, crate::resources::instance_resource()).within(ns));
        match cached {
            None => {
                self.instance_versions.saw(ns, name, None);
                Ok(None)
            }
            Some(obj) => match self.instance_versions.get(&key) {
                None => Ok(Some(unpacked(&obj))),
                Some(rv) if obj.metadata.resource_version.as_ref() == Some(&rv) => Ok(Some(unpacked(&obj))),
                Some(_) => Err(()),
            },
        }
    }

    /// Notes the resourceVersion of an Instance copy read from or written to the server.
    pub fn saw_instance(&self, ns: &str, name: &str, rv: Option<&str>) {
        self.instance_versions.saw(ns, name, rv);
    }

    /// The cached OperatorVersion, if the cache has it (`None`: ask the server).
    pub fn operator_version(&self, ns: &str, name: &str) -> Option<Arc<DynamicObject>> {
        if !ready(&self.operator_versions) {
            return None;
        }
        self.operator_versions
            .get(&ObjectRef::new_with(name, crate::resources::operator_version_resource()).within(ns))
    }

    /// The cached OperatorVersion decoded with `decode`, reusing the previous decoding while the
    /// resourceVersion is unchanged (resourceVersions are only compared for equality); `None`
    /// when the cache does not have it (ask the server).
    pub fn decoded_operator_version<E>(
        &self,
        ns: &str,
        name: &str,
        decode: impl FnOnce(&DynamicObject) -> Result<kudo_api::OperatorVersion, E>,
    ) -> Option<Result<Arc<kudo_api::OperatorVersion>, E>> {
        let raw = self.operator_version(ns, name)?;
        let key = (ns.to_string(), name.to_string());
        let rv = raw.metadata.resource_version.clone();
        if let Some(rv) = &rv
            && let Some((seen, ov)) = self
                .decoded_ovs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key)
            && seen == rv
        {
            return Some(Ok(ov.clone()));
        }
        let ov = match decode(&raw) {
            Ok(ov) => Arc::new(ov),
            Err(e) => return Some(Err(e)),
        };
        if let Some(rv) = rv {
            self.decoded_ovs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, (rv, ov.clone()));
        }
        Some(Ok(ov))
    }

    /// The cached OperatorVersions of a namespace; `None` when the cache is not ready.
    pub fn operator_versions_in(&self, ns: &str) -> Option<Vec<Arc<DynamicObject>>> {
        if !ready(&self.operator_versions) {
            return None;
        }
        Some(
            self.operator_versions
                .state()
                .into_iter()
                .filter(|o| o.metadata.namespace.as_deref() == Some(ns))
                .collect(),
        )
    }

    /// Whether changes of objects of this kind trigger a reconcile of the Instance named by their
    /// `kudo.dev/instance` label (a watched child kind, or an Instance: a KudoOperator task's
    /// child).
    pub fn watches(&self, api_version: &str, kind: &str) -> bool {
        (api_version == kudo_api::API_VERSION && kind == "Instance")
            || self
                .children
                .contains_key(&(api_version.to_string(), kind.to_string()))
    }

    /// The ready store of a child kind, `None` when the kind is not cached (or not synced yet).
    fn child_store(&self, api_version: &str, kind: &str) -> Option<&ChildStore> {
        self.children
            .get(&(api_version.to_string(), kind.to_string()))
            .map(Arc::as_ref)
            .filter(|c| c.ready())
    }

    /// Whether objects of this kind are cached: `Some(cached copy or None)` — `None` meaning "not
    /// in the cache", which the caller confirms with the server before acting on it.
    pub fn child(&self, api_version: &str, kind: &str, ns: &str, name: &str) -> Option<Option<Value>> {
        Some(self.child_store(api_version, kind)?.get(ns, name))
    }

    /// The cached objects of a kind in `ns` labelled for `instance` (`kudo.dev/instance`), with
    /// apiVersion/kind set; `None` when the kind is not cached. Every cached child carries
    /// `heritage=kudo` (the watch selects it); objects no plan applied keep no other labels (see
    /// [`slim`]), so the instance label is the only one to select by.
    pub fn children_of_instance(
        &self,
        api_version: &str,
        kind: &str,
        ns: &str,
        instance: &str,
    ) -> Option<Vec<Value>> {
        Some(self.child_store(api_version, kind)?.of_instance(ns, instance))
    }
}

/// A cached object as JSON with its type filled in (watch events of typed lists may omit it),
/// its body unpacked (see [`slim`]).
fn with_type(obj: &DynamicObject, api_version: &str, kind: &str) -> Value {
    let metadata = serde_json::to_value(&obj.metadata).unwrap_or(Value::Null);
    typed_view(obj, api_version, kind, metadata)
}

/// `obj`'s body (unpacked) under the given type and `metadata`: the views of [`with_type`] and
/// [`health_view`].
fn typed_view(obj: &DynamicObject, api_version: &str, kind: &str, metadata: Value) -> Value {
    let mut v = serde_json::Map::new();
    v.insert("apiVersion".into(), Value::String(api_version.to_string()));
    v.insert("kind".into(), Value::String(kind.to_string()));
    v.insert("metadata".into(), metadata);
    if let Value::Object(body) = body(obj) {
        for (k, val) in body {
            if k != "apiVersion" && k != "kind" && k != "metadata" {
                v.insert(k, val);
            }
        }
    }
    Value::Object(v)
}

#[cfg(test)]
mod tests {
    /// A copy older than one seen before (a re-list from a lagging API server) does not lower
    /// the newest version known, so the cache holding it is not used.
    #[test]
    fn the_newest_instance_version_seen_is_not_lowered_by_an_older_copy() {
        let v = InstanceVersions::default();
        let key = ("ns".to_string(), "i".to_string());
        for (rv, newest) in [("10", "10"), ("12", "12"), ("11", "12"), ("100", "100")] {
            v.saw("ns", "i", Some(rv));
            assert_eq!(v.get(&key).as_deref(), Some(newest), "after {rv}");
        }
        v.saw("ns", "i", None);
        assert_eq!(v.get(&key), None);
    }

    use super::*;
    use serde_json::json;

    /// `init --least-privilege` binds the manager to `kudo_api::rbac::MANAGER_RULES`: every cache
    /// must be one it may list and watch.
    #[test]
    fn the_least_privilege_role_lets_the_manager_watch_every_cache() {
        for (group, _, kind, plural) in CHILD_KINDS {
            for verb in ["get", "list", "watch"] {
                assert!(
                    kudo_api::rbac::MANAGER_RULES
                        .iter()
                        .any(|r| r.allows(group, plural, verb)),
                    "{kind}: {verb}"
                );
            }
        }
    }

    /// The watched child kinds (kept as a literal list in [`CHILD_KINDS`]) agree with the shared
    /// kind table.
    #[test]
    fn child_kinds_agree_with_the_kind_table() {
        for (g, v, k, plural) in CHILD_KINDS {
            let known = kudo_api::kinds::known(g, k);
            assert_eq!(
                (known.version, known.plural, known.namespaced),
                (*v, *plural, true),
                "{k}"
            );
        }
    }

    /// What the child watches cache of an object.
    fn slim_child(kind: &str, o: &mut DynamicObject) {
        slim(kind, o);
        pack(o);
    }

    fn obj(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    fn pod(phase: &str, ready: &str, ip: &str) -> DynamicObject {
        obj(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                "labels": {"heritage": "kudo", "kudo.dev/instance": "i", "app": "nginx", "pod-template-hash": "5d8f"},
                "annotations": {"kudo.dev/plan": "deploy"},
                "creationTimestamp": "2026-11-25T07:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": true}],
                "managedFields": [{"manager": "sim"}]},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], "nodeName": "n1"},
            "status": {"phase": phase, "podIP": ip, "hostIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": ready}],
                "containerStatuses": [{"name": "c", "ready": ready == "True"}]}
        }))
    }

    #[test]
    fn objects_no_plan_applied_keep_only_what_health_reads() {
        let mut p = pod("Running", "True", "1.2.3.4");
        slim_child("Pod", &mut p);
        assert!(p.metadata.managed_fields.is_none());
        let cached = with_type(&p, "v1", "Pod");
        assert_eq!(
            cached,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                    "labels": {"heritage": "kudo", "kudo.dev/instance": "i", "pod-template-hash": "5d8f"},
                    // which workload the pod belongs to (a step's waitingFor names its pods)
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": true}]},
                "spec": {},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
        );
        assert_eq!(kudo_engine::health(&cached), kudo_engine::Health::Healthy);

        // A container that waits keeps its reason and message, nothing else.
        let mut p = pod("Pending", "False", "");
        let waiting = json!([{"name": "c", "ready": false, "image": "nginx", "restartCount": 4,
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]);
        let mut body = p.data.clone();
        body["status"]["containerStatuses"] = waiting;
        p.data = body;
        slim_child("Pod", &mut p);
        let cached = with_type(&p, "v1", "Pod");
        assert_eq!(
            cached["status"]["containerStatuses"],
            json!([{"name": "c", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}])
        );
        assert_eq!(
            kudo_engine::waiting::pod_problem(&cached).as_deref(),
            Some("pod p: ImagePullBackOff (Back-off pulling image)")
        );

        // a workload no plan applied (e.g. made by an operator's own controller)
        let mut sts = obj(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "s", "namespace": "ns", "generation": 2,
                "labels": {"heritage": "kudo", "pod-template-hash": "x"},
                "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Db", "name": "db", "uid": "o"}]},
            "spec": {"replicas": 2, "template": {"spec": {"containers": []}}},
            "status": {"replicas": 2, "observedGeneration": 2}
        }));
        slim_child("StatefulSet", &mut sts);
        let cached = with_type(&sts, "apps/v1", "StatefulSet");
        assert_eq!(cached["metadata"]["labels"], json!({"heritage": "kudo"}));
        assert!(cached["metadata"].get("ownerReferences").is_none());
        assert_eq!(cached["spec"], json!({"replicas": 2}));
        assert_eq!(cached["status"], json!({"replicas": 2, "observedGeneration": 2}));
        assert_eq!(cached["metadata"]["generation"], 2);
    }

    #[test]
    fn objects_a_plan_applied_are_kept_whole() {
        let v = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns",
                "ownerReferences": [{"apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "name": "i", "uid": "iu", "controller": true}],
                "managedFields": [{"manager": "kudo"}]},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
            "status": {"replicas": 2}
        });
        let mut d = obj(v.clone());
        slim_child("Deployment", &mut d);
        assert!(d.metadata.managed_fields.is_none());
        let mut want = v.clone();
        want["metadata"].as_object_mut().unwrap().remove("managedFields");
        assert_eq!(with_type(&d, "apps/v1", "Deployment"), want);
    }

    #[test]
    fn a_packed_instance_unpacks_to_what_the_server_sent() {
        let v = json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
            "metadata": {"name": "i", "namespace": "ns", "resourceVersion": "7",
                "annotations": {"kudo-rs.dev/admitted-spec": "{}"}},
            "spec": {"operatorVersion": {"name": "ov-0.1.0"}, "parameters": {"A": "1"}},
            "status": {"planStatus": {"deploy": {"status": "COMPLETE"}}}
        });
        let mut i = obj(v.clone());
        pack(&mut i);
        assert!(i.data.is_string(), "{:?}", i.data);
        assert_eq!(i.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(body(&i)["spec"], v["spec"]);
        assert!(body_may_contain(&i, "ov-0.1.0"));
        assert!(!body_may_contain(&i, "other-secret"));
        assert_eq!(serde_json::to_value(unpacked(&i)).unwrap(), v);
        // packing twice is harmless
        pack(&mut i);
        assert_eq!(serde_json::to_value(unpacked(&i)).unwrap(), v);
    }

    #[test]
    fn pods_wake_their_instance_only_when_health_changes() {
        let wakes = Wakes::default();
        let idle = crate::running::Running::default();
        let wake = |ev| wakes.owner_to_wake("v1", "Pod", &ev, &idle).map(|r| r.name);
        assert_eq!(
            wake(watcher::Event::Apply(pod("Pending", "False", ""))),
            Some("i".into())
        );
        // a new IP, same verdict (not running yet): nothing readiness can see
        assert_eq!(
            wake(watcher::Event::Apply(pod("Pending", "False", "1.2.3.4"))),
            None
        );
        assert_eq!(
            wake(watcher::Event::Apply(pod("Running", "False", "1.2.3.4"))),
            Some("i".into())
        );
        assert_eq!(
            wake(watcher::Event::Apply(pod("Running", "True", "1.2.3.4"))),
            Some("i".into())
        );
        assert_eq!(
            wake(watcher::Event::InitApply(pod("Running", "True", "1.2.3.4"))),
            None
        );
        assert_eq!(
            wake(watcher::Event::Delete(pod("Running", "True", "1.2.3.4"))),
            Some("i".into())
        );
        assert_eq!(
            wake(watcher::Event::Apply(pod("Running", "True", "1.2.3.4"))),
            Some("i".into())
        );
        assert_eq!(wake(watcher::Event::Init), None);
    }

    /// Instance `ns/i` running its deploy plan, and the set that knows it.
    fn running_instance() -> (DynamicObject, crate::running::Running) {
        let running = crate::running::Running::default();
        let inst = obj(json!({"apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
            "metadata": {"name": "i", "namespace": "ns"},
            "spec": {"planExecution": {"planName": "deploy", "uid": "u"}}}));
        running.observe(&inst, true);
        (inst, running)
    }

    #[test]
    fn pods_wake_an_instance_running_a_plan_only_with_a_problem_to_show() {
        let wakes = Wakes::default();
        let (mut inst, running) = running_instance();
        let wake = |ev| wakes.owner_to_wake("v1", "Pod", &ev, &running).map(|r| r.name);
        assert_eq!(wake(watcher::Event::Apply(pod("Pending", "False", ""))), None);
        assert_eq!(
            wake(watcher::Event::Apply(pod("Running", "True", "1.2.3.4"))),
            None
        );
        let mut stuck = pod("Pending", "False", "");
        stuck.data["status"]["containerStatuses"][0]["state"] =
            json!({"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}});
        assert_eq!(wake(watcher::Event::Apply(stuck)), Some("i".into()));
        assert_eq!(
            wake(watcher::Event::Delete(pod("Running", "True", "1.2.3.4"))),
            Some("i".into()),
            "a deletion always wakes"
        );
        // unscheduled: idle again, readiness reads pods
        inst.data["spec"]["planExecution"] = json!({});
        running.observe(&inst, true);
        assert_eq!(
            wake(watcher::Event::Apply(pod("Running", "False", "1.2.3.4"))),
            Some("i".into())
        );
    }

    #[test]
    fn an_applied_deployment_wakes_a_running_plan_when_its_verdict_or_content_changes() {
        let deploy = |available: i64, replicas: i64| {
            obj(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "ns", "generation": 1,
                    "labels": {"heritage": "kudo", "kudo.dev/instance": "i"},
                    "ownerReferences": [{"apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "name": "i", "uid": "iu", "controller": true}]},
                "spec": {"replicas": replicas},
                "status": {"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas,
                    "readyReplicas": available, "availableReplicas": available}}))
        };
        let wakes = Wakes::default();
        let (mut inst, running) = running_instance();
        let wake = |ev| {
            wakes
                .owner_to_wake("apps/v1", "Deployment", &ev, &running)
                .map(|r| r.name)
        };
        assert_eq!(wake(watcher::Event::Apply(deploy(0, 3))), Some("i".into()));
        assert_eq!(
            wake(watcher::Event::Apply(deploy(1, 3))),
            None,
            "still progressing"
        );
        assert_eq!(
            wake(watcher::Event::Apply(deploy(3, 3))),
            Some("i".into()),
            "healthy now"
        );
        assert_eq!(
            wake(watcher::Event::Apply(deploy(3, 4))),
            Some("i".into()),
            "its spec changed"
        );
        inst.data["spec"]["planExecution"] = json!({});
        running.observe(&inst, true);
        assert_eq!(
            wake(watcher::Event::Apply(deploy(3, 4))),
            Some("i".into()),
            "idle: the message counts"
        );
        assert_eq!(wake(watcher::Event::Apply(deploy(4, 4))), Some("i".into()));
        assert_eq!(wake(watcher::Event::Apply(deploy(4, 4))), None, "nothing changed");
    }
}
