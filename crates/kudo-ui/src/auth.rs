//! Who may use the page: the decision for one request, pure and table-tested; [`crate::routes`]
//! applies it to every request.
//!
//! A random token is printed with the URL. A request carrying it in the query (`?token=`) is
//! answered with a redirect to the same path without it, setting a cookie that holds it, marked
//! `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page sends it) and
//! `Path=/`; so the token leaves the address bar and the history after the first load. Every
//! other request needs the cookie: without it, or with a wrong token, 401. A `Host` header other
//! than the address served is refused (a page of another site resolving its name to 127.0.0.1
//! would otherwise reach the server: DNS rebinding), and so is a POST whose `Origin` is not the
//! page's own.

use std::net::SocketAddr;

/// The cookie's name.
pub const COOKIE: &str = "kudo-ui-token";

/// A fresh token: 24 random bytes, hex.
pub fn new_token() -> String {
    hex::encode(rand::random::<[u8; 24]>())
}

/// The facts of a request the decision reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Request<'a> {
    /// The `Host` header.
    pub host: Option<&'a str>,
    /// The `token` query parameter.
    pub query_token: Option<&'a str>,
    /// The `Cookie` header.
    pub cookie: Option<&'a str>,
    /// A method that changes something (POST).
    pub writes: bool,
    /// The `Origin` header.
    pub origin: Option<&'a str>,
}

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Serve it.
    Allow,
    /// Redirect to the same path without the query, setting this `Set-Cookie` value.
    TradeToken(String),
    /// 401, with the reason.
    Unauthorized(&'static str),
    /// 403, with the reason.
    Forbidden(&'static str),
}

/// The token and the `Host` values accepted.
#[derive(Debug, Clone)]
pub struct Gate {
    token: String,
    /// Empty: any Host (served on every interface, where no one name is the right one).
    hosts: Vec<String>,
}

impl Gate {
    /// The gate of a server bound to `addr` with `token`: on a loopback address, the Host must
    /// name it (`127.0.0.1:PORT`, `localhost:PORT`, `[::1]:PORT`); on a specific other address,
    /// that address.
    pub fn new(token: String, addr: SocketAddr) -> Gate {
        let port = addr.port();
        let hosts = if addr.ip().is_unspecified() {
            Vec::new()
        } else if addr.ip().is_loopback() {
            vec![addr.to_string(), format!("localhost:{port}")]
        } else {
            vec![addr.to_string()]
        };
        Gate { token, hosts }
    }

    /// The decision for `req` (see the module docs).
    pub fn decide(&self, req: &Request<'_>) -> Decision {
        let host = req.host.unwrap_or("");
        if !self.hosts.is_empty() && !self.hosts.iter().any(|h| h == host) {
            return Decision::Forbidden("the Host header does not name the address served");
        }
        if let Some(t) = req.query_token {
            return if same(t, &self.token) {
                Decision::TradeToken(format!(
                    "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                    self.token
                ))
            } else {
                Decision::Unauthorized("wrong token")
            };
        }
        let Some(cookie) = req.cookie.and_then(cookie_value) else {
            return Decision::Unauthorized("no token: open the URL kubectl kudo ui printed");
        };
        if !same(cookie, &self.token) {
            return Decision::Unauthorized("wrong token");
        }
        if req.writes && req.origin != Some(format!("http://{host}").as_str()) {
            return Decision::Forbidden("a form posted from another origin");
        }
        Decision::Allow
    }
}

/// Our cookie's value in a `Cookie` header (`a=1; kudo-ui-token=…`).
fn cookie_value(header: &str) -> Option<&str> {
    header
        .split(';')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v)
}

/// Equality that takes as long whichever byte differs.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        let gate = Gate::new("t0k".into(), "127.0.0.1:8080".parse().unwrap());
        let host = Some("127.0.0.1:8080");
        let ok_cookie = Some("x=1; kudo-ui-token=t0k");
        let trade = Decision::TradeToken("kudo-ui-token=t0k; HttpOnly; SameSite=Strict; Path=/".into());
        let cases: Vec<(Request, Decision)> = vec![
            (
                Request {
                    host,
                    query_token: Some("t0k"),
                    ..Default::default()
                },
                trade.clone(),
            ),
            (
                Request {
                    host: Some("localhost:8080"),
                    query_token: Some("t0k"),
                    ..Default::default()
                },
                trade,
            ),
            (
                Request {
                    host,
                    query_token: Some("t0x"),
                    ..Default::default()
                },
                Decision::Unauthorized("wrong token"),
            ),
            (
                Request {
                    host,
                    query_token: Some("t0"),
                    cookie: ok_cookie,
                    ..Default::default()
                },
                Decision::Unauthorized("wrong token"),
            ),
            (
                Request {
                    host,
                    ..Default::default()
                },
                Decision::Unauthorized("no token: open the URL kubectl kudo ui printed"),
            ),
            (
                Request {
                    host,
                    cookie: Some("kudo-ui-token=nope"),
                    ..Default::default()
                },
                Decision::Unauthorized("wrong token"),
            ),
            (
                Request {
                    host,
                    cookie: ok_cookie,
                    ..Default::default()
                },
                Decision::Allow,
            ),
            (
                Request {
                    host: Some("evil.example:8080"),
                    cookie: ok_cookie,
                    ..Default::default()
                },
                Decision::Forbidden("the Host header does not name the address served"),
            ),
            (
                Request {
                    host: None,
                    cookie: ok_cookie,
                    ..Default::default()
                },
                Decision::Forbidden("the Host header does not name the address served"),
            ),
            (
                Request {
                    host,
                    cookie: ok_cookie,
                    writes: true,
                    origin: Some("http://127.0.0.1:8080"),
                    ..Default::default()
                },
                Decision::Allow,
            ),
            (
                Request {
                    host,
                    cookie: ok_cookie,
                    writes: true,
                    origin: Some("http://evil.example"),
                    ..Default::default()
                },
                Decision::Forbidden("a form posted from another origin"),
            ),
            (
                Request {
                    host,
                    cookie: ok_cookie,
                    writes: true,
                    origin: None,
                    ..Default::default()
                },
                Decision::Forbidden("a form posted from another origin"),
            ),
        ];
        for (req, want) in cases {
            assert_eq!(gate.decide(&req), want, "{req:?}");
        }
        // Served on every interface: any Host, the token still needed.
        let any = Gate::new("t0k".into(), "0.0.0.0:80".parse().unwrap());
        let req = Request {
            host: Some("box.lan"),
            cookie: ok_cookie,
            ..Default::default()
        };
        assert_eq!(any.decide(&req), Decision::Allow);
        assert!(matches!(
            any.decide(&Request::default()),
            Decision::Unauthorized(_)
        ));
    }

    #[test]
    fn tokens_are_fresh_and_long() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 48);
    }
}
