//! `kubectl kudo diagnostics collect`: dump everything useful for a bug report about one Instance
//! into a directory tree in KUDO's layout, sensitive values redacted (what is collected and how:
//! `kudo_client::diagnostics`). Prints where it wrote and what it could not collect.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use kudo_client::diagnostics::{CollectRequest, Settings};

use super::cluster::{ClusterOpts, connect};

#[derive(Args, Debug)]
pub struct DiagnosticsArgs {
    #[command(subcommand)]
    pub command: DiagnosticsCommand,
}

#[derive(Subcommand, Debug)]
pub enum DiagnosticsCommand {
    /// Collect the objects and logs of an Instance (and its child Instances) and of the KUDO manager.
    #[command(
        after_help = "Examples:\n  kubectl kudo diagnostics collect --instance galera-instance\n  kubectl kudo diagnostics collect --instance db -O /tmp/db-diag --log-since 1h"
    )]
    Collect(CollectArgs),
}

#[derive(Args, Debug)]
pub struct CollectArgs {
    /// The Instance to collect diagnostics for.
    #[arg(long)]
    pub instance: String,
    /// Directory to write to; must not exist yet.
    #[arg(short = 'O', long = "output-directory", default_value = "diag")]
    pub output_directory: PathBuf,
    /// Only logs newer than this duration (e.g. 30s, 5m, 1h30m).
    #[arg(long, value_parser = parse_duration_seconds)]
    pub log_since: Option<i64>,
}

pub async fn run(opts: &ClusterOpts, args: DiagnosticsArgs, io: &mut crate::Io<'_>) -> Result<ExitCode> {
    match args.command {
        DiagnosticsCommand::Collect(a) => collect(opts, a, io).await,
    }
}

/// `--log-since`: a Go duration ([`kudo_api::duration::parse`]: `1h30m`, `45s`, `2m`) in whole
/// seconds, rounded up and at least 1 (the smallest `sinceSeconds` the API server takes);
/// surrounding whitespace is ignored and a negative duration is refused.
fn parse_duration_seconds(s: &str) -> Result<i64, String> {
    let nanos = kudo_api::duration::parse(s.trim()).map_err(|e| e.to_string())?;
    let nanos = u64::try_from(nanos).map_err(|_| format!("invalid duration {s:?}: negative"))?;
    Ok(i64::try_from(nanos.div_ceil(1_000_000_000))
        .unwrap_or(i64::MAX)
        .max(1))
}

async fn collect(opts: &ClusterOpts, args: CollectArgs, io: &mut crate::Io<'_>) -> Result<ExitCode> {
    let root = args.output_directory.clone();
    if root.exists() {
        bail!(
            "output directory {} already exists: choose another with -O",
            root.display()
        );
    }
    let cluster = connect(opts).await?;
    let request = CollectRequest {
        instance: &args.instance,
        output_directory: &root,
        log_since: args.log_since,
        settings: Settings {
            home: opts.home_dir().display().to_string(),
            kubeconfig: opts
                .kubeconfig
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            request_timeout: opts.request_timeout,
        },
    };
    let collected = kudo_client::diagnostics::collect(&cluster, &request).await?;
    writeln!(io.out, "Diagnostics written to {}", root.display())?;
    if !collected.errors.is_empty() {
        writeln!(io.err, "Errors during collection (details in the .err files):")?;
        for e in &collected.errors {
            writeln!(io.err, "  {e}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_duration_seconds;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_seconds("1h30m"), Ok(5400));
        assert_eq!(parse_duration_seconds("45s"), Ok(45));
        assert_eq!(parse_duration_seconds("1.5m"), Ok(90));
        assert_eq!(parse_duration_seconds("10ms"), Ok(1));
        assert!(parse_duration_seconds("10").is_err());
        assert!(parse_duration_seconds("1d").is_err());
        assert!(parse_duration_seconds("").is_err());
        // The caller's rules over Go's parser: rounded up, at least 1, never negative.
        assert_eq!(parse_duration_seconds("0"), Ok(1));
        assert_eq!(parse_duration_seconds(" 2s "), Ok(2));
        assert_eq!(parse_duration_seconds("1500us"), Ok(1));
        assert!(parse_duration_seconds("-5s").is_err());
        assert_eq!(
            parse_duration_seconds("1x").unwrap_err(),
            r#"time: unknown unit "x" in duration "1x""#
        );
    }
}
