//! `install`, `update`, `upgrade`, `uninstall`: their flags, and KUDO's messages printed from the
//! outcomes of the operations in `kudo_client` (which do the cluster work).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use kudo_api::ExecutionStatus;
use kudo_client::cluster::{Cluster, KudoKind};
use kudo_client::install::{InClusterRequest, InstallRequest, Installed};
use kudo_client::update::{UpdateRequest, Updated};
use kudo_client::upgrade::{PreparedUpgrade, UpgradeRequest, Upgraded};
use kudo_client::wait::{PreviousRuns, WaitOutcome, wait_for_plan};
use kudo_client::{Event, Progress, install, uninstall, update, upgrade};
use kudo_package::params;

use super::cluster::{ClusterOpts, connect};
use super::preview::{self, Change, DryRunOpts, PreviewOutput};
use super::repo::Resolved;
use crate::Io;

/// Parameter flags shared by install/update/upgrade.
#[derive(Args, Debug, Clone, Default)]
pub struct ParamOpts {
    /// Parameter value NAME=VALUE (repeatable; arrays/maps as inline YAML; overrides -P).
    #[arg(short = 'p', long = "parameter", value_name = "NAME=VALUE")]
    pub parameters: Vec<String>,
    /// YAML file of NAME: value parameters (repeatable; later files override earlier ones).
    #[arg(short = 'P', long = "parameter-file", value_name = "FILE")]
    pub parameter_files: Vec<PathBuf>,
    /// Take parameter NAME's value from key KEY of the existing Secret SECRET in the Instance's
    /// namespace, read by the manager at render time (repeatable; kudo-rs extension).
    #[arg(long = "parameter-secret", value_name = "NAME=SECRET/KEY")]
    pub parameter_secrets: Vec<String>,
}

impl ParamOpts {
    /// `-P` files in order, then `-p` values, as KUDO merged them.
    pub fn values(&self) -> Result<BTreeMap<String, String>> {
        let mut values = BTreeMap::new();
        for f in &self.parameter_files {
            let text = std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
            values.extend(
                params::parse_param_file(&f.display().to_string(), &text).map_err(anyhow::Error::msg)?,
            );
        }
        values.extend(params::parse_cli_params(&self.parameters).map_err(anyhow::Error::msg)?);
        Ok(values)
    }
}

/// Parses a `--service-account` value: a ServiceAccount name (a DNS-1123 subdomain, as
/// Kubernetes names ServiceAccounts), or empty (no account). clap's error names the flag.
pub(crate) fn parse_service_account(value: &str) -> std::result::Result<String, String> {
    if value.is_empty() || is_dns1123_subdomain(value) {
        return Ok(value.to_string());
    }
    Err(format!(
        "{value:?} is not a valid ServiceAccount name: it must be a DNS-1123 subdomain (at most 253 \
         lower-case letters, digits, '-' and '.', starting and ending with a letter or digit)"
    ))
}

/// Kubernetes' `IsDNS1123Subdomain`: dot-separated labels of `[a-z0-9]([-a-z0-9]*[a-z0-9])?`,
/// 253 characters at most.
fn is_dns1123_subdomain(s: &str) -> bool {
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    };
    s.len() <= 253 && s.split('.').all(label_ok)
}

/// The `--service-account` flag of `install` and `update`.
#[derive(Args, Debug, Clone, Default)]
pub struct ServiceAccountOpts {
    /// Run this Instance as ServiceAccount NAME of its namespace (spec.serviceAccountName): the
    /// manager performs every request for this Instance (apply, delete, reads, Pipe pods, child
    /// Instances) as system:serviceaccount:<namespace>:NAME, so the Instance can do only what
    /// that account may. Empty: the manager's --default-service-account, else the manager itself.
    #[arg(long = "service-account", value_name = "NAME", value_parser = parse_service_account)]
    pub service_account: Option<String>,
}

impl ServiceAccountOpts {
    /// The account to put in `spec.serviceAccountName`, if any (empty counts as none).
    pub fn name(&self) -> Option<String> {
        self.service_account.clone().filter(|s| !s.is_empty())
    }
}

/// Flags for waiting on a plan.
#[derive(Args, Debug, Clone, Default)]
pub struct WaitOpts {
    /// Wait until the plan finishes (exit 1 if it fails).
    #[arg(long)]
    pub wait: bool,
    /// How long to wait, in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub wait_time: u64,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo install ./operator\n  kubectl kudo install ./galera -p NODE_COUNT=5 --instance db --wait\n  kubectl kudo install galera-10.5.3_0.1.0.tgz -P values.yaml -n databases --create-namespace\n  kubectl kudo install galera --in-cluster --instance galera-2   # from the installed OperatorVersions\n  kubectl kudo install ./galera -n tenant-a --service-account galera-deployer\n  kubectl kudo install oci://registry.example.com/operators/galera:0.1.0 --verify --key cosign.pub"
)]
pub struct InstallArgs {
    /// The package: a directory, a .tgz file, an http(s) URL of a .tgz, an
    /// oci://HOST/REPO[:TAG|@sha256:…] artifact, or a name in a repository.
    pub package: String,
    #[command(flatten)]
    pub source: super::repo::PackageSourceOpts,
    /// Instance name (default: <operator>-instance).
    #[arg(long)]
    pub instance: Option<String>,
    #[command(flatten)]
    pub params: ParamOpts,
    /// Install only the Operator and OperatorVersion, no Instance.
    #[arg(long)]
    pub skip_instance: bool,
    /// Take the operator from the OperatorVersions already installed in the namespace (PKG is an
    /// operator name; --operator-version/--app-version pick one, else the newest) and only create
    /// the Instance.
    #[arg(long, conflicts_with_all = ["skip_instance", "repo", "create_namespace"])]
    pub in_cluster: bool,
    /// Create the namespace first (rendering the package's namespaceManifest if it has one).
    #[arg(long)]
    pub create_namespace: bool,
    #[command(flatten)]
    pub service_account: ServiceAccountOpts,
    #[command(flatten)]
    pub wait: WaitOpts,
    /// Write the operator's typed API (the CRD of `api:` in operator.yaml) even where existing
    /// objects of it would no longer be valid under the new schema.
    #[arg(long)]
    pub allow_breaking_changes: bool,
    /// Adopt objects the package renders that already exist and were created by another tool
    /// (kubectl, Helm): the first plan labels them, makes the Instance their owner and moves their
    /// field ownership to the manager, UIDs unchanged. Without it such an object fails the plan,
    /// unchanged. Objects of another Instance are never adopted. Valid for the first plan only.
    #[arg(long)]
    pub take_ownership: bool,
    /// Print the objects install would create (Operator, OperatorVersion, the typed API's CRD and
    /// ClusterRoles, the Instance; with --create-namespace the Namespace first) instead of
    /// creating them, for Git: no request is made. Sensitive values are refused: give them as
    /// --parameter-secret references.
    #[arg(long, conflicts_with_all = ["in_cluster", "wait"])]
    pub dry_run: bool,
    /// Output of --dry-run: yaml (documents) or json (one v1 List).
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        requires = "dry_run",
        value_name = "FORMAT"
    )]
    pub output: Option<ManifestFormat>,
}

/// How `install --dry-run` prints the manifests.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ManifestFormat {
    /// YAML documents, each after `---`.
    #[default]
    Yaml,
    /// One `v1` `List` (which `kubectl apply -f -` takes).
    Json,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo update --instance galera-instance -p NODE_COUNT=3\n  kubectl kudo update --instance db -P new-values.yaml --wait\n  kubectl kudo update --instance db --service-account db-deployer"
)]
pub struct UpdateArgs {
    /// The Instance to update.
    #[arg(long)]
    pub instance: String,
    #[command(flatten)]
    pub params: ParamOpts,
    /// Change the ServiceAccount the manager acts as for this Instance (spec.serviceAccountName;
    /// see `install --help`); `--service-account ""` clears it.
    #[arg(long = "service-account", value_name = "NAME", value_parser = parse_service_account)]
    pub service_account: Option<String>,
    #[command(flatten)]
    pub wait: WaitOpts,
    #[command(flatten)]
    pub dry_run: DryRunOpts,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo upgrade ./galera-v2 --instance galera-instance\n  kubectl kudo upgrade galera-10.5.4_0.2.0.tgz --instance db -p NEW_PARAM=x --wait"
)]
pub struct UpgradeArgs {
    /// The new package version: a directory, a .tgz file, an http(s) URL, an oci:// artifact, or a
    /// repository name.
    pub package: String,
    #[command(flatten)]
    pub source: super::repo::PackageSourceOpts,
    /// The Instance to upgrade.
    #[arg(long)]
    pub instance: String,
    #[command(flatten)]
    pub params: ParamOpts,
    #[command(flatten)]
    pub wait: WaitOpts,
    #[command(flatten)]
    pub dry_run: DryRunOpts,
    /// Write the operator's typed API (the CRD of `api:` in operator.yaml) even where existing
    /// objects of it would no longer be valid under the new schema.
    #[arg(long)]
    pub allow_breaking_changes: bool,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo uninstall --instance galera-instance\n  kubectl kudo uninstall --instance db --wait"
)]
pub struct UninstallArgs {
    /// The Instance to delete.
    #[arg(long)]
    pub instance: String,
    #[command(flatten)]
    pub wait: WaitOpts,
}

/// Resolves a package argument as KUDO did (local path, then URL, then repository name; an
/// `oci://` artifact first), and its operator dependencies; prints the digest of an OCI artifact
/// and what its verification found. Resolution may download, so it runs off the async runtime.
async fn load_package(
    opts: &ClusterOpts,
    package: &str,
    source: &super::repo::PackageSourceOpts,
    io: &mut Io<'_>,
) -> Result<Resolved> {
    let (opts, package, source) = (opts.clone(), package.to_string(), source.clone());
    let resolved = tokio::task::spawn_blocking(move || {
        super::repo::resolve_package_with_dependencies(&opts, &package, &source)
    })
    .await??;
    let oci =
        std::iter::once(&resolved.source).chain(resolved.dependencies.packages.iter().map(|d| &d.source));
    for src in oci {
        if let kudo_repo::Source::Oci {
            requested,
            pinned,
            verification,
        } = src
        {
            writeln!(
                io.out,
                "{}",
                super::oci::describe_pull(requested, pinned, verification)
            )?;
        }
    }
    Ok(resolved)
}

/// Prints what an operation writes as it writes it, in KUDO's words.
impl Progress for Io<'_> {
    fn report(&mut self, event: Event<'_>) -> std::io::Result<()> {
        match event {
            Event::Created { kind, name } => writeln!(self.out, "{} created", kind.display(name)),
            Event::AlreadyInstalled { kind, name } => {
                writeln!(self.out, "{} already installed", kind.display(name))
            }
            Event::NamespaceCreated { name } => writeln!(self.out, "namespace/{name} created"),
            Event::CrdApplied { name, existed } => {
                let verb = if existed { "configured" } else { "created" };
                writeln!(
                    self.out,
                    "customresourcedefinition.apiextensions.k8s.io/{name} {verb}"
                )
            }
            Event::Installed { group } => writeln!(self.out, "✅ installed {group}"),
            Event::Deleted { kind, name } => writeln!(self.out, "{} {name} deleted", kind.to_lowercase()),
            Event::Unused { kind, name } => {
                writeln!(
                    self.out,
                    "{} {name} deleted (no longer used)",
                    kind.to_lowercase()
                )
            }
        }
    }
}

/// `kubectl kudo install`: reads the package, then `kudo_client::install` prints each object as it
/// is written and the new Instance, then waits if asked.
pub async fn install(opts: &ClusterOpts, args: InstallArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    if args.in_cluster {
        return install_in_cluster(opts, args, io).await;
    }
    let resolved = load_package(opts, &args.package, &args.source, io).await?;
    let values = args.params.values()?;
    let req = InstallRequest {
        package: resolved.package,
        source: resolved.source,
        dependencies: resolved.dependencies,
        instance: args.instance.clone(),
        values,
        parameter_secrets: args.params.parameter_secrets.clone(),
        service_account: args.service_account.name(),
        skip_instance: args.skip_instance,
        create_namespace: args.create_namespace,
        allow_breaking_changes: args.allow_breaking_changes,
        take_ownership: args.take_ownership,
    };
    if args.dry_run {
        return print_manifests(opts, &req, args.output.unwrap_or_default(), io).await;
    }
    let cluster = connect(opts).await?;
    let installed: Installed = install::install(&cluster, req, io).await?;
    match installed.instance {
        Some(created) => created_instance(&cluster, created, &args.wait, io).await,
        None => Ok(ExitCode::SUCCESS),
    }
}

/// `install --dry-run` (and `upgrade --dry-run -o manifests`): the objects `req` writes, in the
/// namespace the command would use (read from the flags and kubeconfig; no request).
async fn print_manifests(
    opts: &ClusterOpts,
    req: &InstallRequest,
    format: ManifestFormat,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    let namespace = kudo_client::cluster::namespace(&opts.connect_options()).await;
    let objects = kudo_client::manifests::install_manifests(req, &namespace)?;
    match format {
        ManifestFormat::Yaml => {
            for o in &objects {
                writeln!(io.out, "---")?;
                write!(io.out, "{}", serde_saphyr::to_string(o)?)?;
            }
        }
        ManifestFormat::Json => {
            let list =
                serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": objects});
            writeln!(io.out, "{}", serde_json::to_string_pretty(&list)?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints KUDO's message of a new Instance (and a warning when its Secret has no owner), then
/// waits for its plan if asked.
async fn created_instance(
    cluster: &Cluster,
    created: install::CreatedInstance,
    wait: &WaitOpts,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    if let Some(e) = created.secret_owner_error {
        writeln!(io.err, "Warning: {:#}", anyhow::Error::from(e))?;
    }
    writeln!(io.out, "{} created", KudoKind::Instance.display(&created.name))?;
    finish_wait(cluster, &created.name, None, wait, io).await
}

/// `install NAME --in-cluster`: a new Instance of an OperatorVersion that is already installed.
async fn install_in_cluster(opts: &ClusterOpts, args: InstallArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let values = args.params.values()?;
    let cluster = connect(opts).await?;
    let req = InClusterRequest {
        operator: args.package.clone(),
        app_version: args.source.app_version.clone(),
        operator_version: args.source.operator_version.clone(),
        instance: args.instance.clone(),
        values,
        parameter_secrets: args.params.parameter_secrets.clone(),
        service_account: args.service_account.name(),
        take_ownership: args.take_ownership,
    };
    let created = install::install_in_cluster(&cluster, req).await?;
    created_instance(&cluster, created, &args.wait, io).await
}

/// `kubectl kudo update`: `kudo_client::update` prepares; `--dry-run` previews, else it writes and
/// KUDO's message is printed from the outcome.
pub async fn update(opts: &ClusterOpts, args: UpdateArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let values = args.params.values()?;
    if values.is_empty() && args.params.parameter_secrets.is_empty() && args.service_account.is_none() {
        bail!("update needs at least one parameter (-p NAME=VALUE or -P FILE) or --service-account");
    }
    preview::refuse_wait(&args.dry_run, args.wait.wait)?;
    let cluster = connect(opts).await?;
    let req = UpdateRequest {
        instance: args.instance.clone(),
        values,
        parameter_secrets: args.params.parameter_secrets.clone(),
        service_account: args.service_account.clone(),
        preview: args.dry_run.is_set(),
    };
    let prepared = update::prepare(&cluster, &req).await?;
    if args.dry_run.is_set() {
        let (ov, sensitive) = (&prepared.operator_version, prepared.split.sensitive.clone());
        let change =
            Change::new(&prepared.instance, &prepared.proposed, ov, ov).with_sensitive_values(sensitive);
        return preview::preview(&cluster, &change, &args.dry_run, io).await;
    }
    match update::apply(&cluster, prepared).await? {
        Updated::Unchanged => {
            writeln!(
                io.out,
                "Instance {}: the values are unchanged, nothing to do.",
                args.instance
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Updated::Changed { runs_plan, previous } => {
            writeln!(io.out, "Instance {} was updated.", args.instance)?;
            if !runs_plan {
                // Only the account changed: no plan runs, so there is nothing to wait for.
                return Ok(ExitCode::SUCCESS);
            }
            finish_wait(&cluster, &args.instance, Some(previous), &args.wait, io).await
        }
    }
}

/// `kubectl kudo upgrade`: reads the package, `kudo_client::upgrade` prepares; `--dry-run`
/// previews, else it writes and the outcome is printed.
pub async fn upgrade(opts: &ClusterOpts, args: UpgradeArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    preview::refuse_wait(&args.dry_run, args.wait.wait)?;
    let resolved = load_package(opts, &args.package, &args.source, io).await?;
    let values = args.params.values()?;
    if args.dry_run.output == Some(PreviewOutput::Manifests) {
        // For Git the upgraded Instance is the new package's, with the Instance's values again.
        let req = InstallRequest {
            package: resolved.package,
            source: resolved.source,
            dependencies: resolved.dependencies,
            instance: Some(args.instance.clone()),
            values,
            parameter_secrets: args.params.parameter_secrets.clone(),
            service_account: None,
            skip_instance: false,
            create_namespace: false,
            allow_breaking_changes: args.allow_breaking_changes,
            take_ownership: false,
        };
        return print_manifests(opts, &req, ManifestFormat::Yaml, io).await;
    }
    let cluster = connect(opts).await?;
    let req = UpgradeRequest {
        package: resolved.package,
        source: resolved.source,
        dependencies: resolved.dependencies,
        instance: args.instance.clone(),
        values,
        parameter_secrets: args.params.parameter_secrets.clone(),
        allow_breaking_changes: args.allow_breaking_changes,
    };
    let prepared = upgrade::prepare(&cluster, req).await?;
    if args.dry_run.is_set() {
        return preview_upgrade(&cluster, &prepared, &args.dry_run, io).await;
    }
    let (ns, name) = (&cluster.namespace, &args.instance);
    match upgrade::apply(&cluster, prepared, io).await? {
        Upgraded::Retriggered { plan, previous } => {
            writeln!(io.out, "instance {ns}/{name} upgrade re-triggered ({plan} plan)")?;
            finish_wait(&cluster, name, Some(previous), &args.wait, io).await
        }
        Upgraded::Upgraded { previous, .. } => {
            writeln!(io.out, "instance {ns}/{name} updated")?;
            finish_wait(&cluster, name, Some(previous), &args.wait, io).await
        }
    }
}

/// `upgrade --dry-run`: what the upgrade (or the re-run of a failed upgrade plan) would do.
async fn preview_upgrade(
    cluster: &Cluster,
    prepared: &PreparedUpgrade,
    opts: &DryRunOpts,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    let (instance, proposed, old_ov, new_ov) = prepared.change();
    let change = Change::new(instance, &proposed, old_ov, new_ov);
    preview::preview(cluster, &change, opts, io).await
}

/// `kubectl kudo uninstall`: `kudo_client::uninstall`, its outcome printed, then the wait for the
/// Instance to be gone if asked.
pub async fn uninstall(opts: &ClusterOpts, args: UninstallArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let cluster = connect(opts).await?;
    match uninstall::uninstall(&cluster, &args.instance).await? {
        uninstall::Uninstalled::TypedOwner { name } => writeln!(
            io.out,
            "{name} deleted: the typed object that owns instance {}, which goes with it",
            args.instance
        )?,
        uninstall::Uninstalled::Instance => {
            writeln!(io.out, "{} deleted", KudoKind::Instance.display(&args.instance))?
        }
    }
    if args.wait.wait {
        let timeout = Duration::from_secs(args.wait.wait_time);
        uninstall::wait_deleted(&cluster, &args.instance, timeout).await?;
    }
    Ok(ExitCode::SUCCESS)
}

/// After a change, optionally waits for the plan it scheduled (a run not among `previous_uid`).
pub async fn finish_wait(
    cluster: &Cluster,
    instance: &str,
    previous_uid: Option<PreviousRuns>,
    wait: &WaitOpts,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    if !wait.wait {
        return Ok(ExitCode::SUCCESS);
    }
    match wait_for_plan(
        cluster,
        instance,
        previous_uid,
        Duration::from_secs(wait.wait_time),
    )
    .await?
    {
        WaitOutcome::Finished {
            plan,
            status: ExecutionStatus::Complete,
        } => {
            writeln!(io.out, "{plan} plan of instance {instance} is COMPLETE")?;
            Ok(ExitCode::SUCCESS)
        }
        WaitOutcome::Finished { plan, status } => {
            writeln!(
                io.err,
                "{plan} plan of instance {instance} ended {status}; see `kubectl kudo plan status --instance {instance}`"
            )?;
            Ok(ExitCode::from(1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_flag_takes_a_dns_subdomain_or_nothing() {
        for ok in ["", "kudo-instance", "a", "db.deployer", "x1"] {
            assert_eq!(parse_service_account(ok).as_deref(), Ok(ok));
        }
        for bad in ["Deployer", "-a", "a-", "a_b", "a..b", ".a", &"a".repeat(254)] {
            let e = parse_service_account(bad).unwrap_err();
            assert!(e.contains("DNS-1123 subdomain"), "{e}");
        }
        #[derive(clap::Parser)]
        struct T {
            #[command(flatten)]
            u: UpdateArgs,
        }
        use clap::Parser;
        let e = T::try_parse_from(["update", "--instance", "i", "--service-account", "A"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--service-account"), "{e}");
        let t = T::parse_from(["update", "--instance", "i", "--service-account", ""]);
        assert_eq!(t.u.service_account.as_deref(), Some(""));
    }
}
