//! `kubectl kudo manager`: the KUDO manager (controller) as a long-running process — in a pod
//! (in-cluster service account) or against any cluster a kubeconfig points to.
//!
//! It runs until stopped and logs to the process's stderr (tracing), so it does not take an
//! [`Io`](crate::Io).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{ArgAction, Args};

use super::cluster::{ClusterOpts, connect};

/// Where a pod finds its own namespace (service account token mount).
const IN_CLUSTER_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo manager                       # in a pod: uses the service account\n  kubectl kudo manager --kubeconfig ~/.kube/config --leader-elect=false\n  kubectl kudo manager --metrics-address 0.0.0.0:8080 --lease-duration 30\n  kubectl kudo manager --shards 4            # run 2+ replicas: each reconciles its share"
)]
pub struct ManagerArgs {
    /// Field manager name used for server-side apply.
    #[arg(long, default_value = kudo_engine::field_ownership::FIELD_MANAGER)]
    pub field_manager: String,
    /// How many Instances are reconciled in parallel.
    #[arg(long, default_value_t = 4)]
    pub concurrency: u16,
    /// Milliseconds an Instance's reconcile waits for more changes after a watch event (each
    /// new event of that Instance restarts the wait): a rollout's burst of Pod, ReplicaSet,
    /// Deployment and status events becomes one reconcile. 0 reconciles at every event.
    #[arg(long, default_value_t = 0, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub debounce_ms: u64,
    /// Log as JSON lines (with instance/plan/step fields) instead of text; filter with RUST_LOG.
    #[arg(long)]
    pub json_logs: bool,
    /// Address serving /metrics (Prometheus), /healthz and /readyz. Loopback by default; in a
    /// pod use 0.0.0.0:8080 so kubelet probes reach it.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "HOST:PORT")]
    pub metrics_address: SocketAddr,
    /// Reconcile only while holding the leader Lease, so several replicas can run
    /// (`--leader-elect=false` to always reconcile).
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1,
          default_missing_value = "true", value_name = "BOOL")]
    pub leader_elect: bool,
    /// Name of the leader election Lease.
    #[arg(long, default_value = "kudo-manager")]
    pub lease_name: String,
    /// Namespace of the Lease (default: $KUDO_POD_NAMESPACE, else the pod's own namespace,
    /// else kudo-system).
    #[arg(long)]
    pub lease_namespace: Option<String>,
    /// Seconds a lease stays valid after its last renewal: how long a crashed leader blocks its
    /// successor (a clean shutdown hands over at once).
    #[arg(long, default_value_t = 15, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(2..))]
    pub lease_duration: u64,
    /// Reconcile only Instances in this namespace (default: all namespaces). Several managers
    /// can then share a cluster, one per namespace; OperatorVersions are read from any namespace.
    #[arg(long, env = "KUDO_WATCH_NAMESPACE", value_name = "NAMESPACE")]
    pub watch_namespace: Option<String>,
    /// Leave this namespace to another manager (one started with --watch-namespace NAMESPACE;
    /// repeatable or comma-separated; a trailing `*` matches a prefix): no Instance, typed object
    /// or OperatorSource in it is reconciled, and no rollout of this manager changes an Instance
    /// there.
    #[arg(long = "ignore-namespace", value_name = "NAMESPACE", value_delimiter = ',')]
    pub ignore_namespaces: Vec<String>,
    /// Lockdown: an Instance without spec.serviceAccountName is applied as ServiceAccount NAME of
    /// its own namespace (system:serviceaccount:<namespace>:NAME), never as the manager; if that
    /// account does not exist, the Instance's plan fails. Empty or unset: such Instances are
    /// applied as the manager itself (KUDO's behaviour).
    #[arg(long, value_name = "NAME", value_parser = super::instance::parse_service_account)]
    pub default_service_account: Option<String>,
    /// How many revisions (`kubectl kudo history`, `rollback --to-revision`) to keep per
    /// Instance; the oldest are deleted when a new run is recorded.
    #[arg(long, default_value_t = kudo_engine::revision::DEFAULT_HISTORY_LIMIT, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub revision_history_limit: usize,
    /// Split the Instances into N shards, each a Lease `<lease-name>-shard-<n>`: every replica
    /// holds a fair share of them (rebalanced as replicas come and go) and reconciles only the
    /// Instances of its shards, watching only theirs. An Instance's shard is its bucket
    /// (FNV-1a(namespace/name) mod 1024, label kudo.dev/bucket on it and on what its plans apply)
    /// mod N. 1 keeps one acting replica (leader election) and adds no label; above 1 needs
    /// --leader-elect.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: u32,
    /// Threads running the manager's work. It mostly waits on the API server, and one thread
    /// spends less CPU than several: with 1 the manager runs on tokio's single-threaded runtime,
    /// where no task or wake-up is handed between threads (13 % less CPU than one worker
    /// thread on the real cluster, docs/benchmarks.md); raise it when rendering large packages
    /// keeps one thread busy.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub worker_threads: u16,
    /// Run only OperatorVersions that an OperatorSource stored after verifying their signature,
    /// unchanged since: an Instance of any other OperatorVersion fails (condition Ready=False,
    /// reason UnverifiedOperatorVersion, and a Warning Event) and nothing is applied for it;
    /// OperatorSources with verify.provider none are refused (docs/security.md).
    #[arg(long)]
    pub require_verified_sources: bool,
}

/// The Lease namespace: flag, `$KUDO_POD_NAMESPACE`, the in-cluster namespace file, `kudo-system`.
fn lease_namespace(flag: Option<&str>, env: Option<&str>, file: Option<&str>) -> String {
    [flag, env, file]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|s| !s.is_empty())
        .unwrap_or("kudo-system")
        .to_string()
}

/// This replica's identity: the pod name, else the host name with a random suffix (two managers
/// on one machine must still differ).
fn identity(pod_name: Option<&str>, hostname: Option<&str>) -> String {
    match pod_name.map(str::trim).filter(|s| !s.is_empty()) {
        Some(p) => p.to_string(),
        None => {
            let host = hostname
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .unwrap_or("kudo-manager");
            let suffix = uuid::Uuid::new_v4().simple().to_string();
            format!("{host}-{}", &suffix[..8])
        }
    }
}

/// The line the manager prints on stderr when it starts.
fn startup_line(config: &kudo_controller::ControllerConfig, metrics: SocketAddr) -> String {
    let election = match &config.leader_election {
        Some(le) if config.shards > 1 => format!(
            "{} shards as {:?} on leases {}/{}-shard-*",
            config.shards, le.identity, le.namespace, le.lease_name
        ),
        Some(le) => format!(
            "leader election as {:?} on lease {}/{}",
            le.identity, le.namespace, le.lease_name
        ),
        None => "no leader election".to_string(),
    };
    let account = match &config.default_service_account {
        Some(sa) => format!("default service account {sa:?}"),
        None => "no default service account".to_string(),
    };
    format!(
        "kudo manager starting (field manager {:?}, metrics on {metrics}, {election}, {account})",
        config.field_manager
    )
}

pub async fn run(opts: &ClusterOpts, args: ManagerArgs, io: &mut crate::Io<'_>) -> Result<ExitCode> {
    kudo_controller::init_tracing(args.json_logs).context("cannot set up logging")?;
    if args.shards > 1 && !args.leader_elect {
        anyhow::bail!(
            "--shards {} needs leader election: each shard is a Lease (drop --leader-elect=false)",
            args.shards
        );
    }
    let cluster = connect(opts).await?;
    let leader_election = args.leader_elect.then(|| {
        let env_ns = std::env::var("KUDO_POD_NAMESPACE").ok();
        let file_ns = std::fs::read_to_string(IN_CLUSTER_NAMESPACE_FILE).ok();
        kudo_controller::LeaderElection {
            lease_name: args.lease_name.clone(),
            namespace: lease_namespace(
                args.lease_namespace.as_deref(),
                env_ns.as_deref(),
                file_ns.as_deref(),
            ),
            identity: identity(
                std::env::var("KUDO_POD_NAME").ok().as_deref(),
                std::env::var("HOSTNAME").ok().as_deref(),
            ),
            lease_duration: Duration::from_secs(args.lease_duration),
        }
    });
    let config = kudo_controller::ControllerConfig {
        field_manager: args.field_manager,
        concurrency: args.concurrency,
        debounce: Duration::from_millis(args.debounce_ms),
        metrics_addr: Some(args.metrics_address),
        leader_election,
        namespace: args.watch_namespace.filter(|ns| !ns.is_empty()),
        ignored_namespaces: args
            .ignore_namespaces
            .into_iter()
            .map(|ns| ns.trim().to_string())
            .filter(|ns| !ns.is_empty())
            .collect(),
        default_service_account: args.default_service_account.filter(|sa| !sa.is_empty()),
        revision_history_limit: args.revision_history_limit,
        shards: args.shards,
        require_verified_sources: args.require_verified_sources,
        ..Default::default()
    };
    if let Some(ns) = &config.namespace {
        writeln!(io.err, "watching namespace {ns} only")?;
    }
    if !config.ignored_namespaces.is_empty() {
        writeln!(
            io.err,
            "ignoring namespaces {}",
            config.ignored_namespaces.join(", ")
        )?;
    }
    if config.require_verified_sources {
        writeln!(
            io.err,
            "running only OperatorVersions of verified OperatorSources"
        )?;
    }
    writeln!(io.err, "{}", startup_line(&config, args.metrics_address))?;
    kudo_controller::run(cluster.client, config, super::dev::wait_for_signal())
        .await
        .context("the manager stopped with an error")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        m: ManagerArgs,
    }

    #[test]
    fn defaults_elect_a_leader_and_serve_metrics_on_loopback() {
        let t = T::parse_from(["manager"]);
        assert!(t.m.leader_elect);
        assert_eq!(t.m.metrics_address, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(t.m.lease_name, "kudo-manager");
        assert_eq!(t.m.lease_duration, 15);
        assert!(T::parse_from(["manager", "--leader-elect"]).m.leader_elect);
        assert!(!T::parse_from(["manager", "--leader-elect=false"]).m.leader_elect);
    }

    #[test]
    fn default_service_account_is_validated_and_printed() {
        let t = T::parse_from(["manager", "--default-service-account", "kudo-instance"]);
        assert_eq!(t.m.default_service_account.as_deref(), Some("kudo-instance"));
        let err = T::try_parse_from(["manager", "--default-service-account", "Bad_Name"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("--default-service-account"), "{err}");
        assert!(err.contains("DNS-1123 subdomain"), "{err}");
        let mut config = kudo_controller::ControllerConfig {
            default_service_account: Some("kudo-instance".into()),
            ..Default::default()
        };
        let addr = "127.0.0.1:8080".parse().unwrap();
        let line = startup_line(&config, addr);
        assert!(
            line.ends_with("no leader election, default service account \"kudo-instance\")"),
            "{line}"
        );
        config.default_service_account = None;
        assert!(startup_line(&config, addr).ends_with("no default service account)"));
    }

    #[test]
    fn bad_flag_values_are_rejected() {
        assert!(T::try_parse_from(["manager", "--lease-duration", "1"]).is_err());
        assert!(T::try_parse_from(["manager", "--metrics-address", "localhost"]).is_err());
        assert!(T::try_parse_from(["manager", "--leader-elect=maybe"]).is_err());
        assert!(T::try_parse_from(["manager", "--shards", "0"]).is_err());
        assert!(T::try_parse_from(["manager", "--shards", "1025"]).is_err());
    }

    #[test]
    fn the_source_policy_and_ignored_namespaces_are_flags() {
        let t = T::parse_from(["manager"]);
        assert!(!t.m.require_verified_sources && t.m.ignore_namespaces.is_empty());
        let t = T::parse_from([
            "manager",
            "--require-verified-sources",
            "--ignore-namespace",
            "a,b",
            "--ignore-namespace",
            "c",
        ]);
        assert!(t.m.require_verified_sources);
        assert_eq!(t.m.ignore_namespaces, ["a", "b", "c"]);
    }

    #[test]
    fn shards_default_to_one_and_are_named_in_the_startup_line() {
        assert_eq!(T::parse_from(["manager"]).m.shards, 1);
        assert_eq!(T::parse_from(["manager", "--shards", "4"]).m.shards, 4);
        let config = kudo_controller::ControllerConfig {
            shards: 4,
            leader_election: Some(kudo_controller::LeaderElection {
                lease_name: "kudo-manager".into(),
                namespace: "kudo-system".into(),
                identity: "pod-a".into(),
                lease_duration: Duration::from_secs(15),
            }),
            ..Default::default()
        };
        let line = startup_line(&config, "127.0.0.1:8080".parse().unwrap());
        assert!(
            line.contains("4 shards as \"pod-a\" on leases kudo-system/kudo-manager-shard-*"),
            "{line}"
        );
    }

    #[test]
    fn lease_namespace_falls_back_from_flag_to_env_to_file_to_kudo_system() {
        assert_eq!(lease_namespace(Some("a"), Some("b"), Some("c")), "a");
        assert_eq!(lease_namespace(None, Some("b"), Some("c\n")), "b");
        assert_eq!(lease_namespace(None, None, Some("c\n")), "c");
        assert_eq!(lease_namespace(None, Some(""), None), "kudo-system");
    }

    #[test]
    fn identity_is_the_pod_name_or_a_unique_host_name() {
        assert_eq!(
            identity(Some("kudo-controller-manager-abc"), Some("h")),
            "kudo-controller-manager-abc"
        );
        let a = identity(None, Some("laptop"));
        let b = identity(None, Some("laptop"));
        assert!(a.starts_with("laptop-") && a != b, "{a} {b}");
        assert!(identity(Some(" "), None).starts_with("kudo-manager-"));
    }
}
