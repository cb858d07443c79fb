//! A sharded replica's watches: each kind is watched through several label selectors
//! ("views"), and their events are merged into the one stream a cache expects.
//!
//! Were every kind watched whole, every replica of a sharded manager would receive every event of
//! every Instance, Pod and ReplicaSet and decode and store it: two replicas spent 1.49× one
//! manager's CPU that way (docs/benchmarks.md). So the manager labels each Instance and what its
//! plans apply with the Instance's bucket (`kudo.dev/bucket`, [`kudo_engine::shard::bucket_of`]), and a
//! replica watches:
//!
//! * the objects labelled with the buckets of its shards ([`held_watch`]), restarted (a re-list)
//!   whenever the held set changes;
//! * the objects with no bucket label (Instances not admitted yet; objects applied before the
//!   label, or by a pod template the label does not reach, e.g. a Job's);
//! * for Instances, every child Instance (`heritage=kudo`): a parent's KudoOperator step waits for
//!   a child that may be in another replica's shard.
//!
//! A view's events cannot go straight into a cache: a re-list of one would replace what the others
//! listed, and an Instance the admission labels leaves the unlabelled view (a DELETED event) before
//! it arrives in the labelled one. [`Merge`] keeps, for each object, which views have it, and turns
//! their events into the events of their union: one initial list once every view has listed, then
//! applies, and a delete only when no view has the object any more. An Instance this replica has
//! just labelled is kept as it was when it leaves the unlabelled view: the labelled view brings
//! the labelled version. (That DELETED carries the object as it was before the label, with the
//! label write's resourceVersion — kube-apiserver's way — so it cannot tell by itself where the
//! object went, and must not be stored: it would look as new as the write.)
//! kube-runtime has no merged reflector (its stores are fed by one watcher each), hence this
//! module.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, ObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};

use crate::gate::{HeldSet, ShardGate};
use crate::lean::{Lean, Shape};

/// How many labelled watches a sharded replica runs: the Instances' and one per child kind. A
/// shard just acquired waits for all of them (crate::gate::ShardGate::listed).
pub(crate) const LABELLED_VIEWS: usize = 1 + crate::cache::CHILD_KINDS.len();

/// The labels a deleted object's stand-in keeps: what the triggers read of a deletion
/// (crate::owner_of, the parent of a child Instance).
const KEPT_LABELS: &[&str] = &[kudo_api::labels::HERITAGE, kudo_api::labels::INSTANCE];

type Key = (String, String);

/// Which views have an object, and its stand-in for a delete the views only imply.
struct Entry {
    views: u32,
    /// Name, namespace, [`KEPT_LABELS`], and the resourceVersion last passed on.
    stub: DynamicObject,
}

/// The union of several views of one kind (see the module docs). Sans-IO: [`Merge::on`] takes
/// one view's event and returns the union's events.
pub(crate) struct Merge {
    /// The view that will bring an object leaving another one, if `moves` says it does.
    labelled: usize,
    /// Whether an object leaving a view is on its way to view `labelled`.
    moves: Box<dyn Fn(&DynamicObject) -> bool + Send>,
    entries: HashMap<Key, Entry>,
    /// Per view, the keys of the re-list in progress.
    relisting: Vec<Option<HashSet<Key>>>,
    listed: Vec<bool>,
    /// Until every view has listed once: the union so far, sent as one initial list.
    initial: Option<BTreeMap<Key, DynamicObject>>,
}

fn key_of(o: &DynamicObject) -> Key {
    (
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

fn stub_of(o: &DynamicObject) -> DynamicObject {
    let labels = o.metadata.labels.as_ref().map(|l| {
        l.iter()
            .filter(|(k, _)| KEPT_LABELS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    });
    DynamicObject {
        types: o.types.clone(),
        metadata: ObjectMeta {
            name: o.metadata.name.clone(),
            namespace: o.metadata.namespace.clone(),
            labels,
            ..ObjectMeta::default()
        },
        data: serde_json::Value::Null,
    }
}

impl Merge {
    /// The union of `views` views; an object leaving one for which `moves` holds is expected in
    /// view `labelled` next.
    pub fn new(
        views: usize,
        labelled: usize,
        moves: impl Fn(&DynamicObject) -> bool + Send + 'static,
    ) -> Merge {
        Merge {
            labelled,
            moves: Box::new(moves),
            entries: HashMap::new(),
            relisting: vec![None; views],
            listed: vec![false; views],
            initial: Some(BTreeMap::new()),
        }
    }

    /// View `view`'s event, as the union's events.
    pub fn on(&mut self, view: usize, ev: Event<DynamicObject>) -> Vec<Event<DynamicObject>> {
        let bit = 1u32 << view;
        match ev {
            Event::Init => {
                self.relisting[view] = Some(HashSet::new());
                Vec::new()
            }
            Event::InitApply(o) => {
                if let Some(keys) = self.relisting[view].as_mut() {
                    keys.insert(key_of(&o));
                }
                self.present(bit, o)
            }
            Event::Apply(o) => self.present(bit, o),
            Event::Delete(o) => self.absent(view, o),
            Event::InitDone => self.relisted(view),
        }
    }

    fn present(&mut self, bit: u32, o: DynamicObject) -> Vec<Event<DynamicObject>> {
        let key = key_of(&o);
        let entry = self.entries.entry(key.clone()).or_insert_with(|| Entry {
            views: 0,
            stub: stub_of(&o),
        });
        entry.views |= bit;
        // The version already passed on (another view's copy, or a re-list after the held set
        // changed): nothing new, so no wake for it either.
        let rv = o.metadata.resource_version.clone();
        let seen = rv.is_some() && entry.stub.metadata.resource_version == rv;
        entry.stub.metadata.resource_version = rv;
        match self.initial.as_mut() {
            Some(initial) => {
                initial.insert(key, o);
                Vec::new()
            }
            None if seen => Vec::new(),
            None => vec![Event::Apply(o)],
        }
    }

    fn absent(&mut self, view: usize, o: DynamicObject) -> Vec<Event<DynamicObject>> {
        let key = key_of(&o);
        // Asked whatever the other views hold: `moves` may count its answers.
        let moving = view != self.labelled && (self.moves)(&o);
        let Some(entry) = self.entries.get_mut(&key) else {
            return Vec::new();
        };
        entry.views &= !(1u32 << view);
        if entry.views != 0 {
            return Vec::new();
        }
        if moving {
            // Labelled into a held shard: the labelled view brings it next.
            entry.views = 1u32 << self.labelled;
            return Vec::new();
        }
        self.entries.remove(&key);
        match self.initial.as_mut() {
            Some(initial) => {
                initial.remove(&key);
                Vec::new()
            }
            None => vec![Event::Delete(o)],
        }
    }

    fn relisted(&mut self, view: usize) -> Vec<Event<DynamicObject>> {
        let bit = 1u32 << view;
        let listed = self.relisting[view].take().unwrap_or_default();
        let gone: Vec<Key> = self
            .entries
            .iter()
            .filter(|(k, e)| e.views & bit != 0 && !listed.contains(*k))
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::new();
        for k in gone {
            let Some(e) = self.entries.get_mut(&k) else {
                continue;
            };
            e.views &= !bit;
            if e.views == 0 {
                let stub = e.stub.clone();
                self.entries.remove(&k);
                match self.initial.as_mut() {
                    Some(initial) => {
                        initial.remove(&k);
                    }
                    None => out.push(Event::Delete(stub)),
                }
            }
        }
        self.listed[view] = true;
        if self.listed.iter().all(|l| *l)
            && let Some(initial) = self.initial.take()
        {
            out.push(Event::Init);
            out.extend(initial.into_values().map(Event::InitApply));
            out.push(Event::InitDone);
        }
        out
    }
}

/// A watch of `api`'s kind whose objects are decoded in one pass without managedFields
/// ([`Lean`]), as the `DynamicObject` events the caches store.
pub(crate) fn lean_watcher<S: Shape>(
    api: Api<Lean<S>>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>> + Send {
    watcher(api, config).map_ok(Lean::unwrap_event)
}

/// [`lean_watcher`] of the objects matching the label selector `labels` (all of them when it is
/// empty), retrying with kube-runtime's default backoff: one view of a kind (crate::views).
pub(crate) fn labelled_watch<S: Shape>(api: Api<Lean<S>>, labels: &str) -> ViewStream {
    let config = match labels {
        "" => watcher::Config::default(),
        sel => watcher::Config::default().labels(sel),
    };
    lean_watcher(api, config).default_backoff().boxed()
}

/// The label selector requiring both `a` and `b` (either may be empty: no requirement).
pub(crate) fn all_of(a: &str, b: &str) -> String {
    match (a, b) {
        ("", s) | (s, "") => s.to_string(),
        (a, b) => format!("{a},{b}"),
    }
}

/// A view's stream of events.
pub(crate) type ViewStream = Pin<Box<dyn Stream<Item = Result<Event<DynamicObject>, watcher::Error>> + Send>>;

/// The union of `views` (see [`Merge`]) as one stream; view `labelled` is the one an object
/// leaving another view moves to when `moves` says so.
pub(crate) fn merged(
    views: Vec<ViewStream>,
    labelled: usize,
    moves: impl Fn(&DynamicObject) -> bool + Send + 'static,
) -> impl Stream<Item = Result<Event<DynamicObject>, watcher::Error>> + Send {
    let mut merge = Merge::new(views.len(), labelled, moves);
    let tagged = views
        .into_iter()
        .enumerate()
        .map(|(i, s)| s.map(move |ev| (i, ev)).boxed());
    futures::stream::select_all(tagged).flat_map(move |(i, ev)| {
        let out: Vec<Result<Event<DynamicObject>, watcher::Error>> = match ev {
            Ok(ev) => merge.on(i, ev).into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        };
        futures::stream::iter(out)
    })
}

/// The state of a [`held_watch`].
struct HeldWatch<S: Shape> {
    api: Api<Lean<S>>,
    labels: String,
    gate: Arc<ShardGate>,
    rx: tokio::sync::watch::Receiver<HeldSet>,
    view: usize,
    /// The watch of the held set's version it was started for.
    current: Option<(u64, ViewStream)>,
    queued: std::collections::VecDeque<Event<DynamicObject>>,
    /// A version whose re-list was handed downstream: reported at the next poll, when the
    /// caches behind the stream have taken it.
    report: Option<u64>,
    /// The held set changed since the current watch started (or none has).
    stale: bool,
}

impl<S: Shape> HeldWatch<S> {
    /// A new watch for `held`; nothing held is an empty list at once.
    fn restart(&mut self, held: HeldSet) {
        let selector = kudo_engine::shard::bucket_selector(&held.shards, self.gate.count());
        self.current = selector.map(|sel| {
            let api = self.api.clone();
            let watch = labelled_watch(api, &all_of(&self.labels, &sel));
            (held.version, watch)
        });
        if self.current.is_none() {
            self.queued.extend([Event::Init, Event::InitDone]);
            self.gate.listed(self.view, held.version);
        }
    }

    /// The next event: of the current watch, or of a restart when the held set changed.
    async fn next(mut self) -> Option<(Result<Event<DynamicObject>, watcher::Error>, Self)> {
        loop {
            if let Some(v) = self.report.take() {
                self.gate.listed(self.view, v);
            }
            if let Some(ev) = self.queued.pop_front() {
                return Some((Ok(ev), self));
            }
            if self.stale {
                self.stale = false;
                let held = self.rx.borrow_and_update().clone();
                self.restart(held);
                continue;
            }
            let Some((version, stream)) = self.current.as_mut() else {
                self.rx.changed().await.ok()?;
                self.stale = true;
                continue;
            };
            let version = *version;
            tokio::select! {
                changed = self.rx.changed() => {
                    changed.ok()?;
                    self.stale = true;
                }
                item = stream.next() => {
                    let item = item?;
                    if matches!(item, Ok(Event::InitDone)) {
                        self.report = Some(version);
                    }
                    return Some((item, self));
                }
            }
        }
    }
}

/// The watch of `api`'s objects in the buckets of the shards `gate` holds (`labels`, then the
/// bucket requirement), restarted whenever the held set changes. Once a re-list has passed
/// downstream, `gate` hears that view `view` has listed that held-set version.
pub(crate) fn held_watch<S: Shape>(
    api: Api<Lean<S>>,
    labels: &str,
    gate: Arc<ShardGate>,
    view: usize,
) -> ViewStream {
    let state = HeldWatch {
        api,
        labels: labels.to_string(),
        rx: gate.subscribe(),
        gate,
        view,
        current: None,
        queued: Default::default(),
        report: None,
        stale: true,
    };
    futures::stream::unfold(state, HeldWatch::next).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, bucket: Option<u32>) -> DynamicObject {
        let mut labels = serde_json::json!({"heritage": "kudo", "kudo.dev/instance": "i", "app": "x"});
        if let Some(b) = bucket {
            labels["kudo.dev/bucket"] = b.to_string().into();
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "labels": labels},
            "data": {"k": "v"}
        }))
        .expect("object")
    }

    /// What a union event says, compactly: `+name`, `-name`, `init`, `init+name`, `done`.
    fn said(evs: &[Event<DynamicObject>]) -> Vec<String> {
        let name = |o: &DynamicObject| o.metadata.name.clone().unwrap_or_default();
        evs.iter()
            .map(|e| match e {
                Event::Apply(o) => format!("+{}", name(o)),
                Event::Delete(o) => format!("-{}", name(o)),
                Event::Init => "init".into(),
                Event::InitApply(o) => format!("init+{}", name(o)),
                Event::InitDone => "done".into(),
            })
            .collect()
    }

    /// Views: 0 unlabelled, 1 labelled, 2 a third selector; this replica labelled `new`.
    fn merge() -> Merge {
        Merge::new(3, 1, |o: &DynamicObject| {
            o.metadata.name.as_deref() == Some("new")
        })
    }

    fn listed(m: &mut Merge, view: usize, objs: &[DynamicObject]) -> Vec<String> {
        let mut out = m.on(view, Event::Init);
        for o in objs {
            out.extend(m.on(view, Event::InitApply(o.clone())));
        }
        out.extend(m.on(view, Event::InitDone));
        said(&out)
    }

    #[test]
    fn the_union_is_listed_once_every_view_has_listed() {
        let mut m = merge();
        assert!(listed(&mut m, 0, &[obj("a", None)]).is_empty());
        assert!(listed(&mut m, 1, &[obj("b", Some(1))]).is_empty());
        // A delete before the union's first list just drops the object from it.
        assert!(said(&m.on(0, Event::Delete(obj("a", None)))).is_empty());
        assert_eq!(
            listed(&mut m, 2, &[obj("b", Some(1)), obj("c", Some(3))]),
            ["init", "init+b", "init+c", "done"]
        );
    }

    #[test]
    fn an_object_leaves_the_union_only_when_no_view_has_it() {
        let mut m = merge();
        for v in 0..3 {
            listed(&mut m, v, &[]);
        }
        assert_eq!(said(&m.on(1, Event::Apply(obj("b", Some(1))))), ["+b"]);
        assert_eq!(said(&m.on(2, Event::Apply(obj("b", Some(1))))), ["+b"]);
        assert!(said(&m.on(2, Event::Delete(obj("b", Some(1))))).is_empty());
        assert_eq!(said(&m.on(1, Event::Delete(obj("b", Some(1))))), ["-b"]);
    }

    #[test]
    fn an_instance_this_replica_labelled_is_kept_until_the_labelled_view_brings_it() {
        let mut m = merge();
        for v in 0..3 {
            listed(&mut m, v, &[]);
        }
        assert_eq!(said(&m.on(0, Event::Apply(obj("new", None)))), ["+new"]);
        // This replica's admission labelled it: the unlabelled view's DELETED (the object as it
        // was) changes nothing; the labelled view brings the new version.
        assert!(said(&m.on(0, Event::Delete(obj("new", None)))).is_empty());
        assert_eq!(said(&m.on(1, Event::Apply(obj("new", Some(1))))), ["+new"]);
        assert_eq!(said(&m.on(1, Event::Delete(obj("new", Some(1))))), ["-new"]);
        // Labelled by another replica: gone from this one.
        assert_eq!(said(&m.on(0, Event::Apply(obj("other", None)))), ["+other"]);
        assert_eq!(said(&m.on(0, Event::Delete(obj("other", None)))), ["-other"]);
    }

    #[test]
    fn a_relist_deletes_what_it_no_longer_lists_unless_another_view_has_it() {
        let mut m = merge();
        listed(&mut m, 0, &[]);
        listed(
            &mut m,
            1,
            &[obj("b", Some(1)), obj("c", Some(1)), obj("d", Some(1))],
        );
        listed(&mut m, 2, &[obj("d", Some(1))]);
        // The held set changed: the labelled view lists again, without c and d.
        let out = listed(&mut m, 1, &[obj("b", Some(1))]);
        assert_eq!(out, ["+b", "-c"]);
        // The stand-in of a deleted object keeps what the triggers read.
        let mut out = m.on(2, Event::Init);
        out.extend(m.on(2, Event::InitDone));
        let Some(Event::Delete(stub)) = out.first() else {
            panic!("expected a delete: {:?}", said(&out));
        };
        let labels = stub.metadata.labels.clone().unwrap_or_default();
        assert_eq!(stub.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(labels.get("kudo.dev/instance").map(String::as_str), Some("i"));
        assert!(!labels.contains_key("app"));
    }

    #[test]
    fn a_version_already_passed_on_is_not_passed_on_again() {
        let at = |name: &str, rv: &str| {
            let mut o = obj(name, Some(1));
            o.metadata.resource_version = Some(rv.into());
            o
        };
        let mut m = merge();
        for v in 0..3 {
            listed(&mut m, v, &[]);
        }
        assert_eq!(said(&m.on(1, Event::Apply(at("c", "7")))), ["+c"]);
        // The same version through another view (a child Instance is in two).
        assert!(said(&m.on(2, Event::Apply(at("c", "7")))).is_empty());
        // A re-list after the held set changed brings nothing new.
        assert!(listed(&mut m, 1, &[at("c", "7")]).is_empty());
        assert_eq!(listed(&mut m, 1, &[at("c", "8")]), ["+c"]);
    }
}
