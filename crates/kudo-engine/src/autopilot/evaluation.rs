//! Evaluating an Instance's rules in one reconcile ([`Rules`]): rendering what each rule reads,
//! judging the object the manager read for it, and keeping the rules' states
//! ([`Evaluation`]). Pull-based like [`crate::PlanPass`]: the manager asks which object the next
//! rule reads ([`Rules::next_read`]), reads it (from a watch's cache or the server) and reports
//! it ([`Rules::report`]).
//!
//! * A missing object makes the condition false.
//! * An evaluation error (no such key, wrong type, unknown kind, a template that fails) makes it
//!   false too, and is reported once per distinct error (kept in the rule's `lastError`).
//! * Sensitive parameters (`sensitive: true` or given through `parameterSources`) are not in the
//!   rules' `params` nor in their template data, so no rule can copy one into an Event.

use std::collections::BTreeMap;
use std::time::Duration;

use kudo_api::{AutopilotRule, AutopilotRuleStatus, Instance, OperatorVersion};
use kudo_package::autopilot::parse_rule_duration;
use kudo_package::render::{RenderContext, render_string};
use serde_json::Value;

use super::{RuleDecision, RuleInput, decide_rule, evaluate};
use crate::initiate::{Initiation, Origin};
use crate::time::Timestamp;

/// Event reason: a rule fired and started its plan.
pub const AUTOPILOT_TRIGGERED: &str = "AutopilotTriggered";
/// Event reason: a rule could not be evaluated (reported once per distinct error).
pub const AUTOPILOT_RULE_ERROR: &str = "AutopilotRuleError";

/// Whether any plan of the OperatorVersion has rules.
pub fn has_rules(ov: &OperatorVersion) -> bool {
    ov.spec.plans.values().any(|p| !p.when.is_empty())
}

/// The key of a rule in `status.autopilot`: `PLAN/INDEX`.
pub fn rule_key(plan: &str, index: usize) -> String {
    format!("{plan}/{index}")
}

/// What the evaluation of an Instance's rules decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evaluation {
    /// New `status.autopilot`.
    pub states: BTreeMap<String, AutopilotRuleStatus>,
    /// The first rule (in plan-name, then rule order) that fires, as an initiation.
    pub fire: Option<Initiation>,
    /// Warnings to publish: (rule key, message).
    pub errors: Vec<(String, String)>,
    /// When to evaluate again without a watch event (end of a `for` window or cooldown).
    pub requeue: Option<Duration>,
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
    fn record(&mut self, decision: RuleDecision, detail: Option<Fired>, at: &At<'_>, now: Timestamp) {
        match decision {
            RuleDecision::Fire => {
                if let Some(Fired {
                    set_parameters,
                    observed,
                }) = detail
                {
                    self.fire = Some(Initiation {
                        plan: at.plan.to_string(),
                        set_parameters,
                        origin: Origin::Autopilot {
                            rule: at.key.clone(),
                            observed,
                        },
                    });
                }
            }
            RuleDecision::Hold { until: Some(t) } => {
                let secs = u64::try_from(t.seconds_since(now)).unwrap_or(0).max(1);
                let d = Duration::from_secs(secs);
                self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
            }
            RuleDecision::Hold { until: None } | RuleDecision::Idle => {}
        }
    }
}

/// The object one rule reads, rendered: the manager resolves the kind, reads the object in the
/// Instance's namespace (or cluster-wide for a cluster-scoped kind) and watches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRead {
    /// `plan "P" when[I]`, the prefix of every message about the rule.
    pub at: String,
    /// `apiVersion` of the watched object, rendered from the rule's `resource`.
    pub api_version: String,
    /// `kind` of the watched object, rendered.
    pub kind: String,
    /// Name of the watched object, rendered.
    pub name: String,
}

/// Why the manager could not read a rule's object ([`Rules::report`]); the rule's error says so
/// after where the rule is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The server serves no such kind.
    #[error("unknown resource kind {kind} ({api_version}): {message}")]
    UnknownKind {
        /// `apiVersion` of the rule's resource.
        api_version: String,
        /// `kind` of the rule's resource.
        kind: String,
        /// What the discovery lookup said.
        message: String,
    },
    /// Discovery could not be asked.
    #[error("discovery of {kind} ({api_version}) failed: {message}")]
    Discovery {
        /// `apiVersion` of the rule's resource.
        api_version: String,
        /// `kind` of the rule's resource.
        kind: String,
        /// The discovery error.
        message: String,
    },
    /// The object could not be read.
    #[error("reading {kind} {name} failed: {message}")]
    Read {
        /// `kind` of the rule's resource.
        kind: String,
        /// Name of the object that could not be read.
        name: String,
        /// The API error.
        message: String,
    },
}

/// A fired rule's rendered `setParameters` and the values its condition looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fired {
    set_parameters: BTreeMap<String, String>,
    observed: String,
}

/// Where a rule is: its plan, index and key.
struct At<'a> {
    plan: &'a str,
    index: usize,
    key: String,
    rule: &'a AutopilotRule,
}

impl At<'_> {
    fn prefix(&self) -> String {
        format!("plan {:?} when[{}]", self.plan, self.index)
    }
}

/// A rule whose object the manager is reading.
struct Reading<'a> {
    at: At<'a>,
    windows: (u64, u64),
    read: RuleRead,
}

/// The rules of one Instance, evaluated in order (see the module docs).
///
/// ```
/// # use kudo_engine::autopilot::Rules;
/// # use kudo_api::{Instance, OperatorVersion};
/// # fn demo(inst: &Instance, ov: &OperatorVersion, now: kudo_engine::Timestamp) {
/// let mut rules = Rules::new(inst, ov, false, now);
/// while let Some(read) = rules.next_read() {
///     // The manager reads `read.kind` `read.name` (a watch's cache, else a GET)…
///     let object: Result<Option<serde_json::Value>, kudo_engine::autopilot::ReadError> = Ok(None);
///     rules.report(object);
/// }
/// let evaluation = rules.finish(); // new rule states, the rule that fires, errors, requeue
/// # let _ = evaluation; }
/// ```
pub struct Rules<'a> {
    ov: &'a OperatorVersion,
    old: BTreeMap<String, AutopilotRuleStatus>,
    rctx: RenderContext,
    pending: std::vec::IntoIter<At<'a>>,
    reading: Option<Reading<'a>>,
    waiting: bool,
    now: Timestamp,
    ev: Evaluation,
}

impl<'a> Rules<'a> {
    /// The rules of `ov` for `inst` at `now`. `waiting`: a plan is scheduled or running, or a
    /// change of the Instance waits for admission (rules then wait).
    pub fn new(inst: &Instance, ov: &'a OperatorVersion, waiting: bool, now: Timestamp) -> Rules<'a> {
        let ns = inst.metadata.namespace.clone().unwrap_or_default();
        let rctx = RenderContext::offline(&inst.metadata.name, &ns, rule_params(inst, ov));
        let rules: Vec<At<'a>> = ov
            .spec
            .plans
            .iter()
            .flat_map(|(plan, p)| {
                p.when.iter().enumerate().map(move |(index, rule)| At {
                    plan,
                    index,
                    key: rule_key(plan, index),
                    rule,
                })
            })
            .collect();
        Rules {
            ov,
            old: inst
                .status
                .as_ref()
                .map(|s| s.autopilot.clone())
                .unwrap_or_default(),
            rctx,
            pending: rules.into_iter(),
            reading: None,
            waiting,
            now,
            ev: Evaluation::default(),
        }
    }

    /// The object the next rule reads; `None` once every rule is judged. A rule whose templates
    /// do not render is judged at once (nothing to read).
    pub fn next_read(&mut self) -> Option<RuleRead> {
        if let Some(r) = &self.reading {
            return Some(r.read.clone());
        }
        for at in self.pending.by_ref() {
            let rendered = durations(self.ov, &at, &self.rctx)
                .and_then(|windows| Ok((windows, target(self.ov, &at, &self.rctx)?)));
            match rendered {
                Ok((windows, read)) => {
                    self.reading = Some(Reading {
                        at,
                        windows,
                        read: read.clone(),
                    });
                    return Some(read);
                }
                Err(e) => judge(
                    &mut self.ev,
                    &self.old,
                    &at,
                    (0, 0),
                    Err(e),
                    self.waiting,
                    self.now,
                ),
            }
        }
        None
    }

    /// The object the rule of the last [`Self::next_read`] reads: `Ok(None)` when it does not
    /// exist, `Err` when it could not be read.
    pub fn report(&mut self, object: Result<Option<Value>, ReadError>) {
        let Some(Reading { at, windows, read }) = self.reading.take() else {
            return;
        };
        let object = object.map_err(|e| format!("{}: {e}", read.at));
        let outcome = object.and_then(|o| match o {
            Some(obj) => condition(self.ov, &at, &self.rctx, &read, &obj),
            None => Ok(None),
        });
        judge(
            &mut self.ev,
            &self.old,
            &at,
            windows,
            outcome,
            self.waiting,
            self.now,
        );
    }

    /// The evaluation of every rule.
    pub fn finish(self) -> Evaluation {
        self.ev
    }
}

/// Judges one rule from the outcome of its condition (`Some`: true, with what fires; `None`:
/// false; `Err`: could not be evaluated), keeping its state.
fn judge(
    ev: &mut Evaluation,
    old: &BTreeMap<String, AutopilotRuleStatus>,
    at: &At<'_>,
    (for_secs, cooldown_secs): (u64, u64),
    outcome: Result<Option<Fired>, String>,
    waiting: bool,
    now: Timestamp,
) {
    let mut st = old.get(&at.key).cloned().unwrap_or_default();
    let detail = match outcome {
        Ok(d) => {
            st.last_error.clear();
            d
        }
        Err(msg) => {
            if st.last_error != msg {
                ev.errors.push((at.key.clone(), msg.clone()));
                st.last_error = msg;
            }
            None
        }
    };
    let ts = |s: &Option<String>| s.as_deref().and_then(|s| Timestamp::parse(s).ok());
    let out = decide_rule(&RuleInput {
        condition: detail.is_some(),
        holding_since: ts(&st.holding_since),
        last_fired: ts(&st.last_fired),
        for_secs,
        cooldown_secs,
        now,
        // One firing per reconcile: a second ready rule waits for that plan.
        plan_running: waiting || ev.fire.is_some(),
    });
    st.holding_since = out.holding_since.map(|t| t.to_string());
    if out.decision == RuleDecision::Fire && detail.is_some() {
        st.last_fired = Some(now.to_string());
    }
    ev.record(out.decision, detail, at, now);
    if st != AutopilotRuleStatus::default() {
        ev.states.insert(at.key.clone(), st);
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

fn render(
    ov: &OperatorVersion,
    at: &At<'_>,
    rctx: &RenderContext,
    field: &str,
    text: &str,
) -> Result<String, String> {
    let what = format!("{}.{field}", at.prefix());
    render_string(ov, at.plan, rctx, &what, text).map_err(|e| e.to_string())
}

/// A rule's `for` and `cooldown` in whole seconds (rounded up), rendered first: both may be
/// templates over the parameters.
fn durations(ov: &OperatorVersion, at: &At<'_>, rctx: &RenderContext) -> Result<(u64, u64), String> {
    let one = |field: &str, text: &str| -> Result<u64, String> {
        let rendered = render(ov, at, rctx, field, text)?;
        parse_rule_duration(&rendered)
            .map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0))
            .map_err(|e| format!("{}.{field}: {e}", at.prefix()))
    };
    Ok((one("for", &at.rule.for_)?, one("cooldown", &at.rule.cooldown)?))
}

/// The object a rule reads, its fields rendered.
fn target(ov: &OperatorVersion, at: &At<'_>, rctx: &RenderContext) -> Result<RuleRead, String> {
    let r = &at.rule.resource;
    Ok(RuleRead {
        at: at.prefix(),
        api_version: render(ov, at, rctx, "resource.apiVersion", &r.api_version)?,
        kind: render(ov, at, rctx, "resource.kind", &r.kind)?,
        name: render(ov, at, rctx, "resource.name", &r.name)?,
    })
}

/// The rule's condition over the object read: `Some` (the rendered `setParameters` and the
/// values looked at) when it holds.
fn condition(
    ov: &OperatorVersion,
    at: &At<'_>,
    rctx: &RenderContext,
    read: &RuleRead,
    object: &Value,
) -> Result<Option<Fired>, String> {
    let rule = at.rule;
    let (kind, name) = (&read.kind, &read.name);
    let holds = evaluate(&rule.condition, object, &rctx.parameters).map_err(|e| {
        format!(
            "{}: condition {:?} on {kind} {name}: {e}",
            at.prefix(),
            rule.condition
        )
    })?;
    if !holds {
        return Ok(None);
    }
    let mut set_parameters = BTreeMap::new();
    for (k, v) in &rule.set_parameters {
        set_parameters.insert(k.clone(), render(ov, at, rctx, &format!("setParameters.{k}"), v)?);
    }
    let observed = format!("{kind} {name}: {}", observed(&rule.condition, Some(object), kind));
    Ok(Some(Fired {
        set_parameters,
        observed,
    }))
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

/// The Event message of a firing (no sensitive value: rules never see one).
pub fn triggered_message(init: &Initiation) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
