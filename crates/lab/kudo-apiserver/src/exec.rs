//! `pods/exec` and `pods/log`: the two pod subresources that reach into containers.
//!
//! A real API server forwards them to the kubelet of the pod's node. This server has no kubelet
//! of its own; a simulated one (kudo-sim) can register a [`PodRuntime`] through
//! [`crate::RunningServer::set_pod_runtime`]. Without one, both fail as they do on a cluster
//! whose kubelet does not answer.
//!
//! `exec` speaks the WebSocket channel protocols `v5.channel.k8s.io` and `v4.channel.k8s.io`
//! (what kubectl ≥ 1.30 and kube-rs offer): binary messages whose first byte is the channel —
//! 0 stdin, 1 stdout, 2 stderr, 3 error (a `metav1.Status` as JSON once the command ended),
//! 4 resize; v5 adds 255, "close this channel" (`[255, 0]`: end of stdin).

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use http::{HeaderValue, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use crate::error::ApiError;

/// What a command run through `pods/exec` produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// Bytes written to stdout.
    pub stdout: Vec<u8>,
    /// Bytes written to stderr.
    pub stderr: Vec<u8>,
    /// Exit code (0 is success).
    pub exit_code: i32,
}

/// The containers behind `pods/exec` and `pods/log` — what a kubelet is to kube-apiserver.
pub trait PodRuntime: Send + Sync + std::fmt::Debug + 'static {
    /// Runs `command` in `container` of `pod` (the stored object) with `stdin`. `Err` is why it
    /// could not start (reported like a kubelet error, before any stream is opened).
    fn exec(
        &self,
        pod: &Value,
        container: &str,
        command: &[String],
        stdin: &[u8],
    ) -> Result<ExecOutput, String>;
    /// The log of `container`, or `None` when this runtime never ran the pod.
    fn logs(&self, pod: &Value, container: &str) -> Option<Vec<u8>>;
}

/// The registered runtime, if any.
pub(crate) type RuntimeSlot = Arc<std::sync::RwLock<Option<Arc<dyn PodRuntime>>>>;

const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

fn no_kubelet(pod: &Value) -> ApiError {
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    ApiError::internal(format!(
        "error dialing backend: no kubelet answers for node {node:?} (the embedded API server runs no containers; `kubectl kudo dev` simulates them)"
    ))
}

fn containers(pod: &Value, key: &str) -> Vec<String> {
    pod.pointer(&format!("/spec/{key}"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The container a request means: the named one, else the only one (or the
/// `kubectl.kubernetes.io/default-container` annotation), as the kubelet decides.
fn pick_container(pod: &Value, requested: Option<&str>) -> Result<String, ApiError> {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let main = containers(pod, "containers");
    let init = containers(pod, "initContainers");
    match requested.filter(|c| !c.is_empty()) {
        Some(c) if main.iter().chain(&init).any(|n| n == c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None if main.len() == 1 => Ok(main[0].clone()),
        None => {
            if let Some(d) = pod
                .pointer("/metadata/annotations/kubectl.kubernetes.io~1default-container")
                .and_then(Value::as_str)
            {
                return Ok(d.to_string());
            }
            Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                main.join(" ")
            )))
        }
    }
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("")
}

/// The pod's name, and whether it is bound to a node (logs and exec need a kubelet).
fn name_and_scheduled(pod: &Value) -> (&str, bool) {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    (name, !node.is_empty())
}

/// `GET pods/NAME/log`.
pub(crate) fn logs(
    slot: &RuntimeSlot,
    pod: &Value,
    query: &[(String, String)],
) -> Result<Response, ApiError> {
    let get = |k: &str| query.iter().find(|(q, _)| q == k).map(|(_, v)| v.as_str());
    let container = pick_container(pod, get("container"))?;
    let (name, scheduled) = name_and_scheduled(pod);
    if !scheduled {
        return Err(ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
        )));
    }
    let runtime = slot.read().unwrap_or_else(|p| p.into_inner()).clone();
    let Some(rt) = runtime else {
        return Err(no_kubelet(pod));
    };
    let Some(mut text) = rt.logs(pod, &container) else {
        return Err(ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
        )));
    };
    if let Some(n) = get("tailLines").and_then(|v| v.parse::<usize>().ok()) {
        let s = String::from_utf8_lossy(&text).into_owned();
        let lines: Vec<&str> = s.split_inclusive('\n').collect();
        text = lines[lines.len().saturating_sub(n)..].concat().into_bytes();
    }
    if let Some(n) = get("limitBytes").and_then(|v| v.parse::<usize>().ok()) {
        text.truncate(n);
    }
    let mut r = Response::new(Body::from(text));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(r)
}

/// Parameters of an exec request.
#[derive(Debug)]
struct ExecReq {
    container: String,
    command: Vec<String>,
    stdin: bool,
}

fn exec_request(pod: &Value, query: &[(String, String)]) -> Result<ExecReq, ApiError> {
    let get = |k: &str| query.iter().find(|(q, _)| q == k).map(|(_, v)| v.as_str());
    let flag = |k: &str| matches!(get(k), Some("true" | "1"));
    let command: Vec<String> = query
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if command.is_empty() {
        return Err(ApiError::bad_request("you must specify at least 1 command"));
    }
    if !flag("stdin") && !flag("stdout") && !flag("stderr") {
        return Err(ApiError::bad_request(
            "you must specify at least 1 of stdin, stdout, stderr",
        ));
    }
    let container = pick_container(pod, get("container"))?;
    let (name, scheduled) = name_and_scheduled(pod);
    if !scheduled {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    let ph = phase(pod);
    if ph == "Succeeded" || ph == "Failed" {
        return Err(ApiError::bad_request(format!(
            "cannot exec into a container in a completed pod; current phase is {ph}"
        )));
    }
    Ok(ExecReq {
        container,
        command,
        stdin: flag("stdin"),
    })
}

/// `GET`/`POST pods/NAME/exec` with a WebSocket upgrade.
pub(crate) fn exec(
    slot: &RuntimeSlot,
    pod: Value,
    query: &[(String, String)],
    headers: &http::HeaderMap,
    on_upgrade: Option<hyper::upgrade::OnUpgrade>,
) -> Result<Response, ApiError> {
    let req = exec_request(&pod, query)?;
    let runtime = slot.read().unwrap_or_else(|p| p.into_inner()).clone();
    let Some(rt) = runtime else {
        return Err(no_kubelet(&pod));
    };
    let is_ws = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let key = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok());
    let (Some(key), true, Some(on_upgrade)) = (key, is_ws, on_upgrade) else {
        return Err(ApiError::bad_request(
            "Upgrade request required: pods/exec is served over WebSocket (v5.channel.k8s.io or v4.channel.k8s.io) only",
        ));
    };
    let offered: Vec<String> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
        .collect();
    let Some(protocol) = PROTOCOLS.iter().find(|p| offered.iter().any(|o| o == *p)) else {
        return Err(ApiError::bad_request(format!(
            "none of the offered WebSocket subprotocols {offered:?} is supported; this server speaks {PROTOCOLS:?}"
        )));
    };
    let v5 = *protocol == PROTOCOLS[0];
    let accept = derive_accept_key(key.as_bytes());
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!("exec upgrade failed: {e}");
                return;
            }
        };
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        serve(ws, rt, pod, req, v5).await;
    });
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(protocol));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    Ok(r)
}

async fn serve<S>(mut ws: WebSocketStream<S>, rt: Arc<dyn PodRuntime>, pod: Value, req: ExecReq, v5: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut stdin = Vec::new();
    if req.stdin {
        // Read stdin until the client closes it: `[255, 0]` (v5) or the end of the connection.
        while let Some(msg) = ws.next().await {
            match msg {
                Ok(Message::Binary(b)) => match b.first() {
                    Some(0) => stdin.extend_from_slice(&b[1..]),
                    Some(255) if v5 && b.get(1) == Some(&0) => break,
                    _ => {}
                },
                Ok(Message::Close(_)) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
    let status = match rt.exec(&pod, &req.container, &req.command, &stdin) {
        Ok(out) => {
            for (ch, data) in [(1u8, &out.stdout), (2u8, &out.stderr)] {
                for chunk in data.chunks(32 * 1024) {
                    let mut m = Vec::with_capacity(chunk.len() + 1);
                    m.push(ch);
                    m.extend_from_slice(chunk);
                    if ws.send(Message::binary(m)).await.is_err() {
                        return;
                    }
                }
            }
            if out.exit_code == 0 {
                json!({"metadata": {}, "status": "Success"})
            } else {
                json!({
                    "metadata": {},
                    "status": "Failure",
                    "message": format!(
                        "command terminated with non-zero exit code: error executing command [{}], exit code {}",
                        req.command.join(" "),
                        out.exit_code
                    ),
                    "reason": "NonZeroExitCode",
                    "details": {"causes": [{"reason": "ExitCode", "message": out.exit_code.to_string()}]},
                })
            }
        }
        Err(e) => json!({
            "metadata": {},
            "status": "Failure",
            "message": e,
            "reason": "InternalError",
            "code": 500,
        }),
    };
    let mut m = vec![3u8];
    m.extend_from_slice(status.to_string().as_bytes());
    let _ = ws.send(Message::binary(m)).await;
    // A normal closure (1000): client-go treats any other close code as a stream error.
    let _ = ws
        .close(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        }))
        .await;
    // Drain until the client acknowledges the close.
    while let Some(Ok(_)) = ws.next().await {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str, node: &str) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"nodeName": node,
            "containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "i"}]},
            "status": {"phase": phase}})
    }

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn exec_requests_are_checked_as_the_kubelet_does() {
        let ok = q(&[
            ("command", "sh"),
            ("command", "-c"),
            ("command", "exit 3"),
            ("container", "b"),
            ("stdout", "true"),
        ]);
        let r = exec_request(&pod("Running", "n"), &ok).unwrap();
        assert_eq!(r.command, ["sh", "-c", "exit 3"]);
        assert_eq!(r.container, "b");
        let e = exec_request(&pod("Running", "n"), &q(&[("command", "ls"), ("stdout", "true")])).unwrap_err();
        assert!(e.to_string().contains("choose one of: [a b]"), "{e}");
        let e = exec_request(
            &pod("Running", "n"),
            &q(&[("command", "ls"), ("container", "x"), ("stdout", "1")]),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("container x is not valid for pod p"),
            "{e}"
        );
        let e = exec_request(&pod("Succeeded", "n"), &ok).unwrap_err();
        assert!(
            e.to_string()
                .contains("completed pod; current phase is Succeeded"),
            "{e}"
        );
        let e = exec_request(&pod("Pending", ""), &ok).unwrap_err();
        assert!(e.to_string().contains("does not have a host assigned"), "{e}");
        let e = exec_request(&pod("Running", "n"), &q(&[("container", "a"), ("stdout", "1")])).unwrap_err();
        assert!(e.to_string().contains("at least 1 command"), "{e}");
    }

    #[test]
    fn without_a_runtime_exec_and_logs_fail_like_an_unreachable_kubelet() {
        let slot: RuntimeSlot = Default::default();
        let ok = q(&[("command", "ls"), ("container", "a"), ("stdout", "true")]);
        let e = exec(&slot, pod("Running", "n"), &ok, &http::HeaderMap::new(), None).unwrap_err();
        assert_eq!(e.code, 500);
        assert!(e.to_string().contains("error dialing backend"), "{e}");
        let e = logs(&slot, &pod("Running", "n"), &q(&[("container", "a")])).unwrap_err();
        assert_eq!(e.code, 500);
    }
}
