//! Fleet rollouts on the manager's side (a kudo-rs extension): for each `kudo-rs.dev` Rollout this
//! replica runs, a task that watches the Instances the rollout selects, reads what
//! [`kudo_engine::rollout::decide`] needs (their OperatorVersions, and revisions where it asks),
//! executes the actions it returns through `kudo-client` (the writes of `update`/`upgrade` and
//! `rollback`, each guarded by the resourceVersion decided on) and writes the Rollout's status.
//! The Instance controller runs the plans the changes start; this module only writes specs.
//!
//! Which replica runs a rollout: the one holding the shard of the rollout's own bucket (a Rollout
//! is cluster-scoped: `FNV-1a-64("/<name>") mod 1024`), through the same gate as Instances, so a
//! lost shard cancels the task at once and its new holder starts one. Nothing is kept in memory
//! that the objects do not hold (the task's caches are of reads only), so a restarted manager or
//! the next holder of the shard goes on where the last one stopped. A manager scoped to a
//! namespace, or ignoring some, runs only the rollouts [`kudo_engine::scope::rollout_namespaces`]
//! gives it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kudo_api::rollout::Rollout;
use kudo_api::{Instance, OperatorVersion};
use kudo_client::cluster::{Cluster, KudoKind};
use kudo_engine::revision::Revision;
use kudo_engine::rollout::{self, Action, Observed, Seen};
use tokio::sync::{Notify, watch};
use tracing::{debug, info, warn};

use crate::gate::ShardGate;
use crate::incarnation::Incarnation;
use crate::lean::Whole;
use crate::resources::instance_resource;

/// A rollout decides at most this often; the Instance events in between are taken together.
const DEBOUNCE: Duration = Duration::from_millis(1000);
/// How often the Rollouts are gone through again for shards gained or lost.
const RESYNC: Duration = Duration::from_secs(3);
/// Instance writes (changes, rollbacks) and revision reads at once.
const PARALLEL: usize = 16;

/// What every rollout task of an incarnation shares.
struct Shared {
    client: kube::Client,
    gate: Arc<ShardGate>,
    /// The manager's `--watch-namespace` and `--ignore-namespace`.
    namespace: Option<String>,
    ignored: Vec<String>,
}

fn rollout_resource() -> ApiResource {
    kudo_kube::known_resource(kudo_api::rollout::GROUP, kudo_api::rollout::KIND)
}

fn decode<T: serde::de::DeserializeOwned>(obj: &DynamicObject) -> Option<T> {
    serde_json::from_value(serde_json::to_value(obj).ok()?).ok()
}

/// The rollout controller of an incarnation: it stops with it.
pub(crate) fn start(inc: &mut Incarnation) -> BoxFuture<'static, ()> {
    let shared = Arc::new(Shared {
        client: inc.client.clone(),
        gate: inc.sharding.gate.clone(),
        namespace: inc.config.namespace.clone(),
        ignored: inc.config.ignored_namespaces.clone(),
    });
    let stop = inc.stop.clone();
    async move {
        tokio::select! {
            _ = supervise(shared) => {}
            _ = stop.cancelled() => {}
        }
    }
    .boxed()
}

/// A rollout task running, and where it gets its Rollout's changes.
struct Running {
    rollout: watch::Sender<Arc<Rollout>>,
    task: tokio::task::AbortHandle,
}

/// Watches every Rollout and keeps one task per rollout this replica runs (dropped, it aborts
/// them).
async fn supervise(shared: Arc<Shared>) {
    let api: Api<DynamicObject> = Api::all_with(shared.client.clone(), &rollout_resource());
    let (store, writer) = {
        let writer = reflector::store::Writer::new(rollout_resource());
        (writer.as_reader(), writer)
    };
    let events = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .touched_objects();
    let mut events = std::pin::pin!(events);
    let mut tasks = tokio::task::JoinSet::new();
    let mut running: HashMap<String, Running> = HashMap::new();
    let mut tick = tokio::time::interval(RESYNC);
    loop {
        tokio::select! {
            ev = events.next() => if ev.is_none() { return },
            _ = tick.tick() => {}
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
        sync(&shared, &store, &mut running, &mut tasks);
    }
}

/// Starts, updates and stops the rollout tasks to match the Rollouts this replica runs now.
fn sync(
    shared: &Arc<Shared>,
    store: &Store<DynamicObject>,
    running: &mut HashMap<String, Running>,
    tasks: &mut tokio::task::JoinSet<()>,
) {
    let mut present = HashSet::new();
    for obj in store.state() {
        let Some(r) = decode::<Rollout>(&obj) else {
            continue;
        };
        let name = r.metadata.name.clone();
        present.insert(name.clone());
        let mine = kudo_engine::scope::rollout_namespaces(
            &r.spec.namespaces,
            shared.namespace.as_deref(),
            &shared.ignored,
        )
        .is_some();
        let wanted = mine && !rollout::finished(&r) && shared.gate.holds("", &name);
        match running.get(&name) {
            Some(t) if wanted && !t.task.is_finished() => {
                t.rollout.send_if_modified(|cur| {
                    let changed =
                        cur.metadata.other.get("resourceVersion") != r.metadata.other.get("resourceVersion");
                    if changed {
                        *cur = Arc::new(r.clone());
                    }
                    changed
                });
            }
            _ if wanted => {
                let (tx, rx) = watch::channel(Arc::new(r));
                let task = tasks.spawn(run_one(shared.clone(), name.clone(), rx));
                running.insert(name, Running { rollout: tx, task });
            }
            Some(t) => {
                t.task.abort();
                running.remove(&name);
            }
            None => {}
        }
    }
    running.retain(|name, t| {
        let keep = present.contains(name);
        if !keep {
            t.task.abort();
        }
        keep
    });
}

/// The Instances a rollout selects, watched in its namespaces (each store listed before the
/// first decision: an empty store would read as every Instance deleted).
struct Watched {
    stores: Vec<Store<DynamicObject>>,
    changed: Arc<Notify>,
    _drivers: tokio::task::JoinSet<()>,
}

impl Watched {
    fn start(client: &kube::Client, namespaces: &[String], selector: &str) -> Watched {
        let changed = Arc::new(Notify::new());
        let mut drivers = tokio::task::JoinSet::new();
        let apis: Vec<Api<crate::lean::Lean<Whole>>> = if namespaces.is_empty() {
            vec![Api::all_with(client.clone(), &instance_resource())]
        } else {
            namespaces
                .iter()
                .map(|ns| Api::namespaced_with(client.clone(), ns, &instance_resource()))
                .collect()
        };
        let mut stores = Vec::new();
        for api in apis {
            let writer = reflector::store::Writer::new(instance_resource());
            let store = writer.as_reader();
            let events = crate::views::labelled_watch::<Whole>(api, selector).reflect(writer);
            let notify = changed.clone();
            drivers.spawn(async move {
                let mut events = std::pin::pin!(events);
                while events.next().await.is_some() {
                    notify.notify_one();
                }
            });
            stores.push(store);
        }
        Watched {
            stores,
            changed,
            _drivers: drivers,
        }
    }

    async fn ready(&self) -> bool {
        for s in &self.stores {
            if s.wait_until_ready().await.is_err() {
                return false;
            }
        }
        true
    }

    fn objects(&self) -> Vec<Arc<DynamicObject>> {
        self.stores.iter().flat_map(|s| s.state()).collect()
    }
}

/// One rollout's task: decides when its Instances or the Rollout change, or when the last
/// decision asked to look again; ends when the rollout is over, its shard goes, or its selection
/// changes (the supervisor then starts a new one).
async fn run_one(shared: Arc<Shared>, name: String, mut rx: watch::Receiver<Arc<Rollout>>) {
    let first = rx.borrow_and_update().clone();
    let wanted = (&first.spec.namespaces, first.spec.selector.clone());
    let Some(namespaces) = kudo_engine::scope::rollout_namespaces(
        &first.spec.namespaces,
        shared.namespace.as_deref(),
        &shared.ignored,
    ) else {
        return;
    };
    let namespaces = match (&shared.namespace, namespaces.is_empty()) {
        (Some(own), true) => vec![own.clone()],
        _ => namespaces,
    };
    let watched = Watched::start(&shared.client, &namespaces, &first.spec.selector.to_query());
    if !watched.ready().await {
        return;
    }
    info!(rollout = %name, "running the rollout");
    let mut task = Task::new(shared.clone(), (*first).clone(), watched);
    let mut due = tokio::time::Instant::now();
    loop {
        tokio::select! {
            changed = rx.changed() => {
                if changed.is_err() {
                    return;
                }
                let r = rx.borrow_and_update().clone();
                if (&r.spec.namespaces, r.spec.selector.clone()) != (wanted.0, wanted.1.clone()) {
                    return;
                }
                // Only a new spec is taken: the status is this task's own writes, and the watch
                // may bring an older one of them after the newest.
                if r.generation() != task.rollout.generation() {
                    task.rollout = (*r).clone();
                }
            }
            _ = task.watched.changed.notified() => {}
            _ = tokio::time::sleep_until(due) => {}
        }
        tokio::time::sleep(DEBOUNCE).await;
        let Some(pass) = shared.gate.enter("", &name) else {
            return;
        };
        match pass.run(task.reconcile()).await {
            Some(Some(after)) => due = tokio::time::Instant::now() + after,
            // Over, or the shard went to another replica.
            _ => return,
        }
    }
}

/// What one rollout's decisions share: the Rollout as last written or seen, its Instances, and
/// caches of reads (OperatorVersions, Instances decoded at a resourceVersion).
struct Task {
    shared: Arc<Shared>,
    rollout: Rollout,
    watched: Watched,
    ovs: HashMap<(String, String), Arc<OperatorVersion>>,
    decoded: HashMap<String, (String, Arc<Instance>)>,
}

fn now() -> kudo_engine::Timestamp {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    kudo_engine::Timestamp::from_unix(secs)
}

fn key_of(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

impl Task {
    fn new(shared: Arc<Shared>, rollout: Rollout, watched: Watched) -> Task {
        Task {
            shared,
            rollout,
            watched,
            ovs: HashMap::new(),
            decoded: HashMap::new(),
        }
    }

    fn cluster(&self, ns: &str) -> Cluster {
        Cluster {
            client: self.shared.client.clone(),
            namespace: ns.to_string(),
        }
    }

    /// The selected Instances in this manager's scope, decoded once per resourceVersion.
    fn instances(&mut self) -> Vec<Arc<Instance>> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for o in self.watched.objects() {
            let ns = o.metadata.namespace.clone().unwrap_or_default();
            if kudo_engine::scope::ignored(&self.shared.ignored, &ns) {
                continue;
            }
            let key = key_of(&ns, o.metadata.name.as_deref().unwrap_or_default());
            let rv = o.metadata.resource_version.clone().unwrap_or_default();
            let cached = self
                .decoded
                .get(&key)
                .filter(|(v, _)| *v == rv)
                .map(|(_, i)| i.clone());
            let inst = match cached.or_else(|| decode::<Instance>(&o).map(Arc::new)) {
                Some(i) => i,
                None => continue,
            };
            self.decoded.insert(key.clone(), (rv, inst.clone()));
            seen.insert(key);
            out.push(inst);
        }
        self.decoded.retain(|k, _| seen.contains(k));
        out
    }

    /// The OperatorVersion `spec` of `inst` names, read once (a missing one is asked for again).
    async fn ov(&mut self, inst: &Instance, spec: &kudo_api::InstanceSpec) -> Option<Arc<OperatorVersion>> {
        let ns = spec
            .operator_version_namespace(inst.metadata.namespace.as_deref().unwrap_or_default())
            .to_string();
        let key = (ns.clone(), spec.operator_version.name.clone());
        if let Some(ov) = self.ovs.get(&key) {
            return Some(ov.clone());
        }
        match self
            .cluster(&ns)
            .get::<OperatorVersion>(KudoKind::OperatorVersion, &key.1)
            .await
        {
            Ok(Some(ov)) => {
                let ov = Arc::new(ov);
                self.ovs.insert(key, ov.clone());
                Some(ov)
            }
            Ok(None) => None,
            Err(e) => {
                debug!(error = %e, "reading an OperatorVersion for the rollout");
                None
            }
        }
    }

    /// One decision: read, decide, execute, write the status. Returns when to look again (`None`:
    /// the rollout is over).
    async fn reconcile(&mut self) -> Option<Duration> {
        let instances = self.instances();
        let mut ovs = Vec::new();
        for inst in &instances {
            let proposed = rollout::proposed(inst, &self.rollout.spec.target);
            ovs.push((self.ov(inst, &inst.spec).await, self.ov(inst, &proposed).await));
        }
        let base: Vec<Seen<'_>> = instances
            .iter()
            .zip(&ovs)
            .map(|(i, (c, t))| Seen {
                instance: i,
                current_ov: c.as_deref(),
                target_ov: t.as_deref(),
                revisions: None,
            })
            .collect();
        let now = now();
        let want = rollout::wanted_revisions(&Observed {
            rollout: &self.rollout,
            instances: base.clone(),
            now,
        });
        let revs = self.revisions(&instances, &want).await;
        let seen: Vec<Seen<'_>> = base
            .into_iter()
            .map(|s| Seen {
                revisions: revs.get(&rollout::key(s.instance)).map(Vec::as_slice),
                ..s
            })
            .collect();
        let d = rollout::decide(&Observed {
            rollout: &self.rollout,
            instances: seen,
            now,
        });
        // The status first: its write is guarded by the resourceVersion the decision read, so
        // a decision made on an outdated Rollout is dropped, not executed.
        if self.write_status(d.status).await {
            self.execute(&d.actions, &instances).await;
            d.requeue.map(Duration::from_secs)
        } else {
            Some(Duration::ZERO)
        }
    }

    /// The revisions of the Instances `want` names, read a few at a time.
    async fn revisions(
        &self,
        instances: &[Arc<Instance>],
        want: &[String],
    ) -> HashMap<String, Vec<Revision>> {
        let client = self.shared.client.clone();
        let wanted: Vec<Arc<Instance>> = instances
            .iter()
            .filter(|i| want.contains(&rollout::key(i)))
            .cloned()
            .collect();
        let reads: Vec<_> = wanted
            .into_iter()
            .map(|inst| {
                let client = client.clone();
                async move {
                    match kudo_client::revisions::of(&client, &inst).await {
                        Ok(r) => Some((rollout::key(&inst), r)),
                        Err(e) => {
                            debug!(error = %e, "reading the revisions of an Instance for the rollout");
                            None
                        }
                    }
                }
            })
            .collect();
        futures::stream::iter(reads)
            .buffer_unordered(PARALLEL)
            .filter_map(futures::future::ready)
            .collect()
            .await
    }

    /// Executes the decision's actions a few at a time; a failed one is decided again next time.
    async fn execute(&self, actions: &[Action], instances: &[Arc<Instance>]) {
        let by_key: HashMap<String, &Arc<Instance>> =
            instances.iter().map(|i| (rollout::key(i), i)).collect();
        let mut work = Vec::new();
        for a in actions {
            let key = match a {
                Action::Change { instance, .. }
                | Action::Cancel { instance, .. }
                | Action::Rollback { instance, .. } => instance.clone(),
            };
            let Some(inst) = by_key.get(&key).map(|i| Arc::clone(i)) else {
                continue;
            };
            let cluster = self.cluster(inst.metadata.namespace.as_deref().unwrap_or_default());
            let (name, target, action) = (
                self.rollout.metadata.name.clone(),
                self.rollout.spec.target.clone(),
                a.clone(),
            );
            work.push(async move {
                match act(&cluster, &inst, &action, &target).await {
                    Ok(()) => {}
                    Err(e @ kudo_client::Error::Changed(_)) => {
                        debug!(rollout = %name, instance = %key, "{e}")
                    }
                    Err(e) => warn!(rollout = %name, instance = %key, error = %e, "rollout action failed"),
                }
            });
        }
        futures::stream::iter(work)
            .buffer_unordered(PARALLEL)
            .collect::<Vec<()>>()
            .await;
    }

    /// Writes the status when it changed (the whole status, guarded by the resourceVersion the
    /// decision read); keeps the Rollout as written. A conflict reads it again. Returns whether
    /// the status is the decision's (written, or unchanged).
    async fn write_status(&mut self, status: kudo_api::rollout::RolloutStatus) -> bool {
        if self.rollout.status.as_ref() == Some(&status) {
            return true;
        }
        let name = self.rollout.metadata.name.clone();
        if status.phase
            != self
                .rollout
                .status
                .as_ref()
                .map(|s| s.phase.clone())
                .unwrap_or_default()
        {
            info!(rollout = %name, phase = %status.phase, message = %status.message, "rollout phase");
        }
        let api: Api<DynamicObject> = Api::all_with(self.shared.client.clone(), &rollout_resource());
        let mut next = self.rollout.clone();
        next.status = Some(status);
        let Some(body) = serde_json::to_value(&next)
            .ok()
            .and_then(|v| serde_json::from_value::<DynamicObject>(v).ok())
        else {
            return false;
        };
        match api.replace_status(&name, &PostParams::default(), &body).await {
            Ok(obj) => {
                if let Some(r) = decode::<Rollout>(&obj) {
                    self.rollout = r;
                }
                true
            }
            Err(e) => {
                debug!(rollout = %name, error = %e, "the rollout's status was not written; reading it again");
                if let Ok(obj) = api.get(&name).await
                    && let Some(r) = decode::<Rollout>(&obj)
                {
                    self.rollout = r;
                }
                false
            }
        }
    }
}

/// Executes one action on `inst` (as read for the decision).
async fn act(
    cluster: &Cluster,
    inst: &Instance,
    action: &Action,
    target: &kudo_api::rollout::Target,
) -> kudo_client::Result<()> {
    let who = rollout::key(inst);
    match action {
        Action::Change { plan, mark, .. } => {
            kudo_client::rollout::change::change(cluster, inst, target, mark).await?;
            info!(rollout = %mark.name, instance = %who, plan = %plan, "instance changed by the rollout");
        }
        Action::Cancel { run, .. } => {
            kudo_client::rollout::change::cancel(cluster, inst, run).await?;
            info!(instance = %who, run = %run, "the rollout's run cancelled for a rollback");
        }
        Action::Rollback { to, .. } => {
            let plan = kudo_client::rollback::prepare(cluster, inst, Some(*to)).await?;
            if let Some(running) = &plan.judged.blocked_by {
                debug!(instance = %who, plan = %running, "the rollback waits for a running plan");
                return Ok(());
            }
            let plan = kudo_client::rollback::write(cluster, inst.clone(), plan).await?;
            info!(instance = %who, revision = to, plan = %plan.judged.plan, "instance rolled back by the rollout");
        }
    }
    Ok(())
}
