//! `kubectl kudo manager`: the KUDO manager (controller) as a long-running process — in a pod
//! (in-cluster service account) or against any cluster a kubeconfig points to.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::cluster::{ClusterOpts, connect};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo manager                       # in a pod: uses the service account\n  kubectl kudo manager --kubeconfig ~/.kube/config"
)]
pub struct ManagerArgs {
    /// Field manager name used for server-side apply.
    #[arg(long, default_value = "kudo")]
    pub field_manager: String,
    /// How many Instances are reconciled in parallel.
    #[arg(long, default_value_t = 4)]
    pub concurrency: u16,
    /// Log as JSON lines (with instance/plan/step fields) instead of text; filter with RUST_LOG.
    #[arg(long)]
    pub json_logs: bool,
}

pub async fn run(opts: &ClusterOpts, args: ManagerArgs) -> Result<ExitCode> {
    kudo_controller::init_tracing(args.json_logs).context("cannot set up logging")?;
    let cluster = connect(opts).await?;
    let config = kudo_controller::ControllerConfig {
        field_manager: args.field_manager,
        concurrency: args.concurrency,
        ..Default::default()
    };
    eprintln!("kudo manager starting (field manager {:?})", config.field_manager);
    kudo_controller::run(cluster.client, config, super::dev::wait_for_signal())
        .await
        .context("the manager stopped with an error")?;
    Ok(ExitCode::SUCCESS)
}
