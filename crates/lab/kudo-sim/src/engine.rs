//! The event loop: reflectors feed in-memory stores, every change (or a timer) triggers one
//! reconcile pass over a sorted snapshot of all stores, and each controller writes the
//! difference between what it wants and what it sees through the API.
//!
//! Writes are idempotent (deterministic names, "already exists" and "not found" ignored,
//! patches only when something differs), which is what makes acting on a possibly stale cache
//! safe without the "expectations" bookkeeping of the real controllers.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Endpoints, Node, PersistentVolume, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinSet;

use crate::SimConfig;
use crate::util::{fmt_time, fnv64};

/// Label put on simulated nodes; the node watch is restricted to it.
pub const NODE_LABEL: &str = "kudo.dev/simulated-node";
/// Event reporting instance when no node is involved.
pub const MANAGER: &str = "kudo-sim";

/// The field manager the real component doing this write records (kube-apiserver takes it from
/// the client's User-Agent): the kubelet owns nodes and pod status, kube-controller-manager the
/// rest of what is simulated here.
fn field_manager(ar: &ApiResource, status: bool) -> &'static str {
    match ar.kind.as_str() {
        "Node" => "kubelet",
        "Pod" if status => "kubelet",
        _ => "kube-controller-manager",
    }
}

/// One watched kind: its store and whether its initial list completed.
pub struct Watched<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    ready: Arc<AtomicBool>,
}

impl<K> Watched<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Objects ordered by namespace and name, so passes are deterministic.
    fn sorted(&self) -> Vec<Arc<K>> {
        let mut v = self.store.state();
        v.sort_by(|a, b| sort_key(a.meta()).cmp(&sort_key(b.meta())));
        v
    }
}

/// The order of a snapshot's lists: by namespace, then name (borrowed, so sorting clones nothing).
fn sort_key(meta: &ObjectMeta) -> (Option<&str>, &str) {
    (
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

fn watch<K>(api: Api<K>, cfg: watcher::Config, notify: Arc<Notify>, tasks: &mut JoinSet<()>) -> Watched<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let ready = Arc::new(AtomicBool::new(false));
    let flag = ready.clone();
    let stream = reflector::reflector(writer, watcher(api, cfg).default_backoff());
    tasks.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::InitDone) => {
                    flag.store(true, Ordering::SeqCst);
                    notify.notify_one();
                }
                Ok(_) => notify.notify_one(),
                Err(e) => tracing::debug!(kind = %K::kind(&()), error = %e, "watch error (retrying)"),
            }
        }
    });
    Watched { store, ready }
}

/// Everything the controllers read, captured once per pass.
pub struct Snapshot {
    pub nodes: Vec<Arc<Node>>,
    pub pods: Vec<Arc<Pod>>,
    pub replicasets: Vec<Arc<ReplicaSet>>,
    pub deployments: Vec<Arc<Deployment>>,
    pub statefulsets: Vec<Arc<StatefulSet>>,
    pub daemonsets: Vec<Arc<DaemonSet>>,
    pub revisions: Vec<Arc<ControllerRevision>>,
    pub jobs: Vec<Arc<Job>>,
    pub cronjobs: Vec<Arc<CronJob>>,
    pub pvcs: Vec<Arc<PersistentVolumeClaim>>,
    pub pvs: Vec<Arc<PersistentVolume>>,
    pub services: Vec<Arc<Service>>,
    pub endpoints: Vec<Arc<Endpoints>>,
    pub endpointslices: Vec<Arc<EndpointSlice>>,
    /// Kinds whose initial list has completed; controllers only act on complete views.
    pub ready: ReadyKinds,
    /// Pods, ReplicaSets, Jobs and ControllerRevisions by the uid of their controller.
    pub owned: Owned,
}

/// Positions (in a [`Snapshot`]'s sorted lists) of objects by the uid of their controlling
/// owner, so a workload controller finds what it owns without scanning every object of the
/// kind: one scan per owner made each pass quadratic (`scale 10000`: 10,000 Deployments times
/// 10,000 ReplicaSets, and as many ReplicaSets times 20,000 pods, every pass).
#[derive(Debug, Default)]
pub struct ByController(HashMap<String, Vec<usize>>);

impl ByController {
    fn of<K: Resource>(objs: &[Arc<K>]) -> Self {
        let mut by: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, o) in objs.iter().enumerate() {
            if let Some(uid) = crate::util::controller_uid(o.meta()) {
                by.entry(uid.to_string()).or_default().push(i);
            }
        }
        ByController(by)
    }

    /// The objects of `objs` (the list this index was built from) whose controller is `owner`,
    /// in the list's order.
    pub fn of_owner<'a, K: Resource>(&self, objs: &'a [Arc<K>], owner: &ObjectMeta) -> Vec<&'a K> {
        let uid = owner.uid.as_deref().unwrap_or_default();
        self.0
            .get(uid)
            .into_iter()
            .flatten()
            .map(|&i| objs[i].as_ref())
            .filter(|o| o.meta().namespace == owner.namespace)
            .collect()
    }
}

/// The owner indexes of a [`Snapshot`].
#[derive(Debug, Default)]
pub struct Owned {
    pub pods: ByController,
    pub replicasets: ByController,
    pub jobs: ByController,
    pub revisions: ByController,
}

impl Snapshot {
    /// Whether a pod of this name exists, by binary search: the pods are sorted by namespace and
    /// name (a set of names built for each owner creating pods made passes quadratic).
    pub fn has_pod(&self, namespace: Option<&str>, name: &str) -> bool {
        self.pods
            .binary_search_by(|p| sort_key(&p.metadata).cmp(&(namespace, name)))
            .is_ok()
    }

    /// Pods whose controller is `owner`.
    pub fn pods_of(&self, owner: &ObjectMeta) -> Vec<&Pod> {
        self.owned.pods.of_owner(&self.pods, owner)
    }

    /// ReplicaSets whose controller is `owner`.
    pub fn replicasets_of(&self, owner: &ObjectMeta) -> Vec<&ReplicaSet> {
        self.owned.replicasets.of_owner(&self.replicasets, owner)
    }

    /// Jobs whose controller is `owner`.
    pub fn jobs_of(&self, owner: &ObjectMeta) -> Vec<&Job> {
        self.owned.jobs.of_owner(&self.jobs, owner)
    }

    /// ControllerRevisions whose controller is `owner`.
    pub fn revisions_of(&self, owner: &ObjectMeta) -> Vec<&ControllerRevision> {
        self.owned.revisions.of_owner(&self.revisions, owner)
    }
}

/// Which stores are complete.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadyKinds {
    pub nodes: bool,
    pub pods: bool,
    pub replicasets: bool,
    pub deployments: bool,
    pub statefulsets: bool,
    pub daemonsets: bool,
    pub revisions: bool,
    pub jobs: bool,
    pub cronjobs: bool,
    pub pvcs: bool,
    pub pvs: bool,
    pub services: bool,
    pub endpoints: bool,
    pub endpointslices: bool,
}

struct Stores {
    nodes: Watched<Node>,
    pods: Watched<Pod>,
    replicasets: Watched<ReplicaSet>,
    deployments: Watched<Deployment>,
    statefulsets: Watched<StatefulSet>,
    daemonsets: Watched<DaemonSet>,
    revisions: Watched<ControllerRevision>,
    jobs: Watched<Job>,
    cronjobs: Watched<CronJob>,
    pvcs: Watched<PersistentVolumeClaim>,
    pvs: Watched<PersistentVolume>,
    services: Watched<Service>,
    endpoints: Watched<Endpoints>,
    endpointslices: Watched<EndpointSlice>,
}

impl Stores {
    fn snapshot(&self) -> Snapshot {
        let (pods, replicasets) = (self.pods.sorted(), self.replicasets.sorted());
        let (jobs, revisions) = (self.jobs.sorted(), self.revisions.sorted());
        let owned = Owned {
            pods: ByController::of(&pods),
            replicasets: ByController::of(&replicasets),
            jobs: ByController::of(&jobs),
            revisions: ByController::of(&revisions),
        };
        Snapshot {
            nodes: self.nodes.sorted(),
            pods,
            replicasets,
            deployments: self.deployments.sorted(),
            statefulsets: self.statefulsets.sorted(),
            daemonsets: self.daemonsets.sorted(),
            revisions,
            jobs,
            cronjobs: self.cronjobs.sorted(),
            pvcs: self.pvcs.sorted(),
            pvs: self.pvs.sorted(),
            services: self.services.sorted(),
            endpoints: self.endpoints.sorted(),
            endpointslices: self.endpointslices.sorted(),
            ready: ReadyKinds {
                nodes: self.nodes.ready(),
                pods: self.pods.ready(),
                replicasets: self.replicasets.ready(),
                deployments: self.deployments.ready(),
                statefulsets: self.statefulsets.ready(),
                daemonsets: self.daemonsets.ready(),
                revisions: self.revisions.ready(),
                jobs: self.jobs.ready(),
                cronjobs: self.cronjobs.ready(),
                pvcs: self.pvcs.ready(),
                pvs: self.pvs.ready(),
                services: self.services.ready(),
                endpoints: self.endpoints.ready(),
                endpointslices: self.endpointslices.ready(),
            },
            owned,
        }
    }
}

/// Per-pod kubelet memory (lost on restart; everything is re-derived from status then).
#[derive(Debug, Default, Clone)]
pub struct PodMem {
    pub node: Option<String>,
    pub ip: Option<String>,
    /// Stage the pod was last seen in and since when (ms).
    pub stage: &'static str,
    pub since: i64,
    /// When the kubelet started killing the pod.
    pub killing_since: Option<i64>,
    /// What the pod's containers do, once started.
    pub(crate) outcome: Option<Arc<crate::kubelet::Outcome>>,
}

/// State that must survive between passes.
#[derive(Debug, Default)]
pub struct Memory {
    pub pods: HashMap<String, PodMem>,
    pub round_robin: usize,
    pub binding_unsupported: bool,
    pub events: HashSet<String>,
    /// Revision name → pod template, for StatefulSet pods recreated at the current revision.
    pub revisions: HashMap<(String, String), Value>,
    /// First time an object was seen (ms), for delays measured from creation.
    pub first_seen: HashMap<String, i64>,
    /// Keys of one-shot actions already attempted.
    pub once: HashSet<String>,
    /// Last identical write per target, to damp loops against a server that drops fields.
    last_write: HashMap<String, (u64, i64)>,
    /// The load balancers of LoadBalancer Services, by Service uid.
    pub(crate) lbs: HashMap<String, crate::loadbalancer::Lb>,
}

/// The simulator state handed to every controller.
pub struct Sim {
    pub client: Client,
    pub cfg: SimConfig,
    /// Pass time in ms and formatted.
    pub now: i64,
    pub now_s: String,
    wake: Option<i64>,
    pub mem: Memory,
}

/// API resource descriptor of a built-in kind.
pub fn ar<K: Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

fn is_code(e: &kube::Error, codes: &[u16]) -> bool {
    matches!(e, kube::Error::Api(s) if codes.contains(&s.code))
}

impl Sim {
    fn api(&self, ar: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
        match ns {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        }
    }

    /// Ask for another pass no later than `at` (ms).
    pub fn wake_at(&mut self, at: i64) {
        let at = at.max(self.now + 1);
        self.wake = Some(self.wake.map_or(at, |w| w.min(at)));
    }

    /// True when `delay` has passed since `since`; otherwise schedules a wake-up.
    pub fn elapsed(&mut self, since: i64, delay: Duration) -> bool {
        let due = since + i64::try_from(delay.as_millis()).unwrap_or(i64::MAX / 4);
        if self.now >= due {
            true
        } else {
            self.wake_at(due);
            false
        }
    }

    /// First time this key was seen by the simulator.
    pub fn first_seen(&mut self, key: &str) -> i64 {
        let now = self.now;
        *self.mem.first_seen.entry(key.to_string()).or_insert(now)
    }

    fn damp(&mut self, target: String, body: &Value) -> bool {
        let h = fnv64(&[&body.to_string()]);
        if let Some((last, at)) = self.mem.last_write.get(&target)
            && *last == h
            && self.now - at < 1000
        {
            let at = *at;
            self.wake_at(at + 1000);
            return true;
        }
        self.mem.last_write.insert(target, (h, self.now));
        false
    }

    /// Sends a write whose answer the simulator does not read: only its status is checked, the
    /// body is not decoded (decoding every answer into a `DynamicObject` was a twentieth of the
    /// embedded cluster's CPU at 10,000 Instances).
    async fn send_unread(
        &self,
        req: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<(), kube::Error> {
        let req = req.map_err(kube::Error::BuildRequest)?;
        self.client.request_text(req).await.map(drop)
    }

    /// Creates an object; "already exists" counts as success (the name is deterministic).
    /// Returns whether the object now exists.
    pub async fn create(&mut self, ar: &ApiResource, ns: Option<&str>, obj: Value) -> bool {
        self.create_as(ar, ns, obj, field_manager(ar, false)).await
    }

    /// [`Sim::create`] with an explicit field manager.
    async fn create_as(&mut self, ar: &ApiResource, ns: Option<&str>, obj: Value, manager: &str) -> bool {
        let pp = PostParams {
            field_manager: Some(manager.to_string()),
            ..Default::default()
        };
        // Sent as built, without a round trip through `DynamicObject`.
        let request = kube::core::Request::new(self.api(ar, ns).resource_url());
        let res = match serde_json::to_vec(&obj) {
            Ok(body) => self.send_unread(request.create(&pp, body)).await,
            Err(e) => Err(kube::Error::SerdeError(e)),
        };
        match res {
            Ok(()) => true,
            Err(e) if is_code(&e, &[409]) => true,
            Err(e) => {
                let name = obj
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                tracing::warn!(kind = %ar.kind, %name, error = %e, "create failed");
                false
            }
        }
    }

    /// JSON merge patch of the object (or of its `status` subresource).
    pub async fn merge(
        &mut self,
        ar: &ApiResource,
        ns: Option<&str>,
        name: &str,
        status: bool,
        patch: Value,
    ) -> bool {
        let target = format!("{}/{}/{}/{}/{}", ar.kind, ns.unwrap_or(""), name, status, "merge");
        if self.damp(target, &patch) {
            return false;
        }
        let api = self.api(ar, ns);
        let pp = PatchParams {
            field_manager: Some(field_manager(ar, status).to_string()),
            ..Default::default()
        };
        let request = kube::core::Request::new(api.resource_url());
        let req = if status {
            request.patch_subresource("status", name, &pp, &Patch::Merge(&patch))
        } else {
            request.patch(name, &pp, &Patch::Merge(&patch))
        };
        match self.send_unread(req).await {
            Ok(()) => true,
            Err(e) if is_code(&e, &[404, 409]) => false,
            Err(e) => {
                tracing::warn!(kind = %ar.kind, %name, status, error = %e, "patch failed");
                false
            }
        }
    }

    /// Deletes an object; "not found" counts as done.
    pub async fn delete(
        &mut self,
        ar: &ApiResource,
        ns: Option<&str>,
        name: &str,
        grace: Option<u32>,
        uid: Option<&str>,
        background: bool,
    ) {
        let mut dp = if background {
            DeleteParams::background()
        } else {
            DeleteParams::default()
        };
        dp.grace_period_seconds = grace;
        if let Some(uid) = uid {
            dp.preconditions = Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            });
        }
        match self.api(ar, ns).delete(name, &dp).await {
            Ok(_) => {}
            Err(e) if is_code(&e, &[404, 409]) => {}
            Err(e) => tracing::warn!(kind = %ar.kind, %name, error = %e, "delete failed"),
        }
    }

    /// POST to a subresource; returns the HTTP error code on failure.
    pub async fn create_sub(
        &mut self,
        ar: &ApiResource,
        ns: &str,
        name: &str,
        sub: &str,
        body: Value,
    ) -> Result<(), u16> {
        let res: Result<Value, kube::Error> = self
            .api(ar, Some(ns))
            .create_subresource(
                sub,
                name,
                &PostParams {
                    field_manager: Some(
                        if sub == "binding" {
                            "kube-scheduler"
                        } else {
                            field_manager(ar, false)
                        }
                        .to_string(),
                    ),
                    ..Default::default()
                },
                &body,
            )
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) => Err(s.code),
            Err(e) => {
                tracing::warn!(%name, sub, error = %e, "subresource call failed");
                Err(0)
            }
        }
    }

    /// GET an object as JSON.
    pub async fn get(&mut self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Option<Value> {
        match self.api(ar, ns).get_opt(name).await {
            Ok(Some(o)) => serde_json::to_value(o).ok(),
            _ => None,
        }
    }

    /// Records a core/v1 Event about an object (what `kubectl describe` lists). Each distinct
    /// (object, reason, message) is recorded once.
    #[allow(clippy::too_many_arguments)]
    pub async fn event(
        &mut self,
        involved: &InvolvedObject,
        type_: &str,
        reason: &str,
        message: &str,
        component: &str,
        host: Option<&str>,
        field_path: Option<&str>,
    ) {
        let key = fnv64(&[&involved.uid, reason, message, field_path.unwrap_or("")]);
        let name = format!("{}.{:016x}", involved.name, key);
        if !self.mem.events.insert(name.clone()) {
            return;
        }
        let ns = involved
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let mut obj = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {
                "apiVersion": involved.api_version,
                "kind": involved.kind,
                "name": involved.name,
                "uid": involved.uid,
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "source": {"component": component},
            "firstTimestamp": self.now_s,
            "lastTimestamp": self.now_s,
            "count": 1,
            "reportingComponent": component,
            "reportingInstance": host.unwrap_or(MANAGER),
        });
        if let Some(ns) = &involved.namespace {
            obj["involvedObject"]["namespace"] = json!(ns);
        }
        if let Some(fp) = field_path {
            obj["involvedObject"]["fieldPath"] = json!(fp);
        }
        if let Some(h) = host {
            obj["source"]["host"] = json!(h);
        }
        let ar = ar::<k8s_openapi::api::core::v1::Event>();
        let manager = match component {
            "kubelet" => "kubelet",
            "default-scheduler" => "kube-scheduler",
            _ => "kube-controller-manager",
        };
        self.create_as(&ar, Some(&ns), obj, manager).await;
    }

    /// Names of the simulated nodes.
    pub fn node_names(&self) -> Vec<String> {
        (0..self.cfg.nodes).map(node_name).collect()
    }
}

/// Name of simulated node `i`.
pub fn node_name(i: u32) -> String {
    format!("kudo-node-{i}")
}

/// Index of a simulated node by name.
pub fn node_index(name: &str) -> Option<u32> {
    name.strip_prefix("kudo-node-")?.parse().ok()
}

/// The fields of an Event's `involvedObject`.
#[derive(Debug, Clone)]
pub struct InvolvedObject {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
}

impl InvolvedObject {
    /// Reference to a typed object.
    pub fn of<K: Resource<DynamicType = ()>>(obj: &K) -> Self {
        let meta = obj.meta();
        InvolvedObject {
            api_version: K::api_version(&()).to_string(),
            kind: K::kind(&()).to_string(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
        }
    }
}

/// The longest a change waits for the next pass after a slow one.
const MAX_EVENT_GAP: Duration = Duration::from_millis(500);

pub async fn run(client: Client, cfg: SimConfig, shutdown: impl Future<Output = ()>) {
    let notify = Arc::new(Notify::new());
    let mut tasks = JoinSet::new();
    let wc = watcher::Config::default;
    let stores = Stores {
        nodes: watch(
            Api::all(client.clone()),
            wc().labels(&format!("{NODE_LABEL}=true")),
            notify.clone(),
            &mut tasks,
        ),
        pods: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
        replicasets: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
        deployments: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
        statefulsets: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
        daemonsets: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
        revisions: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
        jobs: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
        cronjobs: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
        pvcs: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
        pvs: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
        services: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
        endpoints: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
        endpointslices: watch(Api::all(client.clone()), wc(), notify.clone(), &mut tasks),
    };
    let resync = cfg.resync.max(Duration::from_millis(10));
    let mut sim = Sim {
        client,
        cfg,
        now: 0,
        now_s: String::new(),
        wake: None,
        mem: Memory::default(),
    };
    let mut shutdown = std::pin::pin!(shutdown);
    let mut started = false;
    loop {
        sim.now = sim.cfg.clock.now_ms();
        sim.now_s = fmt_time(sim.now);
        sim.wake = None;
        if !started {
            crate::volumes::ensure_storage_class(&mut sim).await;
            started = true;
        }
        let snap = stores.snapshot();
        let began = Instant::now();
        pass(&mut sim, &snap).await;
        let took = began.elapsed();
        let mut sleep_for = resync;
        if let Some(w) = sim.wake {
            let now = sim.cfg.clock.now_ms();
            let ms = u64::try_from((w - now).max(1)).unwrap_or(1);
            sleep_for = sleep_for.min(Duration::from_millis(ms));
        }
        tokio::select! {
            _ = &mut shutdown => break,
            _ = notify.notified() => {
                // Let a burst of watch events land before the next pass, and at least as long as
                // the last pass took: a pass looks at every object (each does all that is due),
                // so on a large cluster passes back to back after every event were quadratic
                // (`scale 10000`); spaced by their own duration, one pass takes in
                // all the events that arrived meanwhile. A small cluster's pass takes a
                // millisecond, so its timing is unchanged.
                tokio::time::sleep(took.clamp(Duration::from_millis(3), MAX_EVENT_GAP)).await;
            }
            _ = tokio::time::sleep(sleep_for) => {}
        }
    }
    tasks.shutdown().await;
}

async fn pass(sim: &mut Sim, snap: &Snapshot) {
    crate::kubelet::nodes(sim, snap).await;
    crate::volumes::reconcile(sim, snap).await;
    crate::workloads::cronjobs(sim, snap).await;
    crate::workloads::jobs(sim, snap).await;
    crate::workloads::deployments(sim, snap).await;
    crate::workloads::replicasets(sim, snap).await;
    crate::workloads::statefulsets(sim, snap).await;
    crate::workloads::daemonsets(sim, snap).await;
    crate::kubelet::schedule(sim, snap).await;
    crate::kubelet::pods(sim, snap).await;
    crate::endpoints::reconcile(sim, snap).await;
    crate::loadbalancer::reconcile(sim, snap).await;
    // Forget pods that are gone.
    if snap.ready.pods {
        let live: HashSet<&str> = snap
            .pods
            .iter()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        sim.mem.pods.retain(|uid, _| live.contains(uid.as_str()));
    }
}
