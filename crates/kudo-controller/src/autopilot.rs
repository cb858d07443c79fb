//! Autopilot rules (plan field `when`, kudo-rs extension, issue 16): the manager's side.
//!
//! The objects rules look at are **watched, not polled**: [`Watches`] keeps one watch per
//! (apiVersion, kind, namespace) that some rule references, started the first time a reconcile
//! evaluates such a rule, and a change of a watched object wakes every Instance whose rules name
//! it (by the rendered resource names). A reconcile then evaluates the rules
//! ([`evaluate_rules`]): it renders the resource and `setParameters` templates with the
//! Instance's parameters, reads the object, evaluates the CEL condition and lets
//! [`kudo_engine::autopilot::decide_rule`] decide. Rule state lives in `status.autopilot`, so a
//! restarted manager neither re-fires within a cooldown nor restarts a `for` window. The timed
//! requeue at the end of a `for` window or cooldown is the only timer.
//!
//! * A missing object makes the condition false.
//! * An evaluation error (no such key, wrong type, unknown kind, a template that fails) makes it
//!   false too, with a Warning Event `AutopilotRuleError` once per distinct error (the last one
//!   is kept in the rule's `lastError`).
//! * Sensitive parameters (`sensitive: true` or given through `parameterSources`) are not in the
//!   rules' `params` nor in their template data, so no rule can copy one into an Event.
//! * A watch stops once no Instance's rules name an object of its (apiVersion, kind, namespace)
//!   any more (the Instance went, or its rules changed).
//! * Each watch feeds a cache (a kube-runtime reflector store, managedFields dropped) that the
//!   rules read once it has its first list: a reconcile of an Instance with rules costs no GET
//!   (issue 14's read budget). Before that, or for a kind not watched yet, a GET reads the
//!   object. A cached copy can lag behind the server; the watch event that brings the newer copy
//!   wakes the Instance again, so a rule never decides on a stale copy for long (and `for`
//!   windows are what guard a firing anyway).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, watcher};
use kudo_api::{AutopilotRuleStatus, Instance, OperatorVersion};
use kudo_engine::Timestamp;
use kudo_engine::autopilot::{RuleDecision, RuleInput, decide_rule, evaluate};
use kudo_engine::initiate::{Initiation, Origin};
use kudo_package::autopilot::parse_rule_duration;
use kudo_package::render::{RenderContext, render_string};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use kudo_kube::discovery::{self, Resolved};

use crate::resources::instance_resource;

/// Event reason: a rule fired and started its plan.
pub const AUTOPILOT_TRIGGERED: &str = "AutopilotTriggered";
/// Event reason: a rule could not be evaluated (reported once per distinct error).
pub const AUTOPILOT_RULE_ERROR: &str = "AutopilotRuleError";

/// An object a rule watches: (apiVersion, kind, namespace, name); namespace "" when
/// cluster-scoped.
pub(crate) type Watched = (String, String, String, String);

/// The dynamic set of watches of autopilot rules and which Instances each watched object wakes.
pub(crate) struct Watches {
    client: kube::Client,
    wake: UnboundedSender<ObjectRef<DynamicObject>>,
    state: Arc<Mutex<State>>,
}

/// A watch of autopilot rules: its task and the cache it feeds.
type Running = (tokio::task::JoinHandle<()>, Store<DynamicObject>);

#[derive(Default)]
struct State {
    /// (apiVersion, kind, namespace) → its watch task and the cache it feeds.
    running: HashMap<(String, String, String), Running>,
    /// Instance → the objects its rules named at their last evaluation.
    interest: HashMap<ObjectRef<DynamicObject>, HashSet<Watched>>,
}

impl Drop for Watches {
    fn drop(&mut self) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for (h, _) in state.running.values() {
            h.abort();
        }
    }
}

impl Watches {
    pub(crate) fn new(client: kube::Client, wake: UnboundedSender<ObjectRef<DynamicObject>>) -> Watches {
        Watches {
            client,
            wake,
            state: Arc::default(),
        }
    }

    /// Records what `instance`'s rules look at now (replacing the previous set) and starts the
    /// watches that are missing.
    pub(crate) fn watch(&self, instance: ObjectRef<DynamicObject>, objects: Vec<(ApiResource, Watched)>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for (ar, w) in &objects {
            let key = (w.0.clone(), w.1.clone(), w.2.clone());
            if state.running.contains_key(&key) {
                continue;
            }
            let api: Api<DynamicObject> = if w.2.is_empty() {
                Api::all_with(self.client.clone(), ar)
            } else {
                Api::namespaced_with(self.client.clone(), &w.2, ar)
            };
            let shared = self.state.clone();
            let wake = self.wake.clone();
            let (av, kind) = (w.0.clone(), w.1.clone());
            tracing::debug!(api_version = %av, kind = %kind, namespace = %w.2, "autopilot: watching");
            let writer = Writer::new(ar.clone());
            let store = writer.as_reader();
            let task = tokio::spawn(async move {
                let mut events = std::pin::pin!(
                    watcher(api, watcher::Config::default())
                        .default_backoff()
                        .modify(|o| o.metadata.managed_fields = None)
                        .reflect(writer)
                        .touched_objects()
                );
                while let Some(ev) = events.next().await {
                    let Ok(obj) = ev else { continue };
                    let me: Watched = (
                        av.clone(),
                        kind.clone(),
                        obj.namespace().unwrap_or_default(),
                        obj.name_any(),
                    );
                    let targets: Vec<ObjectRef<DynamicObject>> = {
                        let s = shared.lock().unwrap_or_else(|e| e.into_inner());
                        s.interest
                            .iter()
                            .filter(|(_, set)| set.contains(&me))
                            .map(|(i, _)| i.clone())
                            .collect()
                    };
                    for t in targets {
                        let _ = wake.send(t);
                    }
                }
            });
            state.running.insert(key, (task, store));
        }
        let set: HashSet<Watched> = objects.into_iter().map(|(_, w)| w).collect();
        if set.is_empty() {
            state.interest.remove(&instance);
        } else {
            state.interest.insert(instance, set);
        }
        state.stop_unneeded();
    }
}

impl State {
    /// Stops the watches no Instance's rules need any more.
    fn stop_unneeded(&mut self) {
        let needed: HashSet<(&str, &str, &str)> = self
            .interest
            .values()
            .flatten()
            .map(|w| (w.0.as_str(), w.1.as_str(), w.2.as_str()))
            .collect();
        let unneeded: Vec<(String, String, String)> = self
            .running
            .keys()
            .filter(|k| !needed.contains(&(k.0.as_str(), k.1.as_str(), k.2.as_str())))
            .cloned()
            .collect();
        for k in unneeded {
            if let Some((task, _)) = self.running.remove(&k) {
                tracing::debug!(api_version = %k.0, kind = %k.1, namespace = %k.2, "autopilot: watch stopped");
                task.abort();
            }
        }
    }
}

impl Watches {
    /// An Instance that is gone, or whose OperatorVersion has no rules (any more), wakes on no
    /// watched object.
    pub(crate) fn forget(&self, instance: &ObjectRef<DynamicObject>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.interest.remove(instance).is_some() {
            state.stop_unneeded();
        }
    }

    /// The (apiVersion, kind, namespace) of the watches running.
    #[cfg(test)]
    fn running(&self) -> Vec<(String, String, String)> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut keys: Vec<_> = state.running.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// The watched object from its watch's cache: `Some(copy or None when absent)` once the
    /// watch of its kind and namespace has its first list, `None` when the server must be asked.
    fn cached(&self, ar: &ApiResource, w: &Watched) -> Option<Option<Arc<DynamicObject>>> {
        let store = {
            let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state
                .running
                .get(&(w.0.clone(), w.1.clone(), w.2.clone()))
                .map(|(_, store)| store.clone())?
        };
        if !crate::cache::ready(&store) {
            return None;
        }
        let mut r = ObjectRef::new_with(&w.3, ar.clone());
        if !w.2.is_empty() {
            r = r.within(&w.2);
        }
        Some(store.get(&r))
    }
}

/// The key of a rule in `status.autopilot`: `PLAN/INDEX`.
pub(crate) fn rule_key(plan: &str, index: usize) -> String {
    format!("{plan}/{index}")
}

/// What the evaluation of an Instance's rules decided.
#[derive(Default)]
pub(crate) struct Evaluation {
    /// New `status.autopilot`.
    pub states: BTreeMap<String, AutopilotRuleStatus>,
    /// The first rule (in plan-name, then rule order) that fires, as an initiation.
    pub fire: Option<Initiation>,
    /// Warning Events to publish: (rule key, message).
    pub errors: Vec<(String, String)>,
    /// When to evaluate again without a watch event (end of a `for` window or cooldown).
    pub requeue: Option<std::time::Duration>,
}

impl Evaluation {
    /// The firing was not admitted (`message`, the admission's answer): nothing starts, and the
    /// message becomes the rule's error (one Warning Event per distinct message).
    pub fn denied(&mut self, message: &str) {
        let Some(init) = self.fire.take() else {
            return;
        };
        let key = match &init.origin {
            Origin::Autopilot { rule, .. } => rule.clone(),
            Origin::Schedule { .. } | Origin::Rotation { .. } => init.plan.clone(),
        };
        let message = format!(
            "autopilot rule {key}: plan {:?} not started: {message}",
            init.plan
        );
        if let Some(st) = self.states.get_mut(&key)
            && st.last_error != message
        {
            st.last_error = message.clone();
            self.errors.push((key, message));
        }
    }

    /// Records what the engine decided for one rule: a firing (the first of a reconcile wins; it
    /// needs the rendered `setParameters` and what was observed) or when to look again.
    fn record(
        &mut self,
        decision: RuleDecision,
        detail: Option<(BTreeMap<String, String>, String)>,
        st: &mut AutopilotRuleStatus,
        plan: &str,
        key: &str,
        now: Timestamp,
    ) {
        match decision {
            RuleDecision::Fire => {
                if let Some((set_parameters, observed)) = detail {
                    st.last_fired = Some(now.to_string());
                    self.fire = Some(Initiation {
                        plan: plan.to_string(),
                        set_parameters,
                        origin: Origin::Autopilot {
                            rule: key.to_string(),
                            observed,
                        },
                    });
                }
            }
            RuleDecision::Hold { until: Some(t) } => {
                let secs = u64::try_from(t.seconds_since(now)).unwrap_or(0).max(1);
                let d = std::time::Duration::from_secs(secs);
                self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
            }
            RuleDecision::Hold { until: None } | RuleDecision::Idle => {}
        }
    }
}

/// The parameters a rule sees: declared, non-sensitive, not from a Secret; defaults filled in.
fn rule_params(inst: &Instance, ov: &OperatorVersion) -> BTreeMap<String, String> {
    ov.spec
        .parameters
        .iter()
        .filter(|p| p.sensitive != Some(true) && !inst.spec.parameter_sources.contains_key(&p.name))
        .filter_map(|p| {
            inst.spec
                .parameters
                .get(&p.name)
                .or(p.default.as_ref())
                .map(|v| (p.name.clone(), v.clone()))
        })
        .collect()
}

fn secs_ceil(d: std::time::Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn ts(s: &Option<String>) -> Option<Timestamp> {
    s.as_deref().and_then(|s| Timestamp::parse(s).ok())
}

/// The values of the `object.a.b` paths a condition names, for the Event (at most 8, each
/// cut to 64 characters). A Secret's values are never shown.
fn observed(condition: &str, object: Option<&Value>, kind: &str) -> String {
    let Some(object) = object else {
        return "object missing".into();
    };
    let mut seen = Vec::new();
    let mut out = Vec::new();
    let bytes = condition.as_bytes();
    let mut i = 0;
    while let Some(pos) = condition[i..].find("object.") {
        let start = i + pos;
        let before_ok = start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let mut end = start + "object".len();
        while end < bytes.len() && bytes[end] == b'.' {
            let seg_start = end + 1;
            let mut j = seg_start;
            while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
                j += 1;
            }
            if j == seg_start {
                break;
            }
            end = j;
        }
        i = end.max(start + 1);
        if !before_ok {
            continue;
        }
        let path = &condition[start..end];
        if !seen.contains(&path) {
            seen.push(path);
        }
    }
    // `has(object.status) && … object.status.readyReplicas`: the deepest paths say more.
    let shown: Vec<&str> = seen
        .iter()
        .copied()
        .filter(|p| {
            !seen
                .iter()
                .any(|q| q.len() > p.len() && q.starts_with(p) && q.as_bytes()[p.len()] == b'.')
        })
        .take(8)
        .collect();
    for path in shown {
        let mut v = object;
        let mut found = true;
        for seg in path.split('.').skip(1) {
            match v.get(seg) {
                Some(x) => v = x,
                None => {
                    found = false;
                    break;
                }
            }
        }
        let shown = if !found {
            "<absent>".to_string()
        } else if kind == "Secret" {
            "<redacted>".to_string()
        } else {
            let mut s = v.to_string();
            if s.len() > 64 {
                let mut cut = 61;
                while !s.is_char_boundary(cut) {
                    cut -= 1;
                }
                s.truncate(cut);
                s.push_str("...");
            }
            s
        };
        out.push(format!("{path}={shown}"));
    }
    out.join(", ")
}

/// What evaluating rules reads through: discovery, the client acting for the Instance, and the
/// watches whose caches answer first (and which the evaluation keeps up to date).
pub(crate) struct Reads<'a> {
    pub discovery: &'a discovery::Cache,
    pub client: kube::Client,
    pub watches: &'a Watches,
}

/// Evaluates every rule of the OperatorVersion for `inst` at `now`. `plan_running`: a plan is
/// scheduled or running, or a change of the Instance waits for admission (rules then wait).
pub(crate) async fn evaluate_rules(
    reads: &Reads<'_>,
    inst: &Instance,
    ov: &OperatorVersion,
    plan_running: bool,
    now: Timestamp,
) -> Evaluation {
    let ns = inst.metadata.namespace.clone().unwrap_or_default();
    let name = inst.metadata.name.clone();
    let old = inst
        .status
        .as_ref()
        .map(|s| s.autopilot.clone())
        .unwrap_or_default();
    let params = rule_params(inst, ov);
    let rctx = RenderContext::offline(&name, &ns, params.clone());
    let mut ev = Evaluation::default();
    let mut watched = Vec::new();
    for (plan_name, plan) in &ov.spec.plans {
        for (index, rule) in plan.when.iter().enumerate() {
            let key = rule_key(plan_name, index);
            let mut st = old.get(&key).cloned().unwrap_or_default();
            let windows = durations(ov, plan_name, index, rule, &rctx);
            let (for_, cooldown) = windows.clone().unwrap_or((0, 0));
            let outcome = match windows {
                Ok(_) => evaluate_rule(reads, ov, plan_name, index, rule, &rctx, &ns, &mut watched).await,
                Err(e) => Err(e),
            };
            let (condition, detail) = match outcome {
                Ok(r) => {
                    st.last_error.clear();
                    r
                }
                Err(msg) => {
                    if st.last_error != msg {
                        ev.errors.push((key.clone(), msg.clone()));
                        st.last_error = msg;
                    }
                    (false, None)
                }
            };
            let out = decide_rule(&RuleInput {
                condition,
                holding_since: ts(&st.holding_since),
                last_fired: ts(&st.last_fired),
                for_secs: for_,
                cooldown_secs: cooldown,
                now,
                // One firing per reconcile: a second ready rule waits for that plan.
                plan_running: plan_running || ev.fire.is_some(),
            });
            st.holding_since = out.holding_since.map(|t| t.to_string());
            ev.record(out.decision, detail, &mut st, plan_name, &key, now);
            if st != AutopilotRuleStatus::default() {
                ev.states.insert(key, st);
            }
        }
    }
    let me = ObjectRef::new_with(&name, instance_resource()).within(&ns);
    reads.watches.watch(me, watched);
    ev
}

/// A rule's `for` and `cooldown` in whole seconds (rounded up), rendered first: both may be
/// templates over the parameters.
fn durations(
    ov: &OperatorVersion,
    plan: &str,
    index: usize,
    rule: &kudo_api::AutopilotRule,
    rctx: &RenderContext,
) -> Result<(u64, u64), String> {
    let at = format!("plan {plan:?} when[{index}]");
    let one = |field: &str, text: &str| -> Result<u64, String> {
        let what = format!("{at}.{field}");
        let rendered = render_string(ov, plan, rctx, &what, text).map_err(|e| e.to_string())?;
        parse_rule_duration(&rendered)
            .map(secs_ceil)
            .map_err(|e| format!("{what}: {e}"))
    };
    Ok((one("for", &rule.for_)?, one("cooldown", &rule.cooldown)?))
}

/// One rule: `Ok((condition, Some((rendered setParameters, observed values))))`, or the error.
#[allow(clippy::too_many_arguments)]
async fn evaluate_rule(
    reads: &Reads<'_>,
    ov: &OperatorVersion,
    plan: &str,
    index: usize,
    rule: &kudo_api::AutopilotRule,
    rctx: &RenderContext,
    ns: &str,
    watched: &mut Vec<(ApiResource, Watched)>,
) -> Result<(bool, Option<(BTreeMap<String, String>, String)>), String> {
    let at = format!("plan {plan:?} when[{index}]");
    let render = |field: &str, text: &str| {
        render_string(ov, plan, rctx, &format!("{at}.{field}"), text).map_err(|e| e.to_string())
    };
    let av = render("resource.apiVersion", &rule.resource.api_version)?;
    let kind = render("resource.kind", &rule.resource.kind)?;
    let obj_name = render("resource.name", &rule.resource.name)?;
    let (ar, namespaced) = match reads.discovery.resolve(&av, &kind).await {
        Ok(Resolved::Found { resource, namespaced }) => (resource, namespaced),
        Ok(Resolved::Unknown(msg)) => {
            return Err(format!("{at}: unknown resource kind {kind} ({av}): {msg}"));
        }
        Err(e) => return Err(format!("{at}: discovery of {kind} ({av}) failed: {e}")),
    };
    let obj_ns = if namespaced { ns.to_string() } else { String::new() };
    let w: Watched = (av.clone(), kind.clone(), obj_ns.clone(), obj_name.clone());
    let cached = reads.watches.cached(&ar, &w);
    // Watched even when the read below fails: the watch's event is what retries it.
    watched.push((ar.clone(), w));
    let object = match cached {
        Some(cached) => cached.map(|o| serde_json::to_value(&*o).unwrap_or(Value::Null)),
        None => {
            let api: Api<DynamicObject> = if namespaced {
                Api::namespaced_with(reads.client.clone(), ns, &ar)
            } else {
                Api::all_with(reads.client.clone(), &ar)
            };
            match api.get_opt(&obj_name).await {
                Ok(o) => o.map(|mut o| {
                    o.metadata.managed_fields = None;
                    serde_json::to_value(o).unwrap_or(Value::Null)
                }),
                Err(e) => return Err(format!("{at}: reading {kind} {obj_name} failed: {e}")),
            }
        }
    };
    let Some(object) = object else {
        return Ok((false, None));
    };
    let condition = evaluate(&rule.condition, &object, &rctx.parameters)
        .map_err(|e| format!("{at}: condition {:?} on {kind} {obj_name}: {e}", rule.condition))?;
    if !condition {
        return Ok((false, None));
    }
    let mut set = BTreeMap::new();
    for (k, v) in &rule.set_parameters {
        set.insert(k.clone(), render(&format!("setParameters.{k}"), v)?);
    }
    let observed = format!(
        "{kind} {obj_name}: {}",
        observed(&rule.condition, Some(&object), &kind)
    );
    Ok((true, Some((set, observed))))
}

/// The Event message of a firing (no sensitive value: rules never see one).
pub(crate) fn triggered_message(init: &Initiation) -> String {
    let (rule, observed) = match &init.origin {
        Origin::Autopilot { rule, observed } => (rule.as_str(), observed.as_str()),
        Origin::Schedule { due } => ("schedule", due.as_str()),
        Origin::Rotation { parameters } => ("rotation", parameters.as_str()),
    };
    let mut msg = format!(
        "autopilot rule {rule} fired: running plan {:?} ({observed})",
        init.plan
    );
    if !init.set_parameters.is_empty() {
        let set: Vec<String> = init
            .set_parameters
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        msg.push_str(&format!("; set {}", set.join(", ")));
    }
    msg
}

/// Whether any plan of the OperatorVersion has rules.
pub(crate) fn has_rules(ov: &OperatorVersion) -> bool {
    ov.spec.plans.values().any(|p| !p.when.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_watch_stops_when_no_rule_names_its_kind_any_more() {
        // No server behind the client: the watches only back off, which is all this needs.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let watches = Watches::new(client, tx);
        let cm = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let sts = ApiResource::erase::<k8s_openapi::api::apps::v1::StatefulSet>(&());
        let w = |ar: &ApiResource, name: &str| {
            (
                ar.clone(),
                (
                    ar.api_version.clone(),
                    ar.kind.clone(),
                    "ns".to_string(),
                    name.to_string(),
                ),
            )
        };
        let inst = |n: &str| ObjectRef::new_with(n, crate::resources::instance_resource()).within("ns");
        watches.watch(inst("a"), vec![w(&cm, "x"), w(&sts, "db")]);
        watches.watch(inst("b"), vec![w(&sts, "db2")]);
        let key = |ar: &ApiResource| (ar.api_version.clone(), ar.kind.clone(), "ns".to_string());
        assert_eq!(watches.running(), vec![key(&sts), key(&cm)]);
        // a's rules change: no ConfigMap any more
        watches.watch(inst("a"), vec![w(&sts, "db")]);
        assert_eq!(watches.running(), vec![key(&sts)]);
        // a goes; b still needs the StatefulSet watch
        watches.forget(&inst("a"));
        assert_eq!(watches.running(), vec![key(&sts)]);
        watches.forget(&inst("b"));
        assert!(watches.running().is_empty());
    }

    #[test]
    fn observed_values_name_the_paths_and_hide_secrets() {
        let obj =
            serde_json::json!({"status": {"readyReplicas": 1}, "spec": {"replicas": 3}, "data": {"k": "v"}});
        assert_eq!(
            observed(
                "object.status.readyReplicas < object.spec.replicas",
                Some(&obj),
                "StatefulSet"
            ),
            "object.status.readyReplicas=1, object.spec.replicas=3"
        );
        assert_eq!(
            observed("object.data.k == 'v'", Some(&obj), "Secret"),
            "object.data.k=<redacted>"
        );
        assert_eq!(
            observed("has(object.data.x)", Some(&obj), "ConfigMap"),
            "object.data.x=<absent>"
        );
        assert_eq!(observed("myobject.a == 1", Some(&obj), "ConfigMap"), "");
        assert_eq!(
            observed(
                "has(object.status) && object.status.readyReplicas > 0",
                Some(&obj),
                "StatefulSet"
            ),
            "object.status.readyReplicas=1"
        );
    }
}
