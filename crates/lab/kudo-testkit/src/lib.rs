//! Test support shared by the integration tests of several crates.
//!
//! [`real_cluster`] reaches the real Kubernetes control plane of `../shared/real-cluster`
//! (kube-apiserver + kube-controller-manager v1.28.7, etcd, a fake kubelet). Behaviour that depends
//! on the API server is checked there as well as on the embedded cluster: where they differ, the
//! real one is right.
//!
//! [`registry`] starts the CNCF distribution registry (Debian's `docker-registry`) on loopback
//! with htpasswd auth or the token flow (a token service of the test's), and TLS from a CA made
//! for the test.

/// The real Kubernetes control plane of `../shared/real-cluster`: where its kubeconfig is, and
/// helpers for tests that run on it.
pub mod real_cluster {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::sync::OnceLock;

    /// Set by `scripts/real-cluster-stage.sh` (which `.ci/run` runs) to the kubeconfig of the
    /// cluster it started, so test binaries do not each call `start.sh`.
    pub const KUBECONFIG_ENV: &str = "KUDO_REAL_CLUSTER_KUBECONFIG";

    /// Set by `scripts/real-cluster-stage.sh` to the log file of the one cluster-wide manager it
    /// runs: what the manager did shows there even after a test's namespace and Events are gone.
    pub const MANAGER_LOG_ENV: &str = "KUDO_REAL_CLUSTER_MANAGER_LOG";

    /// The stage manager's log file, when the stage runs (see [`MANAGER_LOG_ENV`]).
    pub fn manager_log() -> Option<PathBuf> {
        std::env::var_os(MANAGER_LOG_ENV)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    }

    /// The workspace root (this crate lives in `<root>/crates/lab/kudo-testkit`).
    pub fn workspace_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../..")
            .canonicalize()
            .expect("workspace root")
    }

    /// The kit's directory, `<root>/../shared/real-cluster`.
    pub fn kit_dir() -> PathBuf {
        workspace_root().join("../shared/real-cluster")
    }

    /// The kubeconfig of the real control plane: `$KUDO_REAL_CLUSTER_KUBECONFIG` when set, else
    /// the cluster whose state lives in `<root>/target/real-cluster`, started (or reused, in under a
    /// second) with the kit's `start.sh`. The cluster keeps running after the tests; `.ci/run` stops
    /// it, locally `../shared/real-cluster/stop.sh` from the workspace root does.
    ///
    /// Panics when the kit is missing: CI always has `../shared` beside the checkout, and a test
    /// that silently skips proves nothing.
    pub fn kubeconfig() -> PathBuf {
        static PATH: OnceLock<PathBuf> = OnceLock::new();
        PATH.get_or_init(|| {
            if let Some(p) = std::env::var_os(KUBECONFIG_ENV).filter(|p| !p.is_empty()) {
                return PathBuf::from(p);
            }
            let start = kit_dir().join("start.sh");
            assert!(
                start.exists(),
                "the real control plane kit is missing: expected {} (../shared beside the checkout)",
                start.display()
            );
            let root = workspace_root();
            let out = Command::new("bash")
                .arg(&start)
                .current_dir(&root)
                .env("REAL_CLUSTER_DIR", root.join("target/real-cluster"))
                .stderr(Stdio::inherit())
                .output()
                .expect("run ../shared/real-cluster/start.sh");
            assert!(
                out.status.success(),
                "the real control plane did not come up (see its output above)"
            );
            let stdout = String::from_utf8_lossy(&out.stdout);
            let last = stdout.lines().last().unwrap_or_default();
            PathBuf::from(
                last.strip_prefix("export KUBECONFIG=")
                    .unwrap_or_else(|| panic!("start.sh printed no kubeconfig line: {stdout}")),
            )
        })
        .clone()
    }

    /// A kube-rs client for the real control plane.
    pub async fn client() -> kube::Client {
        let path = kubeconfig();
        let kc = kube::config::Kubeconfig::read_from(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .expect("kubeconfig of the real cluster");
        kube::Client::try_from(config).expect("client for the real cluster")
    }

    /// A namespace name of the test's own (`<prefix>-<8 hex>`): tests share the cluster and must
    /// not assume it is empty.
    pub fn unique_namespace(prefix: &str) -> String {
        let id = uuid::Uuid::new_v4().simple().to_string();
        format!("{prefix}-{}", &id[..8])
    }
}

pub mod registry;

/// kstatus' verdict on a custom resource, for tests that read the manager's statuses as Flux
/// (`wait`, `healthChecks`), Helm 4 (`--wait`), kpt and Config Sync read them.
///
/// The rules of sigs.k8s.io/cli-utils `pkg/kstatus/status` (`checkGenericProperties`, and
/// `checkGeneration` in `generic.go`, current release), implemented here so that the tests judge
/// with the consumer's rules rather than with ours, in kstatus' order:
/// 1. `metadata.deletionTimestamp` set → `Terminating`;
/// 2. `status.observedGeneration` present and ≠ `metadata.generation` → `InProgress` (absent:
///    the check is skipped);
/// 3. a condition `Reconciling` with status `True` → `InProgress`;
/// 4. a condition `Stalled` with status `True` → `Failed`;
/// 5. a `Ready` condition: `True` → `Current`, `False`/`Unknown` → `InProgress`;
/// 6. otherwise `Current` (a custom resource kstatus knows nothing more about).
pub mod kstatus {
    use serde_json::Value;

    /// kstatus' status of a resource.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Status {
        /// `metadata.deletionTimestamp` is set.
        Terminating,
        /// Not yet reconciled: generation not observed, `Reconciling`, or `Ready` not `True`.
        InProgress,
        /// A `Stalled` condition is `True`.
        Failed,
        /// Reconciled: `Ready` is `True`, or nothing says otherwise.
        Current,
    }

    /// The verdict on `obj` (JSON as the API server returns it).
    pub fn compute(obj: &Value) -> Status {
        if obj
            .pointer("/metadata/deletionTimestamp")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty())
        {
            return Status::Terminating;
        }
        let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64);
        if let Some(observed) = obj.pointer("/status/observedGeneration").and_then(Value::as_i64)
            && Some(observed) != generation
        {
            return Status::InProgress;
        }
        let conditions = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let is_true = |t: &str| conditions.iter().any(|c| c["type"] == t && c["status"] == "True");
        if is_true("Reconciling") {
            return Status::InProgress;
        }
        if is_true("Stalled") {
            return Status::Failed;
        }
        match conditions.iter().find(|c| c["type"] == "Ready") {
            Some(c) if c["status"] == "True" => Status::Current,
            Some(_) => Status::InProgress,
            None => Status::Current,
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use serde_json::json;

        #[test]
        fn the_rules_in_kstatus_order() {
            let obj = |meta: Value, status: Value| json!({"metadata": meta, "status": status});
            let cond = |t: &str, s: &str| json!({"type": t, "status": s});
            let cases = [
                (
                    obj(
                        json!({"generation": 2, "deletionTimestamp": "2026-01-01T00:00:00Z"}),
                        json!({}),
                    ),
                    Status::Terminating,
                ),
                (
                    obj(
                        json!({"generation": 2}),
                        json!({"observedGeneration": 1, "conditions": [cond("Ready", "True")]}),
                    ),
                    Status::InProgress,
                ),
                (
                    obj(
                        json!({"generation": 2}),
                        json!({"conditions": [cond("Ready", "True")]}),
                    ),
                    Status::Current,
                ),
                (
                    obj(
                        json!({"generation": 2}),
                        json!({"observedGeneration": 2, "conditions": [cond("Reconciling", "True"), cond("Stalled", "True")]}),
                    ),
                    Status::InProgress,
                ),
                (
                    obj(
                        json!({"generation": 2}),
                        json!({"observedGeneration": 2, "conditions": [cond("Stalled", "True"), cond("Ready", "True")]}),
                    ),
                    Status::Failed,
                ),
                (
                    obj(
                        json!({"generation": 2}),
                        json!({"conditions": [cond("Ready", "Unknown")]}),
                    ),
                    Status::InProgress,
                ),
                (
                    obj(
                        json!({"generation": 2}),
                        json!({"conditions": [cond("Ready", "False")]}),
                    ),
                    Status::InProgress,
                ),
                (obj(json!({"generation": 2}), json!({})), Status::Current),
            ];
            for (o, want) in cases {
                assert_eq!(compute(&o), want, "{o}");
            }
        }
    }
}
