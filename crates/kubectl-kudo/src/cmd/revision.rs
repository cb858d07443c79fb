//! `history` and `rollback` (kudo-rs extension): the revisions the manager records for
//! every plan run it admits (see `kudo_engine::revision`), and the way back to one of them.
//!
//! The decisions are the engine's ([`kudo_engine::rollback`]); this module reads the Instance,
//! its revisions and OperatorVersions, refuses before writing anything, and writes one merge
//! patch guarded by the Instance's resourceVersion.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use kudo_api::{Instance, OperatorVersion};
use kudo_client::cluster::{Cluster, KudoKind};
use kudo_client::wait::PreviousRuns;
use kudo_engine::revision::{ROLLBACK_ANNOTATION, Revision};
use kudo_engine::rollback::{self, Judged, RollbackMark};
use serde::Serialize;

use super::cluster::{ClusterOpts, connect};
use super::instance::{WaitOpts, finish_wait};
use super::preview::{self, Change, DryRunOpts};
use crate::Io;

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum HistoryOutput {
    Yaml,
    Json,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Every change the manager admits (install, update, upgrade, plan trigger, a schedule, a Secret\nrotation, an autopilot rule, a rollback, a retry) is recorded as a numbered revision: a\nControllerRevision owned by the Instance with its parameters (sensitive ones only as their\nSecret reference), OperatorVersion, plan, outcome and who started it. The manager keeps the last\n--revision-history-limit (default 10).\n\nExamples:\n  kubectl kudo history --instance galera-instance\n  kubectl kudo history --instance galera-instance -o yaml"
)]
pub struct HistoryArgs {
    /// The Instance.
    #[arg(long)]
    pub instance: String,
    /// Print the revisions as YAML or JSON (with their parameters) instead of the table.
    #[arg(short = 'o', long)]
    pub output: Option<HistoryOutput>,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Runs the package's `rollback` plan when it has one (templates see .Rollback.FromRevision and\n.Rollback.ToRevision), else the plan KUDO's trigger rules choose for the change. KUDO's rules\nfor a change apply: a rollback that changes an immutable parameter is refused; while a plan\nruns, a rollback whose plan is the running one restarts it with the restored values, any\nother is refused unless --force, which cancels the running plan first. A rollback is itself\na new revision.\n\nExit status: 0 written (with --wait: the plan completed); 1 refused, or the plan failed.\n\nWith --dry-run[=client|server] nothing is written: the decision, the objects the plan would\napply, and with =server their diff against the live ones (see `update --help`).\n\nExamples:\n  kubectl kudo rollback --instance galera-instance\n  kubectl kudo rollback --instance galera-instance --dry-run=server\n  kubectl kudo rollback --instance galera-instance --to-revision 2 --wait\n  kubectl kudo rollback --instance galera-instance --force   # an upgrade is stuck"
)]
pub struct RollbackArgs {
    /// The Instance.
    #[arg(long)]
    pub instance: String,
    /// The revision to restore (default: the newest one whose plan completed and whose values
    /// differ from the current ones).
    #[arg(long, value_name = "N")]
    pub to_revision: Option<u64>,
    /// Cancel a running plan that KUDO's rules would not let this rollback through, then roll back.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub wait: WaitOpts,
    #[command(flatten)]
    pub dry_run: DryRunOpts,
}

/// One revision as `history -o yaml|json` prints it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Printed<'r> {
    revision: u64,
    name: &'r str,
    updated: &'r str,
    status: &'static str,
    #[serde(flatten)]
    data: &'r kudo_engine::revision::RevisionData,
}

async fn revisions_of(cluster: &Cluster, inst: &Instance) -> Result<Vec<Revision>> {
    let uid = inst
        .metadata
        .other
        .get("uid")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    kudo_controller::revisions::list(&cluster.client, &cluster.namespace, &inst.metadata.name, uid)
        .await
        .with_context(|| format!("listing the revisions of instance {}", inst.metadata.name))
}

pub async fn history(opts: &ClusterOpts, args: HistoryArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let cluster = connect(opts).await?;
    let inst = cluster.instance(&args.instance).await?;
    let revs = revisions_of(&cluster, &inst).await?;
    let printed: Vec<Printed> = revs
        .iter()
        .map(|r| Printed {
            revision: r.number,
            name: &r.name,
            updated: r.updated(),
            status: r.status(),
            data: &r.data,
        })
        .collect();
    match args.output {
        Some(HistoryOutput::Json) => writeln!(io.out, "{}", serde_json::to_string_pretty(&printed)?)?,
        Some(HistoryOutput::Yaml) => write!(io.out, "{}", serde_saphyr::to_string(&printed)?)?,
        None if revs.is_empty() => writeln!(
            io.err,
            "No revisions recorded for instance {}/{} (the manager records one per plan run it admits).",
            cluster.namespace, args.instance
        )?,
        None => write!(io.out, "{}", table(&revs))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The `history` table, columns padded as kubectl pads them (three spaces between columns).
fn table(revs: &[Revision]) -> String {
    let header = [
        "REVISION",
        "UPDATED",
        "OPERATOR-VERSION",
        "PLAN",
        "STATUS",
        "BY",
        "CHANGE",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in revs {
        rows.push(vec![
            r.number.to_string(),
            r.updated().to_string(),
            r.data.operator_version.clone(),
            r.data.plan.clone(),
            r.status().to_string(),
            r.data.started_by.word().to_string(),
            r.data.change.clone(),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            let cells: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:w$}")).collect();
            format!("{}\n", cells.join("   ").trim_end())
        })
        .collect()
}

/// What a rollback will write, judged before anything is.
struct Plan {
    target: Revision,
    from: u64,
    proposed: kudo_api::InstanceSpec,
    judged: Judged,
    /// The OperatorVersion the Instance runs, and the one the rollback restores.
    current_ov: OperatorVersion,
    target_ov: OperatorVersion,
}

/// Reads what the rollback needs and judges it; `Err` is the refusal (nothing was written).
async fn plan_rollback(cluster: &Cluster, inst: &Instance, to: Option<u64>) -> Result<Plan> {
    let name = &inst.metadata.name;
    let refuse = |e: &dyn std::fmt::Display| anyhow::anyhow!("rolling back instance {name}: {e}");
    let current_ov = cluster.operator_version_of(inst).await?;
    let revs = revisions_of(cluster, inst).await?;
    let target = rollback::target(&revs, &inst.spec, &current_ov, to).map_err(|e| refuse(&e))?;
    let target_ov: OperatorVersion = cluster
        .get(KudoKind::OperatorVersion, &target.data.operator_version)
        .await?
        .ok_or_else(|| {
            refuse(&format!(
                "the OperatorVersion {} of revision {} no longer exists",
                target.data.operator_version, target.number
            ))
        })?;
    let proposed = rollback::restored_spec(&inst.spec, &target.data, &current_ov);
    let admitted = kudo_controller::admitted_spec(inst);
    let judged = rollback::judge(
        inst,
        admitted.as_ref(),
        &proposed,
        &current_ov,
        &target_ov,
        target.number,
    )
    .map_err(|e| refuse(&e))?;
    Ok(Plan {
        target: target.clone(),
        from: kudo_engine::revision::next_number(&revs) - 1,
        proposed,
        judged,
        current_ov,
        target_ov,
    })
}

/// The merge patch of a rollback: the restored values (a value the target lacks is removed), the
/// mark, and the resourceVersion the decision was made on.
fn rollback_patch(inst: &Instance, plan: &Plan) -> Result<serde_json::Value> {
    fn merged<V: Serialize + PartialEq>(
        old: &BTreeMap<String, V>,
        new: &BTreeMap<String, V>,
    ) -> Result<serde_json::Map<String, serde_json::Value>> {
        let mut m = serde_json::Map::new();
        for k in old.keys().filter(|k| !new.contains_key(*k)) {
            m.insert(k.clone(), serde_json::Value::Null);
        }
        for (k, v) in new.iter().filter(|(k, v)| old.get(*k) != Some(*v)) {
            m.insert(k.clone(), serde_json::to_value(v)?);
        }
        Ok(m)
    }
    let mark = RollbackMark {
        from: plan.from,
        to: plan.target.number,
        uid: None,
    };
    let p = &plan.proposed;
    Ok(serde_json::json!({
        "metadata": {
            "resourceVersion": inst.metadata.other.get("resourceVersion"),
            "annotations": {ROLLBACK_ANNOTATION: mark.to_annotation()},
        },
        "spec": {
            "operatorVersion": {"name": p.operator_version.name},
            "parameters": merged(&inst.spec.parameters, &p.parameters)?,
            "parameterSources": merged(&inst.spec.parameter_sources, &p.parameter_sources)?,
        },
    }))
}

pub async fn rollback(opts: &ClusterOpts, args: RollbackArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    preview::refuse_wait(&args.dry_run, args.wait.wait)?;
    let cluster = connect(opts).await?;
    let mut inst = cluster.instance(&args.instance).await?;
    let mut plan = plan_rollback(&cluster, &inst, args.to_revision).await?;
    if let Some(running) = plan.judged.blocked_by.clone() {
        if !args.force {
            bail!(
                "rolling back instance {}: plan '{running}' is scheduled (or running) and the rollback would run plan '{}'; KUDO does not override a running plan: use --force to cancel '{running}' first",
                args.instance,
                plan.judged.plan
            );
        }
        if args.dry_run.is_set() {
            writeln!(io.err, "# --force would first cancel plan {running}")?;
            let calm = without_run(&inst)?;
            let plan = plan_rollback(&cluster, &calm, Some(plan.target.number)).await?;
            return preview_rollback(&cluster, &calm, &plan, &args.dry_run, io).await;
        }
        inst = cancel_and_wait(&cluster, &args.instance, &running, io).await?;
        plan = plan_rollback(&cluster, &inst, Some(plan.target.number)).await?;
        if let Some(still) = &plan.judged.blocked_by {
            bail!(
                "rolling back instance {}: plan '{still}' started meanwhile; try again",
                args.instance
            );
        }
    }
    if args.dry_run.is_set() {
        return preview_rollback(&cluster, &inst, &plan, &args.dry_run, io).await;
    }
    let previous = PreviousRuns::of(&inst);
    let plan = write_rollback(&cluster, inst, plan).await?;
    writeln!(
        io.out,
        "instance {}/{} rolled back to revision {}: plan {} will run",
        cluster.namespace, args.instance, plan.target.number, plan.judged.plan
    )?;
    finish_wait(&cluster, &args.instance, Some(previous), &args.wait, io).await
}

/// `rollback --dry-run`: the preview of the restored spec with the rollback's plan and template
/// data (`.Rollback`), nothing written.
async fn preview_rollback(
    cluster: &Cluster,
    inst: &Instance,
    plan: &Plan,
    opts: &DryRunOpts,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    let revisions = (plan.from, plan.target.number);
    let adjust = move |ctx: &mut kudo_package::render::RenderContext| ctx.rollback = Some(revisions);
    let change = Change::new(inst, &plan.proposed, &plan.current_ov, &plan.target_ov)
        .with_plan(&plan.judged.plan)
        .with_adjust(&adjust);
    preview::preview(cluster, &change, opts, io).await
}

/// The Instance as it will be once `--force` cancelled its running plan: no plan scheduled, in
/// the spec and in the spec the manager admitted.
fn without_run(inst: &Instance) -> Result<Instance> {
    let mut calm = inst.clone();
    calm.spec.plan_execution = Default::default();
    if let Some(mut admitted) = kudo_controller::admitted_spec(inst) {
        admitted.plan_execution = Default::default();
        calm.metadata.annotations.insert(
            kudo_controller::ADMITTED_SPEC_ANNOTATION.to_string(),
            serde_json::to_string(&admitted)?,
        );
    }
    Ok(calm)
}

/// Writes the rollback guarded by the resourceVersion it was judged on. The manager writes the
/// Instance's status while a plan runs, so a conflict is likely then: the Instance is read and the
/// rollback judged again (same target revision), a few times. Returns what was written.
async fn write_rollback(cluster: &Cluster, mut inst: Instance, mut plan: Plan) -> Result<Plan> {
    let api = cluster.api(KudoKind::Instance);
    let name = inst.metadata.name.clone();
    for _ in 0..10 {
        let patch = rollback_patch(&inst, &plan)?;
        match api
            .patch(
                &name,
                &kudo_client::cluster::patch_params(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => return Ok(plan),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                inst = cluster.instance(&name).await?;
                let again = plan_rollback(cluster, &inst, Some(plan.target.number)).await?;
                if let Some(running) = &again.judged.blocked_by {
                    bail!("rolling back instance {name}: plan '{running}' started meanwhile; try again");
                }
                plan = again;
            }
            Err(e) => return Err(kudo_client::cluster::api_error(e, KudoKind::Instance, &name).into()),
        }
    }
    bail!(
        "rolling back instance {name}: the Instance kept changing while the rollback was written; try again"
    )
}

/// `--force`: cancels the running plan and waits (up to a minute) until the manager has stopped
/// it and cleared `spec.planExecution`. Returns the Instance as it is then.
async fn cancel_and_wait(cluster: &Cluster, name: &str, running: &str, io: &mut Io<'_>) -> Result<Instance> {
    cluster
        .merge_patch(KudoKind::Instance, name, kudo_engine::reconcile::cancel_patch())
        .await?;
    writeln!(
        io.err,
        "cancelling plan {running} of instance {}/{name} ...",
        cluster.namespace
    )?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let inst = cluster.instance(name).await?;
        let admitted = kudo_controller::admitted_spec(&inst);
        let idle = |s: &kudo_api::InstanceSpec| s.plan_execution.plan_name.is_empty();
        if idle(&inst.spec) && admitted.as_ref().is_none_or(idle) {
            return Ok(inst);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("plan {running} of instance {name} was not cancelled within 60s; is the manager running?");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudo_engine::revision::{Outcome, RevisionData, StartedBy};

    #[test]
    fn the_history_table_has_the_columns_of_the_issue_and_pads_them() {
        let rev = |n: u64, outcome, change: &str| Revision {
            number: n,
            name: format!("db-{n}"),
            created: "2026-01-01T00:00:00Z".into(),
            finished: None,
            outcome,
            data: RevisionData {
                operator_version: "galera-0.1.0".into(),
                version: "0.1.0".into(),
                plan: "deploy".into(),
                plan_uid: "u".into(),
                parameters: BTreeMap::new(),
                parameter_sources: BTreeMap::new(),
                started_by: StartedBy::User,
                change: change.into(),
            },
        };
        let t = table(&[
            rev(1, Some(Outcome::Complete), "install"),
            rev(10, None, "NODE_COUNT: 3 → 5"),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "REVISION   UPDATED                OPERATOR-VERSION   PLAN     STATUS        BY     CHANGE"
        );
        assert_eq!(
            lines[2],
            "10         2026-01-01T00:00:00Z   galera-0.1.0       deploy   IN_PROGRESS   user   NODE_COUNT: 3 → 5"
        );
    }
}
