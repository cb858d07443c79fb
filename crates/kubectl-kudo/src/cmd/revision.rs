//! `history` and `rollback` (kudo-rs extensions): the revisions the manager records for every plan
//! run it admits (see `kudo_engine::revision`), and the way back to one of them.
//!
//! The decisions are the engine's ([`kudo_engine::rollback`]), the reads and the write
//! `kudo_client::rollback`'s; this module adds `--force` (cancel first), the preview and the wait.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use kudo_api::Instance;
use kudo_client::cluster::Cluster;
use kudo_client::rollback::{self, RollbackPlan};
use kudo_client::wait::PreviousRuns;
use kudo_engine::revision::Revision;
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
    kudo_client::revisions::of(&cluster.client, inst)
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

pub async fn rollback(opts: &ClusterOpts, args: RollbackArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    preview::refuse_wait(&args.dry_run, args.wait.wait)?;
    let cluster = connect(opts).await?;
    let mut inst = cluster.instance(&args.instance).await?;
    let mut plan = rollback::prepare(&cluster, &inst, args.to_revision).await?;
    if let Some(running) = plan.judged.blocked_by.clone() {
        if !args.force {
            rollback::refuse_blocked(&inst, &plan)?;
        }
        if args.dry_run.is_set() {
            writeln!(io.err, "# --force would first cancel plan {running}")?;
            let calm = rollback::without_run(&inst)?;
            let plan = rollback::prepare(&cluster, &calm, Some(plan.target.number)).await?;
            return preview_rollback(&cluster, &calm, &plan, &args.dry_run, io).await;
        }
        writeln!(
            io.err,
            "cancelling plan {running} of instance {}/{} ...",
            cluster.namespace, args.instance
        )?;
        inst = rollback::cancel_and_wait(&cluster, &args.instance, &running, Duration::from_secs(60)).await?;
        plan = rollback::prepare(&cluster, &inst, Some(plan.target.number)).await?;
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
    let plan = rollback::write(&cluster, inst, plan).await?;
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
    plan: &RollbackPlan,
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

#[cfg(test)]
mod tests {
    use super::*;
    use kudo_engine::revision::{Outcome, RevisionData, StartedBy};
    use std::collections::BTreeMap;

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
