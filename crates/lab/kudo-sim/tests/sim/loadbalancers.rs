//! Load balancers for `type: LoadBalancer` Services: a loopback address in
//! `status.loadBalancer.ingress`, and a listener there that passes connections to the Service's
//! ready endpoint (an HTTP stand-in answers), gone with the Service.

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use kudo_sim::{LoadBalancerConfig, SimConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Env, eventually};

const OBJECTS: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: nginx, image: "nginx:1.25", ports: [{containerPort: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{port: 8080, targetPort: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: nobody}
spec:
  type: LoadBalancer
  selector: {app: nobody}
  ports: [{port: 8080}]
"#;

async fn ingress(services: &Api<Service>, name: &str) -> Option<String> {
    let s = services.get(name).await.ok()?;
    s.status?.load_balancer?.ingress?.first()?.ip.clone()
}

/// Sends one HTTP request, returns the whole response (the listener keeps the connection open
/// for more, so read until the body's length is in).
async fn get(addr: &str, path: &str) -> std::io::Result<String> {
    let mut c = tokio::net::TcpStream::connect(addr).await?;
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut chunk)).await??;
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        if n == 0 || text.ends_with('\n') && text.contains("\r\n\r\n") {
            return Ok(text);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancer_services_get_a_loopback_address_that_answers() {
    // An address range of this process's own, so tests running at once do not meet.
    let base = 10 + (std::process::id() % 200) as u8;
    let cfg = SimConfig {
        load_balancer: Some(LoadBalancerConfig {
            first_address: std::net::Ipv4Addr::new(127, 241, base, 1),
        }),
        ..SimConfig::default()
    };
    let env = Env::start(cfg).await;
    env.apply(OBJECTS).await;
    let services: Api<Service> = Api::namespaced(env.client.clone(), "default");
    let web = eventually("web's ingress", || ingress(&services, "web")).await;
    let nobody = eventually("nobody's ingress", || ingress(&services, "nobody")).await;
    assert_ne!(web, nobody, "one address per Service");
    assert!(web.starts_with("127.241."), "{web}");
    let addr = format!("{web}:8080");
    let answer = eventually("an answer through the load balancer", || async {
        get(&addr, "/hello").await.ok().filter(|r| r.contains("nginx"))
    })
    .await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.contains("kudo-sim: nginx in pod default/web-"), "{answer}");
    assert!(answer.contains("answered GET /hello"), "{answer}");
    // Without a ready endpoint the connection is closed at once.
    let closed = get(&format!("{nobody}:8080"), "/").await;
    assert!(closed.as_deref().map_or(true, str::is_empty), "{closed:?}");
    // The listener goes with its Service.
    services.delete("web", &Default::default()).await.unwrap();
    eventually("the listener to go", || async {
        tokio::net::TcpStream::connect(&addr).await.is_err().then_some(())
    })
    .await;
    env.stop().await;
}
