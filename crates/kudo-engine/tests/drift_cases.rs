//! The `Drifted` condition after a drift check (`kudo_engine::reconcile::drift_condition`).

use kudo_api::Condition;
use kudo_engine::reconcile::{DRIFTED, DriftFound, Effect, drift_condition};
use kudo_engine::{EventType, Timestamp};

fn now() -> Timestamp {
    Timestamp::parse("2026-01-01T00:00:00Z").unwrap()
}

fn events(effects: &[Effect]) -> Vec<(EventType, String)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Event { type_, reason, .. } => Some((*type_, reason.clone())),
            _ => None,
        })
        .collect()
}

fn drifted(c: &[Condition]) -> Option<&Condition> {
    c.iter().find(|c| c.type_ == DRIFTED)
}

#[test]
fn reported_drift_sets_the_condition_and_warns_once() {
    let objs = vec!["ConfigMap ns/a: changed".to_string()];
    let found = DriftFound {
        report: true,
        drifted: &objs,
        failed: false,
    };
    let mut conds = Vec::new();
    let first = drift_condition(found, &mut conds, Some(3), now());
    assert_eq!(
        events(&first),
        [(EventType::Warning, "DriftDetected".to_string())]
    );
    let c = drifted(&conds).expect("Drifted");
    assert_eq!((c.status.as_str(), c.observed_generation), ("True", Some(3)));
    assert!(c.message.contains("ConfigMap ns/a"), "{}", c.message);
    // The same finding again: no second Warning.
    let again = drift_condition(found, &mut conds, Some(3), now());
    assert!(events(&again).is_empty());
    // Another finding: told again.
    let more = vec![
        "ConfigMap ns/a: changed".to_string(),
        "Secret ns/b: deleted".to_string(),
    ];
    let changed = drift_condition(
        DriftFound {
            drifted: &more,
            ..found
        },
        &mut conds,
        Some(3),
        now(),
    );
    assert_eq!(events(&changed).len(), 1);
}

#[test]
fn a_clean_check_clears_the_condition_a_failed_one_keeps_it() {
    let objs = vec!["ConfigMap ns/a: changed".to_string()];
    let mut conds = Vec::new();
    let found = DriftFound {
        report: true,
        drifted: &objs,
        failed: false,
    };
    drift_condition(found, &mut conds, None, now());
    let failed = DriftFound {
        report: true,
        drifted: &[],
        failed: true,
    };
    drift_condition(failed, &mut conds, None, now());
    assert!(drifted(&conds).is_some(), "a failed check proves nothing");
    let clean = DriftFound {
        failed: false,
        ..failed
    };
    let effects = drift_condition(clean, &mut conds, None, now());
    assert!(drifted(&conds).is_none());
    assert!(effects.is_empty());
}

#[test]
fn repaired_drift_under_the_default_policy_sets_no_condition() {
    let objs = vec!["ConfigMap ns/a: changed".to_string()];
    let mut conds = Vec::new();
    let found = DriftFound {
        report: false,
        drifted: &objs,
        failed: false,
    };
    assert!(drift_condition(found, &mut conds, None, now()).is_empty());
    assert!(drifted(&conds).is_none());
}
