//! The checks install, update, upgrade and trigger make before anything is written: parameter
//! values against the OperatorVersion, schedules, autopilot rules, and KUDO's admission of the
//! change (the same rules the manager applies, so the CLI refuses what the manager would not run).

use std::collections::BTreeMap;

use kudo_api::{Instance, InstanceSpec, OperatorVersion};

use crate::cluster::Cluster;
use crate::{Error, Result};

/// Checks `values` against the OperatorVersion's parameters (required ones too when `installing`)
/// and its schedules, rendered as the manager will (instance name unknown here).
pub fn check_values(ov: &OperatorVersion, values: &BTreeMap<String, String>, installing: bool) -> Result<()> {
    if installing {
        let missing = ov.spec.missing_required(values);
        if !missing.is_empty() {
            return Err(Error::MissingRequired(missing));
        }
    }
    let errors = kudo_package::render::validate_parameters(ov, values);
    if !errors.is_empty() {
        return Err(Error::InvalidParameters(errors));
    }
    // Scheduled plans (kudo-rs extension): a schedule the manager could not use is refused here,
    // before anything is applied.
    let ctx = kudo_package::render::RenderContext::offline("", "", values.clone());
    check_schedules(ov, &ctx)
}

/// Refuses schedules (`schedule:` of a plan) the manager could not use.
pub(crate) fn check_schedules(ov: &OperatorVersion, ctx: &kudo_package::render::RenderContext) -> Result<()> {
    let errors = kudo_engine::schedule::check_schedules(ov, ctx);
    if !errors.is_empty() {
        return Err(Error::InvalidSchedules(errors));
    }
    Ok(())
}

/// The Instance's parameters with `changes` applied (what the Instance holds after the patch).
pub fn merged_values(instance: &Instance, changes: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut all = instance.spec.parameters.clone();
    all.extend(changes.iter().map(|(k, v)| (k.clone(), v.clone())));
    all
}

/// Refuses, before anything is written, a change of `stored` to `proposed` that KUDO's admission
/// webhook denied (its message, non-zero exit), as KUDO's CLI failed then. The manager applies the
/// same rules to changes written by other clients (`kubectl apply`), after the fact.
pub fn refuse_denied(
    stored: &Instance,
    proposed: &InstanceSpec,
    old_ov: &OperatorVersion,
    new_ov: &OperatorVersion,
) -> Result<kudo_engine::triggers::Decision> {
    let admitted = kudo_engine::reconcile::admitted_spec(stored);
    kudo_engine::triggers::judge_client_change(stored, admitted.as_ref(), proposed, old_ov, new_ov).map_err(
        |denied| Error::Denied {
            instance: stored.metadata.name.clone(),
            denied,
        },
    )
}

/// Refuses an OperatorVersion whose autopilot rules (plan field `when`) are invalid: a CEL
/// condition that does not compile, a bad `for`/`cooldown`, a malformed resource, too many rules,
/// or `setParameters` naming an unknown or immutable parameter.
pub fn check_autopilot_rules(ov: &OperatorVersion) -> Result<()> {
    refuse_rules(ov, kudo_package::autopilot::check_operator_version(ov))
}

/// The one refusal of invalid autopilot rules, naming each problem on its own line.
fn refuse_rules(ov: &OperatorVersion, errors: Vec<String>) -> Result<()> {
    if !errors.is_empty() {
        return Err(Error::InvalidAutopilotRules {
            operator_version: ov.metadata.name.clone(),
            errors,
        });
    }
    Ok(())
}

/// Refuses an OperatorVersion whose autopilot rules watch a kind this cluster does not serve
/// (a typo, or a CRD not installed yet): the manager could never evaluate them. Rules whose
/// apiVersion or kind is a template are checked by the manager once rendered.
pub async fn check_autopilot_kinds(cluster: &Cluster, ov: &OperatorVersion) -> Result<()> {
    use kudo_kube::discovery::{Cache, Resolved};
    let discovery = Cache::new(cluster.client.clone());
    let mut errors = Vec::new();
    for (plan, p) in &ov.spec.plans {
        for (i, rule) in p.when.iter().enumerate() {
            let r = &rule.resource;
            if r.api_version.contains("{{") || r.kind.contains("{{") {
                continue;
            }
            // The manager's own discovery lookup, so install and the manager classify a kind alike.
            if let Resolved::Unknown(msg) = discovery.resolve(&r.api_version, &r.kind).await? {
                errors.push(format!("plan {plan:?} when[{i}].resource: {msg}"));
            }
        }
    }
    refuse_rules(ov, errors)
}

/// `kudo_package::verify` plus the checks that need the plan engine (which depends on
/// kudo-package, so they cannot live in it): every plan's `schedule:`, rendered with the
/// parameters' defaults, must be blank or a valid schedule.
pub fn verify_package(
    pkg: &kudo_package::Package,
    checks: kudo_package::verify::ParamChecks,
) -> kudo_package::verify::Verification {
    let mut v = kudo_package::verify::verify(pkg, checks);
    let opts = kudo_package::resources::ConvertOptions {
        instance_name: None,
        namespace: None,
        parameters: BTreeMap::new(),
        service_account: None,
    };
    if let Ok(res) = kudo_package::resources::to_resources(pkg, &opts) {
        let ctx = kudo_package::render::RenderContext::offline(
            &res.instance.metadata.name,
            "default",
            BTreeMap::new(),
        );
        for e in kudo_engine::schedule::check_schedules(&res.operator_version, &ctx) {
            v.error(e);
        }
    }
    v
}
