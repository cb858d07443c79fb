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
