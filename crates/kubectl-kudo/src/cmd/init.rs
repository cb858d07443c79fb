//! `init`: installs (or prints, or checks, or removes) KUDO's server side — the CRDs, the
//! manager's namespace, account, roles and Deployment, as `kudo_client::init` makes and applies
//! them — and sets up the local `$KUDO_HOME`. No admission webhook and no cert-manager: the
//! manager decides which plan runs itself.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use kudo_client::init::{DEFAULT_INSTANCE_ACCOUNT, InitRequest, Setup};

use super::cluster::{ClusterOpts, connect};

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum InitOutput {
    Yaml,
    Json,
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum PullPolicy {
    #[value(name = "Always")]
    Always,
    #[value(name = "IfNotPresent")]
    IfNotPresent,
    #[value(name = "Never")]
    Never,
}

impl PullPolicy {
    fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo init --wait\n  kubectl kudo init --dry-run -o yaml\n  kubectl kudo init --dry-run -o yaml | kubectl delete -f -\n  kubectl kudo init --uninstall"
)]
pub struct InitArgs {
    /// Only set up the local $KUDO_HOME, install nothing in the cluster.
    #[arg(short = 'c', long, conflicts_with_all = ["crd_only", "upgrade", "verify", "uninstall", "wait"])]
    pub client_only: bool,
    /// Print the manifests instead of installing them (needs -o).
    #[arg(long, requires = "output")]
    pub dry_run: bool,
    /// Output format for --dry-run.
    #[arg(short = 'o', long)]
    pub output: Option<InitOutput>,
    /// Install only the CRDs.
    #[arg(long, conflicts_with_all = ["wait", "upgrade"])]
    pub crd_only: bool,
    /// Re-apply an existing installation with this version's manifests.
    #[arg(long, conflicts_with = "verify")]
    pub upgrade: bool,
    /// Check that an installation is complete, change nothing.
    #[arg(long, conflicts_with = "dry_run")]
    pub verify: bool,
    /// Remove everything `init` installs (Instances are deleted with their CRDs).
    #[arg(long, conflicts_with_all = ["dry_run", "upgrade", "verify", "crd_only"])]
    pub uninstall: bool,
    /// Wait until the manager is ready.
    #[arg(short = 'w', long)]
    pub wait: bool,
    /// How long --wait waits, in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub wait_timeout: u64,
    /// Manager image (default: the image of this version).
    #[arg(short = 'i', long, value_name = "IMAGE", conflicts_with = "version")]
    pub kudo_image: Option<String>,
    /// Version of the manager to install: the tag of the default image (`kudo-rs/manager:v<VERSION>`).
    #[arg(long, value_name = "VERSION")]
    pub version: Option<String>,
    /// Accepted for KUDO v0.19 scripts: KUDO needed a certificate for its admission webhook;
    /// kudo-rs has no webhook, so there is nothing to sign.
    #[arg(long)]
    pub unsafe_self_signed_webhook_ca: bool,
    /// Accepted for older KUDO scripts (`--webhook InstanceValidation`): kudo-rs has no webhook,
    /// the manager admits Instance changes itself.
    #[arg(long, value_name = "WEBHOOK")]
    pub webhook: Option<String>,
    /// Image pull policy of the manager (KUDO's default: Always).
    #[arg(long, value_enum, default_value = "Always")]
    pub kudo_image_pull_policy: PullPolicy,
    /// Use this existing service account (must be bound to cluster-admin) instead of creating one.
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,
    /// Manager replicas: one leads (holds the Lease and reconciles), the others stand by and take
    /// over within the lease duration when its pod goes. With --shards above 1 they all act,
    /// each on its share of the shards.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(i32).range(1..))]
    pub replicas: i32,
    /// Split the Instances into N shards (the manager's --shards): the replicas share them, each
    /// reconciling only its shards' Instances; a replica's shards move to the others within the
    /// lease duration when it goes. 1 keeps one acting replica.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: u32,
    /// Bind the manager to the ClusterRole `kudo-manager` (no wildcards: kudo.dev objects, Events,
    /// its Lease, impersonating ServiceAccounts, reading what it watches) instead of cluster-admin,
    /// and start it with --default-service-account: every Instance is then applied as a
    /// ServiceAccount of its own namespace, never as the manager.
    #[arg(long)]
    pub least_privilege: bool,
    /// With --least-privilege: the ServiceAccount, in each Instance's namespace, that Instances
    /// without spec.serviceAccountName are applied as (create it there and grant it what the
    /// Instance's package needs, e.g. a RoleBinding to `admin`).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_INSTANCE_ACCOUNT,
          requires = "least_privilege", value_parser = parse_account)]
    pub default_service_account: String,
    /// Start the manager with --require-verified-sources: it runs only OperatorVersions that an
    /// OperatorSource stored after verifying their signature (docs/distributing.md).
    #[arg(long)]
    pub require_verified_sources: bool,
}

impl InitArgs {
    /// What the flags install.
    pub fn setup(&self) -> Setup {
        Setup {
            crd_only: self.crd_only,
            service_account: self.service_account.clone(),
            least_privilege: self.least_privilege,
            default_service_account: self.default_service_account.clone(),
            image: self.kudo_image.clone(),
            version: self.version.clone(),
            image_pull_policy: self.kudo_image_pull_policy.as_str().to_string(),
            replicas: self.replicas,
            shards: self.shards,
            require_verified_sources: self.require_verified_sources,
        }
    }
}

/// `--default-service-account` of `init`: a ServiceAccount name, not empty.
fn parse_account(value: &str) -> std::result::Result<String, String> {
    match super::instance::parse_service_account(value)? {
        name if name.is_empty() => Err("a ServiceAccount name is required".to_string()),
        name => Ok(name),
    }
}

/// Says, once per flag, that a flag only KUDO's admission webhook needed changes nothing here.
fn explain_webhook_flags(args: &InitArgs, io: &mut crate::Io<'_>) -> Result<()> {
    if args.unsafe_self_signed_webhook_ca {
        writeln!(
            io.err,
            "--unsafe-self-signed-webhook-ca: nothing to do, kudo-rs has no admission webhook (the manager admits Instance changes itself), so no certificate is needed"
        )?;
    }
    if let Some(w) = &args.webhook {
        writeln!(
            io.err,
            "--webhook {w}: nothing to do, kudo-rs has no admission webhook (the manager admits Instance changes itself)"
        )?;
    }
    Ok(())
}

/// `--dry-run`: the manifests as YAML documents or one `v1` List.
fn print_dry_run(
    setup: &Setup,
    output: Option<InitOutput>,
    namespace: &str,
    io: &mut crate::Io<'_>,
) -> Result<()> {
    let ms = kudo_client::init::manifests::manifests(setup, namespace)?;
    match output.unwrap_or(InitOutput::Yaml) {
        InitOutput::Yaml => {
            for m in &ms {
                writeln!(io.out, "---")?;
                write!(io.out, "{}", serde_saphyr::to_string(&m.object)?)?;
            }
        }
        InitOutput::Json => {
            let list = kudo_client::init::dry_run_list(&ms);
            writeln!(io.out, "{}", serde_json::to_string_pretty(&list)?)?;
        }
    }
    Ok(())
}

/// The one line `init` prints on stderr when it installs the manager the KUDO way.
pub const LEAST_PRIVILEGE_HINT: &str = "Hint: the manager is bound to cluster-admin and applies every Instance with that identity (KUDO's way); `kubectl kudo init --least-privilege` binds it to a ClusterRole without wildcards and applies each Instance as a ServiceAccount of its namespace";

pub async fn run(opts: &ClusterOpts, args: InitArgs, io: &mut crate::Io<'_>) -> Result<ExitCode> {
    let home = opts.home_dir();
    let namespace = opts
        .namespace
        .clone()
        .unwrap_or_else(|| "kudo-system".to_string());
    explain_webhook_flags(&args, io)?;
    let installs_manager = !(args.client_only || args.crd_only || args.verify || args.uninstall);
    if installs_manager && !args.least_privilege {
        writeln!(io.err, "{LEAST_PRIVILEGE_HINT}")?;
    }
    let setup = args.setup();
    if args.dry_run {
        print_dry_run(&setup, args.output, &namespace, io)?;
        return Ok(ExitCode::SUCCESS);
    }
    if !args.verify && !args.uninstall {
        ensure_home(&home)?;
        writeln!(io.out, "$KUDO_HOME has been configured at {}", home.display())?;
    }
    if args.client_only {
        return Ok(ExitCode::SUCCESS);
    }
    let cluster = connect(opts).await?;
    if args.uninstall {
        kudo_client::init::uninstall(&cluster, &setup, &namespace, io).await?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.verify {
        let missing = kudo_client::init::verify(&cluster, &setup, &namespace).await?;
        if missing.is_empty() {
            writeln!(io.out, "✅ KUDO is installed in namespace {namespace}")?;
            return Ok(ExitCode::SUCCESS);
        }
        writeln!(
            io.err,
            "KUDO installation is incomplete; missing: {}",
            missing.join(", ")
        )?;
        return Ok(ExitCode::from(1));
    }
    let request = InitRequest {
        setup: &setup,
        namespace: &namespace,
        upgrade: args.upgrade,
    };
    kudo_client::init::install(&cluster, &request, io).await?;
    if args.wait && !args.crd_only {
        writeln!(io.out, "⌛Waiting for KUDO controller to be ready...")?;
        let timeout = Duration::from_secs(args.wait_timeout);
        kudo_client::init::wait_ready(&cluster, &namespace, timeout).await?;
        writeln!(io.out, "✅ KUDO is ready!")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn ensure_home(home: &std::path::Path) -> Result<()> {
    let repo_dir = home.join("repository");
    std::fs::create_dir_all(&repo_dir).with_context(|| format!("cannot create {}", repo_dir.display()))?;
    let file = repo_dir.join("repositories.yaml");
    if !file.exists() {
        std::fs::write(&file, "repoVersion: v1\ncontext: \"\"\nrepositories: []\n")
            .with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use kudo_client::init::manifests::manifests;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        init: InitArgs,
    }

    fn deployment(t: &T) -> serde_json::Value {
        let ms = manifests(&t.init.setup(), "kudo-system").unwrap();
        ms.last().unwrap().object.clone()
    }

    /// The flags' defaults are `Setup::default()`, which kudo-client's manifest tests start from.
    #[test]
    fn no_flags_install_kudos_default_setup() {
        assert_eq!(T::parse_from(["init"]).init.setup(), Setup::default());
    }

    #[test]
    fn default_service_account_needs_least_privilege_and_a_valid_name() {
        let t = T::parse_from([
            "init",
            "--least-privilege",
            "--default-service-account",
            "deployer",
        ]);
        assert_eq!(t.init.setup().default_service_account, "deployer");
        assert!(T::try_parse_from(["init", "--default-service-account", "deployer"]).is_err());
        for bad in ["", "Deployer", "x-", "a_b"] {
            let e = T::try_parse_from(["init", "--least-privilege", "--default-service-account", bad]);
            let e = e.err().expect(bad).to_string();
            assert!(e.contains("--default-service-account"), "{e}");
        }
    }

    #[test]
    fn replicas_and_shards_are_at_least_one() {
        assert!(T::try_parse_from(["init", "--shards", "0"]).is_err());
        assert!(T::try_parse_from(["init", "--replicas", "0"]).is_err());
        let t = T::parse_from(["init", "--replicas", "2", "--shards", "4"]);
        assert_eq!((t.init.setup().replicas, t.init.setup().shards), (2, 4));
    }

    #[test]
    fn manager_deployment_serves_probes_on_all_addresses_and_knows_its_pod() {
        let d = deployment(&T::parse_from(["init"]));
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(args[0], "manager");
        let after = |flag: &str| args.iter().position(|a| *a == flag).map(|i| args[i + 1]);
        assert_eq!(after("--metrics-address"), Some("0.0.0.0:8080"));
        assert_eq!(after("--lease-name"), Some("kudo-manager"));
        assert!(args.contains(&"--leader-elect=true"));
        // Every flag the Deployment passes is one `kubectl kudo manager` accepts.
        #[derive(Parser)]
        struct M {
            #[command(flatten)]
            m: super::super::manager::ManagerArgs,
        }
        let parsed = M::try_parse_from(args.iter().copied()).expect("manager flags parse");
        assert!(parsed.m.leader_elect);
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name");
        assert_eq!(c["env"][1]["name"], "KUDO_POD_NAMESPACE");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert_eq!(c["readinessProbe"]["httpGet"]["port"], "metrics");
        assert_eq!(c["ports"][0]["containerPort"], 8080);
    }

    #[test]
    fn pull_policy_takes_kubernetes_spelling() {
        // KUDO pulled `Always` by default.
        let t = T::parse_from(["init"]);
        assert_eq!(t.init.kudo_image_pull_policy, PullPolicy::Always);
        assert_eq!(
            deployment(&t)["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Always"
        );
        let t = T::parse_from(["init", "--kudo-image-pull-policy", "IfNotPresent"]);
        assert_eq!(t.init.kudo_image_pull_policy, PullPolicy::IfNotPresent);
    }

    #[test]
    fn version_conflicts_with_an_image_and_webhook_flags_change_nothing() {
        assert_eq!(
            deployment(&T::parse_from(["init", "--version", "0.2.0"]))["spec"]["template"]["spec"]["containers"]
                [0]["image"],
            "kudo-rs/manager:v0.2.0"
        );
        assert!(T::try_parse_from(["init", "--version", "0.2.0", "-i", "x:y"]).is_err());
        // webhook flags change nothing in what is installed
        let objects = |t: T| -> Vec<serde_json::Value> {
            let ms = manifests(&t.init.setup(), "kudo-system").unwrap();
            ms.into_iter().map(|m| m.object).collect()
        };
        let hooked = T::parse_from([
            "init",
            "--unsafe-self-signed-webhook-ca",
            "--webhook",
            "InstanceValidation",
        ]);
        assert_eq!(objects(T::parse_from(["init"])), objects(hooked));
    }
}
