//! Rendering a plan against a live cluster: what the manager applies and what a preview
//! (`--dry-run`) shows come from this one function, [`render_live`], so a preview renders exactly
//! as the manager will.
//!
//! The offline render ([`render_plan`]) decides everything but three questions only the cluster
//! answers, which [`LiveCluster`] asks it:
//! * whether a kind is namespaced (discovery): a kind missing from the built-in table is looked
//!   up after a first render, and when discovery disagrees with the table the plan is rendered
//!   again;
//! * the live ConfigMaps and Secrets of the dependencies hash that no task of the plan renders
//!   (the first render records which); when one exists the plan is rendered again with it;
//! * whether an object's API version is still served: a removed version with a known
//!   replacement is translated ([`crate::translate`]).
//!
//! A dependency that cannot be read is not an error here: the caller decides (the manager waits
//! and renders again, a preview fails). How often a read is tried is the implementation's
//! business (the manager retries, a preview asks once).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use kudo_api::OperatorVersion;
use kudo_api::kinds::GvkKey;
use serde_json::Value;

use crate::deps_hash::{self, Dependency};
use crate::enhance::{add_bucket_label, builtin_is_namespaced};
use crate::render::{Action, RenderContext, RenderError, RenderedObject, render_plan};

/// What discovery says about a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KindLookup {
    /// The server serves the kind.
    Served {
        /// Whether its objects live in a namespace.
        namespaced: bool,
    },
    /// The server does not serve it (a CRD not installed, an API version removed).
    NotServed,
    /// The server could not be asked right now.
    Failed,
}

/// What a live render asks the cluster. Cloned into the render's callbacks, so an implementation
/// holds handles (a client, a discovery cache), not borrows.
pub trait LiveCluster: Clone + Send + Sync + 'static {
    /// Why a dependency could not be read.
    type Error: Send;

    /// The namespacedness of a kind known without a request (a discovery cache); `None` when it
    /// must be looked up.
    fn cached_namespaced(&self, api_version: &str, kind: &str) -> Option<bool>;

    /// Asks discovery about a kind.
    fn lookup_kind(&self, api_version: &str, kind: &str) -> impl Future<Output = KindLookup> + Send;

    /// The live object of a dependency of the dependencies hash, as the API returns it; `Ok(None)`
    /// when it does not exist.
    fn read_dependency(
        &self,
        d: &Dependency,
    ) -> impl Future<Output = Result<Option<Value>, Self::Error>> + Send;
}

/// What a template error of one task does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnTaskError {
    /// The render fails with it (a preview: the plan would fail there).
    FailPlan,
    /// Only that task fails ([`LiveRender::task_errors`]); the other tasks' objects are rendered
    /// task by task (the manager: tasks before it still run, as KUDO rendered task by task).
    FailTask,
}

/// One live render's input.
pub struct LivePlan<'a> {
    /// The OperatorVersion.
    pub ov: &'a OperatorVersion,
    /// The plan.
    pub plan: &'a str,
    /// The run (parameters resolved, UIDs); its `is_namespaced` and `live_dependency` are set by
    /// the render.
    pub context: RenderContext,
    /// A sharded manager's bucket label for the objects applied
    /// ([`crate::enhance::add_bucket_label`]).
    pub bucket: Option<String>,
    /// What a task's template error does.
    pub on_task_error: OnTaskError,
}

/// A template error of one task ([`OnTaskError::FailTask`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskError {
    /// The task's phase.
    pub phase: String,
    /// Its step.
    pub step: String,
    /// The task.
    pub task: String,
    /// The error, without the plan/phase/step/task prefix.
    pub message: String,
}

/// An object of a removed API version rendered as its served replacement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Translation {
    /// Its index in [`LiveRender::objects`].
    pub index: usize,
    /// The removed API version.
    pub from: String,
    /// The served one.
    pub to: String,
    /// Adjustments that keep the object's meaning.
    pub notes: Vec<String>,
}

/// The outcome of [`render_live`].
#[derive(Debug)]
pub struct LiveRender<E> {
    /// The objects, in plan order: namespacedness from discovery, dependencies hashed with the
    /// live objects, unserved API versions translated, applied objects labelled with the bucket.
    pub objects: Vec<RenderedObject>,
    /// Tasks whose templates fail, in plan order (always empty with [`OnTaskError::FailPlan`]).
    pub task_errors: Vec<TaskError>,
    /// Dependencies that could not be read, in the order they were read: the objects were hashed
    /// without them.
    pub unreadable: Vec<E>,
    /// The translations made.
    pub translations: Vec<Translation>,
    /// Objects of an unserved API version that cannot be translated without losing a field (index,
    /// why); they are left as rendered.
    pub untranslatable: Vec<(usize, String)>,
}

/// Renders `plan` against the cluster (see the module docs). `Err` is a plan-level failure
/// (invalid parameters, a missing plan) or, with [`OnTaskError::FailPlan`], the first task's
/// template error.
pub async fn render_live<C: LiveCluster>(
    cluster: &C,
    plan: LivePlan<'_>,
) -> Result<LiveRender<C::Error>, RenderError> {
    let asked = Asked::default();
    let first = render_pass(&plan, &recording(&plan.context, cluster, &asked))?;
    let (known, differs) = look_up(cluster, asked.take_misses()).await;
    let (live, unreadable) = read_dependencies(cluster, asked.take_wanted()).await;
    let found = live.values().any(Option::is_some);
    let (mut objects, task_errors) = if differs || found {
        render_pass(&plan, &answered(&plan.context, cluster, known, live))?
    } else {
        first
    };
    let (translations, untranslatable) = translate_unserved(cluster, &mut objects).await;
    if let Some(bucket) = &plan.bucket {
        for o in objects.iter_mut().filter(|o| o.action == Action::Apply) {
            add_bucket_label(&mut o.object, bucket);
        }
    }
    Ok(LiveRender {
        objects,
        task_errors,
        unreadable,
        translations,
        untranslatable,
    })
}

/// What a first render asked that the context could not answer: kinds missing from the cache and
/// dependencies not rendered by the plan.
#[derive(Default)]
struct Asked {
    misses: Arc<Mutex<BTreeSet<GvkKey>>>,
    wanted: Arc<Mutex<BTreeSet<Dependency>>>,
}

impl Asked {
    fn take_misses(&self) -> BTreeSet<GvkKey> {
        std::mem::take(&mut *self.misses.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn take_wanted(&self) -> BTreeSet<Dependency> {
        std::mem::take(&mut *self.wanted.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The first render's context: namespacedness from the cache, else the built-in table (the kind
/// recorded); no live dependency (each one asked for recorded).
fn recording<C: LiveCluster>(base: &RenderContext, cluster: &C, asked: &Asked) -> RenderContext {
    let mut rctx = base.clone();
    let (cluster, misses) = (cluster.clone(), asked.misses.clone());
    rctx.is_namespaced = Some(Arc::new(move |av: &str, kind: &str| {
        cluster.cached_namespaced(av, kind).unwrap_or_else(|| {
            misses
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(GvkKey::new(av, kind));
            builtin_is_namespaced(av, kind)
        })
    }));
    let wanted = asked.wanted.clone();
    rctx.live_dependency = Some(Arc::new(move |d: &Dependency| {
        wanted.lock().unwrap_or_else(|e| e.into_inner()).insert(d.clone());
        None
    }));
    rctx
}

/// The second render's context: the kinds looked up and the dependencies read.
fn answered<C: LiveCluster>(
    base: &RenderContext,
    cluster: &C,
    known: BTreeMap<GvkKey, bool>,
    live: BTreeMap<Dependency, Option<Value>>,
) -> RenderContext {
    let mut rctx = base.clone();
    let cluster = cluster.clone();
    rctx.is_namespaced = Some(Arc::new(move |av: &str, kind: &str| {
        known
            .get(&GvkKey::new(av, kind))
            .copied()
            .or_else(|| cluster.cached_namespaced(av, kind))
            .unwrap_or_else(|| builtin_is_namespaced(av, kind))
    }));
    rctx.live_dependency = Some(Arc::new(move |d: &Dependency| live.get(d).cloned().flatten()));
    rctx
}

/// Looks up the kinds the cache missed; the flag says whether one of them is scoped otherwise
/// than the built-in table said.
async fn look_up<C: LiveCluster>(cluster: &C, kinds: BTreeSet<GvkKey>) -> (BTreeMap<GvkKey, bool>, bool) {
    let mut known = BTreeMap::new();
    let mut differs = false;
    for key in kinds {
        if let KindLookup::Served { namespaced } = cluster.lookup_kind(&key.api_version, &key.kind).await {
            differs |= namespaced != builtin_is_namespaced(&key.api_version, &key.kind);
            known.insert(key, namespaced);
        }
    }
    (known, differs)
}

/// Reads the dependencies, as the dependencies hash takes them; the unreadable ones are left out.
async fn read_dependencies<C: LiveCluster>(
    cluster: &C,
    wanted: BTreeSet<Dependency>,
) -> (BTreeMap<Dependency, Option<Value>>, Vec<C::Error>) {
    let mut live = BTreeMap::new();
    let mut unreadable = Vec::new();
    for d in wanted {
        match cluster.read_dependency(&d).await {
            Ok(found) => {
                live.insert(d, found.map(deps_hash::for_hash));
            }
            Err(e) => unreadable.push(e),
        }
    }
    (live, unreadable)
}

/// Translates every object whose API version has a known replacement and is not served. An
/// object whose version cannot be looked up right now is left as is: applying it reports that.
async fn translate_unserved<C: LiveCluster>(
    cluster: &C,
    objects: &mut [RenderedObject],
) -> (Vec<Translation>, Vec<(usize, String)>) {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for (index, o) in objects.iter_mut().enumerate() {
        let av = o.object["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = o.object["kind"].as_str().unwrap_or_default().to_string();
        if crate::translate::mapping(&av, &kind).is_none()
            || cluster.lookup_kind(&av, &kind).await != KindLookup::NotServed
        {
            continue;
        }
        match crate::translate::translate(&o.object) {
            Ok(t) => {
                done.push(Translation {
                    index,
                    from: t.from,
                    to: t.to,
                    notes: t.notes,
                });
                o.object = t.object;
            }
            Err(e) => failed.push((index, e.to_string())),
        }
    }
    (done, failed)
}

/// One render of the plan with `rctx`; with [`OnTaskError::FailTask`] a task's template error
/// renders the plan again task by task, so that only the broken tasks fail.
fn render_pass(
    plan: &LivePlan<'_>,
    rctx: &RenderContext,
) -> Result<(Vec<RenderedObject>, Vec<TaskError>), RenderError> {
    match render_plan(plan.ov, plan.plan, rctx) {
        Ok(objects) => Ok((objects, Vec::new())),
        Err(RenderError::Task { .. }) if plan.on_task_error == OnTaskError::FailTask => {
            render_task_by_task(plan.ov, plan.plan, rctx)
        }
        Err(e) => Err(e),
    }
}

fn render_task_by_task(
    ov: &OperatorVersion,
    plan: &str,
    rctx: &RenderContext,
) -> Result<(Vec<RenderedObject>, Vec<TaskError>), RenderError> {
    let p = ov
        .spec
        .plans
        .get(plan)
        .ok_or_else(|| RenderError::NoPlan(plan.to_string()))?;
    let (mut objects, mut errors) = (Vec::new(), Vec::new());
    for ph in &p.phases {
        for st in &ph.steps {
            for t in &st.tasks {
                let sub = single_task_ov(ov, plan, &ph.name, &st.name, t);
                match render_plan(&sub, plan, rctx) {
                    Ok(objs) => objects.extend(objs),
                    Err(RenderError::Task { message, .. }) => errors.push(TaskError {
                        phase: ph.name.clone(),
                        step: st.name.clone(),
                        task: t.clone(),
                        message,
                    }),
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok((objects, errors))
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

    /// A cluster whose answers are fixed: `Widget` is cluster-scoped, `policy/v1beta1` is not
    /// served, ConfigMap `ns/ext` exists, Secret `ns/gone` cannot be read.
    #[derive(Clone)]
    struct Fixed;

    impl LiveCluster for Fixed {
        type Error = String;

        fn cached_namespaced(&self, _: &str, _: &str) -> Option<bool> {
            None
        }

        async fn lookup_kind(&self, api_version: &str, kind: &str) -> KindLookup {
            match (api_version, kind) {
                ("example.com/v1", "Widget") => KindLookup::Served { namespaced: false },
                ("policy/v1beta1", _) => KindLookup::NotServed,
                _ => KindLookup::Served { namespaced: true },
            }
        }

        async fn read_dependency(&self, d: &Dependency) -> Result<Option<Value>, String> {
            match d.name.as_str() {
                "ext" => Ok(Some(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "ext", "namespace": "ns"}, "data": {"a": "1"}}))),
                _ => Err(format!("cannot read {}", d.name)),
            }
        }
    }

    /// Polls a future whose every await is ready at once (the [`Fixed`] cluster's).
    fn ready<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }

    fn live_ov() -> OperatorVersion {
        let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    \
                      spec:\n      volumes:\n      - configMap: {name: ext}\n      - secret: {secretName: gone}\n";
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion", "metadata": {"name": "x"},
            "spec": {
                "templates": {
                    "deploy.yaml": deploy,
                    "widget.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
                    "pdb.yaml": "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata: {name: p}\nspec: {maxUnavailable: 1}\n",
                },
                "tasks": [{"name": "app", "kind": "Apply",
                           "spec": {"resources": ["deploy.yaml", "widget.yaml", "pdb.yaml"]}}],
                "plans": {"deploy": {"phases": [{"name": "p", "steps": [{"name": "s", "tasks": ["app"]}]}]}},
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_live_render_asks_the_cluster_what_the_offline_render_cannot_know() {
        let ov = live_ov();
        let plan = LivePlan {
            ov: &ov,
            plan: "deploy",
            context: RenderContext::offline("i", "ns", BTreeMap::new()),
            bucket: Some("7".into()),
            on_task_error: OnTaskError::FailPlan,
        };
        let live = ready(render_live(&Fixed, plan)).unwrap();
        let [deploy, widget, pdb] = live.objects.as_slice() else {
            panic!("{:?}", live.objects)
        };
        // Discovery's scope wins over the built-in table (which takes an unknown kind as namespaced).
        assert!(
            widget.object["metadata"].get("namespace").is_none(),
            "{}",
            widget.object
        );
        assert_eq!(deploy.object["metadata"]["namespace"], "ns");
        // The live ConfigMap is hashed; the unreadable Secret is reported.
        let hash = &deploy.object["spec"]["template"]["metadata"]["annotations"]
            [deps_hash::DEPENDENCIES_HASH_ANNOTATION];
        assert!(hash.is_string(), "{}", deploy.object);
        assert_eq!(live.unreadable, ["cannot read gone"]);
        // The unserved version is translated, and the applied objects carry the bucket.
        assert_eq!(pdb.object["apiVersion"], "policy/v1");
        assert_eq!(live.translations.len(), 1);
        assert_eq!(
            (live.translations[0].index, live.translations[0].to.as_str()),
            (2, "policy/v1")
        );
        assert!(live.untranslatable.is_empty());
        assert_eq!(widget.object["metadata"]["labels"]["kudo.dev/bucket"], "7");
    }

    #[test]
    fn a_template_error_fails_the_plan_or_only_its_task() {
        let mut ov = live_ov();
        ov.spec
            .templates
            .insert("bad.yaml".into(), "{{ fail \"no\" }}".into());
        ov.spec.tasks.push(
            serde_json::from_value(serde_json::json!(
            {"name": "bad", "kind": "Apply", "spec": {"resources": ["bad.yaml"]}}))
            .unwrap(),
        );
        ov.spec.plans.get_mut("deploy").unwrap().phases[0].steps[0]
            .tasks
            .push("bad".into());
        let plan = |on_task_error| LivePlan {
            ov: &ov,
            plan: "deploy",
            context: RenderContext::offline("i", "ns", BTreeMap::new()),
            bucket: None,
            on_task_error,
        };
        let e = ready(render_live(&Fixed, plan(OnTaskError::FailPlan))).unwrap_err();
        assert!(e.to_string().starts_with("deploy.p.s.bad: "), "{e}");
        let live = ready(render_live(&Fixed, plan(OnTaskError::FailTask))).unwrap();
        assert_eq!(live.objects.len(), 3, "the other task's objects are rendered");
        assert_eq!(live.task_errors.len(), 1);
        assert_eq!(live.task_errors[0].task, "bad");
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
