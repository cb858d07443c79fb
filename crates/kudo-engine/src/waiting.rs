//! Why a step waits: one line per object that is not healthy yet,
//! naming the object and its health verdict in words, followed by what its pods say when they
//! say something a user can act on (an image that cannot be pulled, a crashing container, no node
//! to run on). The lines end up in the step's `waitingFor` status and under the step in
//! `kubectl kudo plan status`.
//!
//! The lines are built from what is stored (status fields, timestamps), never from the clock, so
//! the same wait gives the same text and costs no status write.

use kudo_api::StepStatus;
use serde_json::Value;

/// Pod problems shown per object at most.
pub const MAX_POD_PROBLEMS: usize = 3;

/// Longest pod/container message kept in a line, in characters.
const MAX_MESSAGE_CHARS: usize = 160;

/// Container waiting reasons that are a normal part of starting, not a problem.
const STARTING: &[&str] = &["", "ContainerCreating", "PodInitializing"];

fn str_at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

fn short(msg: &str) -> String {
    let msg = msg.trim();
    if msg.chars().count() <= MAX_MESSAGE_CHARS {
        return msg.to_string();
    }
    let cut: String = msg.chars().take(MAX_MESSAGE_CHARS).collect();
    format!("{cut}…")
}

fn with_message(reason: &str, message: Option<&str>) -> String {
    match message.map(short).filter(|m| !m.is_empty()) {
        Some(m) => format!("{reason} ({m})"),
        None => reason.to_string(),
    }
}

/// What a pod says is wrong, if anything: a container waiting for a reason other than starting
/// (`ImagePullBackOff`, `CrashLoopBackOff`, `CreateContainerConfigError`, …), a container that
/// ended with an error, or the scheduler finding no node.
pub fn pod_problem(pod: &Value) -> Option<String> {
    let name = str_at(pod, &["metadata", "name"]).unwrap_or("?");
    let status = &pod["status"];
    let containers = ["initContainerStatuses", "containerStatuses"]
        .iter()
        .filter_map(|k| status[*k].as_array())
        .flatten();
    for c in containers {
        let waiting = &c["state"]["waiting"];
        if let Some(reason) = waiting["reason"].as_str()
            && !STARTING.contains(&reason)
        {
            return Some(format!(
                "pod {name}: {}",
                with_message(reason, waiting["message"].as_str())
            ));
        }
        let ended = &c["state"]["terminated"];
        if let Some(code) = ended["exitCode"].as_i64()
            && code != 0
        {
            let container = c["name"].as_str().unwrap_or("?");
            let reason = ended["reason"].as_str().unwrap_or("Error");
            return Some(format!(
                "pod {name}: container {container} {reason} (exit code {code})"
            ));
        }
    }
    let unscheduled = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")?;
    let reason = unscheduled["reason"].as_str().unwrap_or("Unschedulable");
    Some(format!(
        "pod {name}: {}",
        with_message(reason, unscheduled["message"].as_str())
    ))
}

/// Label the Deployment controller puts on a ReplicaSet and its pods: the hash of the pod
/// template, which is also the suffix of the ReplicaSet's name (`<deployment>-<hash>`).
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// The pods `obj` runs, among `pods`: owned by it, or (a Deployment) by one of its ReplicaSets,
/// recognised without reading the ReplicaSet: the pod's owner is the ReplicaSet named
/// `<deployment>-<the pod's pod-template-hash>`, the name the Deployment controller gives it. So
/// the manager needs no ReplicaSet watch (a third of what a rollout sends it) for these lines.
pub fn owned_pods<'p>(obj: &Value, pods: &'p [Value]) -> Vec<&'p Value> {
    let Some(uid) = str_at(obj, &["metadata", "uid"]) else {
        return Vec::new();
    };
    let deployment = (obj["kind"] == "Deployment")
        .then(|| str_at(obj, &["metadata", "name"]))
        .flatten();
    let runs = |p: &Value| {
        let replica_set = deployment
            .zip(str_at(p, &["metadata", "labels", POD_TEMPLATE_HASH]))
            .map(|(d, hash)| format!("{d}-{hash}"));
        let owner = |r: &Value| {
            r["uid"] == uid
                || (r["kind"] == "ReplicaSet" && replica_set.as_deref().is_some_and(|n| r["name"] == n))
        };
        p["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|refs| refs.iter().any(owner))
    };
    pods.iter().filter(|p| runs(p)).collect()
}

/// `Kind namespace/name` (or `Kind name` for a cluster-scoped object).
pub fn describe(obj: &Value) -> String {
    let kind = obj["kind"].as_str().unwrap_or("?");
    let name = str_at(obj, &["metadata", "name"]).unwrap_or("?");
    match str_at(obj, &["metadata", "namespace"]) {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// The health verdict without the object's name that [`crate::health`] puts in front
/// (`statefulset "db" is not healthy: `), as the line names the object already.
fn verdict_text<'m>(obj: &Value, verdict: &'m str) -> &'m str {
    let kind = obj["kind"].as_str().unwrap_or("").to_lowercase();
    let name = str_at(obj, &["metadata", "name"]).unwrap_or("");
    let prefix = format!("{kind} {name:?} ");
    let rest = verdict.strip_prefix(prefix.as_str()).unwrap_or(verdict);
    rest.strip_prefix("is not healthy: ").unwrap_or(rest)
}

/// When a Job started and its deadline, from its status and spec (no clock: stable text).
fn job_timing(obj: &Value) -> Option<String> {
    if obj["kind"] != "Job" {
        return None;
    }
    let started = str_at(obj, &["status", "startTime"])?;
    Some(match obj["spec"]["activeDeadlineSeconds"].as_i64() {
        Some(d) => format!("started {started}, activeDeadlineSeconds {d}"),
        None => format!("started {started}"),
    })
}

/// The line for an object that is not healthy: `StatefulSet ns/db: Waiting for 2 pods to be
/// ready...; pod db-1: ImagePullBackOff (Back-off pulling image "mariadb:10.4")`.
pub fn waiting_line(obj: &Value, verdict: &str, pods: &[&Value]) -> String {
    let mut line = format!("{}: {}", describe(obj), verdict_text(obj, verdict));
    if let Some(t) = job_timing(obj) {
        line.push_str(&format!(" ({t})"));
    }
    // A bare Pod speaks for itself.
    let own = (obj["kind"] == "Pod").then_some(obj);
    let problems = own
        .into_iter()
        .chain(pods.iter().copied())
        .filter_map(pod_problem);
    for problem in problems.take(MAX_POD_PROBLEMS) {
        line.push_str("; ");
        line.push_str(&problem);
    }
    line
}

/// The lines kept in a step's `waiting_for`: at most [`StepStatus::MAX_WAITING_LINES`] lines and
/// [`StepStatus::MAX_WAITING_BYTES`] bytes; a line that does not fit is cut (ending in `…`), and
/// lines left out are counted in a last line (`… and 3 more`).
pub fn bounded_waiting(lines: &[String]) -> Vec<String> {
    // Room kept for the counting line while more lines follow.
    const RESERVE: usize = 24;
    let mut out = Vec::new();
    let mut used = 0;
    for (n, line) in lines.iter().enumerate() {
        let rest = lines.len() - n;
        let reserve = if rest > 1 { RESERVE } else { 0 };
        let budget = StepStatus::MAX_WAITING_BYTES.saturating_sub(used + reserve);
        let last_slot = out.len() + 1 == StepStatus::MAX_WAITING_LINES;
        if (last_slot && rest > 1) || budget < 8 {
            out.push(format!("… and {rest} more"));
            return out;
        }
        let kept = cut(line, budget);
        used += kept.len();
        out.push(kept);
    }
    out
}

/// `line` within `max` bytes, cut at a character boundary and ending in `…` when shortened.
fn cut(line: &str, max: usize) -> String {
    if line.len() <= max {
        return line.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, owner: &str, status: Value) -> Value {
        json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns",
            "ownerReferences": [{"uid": owner}]}, "status": status})
    }

    #[test]
    fn pods_say_what_is_wrong_in_words() {
        let cases = [
            (
                json!({"containerStatuses": [{"name": "db", "state": {"waiting": {"reason": "ImagePullBackOff",
                    "message": "Back-off pulling image \"mariadb:10.4\""}}}]}),
                Some("pod p: ImagePullBackOff (Back-off pulling image \"mariadb:10.4\")"),
            ),
            (
                json!({"containerStatuses": [{"name": "db", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
                Some("pod p: CrashLoopBackOff"),
            ),
            (
                json!({"initContainerStatuses": [{"name": "init", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}]}),
                Some("pod p: container init Error (exit code 2)"),
            ),
            (
                json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Insufficient cpu."}]}),
                Some("pod p: Unschedulable (0/1 nodes are available: 1 Insufficient cpu.)"),
            ),
            (
                json!({"containerStatuses": [{"name": "db", "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
                None,
            ),
            (
                json!({"containerStatuses": [{"name": "db", "state": {"running": {}}}]}),
                None,
            ),
            (
                json!({"containerStatuses": [{"name": "db", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
                None,
            ),
            (json!({}), None),
        ];
        for (status, want) in cases {
            assert_eq!(
                pod_problem(&pod("p", "u", status.clone())).as_deref(),
                want,
                "{status}"
            );
        }
    }

    #[test]
    fn a_line_names_the_object_its_verdict_and_its_pods_problems() {
        let sts = json!({"kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns", "uid": "s1"}});
        let bad = pod(
            "db-1",
            "s1",
            json!({"containerStatuses": [{"name": "db", "state": {"waiting": {"reason": "ErrImagePull"}}}]}),
        );
        let fine = pod(
            "db-0",
            "s1",
            json!({"containerStatuses": [{"name": "db", "state": {"running": {}}}]}),
        );
        let other = pod(
            "web-0",
            "w1",
            json!({"containerStatuses": [{"name": "w", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
        );
        let pods = [fine, bad, other];
        let owned = owned_pods(&sts, &pods);
        assert_eq!(owned.len(), 2);
        assert_eq!(
            waiting_line(
                &sts,
                "statefulset \"db\" is not healthy: Waiting for 1 pods to be ready...",
                &owned
            ),
            "StatefulSet ns/db: Waiting for 1 pods to be ready...; pod db-1: ErrImagePull"
        );
    }

    #[test]
    fn deployments_own_their_pods_through_replica_sets_and_jobs_say_when_they_started() {
        let deploy =
            json!({"kind": "Deployment", "metadata": {"name": "web", "namespace": "ns", "uid": "d1"}});
        let crashing = json!({"containerStatuses": [{"name": "w", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]});
        let of_rs = |name: &str, rs: &str, hash: Option<&str>| {
            let mut p = pod(name, "r1", crashing.clone());
            p["metadata"]["ownerReferences"][0]["kind"] = json!("ReplicaSet");
            p["metadata"]["ownerReferences"][0]["name"] = json!(rs);
            if let Some(h) = hash {
                p["metadata"]["labels"] = json!({ POD_TEMPLATE_HASH: h });
            }
            p
        };
        let cases = [
            (of_rs("web-5f-x", "web-5f", Some("5f")), true),
            // another Deployment whose name starts like this one's
            (of_rs("web-api-5f-x", "web-api-5f", Some("5f")), false),
            // no hash label: nothing says whose ReplicaSet it is
            (of_rs("web-5f-x", "web-5f", None), false),
            (of_rs("web-5f-x", "web-6a", Some("5f")), false),
        ];
        for (p, want) in cases {
            let pods = [p];
            assert_eq!(owned_pods(&deploy, &pods).len() == 1, want, "{}", pods[0]);
        }
        // only a Deployment runs pods through ReplicaSets
        let sts = json!({"kind": "StatefulSet", "metadata": {"name": "web", "namespace": "ns", "uid": "s1"}});
        assert!(owned_pods(&sts, &[of_rs("web-5f-x", "web-5f", Some("5f"))]).is_empty());

        let job = json!({"kind": "Job", "metadata": {"name": "backup", "namespace": "ns", "uid": "j1"},
            "spec": {"activeDeadlineSeconds": 300}, "status": {"startTime": "2026-11-27T08:00:00Z"}});
        assert_eq!(
            waiting_line(
                &job,
                "job \"backup\" still running: 0 of 1 completions succeeded",
                &[]
            ),
            "Job ns/backup: still running: 0 of 1 completions succeeded (started 2026-11-27T08:00:00Z, activeDeadlineSeconds 300)"
        );
        let cm = json!({"kind": "ClusterRole", "metadata": {"name": "r"}});
        assert_eq!(waiting_line(&cm, "not yet", &[]), "ClusterRole r: not yet");
    }
}
