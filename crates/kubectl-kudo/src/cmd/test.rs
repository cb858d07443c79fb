//! `kubectl kudo test`: runs kuttl-format operator test suites. The harness lives in
//! the `kudo-kuttl` crate; this module maps kuttl's flags onto it.
//!
//! A suite runs for minutes; its log streams to `io.out` line by line as the harness writes it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;

use super::cluster::ClusterOpts;

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo test                      # kuttl-test.yaml in the current directory\n  kubectl kudo test --start-control-plane ./tests\n  kubectl kudo test --config test/kudo-e2e-test.yaml --test upgrade --report xml"
)]
pub struct TestArgs {
    /// Test directories (each subdirectory is a test case); replace the suite's testDirs.
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// TestSuite file (default: kuttl-test.yaml in the current directory, if present).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Only run the test case with this name (repeatable).
    #[arg(long = "test", value_name = "NAME")]
    pub tests: Vec<String>,
    /// Step timeout in seconds (overrides the suite; default 30).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Maximum number of test cases run at once (overrides the suite; default 8).
    #[arg(long, value_name = "N")]
    pub parallel: Option<usize>,
    /// Keep test namespaces and created objects.
    #[arg(long)]
    pub skip_delete: bool,
    /// Write a report (kuttl-report.xml or .json) to the artifacts directory.
    #[arg(long, value_name = "xml|json")]
    pub report: Option<String>,
    /// Directory for reports (default: the suite's artifactsDir, else the current directory).
    #[arg(long, value_name = "DIR")]
    pub artifacts_dir: Option<PathBuf>,
    /// Start a control plane for the run, as kuttl's envtest: the embedded API server and the KUDO
    /// manager, no kubelet or workload controllers (Deployments never become available).
    #[arg(long)]
    pub start_control_plane: bool,
    /// Start a full cluster for the run, as kuttl's KIND: the embedded API server, simulated
    /// nodes, kubelet and workload controllers, and the KUDO manager.
    #[arg(long = "start-kind")]
    pub start_kind: bool,
    /// Directory of CRDs to install (and wait for) before the tests (overrides the suite's crdDir).
    #[arg(long, value_name = "DIR")]
    pub crd_dir: Option<PathBuf>,
    /// Directory of manifests to apply before the tests (repeatable; adds to manifestDirs).
    #[arg(long = "manifest-dir", value_name = "DIR")]
    pub manifest_dirs: Vec<PathBuf>,
    /// KIND configuration (kuttl's); the embedded cluster takes none, so it is ignored with a warning.
    #[arg(long, value_name = "FILE")]
    pub kind_config: Option<PathBuf>,
    /// KIND context name (KUDO's); accepted, nothing to choose with the embedded cluster.
    #[arg(long, value_name = "NAME")]
    pub kind_context: Option<String>,
    /// Run KUDO for the tests (KUDO's); the embedded cluster always runs the KUDO manager.
    #[arg(long)]
    pub start_kudo: bool,
    /// Keep the cluster after the run (KUDO's); the embedded cluster lives in this process and
    /// ends with it.
    #[arg(long)]
    pub skip_cluster_delete: bool,
}

pub async fn run(opts: &ClusterOpts, args: TestArgs, io: &mut crate::Io<'_>) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("cannot determine the current directory")?;
    let config = match &args.config {
        Some(p) => Some(p.clone()),
        None => Some(cwd.join("kuttl-test.yaml")).filter(|p| p.is_file()),
    };
    let mut suite = match &config {
        Some(p) => kudo_kuttl::TestSuite::from_file(p)?,
        None if args.dirs.is_empty() => {
            bail!("no kuttl-test.yaml in the current directory: pass --config FILE or test directories")
        }
        None => kudo_kuttl::TestSuite::default(),
    };
    if let Some(t) = args.timeout {
        suite.timeout = t;
    }
    if let Some(p) = args.parallel {
        suite.parallel = p;
    }
    if args.skip_delete {
        suite.skip_delete = true;
    }
    if (args.start_control_plane || args.start_kind) && opts.kubeconfig.is_some() {
        bail!("--kubeconfig and --start-control-plane/--start-kind contradict each other: pass one of them");
    }
    if args.start_control_plane {
        suite.start_control_plane = true;
    }
    if args.start_kind {
        suite.start_kind = true;
    }
    if let Some(k) = &opts.kubeconfig
        && suite.wants_embedded_cluster()
    {
        // An explicit target wins over the suite's startControlPlane/startKIND:
        // the same suite runs on the embedded cluster by default and on a real one when asked.
        writeln!(
            io.err,
            "notice: --kubeconfig {} given: the suite's startControlPlane/startKIND is ignored, the test runs against that cluster",
            k.display()
        )?;
        suite.start_control_plane = false;
        suite.start_kind = false;
    }
    if let Some(d) = &args.crd_dir {
        suite.crd_dir = Some(d.display().to_string());
    }
    suite
        .manifest_dirs
        .extend(args.manifest_dirs.iter().map(|d| d.display().to_string()));
    if let Some(k) = &args.kind_config {
        suite.kind_config = Some(k.display().to_string());
    }
    if args.kind_context.is_some() {
        writeln!(
            io.err,
            "--kind-context: ignored, the embedded cluster (--start-kind) needs no KIND context"
        )?;
    }
    if args.start_kudo {
        if suite.wants_embedded_cluster() {
            writeln!(
                io.err,
                "--start-kudo: nothing to do, the embedded cluster always runs the KUDO manager"
            )?;
        } else {
            writeln!(
                io.err,
                "--start-kudo: ignored for a kubeconfig's cluster: run `kubectl kudo init` (or `kubectl kudo manager`) there, or use --start-kind for an embedded cluster running KUDO"
            )?;
        }
    }
    if args.skip_cluster_delete {
        writeln!(
            io.err,
            "--skip-cluster-delete: ignored, the embedded cluster lives in this process and ends with it"
        )?;
    }
    if let Some(d) = &args.artifacts_dir {
        suite.artifacts_dir = Some(d.display().to_string());
    }
    let report = match &args.report {
        None => None,
        Some(r) => Some(
            kudo_kuttl::ReportFormat::parse(r)
                .with_context(|| format!("--report must be xml or json, not {r:?}"))?,
        ),
    };
    let path_prepend = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(PathBuf::from))
        .into_iter()
        .collect();
    let kubeconfig = opts
        .kubeconfig
        .as_ref()
        .map(|p| std::env::split_paths(p).next().unwrap_or_else(|| p.clone()));
    let run_opts = kudo_kuttl::RunOptions {
        suite,
        base_dir: cwd,
        test_dirs: args.dirs,
        tests: args.tests,
        kubeconfig,
        report,
        path_prepend,
        embedded: kudo_kuttl::EmbeddedOptions::default(),
    };
    let summary = run_logging_to(run_opts, io).await?;
    if let Some(p) = &summary.report_path {
        writeln!(io.out, "report written to {}", p.display())?;
    }
    Ok(if summary.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Runs the suite with its log lines written to `io.out` as they come: the harness logs through
/// a `'static` sink, so lines travel over a channel drained here while the suite runs.
async fn run_logging_to(
    run_opts: kudo_kuttl::RunOptions,
    io: &mut crate::Io<'_>,
) -> anyhow::Result<kudo_kuttl::RunSummary> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let log = kudo_kuttl::Log::new(std::sync::Arc::new(move |line: &str| {
        let _ = tx.send(line.to_string());
    }));
    let run = kudo_kuttl::run(run_opts, log);
    let mut run = std::pin::pin!(run);
    let summary = loop {
        tokio::select! {
            Some(line) = rx.recv() => writeln!(io.out, "{line}")?,
            done = &mut run => break done?,
        }
    };
    while let Ok(line) = rx.try_recv() {
        writeln!(io.out, "{line}")?;
    }
    Ok(summary)
}
