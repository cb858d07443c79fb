//! `kubectl-kudo`: a thin binary over the `kubectl_kudo` library (`lib.rs`), which owns the
//! command line and every command (`cmd/`). This file parses the arguments, sets up logging, runs
//! the command with the process's stdout/stderr and maps the result to the exit code.
//!
//! Exit codes: 0 success; 1 the operation failed (template error, invalid package, failed plan,
//! API error…); 2 usage error (bad flags or arguments). `template render` adds its own (see its
//! module): 2 unreadable input, 3 a batch case could not be run.

use std::process::ExitCode;

use clap::Parser;
use kubectl_kudo::{Cli, Command, Io};

/// jemalloc instead of the system allocator: the manager is a long-running process whose caches
/// churn with every watch event, and glibc's per-thread arenas kept freed memory resident
/// (docs/benchmarks.md, the manager's RSS at `scale 1000`).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // clap prints usage errors itself and exits 2.
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Manager(_)) {
        init_logging(cli.verbosity);
    }
    let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
    let mut io = Io::new(&mut stdout, &mut stderr);
    io.out_is_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let result = if cli.command.needs_runtime() {
        // Commands that talk to a cluster run on a tokio runtime; the manager's has as many
        // worker threads as it is told. One (the default) is the calling thread itself: nothing
        // is handed between threads (see `manager --worker-threads`).
        let mut runtime = match &cli.command {
            Command::Manager(m) if m.worker_threads > 1 => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(usize::from(m.worker_threads));
                b
            }
            Command::Manager(_) => tokio::runtime::Builder::new_current_thread(),
            _ => tokio::runtime::Builder::new_multi_thread(),
        };
        match runtime.enable_all().build() {
            Ok(runtime) => runtime.block_on(kubectl_kudo::run(cli, &mut io)),
            Err(e) => Err(kubectl_kudo::CliError::Failed(e.into())),
        }
    } else {
        // Offline commands do blocking IO only and run without a runtime.
        futures::executor::block_on(kubectl_kudo::run(cli, &mut io))
    };
    let _ = std::io::Write::flush(io.out);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let _ = err.report(io.err);
            err.exit_code()
        }
    }
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
