//! The `kudo-rs.dev/v1alpha1` `Rollout` (a kudo-rs extension): one change — a new OperatorVersion,
//! parameter values, or both — carried to many Instances in waves, each gated on the health of
//! the one before. The group is kudo-rs's own: `kudo.dev` is KUDO's, and KUDO has no such kind.
//!
//! Cluster-scoped: a rollout selects Instances in any namespaces (`spec.namespaces`), and a
//! namespaced object that changes Instances elsewhere would let whoever may create it in one
//! namespace change another's. Creating one is a cluster-level right (a ClusterRole), as is
//! running a fleet. The decisions are `kudo_engine::rollout`'s; this module is the wire format.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::{Condition, ObjectMeta};

/// kudo-rs's own group, version and `apiVersion` (one definition for all its kinds).
pub use crate::{OWN_API_VERSION as API_VERSION, OWN_GROUP as GROUP, OWN_VERSION as VERSION};
/// The `kind` of a Rollout.
pub const KIND: &str = "Rollout";
/// The resource name in URLs.
pub const PLURAL: &str = "rollouts";

/// A fleet rollout: one change carried to the Instances it selects, wave by wave, by the
/// manager's rollout controller (so it goes on after the CLI exits or a manager restarts).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// Always [`KIND`].
    pub kind: String,
    /// Its name (cluster-scoped: no namespace), uid and generation; the uid goes into the mark it
    /// leaves on every Instance it changes.
    pub metadata: ObjectMeta,
    /// What to change and how carefully: written by `kubectl kudo rollout start`, steered by
    /// `pause`, `resume` and `abort`.
    pub spec: RolloutSpec,
    /// What the manager observed and did; absent until its first decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RolloutStatus>,
}

impl Rollout {
    /// `metadata.uid` (empty before the server assigned one).
    pub fn uid(&self) -> &str {
        self.metadata.uid()
    }

    /// `metadata.generation`: the spec version the status says it observed.
    pub fn generation(&self) -> Option<i64> {
        self.metadata.other.get("generation").and_then(|v| v.as_i64())
    }
}

/// What to change, where, and how carefully.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    /// The OperatorVersion and/or parameter values every selected Instance gets.
    pub target: Target,
    /// Which Instances: a label selector (empty: every Instance).
    #[serde(default)]
    pub selector: LabelSelector,
    /// In which namespaces (empty: every namespace the manager acts on).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// How many Instances the first wave (`canary`) changes; 0: no canary. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<u32>,
    /// The waves after the canary, in order; Instances no wave takes form a last wave.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waves: Vec<Wave>,
    /// How many Instances of a wave change at once (count or percentage of the wave); default:
    /// all of them. A wave's own `maxConcurrent` wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<Amount>,
    /// What must hold before the next wave starts.
    #[serde(default)]
    pub gate: Gate,
    /// How long a changed Instance may take to be COMPLETE and healthy (Go duration); default 10m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline: Option<String>,
    /// How many Instances may fail (count or percentage of all) before `onFailure`; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<Amount>,
    /// What happens once more Instances failed than `maxFailures` allows; default `Pause`.
    #[serde(default)]
    pub on_failure: OnFailure,
    /// No Instance is changed while set (`kubectl kudo rollout pause`/`resume`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Stop for good: no Instance is changed any more (`kubectl kudo rollout abort`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort: bool,
    /// The waves whose `approval` was given (`kubectl kudo rollout resume`), by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved_waves: Vec<String>,
}

/// The change each Instance gets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// The OperatorVersion to upgrade to (its name, looked up where each Instance looks up its
    /// own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// Parameter values to set (never sensitive ones: they live in Secrets).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// One wave after the canary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Wave {
    /// Default `wave-N` (N from 1).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// How many Instances (count, or percentage of all the rollout's); absent: every Instance
    /// left (that the selector takes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Amount>,
    /// Only Instances with these labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// How many of this wave's Instances change at once (count or percentage of the wave);
    /// overrides `spec.maxConcurrent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<Amount>,
    /// The wave waits for approval (`spec.approvedWaves`) before it starts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approval: bool,
}

/// The gate before the next wave.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Gate {
    /// How long every changed Instance of the wave must stay healthy together (Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_success_time: Option<String>,
    /// CEL conditions over each changed Instance (`object`: the Instance, `params`: its
    /// parameters), evaluated as autopilot rules are; all must be true for it to be healthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<GateRule>,
}

/// One named CEL condition of the [`Gate`], checked on every changed Instance.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GateRule {
    /// Names the rule in why an Instance is not healthy (`gate rule NAME is false`).
    pub name: String,
    /// The CEL expression over `object` (the Instance) and `params`; one that does not compile
    /// is refused by `rollout start` and makes the Rollout `Invalid`.
    pub condition: String,
}

/// What happens when more Instances failed than `maxFailures` allows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnFailure {
    /// Change no more Instances; raise `maxFailures` to go on, or abort.
    #[default]
    Pause,
    /// Also roll every Instance the rollout changed back to the revision it had before.
    Rollback,
}

/// A count (`3`) or a percentage (`"25%"`), as Kubernetes' IntOrString.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Amount {
    /// A plain count: `3` on the wire.
    Count(u64),
    /// A string: a percentage (`"25%"`) or a count written as text (`"3"`).
    Text(String),
}

/// An [`Amount`] that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is neither a count nor a percentage like \"25%\"")]
pub struct AmountError(pub String);

impl Amount {
    /// The amount of `total`: a count as it is, a percentage rounded up (`25%` of 10 is 3).
    pub fn of(&self, total: u64) -> Result<u64, AmountError> {
        Ok(match self.read()? {
            (n, false) => n,
            (p, true) => (total * p).div_ceil(100),
        })
    }

    /// The amount of `total` rounded down (a failure budget of `10%` of 15 is 1).
    pub fn floor_of(&self, total: u64) -> Result<u64, AmountError> {
        Ok(match self.read()? {
            (n, false) => n,
            (p, true) => total * p / 100,
        })
    }

    /// The number and whether it is a percentage (at most 100).
    fn read(&self) -> Result<(u64, bool), AmountError> {
        let t = match self {
            Amount::Count(n) => return Ok((*n, false)),
            Amount::Text(t) => t,
        };
        let bad = || AmountError(t.clone());
        match t.strip_suffix('%') {
            Some(p) => match p.trim().parse::<u64>() {
                Ok(p) if p <= 100 => Ok((p, true)),
                _ => Err(bad()),
            },
            None => t.trim().parse().map(|n| (n, false)).map_err(|_| bad()),
        }
    }
}

/// `metav1.LabelSelector`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels an Instance must carry, each with exactly this value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Further requirements on the labels; all must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Requirement>,
}

/// `metav1.LabelSelectorRequirement`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requirement {
    /// The label the requirement is about.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// The values `In` and `NotIn` compare with; empty for `Exists` and `DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// A selector the API server would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The requirement at this index has an operator metav1 does not know.
    #[error("matchExpressions[{0}]: operator {1:?} is not In, NotIn, Exists or DoesNotExist")]
    Operator(usize, String),
    /// An `In` or `NotIn` requirement (at this index) without values.
    #[error("matchExpressions[{0}]: {1} needs values")]
    NoValues(usize, String),
    /// An `Exists` or `DoesNotExist` requirement (at this index) that lists values.
    #[error("matchExpressions[{0}]: {1} takes no values")]
    Values(usize, String),
    /// A part of a kubectl `-l` selector that reads as no requirement.
    #[error("{0:?} is not a label selector requirement (k=v, k!=v, k in (a,b), k notin (a,b), k, !k)")]
    Syntax(String),
}

impl LabelSelector {
    /// Checks the requirements as the API server does for a selector.
    pub fn validate(&self) -> Result<(), SelectorError> {
        for (i, r) in self.match_expressions.iter().enumerate() {
            match r.operator.as_str() {
                "In" | "NotIn" if r.values.is_empty() => {
                    return Err(SelectorError::NoValues(i, r.operator.clone()));
                }
                "Exists" | "DoesNotExist" if !r.values.is_empty() => {
                    return Err(SelectorError::Values(i, r.operator.clone()));
                }
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                other => return Err(SelectorError::Operator(i, other.to_string())),
            }
        }
        Ok(())
    }

    /// Whether `labels` satisfy every label and requirement (an empty selector takes all), by
    /// metav1's rules. kube-core's `Selector` does the same for k8s-openapi's type; this crate
    /// has no Kubernetes dependency, and the engine matches wave selectors with it.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let have = labels.get(&r.key);
                match r.operator.as_str() {
                    "In" => have.is_some_and(|v| r.values.contains(v)),
                    "NotIn" => have.is_none_or(|v| !r.values.contains(v)),
                    "Exists" => have.is_some(),
                    "DoesNotExist" => have.is_none(),
                    _ => false,
                }
            })
    }

    /// Reads a selector written as kubectl's `-l` takes it: `k=v` (or `k==v`), `k!=v`,
    /// `k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k` (does not exist), joined by commas.
    pub fn parse(text: &str) -> Result<LabelSelector, SelectorError> {
        let mut sel = LabelSelector::default();
        let mut depth = 0;
        let mut parts = vec![String::new()];
        for c in text.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(String::new());
                    continue;
                }
                _ => {}
            }
            if let Some(p) = parts.last_mut() {
                p.push(c);
            }
        }
        let req = |key: &str, op: &str, values: Vec<String>| Requirement {
            key: key.trim().to_string(),
            operator: op.to_string(),
            values,
        };
        for part in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            let set = |rest: &str| -> Option<Vec<String>> {
                let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
                Some(
                    inner
                        .split(',')
                        .map(|v| v.trim().to_string())
                        .filter(|v| !v.is_empty())
                        .collect(),
                )
            };
            let bad = || SelectorError::Syntax(part.to_string());
            if let Some((k, v)) = part.split_once("!=") {
                sel.match_expressions
                    .push(req(k, "NotIn", vec![v.trim().to_string()]));
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                sel.match_labels
                    .insert(k.trim().to_string(), v.trim().to_string());
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                sel.match_expressions
                    .push(req(k, "NotIn", set(rest).ok_or_else(bad)?));
            } else if let Some((k, rest)) = part.split_once(" in ") {
                sel.match_expressions
                    .push(req(k, "In", set(rest).ok_or_else(bad)?));
            } else if let Some(k) = part.strip_prefix('!') {
                sel.match_expressions.push(req(k, "DoesNotExist", Vec::new()));
            } else if part.contains([' ', '(', ')']) {
                return Err(bad());
            } else {
                sel.match_expressions.push(req(part, "Exists", Vec::new()));
            }
        }
        sel.validate()?;
        Ok(sel)
    }

    /// The selector as a `labelSelector` query (`a=b,c in (x,y),!d`); empty selects everything.
    pub fn to_query(&self) -> String {
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for r in &self.match_expressions {
            let values = || {
                r.values
                    .iter()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(",")
            };
            parts.push(match r.operator.as_str() {
                "In" => format!("{} in ({})", r.key, values()),
                "NotIn" => format!("{} notin ({})", r.key, values()),
                "DoesNotExist" => format!("!{}", r.key),
                _ => r.key.clone(),
            });
        }
        parts.join(",")
    }
}

/// What the manager observed and did, per wave and per Instance.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The `metadata.generation` of the spec this status was decided for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Progressing`, `Paused`, `WaitingForApproval`, `Halted`, `RollingBack`, `Complete`,
    /// `RolledBack`, `Aborted`, `Invalid` (see `kudo_engine::rollout::Phase`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    /// The phase in words: the current wave's counts, or why the rollout stopped.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// How many Instances the rollout took when it started (percentages are of this).
    #[serde(default)]
    pub total: u64,
    /// When the manager first decided for the rollout (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When it reached a final phase: `Complete`, `RolledBack` or `Aborted` (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Every wave of the spec in the order they run: the canary first, `remaining` last if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waves: Vec<WaveStatus>,
    /// Every Instance the rollout took, with its wave and outcome: the record a restarted manager
    /// (or the one a shard moved to) decides from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<InstanceRollout>,
    /// kstatus conditions `Reconciling`, `Stalled` and `Ready`, each with its `observedGeneration`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// How one wave of the rollout stands.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveStatus {
    /// The wave's name: `canary`, a declared wave's (`wave-N` by default), or `remaining`.
    pub name: String,
    /// `Pending`, `WaitingForApproval`, `Progressing`, `Complete`.
    #[serde(default)]
    pub phase: String,
    /// When the wave started changing Instances: the one before completed and, if it asks for
    /// approval, `spec.approvedWaves` names it (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// Since when every changed Instance of the wave has been healthy (the gate's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_since: Option<String>,
    /// When its gate passed and its healthy Instances succeeded (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
}

/// One Instance of the rollout.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceRollout {
    /// `namespace/name`.
    pub name: String,
    /// The Instance's uid: one deleted and created again is another Instance.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The name of the wave it was placed in; kept once placed, across manager restarts.
    pub wave: String,
    /// `Pending`, `Waiting`, `Progressing`, `Healthy`, `Succeeded`, `Failed`, `Skipped`,
    /// `Deleted`, `RollingBack`, `RolledBack`.
    pub phase: String,
    /// Its newest revision before the rollout's run, and the revision of that run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_revision: Option<u64>,
    /// The revision the rollout's change made of it (`revision 1 → 2`: this is the 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_revision: Option<u64>,
    /// The plan the change runs and its run's uid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plan: String,
    /// The uid of the plan run the manager admitted for the change (from the Instance's mark).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub run: String,
    /// When the rollout wrote its change (RFC 3339): the progress deadline counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_at: Option<String>,
    /// Why it waits, or what it is doing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Why it failed, once it did (kept while it is rolled back): what the failure budget counts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failure: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_counts_or_percentages_of_a_total() {
        /// (amount, of total, rounded up, rounded down)
        type Case = (Amount, u64, Result<u64, ()>, Result<u64, ()>);
        let cases: &[Case] = &[
            (Amount::Count(3), 10, Ok(3), Ok(3)),
            (Amount::Text("3".into()), 10, Ok(3), Ok(3)),
            (Amount::Text("25%".into()), 10, Ok(3), Ok(2)),
            (Amount::Text("50%".into()), 10, Ok(5), Ok(5)),
            (Amount::Text("100%".into()), 7, Ok(7), Ok(7)),
            (Amount::Text("1%".into()), 1000, Ok(10), Ok(10)),
            (Amount::Text("0%".into()), 10, Ok(0), Ok(0)),
            (Amount::Text("101%".into()), 10, Err(()), Err(())),
            (Amount::Text("x%".into()), 10, Err(()), Err(())),
            (Amount::Text("two".into()), 10, Err(()), Err(())),
        ];
        for (a, total, up, down) in cases {
            assert_eq!(a.of(*total).map_err(|_| ()), *up, "{a:?} of {total}");
            assert_eq!(
                a.floor_of(*total).map_err(|_| ()),
                *down,
                "{a:?} floor of {total}"
            );
        }
        let read: Vec<Amount> = serde_json::from_str(r#"[2, "20%"]"#).unwrap();
        assert_eq!(read, [Amount::Count(2), Amount::Text("20%".into())]);
    }

    #[test]
    fn selectors_match_as_metav1_and_print_as_queries() {
        let sel: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "db"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["b", "a"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "team", "operator": "Exists"},
            ],
        }))
        .unwrap();
        assert_eq!(sel.validate(), Ok(()));
        assert_eq!(
            sel.to_query(),
            "app=db,tier in (a,b),!legacy,env notin (dev),team"
        );
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let ok = labels(&[("app", "db"), ("tier", "a"), ("team", "x")]);
        assert!(sel.matches(&ok));
        let cases = [
            (
                "wrong app",
                labels(&[("app", "web"), ("tier", "a"), ("team", "x")]),
            ),
            (
                "tier not in",
                labels(&[("app", "db"), ("tier", "c"), ("team", "x")]),
            ),
            ("no tier", labels(&[("app", "db"), ("team", "x")])),
            (
                "legacy exists",
                labels(&[("app", "db"), ("tier", "a"), ("team", "x"), ("legacy", "")]),
            ),
            (
                "env in dev",
                labels(&[("app", "db"), ("tier", "a"), ("team", "x"), ("env", "dev")]),
            ),
            ("no team", labels(&[("app", "db"), ("tier", "a")])),
        ];
        for (case, l) in cases {
            assert!(!sel.matches(&l), "{case}");
        }
        assert!(LabelSelector::default().matches(&BTreeMap::new()));
        assert_eq!(LabelSelector::default().to_query(), "");
        let bad = |op: &str, values: &[&str]| LabelSelector {
            match_expressions: vec![Requirement {
                key: "k".into(),
                operator: op.into(),
                values: values.iter().map(|v| v.to_string()).collect(),
            }],
            ..Default::default()
        };
        assert!(matches!(
            bad("In", &[]).validate(),
            Err(SelectorError::NoValues(0, _))
        ));
        assert!(matches!(
            bad("Exists", &["x"]).validate(),
            Err(SelectorError::Values(0, _))
        ));
        assert!(matches!(
            bad("Like", &["x"]).validate(),
            Err(SelectorError::Operator(0, _))
        ));
    }

    #[test]
    fn selectors_are_read_as_kubectl_writes_them() {
        let sel =
            LabelSelector::parse("app=db, tier in (a, b),!legacy,env notin (dev),team,zone!=x,x==y").unwrap();
        assert_eq!(
            sel.to_query(),
            "app=db,x=y,tier in (a,b),!legacy,env notin (dev),team,zone notin (x)"
        );
        assert_eq!(LabelSelector::parse("").unwrap(), LabelSelector::default());
        for bad in ["a in b", "a in ()", "a b"] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad}");
        }
    }

    /// Every key of `v` and below, as the CRD would name it.
    fn keys(v: &serde_json::Value, out: &mut BTreeSet<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    out.insert(k.clone());
                    keys(v, out);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }

    #[test]
    fn the_crd_declares_every_field_of_the_types() {
        // A real API server prunes what the schema does not declare.
        let crd = crate::crd_manifests()[3];
        let sel = LabelSelector {
            match_labels: BTreeMap::from([("a".into(), "b".into())]),
            match_expressions: vec![Requirement {
                key: "k".into(),
                operator: "In".into(),
                values: vec!["v".into()],
            }],
        };
        let full = Rollout {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            metadata: ObjectMeta::default(),
            spec: RolloutSpec {
                target: Target {
                    operator_version: Some("ov".into()),
                    parameters: BTreeMap::from([("P".into(), "1".into())]),
                },
                selector: sel.clone(),
                namespaces: vec!["ns".into()],
                canary: Some(1),
                waves: vec![Wave {
                    name: "w".into(),
                    size: Some(Amount::Count(1)),
                    selector: Some(sel),
                    max_concurrent: Some(Amount::Count(1)),
                    approval: true,
                }],
                max_concurrent: Some(Amount::Count(1)),
                gate: Gate {
                    min_success_time: Some("1s".into()),
                    rules: vec![GateRule::default()],
                },
                progress_deadline: Some("1m".into()),
                max_failures: Some(Amount::Count(1)),
                on_failure: OnFailure::Rollback,
                paused: true,
                abort: true,
                approved_waves: vec!["w".into()],
            },
            status: Some(RolloutStatus {
                observed_generation: Some(1),
                phase: "p".into(),
                message: "m".into(),
                total: 1,
                started_at: Some("t".into()),
                finished_at: Some("t".into()),
                waves: vec![WaveStatus {
                    name: "w".into(),
                    phase: "p".into(),
                    started_at: Some("t".into()),
                    healthy_since: Some("t".into()),
                    completed_at: Some("t".into()),
                }],
                instances: vec![InstanceRollout {
                    name: "n".into(),
                    uid: "u".into(),
                    wave: "w".into(),
                    phase: "p".into(),
                    from_revision: Some(1),
                    to_revision: Some(2),
                    plan: "p".into(),
                    run: "r".into(),
                    changed_at: Some("t".into()),
                    message: "m".into(),
                    failure: "f".into(),
                }],
                conditions: vec![Condition {
                    observed_generation: Some(1),
                    ..Condition::default()
                }],
            }),
        };
        let mut found = BTreeSet::new();
        keys(&serde_json::to_value(&full).unwrap(), &mut found);
        for k in found.iter().filter(|k| !["a", "P"].contains(&k.as_str())) {
            assert!(
                crd.contains(&format!(" {k}:\n")),
                "{k} is not declared in the CRD"
            );
        }
    }
}
