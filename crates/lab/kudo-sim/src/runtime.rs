//! The simulated container runtime shared by the simulated kubelet (which starts containers) and
//! the API server's `pods/exec` and `pods/log` (which reach into them).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::Value;

use crate::shell::{self, Mount, PodFs, Run};

/// What happened when a pod's containers were started.
#[derive(Debug, Clone, Default)]
pub struct PodRuns {
    /// Per init container, in order; stops after the first one that fails.
    pub inits: Vec<Run>,
    /// Per container, in order; empty when an init container failed.
    pub containers: Vec<Run>,
}

#[derive(Debug, Default)]
struct PodState {
    fs: PodFs,
    runs: PodRuns,
    /// Container name → log.
    logs: HashMap<String, Vec<u8>>,
}

/// The in-memory filesystems and logs of the pods on the simulated nodes, by pod uid.
///
/// Cloning shares the state: give one clone to [`crate::SimConfig::runtime`] and another to the
/// API server ([`kudo_apiserver::RunningServer::set_pod_runtime`]) so `kubectl exec` and
/// `kubectl logs` see what the simulated containers did.
#[derive(Debug, Clone, Default)]
pub struct Runtime(Arc<Mutex<HashMap<String, PodState>>>);

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

/// The interpreter's view of a container: its emptyDir mounts, literal env and working dir.
fn view(pod: &Pod, c: &Container) -> shell::Container {
    let spec = pod.spec.as_ref();
    let empty_dirs: Vec<&str> = spec
        .and_then(|s| s.volumes.as_ref())
        .map(|v| {
            v.iter()
                .filter(|v| v.empty_dir.is_some())
                .map(|v| v.name.as_str())
                .collect()
        })
        .unwrap_or_default();
    let mounts = c
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| empty_dirs.contains(&m.name.as_str()))
        .map(|m| Mount {
            path: {
                let p = m.mount_path.trim_end_matches('/');
                if p.is_empty() {
                    "/".to_string()
                } else {
                    p.to_string()
                }
            },
            volume: m.name.clone(),
        })
        .collect();
    let env: BTreeMap<String, String> = c
        .env
        .iter()
        .flatten()
        .filter_map(|e| e.value.clone().map(|v| (e.name.clone(), v)))
        .collect();
    shell::Container {
        name: c.name.clone(),
        mounts,
        env,
        workdir: c.working_dir.clone().unwrap_or_default(),
    }
}

/// A container's command line: `command` followed by `args`.
pub fn command_line(c: &Container) -> Vec<String> {
    c.command
        .iter()
        .flatten()
        .chain(c.args.iter().flatten())
        .cloned()
        .collect()
}

impl Runtime {
    /// A runtime with no pods.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, PodState>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the pod's containers once (init containers in order, then the others) and returns
    /// what they did; later calls return the same result. `fails` says whether a container
    /// follows the failure convention (exit code 1 whatever its command).
    pub fn start_pod(&self, pod: &Pod, fails: impl Fn(&Container) -> bool) -> PodRuns {
        let id = uid(pod);
        let mut all = self.lock();
        if let Some(p) = all.get(&id) {
            return p.runs.clone();
        }
        let mut st = PodState::default();
        let spec = pod.spec.clone().unwrap_or_default();
        let mut init_ok = true;
        for c in spec.init_containers.iter().flatten() {
            let mut r = shell::run(&mut st.fs, &view(pod, c), &command_line(c), b"");
            if fails(c) {
                r.exit = Some(1);
            }
            st.logs.insert(c.name.clone(), r.log.clone());
            let failed = matches!(r.exit, Some(n) if n != 0);
            st.runs.inits.push(r);
            if failed {
                init_ok = false;
                break;
            }
        }
        if init_ok {
            for c in &spec.containers {
                let mut r = shell::run(&mut st.fs, &view(pod, c), &command_line(c), b"");
                if fails(c) {
                    r.exit = Some(1);
                }
                st.logs.insert(c.name.clone(), r.log.clone());
                st.runs.containers.push(r);
            }
        }
        let runs = st.runs.clone();
        all.insert(id, st);
        runs
    }

    /// Forgets every pod whose uid is not in `live`.
    pub fn retain(&self, live: &std::collections::HashSet<String>) {
        self.lock().retain(|k, _| live.contains(k));
    }

    /// Runs `argv` in a started container, as `kubectl exec` does. Programs that are not
    /// simulated exit 127 with a message on stderr.
    pub fn exec(&self, pod: &Pod, container: &str, argv: &[String], stdin: &[u8]) -> Result<Run, ExecError> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        let c = spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == container)
            .ok_or_else(|| ExecError::NoContainer(container.to_string(), name.clone()))?;
        let mut all = self.lock();
        let st = all.get_mut(&uid(pod)).ok_or_else(|| ExecError::NotStarted {
            pod: name.clone(),
            container: container.to_string(),
        })?;
        let mut r = shell::run(&mut st.fs, &view(pod, c), argv, stdin);
        if r.exit.is_none() {
            let what = r.not_simulated.clone().unwrap_or_default();
            let msg = format!(
                "kudo-sim: {what}: not simulated (simulated containers run only the shell subset documented in kudo-sim; see docs/cli.md)\n"
            );
            r.stderr.extend_from_slice(msg.as_bytes());
            r.exit = Some(127);
        }
        Ok(r)
    }

    /// The log of a container, if the pod was started here.
    pub fn logs(&self, pod_uid: &str, container: &str) -> Option<Vec<u8>> {
        self.lock()
            .get(pod_uid)
            .map(|p| p.logs.get(container).cloned().unwrap_or_default())
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
