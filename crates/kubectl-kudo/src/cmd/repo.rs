//! `kubectl kudo repo …`, `search`, shell completions, and resolving `install NAME` through the
//! configured repositories.
//!
//! Repository work is blocking I/O (see `kudo-repo`); these commands run without a tokio runtime.
//! They write through the [`Io`] they are given.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use kudo_package::list::Table;
use kudo_repo::{Fetcher, IndexFile, Location, RepoEntry, RepositoryConfig};

use super::cluster::ClusterOpts;
use crate::Io;

#[derive(Args, Debug)]
pub struct RepoArgs {
    #[command(subcommand)]
    pub command: RepoCommand,
}

#[derive(Subcommand, Debug)]
pub enum RepoCommand {
    /// Add an operator repository (checks that URL serves a valid index.yaml, or that an oci://
    /// registry answers).
    #[command(
        after_help = "Examples:\n  kubectl kudo repo add local file:///srv/operators\n  kubectl kudo repo add mine https://example.org/operators/v1\n  kubectl kudo repo add team oci://registry.example.com/operators   # install NAME pulls oci://registry.example.com/operators/NAME"
    )]
    Add(AddArgs),
    /// Remove operator repositories.
    #[command(visible_alias = "rm")]
    Remove(RemoveArgs),
    /// List operator repositories; `*` marks the current context.
    List,
    /// Set the repository used when no --repo is given.
    Context(ContextArgs),
    /// Build DIR/index.yaml from the package tarballs in DIR.
    #[command(
        after_help = "Examples:\n  kubectl kudo repo index ./repo --url https://example.org/operators/v1\n  kubectl kudo repo index ./repo --merge https://example.org/operators/v1/index.yaml --overwrite"
    )]
    Index(IndexArgs),
}

#[derive(Args, Debug)]
pub struct AddArgs {
    /// Name of the repository.
    pub name: String,
    /// Base URL of the repository: http(s)://…, file:///… or a local directory (an index), or
    /// oci://HOST[:PORT]/NAMESPACE (operator NAME is the repository NAMESPACE/NAME, its versions
    /// its tags).
    pub url: String,
    /// Do not check that the URL serves a valid index (or that the registry can be reached).
    #[arg(short = 'f', long)]
    pub skip_check: bool,
    #[command(flatten)]
    pub registry: super::oci::RegistryOpts,
}

#[derive(Args, Debug)]
pub struct RemoveArgs {
    /// Names of the repositories to remove.
    #[arg(required = true)]
    pub names: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ContextArgs {
    /// Name of the repository to make current.
    pub name: String,
}

#[derive(Args, Debug)]
pub struct IndexArgs {
    /// Directory holding the package tarballs (*.tgz); index.yaml is written there.
    pub dir: PathBuf,
    /// Base URL the tarballs will be served from (default http://localhost/).
    #[arg(long)]
    pub url: Option<String>,
    /// Use the URL of this configured repository as base URL.
    #[arg(long, conflicts_with = "url")]
    pub url_repo: Option<String>,
    /// Also include the entries of this index (path or URL) that DIR does not provide.
    #[arg(long)]
    pub merge: Option<String>,
    /// Merge the index of this configured repository.
    #[arg(long, conflicts_with = "merge")]
    pub merge_repo: Option<String>,
    /// Replace an existing DIR/index.yaml.
    #[arg(short = 'w', long)]
    pub overwrite: bool,
}

/// `kubectl kudo search`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  kubectl kudo search kafka\n  kubectl kudo search --repo local -a")]
pub struct SearchArgs {
    /// Part of an operator name (all operators when omitted).
    pub criteria: Option<String>,
    /// Repository to search (default: the current context).
    #[arg(long)]
    pub repo: Option<String>,
    /// List every version, not only the newest of each operator.
    #[arg(short = 'a', long)]
    pub all_versions: bool,
}

/// The flags `install`, `upgrade` and `package list …` use to pick a package from a repository
/// or registry.
#[derive(Args, Debug, Clone, Default)]
pub struct PackageSourceOpts {
    /// Repository to take the package from (default: the current context).
    #[arg(long)]
    pub repo: Option<String>,
    /// App version of the package (default: the newest).
    #[arg(long)]
    pub app_version: Option<String>,
    /// Operator version of the package (default: the newest).
    #[arg(long)]
    pub operator_version: Option<String>,
    #[command(flatten)]
    pub registry: super::oci::RegistryOpts,
    #[command(flatten)]
    pub verify: super::oci::VerifyOpts,
}

/// `kubectl kudo completion SHELL`.
#[derive(Args, Debug)]
pub struct CompletionArgs {
    /// The shell to generate the completion script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

fn fetcher(opts: &ClusterOpts) -> Fetcher {
    if opts.request_timeout > 0 {
        Fetcher::new(Duration::from_secs(opts.request_timeout))
    } else {
        Fetcher::default()
    }
}

pub fn run(opts: &ClusterOpts, args: RepoArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let home = opts.home_dir();
    match args.command {
        RepoCommand::Add(a) => add(opts, &home, a, io),
        RepoCommand::Remove(a) => {
            let mut cfg = RepositoryConfig::load(&home)?;
            for name in &a.names {
                cfg.remove(name)?;
                cfg.save(&home)?;
                writeln!(io.out, "{name:?} has been removed from your repositories")?;
            }
            Ok(ExitCode::SUCCESS)
        }
        RepoCommand::List => {
            let cfg = RepositoryConfig::load(&home)?;
            if cfg.repositories.is_empty() {
                bail!("no repositories to show");
            }
            let mut table = Table::new();
            table.row(["NAME", "URL"]);
            for r in &cfg.repositories {
                let name = if r.name == cfg.context {
                    format!("*{}", r.name)
                } else {
                    r.name.clone()
                };
                table.row([name, r.url.clone()]);
            }
            writeln!(io.out, "{}", table.render())?;
            Ok(ExitCode::SUCCESS)
        }
        RepoCommand::Context(a) => {
            let mut cfg = RepositoryConfig::load(&home)?;
            cfg.set_context(&a.name)?;
            cfg.save(&home)?;
            Ok(ExitCode::SUCCESS)
        }
        RepoCommand::Index(a) => index(opts, &home, a, io),
    }
}

fn add(opts: &ClusterOpts, home: &Path, a: AddArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let mut cfg = RepositoryConfig::load(home)?;
    let entry = RepoEntry {
        name: a.name.clone(),
        url: a.url.clone(),
    };
    // Fail on a duplicate name before any network traffic.
    cfg.clone().add(entry.clone())?;
    if kudo_oci::is_oci(&a.url) {
        check_registry(opts, &a)?;
    } else if !a.skip_check {
        let base = Location::parse(&a.url)?;
        fetcher(opts).index(&base).map_err(|e| {
            anyhow::anyhow!(
                "looks like {:?} is not a valid operator repository or cannot be reached: {e}",
                a.url
            )
        })?;
    }
    cfg.add(entry)?;
    cfg.save(home)?;
    writeln!(io.out, "{:?} has been added to your repositories", a.name)?;
    Ok(ExitCode::SUCCESS)
}

fn index(opts: &ClusterOpts, home: &Path, a: IndexArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    if !a.dir.is_dir() {
        bail!("{} is not a directory", a.dir.display());
    }
    let target = a.dir.join(kudo_repo::index::INDEX_FILE);
    if target.exists() && !a.overwrite {
        bail!(
            "{} already exists: use --overwrite to replace it",
            target.display()
        );
    }
    let cfg = if a.url_repo.is_some() || a.merge_repo.is_some() {
        Some(RepositoryConfig::load(home)?)
    } else {
        None
    };
    let repo_url = |name: &str| -> Result<String> {
        let cfg = cfg.as_ref().expect("loaded when a repo flag is set");
        Ok(cfg.current(Some(name))?.url.clone())
    };
    let base_url = match (&a.url, &a.url_repo) {
        (Some(u), _) => Some(u.clone()),
        (None, Some(r)) => Some(repo_url(r)?),
        (None, None) => None,
    };
    let generated = chrono::Local::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, false);
    let (mut idx, warnings) = IndexFile::from_directory(&a.dir, base_url.as_deref(), Some(generated))?;
    for w in &warnings {
        writeln!(io.err, "{w}")?;
    }
    let merge_from = match (&a.merge, &a.merge_repo) {
        (Some(m), _) => Some(Location::parse(m)?),
        (None, Some(r)) => Some(Location::parse(&repo_url(r)?)?.join(kudo_repo::index::INDEX_FILE)),
        (None, None) => None,
    };
    if let Some(loc) = merge_from {
        let other = fetcher(opts)
            .index_file(&loc)
            .with_context(|| format!("cannot merge {loc}"))?;
        idx.merge(&other);
    }
    std::fs::write(&target, idx.to_yaml()?).with_context(|| format!("cannot write {}", target.display()))?;
    let count: usize = idx.entries.values().map(Vec::len).sum();
    writeln!(
        io.out,
        "index {} written with {count} package version(s)",
        target.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `repo add NAME oci://HOST/NAMESPACE`: a valid reference, and (unless `--skip-check`) a registry
/// that answers with the user's credentials.
fn check_registry(opts: &ClusterOpts, a: &AddArgs) -> Result<()> {
    let ns = kudo_oci::OciRef::parse(&a.url)?;
    if ns.tag.is_some() || ns.digest.is_some() {
        bail!(
            "{}: an OCI repository is oci://HOST/NAMESPACE, without a tag or digest",
            a.url
        );
    }
    if a.skip_check {
        return Ok(());
    }
    let options = super::oci::registry_options(opts, &a.registry)?;
    kudo_oci::block_on(async { kudo_oci::Registry::new(options)?.check_access(&ns.registry).await })
        .map_err(|e| anyhow::anyhow!("looks like {:?} cannot be reached: {e}", a.url))
}

/// `kubectl kudo search [CRITERIA]`: substring match on operator names in a repository index.
pub fn search(opts: &ClusterOpts, args: SearchArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let cfg = RepositoryConfig::load(&opts.home_dir())?;
    let entry = cfg.current(args.repo.as_deref())?;
    if kudo_oci::is_oci(&entry.url) {
        bail!(
            "repository {:?} is an OCI registry ({}), which has no index to search: install NAME pulls \
             {}/NAME",
            entry.name,
            entry.url,
            entry.url.trim_end_matches('/')
        );
    }
    let base = Location::parse(&entry.url)?;
    let idx = fetcher(opts)
        .index(&base)
        .with_context(|| format!("cannot read the index of repository {:?}", entry.name))?;
    let found = idx.search(args.criteria.as_deref().unwrap_or(""), args.all_versions);
    if found.is_empty() {
        writeln!(io.out, "no operators found")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new();
    table.row(["Name", "Operator Version", "App Version"]);
    let mut previous = "";
    for pv in found {
        let name = if pv.name == previous {
            String::new()
        } else {
            pv.name.clone()
        };
        previous = &pv.name;
        table.row([name, pv.operator_version.clone(), pv.app_version.clone()]);
    }
    writeln!(io.out, "{}", table.render())?;
    Ok(ExitCode::SUCCESS)
}

/// A package with where it came from and its resolved dependencies.
pub struct Resolved {
    pub package: kudo_package::Package,
    pub source: kudo_repo::Source,
    pub dependencies: kudo_repo::Dependencies,
}

/// The package `install`/`upgrade` should use for `name_or_path` — an `oci://` artifact, an
/// existing local package (the argument contains a path separator, or names an existing .tgz or
/// package directory), else an http(s) URL of a tarball, else the newest matching version in the
/// `repo` (or current) repository (an index, digest-checked, or an OCI repository namespace) —
/// and its operator dependencies (`KudoOperator` tasks), resolved recursively: relative paths next
/// to the package, names through the repositories. `--verify` applies to every package of the
/// graph. Blocking: call it through `tokio::task::spawn_blocking`.
pub fn resolve_package_with_dependencies(
    opts: &ClusterOpts,
    name_or_path: &str,
    source: &PackageSourceOpts,
) -> Result<Resolved> {
    let req = kudo_repo::Request {
        name_or_path,
        repo: source.repo.as_deref(),
        app_version: source.app_version.as_deref(),
        operator_version: source.operator_version.as_deref(),
    };
    let mut fetcher = fetcher(opts);
    fetcher.oci = super::oci::settings(opts, &source.registry, &source.verify)?;
    let (package, src) = kudo_repo::resolve(&opts.home_dir(), req, &fetcher)?;
    let dependencies = kudo_repo::resolve_dependencies(&opts.home_dir(), &package, &src, &fetcher)?;
    Ok(Resolved {
        package,
        source: src,
        dependencies,
    })
}

/// Writes the completion script of `cmd` for `shell` to `out`, named for the `kubectl-kudo`
/// binary (the name shells see on PATH).
pub fn write_completion(
    cmd: &mut clap::Command,
    shell: clap_complete::Shell,
    out: &mut dyn Write,
) -> Result<()> {
    clap_complete::generate(shell, cmd, "kubectl-kudo", out);
    out.flush()?;
    Ok(())
}
