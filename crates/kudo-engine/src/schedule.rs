//! Scheduled plans (kudo-rs extension): when a plan's `schedule:` is due, as a pure rule.
//!
//! A plan may carry `schedule:` — a 5-field cron expression (UTC), one of `@hourly`, `@daily`,
//! `@weekly`, `@monthly`, `@yearly` (also `@annually`, `@midnight`), or `@every <Go duration>`. The
//! manager renders it (it may be a template over parameters), [`parse`]s it (an empty result means
//! "not scheduled") and asks [`decide`] on every reconcile.
//!
//! The rule is close to Kubernetes' CronJob controller:
//! * The first occurrence to act on is the one after the last scheduled time kept in
//!   `status.schedules.<plan>.lastScheduleTime`; before any, the `nextScheduleTime` recorded when
//!   the schedule was first seen (or the first occurrence after *now* when it is seen for the first
//!   time: a schedule set on an old Instance does not fire at once for an occurrence it never
//!   had). Both survive a manager restart, so a restart never fires an occurrence twice.
//! * Missed occurrences (the manager was down, or the Instance was busy for a long time) fire
//!   **once**: the most recent one that is due, never a burst of N runs.
//! * When a plan (any plan, including an earlier run of this one) is scheduled or running at the
//!   due time, the occurrence is skipped ([`Decision::Skip`]) — it still counts as the last scheduled
//!   time, so it is reported once and not retried in a loop.
//! * `@every D` occurrences lie on the grid `first + k·D`; after a run at `t` the next one is
//!   `t + D`.
//!
//! Cron parsing and the calendar arithmetic are the `croner` crate's; durations are the workspace's
//! Go-duration parser ([`crate::time::parse_duration`]).

use chrono::{DateTime, TimeZone as _, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use thiserror::Error;

use crate::time::{Timestamp, parse_duration};

/// A `schedule:` that cannot be used; the message names the expression.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScheduleError {
    #[error(
        "invalid schedule {expr:?}: {reason} (expected a 5-field cron expression in UTC, @hourly, @daily, @weekly, @monthly, @yearly or @every <duration>)"
    )]
    /// The rendered `schedule:` is no usable cron expression, nickname or `@every` duration.
    Invalid {
        /// The schedule as rendered from the plan's `schedule:`.
        expr: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A parsed, non-empty schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// A cron expression (5 fields or an `@` nickname), evaluated in UTC.
    Cron {
        /// The expression as written, for messages.
        expr: String,
        /// The parsed expression.
        cron: Box<Cron>,
    },
    /// `@every D`: every `secs` seconds (at least 1).
    Every {
        /// The expression as written, for messages.
        expr: String,
        /// The interval in whole seconds.
        secs: u64,
    },
}

const NICKNAMES: [&str; 7] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// Parses a rendered `schedule:`. Blank (after trimming) means the plan is not scheduled: `Ok(None)`.
pub fn parse(expr: &str) -> Result<Option<Schedule>, ScheduleError> {
    let t = expr.trim();
    if t.is_empty() {
        return Ok(None);
    }
    let invalid = |reason: String| ScheduleError::Invalid {
        expr: expr.to_string(),
        reason,
    };
    if let Some(rest) = t.strip_prefix("@every") {
        if !rest.starts_with(char::is_whitespace) {
            return Err(invalid("@every needs a duration, e.g. \"@every 1h\"".into()));
        }
        let secs = parse_duration(rest.trim()).map_err(|e| invalid(e.to_string()))?;
        if secs == 0 {
            return Err(invalid("@every needs a duration of at least 1s".into()));
        }
        return Ok(Some(Schedule::Every {
            expr: t.to_string(),
            secs,
        }));
    }
    if t.starts_with('@') {
        let lower = t.to_ascii_lowercase();
        if !NICKNAMES.contains(&lower.as_str()) {
            return Err(invalid(format!("unknown nickname {t:?}")));
        }
    } else if t.split_whitespace().count() != 5 {
        return Err(invalid(format!(
            "a cron expression has 5 fields (minute hour day-of-month month day-of-week), this one has {}",
            t.split_whitespace().count()
        )));
    }
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    let cron = parser.parse(t).map_err(|e| invalid(e.to_string()))?;
    // A pattern that never matches (e.g. 30 February) is as useless as a syntax error.
    let probe = Utc.timestamp_opt(0, 0).single().unwrap_or_default();
    if cron.find_next_occurrence(&probe, false).is_err() {
        return Err(invalid("the expression never matches".into()));
    }
    Ok(Some(Schedule::Cron {
        expr: t.to_string(),
        cron: Box::new(cron),
    }))
}

fn to_chrono(t: Timestamp) -> DateTime<Utc> {
    Utc.timestamp_opt(t.unix(), 0).single().unwrap_or_default()
}

impl Schedule {
    /// The expression as written (trimmed).
    pub fn expr(&self) -> &str {
        match self {
            Schedule::Cron { expr, .. } | Schedule::Every { expr, .. } => expr,
        }
    }

    /// The first occurrence strictly after `t` (`None` only if a cron pattern has no further match).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        match self {
            Schedule::Every { secs, .. } => Some(t.plus_seconds(*secs)),
            Schedule::Cron { cron, .. } => cron
                .find_next_occurrence(&to_chrono(t), false)
                .ok()
                .map(|d| Timestamp::from_unix(d.timestamp())),
        }
    }

    /// The most recent occurrence in `[first, now]`, if any — the one a late manager fires.
    fn latest_due(&self, first: Timestamp, now: Timestamp) -> Option<Timestamp> {
        if first > now {
            return None;
        }
        match self {
            Schedule::Every { secs, .. } => {
                let k = (now.seconds_since(first).max(0) as u64) / secs;
                Some(first.plus_seconds(k * secs))
            }
            Schedule::Cron { cron, .. } => {
                let prev = cron
                    .find_previous_occurrence(&to_chrono(now), true)
                    .ok()
                    .map(|d| Timestamp::from_unix(d.timestamp()))?;
                Some(prev.max(first))
            }
        }
    }
}

/// What to do about a scheduled plan now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Start the plan for occurrence `due`; record `due` as the last scheduled time; the next
    /// occurrence after that is `next`.
    Due {
        /// The occurrence to run.
        due: Timestamp,
        /// The occurrence after it; `None` when there is none.
        next: Option<Timestamp>,
    },
    /// Occurrence `due` came while a plan runs: skip it (record `due` as the last scheduled time,
    /// report `ScheduledPlanSkipped`).
    Skip {
        /// The occurrence skipped.
        due: Timestamp,
        /// The occurrence after it; `None` when there is none.
        next: Option<Timestamp>,
    },
    /// Nothing is due; look again at `next` (`None`: the pattern never matches again).
    Wait {
        /// The next occurrence; `None` when there is none.
        next: Option<Timestamp>,
    },
}

/// What is known about a scheduled plan's past: `status.schedules.<plan>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct History {
    /// `lastScheduleTime`: the last occurrence acted on (run or skipped).
    pub last: Option<Timestamp>,
    /// `nextScheduleTime` as recorded (before any occurrence: the first one, fixed when the
    /// schedule was first seen).
    pub next: Option<Timestamp>,
}

/// Decides about one scheduled plan at `now`; `plan_running`: whether any plan is scheduled or
/// running right now. The decision's `next` is what to record as `nextScheduleTime`.
pub fn decide(schedule: &Schedule, history: History, now: Timestamp, plan_running: bool) -> Decision {
    let first = match (history.last, history.next) {
        (Some(last), _) => schedule.next_after(last),
        // Seen before, nothing due yet: the recorded first occurrence, unless the expression
        // changed to one that comes earlier.
        (None, Some(recorded)) => Some(match schedule.next_after(now) {
            Some(fresh) => recorded.min(fresh),
            None => recorded,
        }),
        (None, None) => schedule.next_after(now),
    };
    let Some(first) = first else {
        return Decision::Wait { next: None };
    };
    match schedule.latest_due(first, now) {
        None => Decision::Wait { next: Some(first) },
        Some(due) => {
            let next = schedule.next_after(due);
            if plan_running {
                Decision::Skip { due, next }
            } else {
                Decision::Due { due, next }
            }
        }
    }
}

/// Renders and parses the `schedule:` of every plan of `ov` with the parameters of `ctx` (what
/// the manager will do), for `package verify` and `install`: one message per unusable schedule,
/// naming the plan, the expression as written and, for a template, what it rendered to.
pub fn check_schedules(
    ov: &kudo_api::OperatorVersion,
    ctx: &kudo_package::render::RenderContext,
) -> Vec<String> {
    let mut errors = Vec::new();
    for (plan, p) in &ov.spec.plans {
        let Some(written) = p.schedule.as_deref() else {
            continue;
        };
        match kudo_package::render::render_schedule(ov, plan, ctx) {
            Err(e) => errors.push(e.to_string()),
            Ok(rendered) => {
                let rendered = rendered.unwrap_or_default();
                if let Err(e) = parse(&rendered) {
                    let from = if rendered.trim() == written.trim() {
                        String::new()
                    } else {
                        format!(" (rendered from {written:?})")
                    };
                    errors.push(format!("plan {plan:?}: {e}{from}"));
                }
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }
    fn sch(s: &str) -> Schedule {
        parse(s).unwrap().unwrap()
    }

    fn ov_with(schedule: &str) -> kudo_api::OperatorVersion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion", "metadata": {"name": "x-0.1.0"},
            "spec": {
                "parameters": [{"name": "S", "default": "@daily"}],
                "plans": {"backup": {"schedule": schedule, "phases": []}, "deploy": {"phases": []}}
            }
        }))
        .unwrap()
    }

    #[test]
    fn check_schedules_renders_with_the_parameters_and_names_the_plan() {
        let ctx = |v: &str| {
            kudo_package::render::RenderContext::offline(
                "i",
                "ns",
                std::collections::BTreeMap::from([("S".to_string(), v.to_string())]),
            )
        };
        assert!(check_schedules(&ov_with("@hourly"), &ctx("")).is_empty());
        assert!(check_schedules(&ov_with("{{ .Params.S }}"), &ctx("@every 5m")).is_empty());
        assert!(
            check_schedules(&ov_with("{{ .Params.S }}"), &ctx("")).is_empty(),
            "blank = not scheduled"
        );
        let e = check_schedules(&ov_with("{{ .Params.S }}"), &ctx("every day"));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("plan \"backup\": invalid schedule \"every day\""),
            "{e:?}"
        );
        assert!(e[0].ends_with("(rendered from \"{{ .Params.S }}\")"), "{e:?}");
        let e = check_schedules(&ov_with("61 * * * *"), &ctx(""));
        assert!(
            e[0].starts_with("plan \"backup\": invalid schedule \"61 * * * *\""),
            "{e:?}"
        );
        let e = check_schedules(&ov_with("{{ .Params.S "), &ctx(""));
        assert!(e[0].contains("schedule of plan \"backup\""), "{e:?}");
    }

    #[test]
    fn blank_means_not_scheduled() {
        assert!(parse("").unwrap().is_none());
        assert!(parse("   \n").unwrap().is_none());
    }

    #[test]
    fn accepted_forms() {
        for s in [
            "*/5 * * * *",
            "0 3 * * MON",
            "0 0 1 * *",
            "@hourly",
            "@daily",
            "@weekly",
            "@monthly",
            "@yearly",
            "@every 2s",
            "@every 1h30m",
            " @every 10m ",
        ] {
            assert!(parse(s).unwrap().is_some(), "{s}");
        }
    }

    #[test]
    fn invalid_expressions_name_the_expression_and_reason() {
        for (s, why) in [
            ("* * * *", "5 fields"),
            ("0 * * * * *", "5 fields"),
            ("61 * * * *", ""),
            ("@every", "needs a duration"),
            ("@every nonsense", "Go-style duration"),
            ("@every 0s", "at least 1s"),
            ("@reboot", "unknown nickname"),
            ("@everyday", "needs a duration"),
            ("0 0 30 2 *", "never matches"),
            ("hello world", "5 fields"),
        ] {
            let e = parse(s).unwrap_err().to_string();
            assert!(e.contains(&format!("{s:?}")), "{e}");
            assert!(e.contains(why), "{s}: {e}");
        }
    }

    fn h(last: Option<&str>, next: Option<&str>) -> History {
        History {
            last: last.map(ts),
            next: next.map(ts),
        }
    }

    #[test]
    fn first_sight_waits_for_the_first_occurrence_after_now() {
        // a schedule set on an old instance does not fire for an occurrence it never had
        let now = ts("2026-01-01T12:00:00Z");
        assert_eq!(
            decide(&sch("0 3 * * *"), h(None, None), now, false),
            Decision::Wait {
                next: Some(ts("2026-01-02T03:00:00Z"))
            }
        );
        assert_eq!(
            decide(&sch("@every 2s"), h(None, None), now, false),
            Decision::Wait {
                next: Some(ts("2026-01-01T12:00:02Z"))
            }
        );
    }

    #[test]
    fn the_recorded_first_occurrence_is_kept_across_reconciles_and_restarts() {
        let rec = Some("2026-01-01T12:00:02Z");
        // one second later (another reconcile, or a restarted manager): same target, not now+2
        assert_eq!(
            decide(&sch("@every 2s"), h(None, rec), ts("2026-01-01T12:00:01Z"), false),
            Decision::Wait {
                next: Some(ts("2026-01-01T12:00:02Z"))
            }
        );
        assert_eq!(
            decide(&sch("@every 2s"), h(None, rec), ts("2026-01-01T12:00:02Z"), false),
            Decision::Due {
                due: ts("2026-01-01T12:00:02Z"),
                next: Some(ts("2026-01-01T12:00:04Z"))
            }
        );
        // the expression changed to one that comes earlier: the earlier one counts
        assert_eq!(
            decide(
                &sch("@every 2s"),
                h(None, Some("2026-01-01T13:00:00Z")),
                ts("2026-01-01T12:00:00Z"),
                false
            ),
            Decision::Wait {
                next: Some(ts("2026-01-01T12:00:02Z"))
            }
        );
    }

    #[test]
    fn due_at_the_occurrence_then_waits_for_the_next() {
        let now = ts("2026-01-01T11:00:00Z");
        let d = decide(&sch("@hourly"), h(None, Some("2026-01-01T11:00:00Z")), now, false);
        assert_eq!(
            d,
            Decision::Due {
                due: now,
                next: Some(ts("2026-01-01T12:00:00Z"))
            }
        );
        // recorded as last: same instant again → wait (restart safety: last is in the status)
        let d = decide(
            &sch("@hourly"),
            h(Some("2026-01-01T11:00:00Z"), Some("2026-01-01T12:00:00Z")),
            ts("2026-01-01T11:00:05Z"),
            false,
        );
        assert_eq!(
            d,
            Decision::Wait {
                next: Some(ts("2026-01-01T12:00:00Z"))
            }
        );
    }

    #[test]
    fn missed_runs_fire_once_not_n_times() {
        // manager down from 00:30 to 05:30 after the 00:00 run: one run, for the latest occurrence
        let now = ts("2026-01-01T05:30:00Z");
        let hist = h(Some("2026-01-01T00:00:00Z"), Some("2026-01-01T01:00:00Z"));
        let d = decide(&sch("@hourly"), hist, now, false);
        let Decision::Due { due, next } = d else {
            panic!("{d:?}")
        };
        assert_eq!(due, ts("2026-01-01T05:00:00Z"));
        assert_eq!(next, Some(ts("2026-01-01T06:00:00Z")));
        // after recording it, nothing more is due until 06:00
        assert!(matches!(
            decide(
                &sch("@hourly"),
                History {
                    last: Some(due),
                    next
                },
                now,
                false
            ),
            Decision::Wait { .. }
        ));
        // @every: the same, on the grid of the last run
        let d = decide(&sch("@every 10m"), hist, now, false);
        assert_eq!(
            d,
            Decision::Due {
                due: ts("2026-01-01T05:30:00Z"),
                next: Some(ts("2026-01-01T05:40:00Z"))
            }
        );
        // missed before the very first occurrence too
        let d = decide(&sch("@hourly"), h(None, Some("2026-01-01T01:00:00Z")), now, false);
        assert!(
            matches!(d, Decision::Due { due, .. } if due == ts("2026-01-01T05:00:00Z")),
            "{d:?}"
        );
    }

    #[test]
    fn every_is_anchored_to_the_last_run() {
        let last = Some("2026-01-01T00:00:07Z");
        let d = decide(
            &sch("@every 5s"),
            h(last, None),
            ts("2026-01-01T00:00:11Z"),
            false,
        );
        assert_eq!(
            d,
            Decision::Wait {
                next: Some(ts("2026-01-01T00:00:12Z"))
            }
        );
        let d = decide(
            &sch("@every 5s"),
            h(last, None),
            ts("2026-01-01T00:00:12Z"),
            false,
        );
        assert_eq!(
            d,
            Decision::Due {
                due: ts("2026-01-01T00:00:12Z"),
                next: Some(ts("2026-01-01T00:00:17Z"))
            }
        );
    }

    #[test]
    fn skip_while_a_plan_runs_and_only_once() {
        let now = ts("2026-01-01T00:00:02Z");
        let d = decide(
            &sch("@every 2s"),
            h(None, Some("2026-01-01T00:00:02Z")),
            now,
            true,
        );
        assert_eq!(
            d,
            Decision::Skip {
                due: now,
                next: Some(ts("2026-01-01T00:00:04Z"))
            }
        );
        // the skipped occurrence is recorded: the same instant is not skipped (reported) again
        assert!(matches!(
            decide(
                &sch("@every 2s"),
                h(Some("2026-01-01T00:00:02Z"), Some("2026-01-01T00:00:04Z")),
                now,
                true
            ),
            Decision::Wait { .. }
        ));
    }

    #[test]
    fn cron_is_utc_and_five_fields() {
        // 2026-03-02 is a Monday
        let d = decide(
            &sch("30 3 * * MON"),
            h(None, Some("2026-03-02T03:30:00Z")),
            ts("2026-03-02T03:30:00Z"),
            false,
        );
        assert!(
            matches!(d, Decision::Due { due, .. } if due == ts("2026-03-02T03:30:00Z")),
            "{d:?}"
        );
        let d = decide(
            &sch("30 3 * * MON"),
            h(Some("2026-03-02T03:30:00Z"), None),
            ts("2026-03-02T04:00:00Z"),
            false,
        );
        assert_eq!(
            d,
            Decision::Wait {
                next: Some(ts("2026-03-09T03:30:00Z"))
            }
        );
    }

    #[test]
    fn a_last_time_in_the_future_waits() {
        // clock skew between managers: never fire before the recorded last time
        let d = decide(
            &sch("@every 2s"),
            h(Some("2026-01-01T00:01:00Z"), None),
            ts("2026-01-01T00:00:30Z"),
            false,
        );
        assert_eq!(
            d,
            Decision::Wait {
                next: Some(ts("2026-01-01T00:01:02Z"))
            }
        );
    }
}
