//! One reconcile's evaluation of an Instance's autopilot rules (`kudo_engine::autopilot::Rules`):
//! what each rule reads, and what its object means for the rule's state, a firing, the errors and
//! the requeue. The manager only reads the objects in between.

use std::collections::BTreeMap;
use std::time::Duration;

use kudo_api::{
    AutopilotResource, AutopilotRule, AutopilotRuleStatus, Instance, InstanceStatus, ObjectMeta,
    OperatorVersion, Parameter,
};
use kudo_engine::Timestamp;
use kudo_engine::autopilot::{Evaluation, ReadError, RuleRead, Rules};
use kudo_engine::initiate::Origin;
use serde_json::{Value, json};

const NOW: &str = "2026-01-02T03:00:00Z";

fn now() -> Timestamp {
    Timestamp::parse(NOW).unwrap()
}

fn rule(for_: &str) -> AutopilotRule {
    AutopilotRule {
        resource: AutopilotResource {
            api_version: "apps/v1".into(),
            kind: "StatefulSet".into(),
            name: "{{ .Name }}-db".into(),
        },
        condition: "object.status.readyReplicas < object.spec.replicas".into(),
        for_: for_.into(),
        cooldown: "10m".into(),
        set_parameters: BTreeMap::from([("REPLICAS".into(), "{{ .Params.REPLICAS }}".into())]),
    }
}

fn ov(rule: AutopilotRule) -> OperatorVersion {
    let mut ov: OperatorVersion = serde_json::from_value(json!({
        "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
        "metadata": {"name": "op-0.1.0", "namespace": "ns"}, "spec": {}
    }))
    .unwrap();
    ov.spec.parameters = vec![Parameter {
        name: "REPLICAS".into(),
        default: Some("3".into()),
        ..Default::default()
    }];
    let update = kudo_api::Plan {
        when: vec![rule],
        ..Default::default()
    };
    ov.spec.plans.insert("update".into(), update);
    ov
}

fn inst(state: Option<AutopilotRuleStatus>) -> Instance {
    let mut status = InstanceStatus::default();
    if let Some(st) = state {
        status.autopilot.insert("update/0".into(), st);
    }
    Instance {
        api_version: "kudo.dev/v1beta1".into(),
        kind: "Instance".into(),
        metadata: ObjectMeta {
            name: "db".into(),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        spec: serde_json::from_value(json!({"operatorVersion": {"name": "op-0.1.0"}})).unwrap(),
        status: Some(status),
    }
}

fn lagging() -> Value {
    json!({"spec": {"replicas": 3}, "status": {"readyReplicas": 1}})
}

/// Evaluates the one rule, the manager answering its read with `object`.
fn evaluate(
    inst: &Instance,
    ov: &OperatorVersion,
    waiting: bool,
    object: Result<Option<Value>, ReadError>,
) -> (Vec<RuleRead>, Evaluation) {
    let mut rules = Rules::new(inst, ov, waiting, now());
    let mut reads = Vec::new();
    while let Some(read) = rules.next_read() {
        reads.push(read);
        rules.report(object.clone());
    }
    (reads, rules.finish())
}

#[test]
fn a_rule_reads_the_object_its_templates_name() {
    let (reads, _) = evaluate(&inst(None), &ov(rule("")), false, Ok(None));
    assert_eq!(
        reads,
        [RuleRead {
            at: "plan \"update\" when[0]".into(),
            api_version: "apps/v1".into(),
            kind: "StatefulSet".into(),
            name: "db-db".into(),
        }]
    );
}

#[test]
fn a_missing_object_is_a_false_condition() {
    let (_, ev) = evaluate(&inst(None), &ov(rule("")), false, Ok(None));
    assert_eq!(ev, Evaluation::default());
}

#[test]
fn a_holding_condition_fires_with_its_parameters_and_what_it_saw() {
    let (_, ev) = evaluate(&inst(None), &ov(rule("")), false, Ok(Some(lagging())));
    let fire = ev.fire.expect("fires");
    assert_eq!(fire.plan, "update");
    assert_eq!(
        fire.set_parameters,
        BTreeMap::from([("REPLICAS".into(), "3".into())])
    );
    let Origin::Autopilot { rule, observed } = &fire.origin else {
        panic!("an autopilot firing");
    };
    assert_eq!(rule, "update/0");
    assert_eq!(
        observed,
        "StatefulSet db-db: object.status.readyReplicas=1, object.spec.replicas=3"
    );
    assert_eq!(ev.states["update/0"].last_fired.as_deref(), Some(NOW));
}

#[test]
fn a_busy_instance_holds_a_ready_rule_until_the_plan_ends() {
    let (_, ev) = evaluate(&inst(None), &ov(rule("")), true, Ok(Some(lagging())));
    assert_eq!(ev.fire, None);
    assert_eq!(ev.states["update/0"].holding_since.as_deref(), Some(NOW));
    assert_eq!(ev.requeue, None, "the plan's end wakes the Instance");
}

#[test]
fn a_cooldown_holds_and_wakes_when_it_is_over() {
    let fired = AutopilotRuleStatus {
        last_fired: Some("2026-01-02T02:59:00Z".into()),
        ..Default::default()
    };
    let (_, ev) = evaluate(&inst(Some(fired)), &ov(rule("")), false, Ok(Some(lagging())));
    assert_eq!(ev.fire, None);
    // Ten minutes after the firing, and the second it was truncated to.
    assert_eq!(ev.requeue, Some(Duration::from_secs(9 * 60 + 1)));
}

#[test]
fn a_read_error_is_reported_once() {
    let failed = Err(ReadError::Read {
        kind: "StatefulSet".into(),
        name: "db-db".into(),
        message: "500".into(),
    });
    let (_, ev) = evaluate(&inst(None), &ov(rule("")), false, failed.clone());
    assert_eq!(ev.errors.len(), 1);
    let state = ev.states["update/0"].clone();
    // The error says which rule, then what failed.
    assert_eq!(
        state.last_error,
        "plan \"update\" when[0]: reading StatefulSet db-db failed: 500"
    );
    let (_, again) = evaluate(&inst(Some(state)), &ov(rule("")), false, failed);
    assert!(again.errors.is_empty(), "the same error is not reported twice");
    let (_, fixed) = evaluate(
        &inst(Some(again.states["update/0"].clone())),
        &ov(rule("")),
        false,
        Ok(None),
    );
    assert!(fixed.states.is_empty(), "a clean evaluation clears the error");
}

#[test]
fn a_rule_whose_window_does_not_parse_is_judged_without_a_read() {
    let (reads, ev) = evaluate(&inst(None), &ov(rule("soon")), false, Ok(Some(lagging())));
    assert!(reads.is_empty());
    assert_eq!(ev.fire, None);
    let (key, msg) = &ev.errors[0];
    assert_eq!(key, "update/0");
    assert!(msg.contains("when[0].for"), "{msg}");
}

#[test]
fn a_condition_that_is_no_bool_is_an_error_naming_the_object() {
    let mut r = rule("");
    r.condition = "object.spec.replicas".into();
    let (_, ev) = evaluate(&inst(None), &ov(r), false, Ok(Some(lagging())));
    let (_, msg) = &ev.errors[0];
    assert!(msg.contains("on StatefulSet db-db"), "{msg}");
    assert_eq!(ev.fire, None);
}

#[test]
fn a_denied_firing_becomes_the_rules_error_once() {
    let (_, mut ev) = evaluate(&inst(None), &ov(rule("")), false, Ok(Some(lagging())));
    ev.denied("a plan is running");
    assert_eq!(ev.fire, None);
    let (_, msg) = &ev.errors[0];
    assert_eq!(
        msg,
        "autopilot rule update/0: plan \"update\" not started: a plan is running"
    );
    assert_eq!(&ev.states["update/0"].last_error, msg);
}
