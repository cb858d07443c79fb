//! `plan status`, `plan history`, `plan cancel`, `plan trigger`, `plan retry`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use kudo_api::{Instance, OperatorVersion};

use super::cluster::{Cluster, ClusterOpts, KudoKind, connect};
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
    let instance = cluster.instance(name).await?;
    let ov = cluster.operator_version_of(&instance).await?;
    Ok((instance, ov))
}

fn local_offset() -> chrono::FixedOffset {
    *chrono::Local::now().offset()
}

/// The manager's verdict on a change it refused to run (condition `ChangeAccepted=False`).
fn denied_change(instance: &Instance) -> Option<String> {
    let status = instance.status.as_ref()?;
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "ChangeAccepted" && c.status == "False")
        .map(|c| c.message.clone())
}

/// True when the plan shown live has finished, or the manager refused the change. An Instance on
/// which no plan ran yet is not settled: the manager may not have picked it up yet.
fn settled(instance: &Instance) -> bool {
    if denied_change(instance).is_some() {
        return true;
    }
    if !instance.spec.plan_execution.plan_name.is_empty() {
        return false;
    }
    plan_status::last_executed_plan(instance).is_some_and(|p| p.status.is_terminal())
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
            let (inst, _) = load(&cluster, &instance).await?;
            let plan = inst.spec.plan_execution.plan_name.clone();
            if plan.is_empty() {
                bail!("no plan is running on instance {}/{instance}", cluster.namespace);
            }
            cluster
                .merge_patch(KudoKind::Instance, &instance, kudo_controller::cancel_patch())
                .await?;
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
    let (inst, ov) = load(cluster, instance).await?;
    if !ov.spec.plans.contains_key(name) {
        let known: Vec<&str> = ov.spec.plans.keys().map(String::as_str).collect();
        bail!(
            "plan {name} does not exist in operator version {} (plans: {})",
            ov.metadata.name,
            known.join(", ")
        );
    }
    if dry_run.is_set() {
        let proposed = trigger_spec(&inst, name);
        let change = Change::new(&inst, &proposed, &ov, &ov);
        return preview::preview(cluster, &change, dry_run, io).await;
    }
    trigger_plan(cluster, &inst, &ov, name).await?;
    writeln!(
        io.out,
        "Triggered {name} plan for {}/{instance} instance",
        cluster.namespace
    )?;
    finish_wait(
        cluster,
        instance,
        Some(super::wait::PreviousRuns::of(&inst)),
        wait,
        io,
    )
    .await
}

/// `plan retry`: schedules the retry ([`retry_plan`]), then waits like `plan trigger`.
async fn retry(
    cluster: &Cluster,
    instance: &str,
    plan: Option<&str>,
    wait: &WaitOpts,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    let (inst, ov) = load(cluster, instance).await?;
    let target = retry_plan(cluster, &inst, &ov, plan).await?;
    writeln!(
        io.out,
        "Retrying {} plan for {}/{instance} instance from its first failed step (failed run {})",
        target.plan, cluster.namespace, target.failed_uid
    )?;
    let previous = super::wait::PreviousRuns::of(&inst);
    finish_wait(cluster, instance, Some(previous), wait, io).await
}

/// `plan retry`: picks the failed run ([`kudo_engine::retry::target`]), checks that the manager
/// would admit the trigger (as `plan trigger` does), then writes the retry annotation and the
/// trigger in one merge patch ([`write_trigger`]). A refusal writes nothing.
pub async fn retry_plan(
    cluster: &Cluster,
    instance: &Instance,
    ov: &OperatorVersion,
    plan: Option<&str>,
) -> Result<kudo_engine::retry::RetryTarget> {
    let who = format!("{}/{}", cluster.namespace, instance.metadata.name);
    let status = instance.status.clone().unwrap_or_default();
    let target = kudo_engine::retry::target(&who, &instance.spec, &status, plan)?;
    if !ov.spec.plans.contains_key(&target.plan) {
        bail!(
            "plan {} no longer exists in operator version {}: it cannot be retried",
            target.plan,
            ov.metadata.name
        );
    }
    write_trigger(cluster, instance, ov, &target.plan, Some(&target.failed_uid)).await?;
    Ok(target)
}

/// Schedules `plan` with a fresh uid (what KUDO's `plan trigger` wrote), unless KUDO's admission
/// rules refuse it (e.g. another plan is running): then nothing is written.
pub async fn trigger_plan(
    cluster: &Cluster,
    instance: &kudo_api::Instance,
    ov: &kudo_api::OperatorVersion,
    plan: &str,
) -> Result<()> {
    write_trigger(cluster, instance, ov, plan, None).await
}

/// Writes the direct trigger of `plan` ([`kudo_controller::trigger_patch`]; `retry_of`: the failed
/// run a retry resumes) unless KUDO's admission rules refuse it.
async fn write_trigger(
    cluster: &Cluster,
    instance: &Instance,
    ov: &OperatorVersion,
    plan: &str,
    retry_of: Option<&str>,
) -> Result<()> {
    let proposed = trigger_spec(instance, plan);
    super::instance::refuse_denied(instance, &proposed, ov, ov)?;
    let patch = kudo_controller::trigger_patch(plan, &proposed.plan_execution.uid, retry_of);
    cluster
        .merge_patch(KudoKind::Instance, &instance.metadata.name, patch)
        .await
}

/// The spec `plan trigger` writes: `planExecution` naming `plan` with a fresh uid.
pub fn trigger_spec(instance: &kudo_api::Instance, plan: &str) -> kudo_api::InstanceSpec {
    let mut proposed = instance.spec.clone();
    proposed.plan_execution.plan_name = plan.to_string();
    proposed.plan_execution.uid = uuid::Uuid::new_v4().to_string();
    proposed
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
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let (inst, ov) = load(cluster, name).await?;
        let text = plan_status::render(&inst, &ov, &cluster.namespace, &local_offset());
        let done = settled(&inst);
        if tty && text != last {
            let out = &mut *io.out;
            let previous_lines = last.lines().count() + usize::from(last.ends_with("\n\n"));
            if previous_lines > 0 {
                write!(out, "\x1b[{previous_lines}A\x1b[J")?;
            }
            write!(out, "{text}")?;
            out.flush()?;
            last = text.clone();
        }
        if done {
            if !tty {
                write!(io.out, "{text}")?;
            }
            if let Some(msg) = denied_change(&inst) {
                writeln!(io.err, "the manager refused the change: {msg}")?;
                return Ok(ExitCode::from(1));
            }
            let failed = plan_status::last_executed_plan(&inst).is_some_and(|p| !p.status.is_finished());
            return Ok(if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            });
        }
        if tokio::time::Instant::now() > deadline {
            if !tty {
                write!(io.out, "{text}")?;
            }
            bail!(
                "timed out after {}s waiting for the plan of {name} to finish",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
