//! `init`: installs, checks and removes KUDO's server side ([`manifests`]: the CRDs, the
//! manager's namespace, account, roles and Deployment) with server-side apply as
//! [`FIELD_MANAGER`], and waits for the manager to be ready. `kubectl kudo dev` installs the
//! aggregated roles (and a least-privilege Instance account) with [`install_for_dev`].

pub mod manifests;

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};

use crate::cluster::Cluster;
use crate::{Error, Event, Progress, Result};
pub use manifests::{Manifest, dry_run_list};

/// Field manager for everything `init` applies.
pub const FIELD_MANAGER: &str = "kubectl-kudo-init";

/// The manager Deployment.
const MANAGER_DEPLOYMENT: &str = "kudo-controller-manager";

/// The account Instances are applied as under `--least-privilege` unless they name one.
pub const DEFAULT_INSTANCE_ACCOUNT: &str = "kudo-instance";

/// What an installation consists of (the flags of `init` that shape its manifests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// Only the CRDs.
    pub crd_only: bool,
    /// An existing ServiceAccount for the manager instead of creating `kudo-manager`.
    pub service_account: Option<String>,
    /// Bind the manager to [`manifests::MANAGER_ROLE`] instead of cluster-admin, and start it with
    /// `--default-service-account`.
    pub least_privilege: bool,
    /// With `least_privilege`: the account Instances without `spec.serviceAccountName` are applied
    /// as.
    pub default_service_account: String,
    /// The manager image (default: this version's, [`manifests::default_image`]).
    pub image: Option<String>,
    /// The version whose image to install ([`manifests::image_for_version`]).
    pub version: Option<String>,
    /// The manager's `imagePullPolicy`.
    pub image_pull_policy: String,
    /// Manager replicas.
    pub replicas: i32,
    /// The manager's `--shards`.
    pub shards: u32,
    /// The manager's `--require-verified-sources`.
    pub require_verified_sources: bool,
}

impl Default for Setup {
    /// KUDO's installation: cluster-admin, one replica, pulled `Always`.
    fn default() -> Setup {
        Setup {
            crd_only: false,
            service_account: None,
            least_privilege: false,
            default_service_account: DEFAULT_INSTANCE_ACCOUNT.to_string(),
            image: None,
            version: None,
            image_pull_policy: "Always".to_string(),
            replicas: 1,
            shards: 1,
            require_verified_sources: false,
        }
    }
}

/// An `init` that installs.
pub struct InitRequest<'a> {
    /// What to install.
    pub setup: &'a Setup,
    /// The manager's namespace.
    pub namespace: &'a str,
    /// Re-apply an existing installation (else one that is complete is refused).
    pub upgrade: bool,
}

fn api_for(cluster: &Cluster, m: &Manifest) -> Api<DynamicObject> {
    if m.namespaced {
        let ns = m.object["metadata"]["namespace"].as_str().unwrap_or("default");
        Api::namespaced_with(cluster.client.clone(), ns, &m.resource)
    } else {
        Api::all_with(cluster.client.clone(), &m.resource)
    }
}

/// Installs (or with `upgrade` re-applies) the manifests of `request.setup`, reporting each group
/// once installed ([`Event::Installed`]). Installing the KUDO way removes the ClusterRole an
/// earlier `--least-privilege` install left.
pub async fn install(
    cluster: &Cluster,
    request: &InitRequest<'_>,
    progress: &mut dyn Progress,
) -> Result<()> {
    let setup = request.setup;
    let ms = manifests::manifests(setup, request.namespace)?;
    let missing = missing_or_different(cluster, &ms).await?;
    if missing.is_empty() && !request.upgrade && !setup.crd_only {
        return Err(Error::AlreadyInitialized {
            namespace: request.namespace.to_string(),
        });
    }
    apply(cluster, &ms, progress).await?;
    if !setup.crd_only && !setup.least_privilege && setup.service_account.is_none() {
        remove_least_privilege_role(cluster, progress).await?;
    }
    Ok(())
}

/// What an installation of `setup` lacks: the manifests the cluster does not have, and the
/// ClusterRoleBindings whose role differs (the other mode's binding: cluster-admin vs
/// `kudo-manager`), as `KIND NAME` texts. Empty: it is complete.
pub async fn verify(cluster: &Cluster, setup: &Setup, namespace: &str) -> Result<Vec<String>> {
    missing_or_different(cluster, &manifests::manifests(setup, namespace)?).await
}

/// Removes everything `init` installs for `setup`, and what the other mode (with or without
/// `--least-privilege`) installs too, in reverse order, ignoring what does not exist; each
/// deletion is reported ([`Event::Deleted`]). Instances are deleted with their CRDs.
pub async fn uninstall(
    cluster: &Cluster,
    setup: &Setup,
    namespace: &str,
    progress: &mut dyn Progress,
) -> Result<()> {
    let ms = manifests::manifests(setup, namespace)?;
    let other = Setup {
        least_privilege: !setup.least_privilege,
        ..setup.clone()
    };
    let mut all = manifests::manifests(&other, namespace)?;
    all.retain(|o| !ms.iter().any(|m| m.kind() == o.kind() && m.name() == o.name()));
    all.splice(0..0, ms);
    for m in all.iter().rev() {
        let name = m.name();
        match api_for(cluster, m)
            .delete(&name, &DeleteParams::background())
            .await
        {
            Ok(_) => progress.report(Event::Deleted {
                kind: m.kind(),
                name: &name,
            })?,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(Error::InitDelete {
                    name,
                    source: Box::new(e),
                });
            }
        }
    }
    Ok(())
}

async fn missing_or_different(cluster: &Cluster, ms: &[Manifest]) -> Result<Vec<String>> {
    let mut missing = Vec::new();
    for m in ms {
        match api_for(cluster, m).get_opt(&m.name()).await? {
            None => missing.push(format!("{} {}", m.kind(), m.name())),
            Some(found) if role_ref_differs(m, &found) => missing.push(format!(
                "{} {} (bound to {}, expected {})",
                m.kind(),
                m.name(),
                found.data["roleRef"]["name"].as_str().unwrap_or_default(),
                m.object["roleRef"]["name"].as_str().unwrap_or_default()
            )),
            Some(_) => {}
        }
    }
    Ok(missing)
}

/// Is `found` a binding of another role than the manifest `m` binds?
fn role_ref_differs(m: &Manifest, found: &DynamicObject) -> bool {
    m.kind() == "ClusterRoleBinding" && found.data["roleRef"] != m.object["roleRef"]
}

/// Server-side applies every manifest, reporting each group once its last manifest is applied.
async fn apply(cluster: &Cluster, ms: &[Manifest], progress: &mut dyn Progress) -> Result<()> {
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let mut reported = Vec::new();
    for m in ms {
        let name = m.name();
        let api = api_for(cluster, m);
        let failed = |verb: &'static str| {
            let (kind, name) = (m.kind().to_string(), name.clone());
            move |e| Error::InitWrite {
                verb,
                kind,
                name,
                source: Box::new(e),
            }
        };
        // A binding's roleRef is immutable: switching between cluster-admin and `kudo-manager`
        // (`init --upgrade` with or without --least-privilege) deletes the old binding and
        // creates the new one. The manager loses its old rights before it gets the new ones,
        // for the moment in between.
        if let Some(found) = api.get_opt(&name).await?
            && role_ref_differs(m, &found)
        {
            api.delete(&name, &DeleteParams::default())
                .await
                .map_err(failed("replace"))?;
        }
        api.patch(&name, &pp, &Patch::Apply(&m.object))
            .await
            .map_err(failed("install"))?;
        if !reported.contains(&m.group)
            && ms.iter().rev().find(|x| x.group == m.group).map(Manifest::name) == Some(name)
        {
            progress.report(Event::Installed { group: m.group })?;
            reported.push(m.group);
        }
    }
    Ok(())
}

/// After installing the KUDO way, removes the ClusterRole `kudo-manager` an earlier
/// `--least-privilege` install left (only ours: labelled `app: kudo-manager`).
async fn remove_least_privilege_role(cluster: &Cluster, progress: &mut dyn Progress) -> Result<()> {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let role_name = manifests::MANAGER_ROLE;
    let api: Api<ClusterRole> = Api::all(cluster.client.clone());
    let Some(role) = api.get_opt(role_name).await? else {
        return Ok(());
    };
    let ours = role
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app"))
        .is_some_and(|a| a == "kudo-manager");
    if ours {
        api.delete(role_name, &DeleteParams::default()).await?;
        progress.report(Event::Unused {
            kind: "ClusterRole",
            name: role_name,
        })?;
    }
    Ok(())
}

/// Waits until the manager Deployment in `namespace` has all its replicas available and updated.
pub async fn wait_ready(cluster: &Cluster, namespace: &str, timeout: Duration) -> Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(d) = api.get_opt(MANAGER_DEPLOYMENT).await? {
            let want = d.spec.replicas.unwrap_or(1);
            let st = d.status.unwrap_or_default();
            if st.available_replicas.unwrap_or(0) >= want && st.updated_replicas.unwrap_or(0) >= want {
                return Ok(());
            }
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Error::ManagerNotReady {
                seconds: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What `kubectl kudo dev` installs beside the CRDs: the aggregated `kudo.dev` rules of the
/// built-in roles and, with `instance_account` (its `--least-privilege`), that ServiceAccount of
/// namespace `default` bound to the built-in `admin` role there.
pub async fn install_for_dev(cluster: &Cluster, instance_account: Option<&str>) -> Result<()> {
    let pp = PatchParams::apply("kubectl-kudo-dev").force();
    let mut objects = manifests::aggregated_roles();
    if let Some(account) = instance_account {
        objects.push(serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": "default"}}));
        objects.push(
            serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": format!("{account}-admin"), "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "default"}]}),
        );
    }
    for obj in objects {
        let (av, kind) = (
            obj["apiVersion"].as_str().unwrap_or(""),
            obj["kind"].as_str().unwrap_or(""),
        );
        let (group, _) = av.split_once('/').unwrap_or(("", av));
        let resource = kudo_kube::known_resource(group, kind);
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(cluster.client.clone(), ns, &resource),
            None => Api::all_with(cluster.client.clone(), &resource),
        };
        api.patch(&name, &pp, &Patch::Apply(&obj))
            .await
            .map_err(|e| Error::DevInstall {
                kind: kind.to_string(),
                name,
                source: Box::new(e),
            })?;
    }
    Ok(())
}
