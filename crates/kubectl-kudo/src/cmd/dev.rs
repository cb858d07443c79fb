//! `kubectl kudo dev`: a whole cluster in one process — the embedded API server, simulated workloads
//! (Deployments become Available, StatefulSet pods come up in order, Jobs finish) and the KUDO
//! manager — for trying packages with nothing installed. `--demo PKG` installs a package into it and
//! shows its deploy plan until it finishes. `--fault-*` flags make the API server misbehave
//! (errors, latency, cut watches, lost writes) to test how an operator copes.
//!
//! Like every command it writes through the [`Io`](crate::Io) it is given (the process's stdout and
//! stderr when run from the binary), its `--demo` install and plan view included.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::cluster::ClusterOpts;

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo dev\n  kubectl kudo dev --address 127.0.0.1:6443 --data-dir ~/.kudo/dev/data\n  kubectl kudo dev --data-dir /tmp/scratch --data-dir-sync never  # no fsync: faster\n  kubectl kudo dev --demo ./examples/galera\n  kubectl kudo dev --fault-error '*:500:0.05' --fault-watch-cut 2s --fault-seed 1\n  kubectl kudo dev --no-load-balancer\n\nThe kubeconfig goes to --kubeconfig (default ~/.kudo/dev/kubeconfig); then:\n  export KUBECONFIG=~/.kudo/dev/kubeconfig; kubectl get nodes\n\nFault injection (off by default) starts once the cluster is up (CRDs installed) and applies to\nresource requests only (not discovery, OpenAPI, /version or health checks). Faults can be read\nand changed while running at http://ADDRESS/kudo-admin/faults (GET, PUT a JSON config, DELETE\nto switch off); the address is printed at startup. Verbs: get, list, watch, create, update,\npatch, delete, deletecollection, * (all)."
)]
pub struct DevArgs {
    /// Loopback address to serve on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0", value_name = "127.0.0.1:PORT")]
    pub address: SocketAddr,
    /// Keep cluster state in this directory across restarts (default: in memory).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// With --data-dir: `always` fsyncs each write before acknowledging it, so acknowledged writes
    /// survive a power loss or OS crash; `never` only hands writes to the OS (they survive the
    /// process being killed, not a power loss) and is faster for write-heavy runs.
    #[arg(
        long,
        value_name = "always|never",
        default_value = "always",
        requires = "data_dir"
    )]
    pub data_dir_sync: kudo_apiserver::SyncMode,
    /// Number of simulated nodes.
    #[arg(long, default_value_t = 1)]
    pub nodes: u32,
    /// Install this package (directory or .tgz), show its plan until it finishes, then stop.
    #[arg(long, value_name = "PKG")]
    pub demo: Option<PathBuf>,
    /// With --demo: parameter values NAME=VALUE for the install.
    #[arg(short = 'p', long = "parameter", value_name = "NAME=VALUE", requires = "demo")]
    pub parameters: Vec<String>,
    /// With --demo: keep the cluster running after the plan finished.
    #[arg(long, requires = "demo")]
    pub keep_running: bool,
    /// With --demo: give up after this many seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS", requires = "demo")]
    pub demo_timeout: u64,
    /// Answer requests of VERB with STATUS (500, 429 or 409) with probability RATE (0.0-1.0),
    /// without executing them. Repeatable; the first matching rule that fires wins.
    #[arg(long = "fault-error", value_name = "VERB:STATUS:RATE", value_parser = parse_error_rule)]
    pub fault_errors: Vec<kudo_apiserver::ErrorRule>,
    /// Delay every request by this long, optionally ± a uniform jitter (e.g. 50ms or 50ms±20ms).
    #[arg(long, value_name = "DURATION[±JITTER]", value_parser = parse_latency)]
    pub fault_latency: Option<(Duration, Duration)>,
    /// End every watch stream after this long (clients must watch again), e.g. 2s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub fault_watch_cut: Option<Duration>,
    /// Probability that a write is executed but answered with a 500 (lost acknowledgement).
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_lost_write_rate: f64,
    /// Probability that a watch, after a MODIFIED event, sends the object's previous state again
    /// (a view going back in time, as after a re-list from a lagging API server).
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_stale_replay_rate: f64,
    /// Seed of the fault draws, for reproducible runs (default: from the clock).
    #[arg(long, value_name = "N")]
    pub fault_seed: Option<u64>,
    /// Run the manager as `init --least-privilege` does: every Instance is applied as a
    /// ServiceAccount of its namespace (`spec.serviceAccountName`, else `kudo-instance`). The
    /// account `kudo-instance` of namespace `default` is created with the built-in `admin` role
    /// there; other namespaces need their own (docs/security.md).
    #[arg(long)]
    pub least_privilege: bool,
    /// Give `type: LoadBalancer` Services no load balancer: no ingress address, no listener
    /// (as on a cluster without one). By default each gets a loopback address (127.240.0.1,
    /// 127.240.0.2, …) in `status.loadBalancer.ingress`, listening on its TCP ports.
    #[arg(long)]
    pub no_load_balancer: bool,
    /// Run the manager with `--require-verified-sources`: only OperatorVersions an
    /// OperatorSource stored after verifying their signature run (docs/distributing.md).
    #[arg(long)]
    pub require_verified_sources: bool,
    /// Leave this namespace to another manager (repeatable or comma-separated; a trailing `*`
    /// matches a prefix), as `kubectl kudo manager --ignore-namespace`: e.g. for a manager started
    /// with `--watch-namespace`, or objects another KUDO manager still runs.
    #[arg(long = "ignore-namespace", value_name = "NAMESPACE", value_delimiter = ',')]
    pub ignore_namespaces: Vec<String>,
}

/// The account `dev --least-privilege` applies Instances as, by default.
const DEV_INSTANCE_ACCOUNT: &str = "kudo-instance";

fn parse_error_rule(s: &str) -> Result<kudo_apiserver::ErrorRule, String> {
    s.parse().map_err(|e: kudo_apiserver::FaultError| e.to_string())
}

fn parse_latency(s: &str) -> Result<(Duration, Duration), String> {
    kudo_apiserver::faults::parse_latency(s).map_err(|e| e.to_string())
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    kudo_apiserver::faults::parse_duration(s).map_err(|e| e.to_string())
}

impl DevArgs {
    /// The fault configuration the flags ask for (inactive when no `--fault-*` flag is given).
    fn fault_config(&self) -> Result<kudo_apiserver::FaultConfig> {
        let (latency, jitter) = self.fault_latency.unwrap_or_default();
        let config = kudo_apiserver::FaultConfig {
            errors: self.fault_errors.clone(),
            latency,
            jitter,
            watch_cut: self.fault_watch_cut,
            lost_write_rate: self.fault_lost_write_rate,
            stale_replay_rate: self.fault_stale_replay_rate,
            stale_replay_agent: None,
            seed: self.fault_seed,
        };
        config.validate().context("invalid --fault-* flags")?;
        Ok(config)
    }
}

/// Starts the embedded API server for `args` and writes its kubeconfig (`--kubeconfig`, else
/// `$KUDO_HOME/dev/kubeconfig`).
async fn start_server(
    opts: &ClusterOpts,
    args: &DevArgs,
) -> Result<(kudo_apiserver::RunningServer, PathBuf)> {
    let kubeconfig = opts
        .kubeconfig
        .clone()
        .unwrap_or_else(|| opts.home_dir().join("dev").join("kubeconfig"));
    if let Some(dir) = kubeconfig.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let server = kudo_apiserver::ApiServer::start(kudo_apiserver::Config {
        port: args.address.port(),
        data_dir: args.data_dir.clone(),
        data_dir_sync: args.data_dir_sync,
        ..Default::default()
    })
    .await
    .context("cannot start the embedded API server")?;
    server
        .write_kubeconfig(&kubeconfig)
        .with_context(|| format!("cannot write {}", kubeconfig.display()))?;
    Ok((server, kubeconfig))
}

pub async fn run(opts: &ClusterOpts, args: DevArgs, io: &mut crate::Io<'_>) -> Result<ExitCode> {
    if !args.address.ip().is_loopback() {
        bail!("the dev cluster serves on loopback only; got {}", args.address);
    }
    let faults = args.fault_config()?;
    let (server, kubeconfig) = start_server(opts, &args).await?;

    let cluster_opts = ClusterOpts {
        kubeconfig: Some(kubeconfig.clone()),
        ..opts.clone()
    };
    let cluster = super::cluster::connect(&cluster_opts).await?;
    let client = cluster.client.clone();
    kudo_controller::install_crds(&client, "kubectl-kudo-dev", Duration::from_secs(30))
        .await
        .context("cannot install the KUDO CRDs into the dev cluster")?;
    // What `init` installs for namespace admins (the aggregated `kudo.dev` rules) and, with
    // `--least-privilege`, the `default` namespace's `kudo-instance` account with `admin` there.
    let instance_account = args.least_privilege.then_some(DEV_INSTANCE_ACCOUNT);
    kudo_client::init::install_for_dev(&cluster, instance_account).await?;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let sim_config = kudo_sim::SimConfig {
        nodes: args.nodes,
        load_balancer: (!args.no_load_balancer).then(kudo_sim::LoadBalancerConfig::default),
        ..Default::default()
    };
    // `kubectl exec` and `kubectl logs` reach the simulated containers.
    server.set_pod_runtime(std::sync::Arc::new(sim_config.runtime.clone()));
    let sim_config_lb = sim_config.load_balancer.clone();
    let sim = tokio::spawn(kudo_sim::run(
        client.clone(),
        sim_config,
        stopped(stop_rx.clone()),
    ));
    let controller = tokio::spawn(kudo_controller::run(
        client.clone(),
        kudo_controller::ControllerConfig {
            default_service_account: args.least_privilege.then(|| DEV_INSTANCE_ACCOUNT.to_string()),
            require_verified_sources: args.require_verified_sources,
            ignored_namespaces: args.ignore_namespaces.clone(),
            ..Default::default()
        },
        stopped(stop_rx.clone()),
    ));

    // Faults start now that the cluster is set up, so a faulty configuration cannot stop `dev`
    // itself from starting.
    server
        .faults()
        .set(faults.clone())
        .context("invalid --fault-* flags")?;
    notices(io, &args, &faults, &server, &kubeconfig, sim_config_lb.as_ref())?;

    let code = match &args.demo {
        Some(pkg) => {
            let code = demo(&cluster_opts, pkg, &args, io).await?;
            if args.keep_running {
                wait_for_signal().await;
            }
            code
        }
        None => {
            wait_for_signal().await;
            ExitCode::SUCCESS
        }
    };
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let _ = sim.await;
        let _ = controller.await;
    })
    .await;
    server.shutdown().await;
    Ok(code)
}

/// What `dev` tells on stderr once it serves: the faults, the identity Instances are applied
/// with, the load balancers' addresses, where the cluster is.
fn notices(
    io: &mut crate::Io<'_>,
    args: &DevArgs,
    faults: &kudo_apiserver::FaultConfig,
    server: &kudo_apiserver::RunningServer,
    kubeconfig: &std::path::Path,
    lb: Option<&kudo_sim::LoadBalancerConfig>,
) -> Result<()> {
    if faults.is_active() {
        writeln!(io.err, "fault injection active: {faults}")?;
    }
    if args.least_privilege {
        writeln!(
            io.err,
            "least privilege: each Instance is applied as ServiceAccount {DEV_INSTANCE_ACCOUNT} of its namespace (or its spec.serviceAccountName); default/{DEV_INSTANCE_ACCOUNT} has the built-in admin role"
        )?;
    }
    if args.require_verified_sources {
        writeln!(
            io.err,
            "running only OperatorVersions of verified OperatorSources"
        )?;
    }
    writeln!(
        io.err,
        "fault injection admin endpoint: {} (GET, PUT, DELETE)",
        server.faults_url()
    )?;
    if let Some(lb) = lb {
        writeln!(
            io.err,
            "load balancers: LoadBalancer Services get addresses from {} on (off with --no-load-balancer)",
            lb.first_address
        )?;
    }
    writeln!(
        io.err,
        "kudo dev cluster serving on {} — export KUBECONFIG={}",
        server.url(),
        kubeconfig.display()
    )?;
    Ok(())
}

/// Installs the package as `kubectl kudo install` would, then `plan status --wait`.
async fn demo(
    opts: &ClusterOpts,
    pkg: &std::path::Path,
    args: &DevArgs,
    io: &mut crate::Io<'_>,
) -> Result<ExitCode> {
    use super::instance::{InstallArgs, ParamOpts, WaitOpts};
    let install = InstallArgs {
        package: pkg.display().to_string(),
        source: Default::default(),
        instance: None,
        params: ParamOpts {
            parameters: args.parameters.clone(),
            parameter_files: Vec::new(),
            parameter_secrets: Vec::new(),
        },
        skip_instance: false,
        in_cluster: false,
        create_namespace: false,
        service_account: Default::default(),
        wait: WaitOpts::default(),
        allow_breaking_changes: false,
        take_ownership: false,
        dry_run: false,
        output: None,
    };
    super::instance::install(opts, install, io).await?;
    let package = kudo_package::read_path(pkg)?;
    let instance = package.default_instance_name();
    let cluster = super::cluster::connect(opts).await?;
    super::plan::status_wait(&cluster, &instance, Duration::from_secs(args.demo_timeout), io).await
}

pub async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
