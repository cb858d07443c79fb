//! The Galera example at capability level 3: a `backup` plan (a fresh `mysqldump` Job per run),
//! the same plan scheduled with `BACKUP_SCHEDULE`, a `restore` plan run by setting
//! `RESTORE_FROM` to the file a backup wrote, and a last backup in `cleanup` with
//! `BACKUP_ON_DELETE=true`. The Jobs' `mysql` and `mysqldump` are kudo-sim's clients of the
//! MariaDB server it stands in for; the dumps are files of the backups claim.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::Env;

fn galera_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/galera")
}

fn run_uid(i: &Value, plan: &str) -> String {
    i["status"]["planStatus"][plan]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn job(env: &Env, name: &str) -> Option<Value> {
    env.get("batch/v1", "Job", name).await
}

fn job_done(j: &Value) -> bool {
    j["status"]["succeeded"].as_i64().unwrap_or(0) >= 1
}

/// The file the backup Job's log says it wrote (`backup written: FILE`).
async fn backup_written(env: &Env) -> String {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(env.client.clone(), crate::harness::NS);
    let lp = kube::api::ListParams::default().labels("job-name=gb-backup");
    let pod = pods
        .list(&lp)
        .await
        .unwrap()
        .items
        .pop()
        .expect("the backup Job's pod");
    let log = pods
        .logs(&pod.metadata.name.unwrap(), &Default::default())
        .await
        .unwrap();
    log.lines()
        .find_map(|l| l.strip_prefix("backup written: "))
        .unwrap_or_else(|| panic!("no backup file in the log: {log}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn galera_backup_schedule_restore_and_backup_on_delete() {
    let env = Env::start().await;
    let params = BTreeMap::from([
        ("NODE_COUNT".to_string(), "1".to_string()),
        ("BACKUP_ON_DELETE".to_string(), "true".to_string()),
    ]);
    env.install(&galera_dir(), "gb", params).await;
    env.wait_plan("gb", "deploy", "COMPLETE").await;

    // Manual backup: the Job completes, the plan is COMPLETE.
    env.patch_instance(
        "gb",
        json!({"spec": {"planExecution": {"planName": "backup", "uid": "manual-1"}}}),
    )
    .await;
    let i = env.wait_plan("gb", "backup", "COMPLETE").await;
    // (the admission gives a triggered run a fresh uid, as KUDO's webhook did)
    let manual = run_uid(&i, "backup");
    let j = job(&env, "gb-backup").await.expect("backup Job");
    assert!(job_done(&j), "{j}");
    let written = backup_written(&env).await;
    assert_eq!(
        j["metadata"]["annotations"]["kudo.dev/last-plan-execution-uid"],
        manual.as_str()
    );
    assert!(
        env.get("v1", "PersistentVolumeClaim", "gb-backups")
            .await
            .is_some()
    );

    // Scheduled: every run replaces the Job with a fresh one of its own run.
    env.patch_instance(
        "gb",
        json!({"spec": {"parameters": {"BACKUP_SCHEDULE": "@every 2s"}}}),
    )
    .await;
    let mut runs = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while runs.len() < 2 && Instant::now() < deadline {
        let i = env.get("kudo.dev/v1beta1", "Instance", "gb").await.unwrap();
        let uid = run_uid(&i, "backup");
        if uid != manual
            && i["status"]["planStatus"]["backup"]["status"] == "COMPLETE"
            && let Some(j) = job(&env, "gb-backup").await
            && job_done(&j)
            && j["metadata"]["annotations"]["kudo.dev/last-plan-execution-uid"] == uid.as_str()
        {
            runs.insert(uid);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        runs.len() >= 2,
        "two scheduled backups, each with its own Job: {runs:?}"
    );
    let scheduled = env
        .events("gb")
        .await
        .into_iter()
        .filter(|(r, n)| r == "PlanStarted" && n.contains("started by schedule '@every 2s'"))
        .count();
    assert!(scheduled >= 2, "{scheduled}");

    // Stop the schedule (the parameter change runs deploy), then restore a named backup.
    env.patch_instance("gb", json!({"spec": {"parameters": {"BACKUP_SCHEDULE": ""}}}))
        .await;
    env.wait_instance("gb", "idle without a schedule", |i| {
        i["spec"]["planExecution"]["planName"].is_null() && i["status"]["schedules"]["backup"].is_null()
    })
    .await;
    env.patch_instance("gb", json!({"spec": {"parameters": {"RESTORE_FROM": written}}}))
        .await;
    env.wait_plan("gb", "restore", "COMPLETE").await;
    let r = job(&env, "gb-restore").await.expect("restore Job");
    assert!(job_done(&r), "{r}");
    assert!(
        r.to_string().contains(&written),
        "the Job restores the named file: {r}"
    );
    env.wait_instance("gb", "idle after restore", |i| {
        i["spec"]["planExecution"]["planName"].is_null()
    })
    .await;

    // Delete with BACKUP_ON_DELETE=true: cleanup runs a backup Job, which completes before the
    // instance is released (the cleanup step waits for the Job's health: succeeded; the Job goes
    // with the instance right after, so it is seen while it runs).
    // A watch on Jobs, opened before the delete, sees every version of the Job however briefly
    // it lives (polling missed it on a loaded machine).
    let jobs: kube::Api<kube::api::DynamicObject> = kube::Api::default_namespaced_with(
        env.client.clone(),
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("batch", "v1", "Job")),
    );
    let mut watch = {
        use futures::StreamExt;
        kube::runtime::watcher(
            jobs,
            kube::runtime::watcher::Config::default().fields("metadata.name=gb-backup"),
        )
        .boxed()
    };
    env.delete_instance("gb").await;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut final_backup_seen = false;
    loop {
        use futures::StreamExt;
        use kube::runtime::watcher::Event;
        let next = tokio::time::timeout(Duration::from_millis(200), watch.next()).await;
        if let Ok(Some(Ok(Event::Apply(j) | Event::InitApply(j)))) = &next
            && j.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("kudo.dev/plan"))
                .map(String::as_str)
                == Some("cleanup")
        {
            final_backup_seen = true;
        }
        let gone = env.get("kudo.dev/v1beta1", "Instance", "gb").await.is_none();
        if (gone && final_backup_seen) || Instant::now() > deadline {
            break;
        }
        if gone && matches!(next, Err(_) | Ok(None)) {
            break;
        }
    }
    assert!(final_backup_seen, "the cleanup plan applied the backup Job");
    let finished = env
        .events("gb")
        .await
        .into_iter()
        .any(|(r, n)| r == "PlanFinished" && n.contains("plan cleanup finished with status COMPLETE"));
    assert!(finished, "cleanup COMPLETE, so its backup Job succeeded");
    env.stop().await;
}
