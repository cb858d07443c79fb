//! The `kubectl kudo` command line as a library: the clap [`Cli`], and [`run`], which executes a
//! parsed command line and writes its output through the writers of an [`Io`] it is given, so
//! tests call commands in-process and assert on the bytes (`tests/cli/inprocess.rs`). `main.rs` only
//! parses, sets up logging, calls [`run`] with the process's stdout/stderr and maps the result to
//! the exit code ([`CliError::exit_code`]).
//!
//! Each command group lives in `cmd/<group>.rs` and writes through [`Io`], the long-running ones
//! (`dev`, `manager`, `test`) included; the manager's own logs go through `tracing` (stderr).
//!
//! Not held to `missing_docs` as the library crates are: its public items are the binary's and its
//! tests', not an API, and on clap's argument structs a doc comment is the `--help` text, which
//! flags word with `help =` where the wording must differ from a doc.
#![allow(missing_docs)]

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod cmd;
#[cfg(test)]
mod kudo_v019_flags;
pub mod output;

/// KUDO, the Kubernetes Universal Declarative Operator: write an operator as a package of plans and
/// templates, and drive it with `kubectl kudo`.
#[derive(Parser, Debug)]
#[command(name = "kubectl-kudo", bin_name = "kubectl kudo", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub cluster: cmd::cluster::ClusterOpts,
    /// Log verbosity on stderr, as KUDO's `-v`: 0 quiet, 1–2 info, 3–4 debug (API requests), 5+
    /// trace. `RUST_LOG` overrides it. (`manager` logs at info by default and takes RUST_LOG.)
    #[arg(
        short = 'v',
        long = "v",
        global = true,
        value_name = "LEVEL",
        default_value_t = 0
    )]
    pub verbosity: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a whole cluster in this process: API server, simulated workloads and the KUDO manager.
    Dev(cmd::dev::DevArgs),
    /// Install KUDO's CRDs and manager into the cluster (or print them with --dry-run).
    Init(cmd::init::InitArgs),
    // The help comes from MigrateArgs: a doc comment here would replace its long text.
    Migrate(cmd::migrate::MigrateArgs),
    /// Install an operator package and create an Instance of it.
    Install(cmd::instance::InstallArgs),
    /// Change parameters of an Instance (runs the plan the parameters trigger).
    Update(cmd::instance::UpdateArgs),
    /// Move an Instance to a newer version of its operator package.
    Upgrade(cmd::instance::UpgradeArgs),
    /// Delete an Instance and everything it created.
    Uninstall(cmd::instance::UninstallArgs),
    /// List the revisions of an Instance: one per plan run the manager admitted.
    History(cmd::revision::HistoryArgs),
    /// Restore the parameters and OperatorVersion of an earlier revision and run its plan.
    Rollback(cmd::revision::RollbackArgs),
    /// Inspect and trigger the plans of an Instance.
    Plan(cmd::plan::PlanArgs),
    /// Carry an upgrade or parameter change to many Instances in waves, gated on health.
    Rollout(cmd::rollout::RolloutArgs),
    /// List installed operators, operator versions and instances.
    Get(cmd::get::GetArgs),
    /// Create, verify, list and render operator packages (offline); push, pull and sign them in OCI
    /// registries.
    Package(cmd::package::PackageArgs),
    /// Render Go templates (text/template + Sprig) exactly as KUDO does.
    Template(cmd::template::TemplateArgs),
    /// Manage operator repositories (index files of package tarballs, or OCI registries).
    Repo(cmd::repo::RepoArgs),
    /// Log in to and out of OCI registries (credentials in the Docker config file).
    Registry(cmd::registry::RegistryArgs),
    /// Run kuttl-style operator tests against the embedded cluster or a kubeconfig's cluster.
    Test(cmd::test::TestArgs),
    /// Run the KUDO manager (the controller executing Instances' plans) until stopped.
    Manager(cmd::manager::ManagerArgs),
    /// Search for operators in a repository.
    Search(cmd::repo::SearchArgs),
    /// Serve a local web page of the Instances and their plans, live (loopback, token-protected).
    Ui(cmd::ui::UiArgs),
    /// Collect diagnostics about an Instance into a directory.
    Diagnostics(cmd::diagnostics::DiagnosticsArgs),
    /// Print a shell completion script (bash, zsh, fish, …).
    Completion(cmd::repo::CompletionArgs),
    /// Print the version of this binary.
    Version(cmd::version::VersionArgs),
}

/// Where a command writes: its output (`out`, the process's stdout in the binary) and its progress
/// and diagnostic lines (`err`, stderr). Commands that read `-` still read the process's stdin.
pub struct Io<'a> {
    /// The command's output.
    pub out: &'a mut (dyn Write + Send),
    /// Progress, warnings and the messages of failures a command reports itself.
    pub err: &'a mut (dyn Write + Send),
    /// Whether `out` is a terminal: `plan status --wait` then redraws the tree in place.
    pub out_is_terminal: bool,
}

impl<'a> Io<'a> {
    /// Writers that are not a terminal (e.g. `Vec<u8>` buffers in tests).
    pub fn new(out: &'a mut (dyn Write + Send), err: &'a mut (dyn Write + Send)) -> Self {
        Io {
            out,
            err,
            out_is_terminal: false,
        }
    }
}

/// Why a command line did not succeed.
#[derive(Debug)]
pub enum CliError {
    /// The operation failed (template error, invalid package, API error…): the binary prints
    /// `Error: <message with causes>` on stderr and exits 1.
    Failed(anyhow::Error),
    /// The command already reported the problem on `Io::err` and exits with this code
    /// (`template render`'s 1/2/3, a failed plan of `plan status --wait`…).
    Exit(ExitCode),
}

impl CliError {
    /// The process exit code: 1 for [`CliError::Failed`], the command's own for [`CliError::Exit`].
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Failed(_) => ExitCode::from(1),
            CliError::Exit(code) => *code,
        }
    }

    /// Writes what the binary prints on stderr for this error (nothing for [`CliError::Exit`]).
    pub fn report(&self, err: &mut dyn Write) -> std::io::Result<()> {
        match self {
            CliError::Failed(e) => writeln!(err, "Error: {e:#}"),
            CliError::Exit(_) => Ok(()),
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        CliError::Failed(e)
    }
}

impl Command {
    /// Whether the command talks to a cluster or registry (or runs a cluster) and so needs a tokio
    /// runtime; the offline commands (`package` but push/pull/sign, `template`, `repo`, `search`,
    /// `completion`, `version`) do blocking IO only and the binary runs them without one.
    pub fn needs_runtime(&self) -> bool {
        if let Command::Package(p) = self {
            return p.command.needs_runtime();
        }
        !matches!(
            self,
            Command::Template(_)
                | Command::Version(_)
                | Command::Repo(_)
                | Command::Search(_)
                | Command::Completion(_)
        )
    }
}

/// Runs a parsed command line, writing through `io`. Cluster commands must be polled on a tokio
/// runtime ([`Command::needs_runtime`]); offline commands never await and can be driven by any
/// executor (the binary uses `futures::executor::block_on`).
pub async fn run(cli: Cli, io: &mut Io<'_>) -> Result<(), CliError> {
    let cluster = &cli.cluster;
    let code = match cli.command {
        Command::Template(args) => cmd::template::run(args, io),
        Command::Package(args) => cmd::package::run(cluster, args, io).await,
        Command::Registry(args) => cmd::registry::run(cluster, args, io).await,
        Command::Version(args) => cmd::version::run(args, io),
        Command::Repo(args) => cmd::repo::run(cluster, args, io),
        Command::Search(args) => cmd::repo::search(cluster, args, io),
        Command::Completion(args) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            cmd::repo::write_completion(&mut command, args.shell, io.out).map(|()| ExitCode::SUCCESS)
        }
        Command::Dev(args) => cmd::dev::run(cluster, args, io).await,
        Command::Init(args) => cmd::init::run(cluster, args, io).await,
        Command::Migrate(args) => cmd::migrate::run(cluster, args, io).await,
        Command::Manager(args) => cmd::manager::run(cluster, args, io).await,
        Command::Install(args) => cmd::instance::install(cluster, args, io).await,
        Command::Update(args) => cmd::instance::update(cluster, args, io).await,
        Command::Upgrade(args) => cmd::instance::upgrade(cluster, args, io).await,
        Command::Uninstall(args) => cmd::instance::uninstall(cluster, args, io).await,
        Command::History(args) => cmd::revision::history(cluster, args, io).await,
        Command::Rollback(args) => cmd::revision::rollback(cluster, args, io).await,
        Command::Plan(args) => cmd::plan::run(cluster, args, io).await,
        Command::Rollout(args) => cmd::rollout::run(cluster, args, io).await,
        Command::Get(args) => cmd::get::run(cluster, args, io).await,
        Command::Test(args) => cmd::test::run(cluster, args, io).await,
        Command::Diagnostics(args) => cmd::diagnostics::run(cluster, args, io).await,
        Command::Ui(args) => cmd::ui::run(cluster, args, io).await,
    }?;
    if code == ExitCode::SUCCESS {
        Ok(())
    } else {
        Err(CliError::Exit(code))
    }
}
