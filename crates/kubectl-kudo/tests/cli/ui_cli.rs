//! `kubectl kudo ui` through the real binary against `kubectl-kudo dev` (the embedded API server
//! and manager), over plain HTTP: the token and its cookie, the Host and Origin checks, the pages,
//! and the server-sent events of a plan the real CLI triggers. The browser test is `ui_browser`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, BIN, Dev};

pub(crate) const INSTANCE: &str = "first-operator-instance";

/// An embedded cluster with first-operator installed (its deploy plan COMPLETE) and `kubectl-kudo
/// ui` serving it; both stopped when dropped.
pub(crate) struct Served {
    pub home: tempfile::TempDir,
    pub dev: Dev,
    ui: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub token: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.ui.kill();
        let _ = self.ui.wait();
    }
}

impl Served {
    pub fn start() -> Served {
        let home = tempfile::tempdir().unwrap();
        let dev = common::start_dev(home.path(), &[]);
        let pkg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/first-operator");
        let (code, out) = self::kudo(
            home.path(),
            &dev.kubeconfig,
            &["install", pkg.to_str().unwrap(), "--wait"],
        );
        assert_eq!(code, 0, "{out}");
        let mut ui = Command::new(BIN)
            .args(["ui", "--kubeconfig"])
            .arg(&dev.kubeconfig)
            .env("HOME", home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kubectl-kudo ui");
        let mut line = String::new();
        BufReader::new(ui.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("kubectl kudo ui: open http://")
            .unwrap_or_else(|| panic!("{line:?}"));
        let (addr, token) = url.split_once("/?token=").unwrap();
        assert!(addr.starts_with("127.0.0.1:"), "loopback by default: {addr}");
        Served {
            addr: addr.to_string(),
            token: token.to_string(),
            home,
            dev,
            ui,
        }
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn cookie(&self) -> String {
        format!("kudo-ui-token={}", self.token)
    }

    /// `kubectl-kudo ARGS` against the embedded cluster; it must succeed.
    pub fn kudo(&self, args: &[&str]) -> String {
        let (code, out) = kudo(self.home.path(), &self.dev.kubeconfig, args);
        assert_eq!(code, 0, "{args:?}: {out}");
        out
    }
}

fn kudo(home: &Path, kubeconfig: &Path, args: &[&str]) -> (i32, String) {
    common::kudo(home, Some(kubeconfig), args)
}

/// One HTTP/1.1 request: status, head (lower-cased) and body.
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_string())
}

#[test]
fn the_token_becomes_a_strict_http_only_cookie_and_nothing_is_served_without_it() {
    let ui = Served::start();
    let a = ui.addr.as_str();
    let cookie = ui.cookie();
    assert_eq!(http(a, "GET", "/", &[], "").0, 401);
    assert_eq!(http(a, "GET", "/assets/app.js", &[], "").0, 401);
    assert_eq!(http(a, "GET", "/?token=0000", &[], "").0, 401);
    assert_eq!(
        http(a, "GET", "/", &[("Cookie", "kudo-ui-token=0000")], "").0,
        401
    );
    let (status, head, _) = http(a, "GET", &format!("/?token={}", ui.token), &[], "");
    assert_eq!(status, 303, "{head}");
    assert!(head.contains("\r\nlocation: /\r\n"), "{head}");
    let set = head
        .lines()
        .find(|l| l.starts_with("set-cookie:"))
        .expect("a cookie");
    for flag in ["httponly", "samesite=strict", "path=/"] {
        assert!(set.split(';').any(|p| p.trim() == flag), "{flag} in {set}");
    }
    assert!(set.contains(&ui.token.to_ascii_lowercase()));
    // DNS rebinding: another name for the same address is refused, even with the cookie.
    let evil = http(
        a,
        "GET",
        "/",
        &[("Host", "evil.example"), ("Cookie", &cookie)],
        "",
    );
    assert_eq!(evil.0, 403);
    let (status, head, body) = http(a, "GET", "/", &[("Cookie", &cookie)], "");
    assert_eq!(status, 200, "{body}");
    assert!(
        head.contains("content-security-policy: default-src 'none'; script-src 'self'"),
        "{head}"
    );
    assert!(
        body.contains(&format!(">{INSTANCE}</a>")) && body.contains(">COMPLETE</span>"),
        "{body}"
    );
    let page = http(
        a,
        "GET",
        &format!("/i/default/{INSTANCE}"),
        &[("Cookie", &cookie)],
        "",
    );
    assert!(
        page.2
            .contains("data-step=\"everything\" data-status=\"COMPLETE\""),
        "{}",
        page.2
    );
    // A form posted from another origin (or with none) triggers nothing.
    let path = format!("/i/default/{INSTANCE}/trigger");
    let origin = format!("http://{a}");
    let form = [
        ("Cookie", cookie.as_str()),
        ("Content-Type", "application/x-www-form-urlencoded"),
    ];
    let foreign = [form[0], form[1], ("Origin", "http://evil.example")];
    assert_eq!(http(a, "POST", &path, &foreign, "plan=deploy").0, 403);
    assert_eq!(http(a, "POST", &path, &form, "plan=deploy").0, 403);
    let ours = [form[0], form[1], ("Origin", origin.as_str())];
    let unknown = http(a, "POST", &path, &ours, "plan=nope");
    assert_eq!(unknown.0, 409);
    assert!(unknown.2.contains("plan nope does not exist"), "{}", unknown.2);
    let missing = http(a, "GET", "/i/default/nobody", &[("Cookie", &cookie)], "");
    assert_eq!(missing.0, 404, "{}", missing.2);
}

/// `data-uid` and `data-status` of the plan `deploy` and the step `everything` in an event.
pub(crate) fn run_of(html: &str) -> (String, String) {
    let attr = |from: &str, name: &str| -> String {
        let rest = &html[html.find(from).unwrap()..];
        let at = rest.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        rest[at..at + rest[at..].find('"').unwrap()].to_string()
    };
    (
        attr("data-plan=\"deploy\"", "data-uid"),
        attr("data-step=\"everything\"", "data-status"),
    )
}

#[test]
fn the_events_of_an_instance_page_follow_a_plan_the_cli_triggers() {
    let ui = Served::start();
    let mut s = TcpStream::connect(&ui.addr).unwrap();
    let req = format!(
        "GET /i/default/{INSTANCE}/events HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\n\
         Accept: text/event-stream\r\n\r\n",
        ui.addr,
        ui.cookie()
    );
    s.write_all(req.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut lines = BufReader::new(s).lines();
    let mut next_event = || loop {
        let line = lines
            .next()
            .expect("the stream stays open")
            .expect("an event within 60 s");
        if let Some(data) = line.strip_prefix("data: ") {
            return data.to_string();
        }
    };
    let (first_uid, first) = run_of(&next_event());
    assert_eq!(first, "COMPLETE");
    ui.kudo(&["plan", "trigger", "--name", "deploy", "--instance", INSTANCE]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let (uid, status) = run_of(&next_event());
        if uid != first_uid {
            seen.push(status.clone());
            if status == "COMPLETE" {
                break;
            }
        }
    }
    assert_eq!(seen.last().map(String::as_str), Some("COMPLETE"), "{seen:?}");
    assert!(
        seen.iter().any(|s| s == "PENDING" || s == "IN_PROGRESS"),
        "the new run was shown before it completed: {seen:?}"
    );
}
