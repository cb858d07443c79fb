//! Simulated controllers write under the field managers of the real components, so
//! `managedFields` (and server-side apply conflicts) name `kube-controller-manager`, `kubelet`
//! or `kube-scheduler` as on a real cluster, never `unknown`.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kudo_sim::SimConfig;

use crate::{Env, eventually};

fn managers(
    fields: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry>>,
) -> BTreeSet<String> {
    fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| {
            let sub = m.subresource.unwrap_or_default();
            m.manager.map(|name| {
                if sub.is_empty() {
                    name
                } else {
                    format!("{name}/{sub}")
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_writes_carry_the_real_components_field_managers() {
    let env = Env::start(SimConfig::default()).await;
    env.apply(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "web:1"}]}
"#,
    )
    .await;
    env.ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), "default");
    let d = deployments.get("web").await.expect("deployment");
    let m = managers(d.metadata.managed_fields);
    assert!(m.contains("kube-controller-manager/status"), "{m:?}");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let pod = eventually("a running pod", || async {
        pods.list(&ListParams::default().labels("app=web"))
            .await
            .ok()?
            .items
            .into_iter()
            .next()
    })
    .await;
    let m = managers(pod.metadata.managed_fields);
    assert!(
        m.contains("kube-controller-manager"),
        "the ReplicaSet controller made it: {m:?}"
    );
    assert!(m.contains("kubelet/status"), "{m:?}");
    let nodes: Api<Node> = Api::all(env.client.clone());
    for n in nodes.list(&ListParams::default()).await.expect("nodes").items {
        let m = managers(n.metadata.managed_fields);
        assert!(m.iter().all(|x| x.starts_with("kubelet")), "{m:?}");
    }
    assert!(
        !format!(
            "{:?}",
            deployments.get("web").await.expect("d").metadata.managed_fields
        )
        .contains("\"unknown\"")
    );
    env.stop().await;
}
