//! Connecting to a cluster the way `kubectl` does, and typed access to the `kudo.dev` objects.
//!
//! KUDO objects are read and written as `DynamicObject`s and converted with serde to the
//! `kudo-api` structs: that keeps `kudo-api` free of a Kubernetes client dependency.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use clap::Args;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Flags shared by every command that talks to a cluster (KUDO's global flags).
#[derive(Args, Debug, Clone, Default)]
pub struct ClusterOpts {
    /// Path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config; for `dev`, where to
    /// write the embedded cluster's kubeconfig).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace (default: the kubeconfig context's namespace, else "default").
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Seconds to wait for one API request before giving up (0 = no limit).
    #[arg(long, global = true, default_value_t = 0, value_name = "SECONDS")]
    pub request_timeout: u64,
    /// KUDO home directory for local settings such as repositories.
    #[arg(long, global = true, env = "KUDO_HOME", value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Accepted for KUDO scripts (KUDO checked that its CRDs are served before each command):
    /// kudo-rs commands name a missing CRD in their own error, with or without it.
    #[arg(long, global = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub validate_install: Option<bool>,
}

impl ClusterOpts {
    /// `$KUDO_HOME`, else `~/.kudo`.
    pub fn home_dir(&self) -> PathBuf {
        self.home.clone().unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."))
                .join(".kudo")
        })
    }
}

/// A connected client and the namespace commands act in.
pub struct Cluster {
    pub client: Client,
    pub namespace: String,
}

/// Field manager of the CLI's writes (other than `init`'s server-side apply, which has its own).
pub const FIELD_MANAGER: &str = "kubectl-kudo";

/// The CLI's User-Agent: `kubectl-kudo/<version>`.
pub const USER_AGENT: &str = concat!("kubectl-kudo/", env!("CARGO_PKG_VERSION"));

/// Builds a client from `--kubeconfig` (a path list like `$KUBECONFIG` is accepted; the first file
/// wins) or kube's usual inference.
pub async fn connect(opts: &ClusterOpts) -> Result<Cluster> {
    let mut config = match &opts.kubeconfig {
        Some(path) => {
            let first = std::env::split_paths(path).next().unwrap_or_else(|| path.clone());
            let kc = Kubeconfig::read_from(&first)
                .with_context(|| format!("cannot read kubeconfig {}", first.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("invalid kubeconfig {}", first.display()))?
        }
        None => Config::infer().await.context(
            "no cluster configured: pass --kubeconfig, set KUBECONFIG, or start one with `kubectl kudo dev`",
        )?,
    };
    // Named in the API server's audit log and, for non-apply writes without an explicit field
    // manager, in managedFields (issue 14, bug 7: objects showed manager `unknown`).
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    if opts.request_timeout > 0 {
        let t = Duration::from_secs(opts.request_timeout);
        config.read_timeout = Some(t);
        config.write_timeout = Some(t);
        config.connect_timeout = Some(t);
    }
    let namespace = opts
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).context("cannot build a Kubernetes client")?;
    Ok(Cluster { client, namespace })
}

/// The three KUDO kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KudoKind {
    Operator,
    OperatorVersion,
    Instance,
}

impl KudoKind {
    pub fn kind(self) -> &'static str {
        match self {
            KudoKind::Operator => "Operator",
            KudoKind::OperatorVersion => "OperatorVersion",
            KudoKind::Instance => "Instance",
        }
    }
    pub fn plural(self) -> &'static str {
        kudo_api::kinds::known(kudo_api::GROUP, self.kind()).plural
    }
    /// `operator.kudo.dev/v1beta1/NAME`, the prefix KUDO's CLI printed.
    pub fn display(self, name: &str) -> String {
        format!("{}.{}/{name}", self.kind().to_lowercase(), kudo_api::API_VERSION)
    }
    pub fn resource(self) -> ApiResource {
        kudo_controller::known_resource(kudo_api::GROUP, self.kind())
    }
}

impl Cluster {
    pub fn api(&self, kind: KudoKind) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &kind.resource())
    }

    /// GET and convert; `Ok(None)` on 404.
    pub async fn get<T: DeserializeOwned>(&self, kind: KudoKind, name: &str) -> Result<Option<T>> {
        match self
            .api(kind)
            .get_opt(name)
            .await
            .map_err(|e| api_error(e, kind, name))?
        {
            None => Ok(None),
            Some(obj) => Ok(Some(from_dynamic(obj)?)),
        }
    }

    pub async fn list<T: DeserializeOwned>(&self, kind: KudoKind) -> Result<Vec<T>> {
        let list = self
            .api(kind)
            .list(&Default::default())
            .await
            .map_err(|e| api_error(e, kind, ""))?;
        list.items.into_iter().map(from_dynamic).collect()
    }

    pub async fn create<T: Serialize>(&self, kind: KudoKind, obj: &T) -> Result<()> {
        let dynobj: DynamicObject = serde_json::from_value(serde_json::to_value(obj)?)?;
        let name = dynobj.metadata.name.clone().unwrap_or_default();
        self.api(kind)
            .create(
                &PostParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                },
                &dynobj,
            )
            .await
            .map_err(|e| api_error(e, kind, &name))?;
        Ok(())
    }

    /// The Instance `name`, or an error naming it when it does not exist (KUDO's wording).
    pub async fn instance(&self, name: &str) -> Result<kudo_api::Instance> {
        self.get::<kudo_api::Instance>(KudoKind::Instance, name)
            .await?
            .with_context(|| format!("Instance {}/{name} does not exist", self.namespace))
    }

    /// The OperatorVersion `instance` runs, or an error naming both when it is missing.
    pub async fn operator_version_of(
        &self,
        instance: &kudo_api::Instance,
    ) -> Result<kudo_api::OperatorVersion> {
        let ns = instance
            .spec
            .operator_version_namespace(instance.metadata.namespace.as_deref().unwrap_or(&self.namespace));
        let name = instance.spec.operator_version.name.as_str();
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &KudoKind::OperatorVersion.resource());
        let obj = api
            .get_opt(name)
            .await
            .map_err(|e| api_error(e, KudoKind::OperatorVersion, name))?
            .with_context(|| {
                format!(
                    "OperatorVersion {ns}/{name} from instance {}/{} does not exist",
                    self.namespace, instance.metadata.name
                )
            })?;
        from_dynamic(obj)
    }

    /// JSON merge patch of the main resource.
    pub async fn merge_patch(&self, kind: KudoKind, name: &str, patch: serde_json::Value) -> Result<()> {
        self.api(kind)
            .patch(name, &patch_params(), &Patch::Merge(&patch))
            .await
            .map_err(|e| api_error(e, kind, name))?;
        Ok(())
    }
}

/// The parameters of the CLI's patches: its field manager, so `managedFields` name it.
pub fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

/// Converts a dynamic object to a `kudo-api` struct, naming the object on failure.
pub fn from_dynamic<T: DeserializeOwned>(obj: DynamicObject) -> Result<T> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let value = serde_json::to_value(&obj)?;
    serde_json::from_value(value)
        .with_context(|| format!("object {name} does not match the kudo.dev/v1beta1 schema"))
}

/// Turns API errors into messages a user can act on (missing CRDs, unreachable server…).
pub fn api_error(err: kube::Error, kind: KudoKind, name: &str) -> anyhow::Error {
    match &err {
        kube::Error::Api(status) if status.code == 404 && name.is_empty() => anyhow!(
            "the server does not serve {}.{}: is KUDO installed? Run `kubectl kudo init`",
            kind.plural(),
            kudo_api::GROUP
        ),
        kube::Error::Api(status) => anyhow!("{} {}: {}", kind.kind(), name, status.message),
        _ => anyhow!("cannot reach the cluster: {err}"),
    }
}
