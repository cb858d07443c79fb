//! Label-selected watches as a sharded manager uses them (crate kudo-controller, `views.rs`): a
//! set-based `in (…)` of 512 values and `!key`, and what a watch sends when a relabelled object
//! starts or stops matching. kube-apiserver sends a DELETED carrying the object as it was (the
//! state that matched) with the change's resourceVersion; the embedded server must do the same.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};

use crate::util::Env;

/// The events two watches saw while a ConfigMap was created without the label, labelled into
/// the `in` set, relabelled out of it and deleted: `TYPE bucket=<label>@<write>` per line, the
/// write whose resourceVersion the event carries (`w0` the create, `w1` and `w2` the relabels).
async fn bucket_views(client: kube::Client, ns: &str) -> (Vec<String>, Vec<String>) {
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(ns.to_string());
    let _ = nss.create(&PostParams::default(), &n).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, ns);
    let odd: Vec<String> = (0..1024)
        .filter(|b| b % 2 == 1)
        .map(|b: u32| b.to_string())
        .collect();
    let labelled = format!("app=bv,kudo.dev/bucket in ({})", odd.join(","));
    let listed = cms.list_metadata(&Default::default()).await.expect("list");
    let rv = listed.metadata.resource_version.unwrap_or_default();
    let mut unlabelled_watch = cms
        .watch(&WatchParams::default().labels("app=bv,!kudo.dev/bucket"), &rv)
        .await
        .expect("watch !bucket")
        .boxed();
    let mut labelled_watch = cms
        .watch(&WatchParams::default().labels(&labelled), &rv)
        .await
        .expect("watch bucket in (512 values)")
        .boxed();
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("cm".into());
    cm.metadata.labels = Some([("app".to_string(), "bv".to_string())].into());
    let created = cms.create(&PostParams::default(), &cm).await.expect("create");
    let label = |b: &str| serde_json::json!({"metadata": {"labels": {"kudo.dev/bucket": b}}});
    let pp = PatchParams::default();
    let five = cms
        .patch("cm", &pp, &Patch::Merge(label("5")))
        .await
        .expect("label 5");
    let six = cms
        .patch("cm", &pp, &Patch::Merge(label("6")))
        .await
        .expect("label 6");
    cms.delete("cm", &Default::default()).await.expect("delete");
    let writes: Vec<String> = [created, five, six]
        .into_iter()
        .map(|o| o.metadata.resource_version.unwrap_or_default())
        .collect();
    let said = |ev: WatchEvent<ConfigMap>| -> Option<String> {
        let (t, o) = match ev {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            _ => return None,
        };
        let rv = o.metadata.resource_version.unwrap_or_default();
        let write = writes
            .iter()
            .position(|w| *w == rv)
            .map_or("?".to_string(), |i| format!("w{i}"));
        let bucket = o
            .metadata
            .labels
            .unwrap_or_default()
            .get("kudo.dev/bucket")
            .cloned();
        Some(format!("{t} bucket={}@{write}", bucket.unwrap_or_default()))
    };
    let mut seen = (Vec::new(), Vec::new());
    for (watch, out, want) in [
        (&mut unlabelled_watch, &mut seen.0, 2),
        (&mut labelled_watch, &mut seen.1, 2),
    ] {
        while out.len() < want {
            let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(10), watch.next()).await else {
                break;
            };
            out.extend(said(ev.expect("event")));
        }
    }
    let _ = nss.delete(ns, &Default::default()).await;
    seen
}

fn expected() -> (Vec<String>, Vec<String>) {
    let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    (
        // Labelled into the set: the unlabelled watch's DELETED is the object before the label.
        v(&["ADDED bucket=@w0", "DELETED bucket=@w1"]),
        // Relabelled out of the set: the DELETED still shows bucket 5, with the change's rv.
        v(&["ADDED bucket=5@w1", "DELETED bucket=5@w2"]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relabelled_objects_leave_and_enter_selected_watches_as_they_were() {
    let env = Env::start().await;
    assert_eq!(bucket_views(env.client().await, "bv").await, expected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_relabelled_objects_leave_and_enter_selected_watches_as_they_were() {
    let ns = kudo_testkit::real_cluster::unique_namespace("bv");
    let client = kudo_testkit::real_cluster::client().await;
    assert_eq!(bucket_views(client, &ns).await, expected());
}
