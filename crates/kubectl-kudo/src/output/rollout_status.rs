//! `kubectl kudo rollout status` and `rollout history` text output: the waves of a rollout as a
//! tree in the style of `plan status` (the same renderer), and tables of rollouts and of one
//! rollout's Instances.

use kudo_api::rollout::{InstanceRollout, Rollout};
use kudo_engine::rollout::{instance_phase as ip, wave_phase};

use super::tree::{self, Node};

/// What the rollout changes, in words: `operatorVersion X, P=1`.
pub fn target_words(r: &Rollout) -> String {
    let t = &r.spec.target;
    let mut parts: Vec<String> = t
        .operator_version
        .iter()
        .map(|o| format!("operatorVersion {o}"))
        .collect();
    parts.extend(t.parameters.iter().map(|(k, v)| format!("{k}={v}")));
    parts.join(", ")
}

fn revisions(e: &InstanceRollout) -> String {
    match (e.from_revision, e.to_revision) {
        (Some(f), Some(t)) => format!(" revision {f} → {t}"),
        (None, Some(t)) => format!(" revision → {t}"),
        _ => String::new(),
    }
}

/// One Instance's line: `ns/name [Phase] revision 1 → 2: message`.
fn instance_line(e: &InstanceRollout) -> String {
    let msg = if e.message.is_empty() {
        String::new()
    } else {
        format!(": {}", e.message)
    };
    format!("{} [{}]{}{msg}", e.name, e.phase, revisions(e))
}

/// The wave's node: every Instance that is not still Pending (those as one count), so a wave
/// being changed shows what changes and why each waits, a finished one what it did.
fn wave_node(name: &str, phase: &str, instances: &[&InstanceRollout]) -> Node {
    let count = |p: &str| instances.iter().filter(|e| e.phase == p).count();
    let mut node = Node::new(format!(
        "Wave {name} [{phase}] {}, {} succeeded, {} failed",
        kudo_engine::rollout::instances(instances.len()),
        count(ip::SUCCEEDED),
        instances.iter().filter(|e| !e.failure.is_empty()).count()
    ));
    if phase == wave_phase::PENDING {
        return node;
    }
    for e in instances.iter().filter(|e| e.phase != ip::PENDING) {
        node.push(Node::new(instance_line(e)));
    }
    let pending = count(ip::PENDING);
    if pending > 0 {
        node.push(Node::new(format!("{pending} Pending")));
    }
    node
}

/// The full `rollout status` output.
pub fn render(r: &Rollout) -> String {
    let st = r.status.clone().unwrap_or_default();
    let phase = if st.phase.is_empty() {
        "Pending"
    } else {
        st.phase.as_str()
    };
    let mut root = Node::new(format!("{} ({}) [{phase}]", r.metadata.name, target_words(r)));
    for w in &st.waves {
        let of: Vec<&InstanceRollout> = st.instances.iter().filter(|e| e.wave == w.name).collect();
        root.push(wave_node(&w.name, &w.phase, &of));
    }
    let outside: Vec<&InstanceRollout> = st.instances.iter().filter(|e| e.wave.is_empty()).collect();
    if !outside.is_empty() {
        let mut node = Node::new(format!(
            "{} in no wave",
            kudo_engine::rollout::instances(outside.len())
        ));
        for e in outside {
            node.push(Node::new(instance_line(e)));
        }
        root.push(node);
    }
    let message = if st.message.is_empty() {
        "no decision yet: is a manager running?".to_string()
    } else {
        st.message.clone()
    };
    format!(
        "Rollout \"{}\": {message}\n{}",
        r.metadata.name,
        tree::render(&[root])
    )
}

/// Pads rows into columns as kubectl does (three spaces between).
fn table(rows: Vec<Vec<String>>) -> String {
    let cols = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            let cells: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:w$}")).collect();
            format!("{}\n", cells.join("   ").trim_end())
        })
        .collect()
}

/// `rollout history`: one line per Rollout.
pub fn history(rollouts: &[Rollout]) -> String {
    let mut rows = vec![
        [
            "NAME",
            "TARGET",
            "PHASE",
            "INSTANCES",
            "SUCCEEDED",
            "FAILED",
            "STARTED",
            "FINISHED",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for r in rollouts {
        let st = r.status.clone().unwrap_or_default();
        let count = |p: &str| st.instances.iter().filter(|e| e.phase == p).count().to_string();
        let failed = st
            .instances
            .iter()
            .filter(|e| !e.failure.is_empty())
            .count()
            .to_string();
        rows.push(vec![
            r.metadata.name.clone(),
            target_words(r),
            if st.phase.is_empty() {
                "Pending".into()
            } else {
                st.phase.clone()
            },
            st.total.to_string(),
            count(ip::SUCCEEDED),
            failed,
            st.started_at.clone().unwrap_or_default(),
            st.finished_at.clone().unwrap_or_default(),
        ]);
    }
    table(rows)
}

/// `rollout history NAME`: one line per Instance of the rollout.
pub fn instances(r: &Rollout) -> String {
    let st = r.status.clone().unwrap_or_default();
    let mut rows = vec![
        [
            "INSTANCE", "WAVE", "PHASE", "FROM", "TO", "PLAN", "CHANGED", "MESSAGE",
        ]
        .map(String::from)
        .to_vec(),
    ];
    let num = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_default();
    for e in &st.instances {
        rows.push(vec![
            e.name.clone(),
            e.wave.clone(),
            e.phase.clone(),
            num(e.from_revision),
            num(e.to_revision),
            e.plan.clone(),
            e.changed_at.clone().unwrap_or_default(),
            e.message.clone(),
        ]);
    }
    table(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rollout() -> Rollout {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo-rs.dev/v1alpha1", "kind": "Rollout", "metadata": {"name": "fleet"},
            "spec": {"target": {"operatorVersion": "app-0.2.0", "parameters": {"P": "2"}}},
            "status": {
                "phase": "Progressing", "message": "wave 2 of 3 (wave-1): …", "total": 4,
                "waves": [
                    {"name": "canary", "phase": "Complete"},
                    {"name": "wave-1", "phase": "Progressing"},
                    {"name": "remaining", "phase": "Pending"},
                ],
                "instances": [
                    {"name": "ns/a", "wave": "canary", "phase": "Succeeded", "fromRevision": 1, "toRevision": 2},
                    {"name": "ns/b", "wave": "wave-1", "phase": "Progressing", "message": "plan deploy is running"},
                    {"name": "ns/c", "wave": "wave-1", "phase": "Pending"},
                    {"name": "ns/d", "wave": "remaining", "phase": "Pending"},
                    {"name": "ns/z", "wave": "", "phase": "Skipped", "message": "already at the target"},
                ],
            }
        }))
        .unwrap()
    }

    #[test]
    fn the_status_is_a_tree_of_waves() {
        assert_eq!(
            render(&rollout()),
            "Rollout \"fleet\": wave 2 of 3 (wave-1): …\n.\n\
             └── fleet (operatorVersion app-0.2.0, P=2) [Progressing]\n    \
             ├── Wave canary [Complete] 1 Instance, 1 succeeded, 0 failed\n    \
             │   └── ns/a [Succeeded] revision 1 → 2\n    \
             ├── Wave wave-1 [Progressing] 2 Instances, 0 succeeded, 0 failed\n    \
             │   ├── ns/b [Progressing]: plan deploy is running\n    \
             │   └── 1 Pending\n    \
             ├── Wave remaining [Pending] 1 Instance, 0 succeeded, 0 failed\n    \
             └── 1 Instance in no wave\n        \
             └── ns/z [Skipped]: already at the target\n"
        );
    }

    #[test]
    fn history_tables_list_rollouts_and_instances() {
        let h = history(&[rollout()]);
        let lines: Vec<&str> = h.lines().collect();
        assert!(lines[0].starts_with("NAME    TARGET"), "{h}");
        assert!(
            lines[1].starts_with("fleet   operatorVersion app-0.2.0, P=2   Progressing   4"),
            "{h}"
        );
        let i = instances(&rollout());
        assert!(
            i.lines()
                .nth(1)
                .unwrap()
                .starts_with("ns/a       canary      Succeeded     1      2"),
            "{i}"
        );
    }
}
