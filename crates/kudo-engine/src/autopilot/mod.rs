//! Autopilot rules (plan field `when`, a kudo-rs extension): when a rule fires, how its condition
//! is evaluated, and the evaluation of an Instance's rules in one reconcile ([`Rules`]). Pure: the
//! manager reads the watched objects and the clock and passes them in.
//!
//! Semantics:
//! * A condition must hold **continuously** for `for`: a single evaluation to false (or a missing
//!   object, or an evaluation error) resets the window.
//! * After a firing the rule stays quiet for `cooldown`, whatever the condition does.
//! * **While another plan is scheduled or running, a rule does not fire and nothing is queued**:
//!   its window keeps counting, and once the plan has ended the rule fires at the next evaluation
//!   if the condition still holds (the end of a plan wakes the Instance). Queuing would run a
//!   heal for a state the running plan may already have changed.
//! * Times are kept in whole seconds (like every Kubernetes timestamp), so a non-zero `for` or
//!   `cooldown` is honoured to the next whole second (never shorter than written).

use std::collections::BTreeMap;

use crate::time::Timestamp;

mod evaluation;

pub use evaluation::{
    AUTOPILOT_RULE_ERROR, AUTOPILOT_TRIGGERED, Evaluation, ReadError, RuleRead, Rules, has_rules, rule_key,
    triggered_message,
};

/// What one evaluation of a rule sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleInput {
    /// The condition's value now (false for a missing object or an evaluation error).
    pub condition: bool,
    /// Since when the condition has held (from `status.autopilot`).
    pub holding_since: Option<Timestamp>,
    /// When the rule last fired.
    pub last_fired: Option<Timestamp>,
    /// `for` in whole seconds (rounded up).
    pub for_secs: u64,
    /// `cooldown` in whole seconds (rounded up).
    pub cooldown_secs: u64,
    /// The manager's clock at this reconcile.
    pub now: Timestamp,
    /// A plan is scheduled or running on the Instance.
    pub plan_running: bool,
}

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleDecision {
    /// Start the plan now.
    Fire,
    /// The condition holds but the rule may not fire yet (its `for` window or cooldown runs, or
    /// a plan runs): evaluate again at `until` (`None`: when the running plan ends).
    Hold {
        /// When to evaluate again; `None`: when the running plan ends.
        until: Option<Timestamp>,
    },
    /// The condition does not hold: nothing to wait for.
    Idle,
}

/// The decision and the rule's new `holdingSince`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleOutcome {
    /// Fire, hold or idle.
    pub decision: RuleDecision,
    /// The `holdingSince` to record in `status.autopilot`; `None` resets the window.
    pub holding_since: Option<Timestamp>,
}

/// Seconds that must have passed since `from` for a window of `secs` to be over, given that both
/// instants are truncated to the second (see the module docs).
fn window_end(from: Timestamp, secs: u64) -> Timestamp {
    if secs == 0 {
        from
    } else {
        from.plus_seconds(secs + 1)
    }
}

/// Decides one rule (see the module docs for the semantics).
pub fn decide_rule(i: &RuleInput) -> RuleOutcome {
    if !i.condition {
        return RuleOutcome {
            decision: RuleDecision::Idle,
            holding_since: None,
        };
    }
    let since = i.holding_since.filter(|s| *s <= i.now).unwrap_or(i.now);
    let hold = |until| RuleOutcome {
        decision: RuleDecision::Hold { until },
        holding_since: Some(since),
    };
    let held_until = window_end(since, i.for_secs);
    let cooled_until = i.last_fired.map(|f| window_end(f, i.cooldown_secs));
    // The later of the two ends. With `for` and `cooldown` both 0 a rule whose condition stays
    // true fires again as soon as no plan runs: the author asked for that.
    let ready_at = cooled_until.map_or(held_until, |c| c.max(held_until));
    if i.now < ready_at {
        return hold(Some(ready_at));
    }
    if i.plan_running {
        return hold(None);
    }
    RuleOutcome {
        decision: RuleDecision::Fire,
        // A new window starts: the rule fires again only after another full `for` (and cooldown).
        holding_since: None,
    }
}

/// Why an autopilot evaluation could not produce a boolean.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The condition does not compile as CEL.
    #[error("{0}")]
    Compile(#[from] kudo_package::autopilot::ConditionError),
    /// CEL evaluation failed, e.g. a missing field of `object` or a type error.
    #[error("evaluation failed: {0}")]
    Execution(String),
    /// The condition evaluated to a non-boolean value (shown).
    #[error("the condition returned {0}, not a bool")]
    NotBool(String),
    /// The watched object cannot be converted to a CEL value.
    #[error("the watched object cannot be given to CEL: {0}")]
    Input(String),
}

/// Evaluates a rule condition with `object` (the watched resource as JSON) and `params`.
pub fn evaluate(
    condition: &str,
    object: &serde_json::Value,
    params: &BTreeMap<String, String>,
) -> Result<bool, EvalError> {
    let program = kudo_package::autopilot::compile_condition(condition)?;
    let mut ctx = cel_interpreter::Context::default();
    let obj = cel_interpreter::to_value(object).map_err(|e| EvalError::Input(e.to_string()))?;
    ctx.add_variable_from_value("object", obj);
    let params: std::collections::HashMap<String, String> = params.clone().into_iter().collect();
    ctx.add_variable_from_value("params", params);
    match program.execute(&ctx) {
        Ok(cel_interpreter::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(EvalError::NotBool(format!("{other:?}"))),
        Err(e) => Err(EvalError::Execution(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_unix(1_000_000 + s)
    }

    fn input(condition: bool) -> RuleInput {
        RuleInput {
            condition,
            holding_since: None,
            last_fired: None,
            for_secs: 0,
            cooldown_secs: 0,
            now: t(0),
            plan_running: false,
        }
    }

    #[test]
    fn false_is_idle_and_resets_the_window() {
        let mut i = input(false);
        i.holding_since = Some(t(-10));
        i.for_secs = 30;
        assert_eq!(
            decide_rule(&i),
            RuleOutcome {
                decision: RuleDecision::Idle,
                holding_since: None
            }
        );
    }

    #[test]
    fn zero_for_fires_at_once() {
        let o = decide_rule(&input(true));
        assert_eq!(o.decision, RuleDecision::Fire);
        assert_eq!(o.holding_since, None);
    }

    #[test]
    fn for_window_starts_holds_and_fires_after_the_whole_window() {
        let mut i = input(true);
        i.for_secs = 30;
        let o = decide_rule(&i);
        assert_eq!(o.holding_since, Some(t(0)));
        // rounded up: truncated timestamps could otherwise fire up to a second early
        assert_eq!(o.decision, RuleDecision::Hold { until: Some(t(31)) });
        i.holding_since = o.holding_since;
        i.now = t(30);
        assert_eq!(
            decide_rule(&i).decision,
            RuleDecision::Hold { until: Some(t(31)) }
        );
        i.now = t(31);
        assert_eq!(decide_rule(&i).decision, RuleDecision::Fire);
    }

    #[test]
    fn a_false_in_between_restarts_the_window() {
        let mut i = input(true);
        i.for_secs = 5;
        i.holding_since = Some(t(0));
        i.now = t(3);
        let o = decide_rule(&RuleInput {
            condition: false,
            ..i
        });
        assert_eq!(o.holding_since, None);
        i.holding_since = o.holding_since;
        i.now = t(4);
        let o = decide_rule(&i);
        assert_eq!(o.holding_since, Some(t(4)));
        assert_eq!(o.decision, RuleDecision::Hold { until: Some(t(10)) });
    }

    #[test]
    fn cooldown_blocks_until_over() {
        let mut i = input(true);
        i.cooldown_secs = 60;
        i.last_fired = Some(t(-10));
        assert_eq!(
            decide_rule(&i).decision,
            RuleDecision::Hold { until: Some(t(51)) }
        );
        i.now = t(51);
        assert_eq!(decide_rule(&i).decision, RuleDecision::Fire);
    }

    #[test]
    fn the_later_of_for_and_cooldown_counts() {
        let mut i = input(true);
        i.for_secs = 10;
        i.cooldown_secs = 3;
        i.last_fired = Some(t(0));
        i.holding_since = Some(t(1));
        i.now = t(5);
        assert_eq!(
            decide_rule(&i).decision,
            RuleDecision::Hold { until: Some(t(12)) }
        );
        i.for_secs = 0;
        i.cooldown_secs = 20;
        assert_eq!(
            decide_rule(&i).decision,
            RuleDecision::Hold { until: Some(t(21)) }
        );
    }

    #[test]
    fn zero_for_and_cooldown_fire_again_once_no_plan_runs() {
        let mut i = input(true);
        i.last_fired = Some(t(0));
        assert_eq!(decide_rule(&i).decision, RuleDecision::Fire);
        i.now = t(1);
        assert_eq!(decide_rule(&i).decision, RuleDecision::Fire);
    }

    #[test]
    fn a_running_plan_makes_a_ready_rule_wait_without_losing_its_window() {
        let mut i = input(true);
        i.for_secs = 2;
        i.holding_since = Some(t(0));
        i.now = t(10);
        i.plan_running = true;
        let o = decide_rule(&i);
        assert_eq!(o.decision, RuleDecision::Hold { until: None });
        assert_eq!(o.holding_since, Some(t(0)));
        i.plan_running = false;
        assert_eq!(decide_rule(&i).decision, RuleDecision::Fire);
    }

    #[test]
    fn a_running_plan_does_not_hide_a_pending_window() {
        let mut i = input(true);
        i.for_secs = 20;
        i.plan_running = true;
        assert_eq!(
            decide_rule(&i).decision,
            RuleDecision::Hold { until: Some(t(21)) }
        );
    }

    #[test]
    fn a_holding_since_in_the_future_is_treated_as_now() {
        let mut i = input(true);
        i.for_secs = 5;
        i.holding_since = Some(t(100));
        let o = decide_rule(&i);
        assert_eq!(o.holding_since, Some(t(0)));
    }

    #[test]
    fn cel_conditions() {
        let obj = serde_json::json!({"data": {"load": "high"}, "status": {"readyReplicas": 1}, "spec": {"replicas": 3}});
        let params = BTreeMap::from([("LIMIT".to_string(), "high".to_string())]);
        assert_eq!(evaluate(r#"object.data.load == "high""#, &obj, &params), Ok(true));
        assert_eq!(
            evaluate("object.data.load == params.LIMIT", &obj, &params),
            Ok(true)
        );
        assert_eq!(
            evaluate(
                "object.status.readyReplicas < object.spec.replicas",
                &obj,
                &params
            ),
            Ok(true)
        );
        assert!(matches!(
            evaluate("object.data.missing == 1", &obj, &params),
            Err(EvalError::Execution(_))
        ));
        assert!(matches!(
            evaluate("object.data", &obj, &params),
            Err(EvalError::NotBool(_))
        ));
        assert!(matches!(
            evaluate("object.data ==", &obj, &params),
            Err(EvalError::Compile(_))
        ));
        assert_eq!(evaluate(r#"has(object.data.load)"#, &obj, &params), Ok(true));
    }
}
