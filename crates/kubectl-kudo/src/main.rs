//! `kubectl-kudo`: a thin binary over the library crates. Each command group lives in `cmd/`.
//!
//! Exit codes: 0 success; 1 the operation failed (template error, invalid package, failed plan…);
//! 2 usage error (clap).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod output;

/// KUDO, the Kubernetes Universal Declarative Operator: write an operator as a package of plans and
/// templates, and drive it with `kubectl kudo`.
#[derive(Parser, Debug)]
#[command(name = "kubectl-kudo", bin_name = "kubectl kudo", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Render Go templates (text/template + Sprig) exactly as KUDO does.
    Template(cmd::template::TemplateArgs),
    /// Create, verify, list and render operator packages (offline).
    Package(cmd::package::PackageArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Template(args) => cmd::template::run(args),
        Command::Package(args) => cmd::package::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("Error: {err:#}");
            ExitCode::from(1)
        }
    }
}
