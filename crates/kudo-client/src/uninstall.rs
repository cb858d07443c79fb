//! `uninstall`: deletes an Instance (its cleanup plan runs, then the garbage collector deletes what
//! it owns), or the typed object that owns it, and optionally waits until the Instance is gone.

use std::time::Duration;

use kube::api::DeleteParams;
use kudo_api::Instance;

use crate::cluster::{Cluster, KudoKind, api_error};
use crate::typed_api;
use crate::{Error, Result};

/// What `uninstall` deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Uninstalled {
    /// The Instance itself.
    Instance,
    /// The typed object that owns the Instance (the manager would make the Instance again); the
    /// Instance goes with it.
    TypedOwner {
        /// The typed object's name.
        name: String,
    },
}

/// Deletes the Instance `name` (background propagation), or the typed object that owns it.
pub async fn uninstall(cluster: &Cluster, name: &str) -> Result<Uninstalled> {
    let instance = cluster.instance(name).await?;
    // An Instance a typed object owns goes with that object.
    let typed = match cluster.operator_version_of(&instance).await {
        Ok(ov) => typed_api::delete_owner(cluster, &instance, &ov).await?,
        Err(_) => None,
    };
    if let Some(owner) = typed {
        return Ok(Uninstalled::TypedOwner { name: owner });
    }
    cluster
        .api(KudoKind::Instance)
        .delete(name, &DeleteParams::background())
        .await
        .map_err(|e| api_error(e, KudoKind::Instance, name))?;
    Ok(Uninstalled::Instance)
}

/// Polls until the Instance `name` no longer exists; an error once `timeout` has passed.
pub async fn wait_deleted(cluster: &Cluster, name: &str, timeout: Duration) -> Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    while cluster.get::<Instance>(KudoKind::Instance, name).await?.is_some() {
        if tokio::time::Instant::now() > deadline {
            return Err(Error::DeleteTimeout {
                seconds: timeout.as_secs(),
                instance: name.to_string(),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}
