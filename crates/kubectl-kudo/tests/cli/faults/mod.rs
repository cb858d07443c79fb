//! The fault harness: managers out of cluster (this build's `kubectl-kudo manager`), killed
//! over and over on the real control plane of ../shared/real-cluster while plans of every shape
//! the faulty package has run, uninstalls killed while they delete, watches expired while the
//! manager was away, and the API server itself taken away. Run by
//! scripts/faults-stage.sh (its own cluster, `FAULTS=N` kills, `FAULTS_SEED=S`), which sets
//! `$KUDO_FAULTS_KUBECONFIG`; the tests are `#[ignore]`d for every other stage.
//!
//! A kill is one manager life: started with a named fail point armed (`KUDO_FAILPOINT`, see
//! `kudo_controller::failpoint`) it aborts exactly there; started without one it is SIGKILLed
//! after a random delay. After every kill the Instance says whether the plan was before, during
//! or after its run; then the next life starts. Every round ends with a life without faults that
//! takes the plan to its end, and the one [`invariants::Checker`] judges the history.

mod expired;
mod invariants;
mod lab;
mod manager;
mod outage;
mod package;
mod proxy;
mod regressions;
mod tally;
mod uninstall;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;

use invariants::Checker;
use lab::{INSTANCE, Lab};
use manager::Manager;
use tally::{Rng, Tally, When};

/// A plan shape: what the round changes before its plan runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Deploy,
    Update,
    Upgrade,
    Rollback,
    Trigger,
    Uninstall,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Deploy => "deploy (install)",
            Shape::Update => "parameter update",
            Shape::Upgrade => "upgrade 0.1.0 → 0.2.0",
            Shape::Rollback => "rollback to 0.1.0",
            Shape::Trigger => "plan trigger (re-run)",
            Shape::Uninstall => "uninstall with cleanup",
        }
    }
}

/// One kill: a named fail point (`NAME:N`) or a delay after the manager's start.
enum Fault {
    Point(String),
    Delay(Duration),
}

impl Fault {
    fn label(&self) -> String {
        match self {
            Fault::Point(p) => format!("fail point {}", p.split(':').next().unwrap_or_default()),
            Fault::Delay(_) => "random delay".into(),
        }
    }

    fn pick(rng: &mut Rng, shape: Shape) -> Fault {
        let points: &[(&str, u64)] = match shape {
            Shape::Uninstall => &[("mid-delete", 2), ("after-child-apply", 1), ("before-event", 2)],
            _ => &[
                ("after-child-apply", 5),
                ("after-status-write", 3),
                ("before-event", 3),
                ("after-admission-write", 1),
            ],
        };
        Fault::pick_from(rng, 40, (50, 950), points)
    }

    /// A random delay (`percent` of the time, `from` ms plus up to `span` ms), else one of
    /// `points` (name, visits) armed at a visit drawn among its first `visits`.
    fn pick_from(rng: &mut Rng, percent: u64, (from, span): (u64, u64), points: &[(&str, u64)]) -> Fault {
        if rng.below(100) < percent {
            return Fault::Delay(Duration::from_millis(from + rng.below(span)));
        }
        let (name, visits) = points[rng.below(points.len() as u64) as usize];
        Fault::Point(format!("{name}:{}", 1 + rng.below(visits)))
    }
}

/// Where the plan of a round stands in `inst`: the runs in `prior` are older rounds'.
fn classify(inst: Option<&Value>, prior: &BTreeSet<String>, shape: Shape) -> When {
    let Some(inst) = inst else {
        return if shape == Shape::Uninstall {
            When::After
        } else {
            When::Before
        };
    };
    let new = inst["status"]["planStatus"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, ps)| ps)
        .find(|ps| {
            ps["uid"]
                .as_str()
                .is_some_and(|u| !u.is_empty() && !prior.contains(u))
        });
    // A change admitted (its run's uid stored in the spec) is a run begun, even before its
    // first status write.
    let admitted = inst["spec"]["planExecution"]["uid"]
        .as_str()
        .is_some_and(|u| !u.is_empty() && !prior.contains(u));
    match new {
        None if admitted => When::During,
        None => When::Before,
        Some(ps) if ps["status"] == "COMPLETE" && shape != Shape::Uninstall => When::After,
        Some(_) => When::During,
    }
}

/// The uid of the round's run once it ended COMPLETE (for an uninstall: the Instance gone).
fn ended(inst: Option<&Value>, prior: &BTreeSet<String>, shape: Shape) -> Option<String> {
    match (inst, shape) {
        (None, Shape::Uninstall) => Some(String::new()),
        (None, _) => None,
        (Some(i), _) => i["status"]["planStatus"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, ps)| ps)
            .find(|ps| {
                ps["status"] == "COMPLETE"
                    && ps["uid"]
                        .as_str()
                        .is_some_and(|u| !u.is_empty() && !prior.contains(u))
            })
            .map(|ps| ps["uid"].as_str().unwrap_or_default().to_string())
            .filter(|_| shape != Shape::Uninstall),
    }
}

/// The runs of one kill test and what they saw.
struct Rounds {
    lab: Lab,
    checker: Checker,
    tally: Tally,
    rng: Rng,
    /// Every run uid that ended, in order.
    runs: Vec<String>,
    /// The kill whose recovery is being timed: when, its label, the Instance's version then.
    pending: Option<(Instant, String, String, Option<String>)>,
    /// How many runs had ended when the last upgrade was made.
    before_upgrade: usize,
}

impl Rounds {
    /// Changes the Instance as `shape` does (no manager runs).
    async fn change(&mut self, shape: Shape, round: usize) {
        let r = format!("ROUND={round}");
        let v2 = self.lab.packages.1.clone();
        match shape {
            Shape::Deploy => self.lab.install(&[&r]).await,
            Shape::Update => self.lab.kudo(&["update", "--instance", INSTANCE, "-p", &r]).await,
            Shape::Upgrade => {
                self.before_upgrade = self.runs.len();
                self.lab
                    .kudo(&["upgrade", v2.to_str().unwrap(), "--instance", INSTANCE])
                    .await
            }
            Shape::Rollback => {
                // Back to the last run before the upgrade (0.1.0): revision n is the n-th run.
                let to = self.before_upgrade.to_string();
                self.lab
                    .kudo(&["rollback", "--instance", INSTANCE, "--to-revision", &to])
                    .await
            }
            Shape::Trigger => {
                self.lab
                    .kudo(&["plan", "trigger", "--name", "deploy", "--instance", INSTANCE])
                    .await
            }
            Shape::Uninstall => self.lab.kudo(&["uninstall", "--instance", INSTANCE]).await,
        };
    }

    /// Watches one manager life until its fail point fires, its delay passes, the round's plan
    /// ends, or `limit`; times the recovery of the kill before.
    async fn drive(&mut self, m: &mut Manager, fault: Option<&Fault>, shape: Shape, limit: Duration) {
        let prior: BTreeSet<String> = self.runs.iter().cloned().collect();
        let mut polled = Instant::now() - Duration::from_secs(1);
        loop {
            if m.exited() || m.started.elapsed() > limit {
                return;
            }
            if let Some(Fault::Delay(d)) = fault {
                tokio::time::sleep((*d).saturating_sub(m.started.elapsed())).await;
                return;
            }
            if polled.elapsed() >= Duration::from_millis(100) {
                polled = Instant::now();
                let inst = self.lab.instance().await;
                self.time_recovery(inst.as_ref());
                if fault.is_none() && ended(inst.as_ref(), &prior, shape).is_some() {
                    return;
                }
                if fault.is_some() && classify(inst.as_ref(), &prior, shape) == When::After {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The first write after a mid-plan kill ends its recovery.
    fn time_recovery(&mut self, inst: Option<&Value>) {
        let rv = inst.and_then(|i| i["metadata"]["resourceVersion"].as_str().map(String::from));
        if let Some((at, shape, fault, before)) = &self.pending
            && rv != *before
        {
            self.tally.recovered(shape, fault, at.elapsed());
            self.pending = None;
        }
    }

    /// One round: the change, up to `kills` faulted lives, then one life without faults to the
    /// plan's end (90 s at most).
    async fn round(&mut self, shape: Shape, round: usize, kills: usize) {
        println!(
            "--- round {round}: {} ({} kills so far)",
            shape.name(),
            self.tally.totals().0
        );
        self.change(shape, round).await;
        let prior: BTreeSet<String> = self.runs.iter().cloned().collect();
        for _ in 0..kills {
            let fault = Fault::pick(&mut self.rng, shape);
            let fp = match &fault {
                Fault::Point(p) => Some(p.as_str()),
                Fault::Delay(_) => None,
            };
            let mut m = self.lab.manager(fp, None);
            self.drive(&mut m, Some(&fault), shape, Duration::from_secs(6))
                .await;
            let fired = m.kill().await == manager::End::FailPoint;
            let inst = self.lab.instance().await;
            let when = classify(inst.as_ref(), &prior, shape);
            self.tally.kill(shape.name(), &fault.label(), fired, when);
            if let Some(i) = &inst {
                self.checker
                    .snapshot(i, &format!("{} round {round}", shape.name()));
            }
            if when == When::After {
                break;
            }
            let rv = inst
                .as_ref()
                .and_then(|i| i["metadata"]["resourceVersion"].as_str().map(String::from));
            if when == When::During {
                self.pending = Some((Instant::now(), shape.name().into(), fault.label(), rv));
            }
        }
        self.finish_round(shape, round, &prior).await;
    }

    async fn finish_round(&mut self, shape: Shape, round: usize, prior: &BTreeSet<String>) {
        let mut m = self.lab.manager(None, None);
        self.drive(&mut m, None, shape, Duration::from_secs(90)).await;
        m.kill().await;
        self.pending = None;
        let inst = self.lab.instance().await;
        let label = format!("{} round {round}", shape.name());
        if let Some(i) = &inst {
            self.checker.snapshot(i, &label);
        }
        match ended(inst.as_ref(), prior, shape) {
            Some(uid) if shape != Shape::Uninstall => self.runs.push(uid),
            Some(_) => {}
            None => {
                let mut status = inst.map(|i| i["status"].to_string()).unwrap_or_default();
                status.truncate(600);
                let v = format!("{label}: the plan did not end COMPLETE in 90 s: {status}");
                self.checker.violations.push(v);
            }
        }
    }
}

/// The order of the rounds after the install: every shape in turn, an upgrade always followed
/// (after an update) by the rollback to its 0.1.0.
const CYCLE: [Shape; 5] = [
    Shape::Update,
    Shape::Upgrade,
    Shape::Update,
    Shape::Rollback,
    Shape::Trigger,
];

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Held by each fault test for its whole run. The fault cluster is one, and the outage test
/// SIGKILLs its API server: a test running beside it would meet an outage it did not plan for
/// (its CLI calls fail, its manager's writes are cut off mid-flight), so the tests take turns.
pub(super) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `FAULTS` kills (300 by default) over every plan shape; every invariant holds after each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "fault cluster: run by scripts/faults-stage.sh"]
async fn faults_kill_points_over_every_plan_shape_leave_every_plan_complete() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let target = env_u64("FAULTS", 300);
    let seed = env_u64("FAULTS_SEED", 54);
    let lab = Lab::new("faults-kill").await;
    let checker = Checker::start(&lab.client, &lab.ns, INSTANCE);
    let mut r = Rounds {
        lab,
        checker,
        tally: Tally::default(),
        rng: Rng::new(seed),
        runs: Vec::new(),
        pending: None,
        before_upgrade: 0,
    };
    let started = Instant::now();
    r.round(Shape::Deploy, 0, 4).await;
    let mut round = 1;
    while r.tally.totals().0 < target && r.checker.violations.is_empty() {
        r.round(CYCLE[(round - 1) % CYCLE.len()], round, 4).await;
        round += 1;
    }
    let uid = r.lab.instance().await.expect("the Instance")["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    r.checker.check_objects("before the uninstall");
    r.checker.check_history(&uid, r.runs.len()).await;
    r.round(Shape::Uninstall, round, 4).await;
    report(&r, seed, started);
    r.checker.stop();
    r.lab.finish().await;
    let bad = manager::bad_lines(&r.lab.logs);
    assert!(bad.is_empty(), "manager logs: {bad:#?}");
    assert!(
        r.checker.violations.is_empty(),
        "invariants: {:#?}",
        r.checker.violations
    );
    let (kills, during) = r.tally.totals();
    assert!(kills >= target, "{kills} kills, wanted {target}");
    assert!(
        during * 2 >= target,
        "only {during} of {kills} kills landed mid-plan"
    );
}

fn report(r: &Rounds, seed: u64, started: Instant) {
    let (kills, during) = r.tally.totals();
    println!(
        "\n=== fault table (seed {seed}, {} plan runs, {} watch events, {:.0} s)",
        r.runs.len(),
        r.checker.events(),
        started.elapsed().as_secs_f64()
    );
    println!("{}", r.tally.table());
    println!(
        "kills {kills}, mid-plan {during}, violations {}",
        r.checker.violations.len()
    );
}
