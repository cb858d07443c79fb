//! The simulated container runtime shared by the simulated kubelet (which starts containers) and
//! the API server's `pods/exec` and `pods/log` (which reach into them).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::Value;

use crate::network::{ClusterView, PodNetwork};
use crate::shell::{self, Mount, PodFs, Run, Server, Tree};

/// What happened when a pod's containers were started.
#[derive(Debug, Clone, Default)]
pub struct PodRuns {
    /// Per init container, in order; stops after the first one that fails or does not end.
    pub inits: Vec<Run>,
    /// Per container, in order; empty when an init container failed or does not end.
    pub containers: Vec<Run>,
}

#[derive(Debug, Default)]
struct PodState {
    fs: PodFs,
    runs: PodRuns,
    /// Container name → log.
    logs: HashMap<String, Vec<u8>>,
}

#[derive(Debug, Default)]
struct Inner {
    pods: HashMap<String, PodState>,
    /// The stand-ins running in each pod, by pod uid.
    servers: HashMap<String, Vec<Server>>,
    /// The data of PersistentVolumeClaims, by `namespace/claim`.
    claims: HashMap<String, Tree>,
    view: Arc<ClusterView>,
    /// The simulator's clock at its last pass, in ms since the epoch.
    now_ms: i64,
}

/// The in-memory filesystems, logs and stand-in servers of the pods on the simulated nodes.
///
/// Cloning shares the state: give one clone to [`crate::SimConfig::runtime`] and another to the
/// API server ([`kudo_apiserver::RunningServer::set_pod_runtime`]) so `kubectl exec` and
/// `kubectl logs` see what the simulated containers did.
#[derive(Debug, Clone, Default)]
pub struct Runtime(Arc<Mutex<Inner>>);

/// The stand-in behind an address ([`Runtime::backend`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// `namespace/pod`.
    pub pod: String,
    /// What it stands in for.
    pub server: String,
    /// How the stand-in answers connections.
    pub protocol: shell::Protocol,
}

/// Why an exec could not start.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExecError {
    /// The pod's containers were never started by this runtime.
    #[error("container {container:?} in pod {pod:?} is not running on a simulated node")]
    NotStarted {
        /// Pod name.
        pod: String,
        /// Container name.
        container: String,
    },
    /// No container of that name.
    #[error("container {0} is not valid for pod {1}")]
    NoContainer(String, String),
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// Whether a pod's regular containers are meant to keep running: their pod restarts them
/// (`restartPolicy: Always`) and is not a Job's.
pub fn long_running(pod: &Pod) -> bool {
    let always = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
        == "Always";
    always && crate::util::controller_kind(&pod.metadata) != Some("Job")
}

/// The value of a `valueFrom.fieldRef` the simulated kubelet knows.
fn field_ref(pod: &Pod, path: &str) -> Option<String> {
    let m = &pod.metadata;
    let st = pod.status.as_ref();
    match path {
        "metadata.name" => m.name.clone(),
        "metadata.namespace" => m.namespace.clone(),
        "metadata.uid" => m.uid.clone(),
        "spec.nodeName" => pod.spec.as_ref()?.node_name.clone(),
        "spec.serviceAccountName" => pod.spec.as_ref()?.service_account_name.clone(),
        "status.podIP" => st?.pod_ip.clone(),
        "status.hostIP" => st?.host_ip.clone(),
        _ => None,
    }
}

/// The pod's volume mounts as the interpreter sees them.
fn mounts(pod: &Pod, c: &Container) -> Vec<Mount> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    c.volume_mounts
        .iter()
        .flatten()
        .map(|m| {
            let v = volumes.and_then(|vs| vs.iter().find(|v| v.name == m.name));
            let source = v.map(volume_source).unwrap_or("volume");
            let path = shell::normalize_path(&m.mount_path);
            Mount {
                path,
                volume: m.name.clone(),
                read_only: m.read_only == Some(true)
                    || matches!(source, "configMap" | "secret" | "downwardAPI" | "projected"),
                source: source.to_string(),
                sub_path: m.sub_path.clone().unwrap_or_default(),
            }
        })
        .collect()
}

fn volume_source(v: &k8s_openapi::api::core::v1::Volume) -> &'static str {
    if v.empty_dir.is_some() {
        "emptyDir"
    } else if v.persistent_volume_claim.is_some() {
        "persistentVolumeClaim"
    } else if v.config_map.is_some() {
        "configMap"
    } else if v.secret.is_some() {
        "secret"
    } else if v.projected.is_some() {
        "projected"
    } else if v.downward_api.is_some() {
        "downwardAPI"
    } else if v.host_path.is_some() {
        "hostPath"
    } else {
        "volume"
    }
}

/// The interpreter's view of a container of `pod` (its mounts, literal environment, ports, host
/// name), as the simulated kubelet starts it at `started_ms`.
pub fn view(pod: &Pod, c: &Container, long_running: bool, started_ms: i64) -> shell::Container {
    let env: BTreeMap<String, String> = c
        .env
        .iter()
        .flatten()
        .filter_map(|e| {
            let v = e.value.clone().or_else(|| {
                let r = e.value_from.as_ref()?.field_ref.as_ref()?;
                field_ref(pod, &r.field_path)
            })?;
            Some((e.name.clone(), v))
        })
        .collect();
    let spec = pod.spec.as_ref();
    shell::Container {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        mounts: mounts(pod, c),
        env,
        workdir: c.working_dir.clone().unwrap_or_default(),
        hostname: spec
            .and_then(|s| s.hostname.clone())
            .or_else(|| pod.metadata.name.clone())
            .unwrap_or_default(),
        subdomain: spec.and_then(|s| s.subdomain.clone()).unwrap_or_default(),
        ip: pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default(),
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        pod: pod.metadata.name.clone().unwrap_or_default(),
        ports: c
            .ports
            .iter()
            .flatten()
            .filter_map(|p| u16::try_from(p.container_port).ok())
            .collect(),
        long_running,
        started_ms,
    }
}

/// What a container's process runs (see [`shell::process_argv`]): `command` followed by `args`,
/// or the image's entrypoint (empty).
pub fn command_line(c: &Container) -> Vec<String> {
    let image = c.image.as_deref().unwrap_or_default();
    shell::process_argv(
        image,
        c.command.as_deref().unwrap_or_default(),
        c.args.as_deref().unwrap_or_default(),
    )
}

/// `namespace/claim` of the pod's PersistentVolumeClaim volumes, by volume name.
fn claims_of(pod: &Pod) -> Vec<(String, String)> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| {
            Some((
                v.name.clone(),
                format!("{ns}/{}", v.persistent_volume_claim.as_ref()?.claim_name),
            ))
        })
        .collect()
}

impl Inner {
    /// Runs one container of a pod being started (`st` is not in `pods` yet).
    fn run(
        &mut self,
        st: &mut PodState,
        pod: &Pod,
        c: &shell::Container,
        argv: &[String],
        stdin: &[u8],
    ) -> Run {
        let uid = uid(pod);
        let ip = c.ip.clone();
        let view = self.view.clone();
        let mut net = PodNetwork {
            view: &view,
            servers: &mut self.servers,
            own: &uid,
            own_ip: &ip,
        };
        shell::run(&mut st.fs, c, &mut net, argv, stdin)
    }

    fn load_claims(&self, pod: &Pod, fs: &mut PodFs) {
        for (vol, key) in claims_of(pod) {
            fs.volumes
                .insert(vol, self.claims.get(&key).cloned().unwrap_or_default());
        }
    }

    fn save_claims(&mut self, pod: &Pod, fs: &PodFs) {
        for (vol, key) in claims_of(pod) {
            if let Some(t) = fs.volumes.get(&vol) {
                self.claims.insert(key, t.clone());
            }
        }
    }
}

impl Runtime {
    /// A runtime with no pods.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The objects the simulated network is made of from now on (see [`crate::network`]), and
    /// the simulator's clock.
    pub fn set_view(&self, view: ClusterView, now_ms: i64) {
        let mut inner = self.lock();
        inner.view = Arc::new(view);
        inner.now_ms = now_ms;
    }

    /// Starts the pod's containers once (init containers in order, then the others) at
    /// `now_ms`, and returns what they did; later calls return the same result. `fails` says
    /// whether a container follows the failure convention (exit code 1 whatever its command).
    /// `files` holds the trees of the pod's ConfigMap, Secret and projected volumes, by volume.
    pub fn start_pod(
        &self,
        pod: &Pod,
        now_ms: i64,
        files: HashMap<String, Tree>,
        fails: impl Fn(&Container) -> bool,
    ) -> PodRuns {
        let id = uid(pod);
        let mut inner = self.lock();
        if let Some(p) = inner.pods.get(&id) {
            return p.runs.clone();
        }
        let mut st = PodState::default();
        st.fs.volumes.extend(files);
        inner.load_claims(pod, &mut st.fs);
        let spec = pod.spec.clone().unwrap_or_default();
        let mut init_ok = true;
        for c in spec.init_containers.iter().flatten() {
            let always = c.restart_policy.as_deref() == Some("Always");
            let v = view(pod, c, always, now_ms);
            let mut r = inner.run(&mut st, pod, &v, &command_line(c), b"");
            if fails(c) {
                r.exit = Some(1);
                r.running = None;
            }
            st.logs.insert(c.name.clone(), r.log.clone());
            let ends_well = r.exit == Some(0) || (always && r.exit.is_none());
            st.runs.inits.push(r);
            if !ends_well {
                init_ok = false;
                break;
            }
        }
        if init_ok {
            let long = long_running(pod);
            for c in &spec.containers {
                let v = view(pod, c, long, now_ms);
                let mut r = inner.run(&mut st, pod, &v, &command_line(c), b"");
                if fails(c) {
                    r.exit = Some(1);
                    r.running = None;
                }
                if let Some(s) = r.serving() {
                    inner
                        .servers
                        .entry(id.clone())
                        .or_default()
                        .push(Server::new(s.clone(), &v));
                }
                st.logs.insert(c.name.clone(), r.log.clone());
                st.runs.containers.push(r);
            }
        }
        inner.save_claims(pod, &st.fs);
        let runs = st.runs.clone();
        inner.pods.insert(id, st);
        runs
    }

    /// Forgets every pod whose uid is not in `live`, and the data of claims not in `claims`
    /// (`namespace/name`).
    pub fn retain(
        &self,
        live: &std::collections::HashSet<String>,
        claims: &std::collections::HashSet<String>,
    ) {
        let mut inner = self.lock();
        inner.pods.retain(|k, _| live.contains(k));
        inner.servers.retain(|k, _| live.contains(k));
        inner.claims.retain(|k, _| claims.contains(k));
    }

    /// Runs `argv` in a started container, as `kubectl exec` does.
    pub fn exec(&self, pod: &Pod, container: &str, argv: &[String], stdin: &[u8]) -> Result<Run, ExecError> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        let c = spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == container)
            .ok_or_else(|| ExecError::NoContainer(container.to_string(), name.clone()))?;
        let id = uid(pod);
        let mut inner = self.lock();
        let mut st = inner.pods.remove(&id).ok_or_else(|| ExecError::NotStarted {
            pod: name.clone(),
            container: container.to_string(),
        })?;
        inner.load_claims(pod, &mut st.fs);
        let v = view(pod, c, false, inner.now_ms);
        let mut r = inner.run(&mut st, pod, &v, argv, stdin);
        inner.save_claims(pod, &st.fs);
        inner.pods.insert(id, st);
        if let Some(running) = r.running.take() {
            let what = match running {
                shell::Running::Serving(s) => format!("{} ({}) runs until stopped", s.program, s.server),
                shell::Running::Waiting(why) => why,
            };
            let msg =
                format!("kudo-sim: not simulated: {what}; an exec session ends when its command does\n");
            r.stderr.extend_from_slice(msg.as_bytes());
            r.exit = Some(127);
        }
        Ok(r)
    }

    /// The log of a container, if the pod was started here.
    pub fn logs(&self, pod_uid: &str, container: &str) -> Option<Vec<u8>> {
        self.lock()
            .pods
            .get(pod_uid)
            .map(|p| p.logs.get(container).cloned().unwrap_or_default())
    }

    /// The stand-in a connection to `ip:port` (a Service's ClusterIP, or a pod's IP) reaches.
    pub fn backend(&self, ip: &str, port: u16) -> Option<Backend> {
        let inner = self.lock();
        let (uid, port) = inner.view.route(ip, port)?;
        let s = inner
            .servers
            .get(&uid)?
            .iter()
            .find(|s| s.standin.ports.contains(&port))?;
        Some(Backend {
            pod: s.pod.clone(),
            server: s.standin.server.to_string(),
            protocol: s.standin.protocol,
        })
    }
}

impl kudo_apiserver::PodRuntime for Runtime {
    fn exec(
        &self,
        pod: &Value,
        container: &str,
        command: &[String],
        stdin: &[u8],
    ) -> Result<kudo_apiserver::ExecOutput, String> {
        let pod: Pod = serde_json::from_value(pod.clone()).map_err(|e| e.to_string())?;
        let r = Runtime::exec(self, &pod, container, command, stdin).map_err(|e| e.to_string())?;
        Ok(kudo_apiserver::ExecOutput {
            stdout: r.stdout,
            stderr: r.stderr,
            exit_code: r.exit.unwrap_or(127),
        })
    }

    fn logs(&self, pod: &Value, container: &str) -> Option<Vec<u8>> {
        let uid = pod.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
        Runtime::logs(self, uid, container)
    }
}
