//! One decision of a rollout ([`decide`]): place new Instances into waves, read what each
//! Instance says, then either advance the waves or roll back, and conclude the phase, message
//! and conditions. See the module docs of [`super`] for the course it follows.

use std::collections::HashMap;

use kudo_api::ExecutionStatus;
use kudo_api::rollout::{InstanceRollout, RolloutStatus, WaveStatus};

use super::instance::{Judged, View, busy, health, judge, rolled_back, view};
use super::settings::{Settings, settings};
use super::waves::{Candidate, assign};
use super::{
    Action, Decision, Observed, RolloutMark, Seen, conditions, instance_phase as ip, key, phase, wave_phase,
};
use crate::time::Timestamp;

/// How long a rollout with work left goes without a look when nothing wakes it.
const BACKSTOP_SECS: u64 = 60;

/// Entries that no observation changes any more (while the rollout goes forward).
fn settled(p: &str) -> bool {
    matches!(
        p,
        ip::SUCCEEDED | ip::FAILED | ip::SKIPPED | ip::DELETED | ip::ROLLED_BACK | ip::ROLLBACK_FAILED
    )
}

/// The Instances whose revisions the decision needs: those the rollout changed whose revision
/// numbers are not known yet (read once each, then kept in the status).
pub fn wanted_revisions(obs: &Observed<'_>) -> Vec<String> {
    let status = obs.rollout.status.clone().unwrap_or_default();
    let uid = obs.rollout.uid();
    obs.instances
        .iter()
        .filter(|s| view(s.instance, uid).run().is_some())
        .map(|s| key(s.instance))
        .filter(|k| {
            status.instances.iter().find(|e| &e.name == k).is_none_or(|e| {
                let unknown = e.from_revision.is_none() || e.to_revision.is_none();
                // A rollback restores the values its revision recorded.
                let rollback = obs.rollout.spec.on_failure == kudo_api::rollout::OnFailure::Rollback;
                let restoring = status.phase == phase::ROLLING_BACK || (rollback && !e.failure.is_empty());
                unknown
                    || (restoring
                        && !matches!(
                            e.phase.as_str(),
                            ip::ROLLED_BACK | ip::ROLLBACK_FAILED | ip::DELETED
                        ))
            })
        })
        .collect()
}

/// The decision of one reconcile of the rollout (see the module docs).
pub fn decide(obs: &Observed<'_>) -> Decision {
    let mut st = obs.rollout.status.clone().unwrap_or_default();
    let generation = obs.rollout.generation();
    st.observed_generation = generation;
    if super::is_final(&st.phase) {
        return Decision {
            status: st,
            actions: Vec::new(),
            requeue: None,
        };
    }
    let s = match settings(&obs.rollout.spec) {
        Ok(s) => s,
        Err(e) => {
            st.phase = phase::INVALID.into();
            st.message = e.to_string();
            conditions::set(
                &mut st.conditions,
                phase::INVALID,
                &st.message,
                generation,
                obs.now,
            );
            return Decision {
                status: st,
                actions: Vec::new(),
                requeue: None,
            };
        }
    };
    let mut run = Run::new(obs, &s, st);
    run.begin();
    run.place();
    let rolling_back = run.rolling_back();
    for i in 0..run.st.instances.len() {
        run.observe(i, rolling_back);
    }
    if run.rolling_back() {
        run.roll_back();
    } else {
        run.advance();
    }
    run.conclude()
}

/// The working state of one decision.
struct Run<'o, 'a> {
    obs: &'o Observed<'a>,
    s: &'o Settings,
    st: RolloutStatus,
    seen: HashMap<String, &'o Seen<'a>>,
    actions: Vec<Action>,
    /// The soonest instant something is due (a deadline, the gate's clock).
    wake: Option<Timestamp>,
}

impl<'o, 'a> Run<'o, 'a> {
    fn new(obs: &'o Observed<'a>, s: &'o Settings, st: RolloutStatus) -> Self {
        let seen = obs.instances.iter().map(|s| (key(s.instance), s)).collect();
        Run {
            obs,
            s,
            st,
            seen,
            actions: Vec::new(),
            wake: None,
        }
    }

    fn now(&self) -> Timestamp {
        self.obs.now
    }

    fn wake_at(&mut self, t: Timestamp) {
        self.wake = Some(self.wake.map_or(t, |w| w.min(t)));
    }

    /// The Instance an entry names, if it is still selected and the same one (same uid).
    fn seen_of(&self, e: &InstanceRollout) -> Option<&'o Seen<'a>> {
        let s = *self.seen.get(&e.name)?;
        let uid = s
            .instance
            .metadata
            .other
            .get("uid")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        (e.uid.is_empty() || e.uid == uid).then_some(s)
    }

    /// The first decision starts the clock; every decision lists the waves of the spec.
    fn begin(&mut self) {
        if self.st.started_at.is_none() {
            self.st.started_at = Some(self.now().to_string());
        }
        let mut waves = Vec::new();
        for w in &self.s.waves {
            let kept = self.st.waves.iter().find(|s| s.name == w.name).cloned();
            waves.push(kept.unwrap_or_else(|| WaveStatus {
                name: w.name.clone(),
                phase: wave_phase::PENDING.into(),
                ..WaveStatus::default()
            }));
        }
        self.st.waves = waves;
        let last = self.s.waves.last().map(|w| w.name.clone()).unwrap_or_default();
        for e in &mut self.st.instances {
            if !e.wave.is_empty() && !self.s.waves.iter().any(|w| w.name == e.wave) {
                e.wave = last.clone();
            }
        }
    }

    /// The Instances the status does not list yet, sorted (an Instance deleted and created again
    /// is a new one: its old entry goes).
    fn newcomers(&mut self) -> Vec<&'o Seen<'a>> {
        let known: HashMap<String, String> = self
            .st
            .instances
            .iter()
            .map(|e| (e.name.clone(), e.uid.clone()))
            .collect();
        let mut new: Vec<&'o Seen<'a>> = self
            .obs
            .instances
            .iter()
            .filter(|s| {
                known
                    .get(&key(s.instance))
                    .is_none_or(|u| !u.is_empty() && *u != uid_of(s))
            })
            .collect();
        new.sort_by_key(|s| key(s.instance));
        let renewed: Vec<String> = new.iter().map(|s| key(s.instance)).collect();
        self.st.instances.retain(|e| !renewed.contains(&e.name));
        new
    }

    /// Places the Instances the status does not list yet into waves; one already at the target
    /// when placed is skipped, in no wave.
    fn place(&mut self) {
        let new = self.newcomers();
        let (at_target, to_place): (Vec<&Seen<'a>>, Vec<&Seen<'a>>) = new.into_iter().partition(|s| {
            view(s.instance, self.obs.rollout.uid()) == View::Untouched && at_target(s, self.obs)
        });
        let started = self.st.waves.iter().any(|w| w.phase != wave_phase::PENDING);
        if !started {
            self.st.total =
                (self.st.instances.iter().filter(|e| !e.wave.is_empty()).count() + to_place.len()) as u64;
        }
        let first_open = self
            .st
            .waves
            .iter()
            .position(|w| w.phase == wave_phase::PENDING)
            .unwrap_or(self.st.waves.len());
        let first_open = if started { first_open.max(1) } else { 0 };
        let keys: Vec<String> = to_place.iter().map(|s| key(s.instance)).collect();
        let candidates: Vec<Candidate<'_>> = to_place
            .iter()
            .zip(&keys)
            .map(|(s, k)| Candidate {
                key: k,
                labels: &s.instance.metadata.labels,
            })
            .collect();
        let placed = assign(
            &self.s.waves,
            &self.st.instances,
            &candidates,
            self.st.total,
            first_open,
        );
        for ((k, wave), s) in placed.into_iter().zip(&to_place) {
            self.st.instances.push(entry(k, uid_of(s), wave, ip::PENDING, ""));
        }
        for s in at_target {
            let e = entry(
                key(s.instance),
                uid_of(s),
                String::new(),
                ip::SKIPPED,
                "already at the target",
            );
            self.st.instances.push(e);
        }
        let order: HashMap<&str, usize> = self
            .s
            .waves
            .iter()
            .enumerate()
            .map(|(i, w)| (w.name.as_str(), i))
            .collect();
        self.st.instances.sort_by(|a, b| {
            (order.get(a.wave.as_str()), &a.name).cmp(&(order.get(b.wave.as_str()), &b.name))
        });
    }

    /// Reads what the Instance of entry `i` says about the rollout's change (see [`View`]).
    fn observe(&mut self, i: usize, rolling_back: bool) {
        let e = self.st.instances[i].clone();
        if settled(&e.phase) && !(rolling_back && e.phase != ip::DELETED && e.changed_at.is_some()) {
            return;
        }
        // Rolling back, the entries the rollout changed are [`Run::roll_back_one`]'s.
        let Some(seen) = self.seen_of(&e) else {
            let e = &mut self.st.instances[i];
            e.phase = ip::DELETED.into();
            e.message = "deleted, or no longer selected".into();
            return;
        };
        let v = view(seen.instance, self.obs.rollout.uid());
        let mut e = e;
        if let (Some(revs), Some((run, _))) = (seen.revisions, v.run()) {
            fill_revisions(&mut e, revs, run);
        }
        record(&mut e, &v);
        if !rolling_back {
            self.follow(&mut e, seen, &v);
        }
        self.st.instances[i] = e;
    }

    /// The entry's phase from the view of its Instance, and its progress deadline.
    fn follow(&mut self, e: &mut InstanceRollout, seen: &Seen<'_>, v: &View) {
        let (p, msg) = match v {
            View::Untouched if e.phase == ip::PROGRESSING && e.changed_at.is_none() => {
                // The change was not written (a conflict): it is judged again.
                (ip::PENDING, String::new())
            }
            View::Untouched => return,
            View::Admitting { .. } => (
                ip::PROGRESSING,
                "waiting for the manager to admit the change".into(),
            ),
            View::Running { plan, .. } => (ip::PROGRESSING, format!("plan {plan} is running")),
            View::Ended {
                plan,
                status: Some(ExecutionStatus::Complete),
                ..
            } => match health(seen.instance, seen.target_ov.or(seen.current_ov), &self.s.rules) {
                Ok(()) => (ip::HEALTHY, String::new()),
                Err(why) => (ip::PROGRESSING, format!("plan {plan} is COMPLETE; {why}")),
            },
            View::Ended {
                plan,
                status: Some(st),
                ..
            } => (ip::FAILED, format!("plan {plan} ended {st}")),
            View::Ended {
                plan, status: None, ..
            } => (
                ip::FAILED,
                format!("the run of plan {plan} was replaced by another run"),
            ),
        };
        e.phase = p.into();
        e.message = msg;
        self.check_deadline(e);
        if e.phase == ip::FAILED {
            e.failure = e.message.clone();
        }
    }

    /// A changed Instance that is not healthy within `progressDeadline` of the change fails.
    fn check_deadline(&mut self, e: &mut InstanceRollout) {
        if e.phase != ip::PROGRESSING {
            return;
        }
        let Some(at) = e.changed_at.as_deref().and_then(|t| Timestamp::parse(t).ok()) else {
            return;
        };
        let due = at.plus_seconds(self.s.progress_deadline_secs);
        if self.now() >= due {
            e.phase = ip::FAILED.into();
            e.message = format!(
                "not COMPLETE and healthy within {}s of the change: {}",
                self.s.progress_deadline_secs, e.message
            );
        } else {
            self.wake_at(due);
        }
    }

    fn failures(&self) -> u64 {
        self.st.instances.iter().filter(|e| !e.failure.is_empty()).count() as u64
    }

    fn over_budget(&self) -> bool {
        self.failures() > self.s.budget(self.st.total)
    }

    fn rolling_back(&self) -> bool {
        self.st.phase == phase::ROLLING_BACK
            || (self.over_budget() && self.s.on_failure == kudo_api::rollout::OnFailure::Rollback)
    }

    /// Why no Instance may be changed now, if so.
    fn stopped(&self) -> Option<&'static str> {
        let spec = &self.obs.rollout.spec;
        if self.over_budget() {
            Some(phase::HALTED)
        } else if spec.abort {
            Some(phase::ABORTED)
        } else if spec.paused {
            Some(phase::PAUSED)
        } else {
            None
        }
    }

    /// Goes through the waves in order: starts the first that did not complete (once approved),
    /// changes its Instances, and completes it when its gate passes.
    fn advance(&mut self) {
        for w in 0..self.st.waves.len() {
            let wp = self.st.waves[w].phase.clone();
            if wp == wave_phase::COMPLETE {
                continue;
            }
            if wp != wave_phase::PROGRESSING {
                if self.stopped().is_some() {
                    return;
                }
                let def = &self.s.waves[w];
                if def.approval && !self.obs.rollout.spec.approved_waves.contains(&def.name) {
                    self.st.waves[w].phase = wave_phase::WAITING_FOR_APPROVAL.into();
                    return;
                }
                self.st.waves[w].phase = wave_phase::PROGRESSING.into();
                self.st.waves[w].started_at = Some(self.now().to_string());
            }
            if self.stopped().is_none() {
                self.start_instances(w);
            }
            if !self.gate(w) {
                return;
            }
        }
    }

    /// Changes the waiting Instances of wave `w`, while fewer than its `maxConcurrent` change.
    fn start_instances(&mut self, w: usize) {
        let name = self.st.waves[w].name.clone();
        let in_wave = self.st.instances.iter().filter(|e| e.wave == name).count() as u64;
        let limit = self.s.concurrency(
            &self.s.waves[w],
            self.obs.rollout.spec.max_concurrent.as_ref(),
            in_wave,
        );
        for i in 0..self.st.instances.len() {
            let changing = self
                .st
                .instances
                .iter()
                .filter(|e| e.wave == name && e.phase == ip::PROGRESSING)
                .count() as u64;
            if changing >= limit || self.over_budget() {
                return;
            }
            let e = &self.st.instances[i];
            if e.wave == name && (e.phase == ip::PENDING || e.phase == ip::WAITING) {
                self.start(i);
            }
        }
    }

    /// Judges and, when KUDO's rules let it, changes the Instance of entry `i`.
    fn start(&mut self, i: usize) {
        let Some(seen) = self.seen_of(&self.st.instances[i]) else {
            return;
        };
        let inst = seen.instance;
        let (p, msg) = if let Some(why) = busy(inst) {
            (ip::WAITING, why)
        } else if let Some(current) = seen.current_ov {
            match judge(inst, current, seen.target_ov, &self.obs.rollout.spec.target) {
                Judged::AtTarget => (ip::SKIPPED, "already at the target".to_string()),
                Judged::Refused(m) => (ip::FAILED, format!("refused: {m}")),
                Judged::Runs(plan) => {
                    let rollout = self.obs.rollout;
                    self.actions.push(Action::Change {
                        instance: key(inst),
                        plan: plan.clone(),
                        mark: RolloutMark {
                            name: rollout.metadata.name.clone(),
                            uid: rollout.uid().to_string(),
                            at: self.now().to_string(),
                            run: None,
                        },
                    });
                    self.st.instances[i].plan = plan.clone();
                    (ip::PROGRESSING, format!("changing: plan {plan} will run"))
                }
            }
        } else {
            let ov = &inst.spec.operator_version.name;
            (ip::WAITING, format!("its OperatorVersion {ov} is missing"))
        };
        let e = &mut self.st.instances[i];
        e.phase = p.into();
        if p == ip::FAILED {
            e.failure = msg.clone();
        }
        e.message = msg;
    }

    /// Whether wave `w` may complete: every Instance of it is healthy, settled or failed, and the
    /// healthy ones have been so together for `minSuccessTime`. Completes it if so.
    fn gate(&mut self, w: usize) -> bool {
        let name = self.st.waves[w].name.clone();
        let of_wave = || self.st.instances.iter().filter(|e| e.wave == name);
        let done = of_wave().all(|e| e.phase == ip::HEALTHY || settled(&e.phase));
        if !done {
            self.st.waves[w].healthy_since = None;
            return false;
        }
        if of_wave().any(|e| e.phase == ip::HEALTHY) {
            let since = self.st.waves[w]
                .healthy_since
                .as_deref()
                .and_then(|t| Timestamp::parse(t).ok())
                .unwrap_or(self.now());
            self.st.waves[w].healthy_since = Some(since.to_string());
            let due = since.plus_seconds(self.s.min_success_secs);
            if self.now() < due {
                self.wake_at(due);
                return false;
            }
        }
        for e in self
            .st
            .instances
            .iter_mut()
            .filter(|e| e.wave == name && e.phase == ip::HEALTHY)
        {
            e.phase = ip::SUCCEEDED.into();
            e.message.clear();
        }
        let now = self.now().to_string();
        let wave = &mut self.st.waves[w];
        wave.phase = wave_phase::COMPLETE.into();
        wave.completed_at = Some(now);
        true
    }

    /// Rolls back every Instance the rollout changed, one decision at a time.
    fn roll_back(&mut self) {
        self.st.phase = phase::ROLLING_BACK.into();
        for i in 0..self.st.instances.len() {
            let e = &self.st.instances[i];
            let done = matches!(
                e.phase.as_str(),
                ip::DELETED | ip::ROLLED_BACK | ip::ROLLBACK_FAILED
            );
            if e.changed_at.is_some() && !done {
                self.roll_back_one(i);
            }
        }
    }

    fn roll_back_one(&mut self, i: usize) {
        let e = self.st.instances[i].clone();
        let Some(seen) = self.seen_of(&e) else {
            return;
        };
        let v = view(seen.instance, self.obs.rollout.uid());
        let (p, msg) = match (e.from_revision, seen.revisions, seen.current_ov) {
            _ if matches!(v, View::Admitting { .. }) => (
                ip::ROLLING_BACK,
                "waits for the manager to admit the rollout's change".to_string(),
            ),
            (None, _, _) | (_, None, _) => (ip::ROLLING_BACK, "reading its revisions".to_string()),
            (_, _, None) => (ip::ROLLING_BACK, "its OperatorVersion is missing".to_string()),
            (Some(from), Some(revs), Some(ov)) => match revs.iter().find(|r| r.number == from) {
                None => (
                    ip::ROLLBACK_FAILED,
                    format!("revision {from} is no longer recorded"),
                ),
                Some(r) => self.roll_back_to(&e, seen, ov, &v, r),
            },
        };
        let e = &mut self.st.instances[i];
        e.phase = p.into();
        e.message = msg;
    }

    /// The rollback of an entry to revision `r`: done, running, or what to do first.
    fn roll_back_to(
        &mut self,
        e: &InstanceRollout,
        seen: &Seen<'_>,
        ov: &kudo_api::OperatorVersion,
        v: &View,
        r: &crate::revision::Revision,
    ) -> (&'static str, String) {
        let inst = seen.instance;
        match rolled_back(inst, ov, &r.data) {
            Some(Ok(true)) => (
                ip::ROLLED_BACK,
                format!("back on the values of revision {}", r.number),
            ),
            Some(Ok(false)) => (ip::ROLLING_BACK, format!("rolling back to revision {}", r.number)),
            Some(Err(m)) => (ip::ROLLBACK_FAILED, m),
            None => {
                if let View::Running { run, .. } = v {
                    self.actions.push(Action::Cancel {
                        instance: e.name.clone(),
                        run: run.clone(),
                    });
                    return (ip::ROLLING_BACK, "stopping the rollout's run to roll back".into());
                }
                if let Some(why) = busy(inst) {
                    return (ip::ROLLING_BACK, format!("{why}; rolls back once it ends"));
                }
                self.actions.push(Action::Rollback {
                    instance: e.name.clone(),
                    to: r.number,
                });
                (ip::ROLLING_BACK, format!("rolling back to revision {}", r.number))
            }
        }
    }

    /// The phase, message and conditions; the requeue.
    fn conclude(mut self) -> Decision {
        let (p, msg) = self.phase();
        self.st.phase = p.into();
        self.st.message = msg;
        let now = self.now();
        if super::is_final(p) && self.st.finished_at.is_none() {
            self.st.finished_at = Some(now.to_string());
        }
        let generation = self.obs.rollout.generation();
        conditions::set(&mut self.st.conditions, p, &self.st.message, generation, now);
        let requeue = if super::is_final(p) {
            None
        } else {
            let due = self
                .wake
                .map_or(BACKSTOP_SECS, |w| w.seconds_since(now).max(1) as u64);
            Some(due.min(BACKSTOP_SECS))
        };
        Decision {
            status: self.st,
            actions: self.actions,
            requeue,
        }
    }

    /// The rollout's phase and its message.
    fn phase(&self) -> (&'static str, String) {
        let count = |p: &str| self.st.instances.iter().filter(|e| e.phase == p).count();
        let changing = count(ip::PROGRESSING) + count(ip::ROLLING_BACK);
        if self.st.phase == phase::ROLLING_BACK {
            let left = count(ip::ROLLING_BACK);
            let msg = format!(
                "{} failed (at most {} may): {} rolled back, {left} rolling back, {} failed to roll back",
                self.failures(),
                self.s.budget(self.st.total),
                count(ip::ROLLED_BACK),
                count(ip::ROLLBACK_FAILED)
            );
            return (
                if left == 0 {
                    phase::ROLLED_BACK
                } else {
                    phase::ROLLING_BACK
                },
                msg,
            );
        }
        if self.obs.rollout.spec.abort {
            let msg = format!(
                "aborted: {} still changing, {} failed",
                super::instances(changing),
                self.failures()
            );
            return (
                if changing == 0 {
                    phase::ABORTED
                } else {
                    phase::PROGRESSING
                },
                msg,
            );
        }
        let current = self.st.waves.iter().position(|w| w.phase != wave_phase::COMPLETE);
        let Some(w) = current else {
            let msg = format!(
                "{} succeeded, {} failed, {} skipped, {} deleted",
                count(ip::SUCCEEDED),
                count(ip::FAILED),
                count(ip::SKIPPED),
                count(ip::DELETED)
            );
            return (phase::COMPLETE, msg);
        };
        let wave = &self.st.waves[w];
        let in_wave = |p: &str| {
            self.st
                .instances
                .iter()
                .filter(|e| e.wave == wave.name && e.phase == p)
                .count()
        };
        let of = self.st.instances.iter().filter(|e| e.wave == wave.name).count();
        let msg = format!(
            "wave {} of {} ({}): {} changing, {} healthy, {} succeeded, {} failed of {of}; {} failed in all (at most {} may)",
            w + 1,
            self.st.waves.len(),
            wave.name,
            in_wave(ip::PROGRESSING),
            in_wave(ip::HEALTHY),
            in_wave(ip::SUCCEEDED),
            in_wave(ip::FAILED),
            self.failures(),
            self.s.budget(self.st.total)
        );
        let p = match self.stopped() {
            Some(p) => p,
            None if wave.phase == wave_phase::WAITING_FOR_APPROVAL => phase::WAITING_FOR_APPROVAL,
            None => phase::PROGRESSING,
        };
        (p, msg)
    }
}

/// What the view says of the change itself: when it was written, its run and plan.
fn record(e: &mut InstanceRollout, v: &View) {
    if let Some(at) = v.at() {
        e.changed_at = Some(at.to_string());
    }
    if let Some((run, plan)) = v.run() {
        e.run = run.to_string();
        if !plan.is_empty() {
            e.plan = plan.to_string();
        }
    }
}

/// A new entry of the status.
fn entry(name: String, uid: String, wave: String, p: &str, message: &str) -> InstanceRollout {
    InstanceRollout {
        name,
        uid,
        wave,
        phase: p.into(),
        message: message.into(),
        ..InstanceRollout::default()
    }
}

fn uid_of(s: &Seen<'_>) -> String {
    let uid = s.instance.metadata.other.get("uid").and_then(|v| v.as_str());
    uid.unwrap_or_default().to_string()
}

/// Whether the change would leave the Instance as it is.
fn at_target(s: &Seen<'_>, obs: &Observed<'_>) -> bool {
    super::instance::proposed(s.instance, &obs.rollout.spec.target) == s.instance.spec
}

/// The revision of the rollout's run `run`, and the newest before it, from the Instance's
/// revisions (oldest first).
fn fill_revisions(e: &mut InstanceRollout, revs: &[crate::revision::Revision], run: &str) {
    let Some(to) = revs.iter().find(|r| r.data.plan_uid == run) else {
        return;
    };
    e.to_revision = Some(to.number);
    if e.from_revision.is_none() {
        e.from_revision = revs
            .iter()
            .filter(|r| r.number < to.number)
            .map(|r| r.number)
            .max();
    }
}
