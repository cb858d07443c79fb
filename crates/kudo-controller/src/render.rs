//! Rendering a plan for this cluster: namespacedness from discovery, the live dependencies of the
//! dependencies hash, sensitive values merged in (and redacted from errors), removed API versions
//! translated, a sharded manager's bucket label added. The pass and drift repair both render
//! through [`render`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use kube::api::{Api, DynamicObject};
use kudo_api::OperatorVersion;
use kudo_api::kinds::GvkKey;
use kudo_engine::TaskCall;
use kudo_kube::discovery::Resolved;
use kudo_package::deps_hash::{self, Dependency};
use kudo_package::enhance::builtin_is_namespaced;
use kudo_package::render::{Action, RenderContext, RenderError, RenderedObject, render_plan};
use serde_json::Value;

use crate::context::Context;
use crate::param_sources::{self, SourcedValues};
use crate::translate::{self, Translation};

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
    translations: Vec<Translation>,
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

    /// Why nothing was rendered: a parameter source could not be read (every task waits).
    pub(crate) fn unresolved(&self) -> Option<&str> {
        self.unresolved.as_deref()
    }

    /// Why the objects must not be applied yet: a dependency of the dependencies hash was
    /// unreadable (tasks that apply objects wait).
    pub(crate) fn unreadable_dependency(&self) -> Option<&str> {
        self.transient.as_deref()
    }

    /// The translations of removed API versions this render made.
    pub fn translations(&self) -> &[Translation] {
        &self.translations
    }

    /// Child Instances of KudoOperator tasks reference sensitive values from their Secret
    /// instead of carrying them (crate::param_sources::source_child_parameters); a child that
    /// cannot fails its task.
    pub fn source_child_parameters(
        &mut self,
        sources: &BTreeMap<String, kudo_api::ParameterSource>,
        values: &SourcedValues,
    ) {
        if values.is_empty() {
            return;
        }
        for o in &mut self.objects {
            if o.action != Action::ChildInstance {
                continue;
            }
            if let Err(e) = param_sources::source_child_parameters(&mut o.object, sources, values) {
                self.errors
                    .entry(TaskKey::new(&o.phase, &o.step, &o.task))
                    .or_insert(e.to_string());
            }
        }
    }

    /// The objects of the task `call` runs, in declaration order.
    pub(crate) fn for_task<'r>(
        &'r self,
        call: &'r TaskCall<'_>,
    ) -> impl Iterator<Item = &'r RenderedObject> + 'r {
        self.objects
            .iter()
            .filter(move |o| o.phase == call.phase && o.step == call.step && o.task == call.task_name)
    }

    /// The template error of the task `call` runs, if it has one.
    pub(crate) fn error(&self, call: &TaskCall<'_>) -> Option<&str> {
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
    /// replaced ([`redact_error`]).
    #[error("{0}")]
    Redacted(String),
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
    sourced: &param_sources::Sourced,
) -> Result<Rendered, PlanRenderError> {
    let values = match sourced {
        Ok(v) => v,
        Err(msg) => {
            return Ok(Rendered {
                objects: Vec::new(),
                errors: HashMap::new(),
                transient: None,
                translations: Vec::new(),
                unresolved: Some(msg.to_string()),
            });
        }
    };
    base.parameters = param_sources::merged(&base.parameters, values);
    let (ns, instance) = (base.namespace.clone(), base.instance_name.clone());
    let mut rendered = render_namespaced(ctx, ov, plan, base)
        .await
        .map_err(|e| redact_error(e, values))?;
    for e in rendered.errors.values_mut() {
        *e = param_sources::redact(e, values);
    }
    let (done, failed) = translate::translate_unserved(&ctx.cluster.discovery, &mut rendered.objects).await;
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
    label_bucket(ctx.shards.count(), &ns, &instance, applied.map(|o| &mut o.object));
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
        let cache = ctx.cluster.discovery.clone();
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
        if let Ok(Resolved::Found { namespaced, .. }) =
            ctx.cluster.discovery.resolve(&api_version, &kind).await
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

/// [`param_sources::redact`] for a plan render error: the error itself when it quotes no sourced
/// value.
fn redact_error(e: PlanRenderError, values: &SourcedValues) -> PlanRenderError {
    let text = e.to_string();
    let red = param_sources::redact(&text, values);
    if red == text {
        e
    } else {
        PlanRenderError::Redacted(red)
    }
}

/// Labels `objects` (rendered for Instance `namespace/name`) with the Instance's bucket, for a
/// sharded manager ([`kudo_package::enhance::add_bucket_label`]): its replicas watch only their
/// own buckets, and the Pods (most of what they receive) get the label from the pod template.
/// Objects the label does not reach (a Job's pods, PVCs of volumeClaimTemplates) come through
/// the unlabelled view. Drift repair ignores the template label (crate::drift), so a
/// workload applied before it gets it with its next plan run instead of a restart.
fn label_bucket<'a>(shards: u32, namespace: &str, name: &str, objects: impl Iterator<Item = &'a mut Value>) {
    let Some(bucket) = kudo_engine::shard::bucket_label(shards, namespace, name) else {
        return;
    };
    for o in objects {
        kudo_package::enhance::add_bucket_label(o, &bucket);
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
}
