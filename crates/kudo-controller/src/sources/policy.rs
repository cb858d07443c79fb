//! What the Instance reconcile reads for `--require-verified-sources`: the OperatorSource an
//! OperatorVersion's label names, from the OperatorVersion's namespace (one GET with the manager's
//! identity); the decision is [`kudo_engine::source::policy::verified`].

use kube::api::{Api, DynamicObject};
use kudo_api::OperatorVersion;
use kudo_api::source::OperatorSource;
use kudo_engine::source::policy;

use super::source_resource;

/// `Ok(Ok(key))`: the policy admits `ov` (of namespace `ns`); `Ok(Err(why))`: it refuses;
/// `Err`: the source could not be read.
pub(crate) async fn verified(
    client: &kube::Client,
    ns: &str,
    ov: &OperatorVersion,
) -> Result<Result<String, String>, kube::Error> {
    let source = match policy::source_of(ov) {
        Some(name) => {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &source_resource());
            api.get_opt(name)
                .await?
                .and_then(|o| serde_json::to_value(o).ok())
                .and_then(|v| serde_json::from_value::<OperatorSource>(v).ok())
        }
        None => None,
    };
    Ok(policy::verified(ov, ns, source.as_ref()))
}
