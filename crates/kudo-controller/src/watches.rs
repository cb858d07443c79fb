//! What the manager watches, and which Instances an event of each kind wakes.
//!
//! Every watch feeds a cache (crate::cache) and yields reconcile requests: one connection per
//! kind, in one scope (the whole cluster, or the configured namespace). The caches hold no
//! managedFields (never read, and the bulk of a small object); children no plan applied keep
//! only what readiness reads, and wake their Instance only when that changed (cache::slim,
//! cache::Wakes). A new watched kind is one more method here and one line in
//! [`crate::run_controller`].

use std::collections::HashMap;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{ReconcileRequest, trigger_with};
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use serde::Deserialize;

use kudo_engine::shard::BUCKET_LABEL;

use crate::cache::InstanceVersions;
use crate::child_store::ChildStore;
use crate::echoes::Echoes;
use crate::forward;
use crate::gate::ShardGate;
use crate::lean::{Child, Lean, Shape, Whole};
use crate::running::Running;
use crate::views::{self, ViewStream, labelled_watch, lean_watcher};
use kudo_kube::known_resource;

use crate::resources::{instance_resource, operator_version_resource, owner_of};
use crate::{autopilot, cache};

/// A stream of reconcile requests, one per watch.
pub(crate) type Trigger =
    futures::stream::BoxStream<'static, Result<ReconcileRequest<DynamicObject>, watcher::Error>>;

/// The watches declared so far and the scope they share.
pub(crate) struct Watches {
    client: kube::Client,
    namespace: Option<String>,
    /// A sharded replica's gate: Instances and children are then watched through label-selected
    /// views, only the held shards' buckets among the labelled ones (crate::views).
    sharded: Option<Arc<ShardGate>>,
    /// The reconcile requests of every watch, merged into the queue by the caller.
    pub triggers: Vec<Trigger>,
}

/// Instances are kept packed (their body as JSON text; cache::pack): the manager reads one per
/// reconcile, unpacked, and the parsed trees of 1,000 Instances were a fifth of its heap.
fn slim_instance(o: &mut DynamicObject) {
    cache::pack(o);
}

impl Watches {
    pub fn new(client: kube::Client, namespace: Option<String>, gate: &Arc<ShardGate>) -> Watches {
        Watches {
            client,
            namespace,
            sharded: (gate.count() > 1).then(|| gate.clone()),
            triggers: Vec::new(),
        }
    }

    /// The events of `ar`'s objects matching `labels`: one watch, or for a sharded replica the
    /// union of the unlabelled view, the view of the held buckets (`view`, see
    /// [`crate::gate::ShardGate::listed`]) and `also` (more selectors, e.g. child Instances).
    fn events<S: Shape>(&self, ar: &ApiResource, labels: &str, view: usize, also: &[&str]) -> ViewStream {
        let watch = |sel: &str| labelled_watch::<S>(self.scoped(ar), sel);
        let Some(gate) = &self.sharded else {
            return forward::forward_only(watch(labels));
        };
        let mut views = vec![
            watch(&views::all_of(labels, &format!("!{BUCKET_LABEL}"))),
            views::held_watch::<S>(self.scoped(ar), labels, gate.clone(), view),
        ];
        views.extend(also.iter().map(|sel| watch(sel)));
        let gate = gate.clone();
        let instances = ar.kind == "Instance";
        // An Instance this replica just labelled moves to the labelled view (crate::views).
        forward::forward_only(views::merged(views, 1, move |o| instances && gate.labelled(o)).boxed())
    }

    /// The API of `ar` in the watches' scope.
    fn scoped<S: Shape>(&self, ar: &ApiResource) -> Api<Lean<S>> {
        match &self.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        }
    }

    /// Instances: a change reconciles the Instance itself (unless it is the echo of this
    /// manager's own write, see [`crate::echoes`]) and, for a child Instance (a KudoOperator
    /// task's, label `heritage=kudo`), its parent. Returns their cache.
    pub fn instances(
        &mut self,
        echoes: Arc<Echoes>,
        running: Arc<Running>,
        versions: Arc<InstanceVersions>,
    ) -> Store<DynamicObject> {
        let iar = instance_resource();
        let writer = Writer::new(iar.clone());
        let store = writer.as_reader();
        let events = self
            .events::<Whole>(&iar, "", 0, &["heritage=kudo"])
            .modify(slim_instance)
            .reflect(writer);
        let trigger = trigger_with(events, move |ev: watcher::Event<DynamicObject>| {
            let (i, wake_me) = match ev {
                watcher::Event::Apply(i) => {
                    running.observe(&i, true);
                    let (ns, name) = (i.namespace().unwrap_or_default(), i.name_any());
                    let rv = i.resource_version().unwrap_or_default();
                    versions.saw(&ns, &name, Some(&rv));
                    let echo = echoes.is_echo(&ns, &name, &rv);
                    (i, !echo)
                }
                watcher::Event::Delete(i) => {
                    running.observe(&i, false);
                    echoes.forget(&i.namespace().unwrap_or_default(), &i.name_any());
                    (i, true)
                }
                watcher::Event::InitApply(i) => {
                    running.observe(&i, true);
                    let rv = i.resource_version().unwrap_or_default();
                    versions.saw(&i.namespace().unwrap_or_default(), &i.name_any(), Some(&rv));
                    (i, true)
                }
                watcher::Event::Init | watcher::Event::InitDone => return Vec::new(),
            };
            let me = ObjectRef::from_obj_with(&i, instance_resource());
            let parent = (i.labels().get("heritage").map(String::as_str) == Some("kudo"))
                .then(|| owner_of(&i))
                .flatten();
            wake_me.then_some(me).into_iter().chain(parent).collect()
        });
        self.triggers.push(trigger.boxed());
        store
    }

    /// OperatorVersion changes re-reconcile every Instance referencing the OV. OperatorVersions
    /// may live in another namespace than their Instances: always cluster-wide. Returns their
    /// cache.
    pub fn operator_versions(&mut self, instances: &Store<DynamicObject>) -> Store<DynamicObject> {
        let ovar = operator_version_resource();
        let ovs: Api<Lean<Whole>> = Api::all_with(self.client.clone(), &ovar);
        let writer = Writer::new(ovar.clone());
        let cache = writer.as_reader();
        let instances = instances.clone();
        let events = lean_watcher(ovs, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .touched_objects();
        let trigger = trigger_with(events, move |ov: DynamicObject| instances_of_ov(&instances, &ov));
        self.triggers.push(trigger.boxed());
        cache
    }

    /// Secrets named by an Instance's `spec.parameterSources` (sensitive parameters): a change of
    /// one wakes those Instances, whose reconcile compares the values' fingerprints (rotation,
    /// crate::param_sources). The data is dropped as it arrives: nothing of a Secret is cached.
    pub fn secrets(&mut self, instances: &Store<DynamicObject>) {
        let sar = known_resource("", "Secret");
        let instances = instances.clone();
        let events = lean_watcher::<Whole>(self.scoped(&sar), watcher::Config::default())
            .default_backoff()
            .modify(|o: &mut DynamicObject| o.data = serde_json::Value::Null)
            .touched_objects();
        let trigger = trigger_with(events, move |s: DynamicObject| {
            instances_referencing_secret(&instances, &s)
        });
        self.triggers.push(trigger.boxed());
    }

    /// Children: anything KUDO applied carries `heritage=kudo` and `kudo.dev/instance`; a change
    /// wakes the owning Instance (see [`cache::Wakes`] for which changes). Returns the cache of
    /// each child kind.
    pub fn children(
        &mut self,
        running: Arc<Running>,
        echoes: Arc<Echoes>,
    ) -> HashMap<(String, String), Arc<ChildStore>> {
        let mut children = HashMap::new();
        for (i, (g, v, k, plural)) in cache::CHILD_KINDS.iter().enumerate() {
            let ar = cache::child_resource(g, v, k, plural);
            let store = Arc::new(ChildStore::new(&ar.api_version, k));
            children.insert((ar.api_version.clone(), ar.kind.clone()), store.clone());
            let wakes = cache::Wakes::default();
            let av = ar.api_version.clone();
            let (running, echoes) = (running.clone(), echoes.clone());
            // Slim, decide whom the event wakes from the slim body, store it as text.
            let wakes_of = self
                .events::<Child>(&ar, "heritage=kudo", 1 + i, &[])
                .map_ok(move |ev| {
                    let ev = ev.modify(|o| cache::slim(k, o));
                    // Where the echoes file this object: its namespace and its key there.
                    let at = |o: &DynamicObject| {
                        let key = crate::echoes::child_key(k, &o.name_any());
                        (o.namespace().unwrap_or_default(), key)
                    };
                    let echo = match &ev {
                        watcher::Event::Apply(o) => {
                            let (ns, key) = at(o);
                            echoes.is_echo(&ns, &key, &o.resource_version().unwrap_or_default())
                        }
                        watcher::Event::Delete(o) => {
                            let (ns, key) = at(o);
                            echoes.forget(&ns, &key);
                            false
                        }
                        _ => false,
                    };
                    let wake = if echo {
                        None
                    } else {
                        wakes.owner_to_wake(&av, k, &ev, &running)
                    };
                    store.observe(&ev);
                    wake
                });
            let trigger = trigger_with(wakes_of, |wake| wake);
            self.triggers.push(trigger.boxed());
        }
        children
    }

    /// Shards a sharded replica just acquired (crate::shard): each wakes the cached Instances of
    /// that shard, which the gate turned away while another replica held it.
    pub fn shards_granted(
        &mut self,
        instances: &Store<DynamicObject>,
        granted: tokio::sync::mpsc::UnboundedReceiver<u32>,
        count: u32,
    ) {
        let instances = instances.clone();
        let trigger =
            futures::stream::unfold(granted, |mut rx| async move { rx.recv().await.map(|s| (s, rx)) })
                .flat_map(move |shard| {
                    let woken: Vec<_> = instances
                        .state()
                        .iter()
                        .filter(|i| {
                            let ns = i.namespace().unwrap_or_default();
                            kudo_engine::shard::shard_of(&ns, &i.name_any(), count) == shard
                        })
                        .map(|i| {
                            Ok(ReconcileRequest::from(ObjectRef::from_obj_with(
                                i.as_ref(),
                                instance_resource(),
                            )))
                        })
                        .collect();
                    futures::stream::iter(woken)
                });
        self.triggers.push(trigger.boxed());
    }

    /// Autopilot rules: their watches (started on demand by the reconciles) wake Instances
    /// through a channel, which is one more trigger.
    pub fn autopilot(&mut self) -> autopilot::Watches {
        let (wake_tx, wake_rx) = tokio::sync::mpsc::unbounded_channel::<ObjectRef<DynamicObject>>();
        let trigger = futures::stream::unfold(wake_rx, |mut rx| async move {
            rx.recv().await.map(|r| (Ok(ReconcileRequest::from(r)), rx))
        });
        self.triggers.push(trigger.boxed());
        autopilot::Watches::new(self.client.clone(), wake_tx)
    }
}

/// The Instances of the Secret's namespace whose `spec.parameterSources` name the Secret.
fn instances_referencing_secret(
    store: &Store<DynamicObject>,
    secret: &DynamicObject,
) -> Vec<ObjectRef<DynamicObject>> {
    let name = secret.name_any();
    let ns = secret.namespace().unwrap_or_default();
    store
        .state()
        .iter()
        .filter(|i| i.namespace().unwrap_or_default() == ns)
        .filter(|i| cache::body_may_contain(i, &name))
        .filter(|i| {
            cache::body(i)["spec"]["parameterSources"]
                .as_object()
                .is_some_and(|m| m.values().any(|src| src["secretKeyRef"]["name"] == name.as_str()))
        })
        .map(|i| ObjectRef::from_obj_with(i.as_ref(), instance_resource()))
        .collect()
}

/// Every cached Instance whose `spec.operatorVersion` names this OperatorVersion.
fn instances_of_ov(store: &Store<DynamicObject>, ov: &DynamicObject) -> Vec<ObjectRef<DynamicObject>> {
    let ov_name = ov.name_any();
    let ov_ns = ov.namespace().unwrap_or_default();
    store
        .state()
        .iter()
        .filter(|i| cache::body_may_contain(i, &ov_name))
        .filter(|i| {
            let ns = i.namespace().unwrap_or_default();
            let Ok(r) = kudo_api::ObjectReference::deserialize(&cache::body(i)["spec"]["operatorVersion"])
            else {
                return false;
            };
            r.name == ov_name && r.namespace_or(&ns) == ov_ns
        })
        .map(|i| ObjectRef::from_obj_with(i.as_ref(), instance_resource()))
        .collect()
}
