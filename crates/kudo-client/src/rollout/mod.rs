//! Fleet rollouts (`kudo-rs.dev/v1alpha1` Rollouts, see [`kudo_engine::rollout`]): starting one
//! ([`start`]), pausing, resuming and aborting it ([`control`]), following it ([`wait`]), the
//! Instances it selects and the wave each would be in ([`preview`]), and the writes the
//! manager's rollout controller makes to one Instance ([`change`]), which are the writes of
//! `update`/`upgrade` plus the rollout's mark.

pub mod change;
pub mod control;
pub mod preview;
pub mod start;
pub mod wait;

use kube::api::{Api, DynamicObject, ListParams};
use kudo_api::Instance;
use kudo_api::rollout::{Rollout, RolloutSpec};

use crate::cluster::{Cluster, from_dynamic};
use crate::{Error, Result};

/// The Rollouts' API (cluster-scoped).
pub fn api(cluster: &Cluster) -> Api<DynamicObject> {
    Api::all_with(cluster.client.clone(), &resource())
}

/// The Rollouts' resource.
pub fn resource() -> kube::discovery::ApiResource {
    kudo_kube::known_resource(kudo_api::rollout::GROUP, kudo_api::rollout::KIND)
}

fn rollout_error(e: kube::Error, name: &str) -> Error {
    match e {
        kube::Error::Api(s) if s.code == 404 && name.is_empty() => Error::Refused(format!(
            "the server does not serve rollouts.{}: run `kubectl kudo init --crd-only` (or `init --upgrade`)",
            kudo_api::rollout::GROUP
        )),
        kube::Error::Api(s) if s.code == 404 => Error::RolloutNotFound(name.to_string()),
        kube::Error::Api(s) => Error::Api {
            kind: kudo_api::rollout::KIND,
            name: name.to_string(),
            message: s.message,
        },
        e => Error::Unreachable(e),
    }
}

/// The Rollout `name`.
pub async fn get(cluster: &Cluster, name: &str) -> Result<Rollout> {
    let obj = api(cluster).get(name).await.map_err(|e| rollout_error(e, name))?;
    from_dynamic(obj)
}

/// Every Rollout, oldest first.
pub async fn list(cluster: &Cluster) -> Result<Vec<Rollout>> {
    let items = api(cluster)
        .list(&ListParams::default())
        .await
        .map_err(|e| rollout_error(e, ""))?;
    let mut all: Vec<Rollout> = items.items.into_iter().map(from_dynamic).collect::<Result<_>>()?;
    let created = |r: &Rollout| {
        r.metadata
            .other
            .get("creationTimestamp")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    all.sort_by_key(|r| (created(r), r.metadata.name.clone()));
    Ok(all)
}

/// The Instances `spec` selects in `namespaces` (empty: every namespace), by its label selector.
pub async fn selected(cluster: &Cluster, spec: &RolloutSpec, namespaces: &[String]) -> Result<Vec<Instance>> {
    let resource = crate::cluster::KudoKind::Instance.resource();
    let lp = ListParams::default().labels(&spec.selector.to_query());
    let apis: Vec<Api<DynamicObject>> = if namespaces.is_empty() {
        vec![Api::all_with(cluster.client.clone(), &resource)]
    } else {
        namespaces
            .iter()
            .map(|ns| Api::namespaced_with(cluster.client.clone(), ns, &resource))
            .collect()
    };
    let mut out = Vec::new();
    for api in apis {
        let items = api
            .list(&lp)
            .await
            .map_err(|e| crate::cluster::api_error(e, crate::cluster::KudoKind::Instance, ""))?;
        for o in items.items {
            out.push(from_dynamic(o)?);
        }
    }
    Ok(out)
}
