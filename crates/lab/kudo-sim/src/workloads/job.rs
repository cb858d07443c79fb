//! The Job controller: pods until completions or the backoff limit, indexed completion,
//! `ttlSecondsAfterFinished`, status conditions.

use std::collections::HashSet;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::engine::{InvolvedObject, Sim, Snapshot, ar};
use crate::util::{
    Cond, fmt_time, merge_conditions, merge_patch_changes, name_suffix, owner_ref, pod_active, pod_phase,
    pod_ready, time_ms,
};

use super::{create_named_pods, deletion_rank, name, ns, pod_from_template, status_of, to_value};

pub(super) fn job_finished(status: &Value) -> Option<&'static str> {
    let conds = status.get("conditions").and_then(Value::as_array)?;
    for c in conds {
        if c["status"] == "True" {
            if c["type"] == "Complete" {
                return Some("Complete");
            }
            if c["type"] == "Failed" {
                return Some("Failed");
            }
        }
    }
    None
}

/// "0-2,5" style list of completed indexes, as in `status.completedIndexes`.
pub fn format_indexes(indexes: &[i32]) -> String {
    let mut v: Vec<i32> = indexes.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(",")
}

const INDEX_ANN: &str = "batch.kubernetes.io/job-completion-index";

fn pod_index(p: &Pod) -> Option<i32> {
    p.metadata.annotations.as_ref()?.get(INDEX_ANN)?.parse().ok()
}

pub async fn jobs(sim: &mut Sim, snap: &Snapshot) {
    if !(snap.ready.jobs && snap.ready.pods) {
        return;
    }
    for job in &snap.jobs {
        let Some(spec) = job.spec.as_ref() else { continue };
        let owner = InvolvedObject::of(job.as_ref());
        let namespace = ns(&job.metadata);
        let cur = status_of(&job.status);
        if let Some(done) = job_finished(&cur) {
            // TTL after finished.
            if let Some(ttl) = spec.ttl_seconds_after_finished
                && job.metadata.deletion_timestamp.is_none()
            {
                let finished_at = cur
                    .get("completionTime")
                    .and_then(Value::as_str)
                    .or_else(|| {
                        cur["conditions"]
                            .as_array()
                            .and_then(|a| a.iter().find(|c| c["type"] == done))
                            .and_then(|c| c["lastTransitionTime"].as_str())
                    })
                    .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
                    .map(|t| t.as_millisecond());
                if let Some(f) = finished_at {
                    let due = f + i64::from(ttl.max(0)) * 1000;
                    if sim.now >= due {
                        sim.delete(
                            &ar::<Job>(),
                            Some(&namespace),
                            &owner.name,
                            None,
                            job.metadata.uid.as_deref(),
                            true,
                        )
                        .await;
                    } else {
                        sim.wake_at(due);
                    }
                }
            }
            continue;
        }
        if job.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let owned = snap.pods_of(&job.metadata);
        let active: Vec<&Pod> = owned.iter().copied().filter(|p| pod_active(p)).collect();
        let ok_pods: Vec<&Pod> = owned
            .iter()
            .copied()
            .filter(|p| pod_phase(p) == "Succeeded")
            .collect();
        let failed_pods = owned.iter().filter(|p| pod_phase(p) == "Failed").count();
        let indexed = spec.completion_mode.as_deref() == Some("Indexed");
        let succeeded = i32::try_from(ok_pods.len())
            .unwrap_or(0)
            .max(job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0));
        let failed = i32::try_from(failed_pods)
            .unwrap_or(0)
            .max(job.status.as_ref().and_then(|s| s.failed).unwrap_or(0));
        let completions = spec.completions;
        let parallelism = spec.parallelism.unwrap_or(1).max(0);
        let backoff = spec.backoff_limit.unwrap_or(6).max(0);
        let suspended = spec.suspend == Some(true);
        let start_ms = job
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(time_ms)
            .unwrap_or(sim.now);
        let start_s = fmt_time(start_ms);
        let done_indexes: Vec<i32> = ok_pods.iter().filter_map(|p| pod_index(p)).collect();
        let succeeded_for_completion = if indexed {
            i32::try_from(done_indexes.iter().collect::<HashSet<_>>().len()).unwrap_or(0)
        } else {
            succeeded
        };

        let mut failure: Option<(&str, &str)> = None;
        if failed > backoff {
            failure = Some((
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ));
        } else if let Some(ads) = spec.active_deadline_seconds
            && !suspended
        {
            let due = start_ms + ads * 1000;
            if sim.now >= due {
                failure = Some((
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                ));
            } else {
                sim.wake_at(due);
            }
        }
        let complete = failure.is_none()
            && match completions {
                Some(c) => succeeded_for_completion >= c,
                None => succeeded >= 1 && active.is_empty(),
            };
        let mut status = json!({
            "active": active.len(),
            "ready": active.iter().filter(|p| pod_ready(p)).count(),
            "succeeded": succeeded,
            "failed": failed,
            "terminating": owned.iter().filter(|p| p.metadata.deletion_timestamp.is_some()).count(),
            "uncountedTerminatedPods": {},
        });
        if !suspended || cur.get("startTime").is_some() {
            status["startTime"] = json!(start_s);
        }
        if indexed {
            status["completedIndexes"] = json!(format_indexes(&done_indexes));
        }
        if let Some((reason, message)) = failure {
            for p in &active {
                sim.delete(
                    &ar::<Pod>(),
                    Some(&namespace),
                    &name(&p.metadata),
                    None,
                    p.metadata.uid.as_deref(),
                    false,
                )
                .await;
            }
            status["active"] = json!(0);
            status["ready"] = json!(0);
            status["conditions"] = merge_conditions(
                cur.get("conditions"),
                &[
                    Cond::new("FailureTarget", "True", reason, message),
                    Cond::new("Failed", "True", reason, message),
                ],
                &[],
                &sim.now_s,
                true,
            );
            sim.event(&owner, "Warning", reason, message, "job-controller", None, None)
                .await;
        } else if complete {
            status["conditions"] = merge_conditions(
                cur.get("conditions"),
                &[
                    Cond::new(
                        "SuccessCriteriaMet",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ),
                    Cond::new(
                        "Complete",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ),
                ],
                &[],
                &sim.now_s,
                true,
            );
            status["completionTime"] = json!(sim.now_s);
            sim.event(
                &owner,
                "Normal",
                "Completed",
                "Job completed",
                "job-controller",
                None,
                None,
            )
            .await;
        } else if suspended {
            for p in &active {
                sim.delete(
                    &ar::<Pod>(),
                    Some(&namespace),
                    &name(&p.metadata),
                    None,
                    p.metadata.uid.as_deref(),
                    false,
                )
                .await;
            }
            status["conditions"] = merge_conditions(
                cur.get("conditions"),
                &[Cond::new("Suspended", "True", "JobSuspended", "Job suspended")],
                &[],
                &sim.now_s,
                true,
            );
        } else {
            if cur.pointer("/conditions").is_some() {
                status["conditions"] = merge_conditions(
                    cur.get("conditions"),
                    &[Cond::new("Suspended", "False", "JobResumed", "Job resumed")],
                    &[],
                    &sim.now_s,
                    true,
                );
            }
            let have = i32::try_from(active.len()).unwrap_or(0);
            let want = match completions {
                Some(c) => parallelism.min((c - succeeded_for_completion).max(0)),
                None => {
                    if succeeded > 0 {
                        0
                    } else {
                        parallelism
                    }
                }
            };
            let template = to_value(&spec.template);
            let job_uid = owner.uid.clone();
            let base_labels = vec![
                ("batch.kubernetes.io/controller-uid", job_uid.clone()),
                ("batch.kubernetes.io/job-name", owner.name.clone()),
                ("controller-uid", job_uid.clone()),
                ("job-name", owner.name.clone()),
            ];
            let oref = owner_ref("batch/v1", "Job", &job.metadata);
            if have < want {
                if indexed {
                    let busy: HashSet<i32> = active
                        .iter()
                        .filter_map(|p| pod_index(p))
                        .chain(done_indexes.iter().copied())
                        .collect();
                    let total = completions.unwrap_or(1);
                    let todo: Vec<i32> = (0..total)
                        .filter(|i| !busy.contains(i))
                        .take(usize::try_from(want - have).unwrap_or(0))
                        .collect();
                    for idx in todo {
                        let attempt = owned.iter().filter(|p| pod_index(p) == Some(idx)).count();
                        let prefix = format!("{}-{idx}", owner.name);
                        let pod_name = format!(
                            "{prefix}-{}",
                            name_suffix(&job_uid, u32::try_from(attempt).unwrap_or(0))
                        );
                        let mut labels = base_labels.clone();
                        labels.push((INDEX_ANN, idx.to_string()));
                        let mut pod = pod_from_template(
                            &template,
                            &namespace,
                            &pod_name,
                            Some(&format!("{prefix}-")),
                            &labels,
                            &[(INDEX_ANN, idx.to_string())],
                            oref.clone(),
                        );
                        pod["spec"]["hostname"] = json!(prefix);
                        if sim.create(&ar::<Pod>(), Some(&namespace), pod).await {
                            sim.event(
                                &owner,
                                "Normal",
                                "SuccessfulCreate",
                                &format!("Created pod: {pod_name}"),
                                "job-controller",
                                None,
                                None,
                            )
                            .await;
                        }
                    }
                } else {
                    let gen_name = format!("{}-", owner.name);
                    create_named_pods(sim, snap, &owner, want - have, |pod_name| {
                        pod_from_template(
                            &template,
                            &namespace,
                            pod_name,
                            Some(&gen_name),
                            &base_labels,
                            &[],
                            oref.clone(),
                        )
                    })
                    .await;
                }
            } else if have > want {
                let mut extra = active.clone();
                extra.sort_by_key(|p| deletion_rank(p));
                for p in extra.iter().take(usize::try_from(have - want).unwrap_or(0)) {
                    sim.delete(
                        &ar::<Pod>(),
                        Some(&namespace),
                        &name(&p.metadata),
                        None,
                        p.metadata.uid.as_deref(),
                        false,
                    )
                    .await;
                }
            }
        }
        if merge_patch_changes(&cur, &status) {
            sim.merge(
                &ar::<Job>(),
                Some(&namespace),
                &owner.name,
                true,
                json!({ "status": status }),
            )
            .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_indexes_format() {
        assert_eq!(format_indexes(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(format_indexes(&[3]), "3");
        assert_eq!(format_indexes(&[]), "");
    }
}
