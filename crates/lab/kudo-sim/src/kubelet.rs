//! The node side: simulated Node objects, the scheduler, and a kubelet that moves pods through
//! their lifecycle by writing pod status.

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use serde_json::{Value, json};

use crate::engine::{InvolvedObject, NODE_LABEL, Sim, Snapshot, ar, node_index, node_name};
use crate::util::{
    Cond, controller_kind, hex64, merge_conditions, merge_patch_changes, pod_condition, pod_phase,
};

/// Internal/host IP of simulated node `i`.
pub fn node_ip(i: u32) -> String {
    format!("172.18.0.{}", i + 2)
}

/// Creates missing simulated nodes and refreshes their heartbeats.
pub async fn nodes(sim: &mut Sim, snap: &Snapshot) {
    if !snap.ready.nodes {
        return;
    }
    let heartbeat = i64::try_from(sim.cfg.node_heartbeat.as_millis())
        .unwrap_or(30_000)
        .max(1000);
    for i in 0..sim.cfg.nodes {
        let name = node_name(i);
        let existing = snap
            .nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(&name));
        let Some(node) = existing else {
            let obj = json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        NODE_LABEL: "true",
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        "beta.kubernetes.io/os": "linux",
                        "beta.kubernetes.io/arch": "amd64",
                        "type": "kudo-sim",
                    },
                    "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
                },
                "spec": {"podCIDR": format!("10.244.{i}.0/24"), "podCIDRs": [format!("10.244.{i}.0/24")]},
            });
            sim.create(&ar::<Node>(), None, obj).await;
            continue;
        };
        let last_beat = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .and_then(|c| c.last_heartbeat_time.as_ref())
            .map(crate::util::time_ms);
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True");
        let due = match last_beat {
            Some(t) if ready => t + heartbeat,
            _ => sim.now,
        };
        if sim.now < due {
            sim.wake_at(due);
            continue;
        }
        let status = node_status(sim, i, node);
        sim.merge(&ar::<Node>(), None, &name, true, json!({ "status": status }))
            .await;
        sim.wake_at(sim.now + heartbeat);
    }
}

fn node_status(sim: &Sim, i: u32, node: &Node) -> Value {
    let now = &sim.now_s;
    let since = node
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| crate::util::fmt_time(crate::util::time_ms(t)))
        .unwrap_or_else(|| now.clone());
    let cond = |ty: &str, status: &str, reason: &str, msg: &str| {
        json!({"type": ty, "status": status, "reason": reason, "message": msg,
               "lastHeartbeatTime": now, "lastTransitionTime": since})
    };
    let resources = json!({
        "cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti",
        "hugepages-1Gi": "0", "hugepages-2Mi": "0",
    });
    json!({
        "capacity": resources,
        "allocatable": resources,
        "phase": "Running",
        "conditions": [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            cond("Ready", "True", "KubeletReady", "kubelet is posting ready status (simulated by kudo-sim)"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": node_ip(i)},
            {"type": "Hostname", "address": node_name(i)},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": hex64(&["machine", &node_name(i)])[..32].to_string(),
            "systemUUID": hex64(&["system", &node_name(i)])[..32].to_string(),
            "bootID": hex64(&["boot", &node_name(i)])[..32].to_string(),
            "kernelVersion": "6.1.0-kudo-sim",
            "osImage": "kudo-sim",
            "containerRuntimeVersion": "kudo-sim://0.1.0",
            "kubeletVersion": "v1.37.1-kudo-sim",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    })
}

/// Binds unscheduled pods to simulated nodes, round-robin in creation order.
pub async fn schedule(sim: &mut Sim, snap: &Snapshot) {
    if !snap.ready.pods {
        return;
    }
    let mut pending: Vec<&Pod> = snap
        .pods
        .iter()
        .map(|p| p.as_ref())
        .filter(|p| {
            let spec = p.spec.as_ref();
            spec.is_some_and(|s| s.node_name.as_deref().unwrap_or("").is_empty())
                && spec.is_some_and(|s| {
                    s.scheduler_name
                        .as_deref()
                        .is_none_or(|n| n == "default-scheduler")
                })
                && p.metadata.deletion_timestamp.is_none()
                && !matches!(pod_phase(p), "Succeeded" | "Failed")
        })
        .collect();
    pending.sort_by_key(|p| {
        (
            crate::util::created_ms(&p.metadata),
            p.metadata.namespace.clone(),
            p.metadata.name.clone(),
        )
    });
    let nodes = sim.node_names();
    for pod in pending {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let key = format!("pod-sched/{uid}");
        let seen = sim.first_seen(&key);
        if !sim.elapsed(seen, sim.cfg.delays.scheduling) {
            continue;
        }
        let node = match sim.mem.pods.get(&uid).and_then(|m| m.node.clone()) {
            Some(n) => n,
            None => {
                let n = nodes[sim.mem.round_robin % nodes.len()].clone();
                sim.mem.round_robin += 1;
                sim.mem.pods.entry(uid.clone()).or_default().node = Some(n.clone());
                n
            }
        };
        let mut bound = false;
        if !sim.mem.binding_unsupported {
            let body = json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": ns, "uid": uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            });
            match sim.create_sub(&ar::<Pod>(), &ns, &name, "binding", body).await {
                Ok(()) => bound = true,
                Err(404 | 405) => sim.mem.binding_unsupported = true,
                Err(409) => continue,
                Err(_) => continue,
            }
        }
        // A binding sets the PodScheduled condition itself (as kube-apiserver's does); only
        // a server without the subresource needs the node and the condition written here.
        if !bound && !schedule_without_binding(sim, pod, &node).await {
            continue;
        }
        sim.event(
            &InvolvedObject::of(pod),
            "Normal",
            "Scheduled",
            &format!("Successfully assigned {ns}/{name} to {node}"),
            "default-scheduler",
            None,
            None,
        )
        .await;
    }
}

/// Assigns a pod to `node` by writing `spec.nodeName` and then its PodScheduled condition;
/// false when the pod could not be assigned.
async fn schedule_without_binding(sim: &mut Sim, pod: &Pod, node: &str) -> bool {
    let ns = pod.metadata.namespace.as_deref();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let node_name = json!({"spec": {"nodeName": node}});
    if !sim.merge(&ar::<Pod>(), ns, name, false, node_name).await {
        return false;
    }
    let conds = merge_conditions(
        status_json(pod).get("conditions"),
        &[Cond::new("PodScheduled", "True", "", "")],
        &[],
        &sim.now_s,
        false,
    );
    let status = json!({"status": {"conditions": conds}});
    sim.merge(&ar::<Pod>(), ns, name, true, status).await;
    true
}

fn status_json(pod: &Pod) -> Value {
    pod.status
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or_else(|| json!({}))
}

/// Whether a container follows the failure convention (the word `fail` in image, command or args).
pub fn container_fails(c: &Container) -> bool {
    let has_word = |s: &str| {
        s.split(|ch: char| !ch.is_ascii_alphanumeric())
            .any(|w| w.eq_ignore_ascii_case("fail"))
    };
    c.image.as_deref().is_some_and(has_word)
        || c.command.iter().flatten().any(|s| has_word(s))
        || c.args.iter().flatten().any(|s| has_word(s))
}

/// Pod lifecycle stage as derived from the written status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Bound, no kubelet status yet.
    New,
    /// ContainerCreating / init containers.
    Pending,
    /// Containers running, not (yet) ready.
    Running,
    Ready,
    Done,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::New => "New",
            Stage::Pending => "Pending",
            Stage::Running => "Running",
            Stage::Ready => "Ready",
            Stage::Done => "Done",
        }
    }
}

fn stage_of(pod: &Pod) -> Stage {
    match pod_phase(pod) {
        "Succeeded" | "Failed" => Stage::Done,
        "Running" => {
            if pod_condition(pod, "Ready").is_some_and(|c| c.status == "True") {
                Stage::Ready
            } else {
                Stage::Running
            }
        }
        _ => {
            if pod.status.as_ref().and_then(|s| s.start_time.as_ref()).is_some() {
                Stage::Pending
            } else {
                Stage::New
            }
        }
    }
}

/// Kubelet work for every pod on a simulated node.
pub async fn pods(sim: &mut Sim, snap: &Snapshot) {
    if !snap.ready.pods {
        return;
    }
    // What simulated containers started in this pass reach on the network.
    sim.cfg.runtime.set_view(
        crate::network::ClusterView {
            pods: snap.pods.clone(),
            services: snap.services.clone(),
            endpoints: snap.endpoints.clone(),
        },
        sim.now,
    );
    let mut ips = PodIps::new(&snap.pods);
    for pod in &snap.pods {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let ours = node_index(&node).is_some_and(|i| i < sim.cfg.nodes);
        if pod.metadata.deletion_timestamp.is_some() {
            if ours || node.is_empty() {
                terminate(sim, pod, &node).await;
            }
            continue;
        }
        if ours {
            advance(sim, &mut ips, pod, &node).await;
        }
    }
    // Filesystems, logs and stand-ins of pods that are gone, data of claims that are gone.
    let live: std::collections::HashSet<String> =
        snap.pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    let claims: std::collections::HashSet<String> = snap
        .pvcs
        .iter()
        .map(|c| {
            format!(
                "{}/{}",
                c.metadata.namespace.as_deref().unwrap_or(""),
                c.metadata.name.as_deref().unwrap_or("")
            )
        })
        .collect();
    sim.cfg.runtime.retain(&live, &claims);
}

async fn terminate(sim: &mut Sim, pod: &Pod, node: &str) {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let finished = matches!(pod_phase(pod), "Succeeded" | "Failed");
    if !node.is_empty() && !finished {
        let killing_since = sim.mem.pods.get(&uid).and_then(|m| m.killing_since);
        let since = match killing_since {
            Some(s) => s,
            None => {
                let now = sim.now;
                sim.mem.pods.entry(uid.clone()).or_default().killing_since = Some(now);
                let involved = InvolvedObject::of(pod);
                let containers: Vec<Container> = pod
                    .spec
                    .as_ref()
                    .map(|s| s.containers.clone())
                    .unwrap_or_default();
                for c in &containers {
                    let fp = format!("spec.containers{{{}}}", c.name);
                    if let Some(pre) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) {
                        let what = if let Some(e) = &pre.exec {
                            format!("exec {:?}", e.command.clone().unwrap_or_default())
                        } else if pre.http_get.is_some() {
                            "httpGet".to_string()
                        } else if pre.sleep.is_some() {
                            "sleep".to_string()
                        } else {
                            "hook".to_string()
                        };
                        sim.event(
                            &involved,
                            "Normal",
                            "PreStopHook",
                            &format!("Ran preStop hook ({what}) of container {} (simulated)", c.name),
                            "kubelet",
                            Some(node),
                            Some(&fp),
                        )
                        .await;
                    }
                    sim.event(
                        &involved,
                        "Normal",
                        "Killing",
                        &format!("Stopping container {}", c.name),
                        "kubelet",
                        Some(node),
                        Some(&fp),
                    )
                    .await;
                }
                sim.now
            }
        };
        let grace_ms = pod
            .metadata
            .deletion_grace_period_seconds
            .map(|g| g.max(0) * 1000)
            .unwrap_or(30_000);
        let delay_ms = i64::try_from(sim.cfg.delays.termination.as_millis())
            .unwrap_or(i64::MAX / 4)
            .min(grace_ms);
        if sim.now < since + delay_ms {
            sim.wake_at(since + delay_ms);
            return;
        }
    }
    sim.delete(&ar::<Pod>(), Some(&ns), &name, Some(0), Some(&uid), false)
        .await;
}

/// How the containers of a pod end up: decided by running their commands once in the simulated
/// runtime (see [`crate::shell`]) and by the failure convention.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// Index and exit code of the first failing init container.
    failing_init: Option<(usize, i32)>,
    /// Index of an init container that does not end (a server, a loop that waits for ever):
    /// the pod stays initializing.
    hanging_init: Option<usize>,
    /// Per container: the exit code once its command finished (`None`: runs until stopped).
    exits: Vec<Option<i32>>,
    /// Per container: the non-zero exit code it fails with.
    failing: Vec<Option<i32>>,
    /// Longest simulated `sleep` of the containers, in ms.
    sleep_ms: i64,
    runs_to_completion: bool,
    restart_never: bool,
}

impl Outcome {
    fn any_fail(&self) -> bool {
        self.failing.iter().any(Option::is_some)
    }

    /// Whether the pod ends by itself: a Job's pod or a `restartPolicy: Never` pod whose
    /// commands all finish.
    fn completes(&self) -> bool {
        (self.runs_to_completion || self.restart_never) && self.exits.iter().all(Option::is_some)
    }
}

/// The pod's [`Outcome`], worked out once per pod (its containers start once and a pod's spec
/// does not change) and remembered with the kubelet's other per-pod state.
fn outcome(
    sim: &mut Sim,
    pod: &Pod,
    files: std::collections::HashMap<String, crate::shell::Tree>,
) -> std::sync::Arc<Outcome> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    if let Some(o) = sim.mem.pods.get(uid).and_then(|m| m.outcome.clone()) {
        return o;
    }
    let o = std::sync::Arc::new(work_out(sim, pod, files));
    sim.mem.pods.entry(uid.to_string()).or_default().outcome = Some(o.clone());
    o
}

fn work_out(sim: &Sim, pod: &Pod, files: std::collections::HashMap<String, crate::shell::Tree>) -> Outcome {
    let spec = pod.spec.as_ref();
    let restart = spec.and_then(|s| s.restart_policy.as_deref()).unwrap_or("Always");
    // The containers see the pod's IP (allocated before they start).
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let ip = sim.mem.pods.get(uid).and_then(|m| m.ip.clone());
    let with_ip;
    let pod = match ip {
        Some(ip) if pod.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_none() => {
            let mut p = pod.clone();
            p.status.get_or_insert_with(Default::default).pod_ip = Some(ip);
            with_ip = p;
            &with_ip
        }
        _ => pod,
    };
    let runs = sim.cfg.runtime.start_pod(pod, sim.now, files, container_fails);
    let failing_init = runs
        .inits
        .iter()
        .enumerate()
        .find_map(|(i, r)| r.exit.filter(|c| *c != 0).map(|c| (i, c)));
    let sidecar = |i: usize| {
        spec.and_then(|s| s.init_containers.as_ref())
            .and_then(|c| c.get(i))
            .is_some_and(|c| c.restart_policy.as_deref() == Some("Always"))
    };
    let hanging_init = runs
        .inits
        .iter()
        .enumerate()
        .position(|(i, r)| r.exit.is_none() && !sidecar(i));
    let n = spec.map(|s| s.containers.len()).unwrap_or(0);
    let exits: Vec<Option<i32>> = (0..n)
        .map(|i| runs.containers.get(i).and_then(|r| r.exit))
        .collect();
    Outcome {
        failing_init,
        hanging_init,
        failing: exits.iter().map(|e| e.filter(|c| *c != 0)).collect(),
        exits,
        sleep_ms: runs.containers.iter().map(|r| r.sleep_ms).max().unwrap_or(0),
        runs_to_completion: controller_kind(&pod.metadata) == Some("Job"),
        restart_never: restart == "Never",
    }
}

fn image_id(image: &str) -> String {
    let repo = image.split('@').next().unwrap_or(image);
    let repo = match repo.rsplit_once(':') {
        Some((r, tag)) if !tag.contains('/') => r,
        _ => repo,
    };
    let repo = if repo.contains('/') {
        repo.to_string()
    } else {
        format!("docker.io/library/{repo}")
    };
    format!("{repo}@sha256:{}", hex64(&["image", image]))
}

enum CState<'a> {
    Waiting(&'a str, Option<String>),
    Running(&'a str),
    Terminated {
        code: i32,
        started: &'a str,
        finished: &'a str,
    },
}

fn container_status(
    uid: &str,
    c: &Container,
    state: CState<'_>,
    ready: bool,
    restarts: i32,
    last: Option<Value>,
) -> Value {
    let image = c.image.clone().unwrap_or_default();
    let mut v = json!({
        "name": c.name,
        "image": image,
        "imageID": "",
        "ready": ready,
        "restartCount": restarts,
    });
    let started;
    match state {
        CState::Waiting(reason, msg) => {
            let mut w = json!({"reason": reason});
            if let Some(m) = msg {
                w["message"] = json!(m);
            }
            v["state"] = json!({"waiting": w});
            started = false;
            if restarts > 0 {
                v["imageID"] = json!(image_id(&image));
                v["containerID"] = json!(format!("containerd://{}", hex64(&[uid, &c.name, "0"])));
            }
        }
        CState::Running(at) => {
            v["state"] = json!({"running": {"startedAt": at}});
            started = true;
            v["imageID"] = json!(image_id(&image));
            v["containerID"] = json!(format!(
                "containerd://{}",
                hex64(&[uid, &c.name, &restarts.to_string()])
            ));
        }
        CState::Terminated {
            code,
            started: s,
            finished,
        } => {
            let cid = format!("containerd://{}", hex64(&[uid, &c.name, &restarts.to_string()]));
            v["state"] = json!({"terminated": {
                "exitCode": code,
                "reason": if code == 0 { "Completed" } else { "Error" },
                "startedAt": s,
                "finishedAt": finished,
                "containerID": cid,
            }});
            started = false;
            v["imageID"] = json!(image_id(&image));
            v["containerID"] = json!(cid);
        }
    }
    v["started"] = json!(started);
    if let Some(l) = last {
        v["lastState"] = l;
    }
    v
}

/// IP for a pod on node `i`: the lowest host number not used by another live pod there.
/// The pod's own IP (from its status, after a restart of the simulator) counts as free for it.
fn allocate_ip(sim: &mut Sim, ips: &mut PodIps<'_>, pod: &Pod, node: &str) -> String {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    if let Some(ip) = sim.mem.pods.get(uid).and_then(|m| m.ip.clone()) {
        return ip;
    }
    let own = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref());
    let i = node_index(node).unwrap_or(0);
    let prefix = format!("10.244.{i}.");
    let used = ips.used(sim);
    let ip = (2..=254)
        .map(|n| format!("{prefix}{n}"))
        .find(|ip| own == Some(ip.as_str()) || !used.contains(ip))
        .unwrap_or_else(|| format!("{prefix}254"));
    used.insert(ip.clone());
    sim.mem.pods.entry(uid.to_string()).or_default().ip = Some(ip.clone());
    ip
}

/// The pod IPs in use during one pass: gathered from the snapshot and the kubelet's memory on
/// the first allocation of the pass, then kept up to date by each allocation (gathering them
/// for every allocation made a pass that starts many pods quadratic).
struct PodIps<'a> {
    pods: &'a [std::sync::Arc<Pod>],
    used: Option<std::collections::HashSet<String>>,
}

impl<'a> PodIps<'a> {
    fn new(pods: &'a [std::sync::Arc<Pod>]) -> Self {
        PodIps { pods, used: None }
    }

    fn used(&mut self, sim: &Sim) -> &mut std::collections::HashSet<String> {
        self.used.get_or_insert_with(|| {
            let mut used: std::collections::HashSet<String> = self
                .pods
                .iter()
                .filter(|p| !matches!(pod_phase(p), "Succeeded" | "Failed"))
                .filter_map(|p| p.status.as_ref().and_then(|s| s.pod_ip.clone()))
                .collect();
            used.extend(sim.mem.pods.values().filter_map(|m| m.ip.clone()));
            used
        })
    }
}

/// Since when (ms) the pod has been in `stage`, as this kubelet first saw it there.
fn stage_since(sim: &mut Sim, uid: &str, stage: Stage) -> i64 {
    let now = sim.now;
    let m = match sim.mem.pods.get_mut(uid) {
        Some(m) => m,
        None => sim.mem.pods.entry(uid.to_string()).or_default(),
    };
    if m.stage != stage.name() {
        m.stage = stage.name();
        m.since = now;
    }
    m.since
}

/// Whether the pod's next step is due now (arming the wake-up timer when it is not). Every
/// pass visits every pod, so this runs before anything is cloned or serialised: at 10,000
/// Instances most pods are Ready and stay so, and the work of building their status only to
/// find it unchanged was most of a pass.
fn step_due(sim: &mut Sim, stage: Stage, since: i64, out: &Outcome) -> bool {
    let d = &sim.cfg.delays;
    match stage {
        Stage::New => true,
        Stage::Pending => {
            let wait = d.pending_to_running;
            sim.elapsed(since, wait)
        }
        Stage::Running => {
            let wait = d.running_to_ready;
            let crashing = !out.runs_to_completion && out.any_fail();
            !crashing && sim.elapsed(since, wait)
        }
        Stage::Ready => {
            let sleep = std::time::Duration::from_millis(u64::try_from(out.sleep_ms).unwrap_or(0));
            let run_for = d.job_completion.max(sleep);
            out.completes() && sim.elapsed(since, run_for)
        }
        Stage::Done => false,
    }
}

async fn advance(sim: &mut Sim, ips: &mut PodIps<'_>, pod: &Pod, node: &str) {
    let stage = stage_of(pod);
    if stage == Stage::Done {
        return;
    }
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let since = stage_since(sim, uid, stage);
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
    if !host_network && matches!(stage, Stage::New | Stage::Pending) {
        // Before the containers start: they see the pod's IP.
        allocate_ip(sim, ips, pod, node);
    }
    let started = sim.mem.pods.get(uid).is_some_and(|m| m.outcome.is_some());
    let files = if !started && crate::volume_files::has_file_volumes(pod) {
        crate::volume_files::volume_files(sim, pod).await
    } else {
        Default::default()
    };
    let out = outcome(sim, pod, files);
    if !step_due(sim, stage, since, &out) {
        return;
    }
    let uid = uid.to_string();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let inits = spec.init_containers.clone().unwrap_or_default();
    let containers = spec.containers.clone();
    let host_net = spec.host_network == Some(true);
    let ni = node_index(node).unwrap_or(0);
    let host_ip = node_ip(ni);
    let cur = status_json(pod);
    let start_time = cur
        .get("startTime")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| sim.now_s.clone());
    let now_s = sim.now_s.clone();
    let involved = InvolvedObject::of(pod);

    let mut status = json!({
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start_time,
    });
    let not_ready = |list: &[&Container]| {
        format!(
            "containers with unready status: [{}]",
            list.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(" ")
        )
    };
    let all: Vec<&Container> = containers.iter().collect();
    // Time containers started running, kept stable across later writes.
    let started_at = cur
        .pointer("/containerStatuses/0/state/running/startedAt")
        .or_else(|| cur.pointer("/containerStatuses/0/state/terminated/startedAt"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| now_s.clone());
    let init_done = |sim_now: &str| -> Vec<Value> {
        inits
            .iter()
            .map(|c| {
                if c.restart_policy.as_deref() == Some("Always") {
                    container_status(&uid, c, CState::Running(sim_now), true, 0, None)
                } else {
                    container_status(
                        &uid,
                        c,
                        CState::Terminated {
                            code: 0,
                            started: sim_now,
                            finished: sim_now,
                        },
                        false,
                        0,
                        None,
                    )
                }
            })
            .collect()
    };
    let init_cond_ok = Cond::new("Initialized", "True", "", "");

    match stage {
        Stage::New => {
            // Kubelet accepted the pod: ContainerCreating (or PodInitializing with init containers).
            let waiting = if inits.is_empty() {
                "ContainerCreating"
            } else {
                "PodInitializing"
            };
            status["phase"] = json!("Pending");
            status["containerStatuses"] = Value::Array(
                containers
                    .iter()
                    .map(|c| container_status(&uid, c, CState::Waiting(waiting, None), false, 0, None))
                    .collect(),
            );
            if !inits.is_empty() {
                status["initContainerStatuses"] = Value::Array(
                    inits
                        .iter()
                        .map(|c| {
                            container_status(
                                &uid,
                                c,
                                CState::Waiting("PodInitializing", None),
                                false,
                                0,
                                None,
                            )
                        })
                        .collect(),
                );
            }
            let init_cond = if inits.is_empty() {
                init_cond_ok.clone()
            } else {
                Cond::new(
                    "Initialized",
                    "False",
                    "ContainersNotInitialized",
                    format!(
                        "containers with incomplete status: [{}]",
                        inits
                            .iter()
                            .map(|c| c.name.as_str())
                            .collect::<Vec<_>>()
                            .join(" ")
                    ),
                )
            };
            status["conditions"] = merge_conditions(
                cur.get("conditions"),
                &[
                    Cond::new("PodReadyToStartContainers", "False", "", ""),
                    init_cond,
                    Cond::new("Ready", "False", "ContainersNotReady", not_ready(&all)),
                    Cond::new("ContainersReady", "False", "ContainersNotReady", not_ready(&all)),
                    Cond::new("PodScheduled", "True", "", ""),
                ],
                &[],
                &now_s,
                false,
            );
        }
        Stage::Pending => {
            let pod_ip = if host_net {
                host_ip.clone()
            } else {
                allocate_ip(sim, ips, pod, node)
            };
            status["podIP"] = json!(pod_ip);
            status["podIPs"] = json!([{"ip": pod_ip}]);
            // Init containers run first, in order.
            for (i, c) in inits.iter().enumerate() {
                if out.failing_init.is_some_and(|(f, _)| f == i) || out.hanging_init.is_some_and(|h| i > h) {
                    break;
                }
                record_start(
                    sim,
                    &involved,
                    c,
                    node,
                    &format!("spec.initContainers{{{}}}", c.name),
                )
                .await;
            }
            if let Some(hi) = out.hanging_init {
                initializing(&mut status, &cur, &uid, &inits, &containers, hi, &now_s);
            } else if let Some((fi, code)) = out.failing_init {
                let mut statuses = init_done(&now_s);
                let c = &inits[fi];
                let fail_terminal = out.runs_to_completion || out.restart_never;
                statuses[fi] = if fail_terminal {
                    container_status(
                        &uid,
                        c,
                        CState::Terminated {
                            code,
                            started: &now_s,
                            finished: &now_s,
                        },
                        false,
                        0,
                        None,
                    )
                } else {
                    let last = json!({"terminated": {"exitCode": code, "reason": "Error", "startedAt": now_s, "finishedAt": now_s}});
                    container_status(
                        &uid,
                        c,
                        CState::Waiting(
                            "CrashLoopBackOff",
                            Some(format!(
                                "back-off 10s restarting failed container={} pod={name}",
                                c.name
                            )),
                        ),
                        false,
                        1,
                        Some(last),
                    )
                };
                for s in statuses.iter_mut().skip(fi + 1) {
                    *s = json!({"name": s["name"], "image": s["image"], "imageID": "", "ready": false, "restartCount": 0, "started": false, "state": {"waiting": {"reason": "PodInitializing"}}});
                }
                status["initContainerStatuses"] = Value::Array(statuses);
                status["containerStatuses"] = Value::Array(
                    containers
                        .iter()
                        .map(|c| {
                            container_status(
                                &uid,
                                c,
                                CState::Waiting("PodInitializing", None),
                                false,
                                0,
                                None,
                            )
                        })
                        .collect(),
                );
                status["phase"] = json!(if fail_terminal { "Failed" } else { "Pending" });
                let msg = format!("containers with incomplete status: [{}]", c.name);
                status["conditions"] = merge_conditions(
                    cur.get("conditions"),
                    &[
                        Cond::new("PodReadyToStartContainers", "True", "", ""),
                        Cond::new("Initialized", "False", "ContainersNotInitialized", msg),
                        Cond::new("Ready", "False", "ContainersNotReady", not_ready(&all)),
                        Cond::new("ContainersReady", "False", "ContainersNotReady", not_ready(&all)),
                        Cond::new("PodScheduled", "True", "", ""),
                    ],
                    &[],
                    &now_s,
                    false,
                );
                sim.event(
                    &involved,
                    "Warning",
                    "BackOff",
                    &format!(
                        "Back-off restarting failed container {} in pod {name}_{ns}({uid})",
                        c.name
                    ),
                    "kubelet",
                    Some(node),
                    Some(&format!("spec.initContainers{{{}}}", c.name)),
                )
                .await;
            } else {
                if !inits.is_empty() {
                    status["initContainerStatuses"] = Value::Array(init_done(&now_s));
                }
                for c in &containers {
                    record_start(sim, &involved, c, node, &format!("spec.containers{{{}}}", c.name)).await;
                }
                let any_fail = out.any_fail();
                if any_fail && (out.restart_never && !out.runs_to_completion) {
                    // A bare pod that is not restarted: it simply fails.
                    let codes: Vec<i32> = out.failing.iter().map(|e| e.unwrap_or(0)).collect();
                    status["containerStatuses"] = terminated_all(&uid, &containers, &codes, &now_s, &now_s);
                    status["phase"] = json!("Failed");
                    status["conditions"] = finished_conditions(&cur, &now_s);
                } else {
                    let failing_names: Vec<&Container> = containers
                        .iter()
                        .zip(&out.failing)
                        .filter(|(_, f)| f.is_some() && !out.runs_to_completion)
                        .map(|(c, _)| c)
                        .collect();
                    status["containerStatuses"] = Value::Array(
                        containers
                            .iter()
                            .zip(&out.failing)
                            .map(|(c, f)| {
                                if let (Some(code), false) = (f, out.runs_to_completion) {
                                    let last = json!({"terminated": {"exitCode": code, "reason": "Error", "startedAt": now_s, "finishedAt": now_s}});
                                    container_status(
                                        &uid,
                                        c,
                                        CState::Waiting(
                                            "CrashLoopBackOff",
                                            Some(format!("back-off 10s restarting failed container={} pod={name}", c.name)),
                                        ),
                                        false,
                                        1,
                                        Some(last),
                                    )
                                } else {
                                    container_status(&uid, c, CState::Running(&now_s), false, 0, None)
                                }
                            })
                            .collect(),
                    );
                    for c in &failing_names {
                        sim.event(
                            &involved,
                            "Warning",
                            "BackOff",
                            &format!(
                                "Back-off restarting failed container {} in pod {name}_{ns}({uid})",
                                c.name
                            ),
                            "kubelet",
                            Some(node),
                            Some(&format!("spec.containers{{{}}}", c.name)),
                        )
                        .await;
                    }
                    status["phase"] = json!("Running");
                    status["conditions"] = merge_conditions(
                        cur.get("conditions"),
                        &[
                            Cond::new("PodReadyToStartContainers", "True", "", ""),
                            init_cond_ok.clone(),
                            Cond::new("Ready", "False", "ContainersNotReady", not_ready(&all)),
                            Cond::new("ContainersReady", "False", "ContainersNotReady", not_ready(&all)),
                            Cond::new("PodScheduled", "True", "", ""),
                        ],
                        &[],
                        &now_s,
                        false,
                    );
                }
            }
        }
        Stage::Running => {
            status["phase"] = json!("Running");
            status["containerStatuses"] = Value::Array(
                containers
                    .iter()
                    .map(|c| container_status(&uid, c, CState::Running(&started_at), true, 0, None))
                    .collect(),
            );
            status["conditions"] = merge_conditions(
                cur.get("conditions"),
                &[
                    Cond::new("PodReadyToStartContainers", "True", "", ""),
                    init_cond_ok.clone(),
                    Cond::new("Ready", "True", "", ""),
                    Cond::new("ContainersReady", "True", "", ""),
                    Cond::new("PodScheduled", "True", "", ""),
                ],
                &[],
                &now_s,
                false,
            );
        }
        Stage::Ready => {
            let any_fail = out.any_fail();
            let codes: Vec<i32> = out.exits.iter().map(|e| e.unwrap_or(0)).collect();
            status["containerStatuses"] = terminated_all(&uid, &containers, &codes, &started_at, &now_s);
            status["phase"] = json!(if any_fail { "Failed" } else { "Succeeded" });
            status["conditions"] = finished_conditions(&cur, &now_s);
        }
        Stage::Done => return,
    }
    if merge_patch_changes(&cur, &status) {
        sim.merge(&ar::<Pod>(), Some(&ns), &name, true, json!({ "status": status }))
            .await;
    }
}

/// The status of a pod whose init container `hi` does not end: the ones before it completed,
/// it runs, the rest and the containers wait; the pod stays Pending and not initialized.
fn initializing(
    status: &mut Value,
    cur: &Value,
    uid: &str,
    inits: &[Container],
    containers: &[Container],
    hi: usize,
    now: &str,
) {
    let waiting =
        |c: &Container| container_status(uid, c, CState::Waiting("PodInitializing", None), false, 0, None);
    let done = |c: &Container| {
        let t = CState::Terminated {
            code: 0,
            started: now,
            finished: now,
        };
        container_status(uid, c, t, false, 0, None)
    };
    let statuses: Vec<Value> = inits
        .iter()
        .enumerate()
        .map(|(i, c)| match i.cmp(&hi) {
            std::cmp::Ordering::Less => done(c),
            std::cmp::Ordering::Equal => container_status(uid, c, CState::Running(now), false, 0, None),
            std::cmp::Ordering::Greater => waiting(c),
        })
        .collect();
    status["initContainerStatuses"] = Value::Array(statuses);
    status["containerStatuses"] = Value::Array(containers.iter().map(waiting).collect());
    status["phase"] = json!("Pending");
    let names = |list: &[Container]| list.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(" ");
    let not_ready = format!("containers with unready status: [{}]", names(containers));
    status["conditions"] = merge_conditions(
        cur.get("conditions"),
        &[
            Cond::new("PodReadyToStartContainers", "True", "", ""),
            Cond::new(
                "Initialized",
                "False",
                "ContainersNotInitialized",
                format!("containers with incomplete status: [{}]", inits[hi].name),
            ),
            Cond::new("Ready", "False", "ContainersNotReady", not_ready.clone()),
            Cond::new("ContainersReady", "False", "ContainersNotReady", not_ready),
            Cond::new("PodScheduled", "True", "", ""),
        ],
        &[],
        now,
        false,
    );
}

fn terminated_all(
    uid: &str,
    containers: &[Container],
    codes: &[i32],
    started: &str,
    finished: &str,
) -> Value {
    Value::Array(
        containers
            .iter()
            .zip(codes)
            .map(|(c, code)| {
                container_status(
                    uid,
                    c,
                    CState::Terminated {
                        code: *code,
                        started,
                        finished,
                    },
                    false,
                    0,
                    None,
                )
            })
            .collect(),
    )
}

fn finished_conditions(cur: &Value, now: &str) -> Value {
    merge_conditions(
        cur.get("conditions"),
        &[
            Cond::new("PodReadyToStartContainers", "False", "", ""),
            Cond::new("Initialized", "True", "", ""),
            Cond::new("Ready", "False", "PodCompleted", ""),
            Cond::new("ContainersReady", "False", "PodCompleted", ""),
            Cond::new("PodScheduled", "True", "", ""),
        ],
        &[],
        now,
        false,
    )
}

async fn record_start(sim: &mut Sim, involved: &InvolvedObject, c: &Container, node: &str, fp: &str) {
    let image = c.image.clone().unwrap_or_default();
    sim.event(
        involved,
        "Normal",
        "Pulled",
        &format!("Container image \"{image}\" already present on machine"),
        "kubelet",
        Some(node),
        Some(fp),
    )
    .await;
    sim.event(
        involved,
        "Normal",
        "Created",
        &format!("Created container: {}", c.name),
        "kubelet",
        Some(node),
        Some(fp),
    )
    .await;
    sim.event(
        involved,
        "Normal",
        "Started",
        &format!("Started container {}", c.name),
        "kubelet",
        Some(node),
        Some(fp),
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(image: &str, args: &[&str]) -> Container {
        Container {
            name: "c".into(),
            image: Some(image.into()),
            args: Some(args.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn failure_convention_is_a_whole_word() {
        assert!(container_fails(&c("busybox:fail", &[])));
        assert!(container_fails(&c("busybox", &["--mode=fail"])));
        assert!(container_fails(&c("busybox", &["sh", "-c", "echo x; FAIL"])));
        assert!(!container_fails(&c("busybox", &["--failover"])));
        assert!(!container_fails(&c("nginx:1.27", &[])));
    }

    #[test]
    fn image_ids() {
        assert!(image_id("nginx:1.27").starts_with("docker.io/library/nginx@sha256:"));
        assert!(image_id("localhost:5000/app").starts_with("localhost:5000/app@sha256:"));
        assert!(image_id("quay.io/x/y:v1").starts_with("quay.io/x/y@sha256:"));
    }
}
