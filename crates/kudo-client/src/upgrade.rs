//! `upgrade`: moves an Instance to a newer OperatorVersion of its operator (installing it and its
//! dependencies and typed API first), or re-runs the failed upgrade plan when the Instance already
//! runs that version (a bug KUDO 0.19 has).

use std::collections::BTreeMap;

use kudo_api::{ExecutionStatus, Instance, InstanceSpec, OperatorVersion};
use kudo_package::resources::{ConvertOptions, to_resources};
use kudo_repo::{Dependencies, Source};

use crate::checks::{check_values, merged_values, refuse_denied};
use crate::cluster::{Cluster, FIELD_MANAGER, KudoKind};
use crate::install::{existing_operator_version, install_dependencies};
use crate::plan::{trigger_plan, trigger_spec};
use crate::provenance;
use crate::typed_api::{self, AppliedCrd};
use crate::wait::PreviousRuns;
use crate::{Error, Event, Progress, Result};

/// An `upgrade` of an Instance to a package read by the caller.
pub struct UpgradeRequest {
    /// The new package version.
    pub package: kudo_package::Package,
    /// Where it came from (an OCI artifact is recorded on its OperatorVersion).
    pub source: Source,
    /// Its resolved dependencies, installed first.
    pub dependencies: Dependencies,
    /// The Instance, in the cluster's namespace.
    pub instance: String,
    /// Parameter values to change with the upgrade.
    pub values: BTreeMap<String, String>,
    /// `--parameter-secret` references (refused by upgrade for now).
    pub parameter_secrets: Vec<String>,
    /// Write the typed API even where existing objects would no longer be valid.
    pub allow_breaking_changes: bool,
}

/// A checked upgrade: what was read and what it would do. A preview stops here; [`apply`]
/// writes it.
pub enum PreparedUpgrade {
    /// The Instance already runs the version and its upgrade plan failed: run that plan again.
    Retrigger(Box<Retrigger>),
    /// A newer OperatorVersion.
    NewVersion(Box<NewVersion>),
}

/// The re-run of the failed upgrade plan of the version the Instance runs.
pub struct Retrigger {
    /// The Instance as read.
    pub instance: Instance,
    /// The OperatorVersion it runs.
    pub operator_version: OperatorVersion,
    /// The plan to run again (upgrade, else update, else deploy).
    pub plan: String,
}

/// The upgrade to a newer OperatorVersion.
pub struct NewVersion {
    /// The Instance as read.
    pub instance: Instance,
    /// The OperatorVersion it runs.
    pub current: OperatorVersion,
    /// The OperatorVersion it will run.
    pub new_ov: OperatorVersion,
    /// The Instance spec after the upgrade.
    pub proposed: InstanceSpec,
    values: BTreeMap<String, String>,
    source: Source,
    dependencies: Dependencies,
    allow_breaking_changes: bool,
}

impl PreparedUpgrade {
    /// The Instance, the spec the upgrade proposes, and the old and new OperatorVersions (what a
    /// preview compares).
    pub fn change(&self) -> (&Instance, InstanceSpec, &OperatorVersion, &OperatorVersion) {
        match self {
            PreparedUpgrade::Retrigger(r) => (
                &r.instance,
                trigger_spec(&r.instance, &r.plan),
                &r.operator_version,
                &r.operator_version,
            ),
            PreparedUpgrade::NewVersion(n) => (&n.instance, n.proposed.clone(), &n.current, &n.new_ov),
        }
    }
}

/// What `upgrade` wrote.
#[derive(Debug)]
pub enum Upgraded {
    /// The failed plan of the current version was triggered again.
    Retriggered {
        /// The plan.
        plan: String,
        /// The runs the Instance knew before, for a wait.
        previous: PreviousRuns,
    },
    /// The Instance now names the new OperatorVersion.
    Upgraded {
        /// Whether the OperatorVersion was created (false: it was installed already).
        operator_version_created: bool,
        /// The typed API's CRD, when the new OperatorVersion declares one.
        typed_crd: Option<AppliedCrd>,
        /// The runs the Instance knew before, for a wait.
        previous: PreviousRuns,
    },
}

/// Reads the Instance and its OperatorVersion and checks the upgrade: same operator, not older,
/// no sensitive values, valid parameters. Writes nothing.
pub async fn prepare(cluster: &Cluster, req: UpgradeRequest) -> Result<PreparedUpgrade> {
    let (instance, current) = cluster.instance_and_operator_version(&req.instance).await?;
    let mut res = to_resources(
        &req.package,
        &ConvertOptions {
            namespace: Some(cluster.namespace.clone()),
            ..Default::default()
        },
    )?;
    req.dependencies.pin(&mut res.operator_version);
    provenance::annotate(&mut res.operator_version, &req.source);
    let new_ov = res.operator_version;
    check_order(&req.instance, &current, &new_ov)?;
    if new_ov.metadata.name == current.metadata.name {
        return same_version(instance, current);
    }
    let sensitive = req.values.keys().any(|k| {
        new_ov
            .spec
            .parameters
            .iter()
            .any(|p| &p.name == k && p.is_sensitive())
    });
    if !req.parameter_secrets.is_empty() || sensitive {
        return Err(Error::SensitiveUpgrade);
    }
    check_values(&new_ov, &merged_values(&instance, &req.values), false)?;
    let mut proposed = instance.spec.clone();
    proposed.operator_version.name = new_ov.metadata.name.clone();
    proposed.parameters = merged_values(&instance, &req.values);
    Ok(PreparedUpgrade::NewVersion(Box::new(NewVersion {
        instance,
        current,
        new_ov,
        proposed,
        values: req.values,
        source: req.source,
        dependencies: req.dependencies,
        allow_breaking_changes: req.allow_breaking_changes,
    })))
}

/// Refuses another operator's package and an older version.
fn check_order(instance: &str, current: &OperatorVersion, new_ov: &OperatorVersion) -> Result<()> {
    if new_ov.spec.operator.name != current.spec.operator.name {
        return Err(Error::OtherOperator {
            instance: instance.to_string(),
            current: current.spec.operator.name.clone(),
            new: new_ov.spec.operator.name.clone(),
        });
    }
    // KUDO compared operatorVersions for an upgrade (appVersion only breaks a tie here).
    let order = kudo_repo::index::cmp_version(&new_ov.spec.version, &current.spec.version)
        .then_with(|| kudo_repo::index::cmp_version(&new_ov.spec.app_version, &current.spec.app_version));
    if order == std::cmp::Ordering::Less {
        return Err(Error::OlderVersion {
            new: new_ov.metadata.name.clone(),
            current: current.metadata.name.clone(),
        });
    }
    Ok(())
}

/// `upgrade` to the version the Instance already runs: the upgrade plan (else update, else deploy)
/// runs again if its last run failed; otherwise there is nothing to upgrade.
fn same_version(instance: Instance, current: OperatorVersion) -> Result<PreparedUpgrade> {
    let plan = ["upgrade", "update", "deploy"]
        .into_iter()
        .find(|p| current.spec.plans.contains_key(*p));
    let failed = plan
        .and_then(|p| instance.status.as_ref()?.plan_status.get(p))
        .is_some_and(|s| s.status == ExecutionStatus::FatalError);
    match plan {
        Some(plan) if failed => Ok(PreparedUpgrade::Retrigger(Box::new(Retrigger {
            instance,
            operator_version: current,
            plan: plan.to_string(),
        }))),
        _ => Err(Error::NothingToUpgrade {
            instance: instance.metadata.name.clone(),
            current: current.metadata.name.clone(),
        }),
    }
}

/// Writes a prepared upgrade, reporting each object written to `progress`.
pub async fn apply(
    cluster: &Cluster,
    prepared: PreparedUpgrade,
    progress: &mut dyn Progress,
) -> Result<Upgraded> {
    match prepared {
        PreparedUpgrade::Retrigger(r) => {
            trigger_plan(cluster, &r.instance, &r.operator_version, &r.plan).await?;
            Ok(Upgraded::Retriggered {
                plan: r.plan,
                previous: PreviousRuns::of(&r.instance),
            })
        }
        PreparedUpgrade::NewVersion(n) => apply_new_version(cluster, *n, progress).await,
    }
}

/// Installs the new OperatorVersion (dependencies and typed API too) and points the Instance at it.
async fn apply_new_version(
    cluster: &Cluster,
    n: NewVersion,
    progress: &mut dyn Progress,
) -> Result<Upgraded> {
    let previous = PreviousRuns::of(&n.instance);
    refuse_denied(&n.instance, &n.proposed, &n.current, &n.new_ov)?;
    let typed = typed_api::check(cluster, &n.new_ov, n.allow_breaking_changes).await?;
    let existing = existing_operator_version(cluster, &n.new_ov).await?;
    if let Some(existing) = &existing {
        provenance::check_existing(existing, &n.source)?;
    }
    install_dependencies(cluster, &n.dependencies, progress).await?;
    let created = existing.is_none();
    if created {
        cluster.create(KudoKind::OperatorVersion, &n.new_ov).await?;
        progress.report(Event::Created {
            kind: KudoKind::OperatorVersion,
            name: &n.new_ov.metadata.name,
        })?;
    }
    let typed_crd = match typed {
        Some(planned) => Some(typed_api::apply(cluster, &n.new_ov, planned, FIELD_MANAGER, progress).await?),
        None => None,
    };
    let mut patch = serde_json::json!({"spec": {"operatorVersion": {"name": n.new_ov.metadata.name}}});
    if !n.values.is_empty() {
        patch["spec"]["parameters"] = serde_json::to_value(&n.values)?;
    }
    cluster
        .merge_patch(KudoKind::Instance, &n.instance.metadata.name, patch)
        .await?;
    Ok(Upgraded::Upgraded {
        operator_version_created: created,
        typed_crd,
        previous,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov(operator: &str, version: &str, app: &str, plans: &[&str]) -> OperatorVersion {
        let plans: serde_json::Map<String, serde_json::Value> = plans
            .iter()
            .map(|p| {
                (
                    p.to_string(),
                    serde_json::json!({"strategy": "serial", "phases": []}),
                )
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
            "metadata": {"name": format!("{operator}-{app}-{version}")},
            "spec": {"operator": {"name": operator}, "version": version, "appVersion": app, "plans": plans}
        }))
        .expect("operator version")
    }

    fn instance(plan_status: serde_json::Value) -> Instance {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "metadata": {"name": "db"},
            "spec": {"operatorVersion": {"name": "ov"}},
            "status": {"planStatus": plan_status}
        }))
        .expect("instance")
    }

    #[test]
    fn an_upgrade_is_refused_to_another_operator_or_an_older_version() {
        let current = ov("galera", "0.2.0", "10.5", &[]);
        let e = check_order("db", &current, &ov("mysql", "0.3.0", "10.5", &[])).unwrap_err();
        assert_eq!(e.to_string(), "instance db runs operator galera, not mysql");
        let e = check_order("db", &current, &ov("galera", "0.1.0", "11.0", &[])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "upgraded version galera-11.0-0.1.0 is older than the current version galera-10.5-0.2.0"
        );
        // The appVersion only breaks a tie of operatorVersions.
        assert!(check_order("db", &current, &ov("galera", "0.2.0", "10.4", &[])).is_err());
        assert!(check_order("db", &current, &ov("galera", "0.2.0", "10.6", &[])).is_ok());
        assert!(check_order("db", &current, &ov("galera", "0.3.0", "10.0", &[])).is_ok());
    }

    #[test]
    fn the_same_version_reruns_only_a_failed_upgrade_plan() {
        let current = ov("galera", "0.2.0", "10.5", &["deploy", "update"]);
        let failed = instance(serde_json::json!({"update": {"name": "update", "status": "FATAL_ERROR"}}));
        match same_version(failed, current.clone()) {
            Ok(PreparedUpgrade::Retrigger(r)) => assert_eq!(r.plan, "update"),
            _ => panic!("a failed update plan runs again"),
        }
        let complete = instance(serde_json::json!({"update": {"name": "update", "status": "COMPLETE"}}));
        let e = same_version(complete, current).err().expect("nothing to upgrade");
        assert_eq!(
            e.to_string(),
            "instance db already runs galera-10.5-0.2.0; nothing to upgrade"
        );
    }
}
