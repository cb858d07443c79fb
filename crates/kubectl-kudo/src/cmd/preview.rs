//! Previews (`--dry-run[=client|server]`, issue 27 item 4): what a change of an Instance would do,
//! without writing anything. KUDO #1735 asked for `plan trigger --dry-run`, Helm #3156 for the same
//! on upgrades.
//!
//! # The seam
//! Every command that changes an Instance (`update`, `upgrade`, `plan trigger`, and `rollback`)
//! flattens [`DryRunOpts`] into its flags and, when [`DryRunOpts::is_set`], builds a [`Change`] —
//! the stored Instance, the spec it proposes, the old and new OperatorVersion — and calls
//! [`preview`] *instead of* writing:
//!
//! ```ignore
//! pub async fn preview(cluster: &Cluster, change: &Change<'_>, opts: &DryRunOpts, io: &mut Io<'_>)
//!     -> anyhow::Result<ExitCode>
//! ```
//!
//! [`preview`] judges the change with KUDO's admission rules (`kudo_engine::triggers`, the same
//! call the real command makes), renders the plan that would run with the parameters the manager
//! would see (`spec.parameterSources` resolved from their Secrets), and prints the decision and
//! the objects (`-o yaml|json`) or a unified diff of each object against the live one (`-o diff`).
//! A caller that already knows the plan (rollback) sets [`Change::plan`]; one that adds template
//! data sets [`Change::adjust`], which sees the [`RenderContext`] just before rendering. Build a
//! `Change` with [`Change::new`] and the `with_*` methods (fields may be added).
//!
//! # Exit codes
//! 0: the change would be admitted (whether or not it changes objects); 1: KUDO's admission
//! refuses it (its message is printed, as the real command would fail), a parameter Secret cannot
//! be read, the plan does not render, or (`=server`) the API server refuses an object's dry-run
//! apply (the plan would fail on it).
//!
//! # Nothing is written
//! `=client` makes only GETs (the Instance, OperatorVersion, parameter Secrets, the live objects
//! for `-o diff`, discovery). `=server` adds one server-side apply per object with `dryRun=All`
//! and the manager's field manager ([`MANAGER_FIELD_MANAGER`]), `force` as the manager applies,
//! which the API server validates, defaults and merges but does not store.
//!
//! # Diffs
//! Like `kubectl diff`: `diff -u -N LIVE/<id> MERGED/<id>` per object that changes, YAML with
//! sorted keys, managedFields left out; KUDO's per-run annotations (`kudo.dev/plan`, `phase`,
//! `step`, `last-plan-execution-uid`), which every run rewrites, are left out too.
//!
//! # Secrets
//! Sensitive values are resolved to render but never printed: every data/stringData value of a
//! Secret is masked as `kubectl diff` masks it (`***`, or `*** (before)`/`*** (after)` when it
//! changes), and every occurrence of a sensitive value (4 characters or more) elsewhere becomes
//! `(redacted)`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result, anyhow};
use clap::{Args, ValueEnum};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kudo_api::{Instance, InstanceSpec, OperatorVersion};
use kudo_client::cluster::Cluster;
use kudo_client::sensitive::Redactor;
use kudo_engine::triggers::{Decision, ScheduleReason};
use kudo_kube::discovery::{Cache, Resolved};
use kudo_package::deps_hash::Dependency;
use kudo_package::render::{Action, RenderContext, RenderedObject, render_plan};
use serde_json::{Value, json};

use crate::Io;

/// The field manager the manager applies with (`ControllerConfig::field_manager`'s default), so
/// a server-side preview merges exactly as the manager's apply will.
pub const MANAGER_FIELD_MANAGER: &str = "kudo";

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

/// Adjusts the render context just before rendering (e.g. rollback's template data).
pub type AdjustFn<'a> = &'a (dyn Fn(&mut RenderContext) + Send + Sync);

/// A proposed change of an Instance, as the command would write it.
pub struct Change<'a> {
    /// The Instance as stored.
    pub instance: &'a Instance,
    /// The spec the command would write (for `plan trigger`: `planExecution.planName` set).
    pub proposed: &'a InstanceSpec,
    /// The OperatorVersion the Instance runs.
    pub old_ov: &'a OperatorVersion,
    /// The OperatorVersion `proposed` references (the same as `old_ov` unless upgrading).
    pub new_ov: &'a OperatorVersion,
    /// The plan that runs, when the caller knows it (rollback); `None`: the plan KUDO's admission
    /// chooses. Admission still judges the change (a refusal wins).
    pub plan: Option<&'a str>,
    /// Called with the render context before rendering.
    pub adjust: Option<AdjustFn<'a>>,
    /// Values of sensitive parameters the command would write into `<instance>-parameters`
    /// (update -p of a sensitive parameter): they win over the Secret's current data.
    pub sensitive_values: BTreeMap<String, String>,
}

impl<'a> Change<'a> {
    /// A change of `instance` to `proposed`, judged by admission, with nothing else.
    pub fn new(
        instance: &'a Instance,
        proposed: &'a InstanceSpec,
        old_ov: &'a OperatorVersion,
        new_ov: &'a OperatorVersion,
    ) -> Self {
        Change {
            instance,
            proposed,
            old_ov,
            new_ov,
            plan: None,
            adjust: None,
            sensitive_values: BTreeMap::new(),
        }
    }

    /// Runs `plan` (the caller knows it) instead of the one admission chooses.
    pub fn with_plan(mut self, plan: &'a str) -> Self {
        self.plan = Some(plan);
        self
    }

    /// Adjusts the render context before rendering.
    pub fn with_adjust(mut self, adjust: AdjustFn<'a>) -> Self {
        self.adjust = Some(adjust);
        self
    }

    /// Sensitive values the command would store in `<instance>-parameters`.
    pub fn with_sensitive_values(mut self, values: BTreeMap<String, String>) -> Self {
        self.sensitive_values = values;
        self
    }
}

/// What the change would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `plan` would run, because of `why`.
    Run { plan: String, why: String },
    /// Admitted, but no plan would run.
    Nothing(String),
    /// KUDO's admission refuses the change (its message).
    Refused(String),
}

impl Verdict {
    /// The decision line: `plan update would run (parameters changed: NODE_COUNT)`.
    pub fn line(&self) -> String {
        match self {
            Verdict::Run { plan, why } => format!("plan {plan} would run ({why})"),
            Verdict::Nothing(why) => format!("no plan would run ({why})"),
            Verdict::Refused(msg) => format!("refused: {msg}"),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Verdict::Run { plan, why } => {
                json!({"admitted": true, "plan": plan, "reason": why, "message": self.line()})
            }
            Verdict::Nothing(why) => {
                json!({"admitted": true, "plan": null, "reason": why, "message": self.line()})
            }
            Verdict::Refused(msg) => json!({"admitted": false, "plan": null, "message": msg}),
        }
    }
}

/// Why a plan is scheduled, in words.
fn reason_text(reason: &ScheduleReason, old_ov: &str, new_ov: &str) -> String {
    match reason {
        ScheduleReason::Install => "install".into(),
        ScheduleReason::Upgrade => format!("operator version changes: {old_ov} -> {new_ov}"),
        ScheduleReason::ParameterUpdate(names) => format!("parameters changed: {}", names.join(", ")),
        ScheduleReason::DirectTrigger => "triggered directly".into(),
        ScheduleReason::Retrigger => "triggered again".into(),
    }
}

/// KUDO's decision on `change` (the CLI's own admission call, `refuse_denied`), then the plan a
/// rotation of sensitive values (`rotated`: parameters whose Secret data would change) triggers.
pub fn verdict(change: &Change<'_>, rotated: &[String]) -> Verdict {
    let decision = match kudo_client::checks::refuse_denied(
        change.instance,
        change.proposed,
        change.old_ov,
        change.new_ov,
    ) {
        Ok(d) => d,
        Err(e) => return Verdict::Refused(e.to_string()),
    };
    let why = |d: &Decision| match d {
        Decision::Schedule { reason, .. } => {
            reason_text(reason, &change.old_ov.metadata.name, &change.new_ov.metadata.name)
        }
        _ => "requested".to_string(),
    };
    if let Some(plan) = change.plan {
        return Verdict::Run {
            plan: plan.to_string(),
            why: why(&decision),
        };
    }
    match &decision {
        Decision::Schedule { plan, .. } => Verdict::Run {
            plan: plan.clone(),
            why: why(&decision),
        },
        Decision::Cancel { plan, .. } => {
            Verdict::Nothing(format!("the running {plan} plan would be cancelled"))
        }
        Decision::Deny { message } => Verdict::Refused(message.clone()),
        Decision::NoChange | Decision::ClearTerminal if !rotated.is_empty() => {
            let params: Vec<_> = change
                .new_ov
                .spec
                .parameters
                .iter()
                .filter(|p| rotated.contains(&p.name))
                .collect();
            match kudo_engine::triggers::triggered_by_parameter_update(&params, change.new_ov) {
                Ok(Some(plan)) => Verdict::Run {
                    plan,
                    why: format!("sensitive parameters rotated: {}", rotated.join(", ")),
                },
                Ok(None) => Verdict::Nothing("nothing that triggers a plan changes".into()),
                Err(e) => Verdict::Refused(e.to_string()),
            }
        }
        Decision::NoChange | Decision::ClearTerminal => {
            Verdict::Nothing("nothing that triggers a plan changes".into())
        }
    }
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
    let current = read_sources(cluster, &change.instance.spec.parameter_sources, &BTreeMap::new())
        .await
        .unwrap_or_default();
    let sourced = read_sources(
        cluster,
        &change.proposed.parameter_sources,
        &change.sensitive_values,
    )
    .await
    .map_err(|e| anyhow!("cannot preview instance {}: {e}", change.instance.metadata.name))?;
    let rotated: Vec<String> = change
        .sensitive_values
        .iter()
        .filter(|(k, v)| {
            change.instance.spec.parameter_sources.get(*k) == change.proposed.parameter_sources.get(*k)
                && current.get(*k) != Some(*v)
        })
        .map(|(k, _)| k.clone())
        .collect();
    let redactor = Redactor::new(current.into_values().chain(sourced.values().cloned()));
    let verdict = verdict(change, &rotated);
    let Verdict::Run { plan, .. } = &verdict else {
        print_without_plan(&verdict, mode, format, io)?;
        return Ok(ExitCode::from(u8::from(matches!(verdict, Verdict::Refused(_)))));
    };
    let mut params = change.proposed.parameters.clone();
    params.extend(sourced);
    let discovery = Cache::new(cluster.client.clone());
    let objects = render(cluster, &discovery, change, plan, params, &redactor).await?;
    let masker = Masker { redactor };
    let diffs = match (mode, format) {
        (DryRun::Server, _) | (DryRun::Client, PreviewOutput::Diff) => {
            let mut diffs = Vec::new();
            for o in &objects {
                diffs.push(diff_object(cluster, &discovery, o, mode, &masker).await);
            }
            Some(diffs)
        }
        _ => None,
    };
    let refused = diffs.iter().flatten().filter(|d| d.error.is_some()).count();
    match format {
        PreviewOutput::Json => print_json(&verdict, mode, &objects, diffs.as_deref(), &masker, io)?,
        PreviewOutput::Yaml => print_yaml(&verdict, &objects, &masker, io)?,
        PreviewOutput::Diff => print_diffs(&verdict, mode, diffs.as_deref().unwrap_or(&[]), io)?,
        // Refused at the top.
        PreviewOutput::Manifests => {}
    }
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
        print_json(verdict, mode, &[], None, &Masker::default(), io)?;
    } else if let Verdict::Nothing(_) = verdict {
        writeln!(io.out, "# {}", verdict.line())?;
    }
    if let Verdict::Refused(msg) = verdict {
        writeln!(io.err, "Error: {msg}")?;
    }
    Ok(())
}

/// The values of `sources` read from their Secrets (`overlay` wins: values the command would
/// store). Messages name the parameter and the Secret, never a value.
async fn read_sources(
    cluster: &Cluster,
    sources: &BTreeMap<String, kudo_api::ParameterSource>,
    overlay: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &cluster.namespace,
        &kudo_kube::known_resource("", "Secret"),
    );
    let mut out = overlay.clone();
    let mut read: HashMap<String, Option<Value>> = HashMap::new();
    for (param, source) in sources {
        if out.contains_key(param) {
            continue;
        }
        let Some(sel) = source.secret_key_ref.as_ref() else {
            return Err(format!(
                "parameter {param:?}: parameterSources supports only secretKeyRef"
            ));
        };
        if !read.contains_key(&sel.name) {
            let found = api
                .get_opt(&sel.name)
                .await
                .map_err(|e| format!("parameter {param:?}: reading Secret {}: {e}", sel.name))?;
            read.insert(sel.name.clone(), found.and_then(|o| serde_json::to_value(o).ok()));
        }
        let secret = read.get(&sel.name).and_then(Option::as_ref);
        let value = kudo_controller::param_sources::value_from_secret(param, &cluster.namespace, sel, secret)
            .map_err(|e| format!("{e} (the manager would wait for it)"))?;
        out.insert(param.clone(), value);
    }
    Ok(out)
}

/// Renders `plan` as the manager would: namespacedness from discovery, the live ConfigMaps and
/// Secrets of the dependencies hash, removed API versions translated when the server does not
/// serve them. Errors are redacted.
async fn render(
    cluster: &Cluster,
    discovery: &Cache,
    change: &Change<'_>,
    plan: &str,
    params: BTreeMap<String, String>,
    redactor: &Redactor,
) -> Result<Vec<RenderedObject>> {
    let name = &change.instance.metadata.name;
    let mut base = RenderContext::offline(name, &cluster.namespace, params);
    base.instance_uid = change
        .instance
        .metadata
        .other
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    base.plan_uid = uuid::Uuid::new_v4().to_string();
    if let Some(adjust) = change.adjust {
        adjust(&mut base);
    }
    let redacted = |e: kudo_package::render::RenderError| anyhow!("{}", redactor.redact(&e.to_string()));
    // First pass: which kinds and live dependencies the plan needs.
    let wanted: Arc<Mutex<BTreeSet<Dependency>>> = Arc::default();
    let mut first = base.clone();
    let w = wanted.clone();
    first.live_dependency = Some(Arc::new(move |d: &Dependency| {
        w.lock().unwrap_or_else(|e| e.into_inner()).insert(d.clone());
        None
    }));
    let objects = render_plan(change.new_ov, plan, &first).map_err(redacted)?;
    let mut namespaced = HashMap::new();
    for o in &objects {
        let (av, kind) = type_of(&o.object);
        if let Ok(Resolved::Found { namespaced: n, .. }) = discovery.resolve(av, kind).await {
            namespaced.insert((av.to_string(), kind.to_string()), n);
        }
    }
    let wanted: Vec<Dependency> = wanted
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect();
    let mut live = HashMap::new();
    for d in wanted {
        live.insert(d.clone(), read_dependency(cluster, &d).await?);
    }
    let mut ctx = base;
    ctx.is_namespaced = Some(Arc::new(move |av: &str, kind: &str| {
        namespaced
            .get(&(av.to_string(), kind.to_string()))
            .copied()
            .unwrap_or_else(|| kudo_package::enhance::builtin_is_namespaced(av, kind))
    }));
    ctx.live_dependency = Some(Arc::new(move |d: &Dependency| live.get(d).cloned().flatten()));
    let mut objects = render_plan(change.new_ov, plan, &ctx).map_err(redacted)?;
    for o in &mut objects {
        let (av, kind) = type_of(&o.object);
        if kudo_package::translate::mapping(av, kind).is_some()
            && matches!(discovery.resolve(av, kind).await, Ok(Resolved::Unknown(_)))
        {
            o.object = kudo_package::translate::translate(&o.object)
                .map_err(|e| anyhow!("{}.{}.{}.{}: {e}", o.plan, o.phase, o.step, o.task))?
                .object;
        }
    }
    // A sharded manager labels what it applies with the Instance's bucket: so does the preview.
    if let Some(bucket) = change.instance.metadata.labels.get(kudo_api::labels::BUCKET) {
        for o in objects.iter_mut().filter(|o| matches!(o.action, Action::Apply)) {
            kudo_package::enhance::add_bucket_label(&mut o.object, bucket);
        }
    }
    Ok(objects)
}

fn type_of(obj: &Value) -> (&str, &str) {
    (
        obj["apiVersion"].as_str().unwrap_or_default(),
        obj["kind"].as_str().unwrap_or_default(),
    )
}

/// A ConfigMap/Secret of the dependencies hash as the manager hashes it; `None` when missing.
async fn read_dependency(cluster: &Cluster, d: &Dependency) -> Result<Option<Value>> {
    let resource = kudo_kube::known_resource("", d.kind.as_str());
    let api: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), &d.namespace, &resource);
    let found = api
        .get_opt(&d.name)
        .await
        .with_context(|| format!("reading {} {}/{}", d.kind.as_str(), d.namespace, d.name))?;
    Ok(match found {
        Some(o) => Some(kudo_package::deps_hash::for_hash(serde_json::to_value(o)?)),
        None => None,
    })
}

/// Hides secret values in what a preview prints.
#[derive(Default)]
pub struct Masker {
    /// Sensitive parameter values (the rule diagnostics follows too).
    redactor: Redactor,
}

impl Masker {
    /// Every string (keys included) with sensitive values replaced.
    fn redact(&self, v: &mut Value) {
        match v {
            Value::String(s) => *s = self.redactor.redact(s),
            Value::Array(a) => a.iter_mut().for_each(|x| self.redact(x)),
            Value::Object(m) => {
                let old = std::mem::take(m);
                for (k, mut x) in old {
                    self.redact(&mut x);
                    m.insert(self.redactor.redact(&k), x);
                }
            }
            _ => {}
        }
    }

    /// One object for printing: Secret values masked (`***`), sensitive values redacted.
    pub fn object(&self, obj: &Value) -> Value {
        let mut out = obj.clone();
        mask_secret_pair(Some(&mut out), None);
        self.redact(&mut out);
        out
    }

    /// Both sides of a diff, masked as `kubectl diff` masks Secrets, then redacted.
    pub fn pair(&self, from: Option<&Value>, to: Option<&Value>) -> (Option<Value>, Option<Value>) {
        let (mut from, mut to) = (from.cloned(), to.cloned());
        mask_secret_pair(from.as_mut(), to.as_mut());
        for v in from.iter_mut().chain(to.iter_mut()) {
            self.redact(v);
        }
        (from, to)
    }
}

/// `kubectl diff`'s Secret masking: each `data`/`stringData` value becomes `***`, or
/// `*** (before)` and `*** (after)` when it differs between the two sides.
pub fn mask_secret_pair(from: Option<&mut Value>, to: Option<&mut Value>) {
    let is_secret = |v: &Option<&mut Value>| {
        v.as_ref()
            .is_some_and(|o| o["kind"] == "Secret" && o["apiVersion"] == "v1")
    };
    if !is_secret(&from) && !is_secret(&to) {
        return;
    }
    let (mut from, mut to) = (from, to);
    for field in ["data", "stringData"] {
        let before = from
            .as_ref()
            .and_then(|o| o.get(field))
            .cloned()
            .unwrap_or(Value::Null);
        let after = to
            .as_ref()
            .and_then(|o| o.get(field))
            .cloned()
            .unwrap_or(Value::Null);
        let mask = |side: &mut Option<&mut Value>, mine: &Value, other: &Value, tag: &str| {
            let Some(map) = side
                .as_mut()
                .and_then(|o| o.get_mut(field))
                .and_then(Value::as_object_mut)
            else {
                return;
            };
            for (k, v) in map.iter_mut() {
                let changed = other.get(k).is_some_and(|o| o != &mine[k]);
                *v = Value::from(if changed {
                    format!("*** ({tag})")
                } else {
                    "***".to_string()
                });
            }
        };
        mask(&mut from, &before, &after, "before");
        mask(&mut to, &after, &before, "after");
    }
}

/// One object's diff, or the reason there is none.
#[derive(Debug, Clone)]
pub struct ObjectDiff {
    /// `kubectl diff`'s file name: `[group.]version.Kind.namespace.name`.
    pub id: String,
    pub rendered: RenderedObject,
    /// The unified diff (empty: no change).
    pub diff: String,
    /// Why no diff could be computed (the server refused the dry-run apply…).
    pub error: Option<String>,
    /// A note instead of a diff (a Pipe task's generator pod).
    pub note: Option<String>,
}

/// `kubectl diff`'s name of an object: `[group.]version.Kind.namespace.name`.
pub fn object_id(obj: &Value) -> String {
    let (av, kind) = type_of(obj);
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let av = match av.split_once('/') {
        Some((g, v)) => format!("{g}.{v}"),
        None => av.to_string(),
    };
    format!("{av}.{kind}.{ns}.{name}")
}

/// The diff of one rendered object: against the dry-run apply's result (`Server`) or the
/// rendered object against the live fields it sets (`Client`).
async fn diff_object(
    cluster: &Cluster,
    discovery: &Cache,
    o: &RenderedObject,
    mode: DryRun,
    masker: &Masker,
) -> ObjectDiff {
    let mut out = ObjectDiff {
        id: object_id(&o.object),
        rendered: o.clone(),
        diff: String::new(),
        error: None,
        note: None,
    };
    if o.action == Action::PipePod {
        out.note =
            Some("a Pipe task's generator pod: created and deleted during the plan, not diffed".into());
        return out;
    }
    match live_and_merged(cluster, discovery, o, mode).await {
        Ok((mut live, mut merged)) => {
            live.iter_mut()
                .chain(merged.iter_mut())
                .for_each(without_run_annotations);
            generation_only_from_run_annotations(live.as_ref(), merged.as_mut());
            let (live, merged) = masker.pair(live.as_ref(), merged.as_ref());
            out.diff = unified_diff(&out.id, live.as_ref(), merged.as_ref());
        }
        Err(e) => out.error = Some(masker.redactor.redact(&e)),
    }
    out
}

/// The live object and what it would become (`None`: absent), managedFields removed.
async fn live_and_merged(
    cluster: &Cluster,
    discovery: &Cache,
    o: &RenderedObject,
    mode: DryRun,
) -> Result<(Option<Value>, Option<Value>), String> {
    let (av, kind) = type_of(&o.object);
    let name = o.object["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = match discovery.resolve(av, kind).await {
        Ok(Resolved::Found {
            resource,
            namespaced: true,
        }) => {
            let ns = o.object["metadata"]["namespace"]
                .as_str()
                .unwrap_or(&cluster.namespace);
            Api::namespaced_with(cluster.client.clone(), ns, &resource)
        }
        Ok(Resolved::Found { resource, .. }) => Api::all_with(cluster.client.clone(), &resource),
        Ok(Resolved::Unknown(msg)) => return Err(msg),
        Err(e) => return Err(format!("discovery of {av}/{kind} failed: {e}")),
    };
    let live = api
        .get_opt(name)
        .await
        .map_err(|e| format!("reading the live object: {e}"))?
        .map(|l| clean(serde_json::to_value(l).unwrap_or_default(), &o.object));
    let merged = match (o.action, mode) {
        (Action::Delete, _) => None,
        (_, DryRun::Client) => Some(o.object.clone()),
        (_, DryRun::Server) => {
            let pp = PatchParams::apply(MANAGER_FIELD_MANAGER).force().dry_run();
            let merged = api
                .patch(name, &pp, &Patch::Apply(&o.object))
                .await
                .map_err(|e| match e {
                    kube::Error::Api(s) => format!("the server refused it: {}", s.message),
                    other => format!("dry-run apply failed: {other}"),
                })?;
            Some(clean(serde_json::to_value(merged).unwrap_or_default(), &o.object))
        }
    };
    let live = match mode {
        DryRun::Client => live.map(|l| project(&l, &o.object)),
        DryRun::Server => live,
    };
    Ok((live, merged))
}

/// An object as the server returned it, without managedFields (as `kubectl diff` shows it) and
/// with apiVersion/kind filled in from what was sent.
fn clean(mut obj: Value, sent: &Value) -> Value {
    if let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        md.remove("managedFields");
    }
    for f in ["apiVersion", "kind"] {
        if obj.get(f).is_none() {
            obj[f] = sent[f].clone();
        }
    }
    obj
}

/// KUDO's per-run bookkeeping annotations (plan, phase, step, plan run uid), which every run
/// rewrites on every object, are left out of both sides of a diff (as kubectl diff leaves out
/// managedFields), so that a diff shows what the change itself changes.
fn without_run_annotations(obj: &mut Value) {
    use kudo_api::labels::{PHASE, PLAN, PLAN_UID, STEP};
    let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(a) = md.get_mut("annotations").and_then(Value::as_object_mut) {
        for k in [PLAN, PHASE, STEP, PLAN_UID] {
            a.remove(k);
        }
        if a.is_empty() {
            md.remove("annotations");
        }
    }
}

/// A Deployment's generation also rises when only its annotations change (kube-apiserver's
/// deployment strategy): when the run annotations were all that changed, so is the generation
/// taken back, and the object shows no diff.
fn generation_only_from_run_annotations(live: Option<&Value>, merged: Option<&mut Value>) {
    let (Some(live), Some(merged)) = (live, merged) else {
        return;
    };
    let gen_of = |v: &Value| v.pointer("/metadata/generation").cloned();
    let mut same = merged.clone();
    if let (Some(g), Some(md)) = (
        gen_of(live),
        same.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        md.insert("generation".into(), g);
    }
    if &same == live {
        *merged = same;
    }
}

/// The part of `live` at the fields `rendered` sets (maps by key, lists element by element,
/// extra live elements kept): what a client-side diff compares without the server's merge.
pub fn project(live: &Value, rendered: &Value) -> Value {
    match (live, rendered) {
        (Value::Object(l), Value::Object(r)) => Value::Object(
            r.keys()
                .filter_map(|k| Some((k.clone(), project(l.get(k)?, &r[k]))))
                .collect(),
        ),
        (Value::Array(l), Value::Array(r)) => Value::Array(
            l.iter()
                .enumerate()
                .map(|(i, x)| r.get(i).map_or_else(|| x.clone(), |y| project(x, y)))
                .collect(),
        ),
        _ => live.clone(),
    }
}

/// Keys sorted at every level, as kubectl prints YAML.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

fn to_yaml(v: &Value) -> String {
    serde_saphyr::to_string(&sorted(v)).unwrap_or_else(|e| format!("# cannot print as YAML: {e}\n"))
}

/// `diff -u -N LIVE/<id> MERGED/<id>` of the two sides as YAML, as `kubectl diff` prints it;
/// empty when they are equal.
pub fn unified_diff(id: &str, live: Option<&Value>, merged: Option<&Value>) -> String {
    let a = live.map(to_yaml).unwrap_or_default();
    let b = merged.map(to_yaml).unwrap_or_default();
    if a == b {
        return String::new();
    }
    let (from, to) = (format!("LIVE/{id}"), format!("MERGED/{id}"));
    let diff = similar::TextDiff::from_lines(&a, &b);
    let body = diff
        .unified_diff()
        .context_radius(3)
        .header(&from, &to)
        .to_string();
    let mut out = format!("diff -u -N {from} {to}\n{body}");
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

fn where_of(o: &RenderedObject) -> String {
    format!("{}/{}/{} ({})", o.phase, o.step, o.task, o.action.as_str())
}

fn print_yaml(verdict: &Verdict, objects: &[RenderedObject], masker: &Masker, io: &mut Io<'_>) -> Result<()> {
    writeln!(io.out, "# {}", verdict.line())?;
    for o in objects {
        writeln!(io.out, "---\n# {}", where_of(o))?;
        write!(io.out, "{}", to_yaml(&masker.object(&o.object)))?;
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

fn print_json(
    verdict: &Verdict,
    mode: DryRun,
    objects: &[RenderedObject],
    diffs: Option<&[ObjectDiff]>,
    masker: &Masker,
    io: &mut Io<'_>,
) -> Result<()> {
    let where_json = |o: &RenderedObject| json!({"phase": o.phase, "step": o.step, "task": o.task, "action": o.action.as_str()});
    let objects: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut v = where_json(o);
            v["object"] = masker.object(&o.object);
            v
        })
        .collect();
    let mut doc = json!({
        "decision": verdict.to_json(),
        "plan": match verdict { Verdict::Run { plan, .. } => json!(plan), _ => Value::Null },
        "dryRun": mode.as_str(),
        "objects": objects,
    });
    if let Some(diffs) = diffs {
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
    fn decision_lines_name_the_plan_and_why() {
        let run = Verdict::Run {
            plan: "update".into(),
            why: reason_text(
                &ScheduleReason::ParameterUpdate(vec!["NODE_COUNT".into()]),
                "a",
                "b",
            ),
        };
        assert_eq!(
            run.line(),
            "plan update would run (parameters changed: NODE_COUNT)"
        );
        assert_eq!(
            Verdict::Refused("updating instance x: no".into()).line(),
            "refused: updating instance x: no"
        );
        assert_eq!(run.to_json()["plan"], "update");
        assert_eq!(Verdict::Nothing("n".into()).to_json()["admitted"], true);
    }

    #[test]
    fn secrets_are_masked_as_kubectl_diff_masks_them() {
        let live = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"same": "YQ==", "changed": "Yg==", "gone": "Yw=="}});
        let merged = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"same": "YQ==", "changed": "ZA==", "new": "ZQ=="}, "stringData": {"p": "hunter22"}});
        let m = Masker::default();
        let (a, b) = m.pair(Some(&live), Some(&merged));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(
            a["data"],
            json!({"same": "***", "changed": "*** (before)", "gone": "***"})
        );
        assert_eq!(
            b["data"],
            json!({"same": "***", "changed": "*** (after)", "new": "***"})
        );
        assert_eq!(b["stringData"]["p"], "***");
        // A ConfigMap is not masked, but sensitive values anywhere are redacted.
        let m = Masker {
            redactor: Redactor::new(["s3cret-pw".to_string(), "ab".to_string()]),
        };
        let cm = json!({"kind": "ConfigMap", "data": {"url": "db://u:s3cret-pw@h", "x": "ab"}});
        let out = m.object(&cm);
        assert_eq!(out["data"]["url"], "db://u:(redacted)@h");
        assert_eq!(out["data"]["x"], "ab", "values under 4 characters are left alone");
    }

    #[test]
    fn diffs_are_unified_with_kubectl_headers_and_empty_when_equal() {
        let live = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns"}, "spec": {"replicas": 3, "a": 1}});
        let mut merged = live.clone();
        merged["spec"]["replicas"] = json!(5);
        let id = object_id(&live);
        assert_eq!(id, "apps.v1.Deployment.ns.web");
        let d = unified_diff(&id, Some(&live), Some(&merged));
        assert!(
            d.starts_with(
                "diff -u -N LIVE/apps.v1.Deployment.ns.web MERGED/apps.v1.Deployment.ns.web\n\
                 --- LIVE/apps.v1.Deployment.ns.web\n+++ MERGED/apps.v1.Deployment.ns.web\n@@"
            ),
            "{d}"
        );
        assert!(d.contains("\n-  replicas: 3\n+  replicas: 5\n"), "{d}");
        assert_eq!(unified_diff(&id, Some(&live), Some(&live)), "");
        // A new object: everything added; a cluster-scoped one has an empty namespace part.
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
        assert_eq!(object_id(&ns), "v1.Namespace..x");
        let d = unified_diff(&object_id(&ns), None, Some(&ns));
        assert!(d.contains("@@ -0,0 +1,"), "{d}");
    }

    #[test]
    fn a_client_diff_sees_only_the_fields_the_object_sets() {
        let live = json!({"metadata": {"name": "a", "uid": "u", "labels": {"x": "1", "y": "2"}},
            "spec": {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 81}], "clusterIP": "10.0.0.1"}});
        let rendered = json!({"metadata": {"name": "a", "labels": {"x": "3"}},
            "spec": {"ports": [{"port": 80}]}});
        assert_eq!(
            project(&live, &rendered),
            json!({"metadata": {"name": "a", "labels": {"x": "1"}},
                "spec": {"ports": [{"port": 80}, {"port": 81}]}})
        );
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
