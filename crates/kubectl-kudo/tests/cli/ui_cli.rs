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
        Served::serve(home, dev)
    }

    /// `kubectl-kudo ui` over the cluster `dev` (HOME `home`).
    pub fn serve(home: tempfile::TempDir, dev: Dev) -> Served {
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

/// The server-sent events of `path`: a function giving the next event's (name, first data line),
/// waiting up to 60 s for it.
fn sse(ui: &Served, path: &str) -> impl FnMut() -> (String, String) + use<> {
    let path = path.to_string();
    let mut s = TcpStream::connect(&ui.addr).unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\nAccept: text/event-stream\r\n\r\n",
        ui.addr,
        ui.cookie()
    );
    s.write_all(req.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut lines = BufReader::new(s).lines();
    move || {
        let mut name = String::new();
        // Keep-alive comments come every 15 s, so the read timeout alone would never fire.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "no event within 60 s on {path}");
            let line = lines
                .next()
                .expect("the stream stays open")
                .expect("an event within 60 s");
            if let Some(n) = line.strip_prefix("event: ") {
                name = n.to_string();
            } else if let Some(data) = line.strip_prefix("data: ") {
                return (name, data.to_string());
            }
        }
    }
}

#[test]
fn the_instances_list_follows_an_install() {
    let ui = Served::start();
    let mut next_event = sse(&ui, "/instances/events");
    let (name, rows) = next_event();
    assert_eq!(name, "instances");
    assert!(rows.contains(&format!(">{INSTANCE}</a>")), "{rows}");
    let pkg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/first-operator");
    ui.kudo(&["install", pkg.to_str().unwrap(), "--instance", "second"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, rows) = next_event();
        if rows.contains(">second</a>") && rows.contains(">COMPLETE</span>") {
            // By namespace and name: first-operator-instance, then second.
            assert!(
                rows.find(">second</a>") > rows.find(&format!(">{INSTANCE}</a>")),
                "{rows}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the new Instance never showed: {rows}");
    }
}

#[test]
fn the_events_of_an_instance_page_follow_a_plan_the_cli_triggers() {
    let ui = Served::start();
    let mut next_event = sse(&ui, &format!("/i/default/{INSTANCE}/events"));
    // The next `plans` event's run; the `events` and `revisions` events before it are kept.
    let (mut events, mut revisions) = (Vec::new(), Vec::new());
    let mut next_plans = || loop {
        match next_event() {
            (n, data) if n == "plans" => return run_of(&data),
            (n, data) if n == "events" => events.push(data),
            (n, data) if n == "revisions" => revisions.push(data),
            _ => {}
        }
    };
    let (first_uid, first) = next_plans();
    assert_eq!(first, "COMPLETE");
    ui.kudo(&["plan", "trigger", "--name", "deploy", "--instance", INSTANCE]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let (uid, status) = next_plans();
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
    // The Events list came with the stream (the install's run) and again when the trigger's run
    // was reported (a new Event, or the series' count raised).
    assert!(events.len() >= 2, "the Events list was pushed again: {events:?}");
    let last = events.last().unwrap();
    assert!(last.contains("data-reason=\"PlanStarted\""), "{last}");
    // And the revisions: the trigger's run is revision 2.
    assert!(
        revisions.iter().any(|h| h.contains("data-revision=\"2\"")),
        "{revisions:?}"
    );
}

/// The page's requests: a GET with the cookie, a form POST with the cookie and the page's Origin.
impl Served {
    fn get(&self, path: &str) -> (u16, String) {
        let (status, _, body) = http(&self.addr, "GET", path, &[("Cookie", &self.cookie())], "");
        (status, body)
    }

    fn post(&self, path: &str, form: &str) -> (u16, String) {
        let (cookie, origin) = (self.cookie(), self.base());
        let headers = [
            ("Cookie", cookie.as_str()),
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Origin", origin.as_str()),
        ];
        let (status, _, body) = http(&self.addr, "POST", path, &headers, form);
        (status, body)
    }

    /// `kubectl ARGS` on the embedded cluster (namespace default); it must succeed.
    fn kubectl(&self, args: &[&str], input: Option<&str>) -> String {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.dev.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.unwrap_or("").as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }

    /// `(run uid, status)` of plan deploy of Instance `name`.
    fn deploy_run(&self, name: &str) -> (String, String) {
        let inst: serde_json::Value =
            serde_json::from_str(&self.kubectl(&["get", "instances.kudo.dev", name, "-o", "json"], None))
                .unwrap();
        let st = &inst["status"]["planStatus"]["deploy"];
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        (text(&st["uid"]), text(&st["status"]))
    }

    /// Waits until plan deploy of `name` has a run other than `not_uid` with status `want`.
    fn wait_deploy(&self, name: &str, want: &str, not_uid: &str) -> String {
        wait_until(&format!("deploy of {name} {want}"), || {
            let (uid, status) = self.deploy_run(name);
            (status == want && uid != not_uid).then_some(uid)
        })
    }
}

/// Polls `check` every 300 ms until it gives a value, for at most 90 s.
fn wait_until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn the_instance_page_compares_revisions_cancels_a_stuck_plan_and_rolls_back() {
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &[]);
    let pkg = crate::rollback_cli::package(home.path(), false);
    let install = ["install", pkg.to_str().unwrap(), "--instance", "k", "--wait"];
    let (code, out) = kudo(home.path(), &dev.kubeconfig, &install);
    assert_eq!(code, 0, "{out}");
    let ui = Served::serve(home, dev);
    ui.kudo(&["update", "--instance", "k", "-p", "CMD=sleep 1800", "--wait"]);

    let (status, page) = ui.get("/i/default/k");
    assert_eq!(status, 200, "{page}");
    for part in [
        "data-revision=\"2\"",
        "data-revision=\"1\"",
        "data-reason=\"PlanStarted\"",
        "data-reason=\"PlanFinished\"",
        "action=\"/i/default/k/rollback\"",
    ] {
        assert!(page.contains(part), "{part} in {page}");
    }
    let (status, diff) = ui.get("/i/default/k/diff?from=1&to=2");
    assert_eq!(status, 200, "{diff}");
    assert!(
        diff.contains("data-parameter=\"CMD\"")
            && diff.contains("<code>sleep 3600</code>")
            && diff.contains("<code>sleep 1800</code>"),
        "{diff}"
    );
    assert_eq!(ui.get("/i/default/k/diff?from=1&to=9").0, 404);
    let (status, bad) = ui.get("/i/default/k/diff?from=one");
    assert_eq!(status, 400);
    assert!(bad.contains("choose two revisions to compare"), "{bad}");

    // A Deployment that never becomes available: the plan stays IN_PROGRESS; cancel it.
    let (done_uid, _) = ui.deploy_run("k");
    ui.kudo(&["update", "--instance", "k", "-p", "CMD=fail"]);
    let stuck = ui.wait_deploy("k", "IN_PROGRESS", &done_uid);
    wait_until("the cancel button", || {
        ui.get("/i/default/k")
            .1
            .contains("action=\"/i/default/k/cancel\"")
            .then_some(())
    });
    let a = ui.addr.as_str();
    let form = ("Content-Type", "application/x-www-form-urlencoded");
    let cookie = ui.cookie();
    assert_eq!(
        http(a, "POST", "/i/default/k/cancel", &[form], "plan=deploy").0,
        401
    );
    let foreign = [
        ("Cookie", cookie.as_str()),
        form,
        ("Origin", "http://evil.example"),
    ];
    assert_eq!(
        http(a, "POST", "/i/default/k/cancel", &foreign, "plan=deploy").0,
        403
    );
    assert_eq!(
        ui.deploy_run("k").1,
        "IN_PROGRESS",
        "a refused POST changes nothing"
    );
    assert_eq!(ui.post("/i/default/k/cancel", "plan=deploy").0, 303);
    wait_until("deploy CANCELLED", || {
        (ui.deploy_run("k") == (stuck.clone(), "CANCELLED".into())).then_some(())
    });
    let (status, refused) = ui.post("/i/default/k/cancel", "plan=deploy");
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused.contains("no plan is running on instance default/k"),
        "{refused}"
    );
    let cancel = ["plan", "cancel", "--instance", "k"];
    let (code, out) = kudo(ui.home.path(), &ui.dev.kubeconfig, &cancel);
    assert_eq!(code, 1, "the CLI refuses alike: {out}");
    assert!(out.contains("no plan is running on instance default/k"), "{out}");

    // Roll back to revision 1 from the page: the plan runs with its values (CMD at its default).
    let (status, refused) = ui.post("/i/default/k/rollback", "revision=99");
    assert_eq!(status, 409, "{refused}");
    assert!(refused.contains("revision 99 does not exist"), "{refused}");
    assert_eq!(ui.post("/i/default/k/rollback", "revision=1").0, 303);
    ui.wait_deploy("k", "COMPLETE", &stuck);
    let cmd = ui.kubectl(
        &[
            "get",
            "deployment",
            "k-app",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].command[2]}",
        ],
        None,
    );
    assert_eq!(cmd, "sleep 3600");
    let (_, page) = ui.get("/i/default/k");
    assert!(
        page.contains("rollback to 1"),
        "the rollback is a revision: {page}"
    );
}

#[test]
fn a_failed_plan_is_retried_from_the_page() {
    use crate::retry_cli::{INSTANCE as R, blocker, package};
    let home = tempfile::tempdir().unwrap();
    let dev = common::start_dev(home.path(), &[]);
    let pkg = package(home.path());
    let ui = Served::serve(home, dev);
    ui.kubectl(&["apply", "-f", "-"], Some(&blocker("default")));
    ui.kudo(&["install", pkg.to_str().unwrap(), "--instance", R]);
    let failed = ui.wait_deploy(R, "FATAL_ERROR", "");
    let path = format!("/i/default/{R}");
    let page = wait_until("the retry button", || {
        let (_, page) = ui.get(&path);
        page.contains(&format!("action=\"{path}/retry\"")).then_some(page)
    });
    assert!(page.contains(">Warning</td>"), "the failure's Event: {page}");
    ui.kubectl(&["delete", "configmap", &format!("{R}-gate")], None);
    let retry = format!("{path}/retry");
    let (status, body) = ui.post(&retry, "plan=deploy");
    assert_eq!(status, 303, "{body}");
    ui.wait_deploy(R, "COMPLETE", &failed);
    let (status, refused) = ui.post(&retry, "plan=deploy");
    assert_eq!(status, 409, "a plan that did not fail is not retried: {refused}");
}

#[test]
fn the_rollouts_pages_show_the_waves_and_the_outcome_of_each_instance() {
    let ui = Served::start();
    let (status, empty) = ui.get("/rollouts");
    assert_eq!(status, 200, "{empty}");
    assert!(empty.contains("No Rollouts."), "{empty}");
    ui.kudo(&[
        "rollout",
        "start",
        "replicas",
        "-p",
        "REPLICAS=3",
        "-l",
        "kudo.dev/operator=first-operator",
        "--min-success-time",
        "1s",
        "--wait",
        "--wait-time",
        "120",
    ]);
    let (status, list) = ui.get("/rollouts");
    assert_eq!(status, 200, "{list}");
    assert!(
        list.contains("data-rollout=\"replicas\"")
            && list.contains("<code>REPLICAS=3</code>")
            && list.contains(">Complete</span>"),
        "{list}"
    );
    let (status, page) = ui.get("/rollouts/replicas");
    assert_eq!(status, 200, "{page}");
    let row = format!("data-instance=\"default/{INSTANCE}\" data-phase=\"Succeeded\"");
    assert!(
        page.contains("data-wave=\"canary\" data-phase=\"Complete\"")
            && page.contains(&row)
            && page.contains("1 → 2")
            && page.contains(&format!("href=\"/i/default/{INSTANCE}\"")),
        "{page}"
    );
    let mut next_event = sse(&ui, "/rollouts/replicas/events");
    let (name, detail) = next_event();
    assert_eq!(name, "rollout");
    assert!(detail.contains(&row), "{detail}");
    assert_eq!(ui.get("/rollouts/nope").0, 404);
}
