//! Which wave each Instance belongs to. Instances are taken in the order of their
//! `namespace/name`; each goes to the first wave that takes it: one with room (a `size`, of the
//! rollout's total) whose selector, if any, matches its labels. An Instance no declared wave
//! takes belongs to the last wave, which takes every Instance left.
//!
//! The assignment is made once per Instance and kept in the Rollout's status, so a restarted
//! manager keeps it. An Instance that joins later (newly selected) goes to the first wave that has
//! not started and takes it, else to the last wave; never to the canary once it started.

use std::collections::BTreeMap;

use kudo_api::rollout::InstanceRollout;

use super::settings::WaveDef;

/// One Instance to place: its `namespace/name` and labels.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// `namespace/name`: the order Instances are placed in and how the status names them.
    pub key: &'a str,
    /// Its labels, matched against each wave's selector.
    pub labels: &'a BTreeMap<String, String>,
}

/// Places `new` (sorted by key) into `waves`, given the Instances already placed (`placed`, by
/// wave name) and the total the sizes are of. `first_open`: the index of the first wave that may
/// still take Instances (0 before the rollout started). Returns `(key, wave name)` per candidate.
pub fn assign(
    waves: &[WaveDef],
    placed: &[InstanceRollout],
    new: &[Candidate<'_>],
    total: u64,
    first_open: usize,
) -> Vec<(String, String)> {
    let mut count: Vec<u64> = waves
        .iter()
        .map(|w| placed.iter().filter(|p| p.wave == w.name).count() as u64)
        .collect();
    let last = waves.len().saturating_sub(1);
    let mut out = Vec::new();
    for c in new {
        let takes = |(i, w): &(usize, &WaveDef)| {
            let room = w
                .size
                .as_ref()
                .is_none_or(|s| count[*i] < s.of(total).unwrap_or(0));
            let fits = w.selector.as_ref().is_none_or(|s| s.matches(c.labels));
            room && fits
        };
        let at = waves
            .iter()
            .enumerate()
            .skip(first_open.min(last))
            .find(takes)
            .map_or(last, |(i, _)| i);
        count[at] += 1;
        out.push((c.key.to_string(), waves[at].name.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudo_api::rollout::{Amount, LabelSelector};

    fn wave(name: &str, size: Option<Amount>, selector: Option<(&str, &str)>) -> WaveDef {
        WaveDef {
            name: name.into(),
            size,
            selector: selector.map(|(k, v)| LabelSelector {
                match_labels: BTreeMap::from([(k.to_string(), v.to_string())]),
                ..Default::default()
            }),
            max_concurrent: None,
            approval: false,
        }
    }

    fn names(out: &[(String, String)]) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for (_, w) in out {
            *m.entry(w.clone()).or_default() += 1;
        }
        m
    }

    #[test]
    fn sizes_are_of_the_total_and_the_last_wave_takes_the_rest() {
        let waves = [
            wave("canary", Some(Amount::Count(1)), None),
            wave("a", Some(Amount::Text("33%".into())), None),
            wave("b", Some(Amount::Text("33%".into())), None),
            wave("remaining", None, None),
        ];
        let labels = BTreeMap::new();
        let keys: Vec<String> = (0..70).map(|i| format!("ns/i-{i:02}")).collect();
        let new: Vec<Candidate> = keys
            .iter()
            .map(|k| Candidate {
                key: k,
                labels: &labels,
            })
            .collect();
        let out = assign(&waves, &[], &new, 70, 0);
        assert_eq!(out[0], ("ns/i-00".to_string(), "canary".to_string()));
        assert_eq!(
            names(&out),
            BTreeMap::from([
                ("canary".into(), 1),
                ("a".into(), 24),
                ("b".into(), 24),
                ("remaining".into(), 21)
            ])
        );
    }

    #[test]
    fn label_groups_take_their_instances_and_latecomers_go_to_open_waves() {
        let waves = [
            wave("canary", Some(Amount::Count(1)), None),
            wave("staging", None, Some(("env", "staging"))),
            wave("remaining", None, None),
        ];
        let staging = BTreeMap::from([("env".to_string(), "staging".to_string())]);
        let prod = BTreeMap::from([("env".to_string(), "prod".to_string())]);
        let new = [
            Candidate {
                key: "a/1",
                labels: &prod,
            },
            Candidate {
                key: "a/2",
                labels: &staging,
            },
            Candidate {
                key: "a/3",
                labels: &prod,
            },
            Candidate {
                key: "a/4",
                labels: &staging,
            },
        ];
        let out = assign(&waves, &[], &new, 4, 0);
        let wave_of = |k: &str| out.iter().find(|(key, _)| key == k).unwrap().1.clone();
        assert_eq!(wave_of("a/1"), "canary");
        assert_eq!(wave_of("a/2"), "staging");
        assert_eq!(wave_of("a/3"), "remaining");
        assert_eq!(wave_of("a/4"), "staging");
        // Joining once the canary started: never the canary, the first open wave that takes it.
        let placed: Vec<InstanceRollout> = out
            .iter()
            .map(|(k, w)| InstanceRollout {
                name: k.clone(),
                wave: w.clone(),
                ..Default::default()
            })
            .collect();
        let late = [
            Candidate {
                key: "a/0",
                labels: &prod,
            },
            Candidate {
                key: "a/5",
                labels: &staging,
            },
        ];
        let later = assign(&waves, &placed, &late, 4, 1);
        assert_eq!(
            later,
            [
                ("a/0".into(), "remaining".into()),
                ("a/5".into(), "staging".into())
            ]
        );
        // Once only the last wave is open, everything goes there.
        let last = assign(&waves, &placed, &late, 4, 2);
        assert!(last.iter().all(|(_, w)| w == "remaining"), "{last:?}");
    }
}
