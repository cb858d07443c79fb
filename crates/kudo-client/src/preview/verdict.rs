//! KUDO's decision on a previewed change, in words: which plan would run and why, or the refusal.

use kudo_engine::triggers::{Decision, ScheduleReason};

use super::Change;

/// What the change would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `plan` would run, because of `why`.
    Run {
        /// The plan.
        plan: String,
        /// Why it runs.
        why: String,
    },
    /// Admitted, but no plan would run.
    Nothing(String),
    /// KUDO's admission refuses the change (its message).
    Refused(String),
}

impl Verdict {
    /// The decision line: `plan update would run (parameters changed: NODE_COUNT)`.
    pub fn line(&self) -> String {
        match self {
            Verdict::Run { plan, why } => format!("plan {plan} would run ({why})"),
            Verdict::Nothing(why) => format!("no plan would run ({why})"),
            Verdict::Refused(msg) => format!("refused: {msg}"),
        }
    }
}

/// Why a plan is scheduled, in words.
pub fn reason_text(reason: &ScheduleReason, old_ov: &str, new_ov: &str) -> String {
    match reason {
        ScheduleReason::Install => "install".into(),
        ScheduleReason::Upgrade => format!("operator version changes: {old_ov} -> {new_ov}"),
        ScheduleReason::ParameterUpdate(names) => format!("parameters changed: {}", names.join(", ")),
        ScheduleReason::DirectTrigger => "triggered directly".into(),
        ScheduleReason::Retrigger => "triggered again".into(),
    }
}

/// KUDO's decision on `change` (the CLI's own admission call, `refuse_denied`), then the plan a
/// rotation of sensitive values (`rotated`: parameters whose Secret data would change) triggers.
pub fn verdict(change: &Change<'_>, rotated: &[String]) -> Verdict {
    let decision =
        match crate::checks::refuse_denied(change.instance, change.proposed, change.old_ov, change.new_ov) {
            Ok(d) => d,
            Err(e) => return Verdict::Refused(e.to_string()),
        };
    let why = |d: &Decision| match d {
        Decision::Schedule { reason, .. } => {
            reason_text(reason, &change.old_ov.metadata.name, &change.new_ov.metadata.name)
        }
        _ => "requested".to_string(),
    };
    if let Some(plan) = change.plan {
        return Verdict::Run {
            plan: plan.to_string(),
            why: why(&decision),
        };
    }
    match &decision {
        Decision::Schedule { plan, .. } => Verdict::Run {
            plan: plan.clone(),
            why: why(&decision),
        },
        Decision::Cancel { plan, .. } => {
            Verdict::Nothing(format!("the running {plan} plan would be cancelled"))
        }
        Decision::Deny { message } => Verdict::Refused(message.clone()),
        Decision::NoChange | Decision::ClearTerminal if !rotated.is_empty() => rotation(change, rotated),
        Decision::NoChange | Decision::ClearTerminal => {
            Verdict::Nothing("nothing that triggers a plan changes".into())
        }
    }
}

/// The plan a rotation of the `rotated` sensitive parameters triggers, if any.
fn rotation(change: &Change<'_>, rotated: &[String]) -> Verdict {
    let params: Vec<_> = change
        .new_ov
        .spec
        .parameters
        .iter()
        .filter(|p| rotated.contains(&p.name))
        .collect();
    match kudo_engine::triggers::triggered_by_parameter_update(&params, change.new_ov) {
        Ok(Some(plan)) => Verdict::Run {
            plan,
            why: format!("sensitive parameters rotated: {}", rotated.join(", ")),
        },
        Ok(None) => Verdict::Nothing("nothing that triggers a plan changes".into()),
        Err(e) => Verdict::Refused(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_lines_name_the_plan_and_why() {
        let run = Verdict::Run {
            plan: "update".into(),
            why: reason_text(
                &ScheduleReason::ParameterUpdate(vec!["NODE_COUNT".into()]),
                "a",
                "b",
            ),
        };
        assert_eq!(
            run.line(),
            "plan update would run (parameters changed: NODE_COUNT)"
        );
        assert_eq!(
            Verdict::Refused("updating instance x: no".into()).line(),
            "refused: updating instance x: no"
        );
    }
}
