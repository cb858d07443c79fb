//! `kubectl kudo template render` (owned by the template work, issue #2).

use std::process::ExitCode;

use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct TemplateArgs {
    #[command(subcommand)]
    pub command: TemplateCommand,
}

#[derive(Subcommand, Debug)]
pub enum TemplateCommand {}

pub fn run(args: TemplateArgs) -> anyhow::Result<ExitCode> {
    match args.command {}
}
