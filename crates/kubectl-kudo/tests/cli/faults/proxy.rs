//! A TCP proxy on loopback between a manager and the API server, which the test switches
//! between passing bytes, refusing connections (nothing listens on its port: the client sees
//! ECONNREFUSED) and black-holing them (connections are accepted or kept open and never answered,
//! never reset: the client only learns from its own timeouts). TLS passes through untouched.

use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The proxy and the tasks of its listener and connections.
pub struct Proxy {
    /// The port it listens on (kept across a refusal).
    pub port: u16,
    upstream: String,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// The connections held open, unanswered, while black-holing.
    held: Arc<Mutex<Vec<TcpStream>>>,
    /// Set while black-holing: forwarding stops without closing anything.
    frozen: Arc<std::sync::atomic::AtomicBool>,
}

impl Proxy {
    /// A proxy to `upstream` (`host:port`), passing.
    pub async fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let p = Proxy {
            port,
            upstream: upstream.into(),
            tasks: Arc::default(),
            held: Arc::default(),
            frozen: Arc::default(),
        };
        p.serve(listener);
        p
    }

    fn serve(&self, listener: TcpListener) {
        let (upstream, tasks, held, frozen) = (
            self.upstream.clone(),
            self.tasks.clone(),
            self.held.clone(),
            self.frozen.clone(),
        );
        let accept = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                if frozen.load(std::sync::atomic::Ordering::SeqCst) {
                    held.lock().unwrap().push(inbound);
                    continue;
                }
                let (upstream, frozen) = (upstream.clone(), frozen.clone());
                let conn = tokio::spawn(forward(inbound, upstream, frozen));
                tasks.lock().unwrap().push(conn);
            }
        });
        self.tasks.lock().unwrap().push(accept);
    }

    /// Refuses: closes the listener and every connection; nothing listens on the port.
    pub fn refuse(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
        self.held.lock().unwrap().clear();
    }

    /// Black-holes: listens again on the port, accepts and holds every connection, and stops
    /// forwarding on those that are open, closing nothing.
    pub async fn black_hole(&self) {
        self.frozen.store(true, std::sync::atomic::Ordering::SeqCst);
        if self.tasks.lock().unwrap().is_empty() {
            let listener = TcpListener::bind(("127.0.0.1", self.port))
                .await
                .expect("bind again");
            self.serve(listener);
        }
    }

    /// Passes again: held connections are closed (the client retries), forwarding resumes.
    pub async fn pass(&self) {
        self.frozen.store(false, std::sync::atomic::Ordering::SeqCst);
        self.held.lock().unwrap().clear();
        if self.tasks.lock().unwrap().is_empty() {
            let listener = TcpListener::bind(("127.0.0.1", self.port))
                .await
                .expect("bind again");
            self.serve(listener);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.refuse();
    }
}

/// Copies bytes both ways, in chunks; while `frozen`, stops reading (the bytes wait in the
/// kernel's buffers, and nothing is closed).
async fn forward(inbound: TcpStream, upstream: String, frozen: Arc<std::sync::atomic::AtomicBool>) {
    let Ok(outbound) = TcpStream::connect(&upstream).await else {
        return;
    };
    let (ri, wi) = inbound.into_split();
    let (ro, wo) = outbound.into_split();
    // One task for both directions: aborting it (a refusal) closes both sockets.
    tokio::select! {
        _ = pump(ri, wo, frozen.clone()) => {}
        _ = pump(ro, wi, frozen) => {}
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<std::sync::atomic::AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        while frozen.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while frozen.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
