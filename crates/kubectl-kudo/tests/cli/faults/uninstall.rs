//! Uninstall with a cleanup plan, killed while it deletes: the kill rounds run one Instance for
//! their whole life, so they uninstall once; this test uninstalls a fresh Instance per round (its
//! own namespace), with the manager killed up to four times between the uninstall and the
//! Instance being gone — at the moment it is about to release the Instance's finalizer
//! (`mid-delete`), after the cleanup plan's apply, around its Events and status writes, and at
//! random delays. Every round must end with the cleanup plan run exactly once (its ConfigMap
//! created once, never recreated), the Instance gone, and every object the plans made garbage
//! collected.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ListParams;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use std::fmt::Debug;

use super::invariants::Checker;
use super::lab::{INSTANCE, Lab};
use super::manager::{self, End};
use super::tally::{Rng, Tally, When};
use super::{Fault, Shape, classify, ended, env_u64};

/// The fault of one life of an uninstall round: the armed fail point, how long the life may
/// last, and its label in the table.
fn pick(rng: &mut Rng) -> (Option<String>, Duration, String) {
    // An uninstall on the fake kubelet ends within a second: short delays land inside it.
    let points = [
        ("mid-delete", 1),
        ("after-child-apply", 1),
        ("after-status-write", 1),
        ("before-event", 2),
    ];
    let fault = Fault::pick_from(rng, 30, (20, 380), &points);
    let label = fault.label();
    match fault {
        Fault::Point(armed) => (Some(armed), Duration::from_secs(6), label),
        Fault::Delay(d) => (None, d, label),
    }
}

/// Waits (at most `limit`) for the manager to exit, `done` to hold, or `stop_after` to pass.
async fn live(
    lab: &Lab,
    m: &mut manager::Manager,
    stop_after: Duration,
    done: impl Fn(Option<&serde_json::Value>) -> bool,
) {
    while !m.exited() && m.started.elapsed() < stop_after {
        if done(lab.instance().await.as_ref()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The objects the plans made that are still in the namespace, once the garbage collector had
/// up to `limit` to delete them.
async fn leftovers(lab: &Lab, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let mut left = Vec::new();
        labelled::<ConfigMap>(lab, "ConfigMap", &mut left).await;
        labelled::<Deployment>(lab, "Deployment", &mut left).await;
        labelled::<Job>(lab, "Job", &mut left).await;
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Adds `kind/name` of every object of `K` labelled `heritage=kudo` in the lab's namespace to
/// `out` (or why they could not be listed).
async fn labelled<K>(lab: &Lab, kind: &str, out: &mut Vec<String>)
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
{
    let lp = ListParams::default().labels("heritage=kudo");
    match Api::<K>::namespaced(lab.client.clone(), &lab.ns).list(&lp).await {
        Ok(list) => out.extend(
            list.items
                .iter()
                .map(|o| format!("{kind}/{}", o.meta().name.as_deref().unwrap_or_default())),
        ),
        Err(e) => out.push(format!("{kind}: cannot list: {e}")),
    }
}

/// One round: a fresh Instance deployed without faults, uninstalled, up to four faulted lives,
/// then one life without faults until the Instance is gone; what went wrong, if anything.
async fn round(i: u64, rng: &mut Rng, tally: &mut Tally) -> Vec<String> {
    let mut lab = Lab::new("faults-del").await;
    let mut checker = Checker::start(&lab.client, &lab.ns, INSTANCE);
    lab.install(&["JOB_SECONDS=0.1"]).await;
    let none = BTreeSet::new();
    let mut m = lab.manager(None, None);
    live(&lab, &mut m, Duration::from_secs(90), |inst| {
        ended(inst, &none, Shape::Deploy).is_some()
    })
    .await;
    m.kill().await;
    let Some(deploy) = ended(lab.instance().await.as_ref(), &none, Shape::Deploy) else {
        return vec![format!(
            "uninstall round {i}: the deploy did not end COMPLETE in 90 s"
        )];
    };
    let prior = BTreeSet::from([deploy]);
    lab.kudo(&["uninstall", "--instance", INSTANCE]).await;
    for _ in 0..4 {
        let (armed, stop_after, label) = pick(rng);
        let mut m = lab.manager(armed.as_deref(), None);
        live(&lab, &mut m, stop_after, |inst| inst.is_none()).await;
        let fired = m.kill().await == End::FailPoint;
        let inst = lab.instance().await;
        let when = classify(inst.as_ref(), &prior, Shape::Uninstall);
        tally.kill(Shape::Uninstall.name(), &label, fired, when);
        if let Some(inst) = &inst {
            checker.snapshot(inst, &format!("uninstall round {i}"));
        }
        if when == When::After {
            break;
        }
    }
    let mut m = lab.manager(None, None);
    live(&lab, &mut m, Duration::from_secs(60), |inst| inst.is_none()).await;
    m.kill().await;
    let mut bad = Vec::new();
    if lab.instance().await.is_some() {
        bad.push(format!(
            "uninstall round {i}: the Instance was still there 60 s later"
        ));
    }
    let left = leftovers(&lab, Duration::from_secs(60)).await;
    if !left.is_empty() {
        bad.push(format!(
            "uninstall round {i}: not garbage collected in 60 s: {left:?}"
        ));
    }
    let goodbye = checker.uids(&format!("ConfigMap/{INSTANCE}-goodbye"));
    if goodbye != 1 {
        bad.push(format!(
            "uninstall round {i}: the cleanup plan's ConfigMap had {goodbye} uids, want 1"
        ));
    }
    bad.append(&mut checker.recreated(&format!("uninstall round {i}")));
    checker.stop();
    bad.extend(manager::bad_lines(&lab.logs));
    lab.finish().await;
    bad
}

/// `FAULTS_UNINSTALLS` rounds (12 by default) of an uninstall killed while it deletes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "fault cluster: run by scripts/faults-stage.sh"]
async fn faults_uninstall_killed_while_it_deletes_runs_cleanup_once_and_leaves_nothing() {
    let _turn = super::ONE_AT_A_TIME.lock().await;
    let rounds = env_u64("FAULTS_UNINSTALLS", 12);
    let seed = env_u64("FAULTS_SEED", 54);
    let mut rng = Rng::new(seed ^ 0xde1e7e);
    let mut tally = Tally::default();
    let started = Instant::now();
    let mut bad = Vec::new();
    for i in 0..rounds {
        println!("--- uninstall round {i} ({} kills so far)", tally.totals().0);
        bad.extend(round(i, &mut rng, &mut tally).await);
    }
    println!(
        "\n=== uninstall fault table (seed {seed}, {rounds} Instances, {:.0} s)\n{}",
        started.elapsed().as_secs_f64(),
        tally.table()
    );
    assert!(bad.is_empty(), "{bad:#?}");
    let fired = tally.fired(Shape::Uninstall.name(), "fail point mid-delete");
    assert!(fired > 0, "the mid-delete fail point never fired");
}
