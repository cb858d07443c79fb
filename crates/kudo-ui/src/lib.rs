//! `kubectl kudo ui`: a local web page of the Instances a kubeconfig can see and of each one's
//! plans, drawn as graphs that fill in live while a plan runs, with its Events and revisions, the
//! CLI's plan actions, and the fleet rollouts.
//!
//! Why this shape:
//! - **Server-side HTML** ([`maud`], checked at compile time) plus one small hand-written script
//!   ([`assets`]): the CLI stays one file with no front-end toolchain, and the page reads (and
//!   the tests check it) without running any JavaScript but the live updates.
//! - **Server-sent events** for live updates: each open page holds one request on which the
//!   server forwards narrow watches (an Instance page: that one Instance, its Events and its
//!   revisions), re-rendering an HTML fragment on each change ([`live`]). No polling loop lists
//!   the cluster; SSE needs no protocol upgrade and reconnects by itself.
//! - **The CLI's rules, not a second copy**: which run a plan shows is
//!   [`kudo_client::wait::scheduled_run`] / [`kudo_client::wait::last_executed_plan`] (what
//!   `plan status` prints), the graph is [`kudo_package::graph`] (what `package graph` draws),
//!   the revisions and their differences are [`kudo_client::revisions`] and
//!   [`kudo_engine::revision::differences`] (what `history` lists), and every action is the
//!   library function its CLI command calls (module `actions`).
//! - **Access**: the page acts with the user's own credentials, so it is served on loopback by
//!   default and every request needs the random token printed with the URL, handed over once in
//!   the query and kept in an `HttpOnly; SameSite=Strict` cookie ([`auth`]); a `Host` other than
//!   the address served is refused (DNS rebinding), as is a form posted from another origin.
//!   Nothing is loaded from outside: the style sheet and script are in the binary, and the
//!   Content-Security-Policy allows only the page's own origin.

mod actions;
pub mod assets;
pub mod auth;
pub mod events;
pub mod history;
mod live;
mod pages;
pub mod rollouts;
mod routes;
pub mod view;

use std::net::SocketAddr;

/// What the UI reads the cluster through.
#[derive(Clone)]
pub struct Ui {
    /// The user's client (their kubeconfig, so their RBAC).
    pub client: kube::Client,
    /// Only this namespace's Instances; `None`: every namespace the user may list.
    pub namespace: Option<String>,
}

/// A bound, not yet serving, UI server.
pub struct Server {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    token: String,
    ui: Ui,
}

/// Binding failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}: {source}")]
pub struct BindError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// Why.
    pub source: std::io::Error,
}

impl Server {
    /// Binds `addr` (port 0: a free one) with a fresh random token.
    pub async fn bind(ui: Ui, addr: SocketAddr) -> Result<Server, BindError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| BindError { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| BindError { addr, source })?;
        Ok(Server {
            listener,
            addr,
            token: auth::new_token(),
            ui,
        })
    }

    /// The address bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL to open: the root page with the token, which the first request trades for a cookie.
    pub fn url(&self) -> String {
        format!("http://{}/?token={}", self.addr, self.token)
    }

    /// Serves until `shutdown` resolves.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let app = routes::router(self.ui, auth::Gate::new(self.token, self.addr));
        axum::serve(self.listener, app)
            .with_graceful_shutdown(shutdown)
            .await
    }
}
