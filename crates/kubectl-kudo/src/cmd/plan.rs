//! `plan status`, `plan history`, `plan cancel`, `plan trigger`, `plan retry`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use kudo_api::{Instance, OperatorVersion};
use kudo_client::cluster::Cluster;
use kudo_client::plan::TriggerRequest;
use kudo_client::wait::Settled;

use super::cluster::{ClusterOpts, connect};
use super::instance::{WaitOpts, finish_wait};
use super::preview::{self, Change, DryRunOpts};
use crate::Io;
use crate::output::plan_status;

#[derive(Args, Debug)]
pub struct PlanArgs {
    #[command(subcommand)]
    pub command: PlanCommand,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum StatusOutput {
    Yaml,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum PlanCommand {
    /// Show the plans of an Instance as a tree, with the live status of the last executed one.
    #[command(
        after_help = "Examples:\n  kubectl kudo plan status --instance galera-instance\n  kubectl kudo plan status --instance galera-instance --wait\n  kubectl kudo plan status --instance galera-instance -o yaml"
    )]
    Status {
        /// The Instance.
        #[arg(long)]
        instance: String,
        /// Redraw until the plan finishes (in place on a terminal; once at the end on a pipe).
        #[arg(long)]
        wait: bool,
        /// How long --wait waits, in seconds.
        #[arg(long, default_value_t = 300, value_name = "SECONDS")]
        wait_time: u64,
        /// Print the Instance status as YAML or JSON instead of the tree.
        #[arg(short = 'o', long)]
        output: Option<StatusOutput>,
    },
    /// One line per plan: when it last finished, or that it is running or never ran.
    History {
        /// The Instance.
        #[arg(long)]
        instance: String,
    },
    /// Stop the running plan at its next task boundary (status CANCELLED).
    #[command(after_help = "Examples:\n  kubectl kudo plan cancel --instance galera-instance")]
    Cancel {
        /// The Instance.
        #[arg(long)]
        instance: String,
    },
    /// Run a plan now (a new run restarts the plan if it is already running).
    #[command(
        after_help = "Examples:\n  kubectl kudo plan trigger --name backup --instance db\n  kubectl kudo plan trigger --name deploy --instance galera-instance --wait"
    )]
    Trigger {
        /// The plan to run.
        #[arg(long)]
        name: String,
        /// The Instance.
        #[arg(long)]
        instance: String,
        #[command(flatten)]
        wait: WaitOpts,
        #[command(flatten)]
        dry_run: DryRunOpts,
    },
    /// Re-run a FATAL_ERROR plan from its first failed step, keeping the steps that completed.
    #[command(
        long_about = "Re-run a FATAL_ERROR plan from its first failed step, keeping the steps that completed.\n\nThe steps before the failed one are not applied again: the new run starts at the first step that did not complete (in a parallel phase, every step that did not complete runs again). Templates are rendered with the Instance's current parameters. `plan trigger` still restarts a plan from the top, as in KUDO.\n\nRefused, with nothing written, when the plan did not end in FATAL_ERROR or another plan is scheduled or running.",
        after_help = "Examples:\n  kubectl kudo plan retry --instance galera-instance\n  kubectl kudo plan retry --instance galera-instance --plan backup --wait\n\nExit codes:\n  0  the retry was scheduled (with --wait: the plan reached COMPLETE)\n  1  refused (the plan is not FATAL_ERROR, another plan is scheduled, no such plan or Instance),\n     or with --wait: the plan failed again or --wait-time passed"
    )]
    Retry {
        /// The Instance.
        #[arg(long)]
        instance: String,
        /// The plan to retry (default: the FATAL_ERROR plan of the Instance updated last).
        #[arg(long)]
        plan: Option<String>,
        #[command(flatten)]
        wait: WaitOpts,
    },
}

async fn load(cluster: &Cluster, name: &str) -> Result<(Instance, OperatorVersion)> {
    Ok(cluster.instance_and_operator_version(name).await?)
}

fn local_offset() -> chrono::FixedOffset {
    *chrono::Local::now().offset()
}

pub async fn run(opts: &ClusterOpts, args: PlanArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let cluster = connect(opts).await?;
    match args.command {
        PlanCommand::Status {
            instance,
            wait,
            wait_time,
            output,
        } => {
            if let Some(fmt) = output {
                let (inst, _) = load(&cluster, &instance).await?;
                let status = serde_json::to_value(inst.status.unwrap_or_default())?;
                match fmt {
                    StatusOutput::Json => writeln!(io.out, "{}", serde_json::to_string_pretty(&status)?)?,
                    StatusOutput::Yaml => write!(io.out, "{}", serde_saphyr::to_string(&status)?)?,
                }
                return Ok(ExitCode::SUCCESS);
            }
            if !wait {
                let (inst, ov) = load(&cluster, &instance).await?;
                write!(
                    io.out,
                    "{}",
                    plan_status::render(&inst, &ov, &cluster.namespace, &local_offset())
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            status_wait(&cluster, &instance, Duration::from_secs(wait_time), io).await
        }
        PlanCommand::History { instance } => {
            let (inst, ov) = load(&cluster, &instance).await?;
            write!(
                io.out,
                "{}",
                plan_status::render_history(&inst, &ov, &local_offset())
            )?;
            Ok(ExitCode::SUCCESS)
        }
        PlanCommand::Cancel { instance } => {
            let plan = kudo_client::plan::cancel(&cluster, &instance).await?;
            writeln!(
                io.out,
                "Cancelled {plan} plan for {}/{instance} instance",
                cluster.namespace
            )?;
            Ok(ExitCode::SUCCESS)
        }
        PlanCommand::Trigger {
            name,
            instance,
            wait,
            dry_run,
        } => trigger(&cluster, &name, &instance, &wait, &dry_run, io).await,
        PlanCommand::Retry { instance, plan, wait } => {
            retry(&cluster, &instance, plan.as_deref(), &wait, io).await
        }
    }
}

/// `plan trigger`: checks the plan exists, then previews (`--dry-run`) or schedules it.
async fn trigger(
    cluster: &Cluster,
    name: &str,
    instance: &str,
    wait: &WaitOpts,
    dry_run: &DryRunOpts,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    preview::refuse_wait(dry_run, wait.wait)?;
    let req = TriggerRequest {
        instance: instance.to_string(),
        plan: name.to_string(),
    };
    let prepared = kudo_client::plan::prepare_trigger(cluster, &req).await?;
    if dry_run.is_set() {
        let (inst, ov) = (&prepared.instance, &prepared.operator_version);
        let proposed = prepared.proposed();
        let change = Change::new(inst, &proposed, ov, ov);
        return preview::preview(cluster, &change, dry_run, io).await;
    }
    let triggered = kudo_client::plan::trigger(cluster, &prepared).await?;
    writeln!(
        io.out,
        "Triggered {name} plan for {}/{instance} instance",
        cluster.namespace
    )?;
    finish_wait(cluster, instance, Some(triggered.previous), wait, io).await
}

/// `plan retry`: schedules the retry (`kudo_client::plan::retry`), then waits like `plan trigger`.
async fn retry(
    cluster: &Cluster,
    instance: &str,
    plan: Option<&str>,
    wait: &WaitOpts,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    let retried = kudo_client::plan::retry(cluster, instance, plan).await?;
    writeln!(
        io.out,
        "Retrying {} plan for {}/{instance} instance from its first failed step (failed run {})",
        retried.target.plan, cluster.namespace, retried.target.failed_uid
    )?;
    finish_wait(cluster, instance, Some(retried.previous), wait, io).await
}

/// `plan status --wait`: on a terminal, redraws the tree in place (cursor up + clear) each time it
/// changes; on a pipe, prints the final tree once so the output is never garbled.
pub async fn status_wait(
    cluster: &Cluster,
    name: &str,
    timeout: Duration,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    let tty = io.out_is_terminal;
    let namespace = cluster.namespace.clone();
    let mut redraw = crate::output::tree::Redraw::default();
    let out = &mut *io.out;
    let mut observe = |inst: &Instance, ov: &OperatorVersion, last_poll: bool| -> std::io::Result<()> {
        let text = plan_status::render(inst, ov, &namespace, &local_offset());
        redraw.show(out, text, tty, last_poll)
    };
    match kudo_client::wait::wait_until_settled(cluster, name, timeout, &mut observe).await? {
        Settled::Denied(msg) => {
            writeln!(io.err, "the manager refused the change: {msg}")?;
            Ok(ExitCode::from(1))
        }
        Settled::Finished { failed: true } => Ok(ExitCode::from(1)),
        Settled::Finished { failed: false } => Ok(ExitCode::SUCCESS),
    }
}
