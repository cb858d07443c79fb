//! `kubectl kudo package …`: scaffold, list, verify, pack and render operator packages, offline;
//! push, pull and sign them in OCI registries (`cmd/oci.rs`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};

use kudo_package::list::{self, ParamListOptions};
use kudo_package::render::{RenderContext, render_plan};
use kudo_package::resources::{ConvertOptions, to_resources};
use kudo_package::verify::{ParamChecks, Verification};
use kudo_package::{Package, params, read_path};

pub use super::format::Output;
use crate::Io;
use kudo_client::checks::verify_package;

#[derive(Args, Debug)]
pub struct PackageArgs {
    #[command(subcommand)]
    pub command: PackageCommand,
}

/// `package graph -o`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GraphOutput {
    /// An SVG picture (no Graphviz needed).
    Svg,
    /// Graphviz's DOT language.
    Dot,
    /// A mermaid flowchart (GitHub renders it in a ```mermaid block).
    Mermaid,
}

#[derive(Subcommand, Debug)]
pub enum PackageCommand {
    /// Scaffold a new package: ./operator/operator.yaml and ./operator/params.yaml.
    #[command(
        after_help = "Examples:\n  kubectl kudo package new galera\n  kubectl kudo package new galera --overwrite"
    )]
    New {
        /// Operator name (a DNS-1123 label; it prefixes every object name).
        name: String,
        /// Replace the package files if ./operator already exists.
        #[arg(short = 'w', long)]
        overwrite: bool,
        /// Accepted for KUDO scripts (KUDO prompted for the package fields); kudo-rs does not
        /// prompt: it scaffolds from NAME, edit operator/operator.yaml afterwards.
        #[arg(short = 'i', long)]
        interactive: bool,
    },
    /// List the parameters, plans or tasks of a package.
    #[command(subcommand)]
    List(ListCommand),
    /// Check a package with every verifier KUDO has (plus a few of ours); exits non-zero on errors.
    #[command(
        after_help = "Examples:\n  kubectl kudo package verify ./operator\n  kubectl kudo package verify galera-10.5.3_0.1.0.tgz --param-checks all"
    )]
    Verify {
        /// Package directory or .tgz.
        package: PathBuf,
        /// Extra parameter checks (warnings): display, hint, desc, type, hasgroup, groups, all.
        #[arg(long, value_delimiter = ',')]
        param_checks: Vec<String>,
        /// Print the result as yaml or json instead of tables.
        #[arg(short, long)]
        output: Option<Output>,
    },
    /// Draw the plans of a package as a graph: phases in order, the steps of each with their
    /// tasks, arrows where one runs after another (the layout of `kubectl kudo ui`).
    #[command(
        after_help = "Serial steps stand in a row joined by arrows (wrapped every 4 steps); parallel steps stand side\nby side with no arrow between them; the phases of a serial plan follow one another downwards.\n\nExamples:\n  kubectl kudo package graph ./examples/galera > galera-plans.svg\n  kubectl kudo package graph ./examples/galera --plan deploy -o mermaid\n  kubectl kudo package graph galera --repo community -o dot | dot -Tpng > plans.png"
    )]
    Graph {
        /// Package directory or .tgz, or an operator name in a repository.
        #[arg(default_value = ".")]
        package: String,
        #[command(flatten)]
        source: super::repo::PackageSourceOpts,
        /// Only this plan (default: every plan, by name).
        #[arg(long)]
        plan: Option<String>,
        /// Output format.
        #[arg(short, long, default_value = "svg")]
        output: GraphOutput,
    },
    /// Print the parameters as a JSON Schema (draft 2020-12) for a values file given with -P.
    #[command(
        after_help = "Examples:\n  kubectl kudo package schema ./operator > values.schema.json\n  kubectl kudo package schema galera --repo community -o yaml\n\nEditors using yaml-language-server validate a values file against it with a first line\n  # yaml-language-server: $schema=./values.schema.json"
    )]
    Schema {
        /// Package directory or .tgz, or an operator name in a repository.
        #[arg(default_value = ".")]
        package: String,
        #[command(flatten)]
        source: super::repo::PackageSourceOpts,
        /// Output format (JSON Schema documents are usually JSON files).
        #[arg(short, long, default_value = "json")]
        output: Output,
    },
    /// Print Argo CD's health checks for Instances and for the package's typed API, as a merge
    /// patch of the argocd-cm ConfigMap (keys resource.customizations.health.<group>_<Kind>).
    #[command(
        name = "argocd-health",
        after_help = "Examples:
  kubectl kudo package argocd-health ./galera > argocd-health.yaml
  kubectl -n argocd patch configmap argocd-cm --type merge --patch-file argocd-health.yaml
  kubectl kudo package argocd-health   # only kudo.dev/Instance, outside a package directory

The checks, with their tests in Argo CD's layout, are in deploy/argocd/resource_customizations/."
    )]
    ArgocdHealth {
        /// Package directory or .tgz, or an operator name in a repository (none: only the
        /// Instance's check).
        package: Option<String>,
        #[command(flatten)]
        source: super::repo::PackageSourceOpts,
    },
    /// Verify a package and pack it into a reproducible <name>-<appVersion>_<operatorVersion>.tgz.
    #[command(
        after_help = "Examples:\n  kubectl kudo package create ./operator\n  kubectl kudo package create ./operator -d dist --overwrite"
    )]
    Create {
        /// Package directory (or .tgz to re-pack).
        package: PathBuf,
        /// Directory to write the tarball into.
        #[arg(short, long, default_value = ".")]
        destination: PathBuf,
        /// Replace an existing tarball.
        #[arg(short = 'w', long)]
        overwrite: bool,
        /// Print the verification result as yaml or json (as `package verify -o`).
        #[arg(short, long)]
        output: Option<Output>,
    },
    /// Render a plan offline: the exact objects the controller would apply or delete, step by step.
    #[command(
        after_help = "Examples:\n  kubectl kudo package render ./operator\n  kubectl kudo package render ./operator --plan node_update -p NODE_COUNT=5 -n db\n  kubectl kudo package render ./operator -P values.yaml -o json"
    )]
    Render {
        /// Package directory or .tgz.
        package: PathBuf,
        /// Plan to render.
        #[arg(long, default_value = "deploy")]
        plan: String,
        /// Instance name (default: <operator>-instance).
        #[arg(long)]
        instance: Option<String>,
        /// Namespace of the instance.
        #[arg(short, long, default_value = "default")]
        namespace: String,
        /// Parameter value NAME=VALUE (repeatable; overrides -P).
        #[arg(short = 'p', long = "parameter")]
        parameters: Vec<String>,
        /// YAML file of parameter values (repeatable; later files win).
        #[arg(short = 'P', long = "parameter-file")]
        parameter_files: Vec<PathBuf>,
        /// Output format.
        #[arg(short, long, default_value = "yaml")]
        output: Output,
        /// Kubernetes version (MAJOR.MINOR) to render for: objects of API versions it no longer
        /// serves are shown translated to their replacement, as the manager would apply them
        /// (default: the version the embedded cluster of `kubectl kudo dev` serves).
        #[arg(long, value_name = "X.Y")]
        kubernetes_version: Option<String>,
    },
    #[command(flatten)]
    Oci(OciCommand),
}

impl PackageCommand {
    /// Whether the command talks to a registry (and so needs a tokio runtime).
    pub fn needs_runtime(&self) -> bool {
        matches!(
            self,
            PackageCommand::Oci(OciCommand::Push { .. } | OciCommand::Pull { .. } | OciCommand::Sign { .. })
        )
    }
}

/// Registry subcommands of `package` (kudo-rs extension): the artifact format and flags are in
/// docs/distributing.md.
#[derive(Subcommand, Debug)]
pub enum OciCommand {
    /// Push a package to an OCI registry as a kudo package artifact; prints its digest.
    #[command(
        long_about = "Push a package to an OCI registry as a kudo package artifact: an OCI image manifest \
(artifactType application/vnd.kudo.package.v1) whose one layer is the reproducible `package create` \
tarball, so the same package pushed twice has the same digest. The package is verified first. The tag \
defaults to the package's operatorVersion ('+' written '_'). Credentials come from the Docker config \
(`kubectl kudo registry login`, ~/.docker/config.json, credential helpers).",
        after_help = "Examples:\n  kubectl kudo package push ./operator oci://registry.example.com/operators/galera\n  kubectl kudo package push galera-10.5.3_0.1.0.tgz oci://127.0.0.1:5000/galera:0.1.0 --ca-file ca.crt"
    )]
    Push {
        /// Package directory or .tgz.
        package: PathBuf,
        /// Where to push: oci://HOST[:PORT]/REPOSITORY[:TAG].
        reference: String,
        #[command(flatten)]
        registry: super::oci::RegistryOpts,
        /// Print the reference and digest as yaml or json.
        #[arg(short, long)]
        output: Option<Output>,
    },
    /// Pull a package from an OCI registry and write its .tgz (checked, optionally verified).
    #[command(
        long_about = "Pull a package from an OCI registry and write its tarball <name>-<appVersion>_<operatorVersion>.tgz \
into --destination. The manifest must be a kudo package artifact; the layer's digest and size are checked \
and the package is read with the package reader's limits before anything is written. With --verify, \
a cosign signature by one of the --key public keys for the artifact's digest is required.",
        after_help = "Examples:\n  kubectl kudo package pull oci://registry.example.com/operators/galera:0.1.0\n  kubectl kudo package pull oci://registry.example.com/operators/galera@sha256:… --verify --key cosign.pub -d dist"
    )]
    Pull {
        /// oci://HOST[:PORT]/REPOSITORY[:TAG|@sha256:DIGEST].
        reference: String,
        /// Directory to write the tarball into.
        #[arg(short, long, default_value = ".")]
        destination: PathBuf,
        /// Replace an existing tarball.
        #[arg(short = 'w', long)]
        overwrite: bool,
        #[command(flatten)]
        registry: super::oci::RegistryOpts,
        #[command(flatten)]
        verify: super::oci::VerifyOpts,
        /// Print the reference, digest and file as yaml or json.
        #[arg(short, long)]
        output: Option<Output>,
    },
    /// Sign a package artifact in cosign's keyed format (a sha256-<digest>.sig manifest).
    #[command(
        long_about = "Sign a package artifact, named by digest, with an ECDSA P-256 private key, in cosign's \
keyed format: a simple-signing payload naming the digest, as a layer of the manifest tagged \
sha256-<hex>.sig in the same repository, the base64 signature in the layer annotation \
dev.cosignproject.cosign/signature. `cosign verify --key PUB` checks it, and `install --verify --key PUB` \
checks cosign's. The key: PKCS#8 or SEC1 PEM (`kubectl kudo package keygen`, or openssl).",
        after_help = "Examples:\n  kubectl kudo package sign oci://registry.example.com/operators/galera@sha256:… --key kudo.key"
    )]
    Sign {
        /// oci://HOST[:PORT]/REPOSITORY@sha256:DIGEST (a digest: a tag can move).
        reference: String,
        /// The private key file.
        #[arg(long, value_name = "KEY")]
        key: PathBuf,
        #[command(flatten)]
        registry: super::oci::RegistryOpts,
        /// Print the signature's reference as yaml or json.
        #[arg(short, long)]
        output: Option<Output>,
    },
    /// Make an ECDSA P-256 key pair for `package sign`: NAME.key (PKCS#8, mode 0600) and NAME.pub.
    #[command(
        after_help = "Examples:\n  kubectl kudo package keygen\n  kubectl kudo package keygen --name release -d ~/.kudo/keys\n\nThe same with openssl:\n  openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out kudo.key\n  openssl ec -in kudo.key -pubout -out kudo.pub"
    )]
    Keygen {
        /// Directory to write the keys into.
        #[arg(short, long, default_value = ".")]
        destination: PathBuf,
        /// File name of the keys (NAME.key, NAME.pub).
        #[arg(long, default_value = "kudo")]
        name: String,
        /// Replace existing key files.
        #[arg(short = 'w', long)]
        overwrite: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ListCommand {
    /// Parameters, sorted by name.
    #[command(
        after_help = "Examples:\n  kubectl kudo package list parameters ./operator\n  kubectl kudo package list parameters ./operator --required"
    )]
    Parameters {
        /// Package directory or .tgz, or an operator name in a repository.
        #[arg(default_value = ".")]
        package: String,
        #[command(flatten)]
        source: super::repo::PackageSourceOpts,
        /// Add a column with descriptions.
        #[arg(short, long)]
        descriptions: bool,
        /// Only parameters that must be given at install (required, no default).
        #[arg(short, long)]
        required: bool,
        /// Only names.
        #[arg(long)]
        names: bool,
    },
    /// Plans as a tree of phases, steps and tasks.
    #[command(
        after_help = "Examples:\n  kubectl kudo package list plans ./operator\n  kubectl kudo package list plans ./operator -t"
    )]
    Plans {
        #[arg(default_value = ".")]
        package: String,
        #[command(flatten)]
        source: super::repo::PackageSourceOpts,
        /// Show each task's kind and templates.
        #[arg(short = 't', long)]
        with_tasks: bool,
    },
    /// Tasks with their kind and templates.
    #[command(after_help = "Examples:\n  kubectl kudo package list tasks ./operator")]
    Tasks {
        #[arg(default_value = ".")]
        package: String,
        #[command(flatten)]
        source: super::repo::PackageSourceOpts,
    },
}

fn load(path: &Path) -> anyhow::Result<Package> {
    read_path(path).with_context(|| format!("failed to read package {}", path.display()))
}

/// `package graph PKG`: the plans drawn by `kudo_package::graph`.
fn graph(
    opts: &super::cluster::ClusterOpts,
    package: &str,
    source: &super::repo::PackageSourceOpts,
    plan: Option<&str>,
    output: GraphOutput,
    io: &mut Io<'_>,
) -> anyhow::Result<ExitCode> {
    use kudo_package::graph::{Format, draw};
    let pkg = load_listed(opts, package, source)?;
    let res = to_resources(&pkg, &ConvertOptions::default())?;
    let format = match output {
        GraphOutput::Svg => Format::Svg,
        GraphOutput::Dot => Format::Dot,
        GraphOutput::Mermaid => Format::Mermaid,
    };
    let name = format!("{} {}", pkg.operator.name, pkg.operator.operator_version);
    write!(
        io.out,
        "{}",
        draw(&res.operator_version.spec, &name, plan, format)?
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `package argocd-health [PKG]`: the argocd-cm patch for Instances and PKG's typed API.
fn argocd_health(
    opts: &super::cluster::ClusterOpts,
    package: Option<String>,
    source: &super::repo::PackageSourceOpts,
    io: &mut Io<'_>,
) -> anyhow::Result<ExitCode> {
    let api = match &package {
        Some(p) => load_listed(opts, p, source)?.operator.api,
        None => None,
    };
    if let (Some(p), None) = (&package, &api) {
        writeln!(
            io.err,
            "package {p} declares no typed API (api: in operator.yaml): only kudo.dev/Instance's check"
        )?;
    }
    write!(io.out, "{}", kudo_package::argocd::argocd_cm_patch(api.as_ref()))?;
    Ok(ExitCode::SUCCESS)
}

/// A package for `package list`: a local path, a URL, an `oci://` artifact or a repository name,
/// as `install` resolves it.
fn load_listed(
    opts: &super::cluster::ClusterOpts,
    package: &str,
    source: &super::repo::PackageSourceOpts,
) -> anyhow::Result<Package> {
    let is_default =
        source.repo.is_none() && source.app_version.is_none() && source.operator_version.is_none();
    if is_default && Path::new(package).exists() {
        return load(Path::new(package));
    }
    Ok(super::repo::resolve_package_with_dependencies(opts, package, source)?.package)
}

fn print_result(v: &Verification, out: &mut dyn Write) -> std::io::Result<()> {
    // Same layout as KUDO: a one-column table per kind, warnings first.
    if !v.warnings.is_empty() {
        let mut t = list::Table::new();
        t.row(["Warnings"]);
        for w in &v.warnings {
            t.row([w.as_str()]);
        }
        writeln!(out, "{}", t.render())?;
    }
    if !v.errors.is_empty() {
        let mut t = list::Table::new();
        t.row(["Errors"]);
        for e in &v.errors {
            t.row([e.as_str()]);
        }
        writeln!(out, "{}", t.render())?;
    }
    Ok(())
}

fn to_yaml(v: &serde_json::Value) -> anyhow::Result<String> {
    serde_saphyr::to_string(v).context("cannot serialise to YAML")
}

fn print_formatted(v: &Verification, fmt: Output, out: &mut dyn Write) -> anyhow::Result<()> {
    let j = serde_json::json!({"valid": v.is_valid(), "errors": v.errors, "warnings": v.warnings});
    match fmt {
        Output::Json => writeln!(out, "{}", serde_json::to_string_pretty(&j)?)?,
        Output::Yaml => write!(out, "{}", to_yaml(&j)?)?,
    }
    Ok(())
}

/// Runs a `package` command; only the registry ones await (see [`PackageCommand::needs_runtime`]).
pub async fn run(
    opts: &super::cluster::ClusterOpts,
    args: PackageArgs,
    io: &mut Io<'_>,
) -> anyhow::Result<ExitCode> {
    match args.command {
        PackageCommand::Oci(c) => run_oci(opts, c, io).await,
        PackageCommand::New {
            name,
            overwrite,
            interactive,
        } => {
            if interactive {
                writeln!(
                    io.err,
                    "--interactive: kudo-rs does not prompt; the package is scaffolded from the name, edit operator/operator.yaml and operator/params.yaml afterwards"
                )?;
            }
            let dir = std::env::current_dir().context("cannot determine the current directory")?;
            kudo_package::scaffold::new_package(&dir, &name, overwrite)?;
            Ok(ExitCode::SUCCESS)
        }
        PackageCommand::List(l) => {
            let out = match l {
                ListCommand::Parameters {
                    package,
                    source,
                    descriptions,
                    required,
                    names,
                } => {
                    if [descriptions, required, names].iter().filter(|b| **b).count() > 1 {
                        bail!("only one of the flags 'required', 'names', 'descriptions' can be set");
                    }
                    let pkg = load_listed(opts, &package, &source)?;
                    list::parameters(
                        &pkg,
                        ParamListOptions {
                            descriptions,
                            required_only: required,
                            names_only: names,
                        },
                    )
                }
                ListCommand::Plans {
                    package,
                    source,
                    with_tasks,
                } => list::plans(&load_listed(opts, &package, &source)?, with_tasks),
                ListCommand::Tasks { package, source } => list::tasks(&load_listed(opts, &package, &source)?),
            };
            write!(io.out, "{out}")?;
            Ok(ExitCode::SUCCESS)
        }
        PackageCommand::Verify {
            package,
            param_checks,
            output,
        } => {
            let checks = ParamChecks::parse(&param_checks).map_err(anyhow::Error::msg)?;
            let pkg = load(&package)?;
            let v = verify_package(&pkg, checks);
            match output {
                Some(fmt) => print_formatted(&v, fmt, io.out)?,
                None => {
                    print_result(&v, io.out)?;
                    if v.is_valid() {
                        writeln!(io.out, "package is valid")?;
                    }
                }
            }
            if v.is_valid() {
                Ok(ExitCode::SUCCESS)
            } else {
                bail!("package verification found {} error(s)", v.errors.len())
            }
        }
        PackageCommand::Schema {
            package,
            source,
            output,
        } => {
            let pkg = load_listed(opts, &package, &source)?;
            let doc = kudo_package::schema::package_json_schema(&pkg);
            match output {
                Output::Json => writeln!(io.out, "{}", serde_json::to_string_pretty(&doc)?)?,
                Output::Yaml => write!(io.out, "{}", to_yaml(&doc)?)?,
            }
            Ok(ExitCode::SUCCESS)
        }
        PackageCommand::Graph {
            package,
            source,
            plan,
            output,
        } => graph(opts, &package, &source, plan.as_deref(), output, io),
        PackageCommand::ArgocdHealth { package, source } => argocd_health(opts, package, &source, io),
        PackageCommand::Create {
            package,
            destination,
            overwrite,
            output,
        } => {
            let pkg = load(&package)?;
            let v = verify_package(&pkg, ParamChecks::default());
            if let Some(fmt) = output {
                print_formatted(&v, fmt, io.out)?;
            }
            if !v.is_valid() {
                if output.is_none() {
                    print_result(&v, io.out)?;
                }
                bail!(
                    "package verification found {} error(s); not creating a package",
                    v.errors.len()
                );
            }
            let path = kudo_package::create::write_tarball(&pkg, &destination, overwrite)?;
            writeln!(io.out, "Package created: {}", path.display())?;
            Ok(ExitCode::SUCCESS)
        }
        PackageCommand::Render {
            package,
            plan,
            instance,
            namespace,
            parameters,
            parameter_files,
            output,
            kubernetes_version,
        } => {
            let version = kubernetes_version.unwrap_or_else(|| kudo_apiserver::GIT_VERSION.to_string());
            let minor = kudo_package::translate::parse_minor(&version)
                .map_err(|e| anyhow::anyhow!("--kubernetes-version: {e}"))?;
            let pkg = load(&package)?;
            let mut values = BTreeMap::new();
            for f in &parameter_files {
                let text =
                    std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
                values.extend(
                    params::parse_param_file(&f.display().to_string(), &text).map_err(anyhow::Error::msg)?,
                );
            }
            values.extend(params::parse_cli_params(&parameters).map_err(anyhow::Error::msg)?);
            let res = to_resources(
                &pkg,
                &ConvertOptions {
                    instance_name: instance.clone(),
                    ..Default::default()
                },
            )?;
            let inst = res.instance.metadata.name.clone();
            let ctx = RenderContext::offline(&inst, &namespace, values);
            let mut objs = render_plan(&res.operator_version, &plan, &ctx)?;
            let mut translated_from = Vec::new();
            for o in &mut objs {
                let t =
                    kudo_package::translate::translate_for_minor(&o.object, minor).with_context(|| {
                        format!(
                            "{}/{}/{}/{}: template {}",
                            o.plan, o.phase, o.step, o.task, o.template
                        )
                    })?;
                translated_from.push(t.as_ref().map(|t| t.from.clone()));
                if let Some(t) = t {
                    o.object = t.object;
                }
            }
            match output {
                Output::Json => {
                    let list: Vec<serde_json::Value> = objs
                        .iter()
                        .zip(&translated_from)
                        .map(|(o, from)| {
                            let mut j = serde_json::json!({
                                "plan": o.plan, "phase": o.phase, "step": o.step, "task": o.task,
                                "template": o.template, "action": o.action.as_str(), "object": o.object,
                            });
                            if let Some(from) = from {
                                j["translatedFrom"] = serde_json::json!(from);
                            }
                            j
                        })
                        .collect();
                    writeln!(io.out, "{}", serde_json::to_string_pretty(&list)?)?;
                }
                Output::Yaml => {
                    for (o, from) in objs.iter().zip(&translated_from) {
                        let suffix = match o.action {
                            kudo_package::render::Action::Apply => String::new(),
                            a => format!(" ({})", a.as_str()),
                        };
                        writeln!(io.out, "---")?;
                        writeln!(
                            io.out,
                            "# {}/{}/{}/{}: {}{}",
                            o.plan, o.phase, o.step, o.task, o.template, suffix
                        )?;
                        if let Some(from) = from {
                            writeln!(
                                io.out,
                                "# translated from {from}: Kubernetes 1.{minor} does not serve it"
                            )?;
                        }
                        write!(io.out, "{}", to_yaml(&o.object)?)?;
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn run_oci(
    opts: &super::cluster::ClusterOpts,
    c: OciCommand,
    io: &mut Io<'_>,
) -> anyhow::Result<ExitCode> {
    use super::oci;
    match c {
        OciCommand::Push {
            package,
            reference,
            registry,
            output,
        } => oci::push(opts, &package, &reference, &registry, output, io).await,
        OciCommand::Pull {
            reference,
            destination,
            overwrite,
            registry,
            verify,
            output,
        } => {
            let a = oci::PullArgs {
                reference: &reference,
                destination: &destination,
                overwrite,
                registry: &registry,
                verify: &verify,
                output,
            };
            oci::pull(opts, a, io).await
        }
        OciCommand::Sign {
            reference,
            key,
            registry,
            output,
        } => oci::sign(opts, &reference, &key, &registry, output, io).await,
        OciCommand::Keygen {
            destination,
            name,
            overwrite,
        } => oci::keygen(&destination, &name, overwrite, io),
    }
}
