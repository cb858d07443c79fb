//! Rendering a plan for this cluster: the one live render of `kudo_package::live` (the preview of
//! `kubectl kudo … --dry-run` renders with it too), with the manager's reads (discovery, the live
//! dependencies of the dependencies hash as the Instance's identity, retried), sensitive values
//! merged in (and redacted from errors), a sharded manager's bucket label. The pass and drift
//! repair both render through [`render`].

use std::collections::{BTreeMap, HashMap};

use kube::api::{Api, DynamicObject};
use kudo_api::OperatorVersion;
use kudo_engine::TaskCall;
use kudo_kube::discovery::Cache;
use kudo_package::deps_hash::Dependency;
use kudo_package::live::{KindLookup, LiveCluster, LivePlan, OnTaskError, render_live};
use kudo_package::render::{Action, RenderContext, RenderError, RenderedObject};
use serde_json::Value;

use crate::context::Context;
use crate::param_sources::{self, SourcedValues};
use crate::translate::Translation;

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

/// A plan-level render failure (a fatal for the whole plan: invalid parameters, missing plan).
#[derive(Debug, thiserror::Error)]
pub enum PlanRenderError {
    #[error("{0}")]
    Render(#[source] RenderError),
    /// A render error whose text quoted the value of a sensitive parameter, with the value
    /// replaced ([`redact_error`]).
    #[error("{0}")]
    Redacted(String),
}

/// Renders a plan for this cluster with [`kudo_package::live::render_live`]: namespacedness from
/// discovery, the live dependencies of the dependencies hash (read as the Instance's identity),
/// objects of removed API versions translated (one that cannot be fails its task), a sharded
/// manager's bucket label. A template error fails its task only. `Err` is a plan-level fatal
/// (invalid parameters, missing plan).
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
    let bucket = kudo_engine::shard::bucket_label(ctx.shards.count(), &base.namespace, &base.instance_name);
    let reads = ManagerReads {
        discovery: ctx.cluster.discovery.clone(),
        client: ctx.acting_client(),
    };
    let request = LivePlan {
        ov,
        plan,
        context: base,
        bucket,
        on_task_error: OnTaskError::FailTask,
    };
    let mut live = render_live(&reads, request)
        .await
        .map_err(|e| redact_error(PlanRenderError::Render(e), values))?;
    let mut errors: HashMap<TaskKey, String> = live
        .task_errors
        .into_iter()
        .map(|e| {
            (
                TaskKey::new(&e.phase, &e.step, &e.task),
                param_sources::redact(&e.message, values),
            )
        })
        .collect();
    for (i, err) in live.untranslatable {
        let o = &live.objects[i];
        errors
            .entry(TaskKey::new(&o.phase, &o.step, &o.task))
            .or_insert(err);
    }
    let translations = live
        .translations
        .into_iter()
        .map(|t| Translation {
            object: kudo_engine::waiting::describe(&live.objects[t.index].object),
            from: t.from,
            to: t.to,
            notes: t.notes,
        })
        .collect();
    Ok(Rendered {
        transient: live.unreadable.pop(),
        objects: live.objects,
        errors,
        translations,
        unresolved: None,
    })
}

/// The manager's side of a live render: discovery through its cache, dependencies read as the
/// Instance's identity ([`Context::acting_client`]).
#[derive(Clone)]
struct ManagerReads {
    discovery: Cache,
    client: kube::Client,
}

impl LiveCluster for ManagerReads {
    /// Why a dependency could not be read: the render is transient, the tasks that apply wait.
    type Error = String;

    fn cached_namespaced(&self, api_version: &str, kind: &str) -> Option<bool> {
        self.discovery.cached_namespaced(api_version, kind)
    }

    async fn lookup_kind(&self, api_version: &str, kind: &str) -> KindLookup {
        self.discovery.lookup(api_version, kind).await
    }

    /// Three tries 50 and 100 ms apart: a reconcile that gives up waits for the next one, so a
    /// passing API hiccup is worth a short retry here.
    async fn read_dependency(&self, d: &Dependency) -> Result<Option<Value>, String> {
        let resource = kudo_kube::known_resource("", d.kind.as_str());
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &d.namespace, &resource);
        let mut attempt = 0;
        loop {
            match api.get_opt(&d.name).await {
                Ok(Some(obj)) => return serde_json::to_value(&obj).map(Some).map_err(|e| e.to_string()),
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
