//! `kubectl kudo migrate`: take over a cluster KUDO v0.19 runs, without recreating anything
//! (`kudo_client::migrate`; the decisions are `kudo_engine::migrate`).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use kudo_client::init::Setup;
use kudo_client::migrate::{Inspection, MigrateRequest};

use super::cluster::{ClusterOpts, connect};
use super::format::Output;

#[derive(Args, Debug)]
#[command(
    about = "Move a cluster from KUDO 0.19's manager to kudo-rs without recreating objects",
    long_about = "Move a cluster from KUDO 0.19's manager to kudo-rs without recreating objects.\n\n\
Without --yes, prints what KUDO left and the steps still to run, and changes nothing. With --yes,\n\
in order: saves KUDO's webhook configuration, its Secret and the manager's replicas (ConfigMap\n\
kudo-migration in KUDO's namespace); scales KUDO's manager StatefulSet to 0 and waits until its\n\
pods are gone; deletes KUDO's MutatingWebhookConfiguration, then its Secret and cert-manager\n\
objects; installs the kudo-rs manager (as `init`, in -n NAMESPACE, default KUDO's namespace);\n\
records each Instance's spec as admitted, so a plan KUDO was running continues at its step;\n\
moves the field ownership of every object each Instance applied from KUDO's manager (`manager`,\n\
Update) to kudo's server-side apply (`kudo`, Apply); then removes kudo.dev/last-applied-\n\
configuration. Pods are never touched. Each finished step is recorded: killed midway, run it\n\
again and it continues. --rollback gives the cluster back to KUDO's manager.",
    after_help = "Examples:\n  kubectl kudo migrate                      # the plan, nothing changed\n  kubectl kudo migrate -o yaml\n  kubectl kudo migrate --yes\n  kubectl kudo migrate --yes -n kudo-rs     # kudo-rs's manager in its own namespace\n  kubectl kudo migrate --rollback"
)]
pub struct MigrateArgs {
    /// Act (default: print the plan only).
    #[arg(long, conflicts_with = "rollback")]
    pub yes: bool,
    /// Give the cluster back to KUDO's manager: kudo-rs's manager scaled to 0, KUDO's webhook,
    /// Secret and last-applied annotations restored, KUDO's manager scaled back.
    #[arg(long)]
    pub rollback: bool,
    /// The namespace KUDO was installed in.
    #[arg(long, default_value = "kudo-system", value_name = "NAMESPACE")]
    pub kudo_namespace: String,
    /// Print the inspection as YAML or JSON.
    #[arg(short = 'o', long, conflicts_with_all = ["yes", "rollback"])]
    pub output: Option<Output>,
    /// The kudo-rs manager image (default: this version's).
    #[arg(short = 'i', long, value_name = "IMAGE")]
    pub kudo_image: Option<String>,
    /// Seconds to wait for KUDO's manager pods to go.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub timeout: u64,
}

/// Runs `migrate`.
pub async fn run(opts: &ClusterOpts, args: MigrateArgs, io: &mut crate::Io<'_>) -> Result<ExitCode> {
    let namespace = opts
        .namespace
        .clone()
        .unwrap_or_else(|| args.kudo_namespace.clone());
    let setup = Setup {
        image: args.kudo_image.clone(),
        ..Setup::default()
    };
    let req = MigrateRequest {
        kudo_namespace: &args.kudo_namespace,
        namespace: &namespace,
        setup: &setup,
        timeout: Duration::from_secs(args.timeout),
    };
    let cluster = connect(opts).await?;
    let mut say = |line: &str| {
        let _ = writeln!(io.err, "{line}");
    };
    if args.rollback {
        kudo_client::migrate::rollback(&cluster, &req, &mut say).await?;
        writeln!(io.out, "✅ KUDO's manager runs the cluster again")?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.yes {
        kudo_client::migrate::run(&cluster, &req, &mut say).await?;
        writeln!(
            io.out,
            "✅ kudo-rs runs the cluster; undo with `kubectl kudo migrate --rollback`"
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let inspection = kudo_client::migrate::inspect(&cluster, &req).await?;
    match args.output {
        Some(Output::Yaml) => write!(io.out, "{}", serde_saphyr::to_string(&inspection)?)?,
        Some(Output::Json) => writeln!(io.out, "{}", serde_json::to_string_pretty(&inspection)?)?,
        None => print_plan(&inspection, io)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn print_plan(i: &Inspection, io: &mut crate::Io<'_>) -> Result<()> {
    let out = &mut io.out;
    match i.manager_replicas {
        Some(n) => writeln!(
            out,
            "KUDO manager: StatefulSet {}/kudo-controller-manager, {n} replica(s), {} pod(s)",
            i.kudo_namespace, i.manager_pods
        )?,
        None => writeln!(out, "KUDO manager: none in {}", i.kudo_namespace)?,
    }
    writeln!(out, "KUDO webhook configurations: {}", list_or_none(&i.webhooks))?;
    writeln!(
        out,
        "KUDO webhook Secret: {}",
        if i.webhook_secret { "present" } else { "none" }
    )?;
    for inst in &i.instances {
        let run = if inst.plan_execution.is_empty() {
            "no plan running"
        } else {
            &inst.plan_execution
        };
        writeln!(
            out,
            "Instance {} ({run}){}",
            inst.instance,
            if inst.converted { ", converted" } else { "" }
        )?;
        for o in &inst.objects {
            let marks = [
                (o.kudo_owned, "KUDO owns fields"),
                (o.last_applied, "last-applied"),
            ];
            let marks: Vec<&str> = marks.iter().filter(|(on, _)| *on).map(|(_, t)| *t).collect();
            writeln!(
                out,
                "  {} [{}] {}",
                o.object,
                o.managers.join(", "),
                marks.join(", ")
            )?;
        }
    }
    writeln!(out, "Steps done: {}", list_or_none(&i.done))?;
    writeln!(out, "Steps to run: {}", list_or_none(&i.remaining))?;
    if !i.remaining.is_empty() {
        writeln!(
            out,
            "Nothing was changed; run `kubectl kudo migrate --yes` to act."
        )?;
    }
    Ok(())
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}
