//! `install`, `update`, `upgrade`, `uninstall`: the Instance lifecycle, with KUDO's messages.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use kube::api::DeleteParams;
use kudo_api::{ExecutionStatus, Instance, Operator, OperatorVersion};
use kudo_package::params;
use kudo_package::resources::{ConvertOptions, to_resources};
use kudo_repo::Dependencies;

use super::cluster::{Cluster, ClusterOpts, KudoKind, api_error, connect};
use super::preview::{self, Change, DryRunOpts};
use super::sensitive::{self, Split};
use super::wait::{PreviousRuns, WaitOutcome, wait_for_plan};
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
    after_help = "Examples:\n  kubectl kudo install ./operator\n  kubectl kudo install ./galera -p NODE_COUNT=5 --instance db --wait\n  kubectl kudo install galera-10.5.3_0.1.0.tgz -P values.yaml -n databases --create-namespace\n  kubectl kudo install galera --in-cluster --instance galera-2   # from the installed OperatorVersions\n  kubectl kudo install ./galera -n tenant-a --service-account galera-deployer"
)]
pub struct InstallArgs {
    /// The package: a directory, a .tgz file, an http(s) URL of a .tgz, or a name in a repository.
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
    /// The new package version: a directory, a .tgz file, an http(s) URL, or a repository name.
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

/// Resolves a package argument as KUDO did: local path, then URL, then repository name, and its
/// operator dependencies. Resolution may download, so it runs off the async runtime.
async fn load_package(
    opts: &ClusterOpts,
    package: &str,
    source: &super::repo::PackageSourceOpts,
) -> Result<(kudo_package::Package, Dependencies)> {
    let (opts, package, source) = (opts.clone(), package.to_string(), source.clone());
    tokio::task::spawn_blocking(move || {
        super::repo::resolve_package_with_dependencies(
            &opts,
            &package,
            source.repo.as_deref(),
            source.app_version.as_deref(),
            source.operator_version.as_deref(),
        )
    })
    .await?
}

fn check_values(ov: &OperatorVersion, values: &BTreeMap<String, String>, installing: bool) -> Result<()> {
    if installing {
        let missing = ov.spec.missing_required(values);
        if !missing.is_empty() {
            bail!(
                "missing required parameters during installation: {}",
                missing.join(",")
            );
        }
    }
    let errors = kudo_package::render::validate_parameters(ov, values);
    if !errors.is_empty() {
        bail!("{}", errors.join("\n"));
    }
    // Scheduled plans (kudo-rs extension): a schedule the manager could not use is refused here,
    // before anything is applied. Rendered as the manager will (instance name unknown here).
    let ctx = kudo_package::render::RenderContext::offline("", "", values.clone());
    let errors = kudo_engine::schedule::check_schedules(ov, &ctx);
    if !errors.is_empty() {
        bail!("{}", errors.join("\n"));
    }
    Ok(())
}

/// Splits `values` and `--parameter-secret` for a new Instance (see [`sensitive::split`]): plain
/// values in `spec.parameters`, the others in `spec.parameterSources`.
fn prepare_instance(
    instance: &mut Instance,
    ov: &OperatorVersion,
    values: BTreeMap<String, String>,
    params: &ParamOpts,
) -> Result<Split> {
    let split = sensitive::split(ov, &instance.metadata.name, values, &params.parameter_secrets)?;
    instance.spec.parameters = split.plain.clone();
    instance.spec.parameter_sources = split.sources.clone();
    Ok(split)
}

/// The Instance's parameters with `changes` applied (what the Instance holds after the patch).
fn merged_values(instance: &Instance, changes: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut all = instance.spec.parameters.clone();
    all.extend(changes.iter().map(|(k, v)| (k.clone(), v.clone())));
    all
}

/// Creates the Operator and OperatorVersion of every dependency (leaves first, never Instances:
/// the parent's controller creates those), with their own `KudoOperator` tasks pinned.
async fn install_dependencies(cluster: &Cluster, deps: &Dependencies, io: &mut Io<'_>) -> Result<()> {
    for dep in &deps.packages {
        let mut res = to_resources(
            &dep.package,
            &ConvertOptions {
                namespace: Some(cluster.namespace.clone()),
                ..Default::default()
            },
        )
        .with_context(|| format!("dependency {}", dep.package.operator_version_name()))?;
        deps.pin(&mut res.operator_version);
        install_operator_and_version(cluster, &res.operator, &res.operator_version, io).await?;
    }
    Ok(())
}

/// Creates the Operator unless it exists, and the OperatorVersion unless it exists, printing
/// KUDO's messages.
async fn install_operator_and_version(
    cluster: &Cluster,
    op: &Operator,
    ov: &OperatorVersion,
    io: &mut Io<'_>,
) -> Result<()> {
    if cluster
        .get::<Operator>(KudoKind::Operator, &op.metadata.name)
        .await?
        .is_none()
    {
        cluster.create(KudoKind::Operator, op).await?;
        writeln!(
            io.out,
            "{} created",
            KudoKind::Operator.display(&op.metadata.name)
        )?;
    }
    let ov_name = ov.metadata.name.clone();
    if operator_version_exists(cluster, ov).await? {
        writeln!(
            io.out,
            "{} already installed",
            KudoKind::OperatorVersion.display(&ov_name)
        )?;
    } else {
        cluster.create(KudoKind::OperatorVersion, ov).await?;
        writeln!(io.out, "{} created", KudoKind::OperatorVersion.display(&ov_name))?;
    }
    Ok(())
}

async fn operator_version_exists(cluster: &Cluster, ov: &OperatorVersion) -> Result<bool> {
    // By object name, which includes the appVersion: KUDO compared only operatorVersion and silently
    // skipped a new appVersion (kudo-behaviour.md §4.13).
    Ok(cluster
        .get::<OperatorVersion>(KudoKind::OperatorVersion, &ov.metadata.name)
        .await?
        .is_some())
}

pub async fn install(opts: &ClusterOpts, args: InstallArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    if args.in_cluster {
        return install_in_cluster(opts, args, io).await;
    }
    let (pkg, deps) = load_package(opts, &args.package, &args.source).await?;
    let values = args.params.values()?;
    let cluster = connect(opts).await?;
    let ns = cluster.namespace.clone();
    let mut res = to_resources(
        &pkg,
        &ConvertOptions {
            instance_name: args.instance.clone(),
            namespace: Some(ns.clone()),
            parameters: values.clone(),
            service_account: args.service_account.name(),
        },
    )?;
    // Autopilot rules the manager could not evaluate (kudo-rs extension): nothing is applied.
    check_autopilot_rules(&res.operator_version)?;
    check_autopilot_kinds(&cluster, &res.operator_version).await?;
    let split = prepare_instance(
        &mut res.instance,
        &res.operator_version,
        values.clone(),
        &args.params,
    )?;
    // Validate everything before creating anything.
    if !args.skip_instance {
        check_new_instance(&cluster, &res.instance, &res.operator_version, &split).await?;
    }
    let typed = super::typed_api::check(&cluster, &res.operator_version, args.allow_breaking_changes).await?;
    if args.create_namespace {
        create_namespace(&cluster, &pkg, &res.instance.metadata.name, &values, io).await?;
    }
    install_dependencies(&cluster, &deps, io).await?;
    deps.pin(&mut res.operator_version);
    install_operator_and_version(&cluster, &res.operator, &res.operator_version, io).await?;
    if let Some(planned) = typed {
        super::typed_api::apply(&cluster, &res.operator_version, planned, io).await?;
    }
    if args.skip_instance {
        return Ok(ExitCode::SUCCESS);
    }
    create_instance(&cluster, &res.instance, &split, &args.wait, io).await
}

/// Refuses an OperatorVersion whose autopilot rules (plan field `when`) are invalid: a CEL
/// condition that does not compile, a bad `for`/`cooldown`, a malformed resource, too many rules,
/// or `setParameters` naming an unknown or immutable parameter.
fn check_autopilot_rules(ov: &OperatorVersion) -> Result<()> {
    refuse_rules(ov, &kudo_package::autopilot::check_operator_version(ov))
}

/// The one refusal of invalid autopilot rules, naming each problem on its own line.
fn refuse_rules(ov: &OperatorVersion, errors: &[String]) -> Result<()> {
    if !errors.is_empty() {
        bail!(
            "operator version {} has invalid autopilot rules:\n{}",
            ov.metadata.name,
            errors.join("\n")
        );
    }
    Ok(())
}

/// Refuses an OperatorVersion whose autopilot rules watch a kind this cluster does not serve
/// (a typo, or a CRD not installed yet): the manager could never evaluate them. Rules whose
/// apiVersion or kind is a template are checked by the manager once rendered.
async fn check_autopilot_kinds(cluster: &Cluster, ov: &OperatorVersion) -> Result<()> {
    use kudo_controller::discovery::{Cache, Resolved};
    let discovery = Cache::new(cluster.client.clone());
    let mut errors = Vec::new();
    for (plan, p) in &ov.spec.plans {
        for (i, rule) in p.when.iter().enumerate() {
            let r = &rule.resource;
            if r.api_version.contains("{{") || r.kind.contains("{{") {
                continue;
            }
            // The manager's own discovery lookup, so install and the manager classify a kind alike.
            if let Resolved::Unknown(msg) = discovery.resolve(&r.api_version, &r.kind).await? {
                errors.push(format!("plan {plan:?} when[{i}].resource: {msg}"));
            }
        }
    }
    refuse_rules(ov, &errors)
}

/// What `install` checks before creating an Instance: its parameters (required ones included)
/// against the OperatorVersion, and that no Instance of that name exists.
async fn check_new_instance(
    cluster: &Cluster,
    instance: &Instance,
    ov: &OperatorVersion,
    split: &Split,
) -> Result<()> {
    check_values(&split.without_referenced(ov), &split.all_values(), true)
        .map_err(|e| anyhow::anyhow!("{}", split.redact(&e.to_string())))?;
    let name = &instance.metadata.name;
    if cluster.get::<Instance>(KudoKind::Instance, name).await?.is_some() {
        bail!(
            "cannot install instance '{name}' of operator '{}-{}' because an instance of that name already exists in namespace {}",
            ov.spec.operator.name,
            ov.spec.version,
            cluster.namespace
        );
    }
    Ok(())
}

/// Creates the Instance, prints KUDO's message and waits for its plan if asked.
async fn create_instance(
    cluster: &Cluster,
    instance: &Instance,
    split: &Split,
    wait: &WaitOpts,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    let name = &instance.metadata.name;
    if split.sensitive.is_empty() {
        cluster.create(KudoKind::Instance, instance).await?;
    } else {
        // The Secret first, so that a refused Secret leaves no Instance; a refused Instance
        // removes the Secret again. The owner is set once the Instance has its UID.
        sensitive::create_secret(cluster, name, &split.sensitive).await?;
        if let Err(e) = cluster.create(KudoKind::Instance, instance).await {
            sensitive::delete_secret(cluster, name).await;
            return Err(e);
        }
        if let Err(e) = sensitive::own_secret(cluster, name).await {
            writeln!(io.err, "Warning: {e:#}")?;
        }
    }
    writeln!(
        io.out,
        "{} created",
        KudoKind::Instance.display(&instance.metadata.name)
    )?;
    finish_wait(cluster, &instance.metadata.name, None, wait, io).await
}

/// `install NAME --in-cluster`: a new Instance of an OperatorVersion that is already installed.
async fn install_in_cluster(opts: &ClusterOpts, args: InstallArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let values = args.params.values()?;
    let cluster = connect(opts).await?;
    let name = args.package.as_str();
    let (app, ver) = (
        args.source.app_version.as_deref(),
        args.source.operator_version.as_deref(),
    );
    let mut candidates: Vec<OperatorVersion> = cluster
        .list::<OperatorVersion>(KudoKind::OperatorVersion)
        .await?
        .into_iter()
        .filter(|ov| ov.spec.operator.name == name)
        .filter(|ov| ver.is_none_or(|v| ov.spec.version == v))
        .filter(|ov| app.is_none_or(|a| ov.spec.app_version == a))
        .collect();
    candidates.sort_by(|a, b| {
        kudo_repo::index::cmp_app_then_operator(
            (&a.spec.app_version, &a.spec.version),
            (&b.spec.app_version, &b.spec.version),
        )
    });
    let Some(ov) = candidates.pop() else {
        let mut wanted = format!("operator {name}");
        if let Some(v) = ver {
            wanted.push_str(&format!(" operatorVersion {v}"));
        }
        if let Some(a) = app {
            wanted.push_str(&format!(" appVersion {a}"));
        }
        bail!(
            "no OperatorVersion of {wanted} is installed in namespace {}; install the package without --in-cluster first (or see `kubectl kudo get operatorversions`)",
            cluster.namespace
        );
    };
    let mut instance = kudo_package::resources::instance(
        name,
        &ov.metadata.name,
        &ConvertOptions {
            instance_name: args.instance.clone(),
            namespace: Some(cluster.namespace.clone()),
            parameters: values.clone(),
            service_account: args.service_account.name(),
        },
    );
    check_autopilot_rules(&ov)?;
    check_autopilot_kinds(&cluster, &ov).await?;
    let split = prepare_instance(&mut instance, &ov, values, &args.params)?;
    check_new_instance(&cluster, &instance, &ov, &split).await?;
    create_instance(&cluster, &instance, &split, &args.wait, io).await
}

async fn create_namespace(
    cluster: &Cluster,
    pkg: &kudo_package::Package,
    instance: &str,
    values: &BTreeMap<String, String>,
    io: &mut Io<'_>,
) -> Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: kube::Api<Namespace> = kube::Api::all(cluster.client.clone());
    if api.get_opt(&cluster.namespace).await?.is_some() {
        bail!(
            "namespace {} already exists; drop --create-namespace to install into it",
            cluster.namespace
        );
    }
    let ns_obj = match render_namespace_manifest(pkg, instance, &cluster.namespace, values)? {
        Some(obj) => {
            serde_json::from_value::<Namespace>(obj).context("namespaceManifest is not a Namespace")?
        }
        None => serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}
        }))?,
    };
    api.create(&Default::default(), &ns_obj)
        .await
        .context("cannot create the namespace")?;
    writeln!(io.out, "namespace/{} created", cluster.namespace)?;
    Ok(())
}

/// Renders the package's `namespaceManifest` with KUDO's reduced variable set for it: the implicit
/// names plus `.Params` holding only the values given on the command line, as raw strings.
fn render_namespace_manifest(
    pkg: &kudo_package::Package,
    instance: &str,
    namespace: &str,
    values: &BTreeMap<String, String>,
) -> Result<Option<serde_json::Value>> {
    let file = &pkg.operator.namespace_manifest;
    if file.is_empty() {
        return Ok(None);
    }
    let text = pkg
        .templates
        .get(file)
        .with_context(|| format!("namespaceManifest {file} is not in templates/"))?;
    // Built as template values directly (no JSON tree to convert), as every CLI render path.
    use kudo_template::Value;
    let params = values
        .iter()
        .map(|(k, v)| (k.clone(), Value::str(v.as_str())))
        .collect();
    let data = Value::map(BTreeMap::from([
        ("Name".to_string(), Value::str(instance)),
        ("Namespace".to_string(), Value::str(namespace)),
        ("OperatorName".to_string(), Value::str(pkg.operator.name.as_str())),
        (
            "OperatorVersion".to_string(),
            Value::str(pkg.operator.operator_version.as_str()),
        ),
        (
            "AppVersion".to_string(),
            Value::str(pkg.operator.app_version.as_str()),
        ),
        ("Params".to_string(), Value::map(params)),
    ]));
    let out = kudo_template::render(file, text, &data).map_err(|e| anyhow::anyhow!("{e}"))?;
    let obj: serde_json::Value =
        serde_saphyr::from_str(&out).with_context(|| format!("rendered {file} is not valid YAML"))?;
    Ok(Some(obj))
}

/// Checks an `update` before anything is written: no `-p` for a parameter sourced from a Secret,
/// KUDO's admission rules on the values the Instance will have (unknown or immutable parameters,
/// types, enums, a plan already running; unless `admit` is false: a preview reports the refusal
/// itself) and the schedules. Returns the split values and the spec the update proposes.
fn judge_update(
    cluster: &Cluster,
    instance: &Instance,
    ov: &OperatorVersion,
    values: BTreeMap<String, String>,
    args: &UpdateArgs,
    admit: bool,
) -> Result<(Split, kudo_api::InstanceSpec)> {
    let split = sensitive::split(ov, &args.instance, values, &args.params.parameter_secrets)?;
    if let Some((name, src)) = split
        .plain
        .keys()
        .find_map(|k| Some((k, instance.spec.parameter_sources.get(k)?)))
    {
        let from = src
            .secret_key_ref
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default();
        bail!(
            "parameter {name:?} takes its value from Secret key {from} (spec.parameterSources); use --parameter-secret to change it"
        );
    }
    let mut proposed = instance.spec.clone();
    proposed.parameters = merged_values(instance, &split.plain);
    proposed.parameter_sources.extend(split.sources.clone());
    if let Some(sa) = &args.service_account {
        proposed.service_account_name = sa.clone();
    }
    if admit {
        refuse_denied(instance, &proposed, ov, ov)?;
    }
    let ctx = kudo_package::render::RenderContext::offline(
        &args.instance,
        &cluster.namespace,
        proposed.parameters.clone(),
    );
    let errors = kudo_engine::schedule::check_schedules(ov, &ctx);
    if !errors.is_empty() {
        bail!("{}", errors.join("\n"));
    }
    Ok((split, proposed))
}

/// The merge patch of `--service-account`, when it changes the Instance's account: the name, or
/// `null` (which removes `spec.serviceAccountName`) for `""`.
fn service_account_patch(instance: &Instance, flag: Option<&str>) -> Option<serde_json::Value> {
    let sa = flag.filter(|sa| *sa != instance.spec.service_account_name)?;
    Some(if sa.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::Value::from(sa)
    })
}

pub async fn update(opts: &ClusterOpts, args: UpdateArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let values = args.params.values()?;
    if values.is_empty() && args.params.parameter_secrets.is_empty() && args.service_account.is_none() {
        bail!("update needs at least one parameter (-p NAME=VALUE or -P FILE) or --service-account");
    }
    preview::refuse_wait(&args.dry_run, args.wait.wait)?;
    let cluster = connect(opts).await?;
    let instance = cluster.instance(&args.instance).await?;
    let ov = cluster.operator_version_of(&instance).await?;
    let (split, proposed) = judge_update(&cluster, &instance, &ov, values, &args, !args.dry_run.is_set())?;
    let previous_uid = PreviousRuns::of(&instance);
    if !split.sensitive.is_empty() {
        check_values(
            &split.without_referenced(&ov),
            &merged_values(&instance, &split.all_values()),
            false,
        )
        .map_err(|e| anyhow::anyhow!("{}", split.redact(&e.to_string())))?;
    }
    if args.dry_run.is_set() {
        let change =
            Change::new(&instance, &proposed, &ov, &ov).with_sensitive_values(split.sensitive.clone());
        return preview::preview(&cluster, &change, &args.dry_run, io).await;
    }
    // Sensitive values (`-p` of a `sensitive` parameter) go into `<instance>-parameters`. For a
    // parameter already sourced from there, the new Secret data is a rotation: the manager runs
    // its trigger plan (kudo_engine::rotation); otherwise the new parameterSources entry is a
    // parameter change the admission schedules as usual.
    let mut rotated = false;
    if !split.sensitive.is_empty() {
        let changed = sensitive::store_values(&cluster, &args.instance, &split.sensitive).await?;
        rotated = changed
            && split
                .sensitive
                .keys()
                .all(|k| instance.spec.parameter_sources.get(k) == split.sources.get(k));
    }
    let sources: BTreeMap<_, _> = split
        .sources
        .iter()
        .filter(|(k, v)| instance.spec.parameter_sources.get(*k) != Some(*v))
        .collect();
    let mut patch = serde_json::json!({"spec": {}});
    if !split.plain.is_empty() {
        patch["spec"]["parameters"] = serde_json::to_value(&split.plain)?;
    }
    if !sources.is_empty() {
        patch["spec"]["parameterSources"] = serde_json::to_value(&sources)?;
    }
    let values_change = !split.plain.is_empty() || !sources.is_empty();
    // An Instance a typed object owns (issue 26) is changed through that object.
    let typed = values_change
        && super::typed_api::update_owner(
            &cluster,
            &instance,
            &ov,
            &split.plain,
            &patch["spec"]["parameterSources"],
        )
        .await?;
    if typed {
        patch = serde_json::json!({"spec": {}});
    }
    let sa_patch = service_account_patch(&instance, args.service_account.as_deref());
    if let Some(sa) = &sa_patch {
        patch["spec"]["serviceAccountName"] = sa.clone();
    }
    if !typed && values_change || sa_patch.is_some() {
        cluster
            .merge_patch(KudoKind::Instance, &args.instance, patch)
            .await?;
    } else if !rotated {
        writeln!(
            io.out,
            "Instance {}: the values are unchanged, nothing to do.",
            args.instance
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(io.out, "Instance {} was updated.", args.instance)?;
    if !values_change && !rotated {
        // Only the account changed: no plan runs, so there is nothing to wait for.
        return Ok(ExitCode::SUCCESS);
    }
    finish_wait(&cluster, &args.instance, Some(previous_uid), &args.wait, io).await
}

pub async fn upgrade(opts: &ClusterOpts, args: UpgradeArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    preview::refuse_wait(&args.dry_run, args.wait.wait)?;
    let (pkg, deps) = load_package(opts, &args.package, &args.source).await?;
    let values = args.params.values()?;
    let cluster = connect(opts).await?;
    let instance = cluster.instance(&args.instance).await?;
    let current = cluster.operator_version_of(&instance).await?;
    let mut res = to_resources(
        &pkg,
        &ConvertOptions {
            namespace: Some(cluster.namespace.clone()),
            ..Default::default()
        },
    )?;
    deps.pin(&mut res.operator_version);
    let new_ov = res.operator_version;
    if new_ov.spec.operator.name != current.spec.operator.name {
        bail!(
            "instance {} runs operator {}, not {}",
            args.instance,
            current.spec.operator.name,
            new_ov.spec.operator.name
        );
    }
    // KUDO compared operatorVersions for an upgrade (appVersion only breaks a tie here).
    let order = kudo_repo::index::cmp_version(&new_ov.spec.version, &current.spec.version)
        .then_with(|| kudo_repo::index::cmp_version(&new_ov.spec.app_version, &current.spec.app_version));
    if order == std::cmp::Ordering::Less {
        bail!(
            "upgraded version {} is older than the current version {}",
            new_ov.metadata.name,
            current.metadata.name
        );
    }
    let previous_uid = PreviousRuns::of(&instance);
    if new_ov.metadata.name == current.metadata.name {
        return upgrade_same_version(&cluster, &instance, &current, &args, io).await;
    }
    if !args.params.parameter_secrets.is_empty()
        || values.keys().any(|k| {
            new_ov
                .spec
                .parameters
                .iter()
                .any(|p| &p.name == k && p.is_sensitive())
        })
    {
        bail!(
            "upgrade does not take sensitive parameters or --parameter-secret yet: upgrade first, then use update --parameter-secret"
        );
    }
    check_values(&new_ov, &merged_values(&instance, &values), false)?;
    let mut proposed = instance.spec.clone();
    proposed.operator_version.name = new_ov.metadata.name.clone();
    proposed.parameters = merged_values(&instance, &values);
    if args.dry_run.is_set() {
        let change = Change::new(&instance, &proposed, &current, &new_ov);
        return preview::preview(&cluster, &change, &args.dry_run, io).await;
    }
    refuse_denied(&instance, &proposed, &current, &new_ov)?;
    let typed = super::typed_api::check(&cluster, &new_ov, args.allow_breaking_changes).await?;
    install_dependencies(&cluster, &deps, io).await?;
    if !operator_version_exists(&cluster, &new_ov).await? {
        cluster.create(KudoKind::OperatorVersion, &new_ov).await?;
        writeln!(
            io.out,
            "{} created",
            KudoKind::OperatorVersion.display(&new_ov.metadata.name)
        )?;
    }
    if let Some(planned) = typed {
        super::typed_api::apply(&cluster, &new_ov, planned, io).await?;
    }
    let mut patch = serde_json::json!({"spec": {"operatorVersion": {"name": new_ov.metadata.name}}});
    if !values.is_empty() {
        patch["spec"]["parameters"] = serde_json::to_value(&values)?;
    }
    cluster
        .merge_patch(KudoKind::Instance, &args.instance, patch)
        .await?;
    writeln!(io.out, "instance {}/{} updated", cluster.namespace, args.instance)?;
    finish_wait(&cluster, &args.instance, Some(previous_uid), &args.wait, io).await
}

/// `upgrade` to the version the Instance already runs (KUDO issue 1752): re-runs the upgrade plan
/// (else update, else deploy) if its last run failed, or previews that with `--dry-run`;
/// otherwise there is nothing to upgrade.
async fn upgrade_same_version(
    cluster: &Cluster,
    instance: &Instance,
    current: &OperatorVersion,
    args: &UpgradeArgs,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    let previous_uid = PreviousRuns::of(instance);
    let plan = ["upgrade", "update", "deploy"]
        .into_iter()
        .find(|p| current.spec.plans.contains_key(*p));
    let failed = plan
        .and_then(|p| instance.status.as_ref()?.plan_status.get(p))
        .is_some_and(|s| s.status == ExecutionStatus::FatalError);
    match (plan, failed) {
        (Some(plan), true) if args.dry_run.is_set() => {
            let proposed = super::plan::trigger_spec(instance, plan);
            let change = Change::new(instance, &proposed, current, current);
            preview::preview(cluster, &change, &args.dry_run, io).await
        }
        (Some(plan), true) => {
            super::plan::trigger_plan(cluster, instance, current, plan).await?;
            writeln!(
                io.out,
                "instance {}/{} upgrade re-triggered ({plan} plan)",
                cluster.namespace, args.instance
            )?;
            finish_wait(cluster, &args.instance, Some(previous_uid), &args.wait, io).await
        }
        _ => bail!(
            "instance {} already runs {}; nothing to upgrade",
            args.instance,
            current.metadata.name
        ),
    }
}

/// Refuses, before anything is written, a change of `stored` to `proposed` that KUDO's admission
/// webhook denied (its message, non-zero exit), as KUDO's CLI failed then. The manager applies the
/// same rules to changes written by other clients (`kubectl apply`), after the fact.
pub(crate) fn refuse_denied(
    stored: &Instance,
    proposed: &kudo_api::InstanceSpec,
    old_ov: &OperatorVersion,
    new_ov: &OperatorVersion,
) -> Result<kudo_engine::triggers::Decision> {
    let admitted = kudo_controller::admitted_spec(stored);
    kudo_engine::triggers::judge_client_change(stored, admitted.as_ref(), proposed, old_ov, new_ov)
        .map_err(|message| anyhow::anyhow!("updating instance {}: {message}", stored.metadata.name))
}

pub async fn uninstall(opts: &ClusterOpts, args: UninstallArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let cluster = connect(opts).await?;
    let instance = cluster.instance(&args.instance).await?;
    // An Instance a typed object owns goes with that object (issue 26).
    let typed = match cluster.operator_version_of(&instance).await {
        Ok(ov) => super::typed_api::delete_owner(&cluster, &instance, &ov).await?,
        Err(_) => None,
    };
    match typed {
        Some(owner) => writeln!(
            io.out,
            "{owner} deleted: the typed object that owns instance {}, which goes with it",
            args.instance
        )?,
        None => {
            cluster
                .api(KudoKind::Instance)
                .delete(&args.instance, &DeleteParams::background())
                .await
                .map_err(|e| api_error(e, KudoKind::Instance, &args.instance))?;
            writeln!(io.out, "{} deleted", KudoKind::Instance.display(&args.instance))?;
        }
    }
    if args.wait.wait {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(args.wait.wait_time);
        while cluster
            .get::<Instance>(KudoKind::Instance, &args.instance)
            .await?
            .is_some()
        {
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "timed out after {}s waiting for instance {} to be deleted",
                    args.wait.wait_time,
                    args.instance
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
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

    #[test]
    fn update_patches_the_service_account_only_when_it_changes() {
        let mut i: Instance = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "metadata": {"name": "i"},
            "spec": {"operatorVersion": {"name": "ov"}}
        }))
        .unwrap();
        assert_eq!(service_account_patch(&i, None), None);
        assert_eq!(service_account_patch(&i, Some("")), None);
        assert_eq!(
            service_account_patch(&i, Some("sa")),
            Some(serde_json::json!("sa"))
        );
        i.spec.service_account_name = "sa".into();
        assert_eq!(service_account_patch(&i, Some("sa")), None);
        // `--service-account ""` removes the field (a merge patch's null).
        assert_eq!(service_account_patch(&i, Some("")), Some(serde_json::Value::Null));
    }

    /// The `namespaceManifest` sees the implicit names and `.Params` as a map of the given raw
    /// strings (its data is built as template values directly, with Go's map type).
    #[test]
    fn namespace_manifest_sees_names_and_raw_params() {
        let operator = "apiVersion: kudo.dev/v1beta1\nname: demo\nnamespaceManifest: ns.yaml\n\
            operatorVersion: 0.1.0\nappVersion: 2.0.0\ntasks: []\nplans: {}\n";
        let ns = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ .Namespace }}\n  labels:\n    \
            instance: {{ .Name }}\n    op: {{ .OperatorName }}-{{ .OperatorVersion }}-{{ .AppVersion }}\n    \
            x: \"{{ .Params.X }}\"\n    type: \"{{ printf \"%T\" .Params }}\"\n";
        let files = BTreeMap::from([
            ("operator.yaml".to_string(), operator.as_bytes().to_vec()),
            (
                "params.yaml".to_string(),
                b"apiVersion: kudo.dev/v1beta1\nparameters: []\n".to_vec(),
            ),
            ("templates/ns.yaml".to_string(), ns.as_bytes().to_vec()),
        ]);
        let pkg = kudo_package::reader::from_files(files, "test").expect("package");
        let values = BTreeMap::from([("X".to_string(), "3".to_string())]);
        let obj = render_namespace_manifest(&pkg, "inst", "space", &values)
            .expect("rendered")
            .expect("a manifest");
        assert_eq!(
            obj,
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": "space",
                "labels": {"instance": "inst", "op": "demo-0.1.0-2.0.0", "x": "3",
                    "type": "map[string]interface {}"}}})
        );
    }
}
