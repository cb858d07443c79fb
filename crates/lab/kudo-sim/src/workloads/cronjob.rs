//! The CronJob controller: Jobs at the schedule's times, concurrency policy, history limits.

use k8s_openapi::api::batch::v1::{CronJob, Job};
use serde_json::{Value, json};

use crate::cron::Schedule;
use crate::engine::{InvolvedObject, Sim, Snapshot, ar};
use crate::util::{created_ms, fmt_time, merge_patch_changes, owner_ref, time_ms};

use super::job::job_finished;
use super::{Owned, delete_owned, name, ns, status_of, to_value, uid};

pub async fn cronjobs(sim: &mut Sim, snap: &Snapshot) {
    if !(snap.ready.cronjobs && snap.ready.jobs) {
        return;
    }
    for cj in &snap.cronjobs {
        if cj.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let spec = &cj.spec;
        let owner = InvolvedObject::of(cj.as_ref());
        let namespace = ns(&cj.metadata);
        let cur = status_of(&cj.status);
        let schedule = match Schedule::parse(&spec.schedule) {
            Ok(s) => s,
            Err(e) => {
                sim.event(
                    &owner,
                    "Warning",
                    "InvalidSchedule",
                    &format!("invalid schedule: {}: {e}", spec.schedule),
                    "cronjob-controller",
                    None,
                    None,
                )
                .await;
                continue;
            }
        };
        if let Some(tz) = spec.time_zone.as_deref()
            && !matches!(tz, "UTC" | "Etc/UTC" | "")
        {
            sim.event(
                &owner,
                "Warning",
                "UnsupportedTimeZone",
                &format!("time zone {tz:?} is simulated as UTC"),
                "cronjob-controller",
                None,
                None,
            )
            .await;
        }
        let mut mine: Vec<&Job> = snap.jobs_of(&cj.metadata);
        mine.sort_by_key(|j| (created_ms(&j.metadata), name(&j.metadata)));
        let finished = |j: &Job| job_finished(&status_of(&j.status));
        let active: Vec<&Job> = mine
            .iter()
            .copied()
            .filter(|j| finished(j).is_none() && j.metadata.deletion_timestamp.is_none())
            .collect();
        // History limits.
        for (kind, limit) in [
            ("Complete", spec.successful_jobs_history_limit.unwrap_or(3)),
            ("Failed", spec.failed_jobs_history_limit.unwrap_or(1)),
        ] {
            let done: Vec<&Job> = mine
                .iter()
                .copied()
                .filter(|j| finished(j) == Some(kind) && j.metadata.deletion_timestamp.is_none())
                .collect();
            let limit = usize::try_from(limit.max(0)).unwrap_or(0);
            if done.len() > limit {
                for j in done.iter().take(done.len() - limit) {
                    let job_name = name(&j.metadata);
                    delete_owned(
                        sim,
                        &owner,
                        Owned {
                            resource: &ar::<Job>(),
                            namespace: &namespace,
                            name: &job_name,
                            uid: j.metadata.uid.as_deref(),
                        },
                        true,
                        &format!("Deleted job {job_name}"),
                        "cronjob-controller",
                    )
                    .await;
                }
            }
        }
        let mut last_schedule = cur
            .get("lastScheduleTime")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut active_refs: Vec<Value> = active
            .iter()
            .map(|j| {
                json!({"apiVersion": "batch/v1", "kind": "Job", "name": name(&j.metadata),
                       "namespace": namespace, "uid": uid(&j.metadata),
                       "resourceVersion": j.metadata.resource_version})
            })
            .collect();
        if spec.suspend != Some(true) {
            let after = last_schedule
                .as_deref()
                .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .map(|t| t.as_millisecond())
                .unwrap_or_else(|| created_ms(&cj.metadata));
            if let Some(t) = schedule.latest_between(after, sim.now) {
                let too_late = spec
                    .starting_deadline_seconds
                    .is_some_and(|sds| sim.now - t > sds * 1000);
                let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
                let forbid = policy == "Forbid" && !active.is_empty();
                if too_late {
                    sim.event(
                        &owner,
                        "Warning",
                        "MissSchedule",
                        &format!("Missed scheduled time to start a job: {}", fmt_time(t)),
                        "cronjob-controller",
                        None,
                        None,
                    )
                    .await;
                } else if forbid {
                    sim.event(
                        &owner,
                        "Normal",
                        "JobAlreadyActive",
                        "Not starting job because prior execution is running and concurrency policy is Forbid",
                        "cronjob-controller",
                        None,
                        None,
                    )
                    .await;
                } else {
                    if policy == "Replace" {
                        for j in &active {
                            let job_name = name(&j.metadata);
                            delete_owned(
                                sim,
                                &owner,
                                Owned {
                                    resource: &ar::<Job>(),
                                    namespace: &namespace,
                                    name: &job_name,
                                    uid: j.metadata.uid.as_deref(),
                                },
                                true,
                                &format!("Deleted job {job_name}"),
                                "cronjob-controller",
                            )
                            .await;
                        }
                        active_refs.clear();
                    }
                    let job_name = format!("{}-{}", owner.name, t / 60_000);
                    let jt = &spec.job_template;
                    let mut annotations = jt
                        .metadata
                        .as_ref()
                        .and_then(|m| m.annotations.clone())
                        .unwrap_or_default();
                    annotations.insert(
                        "batch.kubernetes.io/cronjob-scheduled-timestamp".into(),
                        fmt_time(t),
                    );
                    let obj = json!({
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "metadata": {
                            "name": job_name,
                            "namespace": namespace,
                            "labels": jt.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default(),
                            "annotations": annotations,
                            "ownerReferences": [owner_ref("batch/v1", "CronJob", &cj.metadata)],
                        },
                        "spec": to_value(&jt.spec),
                    });
                    if sim.create(&ar::<Job>(), Some(&namespace), obj).await {
                        sim.event(
                            &owner,
                            "Normal",
                            "SuccessfulCreate",
                            &format!("Created job {job_name}"),
                            "cronjob-controller",
                            None,
                            None,
                        )
                        .await;
                        active_refs.push(json!({"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "namespace": namespace}));
                        last_schedule = Some(fmt_time(t));
                    }
                }
            }
            if let Some(next) = schedule.next_after(sim.now) {
                sim.wake_at(next);
            }
        }
        let last_success = mine
            .iter()
            .filter(|j| finished(j) == Some("Complete"))
            .filter_map(|j| {
                j.status
                    .as_ref()
                    .and_then(|s| s.completion_time.as_ref())
                    .map(time_ms)
            })
            .max()
            .map(fmt_time)
            .or_else(|| {
                cur.get("lastSuccessfulTime")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
        let mut status = json!({ "active": active_refs });
        if let Some(l) = last_schedule {
            status["lastScheduleTime"] = json!(l);
        }
        if let Some(l) = last_success {
            status["lastSuccessfulTime"] = json!(l);
        }
        if merge_patch_changes(&cur, &status) {
            sim.merge(
                &ar::<CronJob>(),
                Some(&namespace),
                &owner.name,
                true,
                json!({ "status": status }),
            )
            .await;
        }
    }
}
