//! `kubectl kudo ui` in a real browser: Debian's Chromium, headless, driven over the Chrome
//! DevTools Protocol (CDP). The protocol is JSON over one WebSocket; the handful of commands used
//! here (create a page, navigate, evaluate, capture a screenshot, watch network requests) are sent
//! with tokio-tungstenite, already in the build through kube, rather than a CDP crate whose
//! generated protocol bindings would add minutes of compilation for these few calls.
//!
//! The page is opened with the token, an Instance's page follows a plan triggered by the CLI (its
//! steps, Events and revisions) without a reload, a plan is triggered from the page's own button,
//! and along the way: the cookie is not readable by scripts, every request goes to the UI's own
//! address, every control has a name, no positive tabindex reorders focus, the status colours as
//! rendered have a contrast of at least 4.5:1, and a narrow window needs no horizontal scrolling.
//! Screenshots land in target/tmp/ui-screenshots/.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::ui_cli::{INSTANCE, Served};
use crate::common;

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Headless Chromium with its own profile; killed when dropped.
struct Chromium {
    child: Child,
    _profile: tempfile::TempDir,
    ws_url: String,
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Chromium {
    fn start() -> Chromium {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new("chromium")
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
            .args([
                "--disable-background-networking",
                "--disable-extensions",
                "--disable-sync",
            ])
            .args([
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chromium");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let ws_url = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| {
                l.split_once("DevTools listening on ")
                    .map(|(_, u)| u.trim().to_string())
            })
            .expect("chromium prints its DevTools address");
        std::thread::spawn(move || for _ in lines {});
        Chromium {
            child,
            _profile: profile,
            ws_url,
        }
    }
}

/// One CDP session on one page: commands by id, events kept for [`Cdp::events`].
struct Cdp {
    ws: Ws,
    id: u64,
    session: Option<String>,
    events: Vec<Value>,
}

impl Cdp {
    async fn connect(url: &str) -> Cdp {
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("CDP WebSocket");
        let mut cdp = Cdp {
            ws,
            id: 0,
            session: None,
            events: Vec::new(),
        };
        let target = cdp
            .call("Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let attach = json!({"targetId": target["targetId"], "flatten": true});
        let session = cdp.call("Target.attachToTarget", attach).await;
        cdp.session = Some(session["sessionId"].as_str().unwrap().to_string());
        cdp
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let mut msg = json!({"id": self.id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::Text(msg.to_string().into())).await.unwrap();
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method}"))
                .expect("CDP open")
                .unwrap();
            let Message::Text(text) = frame else { continue };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == json!(self.id) {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
            self.events.push(v);
        }
    }

    /// The value of the JavaScript expression `js` (awaited when a promise).
    async fn eval(&mut self, js: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        assert!(r.get("exceptionDetails").is_none(), "{js}: {r}");
        r["result"]["value"].clone()
    }

    /// Polls `js` until it is true, for up to `secs`.
    async fn until(&mut self, js: &str, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while self.eval(js).await != json!(true) {
            if Instant::now() > deadline {
                let page = self.eval("location.href + '\\n' + document.body.innerText").await;
                panic!(
                    "not within {secs} s: {js}\npage: {}",
                    page.as_str().unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn screenshot(&mut self, name: &str) {
        let shot = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }

    /// The URLs of every request the page made.
    fn requested(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["method"] == "Network.requestWillBeSent")
            .filter_map(|e| e["params"]["request"]["url"].as_str().map(str::to_string))
            .collect()
    }
}

/// Controls without an accessible name, positive tabindexes, and the rendered text/background
/// colours of every status (as `#rrggbb`).
const CHECKS_JS: &str = r#"(() => {
  const hex = c => '#' + c.match(/\d+/g).slice(0, 3).map(n => (+n).toString(16).padStart(2, '0')).join('');
  const named = e => (e.getAttribute('aria-label') || e.textContent.trim() ||
                      (e.labels && e.labels.length > 0)) ? true : false;
  const controls = [...document.querySelectorAll('a, button, input:not([type=hidden]), select, textarea')];
  return {
    unnamed: controls.filter(e => !named(e)).map(e => e.outerHTML),
    tabindex: [...document.querySelectorAll('[tabindex]')].filter(e => e.tabIndex > 0).length,
    colours: [...document.querySelectorAll('.step, .badge')].map(e => {
      const s = getComputedStyle(e);
      return [e.dataset.status || e.textContent.trim(), hex(s.color), hex(s.backgroundColor)];
    }),
  };
})()"#;

async fn check_accessibility(cdp: &mut Cdp) {
    let r = cdp.eval(CHECKS_JS).await;
    assert_eq!(r["unnamed"], json!([]), "controls without a name");
    assert_eq!(r["tabindex"], json!(0));
    let colours = r["colours"].as_array().unwrap();
    assert!(!colours.is_empty());
    for c in colours {
        let (fg, bg) = (c[1].as_str().unwrap(), c[2].as_str().unwrap());
        let ratio = kudo_package::graph::palette::contrast(fg, bg).unwrap();
        assert!(ratio >= 4.5, "{c}: {ratio:.2}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_in_headless_chromium_follows_and_triggers_a_plan() {
    if !common::tool_or_skip(
        "chromium",
        &["--version"],
        "the browser test of kubectl kudo ui needs it",
    ) {
        return;
    }
    let ui = tokio::task::spawn_blocking(Served::start).await.unwrap();
    let chromium = Chromium::start();
    let mut cdp = Cdp::connect(&chromium.ws_url).await;
    cdp.call("Network.enable", json!({})).await;
    let size = json!({"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false});
    cdp.call("Emulation.setDeviceMetricsOverride", size).await;
    let base = ui.base();
    cdp.call(
        "Page.navigate",
        json!({"url": format!("{base}/?token={}", ui.token)}),
    )
    .await;
    let home = "document.readyState === 'complete' && location.pathname === '/' && \
                !!document.querySelector('#instances')";
    cdp.until(home, 30).await;
    // The token left the address bar, and no script can read the cookie.
    assert_eq!(cdp.eval("location.href").await, json!(format!("{base}/")));
    assert_eq!(cdp.eval("document.cookie").await, json!(""));
    assert_eq!(
        cdp.eval(&format!(
            "!!document.querySelector('a[href=\"/i/default/{INSTANCE}\"]')"
        ))
        .await,
        json!(true)
    );
    check_accessibility(&mut cdp).await;
    cdp.screenshot("instances").await;

    cdp.call(
        "Page.navigate",
        json!({"url": format!("{base}/i/default/{INSTANCE}")}),
    )
    .await;
    cdp.until("document.body && document.body.dataset.live === 'open'", 30)
        .await;
    let uid_js = "document.querySelector('[data-plan=deploy]').dataset.uid";
    let first_uid = cdp.eval(uid_js).await;
    // Record every status the step shows, and mark the document: a reload would lose both.
    cdp.eval(
        "window.kept = true; window.seen = []; new MutationObserver(() => { \
         const s = document.querySelector('[data-step=everything]'); \
         if (s) window.seen.push(s.dataset.status); \
         }).observe(document.getElementById('plans'), {childList: true, subtree: true}); true",
    )
    .await;
    let trigger = ["plan", "trigger", "--name", "deploy", "--instance", INSTANCE];
    tokio::task::block_in_place(|| ui.kudo(&trigger));
    let done = format!(
        "{uid_js} !== {first_uid} && \
         document.querySelector('[data-step=everything]').dataset.status === 'COMPLETE'"
    );
    cdp.until(&done, 60).await;
    // The Events list was replaced when the run was reported, with the page still the same.
    let events = "Number(document.body.dataset.eventUpdates || 0) >= 2 && \
                  !!document.querySelector('#events tr[data-reason=PlanStarted]')";
    cdp.until(events, 30).await;
    cdp.until("!!document.querySelector('#history tr[data-revision=\"2\"]')", 30)
        .await;
    assert_eq!(
        cdp.eval("window.kept === true").await,
        json!(true),
        "updated without a reload"
    );
    let seen = cdp.eval("window.seen").await;
    assert!(
        seen.as_array()
            .unwrap()
            .iter()
            .any(|s| s == "PENDING" || s == "IN_PROGRESS"),
        "the new run was shown before it completed: {seen}"
    );
    check_accessibility(&mut cdp).await;
    cdp.screenshot("instance").await;

    // Trigger from the page: the confirmation answered yes, the form posts, the page comes back
    // and shows the new run completing.
    let second_uid = cdp.eval(uid_js).await;
    cdp.eval(
        "window.confirm = () => true; \
         document.querySelector('[data-plan=deploy] form.trigger button').click(); true",
    )
    .await;
    let done = format!(
        "!!document.querySelector('[data-plan=deploy]') && {uid_js} !== {second_uid} && \
         document.querySelector('[data-step=everything]').dataset.status === 'COMPLETE'"
    );
    cdp.until(&done, 60).await;

    // A narrow window: no horizontal scrolling.
    let narrow = json!({"width": 400, "height": 800, "deviceScaleFactor": 1, "mobile": false});
    cdp.call("Emulation.setDeviceMetricsOverride", narrow).await;
    cdp.until("document.documentElement.scrollWidth <= 400", 10).await;
    cdp.screenshot("instance-narrow").await;

    let requested = cdp.requested();
    assert!(
        requested.iter().any(|u| u.ends_with("/assets/app.js")),
        "{requested:?}"
    );
    for url in &requested {
        assert!(
            url.starts_with(&format!("{base}/")),
            "a request outside the UI's address: {url}"
        );
    }
    tokio::task::spawn_blocking(move || drop(ui)).await.unwrap();
}
