//! Load balancers for `type: LoadBalancer` Services, as cloud-provider-kind gives a kind cluster:
//! each such Service gets its own loopback address (`127.240.0.1`, `127.240.0.2`, … — all of
//! `127.0.0.0/8` is the loopback interface on Linux) written to `status.loadBalancer.ingress`,
//! and a real TCP listener on each of its TCP ports there. A connection is passed to the
//! Service's first ready endpoint: when kudo-sim stands in for an HTTP server there, the
//! listener answers each HTTP request (`200`, a line naming the pod and the stand-in); a
//! ZooKeeper stand-in answers `ruok` and `srvr`, a Redis one `PING`; other stand-ins accept the
//! connection and close it. Without a ready endpoint the connection is closed at once. UDP ports
//! get no listener. Listeners go with their Service.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::engine::{Sim, Snapshot, ar};
use crate::runtime::{Backend, Runtime};
use crate::shell::Protocol;

/// Where the load balancers' addresses start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerConfig {
    /// The first address handed out; the next Services get the following ones.
    pub first_address: Ipv4Addr,
}

impl Default for LoadBalancerConfig {
    fn default() -> Self {
        LoadBalancerConfig {
            first_address: Ipv4Addr::new(127, 240, 0, 1),
        }
    }
}

/// The load balancer of one Service: its address, ports and listener tasks (stopped on drop).
#[derive(Debug)]
pub(crate) struct Lb {
    ip: Ipv4Addr,
    ports: Vec<u16>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Lb {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn is_lb(s: &Service) -> bool {
    s.metadata.deletion_timestamp.is_none()
        && s.spec.as_ref().and_then(|sp| sp.type_.as_deref()) == Some("LoadBalancer")
}

fn tcp_ports(s: &Service) -> Vec<u16> {
    s.spec
        .iter()
        .flat_map(|sp| sp.ports.iter().flatten())
        .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .filter_map(|p| u16::try_from(p.port).ok())
        .collect()
}

/// Gives every LoadBalancer Service an address and listeners, and stops those of the others.
pub async fn reconcile(sim: &mut Sim, snap: &Snapshot) {
    let Some(cfg) = sim.cfg.load_balancer.clone() else {
        return;
    };
    if !snap.ready.services {
        return;
    }
    let live: HashMap<String, &Service> = snap
        .services
        .iter()
        .filter(|s| is_lb(s))
        .filter_map(|s| Some((s.metadata.uid.clone()?, s.as_ref())))
        .collect();
    sim.mem.lbs.retain(|uid, _| live.contains_key(uid));
    for (uid, svc) in live {
        let ports = tcp_ports(svc);
        if sim.mem.lbs.get(&uid).is_some_and(|lb| lb.ports != ports) {
            sim.mem.lbs.remove(&uid);
        }
        if !sim.mem.lbs.contains_key(&uid) {
            let taken: Vec<Ipv4Addr> = sim.mem.lbs.values().map(|l| l.ip).collect();
            let Some(lb) = listen(&cfg, &taken, svc, ports, sim.cfg.runtime.clone()) else {
                continue;
            };
            sim.mem.lbs.insert(uid.clone(), lb);
        }
        let ip = sim.mem.lbs[&uid].ip.to_string();
        write_ingress(sim, svc, &ip).await;
    }
}

/// Binds the Service's ports on the first free address of the pool and starts their listeners.
fn listen(
    cfg: &LoadBalancerConfig,
    taken: &[Ipv4Addr],
    svc: &Service,
    ports: Vec<u16>,
    rt: Runtime,
) -> Option<Lb> {
    let cluster_ip = svc.spec.as_ref()?.cluster_ip.clone().filter(|ip| ip != "None")?;
    let first = u32::from(cfg.first_address);
    for k in 0..4096u32 {
        let ip = Ipv4Addr::from(first + k);
        if taken.contains(&ip) {
            continue;
        }
        let bound: Result<Vec<std::net::TcpListener>, _> = ports
            .iter()
            .map(|p| std::net::TcpListener::bind((ip, *p)))
            .collect();
        let Ok(bound) = bound else { continue };
        let mut tasks = Vec::new();
        for (l, port) in bound.into_iter().zip(&ports) {
            l.set_nonblocking(true).ok()?;
            let l = tokio::net::TcpListener::from_std(l).ok()?;
            tasks.push(tokio::spawn(accept(l, rt.clone(), cluster_ip.clone(), *port)));
        }
        return Some(Lb { ip, ports, tasks });
    }
    tracing::warn!(service = ?svc.metadata.name, "no free loopback address for a load balancer");
    None
}

async fn write_ingress(sim: &mut Sim, svc: &Service, ip: &str) {
    let want = json!([{"ip": ip}]);
    let current = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| serde_json::to_value(&l.ingress).ok());
    if current.as_ref() == Some(&want) {
        return;
    }
    let ns = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    let patch = json!({"status": {"loadBalancer": {"ingress": want}}});
    sim.merge(&ar::<Service>(), Some(&ns), &name, true, patch).await;
}

async fn accept(l: tokio::net::TcpListener, rt: Runtime, cluster_ip: String, port: u16) {
    loop {
        let Ok((conn, _)) = l.accept().await else { return };
        let backend = rt.backend(&cluster_ip, port);
        tokio::spawn(async move {
            if let Some(b) = backend {
                let _ = answer(conn, &b).await;
            }
        });
    }
}

/// Answers one connection as the stand-in behind it does.
async fn answer(mut conn: tokio::net::TcpStream, b: &Backend) -> std::io::Result<()> {
    match b.protocol {
        Protocol::Http => loop {
            let Some(request) = read_until(&mut conn, b"\r\n\r\n").await? else {
                return Ok(());
            };
            let line = String::from_utf8_lossy(&request)
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            let mut words = line.split_whitespace();
            let (method, path) = (words.next().unwrap_or("GET"), words.next().unwrap_or("/"));
            let body = format!(
                "kudo-sim: {} in pod {} (a stand-in, not the real server) answered {method} {path}\n",
                b.server, b.pod
            );
            let mut response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            if method != "HEAD" {
                response.push_str(&body);
            }
            conn.write_all(response.as_bytes()).await?;
        },
        Protocol::ZooKeeper => {
            let mut word = [0u8; 4];
            conn.read_exact(&mut word).await?;
            let reply = match &word {
                b"ruok" => "imok".to_string(),
                b"srvr" | b"stat" => format!(
                    "Zookeeper version: 3.6.2 (simulated by kudo-sim for pod {})\nMode: standalone\n",
                    b.pod
                ),
                _ => String::new(),
            };
            conn.write_all(reply.as_bytes()).await
        }
        Protocol::Redis => {
            while let Some(line) = read_until(&mut conn, b"\n").await? {
                let text = String::from_utf8_lossy(&line).to_ascii_uppercase();
                let reply = if text.contains("PING") {
                    "+PONG\r\n"
                } else {
                    "-ERR kudo-sim's Redis stand-in answers PING only\r\n"
                };
                conn.write_all(reply.as_bytes()).await?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Reads up to and including `end` (at most 64 KiB); `None` when the peer closes first.
async fn read_until(conn: &mut tokio::net::TcpStream, end: &[u8]) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(end) {
        if buf.len() > 64 * 1024 || conn.read(&mut byte).await? == 0 {
            return Ok(None);
        }
        buf.push(byte[0]);
    }
    Ok(Some(buf))
}
