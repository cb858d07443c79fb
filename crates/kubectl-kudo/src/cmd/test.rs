//! `kubectl kudo test` (owned by the test-harness work, issue #9).

use std::process::ExitCode;

use clap::Args;

use super::cluster::ClusterOpts;

#[derive(Args, Debug)]
pub struct TestArgs {}

pub async fn run(_opts: &ClusterOpts, _args: TestArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("kubectl kudo test is being written")
}
