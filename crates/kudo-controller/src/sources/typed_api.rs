//! The typed API of a package a source stores: the CRD and ClusterRoles, written by the code
//! `kubectl kudo install` writes them with (`kudo_client::typed_api`: the same checks, the same
//! objects), as the manager. Refused — before anything is written — when another operator or tool
//! owns the CRD's name, or when objects of the kind on the cluster would not be valid under the new
//! schema (a source has no `--allow-breaking-changes`: the objects are changed first).

use kudo_api::OperatorVersion;
use kudo_client::cluster::Cluster;
use kudo_client::typed_api::{self, Planned};
use kudo_engine::source::{Failure, FailureKind};

use super::{FIELD_MANAGER, SourceError};

/// The typed API to write for `ov` (`Ok(Ok(None))` without one), or why it is refused.
pub(super) async fn check(
    client: &kube::Client,
    ov: &OperatorVersion,
) -> Result<Result<Option<Planned>, Failure>, SourceError> {
    let conflict = |m: String| Ok(Err(Failure::new(FailureKind::Conflict, m)));
    match typed_api::check(&cluster(client, ov), ov, false).await {
        Ok(planned) => Ok(Ok(planned)),
        Err(e @ kudo_client::Error::ForeignCrd { .. }) => conflict(e.to_string()),
        Err(kudo_client::Error::BreakingTypedApi {
            operator_version,
            objects,
        }) => conflict(format!(
            "the typed API of {operator_version} would make existing objects invalid: {}; \
             change them first",
            objects.join("; ")
        )),
        Err(e) => Err(e.into()),
    }
}

/// Writes the CRD [`check`] planned (returning once it is Established) and its ClusterRoles.
pub(super) async fn apply(
    client: &kube::Client,
    ov: &OperatorVersion,
    planned: Option<Planned>,
) -> Result<(), SourceError> {
    let Some(planned) = planned else {
        return Ok(());
    };
    let cluster = cluster(client, ov);
    typed_api::apply(&cluster, ov, planned, FIELD_MANAGER, &mut kudo_client::Quiet).await?;
    Ok(())
}

/// The client's view of the cluster at the OperatorVersion's namespace (the CRD and ClusterRoles
/// are cluster-scoped; the namespace is not used for them).
fn cluster(client: &kube::Client, ov: &OperatorVersion) -> Cluster {
    Cluster {
        client: client.clone(),
        namespace: ov.metadata.namespace.clone().unwrap_or_default(),
    }
}
