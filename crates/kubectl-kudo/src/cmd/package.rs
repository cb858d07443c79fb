//! `kubectl kudo package …` (owned by the package work, issue #3).

use std::process::ExitCode;

use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct PackageArgs {
    #[command(subcommand)]
    pub command: PackageCommand,
}

#[derive(Subcommand, Debug)]
pub enum PackageCommand {}

pub fn run(args: PackageArgs) -> anyhow::Result<ExitCode> {
    match args.command {}
}
