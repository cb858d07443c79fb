//! `--dry-run[=client|server]` and `-o diff|yaml|json` of every command that changes an Instance
//! (`update`, `upgrade`, `plan trigger`, `rollback`): the flags ([`DryRunOpts`]), and the output
//! of a preview, which `kudo_client::preview` computes (KUDO's decision, the objects the plan
//! would apply rendered as the manager renders them, their diffs; nothing written, sensitive
//! values masked). A command builds a [`Change`] and, when [`DryRunOpts::is_set`], calls
//! [`preview`] *instead of* writing.
//!
//! # Output
//! `-o yaml` (the default without `=server`): the decision line, then each object as a YAML
//! document annotated with phase/step/task. `-o diff` (the default with `=server`): a unified
//! diff per object as `kubectl diff` prints it. `-o json`: one document {decision, plan, dryRun,
//! objects, diffs}.
//!
//! # Exit codes
//! 0: the change would be admitted (whether or not it changes objects); 1: KUDO's admission
//! refuses it (its message is printed, as the real command would fail), a parameter Secret cannot
//! be read, the plan does not render, or (`=server`) the API server refuses an object's dry-run
//! apply (the plan would fail on it).

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, ValueEnum};
use kudo_client::cluster::Cluster;
use kudo_client::preview::diff::to_yaml;
use kudo_client::preview::{
    MANAGER_FIELD_MANAGER, Masker, Mode, ObjectDiff, Preview, PreviewRequest, Verdict,
};
use kudo_package::render::RenderedObject;
use serde_json::{Value, json};

use crate::Io;

pub use kudo_client::preview::Change;

/// Where the preview is computed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum DryRun {
    /// Render locally; `-o diff` compares with the live objects as read (no server-side apply).
    Client,
    /// Also server-side apply each object with dryRun=All: the diff is what the manager's apply
    /// would change, defaults and admission included.
    Server,
}

impl DryRun {
    fn as_str(self) -> &'static str {
        match self {
            DryRun::Client => "client",
            DryRun::Server => "server",
        }
    }

    fn mode(self) -> Mode {
        match self {
            DryRun::Client => Mode::Client,
            DryRun::Server => Mode::Server,
        }
    }
}

/// What a preview prints.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum PreviewOutput {
    /// A unified diff (as `kubectl diff`) of each object against the live one.
    Diff,
    /// The objects the plan would apply, one YAML document each, annotated with phase/step/task.
    Yaml,
    /// One JSON document: {decision, plan, dryRun, objects, diffs}.
    Json,
    /// `upgrade` only: the objects the upgrade writes, as manifests for Git (those of `install
    /// --dry-run -o yaml` with the new package), without touching the cluster.
    Manifests,
}

/// `--dry-run[=client|server]` and `-o diff|yaml|json`, shared by every command that changes an
/// Instance.
#[derive(Args, Debug, Clone, Default)]
pub struct DryRunOpts {
    /// Preview the change and write nothing: print KUDO's decision (which plan would run, or the
    /// refusal, exit 1) and the objects that plan would apply. `server`: also a diff of each object
    /// against the live one from a server-side apply with dryRun=All as the manager (field manager
    /// "kudo"). Secret values are masked (***), sensitive values elsewhere shown as (redacted).
    #[arg(
        long = "dry-run",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "client",
        value_enum,
        value_name = "MODE"
    )]
    pub dry_run: Option<DryRun>,
    /// Output of --dry-run: diff, yaml or json (default: diff with --dry-run=server, else yaml).
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        requires = "dry_run",
        value_name = "FORMAT"
    )]
    pub output: Option<PreviewOutput>,
}

impl DryRunOpts {
    /// Whether `--dry-run` was given: the command must call [`preview`] and write nothing.
    pub fn is_set(&self) -> bool {
        self.dry_run.is_some()
    }

    fn mode(&self) -> DryRun {
        self.dry_run.unwrap_or(DryRun::Client)
    }

    fn format(&self) -> PreviewOutput {
        self.output.unwrap_or(match self.mode() {
            DryRun::Server => PreviewOutput::Diff,
            DryRun::Client => PreviewOutput::Yaml,
        })
    }
}

/// Refuses `--wait` with `--dry-run` before anything runs: a preview starts no plan to wait for.
pub fn refuse_wait(opts: &DryRunOpts, wait: bool) -> Result<()> {
    if opts.is_set() && wait {
        anyhow::bail!("--wait cannot be combined with --dry-run: a preview starts no plan");
    }
    Ok(())
}

/// Previews `change` (see the module docs): prints the decision and the objects or diffs, writes
/// nothing. Exit 1 on a refusal or when the server refuses an object's dry-run apply.
pub async fn preview(
    cluster: &Cluster,
    change: &Change<'_>,
    opts: &DryRunOpts,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    let (mode, format) = (opts.mode(), opts.format());
    if format == PreviewOutput::Manifests {
        anyhow::bail!("-o manifests is for `upgrade --dry-run`: it prints the objects an upgrade writes");
    }
    let request = PreviewRequest {
        change,
        mode: mode.mode(),
        diffs: format == PreviewOutput::Diff,
    };
    let p = kudo_client::preview::preview(cluster, &request).await?;
    let Verdict::Run { plan, .. } = &p.verdict else {
        print_without_plan(&p.verdict, mode, format, io)?;
        return Ok(ExitCode::from(u8::from(matches!(p.verdict, Verdict::Refused(_)))));
    };
    match format {
        PreviewOutput::Json => print_json(&p, mode, io)?,
        PreviewOutput::Yaml => print_yaml(&p, io)?,
        PreviewOutput::Diff => print_diffs(&p.verdict, mode, p.diffs.as_deref().unwrap_or(&[]), io)?,
        // Refused at the top.
        PreviewOutput::Manifests => {}
    }
    let refused = p.refused();
    if refused > 0 {
        writeln!(
            io.err,
            "Error: the API server refused the dry-run apply of {refused} object(s): the {plan} plan would fail"
        )?;
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Output of a refusal or of a change that runs no plan.
fn print_without_plan(verdict: &Verdict, mode: DryRun, format: PreviewOutput, io: &mut Io<'_>) -> Result<()> {
    if format == PreviewOutput::Json {
        let empty = Preview {
            verdict: verdict.clone(),
            objects: Vec::new(),
            diffs: None,
            masker: Masker::default(),
        };
        print_json(&empty, mode, io)?;
    } else if let Verdict::Nothing(_) = verdict {
        writeln!(io.out, "# {}", verdict.line())?;
    }
    if let Verdict::Refused(msg) = verdict {
        writeln!(io.err, "Error: {msg}")?;
    }
    Ok(())
}

/// The decision of `-o json`.
fn verdict_json(verdict: &Verdict) -> Value {
    match verdict {
        Verdict::Run { plan, why } => {
            json!({"admitted": true, "plan": plan, "reason": why, "message": verdict.line()})
        }
        Verdict::Nothing(why) => {
            json!({"admitted": true, "plan": null, "reason": why, "message": verdict.line()})
        }
        Verdict::Refused(msg) => json!({"admitted": false, "plan": null, "message": msg}),
    }
}

fn where_of(o: &RenderedObject) -> String {
    format!("{}/{}/{} ({})", o.phase, o.step, o.task, o.action.as_str())
}

fn print_yaml(p: &Preview, io: &mut Io<'_>) -> Result<()> {
    writeln!(io.out, "# {}", p.verdict.line())?;
    for o in &p.objects {
        writeln!(io.out, "---\n# {}", where_of(o))?;
        write!(io.out, "{}", to_yaml(&p.masker.object(&o.object)))?;
    }
    Ok(())
}

fn print_diffs(verdict: &Verdict, mode: DryRun, diffs: &[ObjectDiff], io: &mut Io<'_>) -> Result<()> {
    writeln!(io.out, "# {}", verdict.line())?;
    writeln!(
        io.out,
        "# {}",
        match mode {
            DryRun::Server => format!(
                "server-side diff: each object against the result of a dryRun=All server-side apply as field manager {MANAGER_FIELD_MANAGER:?}"
            ),
            DryRun::Client => "client-side diff: each rendered object against the fields it sets in the live object as read (no server-side apply: server defaults and other managers' changes are not shown)".to_string(),
        }
    )?;
    for d in diffs {
        if let Some(note) = &d.note {
            writeln!(io.out, "# {} {}: {note}", d.id, where_of(&d.rendered))?;
        } else if let Some(e) = &d.error {
            writeln!(io.out, "# {} {}: {e}", d.id, where_of(&d.rendered))?;
        } else {
            write!(io.out, "{}", d.diff)?;
        }
    }
    Ok(())
}

fn print_json(p: &Preview, mode: DryRun, io: &mut Io<'_>) -> Result<()> {
    let where_json = |o: &RenderedObject| json!({"phase": o.phase, "step": o.step, "task": o.task, "action": o.action.as_str()});
    let objects: Vec<Value> = p
        .objects
        .iter()
        .map(|o| {
            let mut v = where_json(o);
            v["object"] = p.masker.object(&o.object);
            v
        })
        .collect();
    let mut doc = json!({
        "decision": verdict_json(&p.verdict),
        "plan": match &p.verdict { Verdict::Run { plan, .. } => json!(plan), _ => Value::Null },
        "dryRun": mode.as_str(),
        "objects": objects,
    });
    if let Some(diffs) = &p.diffs {
        doc["diffs"] = diffs
            .iter()
            .map(|d| {
                let mut v = where_json(&d.rendered);
                v["object"] = json!(d.id);
                v["changed"] = json!(!d.diff.is_empty());
                v["diff"] = json!(d.diff);
                v["error"] = json!(d.error);
                v["note"] = json!(d.note);
                v
            })
            .collect();
    }
    writeln!(io.out, "{}", serde_json::to_string_pretty(&doc)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_decision_says_whether_it_was_admitted() {
        let run = Verdict::Run {
            plan: "update".into(),
            why: "parameters changed: NODE_COUNT".into(),
        };
        assert_eq!(verdict_json(&run)["plan"], "update");
        assert_eq!(verdict_json(&Verdict::Nothing("n".into()))["admitted"], true);
    }

    #[test]
    fn dry_run_flags_parse_as_kubectl_does() {
        #[derive(clap::Parser)]
        struct T {
            #[command(flatten)]
            d: DryRunOpts,
            pkg: Option<String>,
        }
        use clap::Parser;
        let t = T::parse_from(["t", "--dry-run"]);
        assert_eq!((t.d.mode(), t.d.format()), (DryRun::Client, PreviewOutput::Yaml));
        let t = T::parse_from(["t", "--dry-run=server"]);
        assert_eq!((t.d.mode(), t.d.format()), (DryRun::Server, PreviewOutput::Diff));
        // `--dry-run PKG` leaves the positional alone (the mode needs `=`).
        let t = T::parse_from(["t", "--dry-run", "./pkg", "-o", "json"]);
        assert_eq!(t.pkg.as_deref(), Some("./pkg"));
        assert_eq!(t.d.format(), PreviewOutput::Json);
        assert!(
            T::try_parse_from(["t", "-o", "diff"]).is_err(),
            "-o needs --dry-run"
        );
        assert!(T::try_parse_from(["t", "--dry-run=maybe"]).is_err());
        assert!(!T::parse_from(["t"]).d.is_set());
    }
}
