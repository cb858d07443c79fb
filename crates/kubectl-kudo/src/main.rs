//! `kubectl-kudo`: a thin binary over the library crates. Each command group lives in `cmd/`.
//!
//! Exit codes: 0 success; 1 the operation failed (template error, invalid package, failed plan,
//! API error…); 2 usage error (bad flags or arguments).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
#[cfg(test)]
mod kudo_v019_flags;
mod output;

/// KUDO, the Kubernetes Universal Declarative Operator: write an operator as a package of plans and
/// templates, and drive it with `kubectl kudo`.
#[derive(Parser, Debug)]
#[command(name = "kubectl-kudo", bin_name = "kubectl kudo", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    cluster: cmd::cluster::ClusterOpts,
    /// Log verbosity on stderr, as KUDO's `-v`: 0 quiet, 1–2 info, 3–4 debug (API requests), 5+
    /// trace. `RUST_LOG` overrides it. (`manager` logs at info by default and takes RUST_LOG.)
    #[arg(
        short = 'v',
        long = "v",
        global = true,
        value_name = "LEVEL",
        default_value_t = 0
    )]
    verbosity: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a whole cluster in this process: API server, simulated workloads and the KUDO manager.
    Dev(cmd::dev::DevArgs),
    /// Install KUDO's CRDs and manager into the cluster (or print them with --dry-run).
    Init(cmd::init::InitArgs),
    /// Install an operator package and create an Instance of it.
    Install(cmd::instance::InstallArgs),
    /// Change parameters of an Instance (runs the plan the parameters trigger).
    Update(cmd::instance::UpdateArgs),
    /// Move an Instance to a newer version of its operator package.
    Upgrade(cmd::instance::UpgradeArgs),
    /// Delete an Instance and everything it created.
    Uninstall(cmd::instance::UninstallArgs),
    /// Inspect and trigger the plans of an Instance.
    Plan(cmd::plan::PlanArgs),
    /// List installed operators, operator versions and instances.
    Get(cmd::get::GetArgs),
    /// Create, verify, list and render operator packages (offline).
    Package(cmd::package::PackageArgs),
    /// Render Go templates (text/template + Sprig) exactly as KUDO does.
    Template(cmd::template::TemplateArgs),
    /// Manage operator repositories (index files of package tarballs).
    Repo(cmd::repo::RepoArgs),
    /// Run kuttl-style operator tests against the embedded cluster or a kubeconfig's cluster.
    Test(cmd::test::TestArgs),
    /// Run the KUDO manager (the controller executing Instances' plans) until stopped.
    Manager(cmd::manager::ManagerArgs),
    /// Search for operators in a repository.
    Search(cmd::repo::SearchArgs),
    /// Collect diagnostics about an Instance into a directory.
    Diagnostics(cmd::diagnostics::DiagnosticsArgs),
    /// Print a shell completion script (bash, zsh, fish, …).
    Completion(cmd::repo::CompletionArgs),
    /// Print the version of this binary.
    Version(cmd::version::VersionArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Manager(_)) {
        init_logging(cli.verbosity);
    }
    let result = match cli.command {
        Command::Template(args) => cmd::template::run(args),
        Command::Package(args) => cmd::package::run(&cli.cluster, args),
        Command::Version(args) => cmd::version::run(args),
        Command::Repo(args) => cmd::repo::run(&cli.cluster, args),
        Command::Search(args) => cmd::repo::search(&cli.cluster, args),
        Command::Completion(args) => {
            cmd::repo::write_completion(&mut <Cli as clap::CommandFactory>::command(), args.shell);
            Ok(ExitCode::SUCCESS)
        }
        command => run_async(&cli.cluster, command),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("Error: {err:#}");
            ExitCode::from(1)
        }
    }
}

/// Commands that talk to a cluster run on a tokio runtime.
fn run_async(cluster: &cmd::cluster::ClusterOpts, command: Command) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        match command {
            Command::Dev(args) => cmd::dev::run(cluster, args).await,
            Command::Init(args) => cmd::init::run(cluster, args).await,
            Command::Manager(args) => cmd::manager::run(cluster, args).await,
            Command::Install(args) => cmd::instance::install(cluster, args).await,
            Command::Update(args) => cmd::instance::update(cluster, args).await,
            Command::Upgrade(args) => cmd::instance::upgrade(cluster, args).await,
            Command::Uninstall(args) => cmd::instance::uninstall(cluster, args).await,
            Command::Plan(args) => cmd::plan::run(cluster, args).await,
            Command::Get(args) => cmd::get::run(cluster, args).await,
            Command::Test(args) => cmd::test::run(cluster, args).await,
            Command::Diagnostics(args) => cmd::diagnostics::run(cluster, args).await,
            Command::Template(_)
            | Command::Package(_)
            | Command::Version(_)
            | Command::Repo(_)
            | Command::Search(_)
            | Command::Completion(_) => {
                unreachable!("handled synchronously in main")
            }
        }
    })
}

/// Logs to stderr at the level `-v` asks for (kube's request logs appear at debug), so stdout stays
/// the command's output. Without `-v` and `RUST_LOG` nothing is logged.
fn init_logging(verbosity: u8) {
    use tracing_subscriber::EnvFilter;
    let level = match verbosity {
        0 if std::env::var_os("RUST_LOG").is_none() => return,
        0 => "error",
        1 | 2 => "info",
        3 | 4 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
