//! A Rollout's spec read and checked once: its waves (the canary first, then the declared ones,
//! then one for whatever is left), durations, gate rules and failure budget. `kubectl kudo
//! rollout start` refuses what this refuses, and the manager reports it as `Invalid`.

use kudo_api::rollout::{Amount, LabelSelector, OnFailure, RolloutSpec};

use crate::time::parse_duration;

/// The name of the first wave, of `spec.canary` Instances.
pub const CANARY: &str = "canary";
/// The name of the wave of the Instances no declared wave takes.
pub const REMAINING: &str = "remaining";
/// `spec.progressDeadline` when not given.
pub const DEFAULT_PROGRESS_DEADLINE: &str = "10m";

/// One wave as the rollout runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct WaveDef {
    /// `canary`, a declared wave's name (`wave-N` by default), or `remaining`.
    pub name: String,
    /// At most this many Instances (of the rollout's total); `None`: every one left.
    pub size: Option<Amount>,
    /// Only Instances with these labels.
    pub selector: Option<LabelSelector>,
    /// How many of the wave's Instances change at once (count or percentage of the wave);
    /// `None`: `spec.maxConcurrent`, else all of them.
    pub max_concurrent: Option<Amount>,
    /// The wave waits for `spec.approvedWaves` to name it before it starts.
    pub approval: bool,
}

/// The checked spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The waves in the order they run: the canary, the declared ones, then `remaining` if needed.
    pub waves: Vec<WaveDef>,
    /// How long a changed Instance may take to be COMPLETE and healthy (`spec.progressDeadline`).
    pub progress_deadline_secs: u64,
    /// How long a wave's changed Instances must stay healthy together before the next starts.
    pub min_success_secs: u64,
    /// `(name, CEL condition)`, each compiled once here.
    pub rules: Vec<(String, String)>,
    /// How many Instances may fail (`spec.maxFailures`, default 0) before `on_failure`.
    pub max_failures: Amount,
    /// What happens once the failure budget is exceeded: halt, or roll the changed Instances back.
    pub on_failure: OnFailure,
}

/// What makes a spec unusable; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// `spec.target` would change nothing: neither an OperatorVersion nor parameters.
    #[error("spec.target names neither an operatorVersion nor parameters")]
    NoTarget,
    /// The field (its path, e.g. `spec.waves[0].size`) and what is wrong with it.
    #[error("{0}: {1}")]
    Field(String, String),
    /// Two waves share a name, so the status could not tell them apart.
    #[error("spec.waves: two waves are named {0:?}")]
    DuplicateWave(String),
}

fn field(name: impl Into<String>, e: impl std::fmt::Display) -> SpecError {
    SpecError::Field(name.into(), e.to_string())
}

/// Reads and checks `spec` (see the module docs).
pub fn settings(spec: &RolloutSpec) -> Result<Settings, SpecError> {
    if spec.target.operator_version.as_deref().is_none_or(str::is_empty) && spec.target.parameters.is_empty()
    {
        return Err(SpecError::NoTarget);
    }
    spec.selector.validate().map_err(|e| field("spec.selector", e))?;
    let duration = |name: &str, v: Option<&str>, default: &str| {
        parse_duration(v.unwrap_or(default)).map_err(|e| field(name, e))
    };
    let amount = |name: String, a: &Option<Amount>| -> Result<(), SpecError> {
        match a {
            Some(a) => a.of(100).map(|_| ()).map_err(|e| field(name, e)),
            None => Ok(()),
        }
    };
    amount("spec.maxConcurrent".into(), &spec.max_concurrent)?;
    amount("spec.maxFailures".into(), &spec.max_failures)?;
    let mut rules = Vec::new();
    for (i, r) in spec.gate.rules.iter().enumerate() {
        kudo_package::autopilot::compile_condition(&r.condition)
            .map_err(|e| field(format!("spec.gate.rules[{i}] ({})", r.name), e))?;
        rules.push((r.name.clone(), r.condition.clone()));
    }
    let waves = waves(spec)?;
    for (i, w) in spec.waves.iter().enumerate() {
        amount(format!("spec.waves[{i}].size"), &w.size)?;
        amount(format!("spec.waves[{i}].maxConcurrent"), &w.max_concurrent)?;
        if let Some(s) = &w.selector {
            s.validate()
                .map_err(|e| field(format!("spec.waves[{i}].selector"), e))?;
        }
    }
    Ok(Settings {
        waves,
        progress_deadline_secs: duration(
            "spec.progressDeadline",
            spec.progress_deadline.as_deref(),
            DEFAULT_PROGRESS_DEADLINE,
        )?,
        min_success_secs: duration(
            "spec.gate.minSuccessTime",
            spec.gate.min_success_time.as_deref(),
            "0",
        )?,
        rules,
        max_failures: spec.max_failures.clone().unwrap_or(Amount::Count(0)),
        on_failure: spec.on_failure,
    })
}

/// The canary (`spec.canary`, default 1), the declared waves (named `wave-N` unless named), and
/// [`REMAINING`] unless the last of them takes every Instance left.
fn waves(spec: &RolloutSpec) -> Result<Vec<WaveDef>, SpecError> {
    let mut out = Vec::new();
    let canary = spec.canary.unwrap_or(1);
    if canary > 0 {
        out.push(WaveDef {
            name: CANARY.into(),
            size: Some(Amount::Count(u64::from(canary))),
            selector: None,
            max_concurrent: None,
            approval: false,
        });
    }
    for (i, w) in spec.waves.iter().enumerate() {
        let name = if w.name.is_empty() {
            format!("wave-{}", i + 1)
        } else {
            w.name.clone()
        };
        if out.iter().any(|o: &WaveDef| o.name == name) || name == REMAINING {
            return Err(SpecError::DuplicateWave(name));
        }
        out.push(WaveDef {
            name,
            size: w.size.clone(),
            selector: w.selector.clone(),
            max_concurrent: w.max_concurrent.clone(),
            approval: w.approval,
        });
    }
    let unbounded = |w: &WaveDef| w.size.is_none() && w.selector.is_none();
    if !out.last().is_some_and(unbounded) {
        out.push(WaveDef {
            name: REMAINING.into(),
            size: None,
            selector: None,
            max_concurrent: spec.waves.last().and_then(|w| w.max_concurrent.clone()),
            approval: spec.waves.last().is_some_and(|w| w.approval),
        });
    }
    Ok(out)
}

impl Settings {
    /// How many Instances of wave `wave` (of `in_wave`) may change at once.
    pub fn concurrency(&self, wave: &WaveDef, default: Option<&Amount>, in_wave: u64) -> u64 {
        let limit = wave.max_concurrent.as_ref().or(default);
        limit.and_then(|a| a.of(in_wave).ok()).unwrap_or(in_wave).max(1)
    }

    /// The failure budget of `total` Instances.
    pub fn budget(&self, total: u64) -> u64 {
        self.max_failures.floor_of(total).unwrap_or(0)
    }
}
