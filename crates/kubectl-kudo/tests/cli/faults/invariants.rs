//! The one checker every fault ends with: it watches the namespace's owned objects (every watch
//! event's uid kept per object), takes a snapshot of the Instance after every fault, and at the
//! end judges the whole history:
//!
//! - every plan run ended COMPLETE, none ever FATAL_ERROR;
//! - no owned object was deleted or recreated (one uid per object, no delete event) before the
//!   uninstall deletes them on purpose; as each run's Job has a name of its own, this is also
//!   "each Job created once per plan run";
//! - one `PlanStarted` per run (the counts of every series added up);
//! - the revisions numbered 1..=n with no gap or duplicate, one per run;
//! - no step went from COMPLETE back to anything else within one run;
//! - no manager log shows a panic or an ERROR line.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DynamicObject, ListParams};
use kube::runtime::watcher;
use serde_json::Value;

/// How many revisions the manager keeps by default (`--revision-history-limit`).
const HISTORY_LIMIT: u64 = 10;

/// What the watches saw.
#[derive(Default)]
struct Seen {
    /// `kind/name` → every uid any event carried.
    uids: BTreeMap<String, BTreeSet<String>>,
    /// `kind/name` of every delete event.
    deletes: Vec<String>,
    events: u64,
}

/// The checker of one namespace's Instance.
pub struct Checker {
    client: kube::Client,
    ns: String,
    instance: String,
    seen: Arc<Mutex<Seen>>,
    watches: Vec<tokio::task::JoinHandle<()>>,
    /// (run uid, phase/step) → the status last seen.
    steps: BTreeMap<(String, String), String>,
    /// Every breach found so far.
    pub violations: Vec<String>,
}

fn watch<K>(
    client: &kube::Client,
    ns: &str,
    kind: &'static str,
    seen: Arc<Mutex<Seen>>,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let config = watcher::Config::default().labels("heritage=kudo");
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, config));
        while let Some(ev) = events.next().await {
            let Ok(ev) = ev else { continue };
            let mut s = seen.lock().unwrap();
            let (obj, deleted) = match ev {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => (o, false),
                watcher::Event::Delete(o) => (o, true),
                _ => continue,
            };
            let key = format!("{kind}/{}", obj.meta().name.clone().unwrap_or_default());
            s.events += 1;
            if deleted {
                s.deletes.push(key.clone());
            }
            let uid = obj.meta().uid.clone().unwrap_or_default();
            s.uids.entry(key).or_default().insert(uid);
        }
    })
}

impl Checker {
    /// Starts the watches of `ns`.
    pub fn start(client: &kube::Client, ns: &str, instance: &str) -> Checker {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let watches = vec![
            watch::<ConfigMap>(client, ns, "ConfigMap", seen.clone()),
            watch::<Deployment>(client, ns, "Deployment", seen.clone()),
            watch::<Job>(client, ns, "Job", seen.clone()),
        ];
        Checker {
            client: client.clone(),
            ns: ns.into(),
            instance: instance.into(),
            seen,
            watches,
            steps: BTreeMap::new(),
            violations: Vec::new(),
        }
    }

    /// The watch events seen so far.
    pub fn events(&self) -> u64 {
        self.seen.lock().unwrap().events
    }

    /// Records `inst` as seen after a fault: no FATAL_ERROR, no step of a run back from COMPLETE.
    pub fn snapshot(&mut self, inst: &Value, label: &str) {
        for (plan, ps) in inst["status"]["planStatus"].as_object().into_iter().flatten() {
            let uid = ps["uid"].as_str().unwrap_or_default().to_string();
            let fatal = (uid.clone(), format!("{plan}: FATAL_ERROR"));
            if ps["status"] == "FATAL_ERROR" && !self.steps.contains_key(&fatal) {
                let mut text = ps.to_string();
                text.truncate(600);
                self.violations
                    .push(format!("{label}: plan {plan} run {uid} FATAL_ERROR: {text}"));
                self.steps.insert(fatal, String::new());
            }
            for ph in ps["phases"].as_array().into_iter().flatten() {
                for st in ph["steps"].as_array().into_iter().flatten() {
                    let key = (uid.clone(), format!("{plan}/{}/{}", ph["name"], st["name"]));
                    let now = st["status"].as_str().unwrap_or_default().to_string();
                    if let Some(before) = self.steps.get(&key)
                        && before == "COMPLETE"
                        && now != "COMPLETE"
                        && !uid.is_empty()
                    {
                        self.violations.push(format!(
                            "{label}: step {} of run {uid} went COMPLETE → {now}",
                            key.1
                        ));
                    }
                    self.steps.insert(key, now);
                }
            }
        }
    }

    /// How many uids the watches saw `kind/name` with (0: never seen).
    pub fn uids(&self, key: &str) -> usize {
        self.seen.lock().unwrap().uids.get(key).map_or(0, BTreeSet::len)
    }

    /// The objects seen with more than one uid: each a breach, worded for `label`.
    pub fn recreated(&self, label: &str) -> Vec<String> {
        let s = self.seen.lock().unwrap();
        s.uids
            .iter()
            .filter(|(_, uids)| uids.len() > 1)
            .map(|(key, uids)| format!("{label}: {key} was recreated: uids {uids:?}"))
            .collect()
    }

    /// Objects with more than one uid, and delete events: none may exist before the uninstall.
    pub fn check_objects(&mut self, label: &str) {
        let mut found = self.recreated(label);
        self.violations.append(&mut found);
        let s = self.seen.lock().unwrap();
        for key in &s.deletes {
            self.violations.push(format!("{label}: {key} was deleted"));
        }
    }

    /// The history checks once the `runs` runs ended: PlanStarted once per run, revisions 1..=runs.
    pub async fn check_history(&mut self, instance_uid: &str, runs: usize) {
        let started = self.plan_started().await;
        if started != runs as u64 {
            self.violations
                .push(format!("{started} PlanStarted Events for {runs} plan runs"));
        }
        let revs = kudo_client::revisions::list(&self.client, &self.ns, &self.instance, instance_uid)
            .await
            .expect("list revisions");
        let mut numbers: Vec<u64> = revs.iter().map(|r| r.number).collect();
        numbers.sort_unstable();
        // The manager keeps the last HISTORY_LIMIT revisions.
        let first = (runs as u64).saturating_sub(HISTORY_LIMIT) + 1;
        let want: Vec<u64> = (first..=runs as u64).collect();
        if numbers != want {
            self.violations.push(format!(
                "revisions {numbers:?}, want {want:?} (one per run, consecutive)"
            ));
        }
    }

    /// The PlanStarted Events of the Instance, every series' count added up.
    async fn plan_started(&self) -> u64 {
        let ar = kube::api::ApiResource {
            group: "events.k8s.io".into(),
            version: "v1".into(),
            api_version: "events.k8s.io/v1".into(),
            kind: "Event".into(),
            plural: "events".into(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &self.ns, &ar);
        let list = api.list(&ListParams::default()).await.expect("list events");
        list.items
            .iter()
            .filter_map(|e| serde_json::to_value(e).ok())
            .filter(|e| e["reason"] == "PlanStarted" && e["regarding"]["name"] == self.instance.as_str())
            .map(|e| e["series"]["count"].as_u64().unwrap_or(1))
            .sum()
    }

    /// Stops the watches.
    pub fn stop(&self) {
        for w in &self.watches {
            w.abort();
        }
    }
}
