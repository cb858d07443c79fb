//! The gate in front of every reconcile of a sharded manager ([`ShardGate`]): which Instances
//! this replica may reconcile now. The Leases that decide what it holds are kept by
//! [`crate::shard`]; the labelled watches follow the held set it publishes ([`HeldSet`],
//! [`crate::views`]).
//!
//! A reconcile of an Instance whose shard this replica does not hold returns at once, without a
//! request. A held shard carries a cancellation token: losing or releasing the shard cancels the
//! reconciles in flight for it (safe: a run's progress lives in the Instance), and a release frees
//! the Lease only once they are gone (else it lets the Lease expire), so the next holder never
//! overlaps with this one. A shard just acquired passes the gate, and has its Instances woken,
//! only once every labelled watch has listed it ([`ShardGate::listed`]): no reconcile reads a
//! cache without that shard's objects.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kudo_engine::shard::shard_of;
use tokio_util::sync::CancellationToken;

/// A shard this replica acts on.
struct Held {
    /// The held-set version that first included the shard: its reconciles wait until every
    /// labelled watch has listed at least that version.
    since: u64,
    /// Its Instances were woken (once listed).
    woken: AtomicBool,
    cancel: CancellationToken,
    in_flight: AtomicUsize,
    /// When this replica last wrote the shard's Lease: past the lease duration another replica
    /// may hold it, so no reconcile of it starts (a replica stalled between ticks).
    renewed: Mutex<std::time::Instant>,
}

/// Which Instances this replica may reconcile now (see the module docs).
pub(crate) struct ShardGate {
    /// The shard count; 1 means unsharded: every Instance passes, nothing is ever revoked.
    count: u32,
    /// The lease duration: how long a shard is ours after its last renewal.
    valid_for: Duration,
    held: Mutex<HashMap<u32, Arc<Held>>>,
    /// Shards just acquired and listed, for the trigger that wakes their Instances.
    granted: Option<tokio::sync::mpsc::UnboundedSender<u32>>,
    /// The held set, for the labelled watches (crate::views).
    published: tokio::sync::watch::Sender<HeldSet>,
    /// Per labelled watch, the held-set version it last listed (its objects are in the caches).
    listed: Mutex<Vec<u64>>,
    /// Instances (namespace, name) this replica is labelling with their bucket: their leaving the
    /// unlabelled watch is a move to the labelled one (crate::views::Merge), not a deletion.
    labelling: Mutex<HashSet<(String, String)>>,
    /// Namespaces left to another manager (`--exclude-namespace`): nothing there passes.
    excluded: std::sync::OnceLock<Vec<String>>,
}

/// The shards a replica holds, numbered: every grant or revocation is a new version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HeldSet {
    pub version: u64,
    pub shards: BTreeSet<u32>,
}

/// Permission to run one reconcile of a held shard; counts it in flight until dropped.
pub(crate) struct Pass(Option<Arc<Held>>);

impl Drop for Pass {
    fn drop(&mut self) {
        if let Some(h) = &self.0 {
            h.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Pass {
    /// Runs `f` unless the shard is lost or released first (`None`: `f` was dropped).
    pub async fn run<T>(self, f: impl Future<Output = T>) -> Option<T> {
        match &self.0 {
            None => Some(f.await),
            Some(h) => {
                let cancel = h.cancel.clone();
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => None,
                    out = f => Some(out),
                }
            }
        }
    }
}

impl ShardGate {
    /// The gate of an unsharded manager: everything passes.
    pub fn all() -> Arc<ShardGate> {
        Arc::new(ShardGate {
            count: 1,
            valid_for: Duration::MAX,
            held: Mutex::default(),
            granted: None,
            published: tokio::sync::watch::Sender::new(HeldSet::default()),
            listed: Mutex::default(),
            labelling: Mutex::default(),
            excluded: std::sync::OnceLock::new(),
        })
    }

    /// The gate of one of `count` shards' replicas, holding nothing yet, and the stream of the
    /// shards it acquires (each once `views` labelled watches have listed it).
    pub fn sharded(
        count: u32,
        valid_for: Duration,
        views: usize,
    ) -> (Arc<ShardGate>, tokio::sync::mpsc::UnboundedReceiver<u32>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let gate = ShardGate {
            valid_for,
            count: count.max(1),
            held: Mutex::default(),
            granted: Some(tx),
            published: tokio::sync::watch::Sender::new(HeldSet::default()),
            listed: Mutex::new(vec![0; views]),
            labelling: Mutex::default(),
            excluded: std::sync::OnceLock::new(),
        };
        (Arc::new(gate), rx)
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    fn held_map(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Arc<Held>>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Leaves `namespaces` to another manager, before the controllers start (once; later calls
    /// change nothing).
    pub fn exclude(&self, namespaces: &[String]) {
        let _ = self.excluded.set(namespaces.to_vec());
    }

    fn excludes(&self, namespace: &str) -> bool {
        self.excluded
            .get()
            .is_some_and(|ex| ex.iter().any(|n| n == namespace))
    }

    /// A pass for a reconcile of `namespace/name`, if this replica acts on its shard.
    pub fn enter(&self, namespace: &str, name: &str) -> Option<Pass> {
        if self.excludes(namespace) {
            return None;
        }
        if self.count == 1 {
            return Some(Pass(None));
        }
        let held = self
            .held_map()
            .get(&shard_of(namespace, name, self.count))
            .cloned()?;
        if self.listed_version() < held.since {
            return None;
        }
        let renewed = *held.renewed.lock().unwrap_or_else(|e| e.into_inner());
        if renewed.elapsed() >= self.valid_for {
            return None;
        }
        held.in_flight.fetch_add(1, Ordering::SeqCst);
        Some(Pass(Some(held)))
    }

    /// Whether this replica acts on the shard of `namespace/name`.
    pub fn holds(&self, namespace: &str, name: &str) -> bool {
        if self.excludes(namespace) {
            return false;
        }
        self.count == 1
            || self
                .held_map()
                .contains_key(&shard_of(namespace, name, self.count))
    }

    /// The shards acted on.
    pub fn held(&self) -> BTreeSet<u32> {
        self.held_map().keys().copied().collect()
    }

    /// This replica is about to write the bucket label on Instance `namespace/name` (`false`:
    /// the write failed).
    pub fn labelling(&self, namespace: &str, name: &str, writing: bool) {
        let mut set = self.labelling.lock().unwrap_or_else(|e| e.into_inner());
        let key = (namespace.to_string(), name.to_string());
        if writing {
            set.insert(key);
        } else {
            set.remove(&key);
        }
    }

    /// Whether `o` (an Instance leaving the unlabelled watch) is one this replica labelled; asks
    /// once per labelling.
    pub fn labelled(&self, o: &kube::api::DynamicObject) -> bool {
        let key = (
            o.metadata.namespace.clone().unwrap_or_default(),
            o.metadata.name.clone().unwrap_or_default(),
        );
        let mut set = self.labelling.lock().unwrap_or_else(|e| e.into_inner());
        set.remove(&key)
    }

    /// The held set as the labelled watches follow it.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<HeldSet> {
        self.published.subscribe()
    }

    /// The oldest held-set version every labelled watch has listed.
    fn listed_version(&self) -> u64 {
        let listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        listed.iter().copied().min().unwrap_or(u64::MAX)
    }

    /// Labelled watch `view` has listed held-set `version` into its cache: shards every watch has
    /// now listed pass the gate, and their Instances are woken.
    pub fn listed(&self, view: usize, version: u64) {
        if let Some(v) = self
            .listed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(view)
        {
            *v = (*v).max(version);
        }
        self.wake_listed();
    }

    /// Wakes the Instances of held shards every labelled watch has listed, once per shard.
    fn wake_listed(&self) {
        let done = self.listed_version();
        let map = self.held_map();
        for (shard, h) in map.iter() {
            if h.since <= done
                && !h.woken.swap(true, Ordering::SeqCst)
                && let Some(tx) = &self.granted
            {
                let _ = tx.send(*shard);
            }
        }
    }

    /// A new version of the held set, published while `map` (the held shards) is locked.
    fn publish(&self, map: &HashMap<u32, Arc<Held>>) {
        self.published.send_modify(|h| {
            h.version += 1;
            h.shards = map.keys().copied().collect();
        });
    }

    /// Starts acting on `shard`: its Instances are woken, and pass the gate, once every labelled
    /// watch has listed it.
    pub(crate) fn grant(&self, shard: u32) {
        {
            let mut map = self.held_map();
            // The version `publish` below makes (every publish holds this lock).
            let version = self.published.borrow().version + 1;
            let held = Held {
                since: version,
                woken: AtomicBool::new(false),
                cancel: CancellationToken::new(),
                in_flight: AtomicUsize::new(0),
                renewed: Mutex::new(std::time::Instant::now()),
            };
            map.insert(shard, Arc::new(held));
            self.publish(&map);
        }
        // Nothing to wait for when there are no labelled watches (unit tests).
        self.wake_listed();
    }

    /// Its Lease was just written by this replica.
    pub(crate) fn renewed(&self, shard: u32) {
        if let Some(h) = self.held_map().get(&shard) {
            *h.renewed.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
        }
    }

    /// Stops acting on `shards`: no new reconcile passes, the running ones are cancelled (dropped
    /// at their next await point). Waits up to `drain` for all of them to be gone; whether they are.
    pub(crate) async fn revoke(&self, shards: &[u32], drain: Duration) -> bool {
        let revoked: Vec<Arc<Held>> = {
            let mut map = self.held_map();
            let gone: Vec<Arc<Held>> = shards.iter().filter_map(|n| map.remove(n)).collect();
            if !gone.is_empty() {
                self.publish(&map);
            }
            gone
        };
        for h in &revoked {
            h.cancel.cancel();
        }
        let gone = async {
            while revoked.iter().any(|h| h.in_flight.load(Ordering::SeqCst) > 0) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(drain, gone).await.is_ok()
    }
}

/// How a controller incarnation is gated: its [`ShardGate`] and, for a sharded replica, the
/// shards it acquires (whose Instances are then woken).
pub(crate) struct Sharding {
    pub gate: Arc<ShardGate>,
    pub granted: Option<tokio::sync::mpsc::UnboundedReceiver<u32>>,
}

impl Sharding {
    /// Unsharded: every Instance is this manager's.
    pub fn none() -> Sharding {
        Sharding {
            gate: ShardGate::all(),
            granted: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Instance name in `shard` of 4.
    fn name_in(shard: u32) -> String {
        (0..)
            .map(|i| format!("i-{i}"))
            .find(|n| shard_of("ns", n, 4) == shard)
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn only_held_and_recently_renewed_shards_pass_the_gate() {
        let (gate, mut granted) = ShardGate::sharded(4, Duration::from_millis(200), 0);
        let (a, b) = (name_in(1), name_in(2));
        assert!(gate.enter("ns", &a).is_none());
        gate.grant(1);
        assert_eq!(granted.recv().await, Some(1));
        assert!(gate.enter("ns", &a).is_some());
        assert!(gate.holds("ns", &a) && !gate.holds("ns", &b));
        // A replica that has not renewed for a lease duration starts nothing more.
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(gate.enter("ns", &a).is_none());
        gate.renewed(1);
        assert!(gate.enter("ns", &a).is_some());
        assert!(ShardGate::all().enter("ns", &b).is_some());
    }

    #[test]
    fn excluded_namespaces_never_pass() {
        let gate = ShardGate::all();
        gate.exclude(&["theirs".to_string()]);
        assert!(gate.enter("theirs", "a").is_none() && !gate.holds("theirs", "a"));
        assert!(gate.enter("ours", "a").is_some() && gate.holds("ours", "a"));
    }

    #[tokio::test]
    async fn an_acquired_shard_waits_until_every_labelled_watch_has_listed_it() {
        let (gate, mut granted) = ShardGate::sharded(4, Duration::from_secs(60), 2);
        let mut held = gate.subscribe();
        let a = name_in(1);
        gate.grant(1);
        assert!(held.has_changed().unwrap_or(false));
        let published = held.borrow_and_update().clone();
        assert_eq!(published.shards, BTreeSet::from([1]));
        assert!(gate.enter("ns", &a).is_none(), "no watch has listed it yet");
        gate.listed(0, published.version);
        assert!(gate.enter("ns", &a).is_none(), "one of two watches has");
        assert!(granted.try_recv().is_err(), "not woken yet");
        gate.listed(1, published.version);
        assert!(gate.enter("ns", &a).is_some());
        assert_eq!(granted.recv().await, Some(1));
        // Revoking publishes a new held set too.
        gate.revoke(&[1], Duration::from_secs(1)).await;
        assert!(held.borrow_and_update().shards.is_empty());
    }

    #[tokio::test]
    async fn revoking_cancels_the_running_reconciles_and_waits_for_them() {
        let (gate, _granted) = ShardGate::sharded(4, Duration::from_secs(60), 0);
        gate.grant(3);
        let pass = gate.enter("ns", &name_in(3)).expect("held");
        let running = tokio::spawn(pass.run(std::future::pending::<()>()));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(gate.revoke(&[3], Duration::from_secs(5)).await, "drained");
        assert_eq!(running.await.unwrap(), None, "the reconcile was dropped");
        assert!(gate.enter("ns", &name_in(3)).is_none());
    }
}
