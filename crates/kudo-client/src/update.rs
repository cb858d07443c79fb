//! `update`: new parameter values (plain, sensitive through the Instance's parameters Secret, or
//! referenced with `--parameter-secret`) or a new ServiceAccount for an Instance, checked by KUDO's
//! admission rules before anything is written. An Instance a typed object owns is changed through
//! that object.

use std::collections::BTreeMap;

use kudo_api::{Instance, InstanceSpec, OperatorVersion};

use crate::checks::{check_schedules, check_values, merged_values, refuse_denied};
use crate::cluster::{Cluster, KudoKind};
use crate::sensitive::{self, Split};
use crate::wait::PreviousRuns;
use crate::{Error, Result, typed_api};

/// An `update` of an Instance.
#[derive(Debug, Clone, Default)]
pub struct UpdateRequest {
    /// The Instance, in the cluster's namespace.
    pub instance: String,
    /// New parameter values.
    pub values: BTreeMap<String, String>,
    /// `--parameter-secret NAME=SECRET/KEY` references.
    pub parameter_secrets: Vec<String>,
    /// The new `spec.serviceAccountName` (`Some("")` clears it), if it changes.
    pub service_account: Option<String>,
    /// Prepared for a preview: KUDO's admission is not judged here (the preview reports it).
    pub preview: bool,
}

/// A checked update: what was read and what the update proposes. A preview stops here;
/// [`apply`] writes it.
pub struct PreparedUpdate {
    /// The Instance as read.
    pub instance: Instance,
    /// The OperatorVersion it runs.
    pub operator_version: OperatorVersion,
    /// The values split into plain, sensitive and referenced.
    pub split: Split,
    /// The spec the Instance would have.
    pub proposed: InstanceSpec,
    service_account: Option<String>,
}

/// What `update` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Updated {
    /// The values and account are those the Instance has: nothing was written.
    Unchanged,
    /// The Instance (or its typed owner, or its parameters Secret) was changed.
    Changed {
        /// Whether a plan runs for the change (false when only the ServiceAccount changed).
        runs_plan: bool,
        /// The runs the Instance knew before, for a wait.
        previous: PreviousRuns,
    },
}

/// Reads the Instance and checks the update ([`judge`], and the sensitive values against the
/// OperatorVersion). Writes nothing.
pub async fn prepare(cluster: &Cluster, req: &UpdateRequest) -> Result<PreparedUpdate> {
    let (instance, ov) = cluster.instance_and_operator_version(&req.instance).await?;
    let (split, proposed) = judge(cluster, &instance, &ov, req)?;
    if !split.sensitive.is_empty() {
        check_values(
            &split.without_referenced(&ov),
            &merged_values(&instance, &split.all_values()),
            false,
        )
        .map_err(|e| Error::Refused(split.redact(&e.to_string())))?;
    }
    Ok(PreparedUpdate {
        instance,
        operator_version: ov,
        split,
        proposed,
        service_account: req.service_account.clone(),
    })
}

/// Checks an `update` before anything is written: no value for a parameter sourced from a Secret,
/// KUDO's admission rules on the values the Instance will have (unknown or immutable parameters,
/// types, enums, a plan already running; not for a preview, which reports the refusal itself) and
/// the schedules. Returns the split values and the spec the update proposes.
fn judge(
    cluster: &Cluster,
    instance: &Instance,
    ov: &OperatorVersion,
    req: &UpdateRequest,
) -> Result<(Split, InstanceSpec)> {
    let split = sensitive::split(ov, &req.instance, req.values.clone(), &req.parameter_secrets)?;
    if let Some((name, src)) = split
        .plain
        .keys()
        .find_map(|k| Some((k, instance.spec.parameter_sources.get(k)?)))
    {
        let from = src
            .secret_key_ref
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default();
        return Err(Error::ParameterFromSecret {
            name: name.clone(),
            from,
        });
    }
    let mut proposed = instance.spec.clone();
    proposed.parameters = merged_values(instance, &split.plain);
    proposed.parameter_sources.extend(split.sources.clone());
    if let Some(sa) = &req.service_account {
        proposed.service_account_name = sa.clone();
    }
    if !req.preview {
        refuse_denied(instance, &proposed, ov, ov)?;
    }
    let ctx = kudo_package::render::RenderContext::offline(
        &req.instance,
        &cluster.namespace,
        proposed.parameters.clone(),
    );
    check_schedules(ov, &ctx)?;
    Ok((split, proposed))
}

/// Writes a prepared update: sensitive values into `<instance>-parameters` (a changed value of a
/// parameter already sourced from there is a rotation the manager runs a plan for), then one merge
/// patch of the Instance, or of the typed object that owns it.
pub async fn apply(cluster: &Cluster, prepared: PreparedUpdate) -> Result<Updated> {
    let PreparedUpdate {
        instance,
        operator_version: ov,
        split,
        service_account,
        ..
    } = prepared;
    let name = instance.metadata.name.clone();
    let previous = PreviousRuns::of(&instance);
    // For a parameter not yet sourced from the Secret, the new parameterSources entry is a
    // parameter change the admission schedules as usual.
    let mut rotated = false;
    if !split.sensitive.is_empty() {
        let changed = sensitive::store_values(cluster, &name, &split.sensitive).await?;
        rotated = changed
            && split
                .sensitive
                .keys()
                .all(|k| instance.spec.parameter_sources.get(k) == split.sources.get(k));
    }
    let sources: BTreeMap<_, _> = split
        .sources
        .iter()
        .filter(|(k, v)| instance.spec.parameter_sources.get(*k) != Some(*v))
        .collect();
    let mut patch = serde_json::json!({"spec": {}});
    if !split.plain.is_empty() {
        patch["spec"]["parameters"] = serde_json::to_value(&split.plain)?;
    }
    if !sources.is_empty() {
        patch["spec"]["parameterSources"] = serde_json::to_value(&sources)?;
    }
    let values_change = !split.plain.is_empty() || !sources.is_empty();
    // An Instance a typed object owns is changed through that object.
    let typed = values_change
        && typed_api::update_owner(
            cluster,
            &instance,
            &ov,
            &split.plain,
            &patch["spec"]["parameterSources"],
        )
        .await?;
    if typed {
        patch = serde_json::json!({"spec": {}});
    }
    let sa_patch = service_account_patch(&instance, service_account.as_deref());
    if let Some(sa) = &sa_patch {
        patch["spec"]["serviceAccountName"] = sa.clone();
    }
    if !typed && values_change || sa_patch.is_some() {
        cluster.merge_patch(KudoKind::Instance, &name, patch).await?;
    } else if !rotated {
        return Ok(Updated::Unchanged);
    }
    Ok(Updated::Changed {
        runs_plan: values_change || rotated,
        previous,
    })
}

/// The merge patch of `--service-account`, when it changes the Instance's account: the name, or
/// `null` (which removes `spec.serviceAccountName`) for `""`.
fn service_account_patch(instance: &Instance, flag: Option<&str>) -> Option<serde_json::Value> {
    let sa = flag.filter(|sa| *sa != instance.spec.service_account_name)?;
    Some(if sa.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::Value::from(sa)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_patches_the_service_account_only_when_it_changes() {
        let mut i: Instance = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "metadata": {"name": "i"},
            "spec": {"operatorVersion": {"name": "ov"}}
        }))
        .unwrap();
        assert_eq!(service_account_patch(&i, None), None);
        assert_eq!(service_account_patch(&i, Some("")), None);
        assert_eq!(
            service_account_patch(&i, Some("sa")),
            Some(serde_json::json!("sa"))
        );
        i.spec.service_account_name = "sa".into();
        assert_eq!(service_account_patch(&i, Some("sa")), None);
        // `--service-account ""` removes the field (a merge patch's null).
        assert_eq!(service_account_patch(&i, Some("")), Some(serde_json::Value::Null));
    }
}
