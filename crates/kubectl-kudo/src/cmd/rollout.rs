//! `rollout start|status|pause|resume|abort|history` (kudo-rs extension): one change carried to
//! many Instances in waves by the manager (`kudo-rs.dev/v1alpha1` Rollouts). The decisions are
//! `kudo_engine::rollout`'s, the cluster operations `kudo_client::rollout`'s; this module parses
//! the flags into a Rollout spec, calls them and prints.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use kudo_api::rollout::{
    Amount, Gate, GateRule, LabelSelector, OnFailure, Rollout, RolloutSpec, Target, Wave,
};
use kudo_client::cluster::{Cluster, KudoKind};
use serde_json::{Value, json};

use super::cluster::{ClusterOpts, connect};
use super::instance::ParamOpts;
use crate::Io;
use crate::output::rollout_status;
use crate::output::tree::{self, Node, Redraw};
use kudo_client::preview::{self, Change};

#[derive(Args, Debug)]
pub struct RolloutArgs {
    #[command(subcommand)]
    pub command: RolloutCommand,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum RolloutOutput {
    Yaml,
    Json,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum FailureAction {
    /// Change no more Instances.
    Pause,
    /// Also roll back every Instance the rollout changed.
    Rollback,
}

#[derive(Subcommand, Debug)]
pub enum RolloutCommand {
    /// Start a rollout: an OperatorVersion and/or parameter values, carried to the selected
    /// Instances in waves (a canary first), each wave gated on the health of the one before.
    #[command(
        after_help = "The manager runs the rollout (a cluster-scoped kudo-rs.dev/v1alpha1 Rollout named NAME): it changes the\nInstances of a wave as `upgrade`/`update` would, at most --max-concurrent at a time, waits while an Instance is\nbusy with another plan (it never cancels one), and starts the next wave once every changed Instance's plan is\nCOMPLETE and Ready (and every --gate-rule holds) for --min-success-time. An Instance not healthy within\n--progress-deadline fails; more failures than --max-failures halt the rollout (--on-failure rollback also rolls\nback every Instance it changed to its revision before). The target OperatorVersion must be installed where\neach Instance looks up its own (`kubectl kudo install PKG --skip-instance`).\n\nWith --dry-run nothing is written: the Instances the rollout would take, the wave of each, and the plan each\nwould run (the preview of `upgrade --dry-run`, per Instance).\n\nExamples:\n  kubectl kudo rollout start galera-0-2 --operator-version galera-10.5.3-0.2.0 --waves 25%,50% --wait\n  kubectl kudo rollout start bigger -p NODE_COUNT=5 -l kudo.dev/operator=galera -A --canary 2 --dry-run\n  kubectl kudo rollout start staged --operator-version app-0.2.0 --wave-selector env=staging --wave-selector env=prod \\\n      --approval --gate-rule synced='object.status.conditions.exists(c, c.type == \"Ready\" && c.status == \"True\")'"
    )]
    Start(Box<StartArgs>),
    /// Show a rollout's waves and Instances as a tree (live with --wait).
    #[command(
        after_help = "Exit status with --wait: 0 when the rollout completed, or waits for `rollout resume` (paused, or a wave\nwaiting for approval); 1 when it halted, rolled back, was aborted or is invalid, or --wait-time passed.\n\nExamples:\n  kubectl kudo rollout status galera-0-2\n  kubectl kudo rollout status galera-0-2 --wait\n  kubectl kudo rollout status galera-0-2 -o yaml"
    )]
    Status {
        /// The rollout.
        name: String,
        #[command(flatten)]
        wait: RolloutWait,
        /// Print the Rollout as YAML or JSON instead of the tree.
        #[arg(short = 'o', long)]
        output: Option<RolloutOutput>,
    },
    /// Change no more Instances (those changing go on) until `rollout resume`.
    Pause {
        /// The rollout.
        name: String,
    },
    /// Go on after `rollout pause`, and approve a wave that waits for approval.
    Resume {
        /// The rollout.
        name: String,
    },
    /// End the rollout: no Instance is changed any more (those changing finish).
    Abort {
        /// The rollout.
        name: String,
    },
    /// List the rollouts, or with NAME the Instances of one (wave, phase, revisions).
    History {
        /// A rollout.
        name: Option<String>,
        /// Print as YAML or JSON instead of the table.
        #[arg(short = 'o', long)]
        output: Option<RolloutOutput>,
    },
}

/// `--wait` and `--wait-time` of `rollout start` and `rollout status`.
#[derive(Args, Debug, Clone)]
pub struct RolloutWait {
    /// Follow the rollout until it completes or needs someone (redrawn in place on a terminal).
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits, in seconds.
    #[arg(long, default_value_t = 1800, value_name = "SECONDS")]
    pub wait_time: u64,
}

#[derive(Args, Debug)]
pub struct StartArgs {
    /// The rollout's name (a Kubernetes object name).
    pub name: String,
    /// The OperatorVersion to upgrade to (looked up where each Instance looks up its own).
    #[arg(long, value_name = "NAME")]
    pub operator_version: Option<String>,
    #[command(flatten)]
    pub params: ParamOpts,
    /// Which Instances (kubectl's label selector syntax). Default with --operator-version: the
    /// Instances of its operator (kudo.dev/operator=OPERATOR).
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// In these namespaces (comma-separated; default: the command's namespace).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NS,…",
        conflicts_with = "all_namespaces"
    )]
    pub namespaces: Vec<String>,
    /// In every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// How many Instances the first wave changes (0: no canary).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub canary: u32,
    /// The sizes of the waves after the canary, each a count or a percentage of all the Instances
    /// (comma-separated); the Instances left over form a last wave.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "SIZE,…",
        conflicts_with = "wave_selector"
    )]
    pub waves: Vec<String>,
    /// A wave of the Instances matching this selector (repeatable, in order), after the canary.
    #[arg(long, value_name = "SELECTOR")]
    pub wave_selector: Vec<String>,
    /// Every wave after the canary waits for `rollout resume` before it starts.
    #[arg(long)]
    pub approval: bool,
    /// How many Instances of a wave change at once (count or percentage of the wave; default all).
    #[arg(long, value_name = "N|P%")]
    pub max_concurrent: Option<String>,
    /// How many Instances may fail (count or percentage of all) before --on-failure.
    #[arg(long, default_value = "0", value_name = "N|P%")]
    pub max_failures: String,
    /// What a failure beyond --max-failures does.
    #[arg(long, value_enum, default_value = "pause")]
    pub on_failure: FailureAction,
    /// How long a changed Instance may take to be COMPLETE and healthy (Go duration).
    #[arg(long, default_value = kudo_engine::rollout::DEFAULT_PROGRESS_DEADLINE, value_name = "DURATION")]
    pub progress_deadline: String,
    /// How long a wave's changed Instances must stay healthy together before the next wave.
    #[arg(long, value_name = "DURATION")]
    pub min_success_time: Option<String>,
    /// A CEL condition every changed Instance must meet to be healthy, NAME=CONDITION (`object`
    /// is the Instance, `params` its parameters; repeatable).
    #[arg(long, value_name = "NAME=CEL")]
    pub gate_rule: Vec<String>,
    /// Write nothing: list the waves and what each Instance's change would run.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: print YAML or JSON (the Rollout and its waves) instead of the tree.
    #[arg(short = 'o', long, requires = "dry_run")]
    pub output: Option<RolloutOutput>,
    #[command(flatten)]
    pub wait: RolloutWait,
}

fn amount(s: &str) -> Amount {
    match s.parse::<u64>() {
        Ok(n) => Amount::Count(n),
        Err(_) => Amount::Text(s.to_string()),
    }
}

/// The Rollout spec the flags describe.
async fn spec_of(cluster: &Cluster, a: &StartArgs) -> Result<RolloutSpec> {
    let parameters = a.params.values()?;
    if !a.params.parameter_secrets.is_empty() {
        bail!("a rollout does not set sensitive values: --parameter-secret is not taken");
    }
    let selector = match (&a.selector, &a.operator_version) {
        (Some(s), _) => LabelSelector::parse(s).with_context(|| format!("--selector {s:?}"))?,
        (None, Some(ov)) => {
            let found: Option<kudo_api::OperatorVersion> = cluster.get(KudoKind::OperatorVersion, ov).await?;
            let Some(found) = found else {
                bail!(
                    "OperatorVersion {ov} is not installed in namespace {}; pass --selector",
                    cluster.namespace
                );
            };
            LabelSelector::parse(&format!(
                "{}={}",
                kudo_api::labels::OPERATOR,
                found.spec.operator.name
            ))?
        }
        (None, None) => bail!("a parameter rollout needs --selector (which Instances)"),
    };
    let mut waves: Vec<Wave> = a
        .waves
        .iter()
        .map(|s| Wave {
            size: Some(amount(s)),
            ..Wave::default()
        })
        .collect();
    for (i, s) in a.wave_selector.iter().enumerate() {
        let sel = LabelSelector::parse(s).with_context(|| format!("--wave-selector {s:?}"))?;
        waves.push(Wave {
            name: format!("group-{}", i + 1),
            selector: Some(sel),
            ..Wave::default()
        });
    }
    for w in &mut waves {
        w.approval = a.approval;
    }
    let mut rules = Vec::new();
    for r in &a.gate_rule {
        let Some((name, condition)) = r.split_once('=') else {
            bail!("--gate-rule {r:?}: expected NAME=CONDITION");
        };
        rules.push(GateRule {
            name: name.to_string(),
            condition: condition.to_string(),
        });
    }
    Ok(RolloutSpec {
        target: Target {
            operator_version: a.operator_version.clone(),
            parameters,
        },
        selector,
        namespaces: match (a.all_namespaces, a.namespaces.is_empty()) {
            (true, _) => Vec::new(),
            (false, true) => vec![cluster.namespace.clone()],
            (false, false) => a.namespaces.clone(),
        },
        canary: Some(a.canary),
        waves,
        max_concurrent: a.max_concurrent.as_deref().map(amount),
        gate: Gate {
            min_success_time: a.min_success_time.clone(),
            rules,
        },
        progress_deadline: Some(a.progress_deadline.clone()),
        max_failures: Some(amount(&a.max_failures)),
        on_failure: match a.on_failure {
            FailureAction::Pause => OnFailure::Pause,
            FailureAction::Rollback => OnFailure::Rollback,
        },
        ..RolloutSpec::default()
    })
}

pub async fn run(opts: &ClusterOpts, args: RolloutArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let cluster = connect(opts).await?;
    match args.command {
        RolloutCommand::Start(a) => start(&cluster, &a, io).await,
        RolloutCommand::Status { name, wait, output } => status(&cluster, &name, &wait, output, io).await,
        RolloutCommand::Pause { name } => {
            kudo_client::rollout::control::pause(&cluster, &name).await?;
            writeln!(
                io.out,
                "rollout {name} paused: no more Instances are changed until `rollout resume`"
            )?;
            Ok(ExitCode::SUCCESS)
        }
        RolloutCommand::Resume { name } => {
            let r = kudo_client::rollout::control::resume(&cluster, &name).await?;
            let approved = if r.approved.is_empty() {
                String::new()
            } else {
                format!(" (approved wave {})", r.approved.join(", "))
            };
            writeln!(io.out, "rollout {name} resumed{approved}")?;
            Ok(ExitCode::SUCCESS)
        }
        RolloutCommand::Abort { name } => {
            kudo_client::rollout::control::abort(&cluster, &name).await?;
            writeln!(io.out, "rollout {name} aborted: no more Instances are changed")?;
            Ok(ExitCode::SUCCESS)
        }
        RolloutCommand::History { name, output } => history(&cluster, name.as_deref(), output, io).await,
    }
}

async fn start(cluster: &Cluster, a: &StartArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    if a.dry_run && a.wait.wait {
        bail!("--wait cannot be combined with --dry-run: a preview starts no rollout");
    }
    let spec = spec_of(cluster, a).await?;
    if a.dry_run {
        return dry_run(cluster, &a.name, spec, a.output, io).await;
    }
    kudo_client::rollout::start::start(cluster, &a.name, spec).await?;
    writeln!(io.out, "rollout.kudo-rs.dev/{} created", a.name)?;
    if !a.wait.wait {
        return Ok(ExitCode::SUCCESS);
    }
    follow(cluster, &a.name, &a.wait, io).await
}

/// `rollout start --dry-run`: the waves and, per Instance, the decision `upgrade --dry-run` or
/// `update --dry-run` would print for its change.
async fn dry_run(
    cluster: &Cluster,
    name: &str,
    spec: RolloutSpec,
    output: Option<RolloutOutput>,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    kudo_engine::rollout::settings(&spec).map_err(|source| kudo_client::Error::InvalidRollout {
        name: name.to_string(),
        source,
    })?;
    let p = kudo_client::rollout::preview::preview(cluster, name, &spec, &spec.namespaces).await?;
    let line = |i: &kudo_client::rollout::preview::Planned| -> String {
        let (Some(old), Some(new)) = (&i.current_ov, &i.target_ov) else {
            return "refused: its OperatorVersion or the target is not installed".into();
        };
        preview::verdict(&Change::new(&i.instance, &i.proposed, old, new), &[]).line()
    };
    let mut waves: Vec<(String, Vec<(String, String)>)> =
        p.waves.iter().map(|w| (w.clone(), Vec::new())).collect();
    let mut outside = Vec::new();
    for i in &p.instances {
        let entry = (kudo_engine::rollout::key(&i.instance), line(i));
        match waves.iter_mut().find(|(w, _)| *w == i.wave) {
            Some((_, list)) => list.push(entry),
            None => outside.push(entry),
        }
    }
    if let Some(fmt) = output {
        let wave_json = |(w, list): &(String, Vec<(String, String)>)| json!({"name": w, "instances": list.iter().map(|(k, d)| json!({"name": k, "decision": d})).collect::<Vec<_>>()});
        let doc = json!({
            "rollout": {"apiVersion": kudo_api::rollout::API_VERSION, "kind": "Rollout", "metadata": {"name": name}, "spec": spec},
            "waves": waves.iter().map(wave_json).collect::<Vec<Value>>(),
            "atTarget": outside.iter().map(|(k, d)| json!({"name": k, "decision": d})).collect::<Vec<_>>(),
        });
        print_doc(&doc, fmt, io)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut root = Node::new(format!("{name} (dry run: nothing written)"));
    for (w, list) in &waves {
        let node = root.push(Node::new(format!(
            "Wave {w}: {}",
            kudo_engine::rollout::instances(list.len())
        )));
        for (k, d) in list {
            node.push(Node::new(format!("{k}: {d}")));
        }
    }
    if !outside.is_empty() {
        let node = root.push(Node::new(format!(
            "{} in no wave",
            kudo_engine::rollout::instances(outside.len())
        )));
        for (k, d) in &outside {
            node.push(Node::new(format!("{k}: {d}")));
        }
    }
    write!(io.out, "{}", tree::render(&[root]))?;
    Ok(ExitCode::SUCCESS)
}

fn print_doc(doc: &impl serde::Serialize, fmt: RolloutOutput, io: &mut Io<'_>) -> Result<()> {
    match fmt {
        RolloutOutput::Json => writeln!(io.out, "{}", serde_json::to_string_pretty(doc)?)?,
        RolloutOutput::Yaml => write!(io.out, "{}", serde_saphyr::to_string(doc)?)?,
    }
    Ok(())
}

async fn status(
    cluster: &Cluster,
    name: &str,
    wait: &RolloutWait,
    output: Option<RolloutOutput>,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    if let Some(fmt) = output {
        let r = kudo_client::rollout::get(cluster, name).await?;
        print_doc(&r, fmt, io)?;
        return Ok(ExitCode::SUCCESS);
    }
    if !wait.wait {
        let r = kudo_client::rollout::get(cluster, name).await?;
        write!(io.out, "{}", rollout_status::render(&r))?;
        return Ok(ExitCode::SUCCESS);
    }
    follow(cluster, name, wait, io).await
}

/// `--wait`: the tree redrawn until the rollout settles (see `rollout status --help`).
async fn follow(cluster: &Cluster, name: &str, wait: &RolloutWait, io: &mut Io<'_>) -> Result<ExitCode> {
    let tty = io.out_is_terminal;
    let mut redraw = Redraw::default();
    let out = &mut *io.out;
    let mut observe = |r: &Rollout, last: bool| redraw.show(out, rollout_status::render(r), tty, last);
    let r =
        kudo_client::rollout::wait::wait(cluster, name, Duration::from_secs(wait.wait_time), &mut observe)
            .await?;
    let phase = r.status.map(|s| s.phase).unwrap_or_default();
    use kudo_engine::rollout::phase as p;
    Ok(match phase.as_str() {
        p::COMPLETE | p::PAUSED | p::WAITING_FOR_APPROVAL => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

async fn history(
    cluster: &Cluster,
    name: Option<&str>,
    output: Option<RolloutOutput>,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    match name {
        Some(n) => {
            let r = kudo_client::rollout::get(cluster, n).await?;
            match output {
                Some(fmt) => print_doc(&r.status.unwrap_or_default().instances, fmt, io)?,
                None => write!(io.out, "{}", rollout_status::instances(&r))?,
            }
        }
        None => {
            let all = kudo_client::rollout::list(cluster).await?;
            match output {
                Some(fmt) => print_doc(&all, fmt, io)?,
                None if all.is_empty() => writeln!(io.err, "No rollouts.")?,
                None => write!(io.out, "{}", rollout_status::history(&all))?,
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
