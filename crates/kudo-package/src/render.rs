//! Rendering a plan into the exact objects the controller applies or deletes, step by step in plan
//! order — the same code path for `package render` (offline) and the controller.
//!
//! Works on the cluster form ([`kudo_api::OperatorVersion`]) so the controller needs nothing else.
//! Objects come out in declaration order: the task's resources in list order, then the documents
//! of each file in order (KUDO applied files in random order; we do not).

use std::collections::BTreeMap;
use std::sync::Arc;

use kudo_api::{OperatorVersion, Task, TaskKind};
use kudo_template::{FuncEnv, Template, Value, kudo_funcs};
use serde_json::json;

use crate::enhance::{self, Metadata, Owner};
use crate::params::{parse_bool, template_params};

/// What the controller does with a rendered object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create or update the object (Apply tasks, and Toggle tasks whose parameter is true).
    Apply,
    /// Delete the object (Delete tasks, and Toggle tasks whose parameter is false).
    Delete,
    /// The generator Pod of a Pipe task (applied, then its files copied out and the Pod deleted).
    PipePod,
    /// A child Instance of a KudoOperator task.
    ChildInstance,
}

impl Action {
    /// The action's name in `package render` output (`apply`, `delete`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Apply => "apply",
            Action::Delete => "delete",
            Action::PipePod => "pipe-pod",
            Action::ChildInstance => "child-instance",
        }
    }
}

/// One rendered, enhanced object and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderedObject {
    /// The plan being rendered.
    pub plan: String,
    /// The phase of the plan the object's step belongs to.
    pub phase: String,
    /// The step whose task produced the object.
    pub step: String,
    /// The task, as named in `operator.yaml`, whose resource the object was rendered from.
    pub task: String,
    /// Template key the object was rendered from.
    pub template: String,
    /// What the controller does with the object.
    pub action: Action,
    /// The rendered object after enhancement (labels, annotations, namespace, owner).
    pub object: serde_json::Value,
}

/// Decides whether a kind (apiVersion, kind) is namespaced; the controller plugs in discovery.
pub type NamespacedFn = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// The live version of a dependency (ConfigMap/Secret) of a pod template, for the dependencies
/// hash: `None` when it does not exist. See [`crate::deps_hash`].
pub type DependencyFn = Arc<dyn Fn(&crate::deps_hash::Dependency) -> Option<serde_json::Value> + Send + Sync>;

/// The run a render belongs to.
#[derive(Clone)]
pub struct RenderContext {
    /// Name of the Instance the plan runs for (`.Name` in templates).
    pub instance_name: String,
    /// Namespace of the Instance (`.Namespace` in templates), into which objects are placed.
    pub namespace: String,
    /// Instance parameter values (undeclared names are ignored, as in KUDO).
    pub parameters: BTreeMap<String, String>,
    /// The plan execution UID (annotation, and the seed of random functions).
    pub plan_uid: String,
    /// The Instance UID for ownerReferences.
    pub instance_uid: String,
    /// Namespacedness of a kind; `None` uses the built-in table.
    pub is_namespaced: Option<NamespacedFn>,
    /// Live dependencies for the dependencies hash (the controller reads them from the cluster);
    /// `None` offline. A dependency rendered by the same task, or applied by an earlier task of
    /// the plan, is taken from the render itself first.
    pub live_dependency: Option<DependencyFn>,
    /// `(from, to)` revisions when the run is a `kubectl kudo rollback` (kudo-rs extension):
    /// templates see them as `.Rollback.FromRevision` / `.Rollback.ToRevision`, both 0 otherwise.
    pub rollback: Option<(u64, u64)>,
    /// Parsed documents of texts rendered before (the controller keeps one for all its renders);
    /// `None` parses every time.
    pub parse_memo: Option<Arc<crate::split::ParseMemo>>,
}

impl std::fmt::Debug for RenderContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderContext")
            .field("instance_name", &self.instance_name)
            .field("namespace", &self.namespace)
            .field("parameters", &self.parameters)
            .field("plan_uid", &self.plan_uid)
            .field("instance_uid", &self.instance_uid)
            .field("is_namespaced", &self.is_namespaced.is_some())
            .field("live_dependency", &self.live_dependency.is_some())
            .field("rollback", &self.rollback)
            .field("parse_memo", &self.parse_memo.is_some())
            .finish()
    }
}

impl RenderContext {
    /// The objects of rendered template `file`, through the memo when there is one.
    fn parse(
        &self,
        file: &str,
        text: &str,
    ) -> Result<Vec<crate::split::Document>, crate::split::ObjectsError> {
        match &self.parse_memo {
            Some(memo) => memo.parse(file, text),
            None => crate::split::parse_objects(file, text),
        }
    }

    /// An offline context: placeholder UIDs, built-in namespacedness.
    pub fn offline(
        instance_name: &str,
        namespace: &str,
        parameters: BTreeMap<String, String>,
    ) -> RenderContext {
        RenderContext {
            instance_name: instance_name.into(),
            namespace: namespace.into(),
            parameters,
            plan_uid: enhance::OFFLINE_UID.into(),
            instance_uid: enhance::OFFLINE_UID.into(),
            is_namespaced: None,
            live_dependency: None,
            rollback: None,
            parse_memo: None,
        }
    }
}

/// A render failure, worded like KUDO's fatal task errors and naming plan/phase/step/task.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The OperatorVersion has no plan of that name.
    #[error("plan {0:?} does not exist")]
    NoPlan(String),
    /// The parameter values do not pass validation (one message per problem).
    #[error("invalid parameters: {}", .0.join("; "))]
    InvalidParams(Vec<String>),
    /// The plan's `schedule:` (kudo-rs extension) does not render.
    #[error("schedule of plan {plan:?}: {message}")]
    Schedule {
        /// The plan whose `schedule:` failed.
        plan: String,
        /// What went wrong.
        message: String,
    },
    /// A template outside any task (an autopilot rule's field, named by `field`).
    #[error("{field}: {message}")]
    Field {
        /// Where the template is, e.g. the autopilot rule's field.
        field: String,
        /// What went wrong.
        message: String,
    },
    /// Rendering one task of a step failed (a template error, output that is not objects, a bad
    /// Toggle parameter, an unknown task kind, …).
    #[error("{plan}.{phase}.{step}.{task}: {message}")]
    Task {
        /// The plan being rendered.
        plan: String,
        /// The phase of the failing step.
        phase: String,
        /// The step of the failing task.
        step: String,
        /// The task as named in `operator.yaml`.
        task: String,
        /// What went wrong.
        message: String,
    },
}

/// Pipe artifact / pod names: each segment lower-cased with everything but `[a-z0-9]` removed,
/// joined with `.`.
pub fn pipe_artifact_name(segments: &[&str]) -> String {
    segments
        .iter()
        .map(|s| {
            s.to_lowercase()
                .chars()
                .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// FNV-1a of the plan UID and template: a stable seed per plan run and file.
fn seed(plan_uid: &str, template: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in plan_uid.bytes().chain([0]).chain(template.bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Parses OperatorVersion templates on demand, once each.
struct Templates<'a> {
    ov: &'a OperatorVersion,
    parsed: BTreeMap<String, Template>,
}

impl Templates<'_> {
    fn render(&mut self, name: &str, data: &Value, plan_uid: &str) -> Result<String, String> {
        if !self.parsed.contains_key(name) {
            let text = self
                .ov
                .spec
                .templates
                .get(name)
                .ok_or_else(|| format!("template {name:?} is not defined"))?;
            let t = Template::parse(name, text, &kudo_funcs())
                .map_err(|e| format!("error expanding template {name}: {e}"))?;
            self.parsed.insert(name.to_string(), t);
        }
        let t = &self.parsed[name];
        let mut env = FuncEnv::with_seed(seed(plan_uid, name));
        t.execute(data, &mut env)
            .map_err(|e| format!("error expanding template {name}: {e}"))
    }
}

/// Renders one template string outside any task (an autopilot rule's resource fields and
/// `setParameters` values) with the data a task template of `plan` sees (`.Name`, `.Namespace`,
/// `.Params`, …; no pipes, empty phase and step). `what` names the field in errors.
pub fn render_string(
    ov: &OperatorVersion,
    plan: &str,
    ctx: &RenderContext,
    what: &str,
    text: &str,
) -> Result<String, RenderError> {
    if !text.contains("{{") {
        return Ok(text.to_string());
    }
    let defs = &ov.spec.parameters;
    let fail = |message: String| RenderError::Field {
        field: what.to_string(),
        message,
    };
    let params = template_params(defs, &ctx.parameters).map_err(|e| fail(e.to_string()))?;
    let pipes = BTreeMap::new();
    let data = template_data(
        ov,
        ctx,
        &StepCtx {
            plan,
            phase: "",
            step: "",
            params: &params,
            pipes: &pipes,
        },
    );
    let t = Template::parse(what, text, &kudo_funcs()).map_err(|e| fail(e.to_string()))?;
    let mut env = FuncEnv::with_seed(seed(&ctx.plan_uid, what));
    t.execute(&data, &mut env).map_err(|e| fail(e.to_string()))
}

/// Validates `ctx.parameters` against the OperatorVersion (required, type, enum with KUDO's
/// wording; then the schema keywords and the package-level rules). Returns all errors.
pub fn validate_parameters(ov: &OperatorVersion, values: &BTreeMap<String, String>) -> Vec<String> {
    let spec = &ov.spec;
    crate::params::validate_all(&spec.parameters, &spec.parameter_validations, values)
}

/// Renders a plan's `schedule:` (kudo-rs extension) with the data every template of the plan sees
/// (`.Params`, `.Name`, `.Namespace`, …; phase and step names empty). `Ok(None)` when the plan has
/// no `schedule:`; a blank result means "not scheduled" to the caller. Errors name the plan.
pub fn render_schedule(
    ov: &OperatorVersion,
    plan_name: &str,
    ctx: &RenderContext,
) -> Result<Option<String>, RenderError> {
    let plan = ov
        .spec
        .plans
        .get(plan_name)
        .ok_or_else(|| RenderError::NoPlan(plan_name.to_string()))?;
    let Some(text) = plan.schedule.as_deref() else {
        return Ok(None);
    };
    let fail = |message: String| RenderError::Schedule {
        plan: plan_name.to_string(),
        message,
    };
    let defs = &ov.spec.parameters;
    let params = template_params(defs, &ctx.parameters).map_err(|e| fail(e.to_string()))?;
    let pipes = BTreeMap::new();
    let s = StepCtx {
        plan: plan_name,
        phase: "",
        step: "",
        params: &params,
        pipes: &pipes,
    };
    let data = template_data(ov, ctx, &s);
    kudo_template::render(&format!("{plan_name}.schedule"), text, &data)
        .map(Some)
        .map_err(|e| fail(e.to_string()))
}

/// Renders every step of `plan_name`, in plan order. Parameters are validated first.
///
/// ```
/// use std::collections::BTreeMap;
/// use kudo_package::render::{RenderContext, render_plan};
/// use kudo_package::resources::{ConvertOptions, to_resources};
///
/// let files = BTreeMap::from([
///     ("operator.yaml".to_string(), br#"
/// apiVersion: kudo.dev/v1beta1
/// name: web
/// operatorVersion: 0.1.0
/// tasks:
///   - name: app
///     kind: Apply
///     spec: {resources: [cm.yaml]}
/// plans:
///   deploy:
///     strategy: serial
///     phases:
///       - {name: main, strategy: serial, steps: [{name: everything, tasks: [app]}]}
/// "#.to_vec()),
///     ("params.yaml".to_string(), b"parameters:\n  - {name: GREETING, default: hello}\n".to_vec()),
///     ("templates/cm.yaml".to_string(), br#"
/// apiVersion: v1
/// kind: ConfigMap
/// metadata: {name: {{ .Name }}-greeting}
/// data: {text: {{ .Params.GREETING | quote }}}
/// "#.to_vec()),
/// ]);
/// let package = kudo_package::reader::from_files(files, "web")?;
/// let resources = to_resources(&package, &ConvertOptions::default())?;
/// let values = BTreeMap::from([("GREETING".to_string(), "hi".to_string())]);
/// let ctx = RenderContext::offline("web-instance", "default", values);
/// let objects = render_plan(&resources.operator_version, "deploy", &ctx)?;
/// assert_eq!(objects.len(), 1);
/// assert_eq!(objects[0].step, "everything");
/// assert_eq!(objects[0].object["metadata"]["name"], "web-instance-greeting");
/// assert_eq!(objects[0].object["data"]["text"], "hi");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn render_plan(
    ov: &OperatorVersion,
    plan_name: &str,
    ctx: &RenderContext,
) -> Result<Vec<RenderedObject>, RenderError> {
    let plan = ov
        .spec
        .plans
        .get(plan_name)
        .ok_or_else(|| RenderError::NoPlan(plan_name.to_string()))?;
    let errs = validate_parameters(ov, &ctx.parameters);
    if !errs.is_empty() {
        return Err(RenderError::InvalidParams(errs));
    }
    let defs = &ov.spec.parameters;
    let params = template_params(defs, &ctx.parameters)
        .map_err(|e| RenderError::InvalidParams(vec![e.to_string()]))?;
    let pipes = crate::tmpl::pipes_for_plan(&ctx.instance_name, plan_name, plan, &ov.spec.tasks);
    let mut templates = Templates {
        ov,
        parsed: BTreeMap::new(),
    };
    let mut out = Vec::new();
    for phase in &plan.phases {
        for step in &phase.steps {
            for tname in &step.tasks {
                let fail = |message: String| RenderError::Task {
                    plan: plan_name.to_string(),
                    phase: phase.name.clone(),
                    step: step.name.clone(),
                    task: tname.clone(),
                    message,
                };
                let task = ov
                    .spec
                    .tasks
                    .iter()
                    .find(|t| &t.name == tname)
                    .ok_or_else(|| fail("unknown task".into()))?;
                let step_ctx = StepCtx {
                    plan: plan_name,
                    phase: &phase.name,
                    step: &step.name,
                    params: &params,
                    pipes: &pipes,
                };
                let first = out.len();
                render_task(ov, ctx, &step_ctx, task, &mut templates, &mut out).map_err(fail)?;
                add_dependencies_hashes(ctx, &mut out, first).map_err(fail)?;
            }
        }
    }
    Ok(out)
}

/// KUDO's dependencies hash on the applied objects of the task rendered at `out[first..]`: a
/// ConfigMap/Secret of the same task first, then one applied by an earlier task of this plan (what
/// KUDO found in its last-applied-configuration), then the live one ([`RenderContext::live_dependency`]).
fn add_dependencies_hashes(
    ctx: &RenderContext,
    out: &mut [RenderedObject],
    first: usize,
) -> Result<(), String> {
    let (earlier, task) = out.split_at_mut(first);
    let applied = |o: &&RenderedObject| o.action == Action::Apply;
    let mut objs: Vec<serde_json::Value> = task.iter().filter(applied).map(|o| o.object.clone()).collect();
    if !objs.iter().any(|o| !crate::deps_hash::dependencies(o).is_empty()) {
        return Ok(());
    }
    let mut external = |d: &crate::deps_hash::Dependency| {
        earlier
            .iter()
            .rev()
            .filter(applied)
            .find(|o| crate::deps_hash::is_dependency(&o.object, d))
            .map(|o| o.object.clone())
            .or_else(|| ctx.live_dependency.as_ref().and_then(|f| f(d)))
    };
    crate::deps_hash::add_hashes(&mut objs, &mut external).map_err(|e| e.to_string())?;
    for (slot, obj) in task.iter_mut().filter(|o| o.action == Action::Apply).zip(objs) {
        slot.object = obj;
    }
    Ok(())
}

struct StepCtx<'a> {
    plan: &'a str,
    phase: &'a str,
    step: &'a str,
    params: &'a BTreeMap<String, Value>,
    pipes: &'a BTreeMap<String, String>,
}

fn template_data(ov: &OperatorVersion, ctx: &RenderContext, s: &StepCtx) -> Value {
    let mut m = BTreeMap::new();
    m.insert("Name".into(), Value::str(ctx.instance_name.as_str()));
    m.insert("Namespace".into(), Value::str(ctx.namespace.as_str()));
    m.insert("OperatorName".into(), Value::str(ov.spec.operator.name.as_str()));
    m.insert("OperatorVersion".into(), Value::str(ov.spec.version.as_str()));
    m.insert("AppVersion".into(), Value::str(ov.spec.app_version.as_str()));
    m.insert("PlanName".into(), Value::str(s.plan));
    m.insert("PhaseName".into(), Value::str(s.phase));
    m.insert("StepName".into(), Value::str(s.step));
    // A fresh map per render: Sprig's `set` mutates maps in place and must not leak between files.
    m.insert("Params".into(), Value::map(s.params.clone()));
    m.insert(
        "Pipes".into(),
        Value::map(
            s.pipes
                .iter()
                .map(|(k, v)| (k.clone(), Value::str(v.as_str())))
                .collect(),
        ),
    );
    let (from, to) = ctx.rollback.unwrap_or((0, 0));
    let revision = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
    m.insert(
        "Rollback".into(),
        Value::map(BTreeMap::from([
            ("FromRevision".to_string(), revision(from)),
            ("ToRevision".to_string(), revision(to)),
        ])),
    );
    Value::map(m)
}

fn render_task(
    ov: &OperatorVersion,
    ctx: &RenderContext,
    s: &StepCtx,
    task: &Task,
    templates: &mut Templates,
    out: &mut Vec<RenderedObject>,
) -> Result<(), String> {
    let meta = Metadata {
        instance_name: ctx.instance_name.clone(),
        instance_namespace: ctx.namespace.clone(),
        operator_name: ov.spec.operator.name.clone(),
        operator_version: ov.spec.version.clone(),
        plan: s.plan.to_string(),
        phase: s.phase.to_string(),
        step: s.step.to_string(),
        plan_uid: ctx.plan_uid.clone(),
        owner: Some(Owner {
            api_version: kudo_api::API_VERSION.into(),
            kind: "Instance".into(),
            name: ctx.instance_name.clone(),
            uid: ctx.instance_uid.clone(),
        }),
    };
    let namespaced = |obj: &serde_json::Value| {
        let av = obj["apiVersion"].as_str().unwrap_or("");
        let k = obj["kind"].as_str().unwrap_or("");
        match &ctx.is_namespaced {
            Some(f) => f(av, k),
            None => enhance::builtin_is_namespaced(av, k),
        }
    };
    let mut push = |template: &str, action: Action, object: serde_json::Value| {
        out.push(RenderedObject {
            plan: s.plan.into(),
            phase: s.phase.into(),
            step: s.step.into(),
            task: task.name.clone(),
            template: template.into(),
            action,
            object,
        })
    };
    let data = template_data(ov, ctx, s);
    let resources =
        |action: Action, templates: &mut Templates, push: &mut dyn FnMut(&str, Action, serde_json::Value)| {
            for r in &task.spec.resources {
                let text = templates.render(r, &data, &ctx.plan_uid)?;
                for doc in ctx.parse(r, &text).map_err(|e| e.to_string())? {
                    let mut obj = doc.object;
                    let ns = namespaced(&obj);
                    enhance::enhance(&mut obj, &meta, ns);
                    push(r, action, obj);
                }
            }
            Ok::<(), String>(())
        };
    match &task.kind {
        TaskKind::Apply => resources(Action::Apply, templates, &mut push),
        TaskKind::Delete => resources(Action::Delete, templates, &mut push),
        TaskKind::Toggle => {
            let p = &task.spec.parameter;
            let Some(v) = s.params.get(p) else {
                return Err(format!("toggle task parameter {p:?} is not defined"));
            };
            let Some(sv) = v.as_str() else {
                return Err(format!("toggle task parameter {p:?} is not a string value"));
            };
            match parse_bool(sv) {
                Some(true) => resources(Action::Apply, templates, &mut push),
                Some(false) => resources(Action::Delete, templates, &mut push),
                None => Err(format!(
                    "toggle task parameter {p:?} has value {sv:?} which is not a boolean"
                )),
            }
        }
        TaskKind::Pipe => {
            let text = templates.render(&task.spec.pod, &data, &ctx.plan_uid)?;
            let docs = ctx.parse(&task.spec.pod, &text).map_err(|e| e.to_string())?;
            let [doc] = docs.as_slice() else {
                return Err(format!(
                    "pipe pod template {} must render exactly one Pod",
                    task.spec.pod
                ));
            };
            let mut pod = doc.object.clone();
            if pod["kind"] != "Pod" {
                return Err(format!("pipe pod template {} must render a Pod", task.spec.pod));
            }
            let name = format!(
                "{}.pipepod",
                pipe_artifact_name(&[&ctx.instance_name, s.plan, s.phase, s.step, &task.name])
            );
            pod["metadata"]["name"] = json!(name);
            pod["metadata"]["annotations"]["kudo.dev/pipepod"] = json!("true");
            let ns = namespaced(&pod);
            enhance::enhance(&mut pod, &meta, ns);
            push(&task.spec.pod, Action::PipePod, pod);
            Ok(())
        }
        TaskKind::KudoOperator => {
            let sp = &task.spec;
            let mut params = serde_json::Map::new();
            if !sp.parameter_file.is_empty() {
                let text = templates.render(&sp.parameter_file, &data, &ctx.plan_uid)?;
                let v =
                    crate::params::parse_param_file(&sp.parameter_file, &text).map_err(|e| e.to_string())?;
                for (k, val) in v {
                    params.insert(k, json!(val));
                }
            }
            let child = if sp.instance_name.is_empty() {
                format!("{}-{}", ctx.instance_name, sp.package)
            } else {
                sp.instance_name.clone()
            };
            let ov_name = sp.child_operator_version_name();
            let obj = json!({
                "apiVersion": kudo_api::API_VERSION,
                "kind": "Instance",
                "metadata": {
                    "name": child,
                    "namespace": ctx.namespace,
                    // heritage + instance: the parent's controller watches its children by these
                    "labels": {
                        "kudo.dev/operator": sp.package,
                        "heritage": "kudo",
                        "kudo.dev/instance": ctx.instance_name,
                    },
                    "ownerReferences": [{
                        "apiVersion": kudo_api::API_VERSION, "kind": "Instance",
                        "name": ctx.instance_name, "uid": ctx.instance_uid,
                        "blockOwnerDeletion": true
                    }]
                },
                "spec": {"operatorVersion": {"name": ov_name}, "parameters": params}
            });
            push(&sp.parameter_file, Action::ChildInstance, obj);
            Ok(())
        }
        TaskKind::Dummy => Ok(()),
        TaskKind::Unknown(other) => Err(format!("unknown task kind {other}")),
    }
}
