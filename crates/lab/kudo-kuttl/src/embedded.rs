//! The cluster started for `startControlPlane` / `startKIND`: our in-process API server, the
//! simulated kubelet and workload controllers (so Deployments become ready without containers),
//! KUDO's CRDs and the KUDO controller — i.e. a complete KUDO cluster in one process, which is
//! what KUDO's own kuttl suites got from envtest + the manager or from KIND + `kudo init`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Error;
use crate::k8s::Cluster;

/// What to run next to the API server.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// Run the simulated nodes/kubelet/workload controllers.
    pub simulator: bool,
    /// Install KUDO's CRDs and run the KUDO controller.
    pub kudo: bool,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions {
            simulator: true,
            kudo: true,
        }
    }
}

/// A running embedded cluster; [`EmbeddedCluster::shutdown`] stops everything.
#[derive(Debug)]
pub struct EmbeddedCluster {
    server: kudo_apiserver::RunningServer,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    sim: Option<kudo_sim::SimHandle>,
    controller: Option<(tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
}

impl EmbeddedCluster {
    /// Starts the server on an ephemeral loopback port, writes its kubeconfig to a temporary
    /// directory and starts the requested components.
    pub async fn start(opts: EmbeddedOptions) -> Result<EmbeddedCluster, Error> {
        let server = kudo_apiserver::ApiServer::start(kudo_apiserver::Config::default())
            .await
            .map_err(|e| Error::Cluster(format!("cannot start the embedded API server: {e}")))?;
        let dir = tempfile::Builder::new()
            .prefix("kudo-kuttl-")
            .tempdir()
            .map_err(|source| Error::Io {
                path: std::env::temp_dir(),
                source,
            })?;
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).map_err(|source| Error::Io {
            path: kubeconfig.clone(),
            source,
        })?;
        let cluster = Cluster::connect(Some(&kubeconfig)).await?;
        let client = cluster.client().clone();
        let mut me = EmbeddedCluster {
            server,
            _dir: dir,
            kubeconfig,
            sim: None,
            controller: None,
        };
        if opts.simulator {
            let sim = kudo_sim::SimConfig::default();
            me.server
                .set_pod_runtime(std::sync::Arc::new(sim.runtime.clone()));
            me.sim = Some(kudo_sim::spawn(client.clone(), sim));
        }
        if opts.kudo {
            install_kudo_crds(&cluster).await?;
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(async move {
                let r =
                    kudo_controller::run(client, kudo_controller::ControllerConfig::default(), async move {
                        let _ = rx.await;
                    })
                    .await;
                if let Err(e) = r {
                    tracing::error!("KUDO controller stopped: {e}");
                }
            });
            me.controller = Some((tx, task));
        }
        Ok(me)
    }

    /// Path of the kubeconfig pointing at the server.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Stops the controller, the simulator and the server, in that order.
    pub async fn shutdown(mut self) {
        if let Some((tx, task)) = self.controller.take() {
            let _ = tx.send(());
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
        if let Some(sim) = self.sim.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), sim.shutdown()).await;
        }
        self.server.shutdown().await;
    }
}

/// Installs KUDO's three CRDs (shared with the manager) and waits until the server serves their
/// kinds.
async fn install_kudo_crds(cluster: &Cluster) -> Result<(), Error> {
    kudo_controller::install_crds(cluster.client(), "kubectl-kudo-test", Duration::from_secs(30))
        .await
        .map_err(|e| Error::Cluster(e.to_string()))?;
    wait_for_kinds(
        cluster,
        &[
            ("kudo.dev/v1beta1", "Operator"),
            ("kudo.dev/v1beta1", "OperatorVersion"),
            ("kudo.dev/v1beta1", "Instance"),
        ],
        Duration::from_secs(30),
    )
    .await
}

/// Polls discovery until every kind is served (CRDs become available asynchronously).
pub async fn wait_for_kinds(
    cluster: &Cluster,
    kinds: &[(&str, &str)],
    timeout: Duration,
) -> Result<(), Error> {
    let deadline = Instant::now() + timeout;
    for (api_version, kind) in kinds {
        loop {
            match cluster.resolve(api_version, kind).await {
                Ok(_) => break,
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
    Ok(())
}
