//! Connecting to a cluster the way `kubectl` does, and typed access to the `kudo.dev` objects.
//!
//! KUDO objects are read and written as `DynamicObject`s and converted with serde to the
//! `kudo-api` structs: that keeps `kudo-api` free of a Kubernetes client dependency.

use std::path::PathBuf;
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Result};

/// Where to connect: what the CLI's global flags say (the flags themselves stay in the CLI), so
/// every operation connects the same way.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// A kubeconfig path, or a path list like `$KUBECONFIG` (the first file wins); `None`: kube's
    /// usual inference.
    pub kubeconfig: Option<PathBuf>,
    /// The namespace commands act in; `None`: the kubeconfig context's namespace, else "default".
    pub namespace: Option<String>,
    /// Seconds to wait for one API request (0 = no limit).
    pub request_timeout: u64,
}

/// A connected client and the namespace commands act in.
pub struct Cluster {
    /// The client every operation uses.
    pub client: Client,
    /// The namespace of the Instances and Operators operations read and write.
    pub namespace: String,
}

/// Field manager of the CLI's writes (other than `init`'s server-side apply, which has its own).
pub const FIELD_MANAGER: &str = "kubectl-kudo";

/// The CLI's User-Agent: `kubectl-kudo/<version>` (the version of the workspace, shared by the CLI).
pub const USER_AGENT: &str = concat!("kubectl-kudo/", env!("CARGO_PKG_VERSION"));

/// Builds a client from `opts.kubeconfig` (a path list like `$KUBECONFIG` is accepted; the first
/// file wins) or kube's usual inference.
pub async fn connect(opts: &ConnectOptions) -> Result<Cluster> {
    let mut config = client_config(opts).await?;
    // Named in the API server's audit log and, for non-apply writes without an explicit field
    // manager, in managedFields (objects showed manager `unknown`).
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
    let client = Client::try_from(config).map_err(Error::BuildClient)?;
    Ok(Cluster { client, namespace })
}

/// The client configuration of `opts` (reads the kubeconfig; no request).
async fn client_config(opts: &ConnectOptions) -> Result<Config> {
    Ok(match &opts.kubeconfig {
        Some(path) => {
            let first = std::env::split_paths(path).next().unwrap_or_else(|| path.clone());
            let kc = Kubeconfig::read_from(&first).map_err(|source| Error::ReadKubeconfig {
                path: first.display().to_string(),
                source,
            })?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|source| Error::InvalidKubeconfig {
                    path: first.display().to_string(),
                    source,
                })?
        }
        None => Config::infer().await.map_err(Error::NoCluster)?,
    })
}

/// The namespace [`connect`] would act in, without a request: `opts.namespace`, else the
/// kubeconfig context's, else `default` (also when there is no kubeconfig at all: a command that
/// only prints objects needs no cluster).
pub async fn namespace(opts: &ConnectOptions) -> String {
    if let Some(ns) = &opts.namespace {
        return ns.clone();
    }
    match client_config(opts).await {
        Ok(config) => config.default_namespace,
        Err(_) => "default".to_string(),
    }
}

/// The three KUDO kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KudoKind {
    /// `Operator`: one per operator name.
    Operator,
    /// `OperatorVersion`: one per version of an operator package.
    OperatorVersion,
    /// `Instance`: one running copy of an OperatorVersion.
    Instance,
}

impl KudoKind {
    /// The kind's name, as in `kind:`.
    pub fn kind(self) -> &'static str {
        match self {
            KudoKind::Operator => "Operator",
            KudoKind::OperatorVersion => "OperatorVersion",
            KudoKind::Instance => "Instance",
        }
    }
    /// The resource name in URLs, from the one kind table (`kudo_api::kinds`).
    pub fn plural(self) -> &'static str {
        kudo_api::kinds::known(kudo_api::GROUP, self.kind()).plural
    }
    /// `operator.kudo.dev/v1beta1/NAME`, the prefix KUDO's CLI printed.
    pub fn display(self, name: &str) -> String {
        format!("{}.{}/{name}", self.kind().to_lowercase(), kudo_api::API_VERSION)
    }
    /// The kind as kube's dynamic API resource (the manager's table, so both agree).
    pub fn resource(self) -> ApiResource {
        kudo_kube::known_resource(kudo_api::GROUP, self.kind())
    }
}

impl Cluster {
    /// The kind's API in the cluster's namespace.
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

    /// Every object of the kind in the namespace, converted.
    pub async fn list<T: DeserializeOwned>(&self, kind: KudoKind) -> Result<Vec<T>> {
        let list = self
            .api(kind)
            .list(&Default::default())
            .await
            .map_err(|e| api_error(e, kind, ""))?;
        list.items.into_iter().map(from_dynamic).collect()
    }

    /// Creates `obj` with the CLI's field manager.
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
            .ok_or_else(|| Error::InstanceNotFound {
                namespace: self.namespace.clone(),
                name: name.to_string(),
            })
    }

    /// The Instance `name` and the OperatorVersion it runs: what most operations start from.
    pub async fn instance_and_operator_version(
        &self,
        name: &str,
    ) -> Result<(kudo_api::Instance, kudo_api::OperatorVersion)> {
        let instance = self.instance(name).await?;
        let ov = self.operator_version_of(&instance).await?;
        Ok((instance, ov))
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
            .ok_or_else(|| Error::OperatorVersionNotFound {
                namespace: ns.to_string(),
                name: name.to_string(),
                instance: format!("{}/{}", self.namespace, instance.metadata.name),
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
    serde_json::from_value(value).map_err(|source| Error::Schema { name, source })
}

/// Turns API errors into messages a user can act on (missing CRDs, unreachable server…).
pub fn api_error(err: kube::Error, kind: KudoKind, name: &str) -> Error {
    match err {
        kube::Error::Api(status) if status.code == 404 && name.is_empty() => Error::NotServed {
            plural: kind.plural(),
        },
        kube::Error::Api(status) => Error::Api {
            kind: kind.kind(),
            name: name.to_string(),
            message: status.message.clone(),
        },
        err => Error::Unreachable(err),
    }
}
