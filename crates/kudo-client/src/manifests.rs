//! The objects `install` writes, as manifests for Git (`install --dry-run -o yaml`, `upgrade
//! --dry-run -o manifests`): built by install's own construction ([`crate::install`]), checked as
//! far as that needs no cluster, and returned in the order `kubectl apply -f` should create them
//! (Namespace, the dependencies' Operators and OperatorVersions, the Operator, the
//! OperatorVersion, the typed API's CRD and ClusterRoles, the Instance).
//!
//! No request is made. What `install` checks against the cluster (an Instance of that name, the
//! typed API's owner and the objects its new schema would break, the kinds autopilot rules read)
//! is left to the API server and the manager when the manifests are applied. Sensitive values
//! are not printed: a sensitive parameter must come as a reference (`--parameter-secret
//! NAME=SECRET/KEY`, `spec.parameterSources`) to a Secret the user provides (e.g. a
//! SealedSecret or an external-secrets object in the same Git tree).

use serde::Serialize;
use serde_json::Value;

use crate::checks::check_autopilot_rules;
use crate::install::{
    InstallRequest, check_instance_values, dependency_resources, install_resources, namespace_object,
};
use crate::{Error, Result};

/// The manifests of `req` installed in `namespace` (see the module docs).
///
/// ```
/// use std::collections::BTreeMap;
/// use kudo_client::install::InstallRequest;
///
/// let package = kudo_package::read_path(std::path::Path::new("../../examples/first-operator"))?;
/// let req = InstallRequest {
///     package,
///     source: kudo_repo::Source::Local("examples/first-operator".into()),
///     dependencies: kudo_repo::Dependencies::default(),
///     instance: Some("web".into()),
///     values: BTreeMap::from([("REPLICAS".into(), "3".into())]),
///     parameter_secrets: Vec::new(),
///     service_account: None,
///     skip_instance: false,
///     create_namespace: false,
///     allow_breaking_changes: false,
///     take_ownership: false,
/// };
/// let objects = kudo_client::manifests::install_manifests(&req, "team-a")?;
/// let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
/// assert_eq!(kinds, ["Operator", "OperatorVersion", "Instance"]);
/// assert_eq!(objects[2]["metadata"]["namespace"], "team-a");
/// assert_eq!(objects[2]["spec"]["parameters"]["REPLICAS"], "3");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn install_manifests(req: &InstallRequest, namespace: &str) -> Result<Vec<Value>> {
    let (res, split) = install_resources(req, namespace)?;
    check_autopilot_rules(&res.operator_version)?;
    if !split.sensitive.is_empty() {
        return Err(Error::SensitiveValueInManifests {
            names: split.sensitive.keys().cloned().collect(),
        });
    }
    if !req.skip_instance {
        check_instance_values(&res.operator_version, &split)?;
    }
    let mut out = Vec::new();
    if req.create_namespace {
        let ns = namespace_object(&req.package, &res.instance.metadata.name, namespace, &req.values)?;
        out.push(object(&ns)?);
    }
    for (dep, _) in dependency_resources(&req.dependencies, namespace)? {
        out.push(object(&dep.operator)?);
        out.push(object(&dep.operator_version)?);
    }
    out.push(object(&res.operator)?);
    out.push(object(&res.operator_version)?);
    if let Some(crd) = kudo_package::typed_api::crd(&res.operator_version) {
        out.push(crd);
        out.extend(kudo_package::typed_api::cluster_roles(&res.operator_version));
    }
    if !req.skip_instance {
        out.push(object(&res.instance)?);
    }
    Ok(out)
}

/// An object as JSON, without the empty `status` a type may serialize.
fn object(o: &impl Serialize) -> Result<Value> {
    let mut v = serde_json::to_value(o)?;
    if let Some(m) = v.as_object_mut()
        && m.get("status")
            .is_some_and(|s| s.is_null() || s.as_object().is_some_and(|o| o.is_empty()))
    {
        m.remove("status");
    }
    Ok(v)
}
