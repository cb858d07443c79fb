//! `kubectl kudo ui`: serves the local web view of `kudo_ui` over the user's kubeconfig until
//! Ctrl-C.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::cluster::{ClusterOpts, connect};
use crate::Io;

#[derive(Args, Debug)]
#[command(
    after_help = "Prints a URL with a random token; the first request trades it for a cookie (HttpOnly,\nSameSite=Strict), and a request without it is refused (401). The page acts with your kubeconfig's\ncredentials: it lists the Instances of every namespace you may list (of one with -n), draws\neach Instance's plans (phases, steps, their strategy and status, what a step waits for) with\nits Events and revisions, live, compares two revisions, and after a confirmation triggers,\ncancels or retries a plan or rolls back to a revision (what plan trigger|cancel|retry and\nrollback do). It shows fleet rollouts wave by wave. It loads nothing from outside this process.\n\nExamples:\n  kubectl kudo ui\n  kubectl kudo ui -n team-a --address 127.0.0.1:8088\n  kubectl kudo ui --address 0.0.0.0:8088   # every interface: anyone with the token can act as you"
)]
pub struct UiArgs {
    /// Address to listen on (port 0: a free one). Loopback by default: only this machine reaches it.
    #[arg(long, default_value = "127.0.0.1:0", value_name = "IP:PORT")]
    pub address: SocketAddr,
}

/// Serves until SIGINT/SIGTERM.
pub async fn run(opts: &ClusterOpts, args: UiArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let cluster = connect(opts).await?;
    let ui = kudo_ui::Ui {
        client: cluster.client,
        namespace: opts.namespace.clone(),
    };
    let server = kudo_ui::Server::bind(ui, args.address).await?;
    if !server.addr().ip().is_loopback() {
        writeln!(
            io.err,
            "warning: serving on {}, not a loopback address: whoever has the token acts with your \
             credentials",
            server.addr()
        )?;
    }
    writeln!(io.out, "kubectl kudo ui: open {}", server.url())?;
    writeln!(io.err, "Serving until Ctrl-C.")?;
    io.out.flush()?;
    server.run(super::dev::wait_for_signal()).await?;
    Ok(ExitCode::SUCCESS)
}
