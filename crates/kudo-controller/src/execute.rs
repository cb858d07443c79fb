//! Performing the IO of one task: rendering the plan's objects and applying/deleting them, then
//! judging their health. Everything here returns a [`TaskOutcome`] for the engine's pass.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kudo_api::kinds::GvkKey;
use kudo_api::{OperatorVersion, TaskKind};
use kudo_engine::waiting::describe;
use kudo_engine::{ErrorClass, Health, TaskCall, TaskOutcome, classify_api_error, health};
use kudo_package::deps_hash::{self, Dependency};
use kudo_package::enhance::builtin_is_namespaced;
use kudo_package::render::{Action, RenderContext, RenderError, RenderedObject, render_plan};
use serde_json::Value;

use crate::Context;
use crate::lean::Lean;
use kudo_kube::discovery::Resolved;

/// Event/fatal reasons used by the controller in addition to the engine's.
pub mod reasons {
    pub const TASK_RENDERING_ERROR: &str = "TaskRenderingError";
    pub const TASK_ENHANCEMENT_ERROR: &str = "TaskEnhancementError";
    pub const RESOURCE_VALIDATION_ERROR: &str = "ResourceValidationError";
    pub const RESOURCE_APPLY_ERROR: &str = "ResourceApplyError";
    pub const FAILED_TERMINAL_STATE: &str = "FailedTerminalStateError";
    pub const TOGGLE_TASK_ERROR: &str = "ToggleTaskError";
    pub const DUMMY_TASK_ERROR: &str = "DummyTaskError";
    pub const PIPE_TASK_ERROR: &str = "PipeTaskError";
    pub const KUDO_OPERATOR_TASK_ERROR: &str = "KudoOperatorTaskError";
    pub const INVALID_PARAMS: &str = "InvalidParams";
    pub const INVALID_PLAN: &str = "InvalidPlan";
    pub const SERVICE_ACCOUNT_NOT_FOUND: &str = "ServiceAccountNotFound";
}

/// Where a task sits in its plan: the key of per-task render errors.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TaskKey {
    phase: String,
    step: String,
    task: String,
}

impl TaskKey {
    fn new(phase: &str, step: &str, task: &str) -> TaskKey {
        TaskKey {
            phase: phase.to_string(),
            step: step.to_string(),
            task: task.to_string(),
        }
    }
}

pub use kudo_engine::reconcile::ClusterObject;

/// Cluster-scoped objects applied during a reconcile. They get no owner reference (an owner
/// must be in the same namespace), so the controller records them on the Instance and deletes
/// them itself on uninstall (KUDO leaked them, #1073).
pub type ClusterObjects = Mutex<BTreeSet<ClusterObject>>;

/// The objects of one plan run, rendered once per reconcile, grouped by task. A template error
/// belongs to the task that owns the template: tasks before it still run, and the pass fails
/// only when it reaches that task (KUDO rendered task by task).
pub struct Rendered {
    objects: Vec<RenderedObject>,
    errors: HashMap<TaskKey, String>,
    /// A dependency of the dependencies hash could not be read: applying now could roll pods for
    /// nothing, so tasks that apply objects wait (transient) and the next reconcile renders again.
    transient: Option<String>,
    /// Objects of removed API versions converted to the served ones (crate::translate).
    translations: Vec<crate::translate::Translation>,
    /// A parameter source (crate::param_sources) could not be read: nothing was rendered and
    /// every task waits with this message (naming the parameter and the Secret).
    unresolved: Option<String>,
}

impl Rendered {
    /// All rendered objects of the plan (drift repair re-applies them).
    pub fn objects(&self) -> &[RenderedObject] {
        &self.objects
    }

    /// Why this render cannot be applied yet (a dependency of the dependencies hash was unreadable).
    pub fn transient(&self) -> Option<&str> {
        self.transient.as_deref().or(self.unresolved.as_deref())
    }

    /// The translations of removed API versions this render made.
    pub fn translations(&self) -> &[crate::translate::Translation] {
        &self.translations
    }

    /// Child Instances of KudoOperator tasks reference sensitive values from their Secret
    /// instead of carrying them (crate::param_sources::source_child_parameters); a child that
    /// cannot fails its task.
    pub fn source_child_parameters(
        &mut self,
        sources: &BTreeMap<String, kudo_api::ParameterSource>,
        values: &crate::param_sources::SourcedValues,
    ) {
        if values.is_empty() {
            return;
        }
        for o in &mut self.objects {
            if o.action != Action::ChildInstance {
                continue;
            }
            if let Err(e) = crate::param_sources::source_child_parameters(&mut o.object, sources, values) {
                self.errors
                    .entry(TaskKey::new(&o.phase, &o.step, &o.task))
                    .or_insert(e);
            }
        }
    }

    fn for_task<'r>(&'r self, call: &'r TaskCall<'_>) -> impl Iterator<Item = &'r RenderedObject> + 'r {
        self.objects
            .iter()
            .filter(move |o| o.phase == call.phase && o.step == call.step && o.task == call.task_name)
    }

    fn error(&self, call: &TaskCall<'_>) -> Option<&str> {
        self.errors
            .get(&TaskKey::new(call.phase, call.step, call.task_name))
            .map(String::as_str)
    }
}

/// The OperatorVersion reduced to one task of one plan, so a single task can be rendered on its
/// own when another task of the plan has a template error.
fn single_task_ov(ov: &OperatorVersion, plan: &str, phase: &str, step: &str, task: &str) -> OperatorVersion {
    let mut sub = ov.clone();
    if let Some(p) = sub.spec.plans.get(plan).cloned() {
        let mut p = p;
        p.phases.retain(|ph| ph.name == phase);
        for ph in &mut p.phases {
            ph.steps.retain(|s| s.name == step);
            for s in &mut ph.steps {
                s.tasks.retain(|t| t == task);
            }
        }
        sub.spec.plans = BTreeMap::from([(plan.to_string(), p)]);
    }
    sub
}

/// A plan-level render failure (a fatal for the whole plan: invalid parameters, missing plan).
#[derive(Debug, thiserror::Error)]
pub enum PlanRenderError {
    #[error("could not find required plan: {0}")]
    MissingPlan(String),
    #[error("{0}")]
    Render(#[source] RenderError),
    /// A render error whose text quoted the value of a sensitive parameter, with the value
    /// replaced (crate::param_sources::redact_error).
    #[error("{0}")]
    Redacted(String),
}

/// Why drift repair could not apply an object ([`apply_object`]).
#[derive(Debug, thiserror::Error)]
pub enum ApplyObjectError {
    /// The object's kind could not be resolved (the task outcome that would have been reported).
    #[error("{0}")]
    Resolve(String),
    #[error("{0}")]
    Api(#[source] kube::Error),
}

fn render_all(ov: &OperatorVersion, plan: &str, rctx: &RenderContext) -> Result<Rendered, PlanRenderError> {
    match render_plan(ov, plan, rctx) {
        Ok(objects) => Ok(Rendered {
            objects,
            errors: HashMap::new(),
            transient: None,
            translations: Vec::new(),
            unresolved: None,
        }),
        Err(RenderError::Task { .. }) => {
            // Render task by task so that only the broken task(s) fail.
            let mut out = Rendered {
                objects: Vec::new(),
                errors: HashMap::new(),
                transient: None,
                translations: Vec::new(),
                unresolved: None,
            };
            let Some(p) = ov.spec.plans.get(plan) else {
                return Err(PlanRenderError::MissingPlan(plan.to_string()));
            };
            for ph in &p.phases {
                for st in &ph.steps {
                    for t in &st.tasks {
                        let sub = single_task_ov(ov, plan, &ph.name, &st.name, t);
                        match render_plan(&sub, plan, rctx) {
                            Ok(objs) => out.objects.extend(objs),
                            Err(RenderError::Task { message, .. }) => {
                                out.errors.insert(TaskKey::new(&ph.name, &st.name, t), message);
                            }
                            Err(e) => return Err(PlanRenderError::Render(e)),
                        }
                    }
                }
            }
            Ok(out)
        }
        Err(e) => Err(PlanRenderError::Render(e)),
    }
}

/// Renders a plan with namespacedness from discovery and the dependencies hash (see
/// [`render_namespaced`]). Objects of removed API versions are then translated
/// (crate::translate); one that cannot be fails its task. `Err` is a plan-level fatal (invalid
/// parameters, missing plan).
///
/// `sourced` (`spec.parameterSources` as resolved once for this reconcile,
/// crate::param_sources::resolve) is merged into the parameters; a message that could quote a
/// sourced value is redacted. An unresolved source renders nothing (the plan waits).
pub async fn render(
    ctx: &Context,
    ov: &OperatorVersion,
    plan: &str,
    mut base: RenderContext,
    sourced: &crate::param_sources::Sourced,
) -> Result<Rendered, PlanRenderError> {
    use crate::param_sources;
    let values = match sourced {
        Ok(v) => v,
        Err(msg) => {
            return Ok(Rendered {
                objects: Vec::new(),
                errors: HashMap::new(),
                transient: None,
                translations: Vec::new(),
                unresolved: Some(msg.clone()),
            });
        }
    };
    base.parameters = param_sources::merged(&base.parameters, values);
    let (ns, instance) = (base.namespace.clone(), base.instance_name.clone());
    let mut rendered = render_namespaced(ctx, ov, plan, base)
        .await
        .map_err(|e| param_sources::redact_error(e, values))?;
    for e in rendered.errors.values_mut() {
        *e = param_sources::redact(e, values);
    }
    let (done, failed) = crate::translate::translate_unserved(ctx, &mut rendered.objects).await;
    for (i, err) in failed {
        let o = &rendered.objects[i];
        rendered
            .errors
            .entry(TaskKey::new(&o.phase, &o.step, &o.task))
            .or_insert(err);
    }
    rendered.translations = done;
    let applied = rendered
        .objects
        .iter_mut()
        .filter(|o| matches!(o.action, Action::Apply));
    crate::views::label_bucket(&ctx.shards, &ns, &instance, applied.map(|o| &mut o.object));
    Ok(rendered)
}

/// Renders with namespacedness from discovery and the live dependencies of the dependencies
/// hash. Kinds missing from the discovery cache are looked up after a first render; if discovery
/// disagrees with the built-in table used for them, the plan is rendered again. The same first
/// render records the ConfigMaps/Secrets the hash needs from the cluster (those no task of the
/// plan renders); they are read and, when any exists, the plan is rendered again with them.
async fn render_namespaced(
    ctx: &Context,
    ov: &OperatorVersion,
    plan: &str,
    base: RenderContext,
) -> Result<Rendered, PlanRenderError> {
    type Live = BTreeMap<Dependency, Option<Value>>;
    let misses: Arc<Mutex<BTreeSet<GvkKey>>> = Arc::default();
    let wanted: Arc<Mutex<BTreeSet<Dependency>>> = Arc::default();
    let make = |misses: Arc<Mutex<BTreeSet<GvkKey>>>, live: Arc<Live>| {
        let cache = ctx.discovery.clone();
        let mut rctx = base.clone();
        rctx.is_namespaced = Some(Arc::new(move |av: &str, kind: &str| {
            cache.cached_namespaced(av, kind).unwrap_or_else(|| {
                misses
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(GvkKey::new(av, kind));
                builtin_is_namespaced(av, kind)
            })
        }));
        let wanted = wanted.clone();
        rctx.live_dependency = Some(Arc::new(move |d: &Dependency| match live.get(d) {
            Some(found) => found.clone(),
            None => {
                wanted.lock().unwrap_or_else(|e| e.into_inner()).insert(d.clone());
                None
            }
        }));
        rctx
    };
    let rendered = render_all(ov, plan, &make(misses.clone(), Arc::default()))?;
    let missed: Vec<GvkKey> = misses
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect();
    let mut rerender = false;
    for GvkKey { api_version, kind } in missed {
        if let Ok(Resolved::Found { namespaced, .. }) = ctx.discovery.resolve(&api_version, &kind).await
            && namespaced != builtin_is_namespaced(&api_version, &kind)
        {
            rerender = true;
        }
    }
    let wanted: Vec<Dependency> = wanted
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect();
    let mut live = Live::new();
    let mut unreadable = None;
    for d in wanted {
        match read_dependency(ctx, &d).await {
            Ok(found) => {
                rerender |= found.is_some();
                live.insert(d, found);
            }
            Err(e) => unreadable = Some(e),
        }
    }
    let mut rendered = if rerender {
        render_all(ov, plan, &make(Arc::default(), Arc::new(live)))?
    } else {
        rendered
    };
    rendered.transient = unreadable;
    Ok(rendered)
}

/// A dependency of the dependencies hash as KUDO hashed it (see [`kudo_package::deps_hash`]);
/// `Ok(None)` when it does not exist. Other read errors are transient for the whole render.
async fn read_dependency(ctx: &Context, d: &Dependency) -> Result<Option<Value>, String> {
    let resource =
        kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("", "v1", d.kind.as_str()));
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.acting_client(), &d.namespace, &resource);
    let mut attempt = 0;
    loop {
        match api.get_opt(&d.name).await {
            Ok(Some(obj)) => {
                return Ok(Some(deps_hash::for_hash(
                    serde_json::to_value(&obj).map_err(|e| e.to_string())?,
                )));
            }
            Ok(None) => return Ok(None),
            Err(e) if attempt >= 2 => {
                return Err(format!(
                    "reading {} {}/{} for the dependencies hash: {e}",
                    d.kind.as_str(),
                    d.namespace,
                    d.name
                ));
            }
            Err(_) => {
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50 * attempt)).await;
            }
        }
    }
}

fn fatal(reason: &str, message: impl Into<String>) -> TaskOutcome {
    TaskOutcome::Fatal {
        reason: reason.to_string(),
        message: message.into(),
    }
}

/// A Dummy task's outcome: what its spec says (`wantErr`, `fatal`, `done`).
fn dummy(call: &TaskCall<'_>) -> TaskOutcome {
    let spec = &call.task.spec;
    if spec.want_err {
        if spec.fatal {
            fatal(
                reasons::DUMMY_TASK_ERROR,
                format!("dummy task {} failed fatally", call.task_name),
            )
        } else {
            TaskOutcome::Transient(format!("dummy task {} failed", call.task_name))
        }
    } else if spec.done {
        TaskOutcome::Done
    } else {
        TaskOutcome::InProgress(Some(format!("dummy task {} is not done", call.task_name)))
    }
}

/// Runs one task of the pass.
pub async fn run_task(
    ctx: &Context,
    call: &TaskCall<'_>,
    ov: &OperatorVersion,
    rendered: &Rendered,
    params: &BTreeMap<String, String>,
    cluster: &ClusterObjects,
) -> TaskOutcome {
    if let Some(e) = &rendered.unresolved {
        return TaskOutcome::Transient(e.clone());
    }
    if let Some(missing) = crate::impersonation::current().and_then(|a| a.missing) {
        return fatal(reasons::SERVICE_ACCOUNT_NOT_FOUND, missing);
    }
    let spec = &call.task.spec;
    match &call.task.kind {
        TaskKind::Dummy => dummy(call),
        TaskKind::Pipe => {
            if let Some(e) = rendered.error(call) {
                return fatal(reasons::TASK_RENDERING_ERROR, e);
            }
            let Some(pod) = rendered
                .for_task(call)
                .find(|o| o.action == Action::PipePod)
                .map(|o| &o.object)
            else {
                return fatal(
                    reasons::PIPE_TASK_ERROR,
                    format!("task {}: the pipe pod template rendered no Pod", call.task_name),
                );
            };
            let instance = pod["metadata"]["labels"]["kudo.dev/instance"]
                .as_str()
                .unwrap_or_default();
            let names = match ov.spec.plans.get(call.plan) {
                Some(plan) => kudo_package::pipes_for_plan(instance, call.plan, plan, &ov.spec.tasks),
                None => Default::default(),
            };
            crate::pipe::run(ctx, call.task_name, &spec.pipe, pod, &names, cluster).await
        }
        TaskKind::KudoOperator => {
            if let Some(e) = rendered.error(call) {
                return fatal(reasons::KUDO_OPERATOR_TASK_ERROR, e);
            }
            if let Err(outcome) = check_dependencies(ctx, call, ov, rendered).await {
                return outcome;
            }
            run_objects(ctx, rendered.for_task(call), cluster).await
        }
        TaskKind::Apply | TaskKind::Delete | TaskKind::Toggle => {
            if call.task.kind == TaskKind::Toggle
                && let Err(e) = kudo_engine::toggle_action(call.task, params)
            {
                return fatal(reasons::TOGGLE_TASK_ERROR, e.to_string());
            }
            if let Some(e) = rendered.error(call) {
                return fatal(reasons::TASK_RENDERING_ERROR, e);
            }
            if let Some(e) = &rendered.transient {
                return TaskOutcome::Transient(e.clone());
            }
            run_objects(ctx, rendered.for_task(call), cluster).await
        }
        TaskKind::Unknown(other) => fatal(
            kudo_engine::reasons::UNKNOWN_TASK_NAME,
            format!("unknown task kind {other}"),
        ),
    }
}

/// Whether the wait of a task that reported `outcome` is certain to end with a watch event, so
/// the pass need not be polled (see `Reconciler::execute`): the task is still progressing, and
/// each of its objects is applied (not deleted, not a pipe pod), of a kind the manager watches,
/// in the Instance's namespace and labelled `heritage=kudo` plus `kudo.dev/instance` naming
/// this Instance — so any change of the object (its status turning healthy included) triggers a
/// reconcile of this Instance. Transient errors and every other kind of wait (Dummy, Pipe,
/// deletions, kinds that are not watched such as custom resources or cluster-scoped objects)
/// answer `false`: those are polled with KUDO's backoff.
pub(crate) fn wait_ends_on_watch(
    ctx: &Context,
    call: &TaskCall<'_>,
    rendered: &Rendered,
    outcome: &TaskOutcome,
    ns: &str,
    instance: &str,
) -> bool {
    match outcome {
        TaskOutcome::Done | TaskOutcome::Fatal { .. } => return true,
        TaskOutcome::Transient(_) => return false,
        TaskOutcome::InProgress(_) => {}
    }
    if !matches!(call.task.kind.as_str(), "Apply" | "Toggle" | "KudoOperator") {
        return false;
    }
    let mut objects = rendered.for_task(call).peekable();
    if objects.peek().is_none() {
        return false;
    }
    objects.all(|o| {
        let obj = &o.object;
        let labels = &obj["metadata"]["labels"];
        matches!(o.action, Action::Apply | Action::ChildInstance)
            && obj["metadata"]["namespace"].as_str() == Some(ns)
            && labels["heritage"].as_str() == Some("kudo")
            && labels[kudo_api::labels::INSTANCE].as_str() == Some(instance)
            && ctx.caches.watches(
                obj["apiVersion"].as_str().unwrap_or(""),
                obj["kind"].as_str().unwrap_or(""),
            )
    })
}

/// Applies or deletes the task's objects in order. Every object is handled even when an earlier
/// one is still progressing (KUDO applied a step's objects together); the first fatal error stops.
async fn run_objects<'r>(
    ctx: &Context,
    objects: impl Iterator<Item = &'r RenderedObject>,
    cluster: &ClusterObjects,
) -> TaskOutcome {
    let mut waiting = Vec::new();
    let mut transient = Vec::new();
    for obj in objects {
        let res = match obj.action {
            Action::Apply => apply(ctx, &obj.object, cluster).await,
            Action::Delete => delete(ctx, &obj.object).await,
            // Handled by the Pipe task itself (crate::pipe); never listed among plain objects.
            Action::PipePod => Ok(None),
            // Server-side applied like any object: creation, or an update of the child's
            // operatorVersion/parameters that the child's own admission turns into its
            // update/upgrade plan. Health is the child's plan outcome (kudo_engine::health).
            Action::ChildInstance => apply(ctx, &crate::impersonation::inherit(&obj.object), cluster).await,
        };
        match res {
            Ok(None) => {}
            Ok(Some(msg)) => waiting.push(msg),
            Err(TaskOutcome::Transient(e)) => transient.push(e),
            Err(other) => return other,
        }
    }
    if !transient.is_empty() {
        TaskOutcome::Transient(transient.join("; "))
    } else if !waiting.is_empty() {
        // one line per object: the step's `waitingFor` (kudo_engine::waiting)
        TaskOutcome::InProgress(Some(waiting.join("\n")))
    } else {
        TaskOutcome::Done
    }
}

/// The graph check of a `KudoOperator` task (see [`kudo_engine::dependencies`]): every
/// OperatorVersion below the parent is installed, there is no cycle, and the child gets its
/// required parameters. Failures are fatal, as in KUDO (`CircularDependency`).
async fn check_dependencies(
    ctx: &Context,
    call: &TaskCall<'_>,
    ov: &OperatorVersion,
    rendered: &Rendered,
) -> Result<(), TaskOutcome> {
    use kudo_engine::dependencies::{DependencyError, check_child_parameters, check_graph};
    let ns = ov.metadata.namespace.as_deref().unwrap_or("default");
    let decode = |items: Vec<DynamicObject>| {
        let mut installed = BTreeMap::new();
        for item in items {
            let Ok(v) = serde_json::to_value(&item) else {
                continue;
            };
            if let Ok(o) = serde_json::from_value::<OperatorVersion>(v) {
                installed.insert(o.metadata.name.clone(), o);
            }
        }
        installed
    };
    // The watch cache first; a LIST when it is not synced or misses an OperatorVersion of the
    // graph (one installed a moment ago), so a failure is never decided on a stale cache.
    let cached = ctx
        .caches
        .operator_versions_in(ns)
        .map(|v| decode(v.into_iter().map(|o| (*o).clone()).collect()))
        .filter(|installed| check_graph(ov, installed).is_ok());
    let installed = match cached {
        Some(installed) => installed,
        None => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(ctx.client.clone(), ns, &crate::operator_version_resource());
            let list = api.list(&Default::default()).await.map_err(|e| {
                TaskOutcome::Transient(format!("listing operator versions in {ns} failed: {e}"))
            })?;
            decode(list.items)
        }
    };
    let as_fatal = |e: DependencyError| {
        let reason = match e {
            DependencyError::Cycle(_) | DependencyError::Missing { .. } => {
                kudo_engine::reasons::CIRCULAR_DEPENDENCY
            }
            DependencyError::InvalidParameters { .. } => reasons::KUDO_OPERATOR_TASK_ERROR,
        };
        fatal(reason, e.to_string())
    };
    check_graph(ov, &installed).map_err(as_fatal)?;
    let child_name = call.task.spec.child_operator_version_name();
    // check_graph found every child of `ov` installed, this task's included
    let Some(child_ov) = installed.get(&child_name) else {
        return Err(fatal(
            reasons::KUDO_OPERATOR_TASK_ERROR,
            format!(
                "operator version {child_name} of task {} is not installed",
                call.task_name
            ),
        ));
    };
    for obj in rendered.for_task(call) {
        let mut params: BTreeMap<String, String> = obj.object["spec"]["parameters"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        // A sensitive value passed on as a parameterSources entry is set too (its value is
        // validated by the child's manager when it reads the Secret).
        if let Some(sources) = obj.object["spec"]["parameterSources"].as_object() {
            for k in sources.keys() {
                params.insert(k.clone(), "(from a Secret)".to_string());
            }
        }
        check_child_parameters(call.task_name, child_ov, &params).map_err(as_fatal)?;
    }
    Ok(())
}

/// The dynamic API for an object, or the task outcome when its kind cannot be used.
pub async fn api_for(ctx: &Context, obj: &Value) -> Result<(Api<Lean>, String, bool), TaskOutcome> {
    let av = obj["apiVersion"].as_str().unwrap_or("");
    let kind = obj["kind"].as_str().unwrap_or("");
    let Some(name) = obj["metadata"]["name"].as_str().filter(|n| !n.is_empty()) else {
        return Err(fatal(
            reasons::RESOURCE_VALIDATION_ERROR,
            format!("{kind} without metadata.name cannot be applied (generateName is not supported)"),
        ));
    };
    match ctx.discovery.resolve(av, kind).await {
        Ok(Resolved::Found { resource, namespaced }) => {
            let api = if namespaced {
                let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
                Api::namespaced_with(ctx.acting_client(), ns, &resource)
            } else {
                Api::all_with(ctx.acting_client(), &resource)
            };
            Ok((api, name.to_string(), namespaced))
        }
        Ok(Resolved::Unknown(msg)) => Err(fatal(reasons::TASK_ENHANCEMENT_ERROR, msg)),
        Err(e) => Err(TaskOutcome::Transient(format!(
            "discovery of {av}/{kind} failed: {e}"
        ))),
    }
}

/// Turns a failed API call into the task outcome: requests the server rejected as invalid are
/// fatal with the server's message, the rest is retried.
fn api_error(what: &str, obj: &Value, e: kube::Error) -> TaskOutcome {
    match e {
        kube::Error::Api(s) => {
            let msg = format!("{what} {} failed: {}", describe(obj), s.message);
            match classify_api_error(s.code, &s.reason) {
                ErrorClass::Fatal => fatal(reasons::RESOURCE_APPLY_ERROR, msg),
                ErrorClass::Transient => TaskOutcome::Transient(msg),
            }
        }
        other => TaskOutcome::Transient(format!("{what} {} failed: {other}", describe(obj))),
    }
}

/// Notes a cluster-scoped object about to be applied (see [`ClusterObjects`]). Recorded before the
/// request: if it succeeds after a timeout we must still own it.
fn record_cluster_scoped(cluster: &ClusterObjects, obj: &Value, name: &str) {
    cluster
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(ClusterObject {
            api_version: obj["apiVersion"].as_str().unwrap_or("").to_string(),
            kind: obj["kind"].as_str().unwrap_or("").to_string(),
            name: name.to_string(),
        });
}

/// What this manager last applied, by object identity: a hash of the applied content. A step
/// waiting for a Deployment is passed again at every watch event that wakes it; applying
/// identical content each time costs the server a full server-side-apply merge for nothing (the
/// controller bench measured 10 applies for a one-object plan). Identical content is therefore
/// read instead of re-applied; new content (another run — the plan-uid label differs — or changed
/// parameters) is applied, and so is an object found deleted. Only an optimisation: a restarted
/// manager starts empty and applies everything once.
///
/// Each entry also keeps the uid and generation of the object the apply answered with: the
/// watch cache's copy may only be judged instead of a GET when it is that object at that
/// generation or later (a copy from before our apply would judge the previous spec).
#[derive(Default)]
pub struct AppliedCache(Mutex<HashMap<String, Applied>>);

/// What an apply of one object answered with (see [`AppliedCache`]).
#[derive(Clone, PartialEq, Eq)]
struct Applied {
    digest: u64,
    uid: Option<String>,
    generation: Option<i64>,
}

impl AppliedCache {
    /// Bound on remembered objects; beyond it the cache starts over.
    const MAX_ENTRIES: usize = 100_000;

    fn key(obj: &Value) -> String {
        format!(
            "{}/{}/{}/{}",
            obj["apiVersion"].as_str().unwrap_or(""),
            obj["kind"].as_str().unwrap_or(""),
            obj["metadata"]["namespace"].as_str().unwrap_or(""),
            obj["metadata"]["name"].as_str().unwrap_or("")
        )
    }

    fn digest(obj: &Value) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        obj.to_string().hash(&mut h);
        h.finish()
    }

    /// The answer of our last apply of exactly this content, if any.
    fn already_applied(&self, obj: &Value) -> Option<Applied> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&Self::key(obj))
            .filter(|a| a.digest == Self::digest(obj))
            .cloned()
    }

    fn record(&self, obj: &Value, live: &Value) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= Self::MAX_ENTRIES {
            map.clear();
        }
        map.insert(
            Self::key(obj),
            Applied {
                digest: Self::digest(obj),
                uid: live["metadata"]["uid"].as_str().map(str::to_string),
                generation: live["metadata"]["generation"].as_i64(),
            },
        );
    }
}

impl Applied {
    /// Whether a cached copy of the object is at least what our apply answered with: the same
    /// object (uid) at the same or a later generation.
    fn current(&self, cached: &Value) -> bool {
        let uid = cached["metadata"]["uid"].as_str();
        let generation = cached["metadata"]["generation"].as_i64();
        uid == self.uid.as_deref()
            && match (self.generation, generation) {
                (Some(applied), Some(seen)) => seen >= applied,
                (Some(_), None) => false,
                (None, _) => true,
            }
    }
}

/// Server-side applies one object (or, if this exact content was applied before, reads it) and
/// judges the live object. `Ok(Some(msg))`: applied but not healthy yet.
async fn apply(ctx: &Context, obj: &Value, cluster: &ClusterObjects) -> Result<Option<String>, TaskOutcome> {
    apply_for_task(ctx, obj, cluster).await
}

/// Server-side applies one object of a task and judges its health: `Ok(None)` healthy,
/// `Ok(Some(why))` still progressing.
pub(crate) async fn apply_for_task(
    ctx: &Context,
    obj: &Value,
    cluster: &ClusterObjects,
) -> Result<Option<String>, TaskOutcome> {
    let (api, name, namespaced) = api_for(ctx, obj).await?;
    if !namespaced {
        record_cluster_scoped(cluster, obj, &name);
    }
    if let Some(applied) = ctx.applied.already_applied(obj) {
        // The watch cache's copy when it is no older than our apply; else ask the server.
        let av = obj["apiVersion"].as_str().unwrap_or("");
        let kind = obj["kind"].as_str().unwrap_or("");
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
        if let Some(Some(cached)) = ctx.caches.child(av, kind, ns, &name)
            && applied.current(&cached)
        {
            return judge(ctx, cached);
        }
        match api.get_opt(&name).await {
            Ok(Some(live)) => {
                let live = serde_json::to_value(&live).map_err(|e| TaskOutcome::Transient(e.to_string()))?;
                return judge(ctx, with_type(live, obj));
            }
            // deleted since: apply again
            Ok(None) => {}
            Err(e) => return Err(api_error("get of", obj, e)),
        }
    }
    let pp = PatchParams::apply(&ctx.config.field_manager).force();
    let live = api
        .patch(&name, &pp, &Patch::Apply(obj))
        .await
        .map_err(|e| api_error("apply of", obj, e))?;
    let live = serde_json::to_value(&live).map_err(|e| TaskOutcome::Transient(e.to_string()))?;
    tracing::debug!(object = %describe(obj), "applied");
    ctx.metrics.object_applied();
    ctx.applied.record(obj, &live);
    applied_echo(ctx, obj, &name, &live);
    judge(ctx, with_type(live, obj))
}

/// The watch event of a plan's own apply wakes nobody: the pass judged the object from the
/// apply's answer, which is what that event carries (see [`crate::echoes`]). Only for the kinds
/// the manager watches (any other version would never be taken back).
fn applied_echo(ctx: &Context, obj: &Value, name: &str, live: &Value) {
    let (av, kind) = (
        obj["apiVersion"].as_str().unwrap_or(""),
        obj["kind"].as_str().unwrap_or(""),
    );
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
    if let Some(rv) = live["metadata"]["resourceVersion"].as_str()
        && !ns.is_empty()
        && ctx.caches.watches(av, kind)
    {
        ctx.child_echoes
            .wrote(ns, &crate::echoes::child_key(kind, name), rv);
    }
}

/// The live object with `apiVersion`/`kind` filled in from what we sent (servers always name the
/// type, but health rules depend on it).
fn with_type(mut live: Value, sent: &Value) -> Value {
    if live.get("apiVersion").is_none() {
        live["apiVersion"] = sent["apiVersion"].clone();
    }
    if live.get("kind").is_none() {
        live["kind"] = sent["kind"].clone();
    }
    live
}

fn judge(ctx: &Context, live: Value) -> Result<Option<String>, TaskOutcome> {
    match health(&live) {
        Health::Healthy => Ok(None),
        Health::Progressing(m) => Ok(Some(waiting_line(ctx, &live, &m))),
        Health::Failed(m) => Err(fatal(reasons::FAILED_TERMINAL_STATE, m)),
    }
}

/// What a step waits for on `live` (see [`kudo_engine::waiting`]): its verdict, and for a
/// workload the problems of its pods as the watch cache has them (no request is made).
fn waiting_line(ctx: &Context, live: &Value, verdict: &str) -> String {
    let kind = live["kind"].as_str().unwrap_or("");
    let ns = live["metadata"]["namespace"].as_str().unwrap_or("");
    let instance = live["metadata"]["labels"][kudo_api::labels::INSTANCE]
        .as_str()
        .unwrap_or("");
    let pods = if matches!(kind, "Deployment" | "StatefulSet" | "DaemonSet" | "Job") && !instance.is_empty() {
        ctx.caches
            .children_of_instance("v1", "Pod", ns, instance)
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let owned = kudo_engine::waiting::owned_pods(live, &pods);
    kudo_engine::waiting::waiting_line(live, verdict, &owned)
}

/// Server-side applies one object outside a plan (drift repair); returns the resourceVersion the
/// server answered with.
pub async fn apply_object(
    ctx: &Context,
    obj: &Value,
    cluster: &ClusterObjects,
) -> Result<Option<String>, ApplyObjectError> {
    let (api, name, namespaced) = api_for(ctx, obj)
        .await
        .map_err(|e| ApplyObjectError::Resolve(format!("{e:?}")))?;
    if !namespaced {
        record_cluster_scoped(cluster, obj, &name);
    }
    let pp = PatchParams::apply(&ctx.config.field_manager).force();
    let live = api
        .patch(&name, &pp, &Patch::Apply(obj))
        .await
        .map_err(ApplyObjectError::Api)?;
    Ok(live.0.metadata.resource_version)
}

/// Deletes one object (foreground propagation) and reports it done once it is gone.
pub async fn delete(ctx: &Context, obj: &Value) -> Result<Option<String>, TaskOutcome> {
    let (api, name, _) = match api_for(ctx, obj).await {
        Ok(x) => x,
        // A kind the server does not serve has no objects to delete.
        Err(TaskOutcome::Fatal { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let gone = || {
        tracing::debug!(object = %describe(obj), "deleted");
        Ok(None)
    };
    let going = || Ok(Some(format!("{} is being deleted", describe(obj))));
    // An object already being deleted is only looked at: re-issuing the DELETE on every pass
    // while its dependents go would be a write for nothing. The watch cache answers when it has
    // the object (a stale copy only costs a DELETE the server answers as usual); absence from
    // the cache may just mean it was created a moment ago, so the server decides that.
    let av = obj["apiVersion"].as_str().unwrap_or("");
    let kind = obj["kind"].as_str().unwrap_or("");
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
    let cached = match ctx.caches.child(av, kind, ns, &name) {
        Some(Some(c)) => Some(c["metadata"]["deletionTimestamp"].is_string()),
        _ => None,
    };
    match cached {
        Some(true) => return going(),
        Some(false) => {}
        None => match api.get_opt(&name).await {
            Ok(None) => return gone(),
            Ok(Some(live)) if live.0.metadata.deletion_timestamp.is_some() => return going(),
            Ok(Some(_)) => {}
            Err(e) => return Err(api_error("get of", obj, e)),
        },
    }
    match api.delete(&name, &DeleteParams::foreground()).await {
        // the server answers with the object while (foreground) deletion is in progress
        Ok(answer) if answer.is_left() => going(),
        Ok(_) => gone(),
        Err(kube::Error::Api(s)) if s.code == 404 => gone(),
        Err(e) => Err(api_error("delete of", obj, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudo_api::{Phase, Plan, Step};

    fn ov() -> OperatorVersion {
        let step = |name: &str, tasks: &[&str]| Step {
            name: name.into(),
            tasks: tasks.iter().map(|t| t.to_string()).collect(),
            ..Step::default()
        };
        let plan = Plan {
            phases: vec![
                Phase {
                    name: "a".into(),
                    steps: vec![step("s1", &["t1", "t2"]), step("s2", &["t3"])],
                    ..Phase::default()
                },
                Phase {
                    name: "b".into(),
                    steps: vec![step("s1", &["t4"])],
                    ..Phase::default()
                },
            ],
            ..Plan::default()
        };
        let mut ov: OperatorVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
            "metadata": {"name": "x"}, "spec": {}
        }))
        .unwrap();
        ov.spec.plans.insert("deploy".into(), plan.clone());
        ov.spec.plans.insert("other".into(), plan);
        ov
    }

    #[test]
    fn single_task_ov_keeps_exactly_one_task_of_one_plan() {
        let sub = single_task_ov(&ov(), "deploy", "a", "s1", "t2");
        assert_eq!(sub.spec.plans.len(), 1);
        let p = &sub.spec.plans["deploy"];
        assert_eq!(p.phases.len(), 1);
        assert_eq!(p.phases[0].name, "a");
        assert_eq!(p.phases[0].steps.len(), 1);
        assert_eq!(p.phases[0].steps[0].name, "s1");
        assert_eq!(p.phases[0].steps[0].tasks, vec!["t2".to_string()]);
    }

    #[test]
    fn single_task_ov_distinguishes_same_step_names_in_other_phases() {
        let sub = single_task_ov(&ov(), "deploy", "b", "s1", "t4");
        let p = &sub.spec.plans["deploy"];
        assert_eq!(p.phases.len(), 1);
        assert_eq!(p.phases[0].name, "b");
        assert_eq!(p.phases[0].steps[0].tasks, vec!["t4".to_string()]);
    }

    #[test]
    fn describe_names_kind_namespace_and_name() {
        let obj = serde_json::json!({"kind": "Service", "metadata": {"name": "s", "namespace": "ns"}});
        assert_eq!(describe(&obj), "Service ns/s");
        let obj = serde_json::json!({"kind": "ClusterRole", "metadata": {"name": "r"}});
        assert_eq!(describe(&obj), "ClusterRole r");
    }
}
