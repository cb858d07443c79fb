//! Scheduled plans (a kudo-rs extension): a plan's templated `schedule:` makes the manager start it
//! by itself through the same admission as `kubectl kudo plan trigger` — a new run uid each time,
//! a `PlanStarted` Event saying it was scheduled, `status.schedules` with the last and next
//! occurrence, a `ScheduledPlanSkipped` Event while another plan runs, and no double run across a
//! manager restart.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{self, Env, Pkg};

fn package(dir: &std::path::Path) -> std::path::PathBuf {
    Pkg::new(dir, "sched")
        .operator(
            r#"apiVersion: kudo.dev/v1beta1
name: sched
operatorVersion: "0.1.0"
kubernetesVersion: 1.15.0
tasks:
  - name: app
    kind: Apply
    spec:
      resources:
        - cm.yaml
  - name: mark
    kind: Apply
    spec:
      resources:
        - backup.yaml
  - name: wait-forever
    kind: Dummy
    spec:
      done: false
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: app
            tasks: [app]
  backup:
    schedule: "{{ .Params.BACKUP_SCHEDULE }}"
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: mark
            tasks: [mark]
  hold:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: wait
            tasks: [wait-forever]
"#,
        )
        .params(
            r#"apiVersion: kudo.dev/v1beta1
parameters:
  - name: BACKUP_SCHEDULE
    description: When to back up; empty for manual backups only.
    default: ""
"#,
        )
        .template(
            "cm.yaml",
            r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-app
data:
  a: "1"
"#,
        )
        .template(
            "backup.yaml",
            r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-backup
data:
  plan: {{ .PlanName }}
"#,
        )
        .write()
}

pub(crate) async fn install(env: &Env, dir: &std::path::Path, name: &str, schedule: &str) {
    let pkg = package(dir);
    let params = BTreeMap::from([("BACKUP_SCHEDULE".to_string(), schedule.to_string())]);
    let res = harness::resources(&pkg, harness::NS, name, params);
    env.create(serde_json::to_value(&res.operator).unwrap()).await;
    env.create(serde_json::to_value(&res.operator_version).unwrap())
        .await;
    env.create(serde_json::to_value(&res.instance).unwrap()).await;
}

fn backup_uid(i: &Value) -> Option<String> {
    i["status"]["planStatus"]["backup"]["uid"]
        .as_str()
        .filter(|u| !u.is_empty())
        .map(str::to_string)
}

async fn scheduled_starts(env: &Env, name: &str) -> Vec<String> {
    env.events(name)
        .await
        .into_iter()
        .filter(|(r, n)| r == "PlanStarted" && n.contains("started by schedule"))
        .map(|(_, n)| n)
        .collect()
}

async fn instance(env: &Env, name: &str) -> Value {
    env.get("kudo.dev/v1beta1", "Instance", name)
        .await
        .expect("instance exists")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_2s_runs_the_plan_repeatedly_with_new_uids() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    install(&env, dir.path(), "ev", "@every 2s").await;
    env.wait_plan("ev", "deploy", "COMPLETE").await;

    let mut uids = BTreeSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    while uids.len() < 3 && std::time::Instant::now() < deadline {
        let i = instance(&env, "ev").await;
        if i["status"]["planStatus"]["backup"]["status"] == "COMPLETE"
            && let Some(u) = backup_uid(&i)
        {
            uids.insert(u);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(uids.len() >= 3, "three scheduled backup runs, saw {uids:?}");

    let i = instance(&env, "ev").await;
    let st = &i["status"]["schedules"]["backup"];
    let last = st["lastScheduleTime"].as_str().unwrap_or_else(|| panic!("{i}"));
    let next = st["nextScheduleTime"].as_str().unwrap_or_else(|| panic!("{i}"));
    let (l, n) = (
        kudo_engine::Timestamp::parse(last).unwrap(),
        kudo_engine::Timestamp::parse(next).unwrap(),
    );
    assert_eq!(n.seconds_since(l), 2, "{st}");
    assert!(env.get("v1", "ConfigMap", "ev-backup").await.is_some());

    let starts = scheduled_starts(&env, "ev").await;
    assert!(starts.len() >= 3, "{starts:?}");
    assert!(
        starts.iter().all(
            |n| n.starts_with("Plan backup (run ") && n.contains("started by schedule '@every 2s' (due ")
        ),
        "{starts:?}"
    );
    // every scheduled start names a distinct run
    let run_uids: BTreeSet<&str> = starts
        .iter()
        .filter_map(|n| n.split("(run ").nth(1)?.split(')').next())
        .collect();
    assert_eq!(run_uids.len(), starts.len(), "{starts:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_occurrence_while_another_plan_runs_is_skipped() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    install(&env, dir.path(), "sk", "@every 1s").await;
    env.wait_plan("sk", "deploy", "COMPLETE").await;
    // `hold` never finishes: every occurrence from now on meets a running plan.
    env.patch_instance(
        "sk",
        json!({"spec": {"planExecution": {"planName": "hold", "uid": "hold-1"}}}),
    )
    .await;
    env.wait_plan("sk", "hold", "IN_PROGRESS").await;
    let before = backup_uid(&instance(&env, "sk").await);
    let skipped = harness::wait_for("a ScheduledPlanSkipped Event", || async {
        let evs = env.events("sk").await;
        let s: Vec<String> = evs
            .into_iter()
            .filter(|(r, _)| r == "ScheduledPlanSkipped")
            .map(|(_, n)| n)
            .collect();
        (s.len() >= 2).then_some(s)
    })
    .await;
    assert!(
        skipped.iter().all(
            |n| n.starts_with("Scheduled run of plan backup (schedule '@every 1s', due ")
                && n.ends_with("skipped: plan 'hold' is running")
        ),
        "{skipped:?}"
    );
    let i = instance(&env, "sk").await;
    assert_eq!(i["spec"]["planExecution"]["planName"], "hold", "{i}");
    assert_eq!(backup_uid(&i), before, "no backup run while hold runs: {i}");
    // the skips are recorded: lastScheduleTime moves on
    assert!(
        i["status"]["schedules"]["backup"]["lastScheduleTime"].is_string(),
        "{i}"
    );

    // Cancel hold: scheduling resumes.
    env.patch_instance("sk", json!({"spec": {"planExecution": {"status": "CANCELLED"}}}))
        .await;
    env.wait_instance("sk", "a scheduled backup after hold", |i| {
        backup_uid(i).is_some()
            && backup_uid(i) != before
            && i["status"]["planStatus"]["backup"]["status"] == "COMPLETE"
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_restart_does_not_fire_an_occurrence_twice() {
    let mut env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    install(&env, dir.path(), "rs", "@every 5s").await;
    env.wait_plan("rs", "deploy", "COMPLETE").await;
    let first = env
        .wait_instance("rs", "the first scheduled backup", |i| {
            i["status"]["planStatus"]["backup"]["status"] == "COMPLETE"
        })
        .await;
    let uid1 = backup_uid(&first);
    let last1 = first["status"]["schedules"]["backup"]["lastScheduleTime"].clone();
    assert!(last1.is_string(), "{first}");

    // Restart right away: the occurrence just run is in the status, so nothing fires before the
    // next one is due (a manager that forgot it would run the same occurrence again).
    env.stop_controller().await;
    env.start_controller();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let i = instance(&env, "rs").await;
    let next = kudo_engine::Timestamp::parse(
        i["status"]["schedules"]["backup"]["nextScheduleTime"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let now = kudo_engine::Timestamp::parse(&chrono_now()).unwrap();
    if now < next {
        assert_eq!(backup_uid(&i), uid1, "re-ran after the restart: {i}");
        assert_eq!(i["status"]["schedules"]["backup"]["lastScheduleTime"], last1);
    }
    let starts_before = scheduled_starts(&env, "rs").await.len();

    // Down for longer than two periods: exactly one catch-up run on restart, not one per
    // missed occurrence.
    env.stop_controller().await;
    tokio::time::sleep(Duration::from_secs(11)).await;
    env.start_controller();
    let caught_up = env
        .wait_instance("rs", "one catch-up run", |i| {
            backup_uid(i) != uid1 && i["status"]["planStatus"]["backup"]["status"] == "COMPLETE"
        })
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let starts_after = scheduled_starts(&env, "rs").await.len();
    let i = instance(&env, "rs").await;
    let last = kudo_engine::Timestamp::parse(
        i["status"]["schedules"]["backup"]["lastScheduleTime"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let now = kudo_engine::Timestamp::parse(&chrono_now()).unwrap();
    // Within one period of the catch-up, one run fired for all the missed occurrences.
    if now.seconds_since(last) < 4 {
        assert_eq!(starts_after, starts_before + 1, "{caught_up}");
    }
    env.stop().await;
}

fn chrono_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    kudo_engine::Timestamp::from_unix(secs as i64).to_string()
}

/// A schedule set on an Instance that has existed for a while starts counting when it is first
/// seen: no run for an occurrence between the Instance's creation and now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_set_later_does_not_fire_at_once() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    install(&env, dir.path(), "late", "").await;
    env.wait_plan("late", "deploy", "COMPLETE").await;
    // Old enough that an `@every 3s` grid from the creation has occurrences in the past.
    tokio::time::sleep(Duration::from_secs(4)).await;
    env.patch_instance(
        "late",
        json!({"spec": {"parameters": {"BACKUP_SCHEDULE": "@every 3s"}}}),
    )
    .await;
    let i = env
        .wait_instance("late", "the schedule is seen", |i| {
            i["status"]["schedules"]["backup"]["nextScheduleTime"].is_string()
        })
        .await;
    // The first occurrence is counted from now, not from the Instance's creation.
    let seen_at = kudo_engine::Timestamp::parse(&chrono_now()).unwrap();
    let next = kudo_engine::Timestamp::parse(
        i["status"]["schedules"]["backup"]["nextScheduleTime"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert!(
        next.seconds_since(seen_at) > 0,
        "next {next} after {seen_at}: {i}"
    );
    assert!(
        i["status"]["schedules"]["backup"]["lastScheduleTime"].is_null(),
        "nothing ran yet: {i}"
    );
    assert!(backup_uid(&i).is_none(), "no backup at once: {i}");
    // ... and the first occurrence does come.
    env.wait_instance("late", "the first scheduled backup", |i| {
        i["status"]["planStatus"]["backup"]["status"] == "COMPLETE"
    })
    .await;
    env.stop().await;
}
