//! `kubectl kudo repo …` and `search` (owned by the repository work, issue #8).

use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::cluster::ClusterOpts;

#[derive(Args, Debug)]
pub struct RepoArgs {
    #[command(subcommand)]
    pub command: RepoCommand,
}

#[derive(Subcommand, Debug)]
pub enum RepoCommand {}

pub fn run(_opts: &ClusterOpts, args: RepoArgs) -> anyhow::Result<ExitCode> {
    match args.command {}
}
