//! One namespace of the fault cluster with the faulty package's Instance in it: the CLI and the
//! manager lives run against it, and what the Instance says is read here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

use super::manager::Manager;
use super::package;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-kudo");

/// The Instance every round works on.
pub const INSTANCE: &str = "f";

/// One test's namespace, package, HOME and manager logs.
pub struct Lab {
    pub kubeconfig: PathBuf,
    pub client: kube::Client,
    pub ns: String,
    pub home: tempfile::TempDir,
    /// Where every manager life's log goes.
    pub logs: PathBuf,
    /// Versions 0.1.0 and 0.2.0 of the package.
    pub packages: (PathBuf, PathBuf),
    lives: usize,
}

/// The fault cluster's kubeconfig (the fault stage's `$KUDO_FAULTS_KUBECONFIG`).
pub fn kubeconfig() -> PathBuf {
    std::env::var_os("KUDO_FAULTS_KUBECONFIG")
        .map(PathBuf::from)
        .expect("KUDO_FAULTS_KUBECONFIG: run by scripts/faults-stage.sh, which starts the cluster")
}

/// A kube-rs client of `kubeconfig`.
pub async fn client(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("read the kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kubeconfig");
    kube::Client::try_from(config).expect("client")
}

impl Lab {
    /// A new namespace `<prefix>-<hex>` on the fault cluster.
    pub async fn new(prefix: &str) -> Lab {
        let kubeconfig = kubeconfig();
        let client = client(&kubeconfig).await;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let ns = format!("{prefix}-{}", &id[..8]);
        let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        let body = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        nss.create(&PostParams::default(), &body)
            .await
            .expect("create the namespace");
        let home = tempfile::tempdir().unwrap();
        let logs = home.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let packages = package::write(home.path());
        Lab {
            kubeconfig,
            client,
            ns,
            home,
            logs,
            packages,
            lives: 0,
        }
    }

    /// `kubectl-kudo ARGS --kubeconfig … -n NS`, which must succeed.
    pub async fn kudo(&self, args: &[&str]) -> String {
        let out = tokio::process::Command::new(BIN)
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["-n", &self.ns])
            .env("HOME", self.home.path())
            .env_remove("KUBECONFIG")
            .output()
            .await
            .expect("run kubectl-kudo");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "kubectl-kudo {args:?}: {text}");
        text
    }

    /// Installs version 0.1.0 of the faulty package as the lab's Instance, with `-p` `params`;
    /// the CLI's output.
    pub async fn install(&self, params: &[&str]) -> String {
        let v1 = self.packages.0.to_str().unwrap().to_string();
        let mut args = vec!["install", v1.as_str(), "--instance", INSTANCE];
        for p in params {
            args.extend(["-p", p]);
        }
        self.kudo(&args).await
    }

    /// The Instance as stored; `None` once it is gone. Retried while the API server is away.
    pub async fn instance(&self) -> Option<Value> {
        let ar = kudo_kube::discovery::known_resource("kudo.dev", "Instance");
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &self.ns, &ar);
        for _ in 0..600 {
            match api.get_opt(INSTANCE).await {
                Ok(o) => return o.map(|o| serde_json::to_value(o).unwrap()),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        panic!("the Instance could not be read for a minute");
    }

    /// A new manager life on the lab's kubeconfig (or `via`, e.g. a proxy's) with `failpoint`.
    pub fn manager(&mut self, failpoint: Option<&str>, via: Option<&Path>) -> Manager {
        self.lives += 1;
        let log = self.logs.join(format!("life-{:04}.log", self.lives));
        let kubeconfig = via.unwrap_or(&self.kubeconfig);
        Manager::start(kubeconfig, &self.ns, self.home.path(), &log, failpoint)
    }

    /// Deletes the namespace (not waiting).
    pub async fn finish(&self) {
        let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let _ = nss.delete(&self.ns, &Default::default()).await;
    }
}
