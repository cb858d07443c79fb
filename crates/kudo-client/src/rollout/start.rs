//! `rollout start`: a Rollout created from a spec, refused (nothing written) when the spec is one
//! the manager could not run.

use kudo_api::rollout::{API_VERSION, KIND, Rollout, RolloutSpec};

use super::{api, rollout_error};
use crate::cluster::{Cluster, FIELD_MANAGER, from_dynamic};
use crate::{Error, Result};

/// Checks `spec` (the manager's own check, [`kudo_engine::rollout::settings`]) and creates the
/// Rollout `name`. Returns it as created.
pub async fn start(cluster: &Cluster, name: &str, spec: RolloutSpec) -> Result<Rollout> {
    kudo_engine::rollout::settings(&spec).map_err(|source| Error::InvalidRollout {
        name: name.to_string(),
        source,
    })?;
    let rollout = Rollout {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        metadata: kudo_api::ObjectMeta {
            name: name.to_string(),
            ..Default::default()
        },
        spec,
        status: None,
    };
    let obj: kube::api::DynamicObject = serde_json::from_value(serde_json::to_value(&rollout)?)?;
    let pp = kube::api::PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let created = api(cluster)
        .create(&pp, &obj)
        .await
        .map_err(|e| rollout_error(e, name))?;
    from_dynamic(created)
}
