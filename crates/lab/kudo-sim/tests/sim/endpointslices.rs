//! The EndpointSlice controller: one slice per Service with a selector, read by kubectl (1.33+)
//! for `describe service`, and removed with its Service (as are the Endpoints).

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams};
use kudo_sim::SimConfig;

use crate::{Env, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_endpointslice_per_service_shown_by_describe_and_removed_with_it() {
    let env = Env::start(SimConfig::default()).await;
    env.apply(
        r#"
apiVersion: v1
kind: Service
metadata: {name: web, labels: {tier: front}}
spec:
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: web}
  - {name: admin, port: 9000}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: "web:1"
        ports: [{name: web, containerPort: 8080}]
"#,
    )
    .await;
    env.ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    let slices: Api<EndpointSlice> = Api::namespaced(env.client.clone(), "default");
    let by_service = ListParams::default().labels("kubernetes.io/service-name=web");
    let slice = eventually("a slice with two ready endpoints", || async {
        let list = slices.list(&by_service).await.ok()?;
        let s = list.items.into_iter().next()?;
        let ready = s
            .endpoints
            .iter()
            .flatten()
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
            .count();
        (ready == 2).then_some(s)
    })
    .await;
    assert_eq!(slices.list(&by_service).await.unwrap().items.len(), 1);
    assert_eq!(slice.address_type, "IPv4");
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("endpointslice.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("endpointslice-controller.k8s.io")
    );
    assert_eq!(
        labels.get("tier").map(String::as_str),
        Some("front"),
        "Service labels are copied"
    );
    let svc: Service = Api::namespaced(env.client.clone(), "default")
        .get("web")
        .await
        .unwrap();
    let owner = &slice.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Service", "web"));
    assert_eq!(Some(&owner.uid), svc.metadata.uid.as_ref());
    let ports: Vec<(String, i32)> = slice
        .ports
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.name.unwrap_or_default(), p.port.unwrap_or_default()))
        .collect();
    assert_eq!(ports, [("http".to_string(), 8080), ("admin".to_string(), 9000)]);
    let mut ips: Vec<String> = slice
        .endpoints
        .iter()
        .flatten()
        .map(|e| e.addresses[0].clone())
        .collect();
    ips.sort();

    // kubectl reads the slices.
    let describe = env.ok(&["describe", "service", "web"]).await;
    let endpoint_lines: Vec<&str> = describe
        .lines()
        .filter_map(|l| l.strip_prefix("Endpoints:"))
        .map(str::trim)
        .collect();
    let with_port = |port: u16| ips.iter().map(|ip| format!("{ip}:{port}")).collect::<Vec<_>>();
    assert_eq!(endpoint_lines.len(), 2, "{describe}");
    let mut http: Vec<String> = endpoint_lines[0].split(',').map(String::from).collect();
    http.sort();
    assert_eq!(http, with_port(8080), "{describe}");
    let mut admin: Vec<String> = endpoint_lines[1].split(',').map(String::from).collect();
    admin.sort();
    assert_eq!(admin, with_port(9000), "{describe}");

    let table = env
        .ok(&["get", "endpointslices", "-l", "kubernetes.io/service-name=web"])
        .await;
    let mut rows = table.lines();
    let header: Vec<&str> = rows.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]);
    let row: Vec<&str> = rows.next().unwrap().split_whitespace().collect();
    assert_eq!(row[0], slice.metadata.name.as_deref().unwrap());
    assert_eq!(&row[1..3], ["IPv4", "8080,9000"]);
    let mut shown: Vec<&str> = row[3].split(',').collect();
    shown.sort();
    assert_eq!(shown, ips.iter().map(String::as_str).collect::<Vec<_>>());

    // Neither the slice nor the Endpoints outlive the Service.
    Api::<Service>::namespaced(env.client.clone(), "default")
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let endpoints: Api<Endpoints> = Api::namespaced(env.client.clone(), "default");
    eventually("the slice and the Endpoints are gone", || async {
        let slices_left = slices.list(&by_service).await.ok()?.items.len();
        let eps_left = endpoints.get_opt("web").await.ok()?.is_some();
        (slices_left == 0 && !eps_left).then_some(())
    })
    .await;
    env.stop().await;
}
