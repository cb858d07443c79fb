//! The REST surface: routing of Kubernetes API paths to the store, content negotiation, lists,
//! watches, patches and subresources.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::faults::{self, Faults, Verb};
use crate::meta;
use crate::patch::{self, PatchKind};
use crate::registry::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{
    DeleteOptions, EventType, Propagation, Store, Subresource, WatchEvent, WriteOptions, present,
};
use crate::{discovery, openapi, table};

/// The request body, or 413 once it passes [`MAX_REQUEST_BODY_BYTES`]. The rest of an oversized
/// body is read and dropped (up to a bound) so the client, still sending, gets the answer rather
/// than a broken pipe.
async fn read_body(body: Body) -> Result<Bytes, ApiError> {
    use futures::StreamExt;
    const DRAIN_LIMIT: usize = 256 * 1024 * 1024;
    let mut stream = body.into_data_stream();
    let mut buf = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("reading request body: {e}")))?;
        seen += chunk.len();
        if seen <= MAX_REQUEST_BODY_BYTES {
            buf.extend_from_slice(&chunk);
        } else if seen > DRAIN_LIMIT {
            break;
        }
    }
    if seen > MAX_REQUEST_BODY_BYTES {
        return Err(ApiError::too_large(MAX_REQUEST_BODY_BYTES));
    }
    Ok(buf.freeze())
}

/// Shared state of the HTTP layer.
pub(crate) struct AppState {
    pub store: Store,
    pub addr: String,
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    pub faults: Faults,
    pub runtime: crate::exec::RuntimeSlot,
}

type Query = HashMap<String, String>;

/// kube-apiserver's `--max-request-body-bytes` default (3 MiB): larger bodies get 413.
pub const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

fn parse_query(q: Option<&str>) -> Query {
    let mut out = HashMap::new();
    for pair in q.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let dec = |s: &str| {
            percent_encoding::percent_decode_str(&s.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        };
        out.insert(dec(k), dec(v));
    }
    out
}

/// Query parameters in order, repeated keys kept (`command` of `pods/exec` repeats).
fn query_pairs(q: Option<&str>) -> Vec<(String, String)> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let dec = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (dec(k), dec(v))
        })
        .collect()
}

fn json_response(code: u16, body: &Value) -> Response {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.to_status())
}

fn text(code: u16, body: &'static str) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The single entry point: everything is routed by hand because Kubernetes paths are irregular.
pub(crate) async fn handle(State(app): State<Arc<AppState>>, req: Request) -> Response {
    let (mut parts, body) = req.into_parts();
    let on_upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    let path = parts.uri.path().trim_end_matches('/').to_string();
    let query = parse_query(parts.uri.query());
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let body = match read_body(body).await {
        Ok(b) => b,
        Err(e) => return error_response(&e),
    };
    tracing::debug!(method = %parts.method, %path, query = ?parts.uri.query(), "request");
    let user = match crate::rbac::request::check(
        &app.store,
        &parts.method,
        parts.uri.path(),
        &query,
        &parts.headers,
    ) {
        Ok(u) => u,
        Err(r) => return refusal_response(&r),
    };
    if let Err(e) = escalation_guard(
        &app.store,
        &user,
        &parts.method,
        parts.uri.path(),
        &query,
        &body,
        &content_type,
    ) {
        return error_response(&e);
    }
    if path == faults::ADMIN_PATH {
        return fault_admin(&app.faults, &parts.method, &body);
    }
    let reg = app.store.registry().clone();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let get = parts.method == Method::GET;
    match segs.as_slice() {
        ["version"] if get => {
            return json_response(
                200,
                &json!({
                    "major": "1",
                    "minor": "37",
                    "emulationMajor": "1",
                    "emulationMinor": "37",
                    "minCompatibilityMajor": "1",
                    "minCompatibilityMinor": "36",
                    "gitVersion": crate::GIT_VERSION,
                    "gitCommit": "0000000000000000000000000000000000000000",
                    "gitTreeState": "clean",
                    "buildDate": "2026-11-21T00:00:00Z",
                    "goVersion": "go1.25.0",
                    "compiler": "gc",
                    "platform": "linux/amd64",
                }),
            );
        }
        ["healthz"] | ["readyz"] | ["livez"] if get => return text(200, "ok"),
        ["api"] if get => {
            return match discovery::aggregated_version(&accept) {
                Some(v) => aggregated_response(&discovery::aggregated(&reg, true, v), v),
                None => json_response(200, &discovery::api_versions(&app.addr)),
            };
        }
        ["apis"] if get => {
            return match discovery::aggregated_version(&accept) {
                Some(v) => aggregated_response(&discovery::aggregated(&reg, false, v), v),
                None => json_response(200, &discovery::api_group_list(&reg)),
            };
        }
        ["openapi", "v3"] if get => return json_response(200, &openapi::index(&reg)),
        ["openapi", "v3", "api", "v1"] if get => {
            return match openapi::gv_document(&reg, "", "v1") {
                Some(d) => json_response(200, &d),
                None => error_response(&ApiError::path_not_found()),
            };
        }
        ["openapi", "v3", "apis", g, v] if get => {
            return match openapi::gv_document(&reg, g, v) {
                Some(d) => json_response(200, &d),
                None => error_response(&ApiError::path_not_found()),
            };
        }
        ["apis", g] if get => {
            return match discovery::api_group(&reg, g) {
                Some(d) => json_response(200, &d),
                None => error_response(&ApiError::path_not_found()),
            };
        }
        [
            "apis",
            "authorization.k8s.io",
            "v1",
            kind @ ("selfsubjectaccessreviews" | "subjectaccessreviews"),
        ] => {
            return access_review(&app.store, &user, kind, &parts.method, &body, &content_type);
        }
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return error_response(&ApiError::path_not_found()),
    };
    if rest.is_empty() {
        if !get {
            return error_response(&ApiError::method_not_allowed());
        }
        return match discovery::resource_list(&reg, group, version) {
            Some(d) => json_response(200, &d),
            None => error_response(&ApiError::path_not_found()),
        };
    }
    let mut rest: Vec<&str> = rest.to_vec();
    let mut watch = matches!(query.get("watch").map(String::as_str), Some("true") | Some("1"));
    if rest.first() == Some(&"watch") {
        watch = true;
        rest.remove(0);
    }
    let (namespace, resource, name, sub) = match rest.as_slice() {
        ["namespaces", ns, res, more @ ..] if !["status", "finalize"].contains(res) => (
            Some(ns.to_string()),
            *res,
            more.first().copied(),
            more.get(1).copied(),
        ),
        [res, more @ ..] => (None, *res, more.first().copied(), more.get(1).copied()),
        [] => return error_response(&ApiError::path_not_found()),
    };
    if rest.len() > 5 {
        return error_response(&ApiError::path_not_found());
    }
    let Some(def) = reg.by_path(group, version, resource) else {
        return error_response(&ApiError::path_not_found());
    };
    if namespace.is_some() && !def.namespaced {
        return error_response(&ApiError::path_not_found());
    }
    if namespace.is_none() && def.namespaced && name.is_some() {
        return error_response(&ApiError::path_not_found());
    }
    let sub = match sub {
        None => None,
        Some("status") if def.status => Some("status"),
        Some("scale") if def.scale.is_some() => Some("scale"),
        Some("finalize") if def.plural == "namespaces" && def.group.is_empty() => Some("finalize"),
        Some("binding") if def.plural == "pods" && def.group.is_empty() => Some("binding"),
        Some(s @ ("exec" | "log")) if def.plural == "pods" && def.group.is_empty() => Some(s),
        Some(_) => return error_response(&ApiError::path_not_found()),
    };
    if let (Some(s @ ("exec" | "log")), Some(n)) = (sub, name) {
        let pairs = query_pairs(parts.uri.query());
        let pod = match app.store.get(&def, namespace.as_deref().unwrap_or(""), n) {
            Ok(p) => p,
            Err(e) => return error_response(&e),
        };
        let r = match (s, &parts.method) {
            ("log", &Method::GET) => crate::exec::logs(&app.runtime, &pod, &pairs),
            ("exec", &Method::GET | &Method::POST) => {
                crate::exec::exec(&app.runtime, pod, &pairs, &parts.headers, on_upgrade)
            }
            _ => Err(ApiError::method_not_allowed()),
        };
        return r.unwrap_or_else(|e| error_response(&e));
    }
    let ctx = Ctx {
        app: app.clone(),
        def,
        ns: namespace.unwrap_or_default(),
        query,
        accept,
        content_type,
        agent: parts
            .headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split('/').next())
            .unwrap_or("")
            .to_string(),
    };
    // Fault injection (a no-op unless configured): latency, then an injected error instead of
    // executing, or a lost acknowledgement after executing.
    let verb = Verb::of(&parts.method, name.is_some(), watch);
    let decision = verb.map(|v| (v, app.faults.decide(v)));
    if let Some((verb, d)) = decision {
        if !d.delay.is_zero() {
            tokio::time::sleep(d.delay).await;
        }
        if let Some(status) = d.fail {
            let target = match name {
                Some(n) => n.to_string(),
                None if verb == Verb::Create => decode_body(&body, &ctx.content_type)
                    .map(|o| meta::name(&o).to_string())
                    .unwrap_or_default(),
                None => String::new(),
            };
            let e = faults::injected_error(status, verb, &ctx.def.group, &ctx.def.plural, &target);
            let mut r = error_response(&e);
            if status == 429 {
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            return r;
        }
    }
    if let Some(e) = ctx.invalid_dry_run(&parts.method) {
        return error_response(&e);
    }
    let result = match (parts.method.clone(), name) {
        (Method::GET, None) if watch => return ctx.watch(None).await,
        (Method::GET, Some(n)) if watch => return ctx.watch(Some(n.to_string())).await,
        (Method::GET, None) => ctx.list(),
        (Method::GET, Some(n)) => ctx.get(n, sub),
        (Method::POST, None) => ctx.create(&body),
        (Method::POST, Some(n)) if sub == Some("binding") => ctx.bind(n, &body),
        (Method::PUT, Some(n)) => ctx.update(n, sub, &body),
        (Method::PATCH, Some(n)) => ctx.patch(n, sub, &body),
        (Method::DELETE, Some(n)) if sub.is_none() => ctx.delete(n, &body),
        (Method::DELETE, None) => ctx.delete_collection(&body),
        _ => Err(ApiError::method_not_allowed()),
    };
    match (result, decision) {
        (Ok(_), Some((verb, d))) if d.lose_write => {
            app.faults.count_lost_write();
            error_response(&faults::lost_write_error(verb, &ctx.def.group, &ctx.def.plural))
        }
        (Ok((code, v)), _) => json_response(code, &v),
        (Err(e), _) => error_response(&e),
    }
}

/// A request refused by authorization: the 403 `Status`, or kube-apiserver's plain 500 for
/// impersonation headers without a user.
fn refusal_response(r: &crate::rbac::request::Refusal) -> Response {
    use crate::rbac::request::Refusal;
    match r {
        Refusal::Forbidden(e) => error_response(e),
        Refusal::NoUser { .. } => {
            let mut resp = Response::new(Body::from(format!("{r}\n")));
            *resp.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            resp
        }
    }
}

/// RBAC's escalation prevention for an impersonated identity writing Roles, ClusterRoles and
/// their bindings (the admin, in `system:masters`, is exempt as on a real server).
fn escalation_guard(
    store: &Store,
    user: &crate::rbac::UserInfo,
    method: &Method,
    path: &str,
    query: &Query,
    body: &[u8],
    content_type: &str,
) -> Result<(), ApiError> {
    if user.groups.iter().any(|g| g == crate::rbac::MASTERS) {
        return Ok(());
    }
    let attrs = crate::rbac::request::attributes(method, path, query);
    if attrs.group != crate::rbac::GROUP || !attrs.subresource.is_empty() {
        return Ok(());
    }
    // A server-side apply patch is the whole object the writer wants (RBAC rules and roleRef
    // are atomic), so it is judged like a create, as kube-apiserver judges the patched result;
    // other patches are judged strictly (their result is not known here).
    let apply_patch = content_type.starts_with("application/apply-patch");
    let obj = match attrs.verb.as_str() {
        "create" | "update" => Some(decode_body(body, content_type)?),
        "patch" if apply_patch => Some(decode_body(body, content_type)?),
        _ => None,
    };
    crate::rbac::escalation::check_write(store, user, &attrs, obj.as_ref())
}

/// `POST selfsubjectaccessreviews` / `subjectaccessreviews` (authorization.k8s.io/v1).
fn access_review(
    store: &Store,
    user: &crate::rbac::UserInfo,
    kind: &str,
    method: &Method,
    body: &[u8],
    content_type: &str,
) -> Response {
    if *method != Method::POST {
        return error_response(&ApiError::method_not_allowed());
    }
    let review = match decode_body(body, content_type) {
        Ok(v) => v,
        Err(e) => return error_response(&e),
    };
    let r = if kind == "selfsubjectaccessreviews" {
        crate::rbac::review::self_subject(store, user, review)
    } else {
        crate::rbac::review::subject(store, review)
    };
    match r {
        Ok((code, v)) => json_response(code, &v),
        Err(e) => error_response(&e),
    }
}

/// `GET`/`PUT`/`DELETE /kudo-admin/faults`: read, replace or clear the fault settings.
fn fault_admin(faults: &Faults, method: &Method, body: &[u8]) -> Response {
    match *method {
        Method::GET => {}
        Method::PUT => {
            let config: faults::FaultConfig = match serde_json::from_slice(body) {
                Ok(c) => c,
                Err(e) => {
                    return error_response(&ApiError::bad_request(format!(
                        "invalid fault configuration: {e}"
                    )));
                }
            };
            if let Err(e) = faults.set(config) {
                return error_response(&ApiError::bad_request(format!(
                    "invalid fault configuration: {e}"
                )));
            }
        }
        Method::DELETE => faults.clear(),
        _ => return error_response(&ApiError::method_not_allowed()),
    }
    json_response(200, &faults.to_json())
}

fn aggregated_response(v: &Value, version: &str) -> Response {
    let mut r = json_response(200, v);
    let ct = format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    if let Ok(h) = HeaderValue::from_str(&ct) {
        r.headers_mut().insert(header::CONTENT_TYPE, h);
    }
    r
}

struct Ctx {
    app: Arc<AppState>,
    def: Arc<ResourceDef>,
    ns: String,
    query: Query,
    accept: String,
    content_type: String,
    /// `User-Agent` up to its first `/`: kube-apiserver's field manager when the request names none.
    agent: String,
}

type Reply = Result<(u16, Value), ApiError>;

fn decode_body(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    if ct == "application/vnd.kubernetes.protobuf" {
        return crate::proto::decode(body);
    }
    if ct.contains("protobuf") || ct.contains("cbor") {
        return Err(ApiError::unsupported_media_type(
            ct,
            &["application/json", "application/yaml"],
        ));
    }
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body).map_err(|_| ApiError::bad_request("request body is not UTF-8"))?;
    if ct.contains("yaml") {
        // As kube-apiserver reads YAML (sigs.k8s.io/yaml: a key written twice keeps its last
        // value).
        return kudo_template::data::yaml_to_json(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
    }
    Err(ApiError::bad_request(format!(
        "couldn't get version/kind; json parse error: {}",
        serde_json::from_slice::<Value>(body)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    )))
}

impl Ctx {
    fn store(&self) -> &Store {
        &self.app.store
    }

    /// `dryRun` of a write accepts only `All`, as kube-apiserver's `ValidateDryRun`: any other
    /// value is a 422 on the request's options kind, never a write that was meant as a dry run.
    fn invalid_dry_run(&self, method: &Method) -> Option<ApiError> {
        let value = self.query.get("dryRun")?;
        let kind = match *method {
            Method::POST => "CreateOptions",
            Method::PUT => "UpdateOptions",
            Method::PATCH => "PatchOptions",
            Method::DELETE => "DeleteOptions",
            _ => return None,
        };
        if value == "All" {
            return None;
        }
        Some(ApiError::invalid(
            "meta.k8s.io",
            kind,
            "",
            vec![crate::error::Cause {
                reason: "FieldValueNotSupported".into(),
                field: "dryRun".into(),
                message: format!("Unsupported value: []string{{{value:?}}}: supported values: \"All\""),
            }],
        ))
    }

    fn write_opts(&self) -> WriteOptions {
        WriteOptions {
            dry_run: self.query.get("dryRun").is_some_and(|v| v == "All"),
            field_manager: self.field_manager(),
            applied: false,
            strict: self.query.get("fieldValidation").is_some_and(|v| v == "Strict"),
        }
    }

    /// `fieldManager`, else the User-Agent's prefix (none for apply, which requires the parameter).
    fn field_manager(&self) -> Option<String> {
        self.query
            .get("fieldManager")
            .cloned()
            .or_else(|| (!self.agent.is_empty()).then(|| self.agent.clone()))
    }

    fn wants_table(&self) -> bool {
        self.accept.contains("as=Table")
    }

    fn selectors(&self) -> Result<(LabelSelector, FieldSelector), ApiError> {
        let l = LabelSelector::parse(self.query.get("labelSelector").map(String::as_str).unwrap_or(""))?;
        let f = FieldSelector::parse(
            self.query.get("fieldSelector").map(String::as_str).unwrap_or(""),
            &self.def,
        )?;
        Ok((l, f))
    }

    fn ns_opt(&self) -> Option<&str> {
        if self.def.namespaced && !self.ns.is_empty() {
            Some(&self.ns)
        } else {
            None
        }
    }

    fn get(&self, name: &str, sub: Option<&str>) -> Reply {
        let obj = self.store().get(&self.def, &self.ns, name)?;
        if sub == Some("scale") {
            return Ok((200, self.scale_of(&obj)));
        }
        if self.wants_table() {
            let rv = meta::meta_str(&obj, "resourceVersion").to_string();
            return Ok((
                200,
                table::to_table(&self.def, &[obj], json!({"resourceVersion": rv}), self.include()),
            ));
        }
        Ok((200, obj))
    }

    /// `POST pods/NAME/binding`: what a scheduler does to place a pod. Binding an already bound pod
    /// is a conflict, as in kube-apiserver.
    fn bind(&self, name: &str, body: &[u8]) -> Reply {
        let binding = decode_body(body, &self.content_type)?;
        let node = binding
            .pointer("/target/name")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        if node.is_empty() {
            return Err(ApiError::invalid(
                "",
                "Binding",
                name,
                vec![crate::error::Cause::required("target.name", "Required value")],
            ));
        }
        let opts = WriteOptions {
            dry_run: self.query.get("dryRun").is_some_and(|v| v == "All"),
            field_manager: self.field_manager(),
            ..Default::default()
        };
        let (group, plural) = (self.def.group.clone(), self.def.plural.clone());
        self.store()
            .modify(&self.def, &self.ns, name, Subresource::Binding, &opts, |cur| {
                let Some(cur) = cur else {
                    return Err(ApiError::not_found(&group, &plural, name));
                };
                let bound = cur
                    .pointer("/spec/nodeName")
                    .and_then(|v| v.as_str())
                    .unwrap_or("");
                if !bound.is_empty() {
                    return Err(ApiError::conflict(
                        &group,
                        &plural,
                        name,
                        &format!("pod {name} is already assigned to node \"{bound}\""),
                    ));
                }
                if meta::is_deleting(cur) {
                    return Err(ApiError::conflict(
                        &group,
                        &plural,
                        name,
                        "pod is being deleted, cannot be assigned to a host",
                    ));
                }
                let mut new = cur.clone();
                if let Some(spec) = new.get_mut("spec").and_then(|s| s.as_object_mut()) {
                    spec.insert("nodeName".into(), json!(node));
                }
                mark_scheduled(&mut new);
                Ok(new)
            })?;
        Ok((
            201,
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201
            }),
        ))
    }

    fn include(&self) -> &str {
        self.query
            .get("includeObject")
            .map(String::as_str)
            .unwrap_or("Metadata")
    }

    fn list(&self) -> Reply {
        let (l, f) = self.selectors()?;
        let (shared, rv) = self.store().list_shared(&self.def, self.ns_opt());
        // Filter on the stored objects and copy only what is returned (a page of 500 out of
        // 10,000 objects copies 500). The events.k8s.io view is filtered in its own shape.
        let convert = self.def.is_events_v1();
        let mut items: Vec<Value> = Vec::new();
        let mut matching: Vec<&Arc<Value>> = Vec::new();
        for o in &shared {
            if convert {
                let p = present(&self.def, o);
                if l.matches(&p) && f.matches(&p) {
                    matching.push(o);
                }
            } else if l.matches(o) && f.matches(o) {
                matching.push(o);
            }
        }
        let mut list_meta = json!({"resourceVersion": rv.to_string()});
        if let Some(token) = self.query.get("continue").filter(|t| !t.is_empty()) {
            let start = decode_continue(token)?;
            matching.retain(|o| (meta::namespace(o).to_string(), meta::name(o).to_string()) > start);
        }
        let limit: usize = self.query.get("limit").and_then(|l| l.parse().ok()).unwrap_or(0);
        if limit > 0 && matching.len() > limit {
            let remaining = matching.len() - limit;
            matching.truncate(limit);
            if let Some(last) = matching.last() {
                list_meta["continue"] = json!(encode_continue(meta::namespace(last), meta::name(last)));
                list_meta["remainingItemCount"] = json!(remaining);
            }
        }
        items.extend(matching.into_iter().map(|o| present(&self.def, o)));
        if self.wants_table() {
            return Ok((200, table::to_table(&self.def, &items, list_meta, self.include())));
        }
        Ok((
            200,
            json!({
                "kind": format!("{}List", self.def.kind),
                "apiVersion": self.def.api_version(),
                "metadata": list_meta,
                "items": items,
            }),
        ))
    }

    /// A request body that does not decode: kube-apiserver names the kind it expected.
    fn unrecognized(&self, e: ApiError) -> ApiError {
        if e.code == 400 {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): {}",
                self.def.kind, e.message
            ))
        } else {
            e
        }
    }

    /// A body whose field types cannot decode into the built-in kind: 400, as kube-apiserver answers.
    fn check_types(&self, obj: &Value) -> Result<(), ApiError> {
        match crate::validate::type_error(&self.def, obj) {
            None => Ok(()),
            Some(e) => Err(ApiError::bad_request(format!(
                "{kind} in version \"{v}\" cannot be handled as a {kind}: {m}",
                kind = self.def.kind,
                v = self.def.version,
                m = e.message()
            ))),
        }
    }

    fn create(&self, body: &[u8]) -> Reply {
        let obj = decode_body(body, &self.content_type).map_err(|e| self.unrecognized(e))?;
        self.check_kind(&obj)?;
        self.check_types(&obj)?;
        if !meta::meta_str(&obj, "resourceVersion").is_empty() {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let created = self
            .store()
            .create(&self.def, &self.ns, obj, &self.write_opts())?;
        Ok((201, created))
    }

    fn check_kind(&self, obj: &Value) -> Result<(), ApiError> {
        let kind = obj.get("kind").and_then(|v| v.as_str()).unwrap_or("");
        let av = obj.get("apiVersion").and_then(|v| v.as_str()).unwrap_or("");
        if (!kind.is_empty() && kind != self.def.kind) || (!av.is_empty() && av != self.def.api_version()) {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                self.def.api_version()
            )));
        }
        Ok(())
    }

    fn subresource(sub: Option<&str>) -> Subresource {
        match sub {
            Some("status") => Subresource::Status,
            _ => Subresource::Main,
        }
    }

    fn update(&self, name: &str, sub: Option<&str>, body: &[u8]) -> Reply {
        let obj = decode_body(body, &self.content_type).map_err(|e| self.unrecognized(e))?;
        if sub == Some("scale") {
            let replicas = obj.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
            let rv = meta::meta_str(&obj, "resourceVersion").to_string();
            let path = self
                .def
                .scale
                .as_ref()
                .map(|s| s.spec_replicas.clone())
                .unwrap_or_default();
            let (v, _) = self.store().modify(
                &self.def,
                &self.ns,
                name,
                Subresource::Main,
                &self.write_opts(),
                |cur| {
                    let cur =
                        cur.ok_or_else(|| ApiError::not_found(&self.def.group, &self.def.plural, name))?;
                    if !rv.is_empty() && rv != meta::meta_str(cur, "resourceVersion") {
                        return Err(ApiError::stale(&self.def.group, &self.def.plural, name));
                    }
                    let mut n = cur.clone();
                    set_path(&mut n, &path, replicas);
                    Ok(n)
                },
            )?;
            return Ok((200, self.scale_of(&v)));
        }
        if sub == Some("finalize") {
            let fins = obj.pointer("/spec/finalizers").cloned();
            let (v, _) = self.store().modify(
                &self.def,
                &self.ns,
                name,
                Subresource::Main,
                &self.write_opts(),
                |cur| {
                    let mut n = cur
                        .cloned()
                        .ok_or_else(|| ApiError::not_found("", "namespaces", name))?;
                    n["spec"]["finalizers"] = fins.unwrap_or(json!([]));
                    Ok(n)
                },
            )?;
            return Ok((200, v));
        }
        self.check_kind(&obj)?;
        self.check_types(&obj)?;
        let v = self.store().update(
            &self.def,
            &self.ns,
            name,
            obj,
            Self::subresource(sub),
            &self.write_opts(),
        )?;
        Ok((200, v))
    }

    fn scale_of(&self, obj: &Value) -> Value {
        let sc = self.def.scale.clone().unwrap_or(crate::registry::ScaleSpec {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        });
        let get = |p: &str| meta::json_path(obj, p).cloned().unwrap_or(json!(0));
        let mut selector = sc
            .label_selector
            .as_deref()
            .and_then(|p| meta::json_path(obj, p))
            .and_then(|v| v.as_str())
            .map(String::from);
        if selector.is_none()
            && let Some(ml) = obj
                .pointer("/spec/selector/matchLabels")
                .and_then(|v| v.as_object())
        {
            selector = Some(
                ml.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        let mut md = json!({
            "name": meta::name(obj),
            "uid": meta::uid(obj),
            "resourceVersion": meta::meta_str(obj, "resourceVersion"),
            "creationTimestamp": meta::meta_str(obj, "creationTimestamp"),
        });
        if self.def.namespaced {
            md["namespace"] = json!(meta::namespace(obj));
        }
        let mut status = json!({"replicas": get(&sc.status_replicas)});
        if let Some(s) = selector {
            status["selector"] = json!(s);
        }
        json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": md,
            "spec": {"replicas": get(&sc.spec_replicas)},
            "status": status,
        })
    }

    fn patch(&self, name: &str, sub: Option<&str>, body: &[u8]) -> Reply {
        let Some(kind) = PatchKind::from_content_type(&self.content_type) else {
            return Err(ApiError::unsupported_media_type(
                &self.content_type,
                &patch::accepted_types(&self.def),
            ));
        };
        if kind == PatchKind::Strategic && !self.def.supports_smp() {
            return Err(ApiError::unsupported_media_type(
                &self.content_type,
                &patch::accepted_types(&self.def),
            ));
        }
        let p = if kind == PatchKind::Apply {
            decode_body(body, "application/yaml")?
        } else {
            let p: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            match (kind, &p) {
                (PatchKind::Json, Value::Object(_)) => {
                    return Err(ApiError::bad_request(
                        "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
                    ));
                }
                (PatchKind::Merge | PatchKind::Strategic, v) if !v.is_object() => {
                    return Err(ApiError::bad_request(format!(
                        "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                        if v.is_array() { "array" } else { "value" }
                    )));
                }
                _ => {}
            }
            p
        };
        let mut opts = self.write_opts();
        opts.applied = kind == PatchKind::Apply;
        let force = self.query.get("force").is_some_and(|v| v == "true");
        if kind == PatchKind::Apply && self.query.get("fieldManager").is_none_or(|m| m.is_empty()) {
            return Err(ApiError::bad_request(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        let def = self.def.clone();
        let scale = sub == Some("scale");
        let subres = Self::subresource(sub);
        let manager = opts.field_manager.clone().unwrap_or_default();
        let (v, created) = self.store().modify(&self.def, &self.ns, name, subres, &opts, |cur| {
            let base = match (cur, kind) {
                (Some(c), _) if scale => self.scale_of(c),
                (Some(c), _) => c.clone(),
                (None, PatchKind::Apply) if !scale => {
                    let mut applied = patch::apply(None, &p, &manager, force, &def)?;
                    if def.namespaced {
                        meta::meta_mut(&mut applied).insert("namespace".into(), json!(self.ns));
                    }
                    meta::meta_mut(&mut applied).insert("name".into(), json!(name));
                    // Created by apply: the same type check as an apply to an existing object
                    // (kube-apiserver cannot convert such a patch to its typed form either).
                    if let Some(e) = crate::validate::type_error(&def, &applied) {
                        return Err(patch_type_error(&applied, &e));
                    }
                    return Ok(applied);
                }
                (None, _) => return Err(ApiError::not_found(&def.group, &def.plural, name)),
            };
            let patched = match kind {
                PatchKind::Json => patch::json_patch(&base, &p)?,
                PatchKind::Merge => patch::merge_patch(base, &p),
                PatchKind::Strategic => patch::strategic(&base, &p, &def)?,
                PatchKind::Apply => {
                    let applied_name = meta::name(&p);
                    if !applied_name.is_empty() && applied_name != name {
                        return Err(ApiError::bad_request(format!(
                            "the name of the object ({applied_name}) does not match the name on the URL ({name})"
                        )));
                    }
                    patch::apply(Some(&base), &p, &manager, force, &def).map_err(|mut e| {
                        if e.code == 409 {
                            e.details.get_or_insert_with(|| Box::new(json!({})))["name"] = json!(name);
                        }
                        e
                    })?
                }
            };
            if scale {
                let mut n = cur.cloned().unwrap_or(Value::Null);
                let path = def.scale.as_ref().map(|s| s.spec_replicas.clone()).unwrap_or_default();
                set_path(&mut n, &path, patched.pointer("/spec/replicas").cloned().unwrap_or(json!(0)));
                return Ok(n);
            }
            if let Some(e) = crate::validate::type_error(&def, &patched) {
                return Err(patch_type_error(&patched, &e));
            }
            // A patch may carry a resourceVersion precondition.
            let want = meta::meta_str(&patched, "resourceVersion");
            if let Some(c) = cur
                && !want.is_empty() && want != meta::meta_str(c, "resourceVersion") {
                    return Err(ApiError::stale(&def.group, &def.plural, name));
                }
            Ok(patched)
        })?;
        if scale {
            return Ok((200, self.scale_of(&v)));
        }
        Ok((if created { 201 } else { 200 }, v))
    }

    fn delete_options(&self, body: &[u8]) -> Result<DeleteOptions, ApiError> {
        let b: Value = if body.iter().all(|c| c.is_ascii_whitespace()) {
            json!({})
        } else {
            decode_body(body, "application/json")?
        };
        let policy = b
            .get("propagationPolicy")
            .and_then(|v| v.as_str())
            .map(String::from)
            .or_else(|| self.query.get("propagationPolicy").cloned())
            .or_else(|| match b.get("orphanDependents").and_then(|v| v.as_bool()) {
                Some(true) => Some("Orphan".into()),
                _ => None,
            });
        let propagation = match policy.as_deref() {
            None | Some("") => None,
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some("Orphan") => Some(Propagation::Orphan),
            Some(other) => {
                return Err(ApiError::invalid(
                    "",
                    "DeleteOptions",
                    "",
                    vec![crate::error::Cause {
                        reason: "FieldValueNotSupported".into(),
                        field: "propagationPolicy".into(),
                        message: format!(
                            "Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                        ),
                    }],
                ));
            }
        };
        let dry = b
            .get("dryRun")
            .and_then(|v| v.as_array())
            .is_some_and(|a| a.iter().any(|x| x == "All"))
            || self.query.get("dryRun").is_some_and(|v| v == "All");
        Ok(DeleteOptions {
            propagation,
            uid: b
                .pointer("/preconditions/uid")
                .and_then(|v| v.as_str())
                .map(String::from),
            resource_version: b
                .pointer("/preconditions/resourceVersion")
                .and_then(|v| v.as_str())
                .map(String::from),
            dry_run: dry,
            grace_period_seconds: b
                .get("gracePeriodSeconds")
                .and_then(|v| v.as_i64())
                .or_else(|| self.query.get("gracePeriodSeconds").and_then(|v| v.parse().ok())),
        })
    }

    fn delete(&self, name: &str, body: &[u8]) -> Reply {
        let opts = self.delete_options(body)?;
        let v = self.store().delete(&self.def, &self.ns, name, &opts)?;
        Ok((200, v))
    }

    fn delete_collection(&self, body: &[u8]) -> Reply {
        let opts = self.delete_options(body)?;
        let (l, f) = self.selectors()?;
        let (items, rv) = self.store().list(&self.def, self.ns_opt());
        let mut deleted = Vec::new();
        for o in items.into_iter().filter(|o| l.matches(o) && f.matches(o)) {
            match self
                .store()
                .delete(&self.def, meta::namespace(&o), meta::name(&o), &opts)
            {
                Ok(v) => deleted.push(v),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok((
            200,
            json!({
                "kind": format!("{}List", self.def.kind),
                "apiVersion": self.def.api_version(),
                "metadata": {"resourceVersion": rv.to_string()},
                "items": deleted,
            }),
        ))
    }

    async fn watch(self, name: Option<String>) -> Response {
        let (l, mut f) = match self.selectors() {
            Ok(s) => s,
            Err(e) => return error_response(&e),
        };
        if let Some(n) = &name {
            match FieldSelector::parse(&format!("metadata.name={n}"), &self.def) {
                Ok(sel) => f = merge_field(f, sel),
                Err(e) => return error_response(&e),
            }
        }
        let rv_param = self.query.get("resourceVersion").cloned().unwrap_or_default();
        let send_initial = self.query.get("sendInitialEvents").is_some_and(|v| v == "true");
        let bookmarks = self.query.get("allowWatchBookmarks").is_some_and(|v| v == "true");
        let timeout = self
            .query
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .filter(|t| *t > 0)
            .unwrap_or(1800);
        if send_initial && self.query.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan")
        {
            return error_response(&ApiError::invalid(
                "",
                "ListOptions",
                "",
                vec![crate::error::Cause {
                    reason: "FieldValueForbidden".into(),
                    field: "resourceVersionMatch".into(),
                    message:
                        "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
                            .into(),
                }],
            ));
        }
        let gr = self.def.gr();
        let ns = self.ns_opt().map(String::from);
        let store = self.store().clone();
        let (initial, start_rv, replay, rx) = if send_initial || rv_param.is_empty() || rv_param == "0" {
            let (snap, rv, rx) = store.snapshot_and_subscribe(&gr, ns.as_deref());
            (snap, rv, Vec::new(), rx)
        } else {
            let from: u64 = match rv_param.parse() {
                Ok(v) => v,
                Err(_) => {
                    return error_response(&ApiError::bad_request(format!(
                        "invalid resource version: {rv_param}"
                    )));
                }
            };
            match store.subscribe(from) {
                Ok((replay, rx)) => (Vec::new(), from, replay, rx),
                Err(e) => {
                    // Real servers report an expired resourceVersion as an ERROR event in a 200 stream.
                    let line = format!("{}\n", json!({"type": "ERROR", "object": e.to_status()}));
                    return stream_response(futures::stream::iter(vec![Ok::<_, Infallible>(Bytes::from(
                        line,
                    ))]));
                }
            }
        };
        let (tx, out) = mpsc::channel::<Result<Bytes, Infallible>>(1024);
        let table = self.wants_table();
        let shutdown = self.app.shutdown.clone();
        // An injected watch cut shorter than the client's own timeout ends the stream early.
        let faults = self.app.faults.clone();
        let cut = faults.watch_cut();
        let w = Watcher {
            def: self.def.clone(),
            ns,
            labels: l,
            fields: f,
            table,
            include: self.include().to_string(),
            faults: faults.clone(),
            agent: self.agent.clone(),
        };
        tokio::spawn(async move {
            let ended = w
                .run(
                    tx,
                    initial,
                    start_rv,
                    replay,
                    rx,
                    send_initial && bookmarks,
                    bookmarks,
                    Duration::from_secs(timeout),
                    cut,
                    shutdown,
                )
                .await;
            if ended == WatchEnd::Cut {
                faults.count_watch_cut();
            }
        });
        stream_response(tokio_stream::wrappers::ReceiverStream::new(out))
    }
}

fn merge_field(a: FieldSelector, b: FieldSelector) -> FieldSelector {
    a.and(b)
}

fn stream_response<S>(s: S) -> Response
where
    S: futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    let mut r = Response::new(Body::from_stream(s));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    r
}

/// Why a watch stream ended.
#[derive(Debug, PartialEq, Eq)]
enum WatchEnd {
    /// Its timeout expired.
    Deadline,
    /// The injected watch cut ended it.
    Cut,
    /// The client went away, the server is stopping, or the watch failed.
    Other,
}

struct Watcher {
    def: Arc<ResourceDef>,
    ns: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    table: bool,
    include: String,
    /// For the stale replays ([`crate::faults`]).
    faults: Faults,
    /// The client's User-Agent product (stale replays may be aimed at one client).
    agent: String,
}

impl Watcher {
    fn matches(&self, o: &Value) -> bool {
        self.labels.matches(o) && self.fields.matches(o)
    }

    /// Selector match on a stored object, in the shape this watch serves (only the events.k8s.io
    /// view differs from storage, so other kinds are matched without a copy).
    fn matches_stored(&self, o: &Value) -> bool {
        if self.def.is_events_v1() {
            self.matches(&present(&self.def, o))
        } else {
            self.matches(o)
        }
    }

    fn line(&self, type_: &str, obj: &Value) -> Bytes {
        let o = crate::store::present_ref(&self.def, obj);
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(b"{\"type\":");
        let _ = serde_json::to_writer(&mut out, type_);
        out.extend_from_slice(b",\"object\":");
        let _ = if self.table && type_ != "BOOKMARK" {
            let t = table::to_table(
                &self.def,
                &[o.into_owned()],
                json!({"resourceVersion": meta::meta_str(obj, "resourceVersion")}),
                &self.include,
            );
            serde_json::to_writer(&mut out, &t)
        } else {
            serde_json::to_writer(&mut out, o.as_ref())
        };
        out.extend_from_slice(b"}\n");
        Bytes::from(out)
    }

    fn bookmark(&self, rv: u64, end_of_initial: bool) -> Bytes {
        let mut md = json!({"resourceVersion": rv.to_string()});
        if end_of_initial {
            md["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let o = json!({"kind": self.def.kind, "apiVersion": self.def.api_version(), "metadata": md});
        let mut s = json!({"type": "BOOKMARK", "object": o}).to_string();
        s.push('\n');
        Bytes::from(s)
    }

    /// Translate a store event into the line this watcher should see, if any.
    fn translate(&self, ev: &WatchEvent) -> Option<Bytes> {
        if ev.key.gr != self.def.gr() {
            return None;
        }
        if let Some(ns) = &self.ns
            && &ev.key.namespace != ns
        {
            return None;
        }
        let now = self.matches_stored(&ev.object);
        let before = ev.old.as_deref().is_some_and(|o| self.matches_stored(o));
        let t = match ev.type_ {
            EventType::Added if now => "ADDED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => {
                // Stopped matching: kube-apiserver's watch cache sends the object as it was
                // (the state that matched) with the change's resourceVersion (checked on 1.28).
                let mut was = ev.old.as_deref().cloned().unwrap_or_default();
                was["metadata"]["resourceVersion"] = Value::String(ev.rv.to_string());
                return Some(self.line("DELETED", &was));
            }
            EventType::Deleted if before || now => "DELETED",
            _ => return None,
        };
        Some(self.line(t, &ev.object))
    }

    /// The previous state of a MODIFIED object this watch served (both states match its
    /// selectors), when a stale replay is drawn for it.
    fn stale(&self, ev: &WatchEvent) -> Option<Bytes> {
        let old = ev.old.as_deref()?;
        let served =
            ev.type_ == EventType::Modified && self.matches_stored(&ev.object) && self.matches_stored(old);
        (served && self.faults.stale_replay(&self.agent)).then(|| self.line("MODIFIED", old))
    }

    #[allow(clippy::too_many_arguments)]
    async fn run(
        self,
        tx: mpsc::Sender<Result<Bytes, Infallible>>,
        initial: Vec<Arc<Value>>,
        start_rv: u64,
        replay: Vec<Arc<WatchEvent>>,
        mut rx: tokio::sync::broadcast::Receiver<Arc<WatchEvent>>,
        end_bookmark: bool,
        bookmarks: bool,
        timeout: Duration,
        mut cut: tokio::sync::watch::Receiver<Option<Duration>>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> WatchEnd {
        for o in initial.iter().filter(|o| self.matches_stored(o)) {
            if tx.send(Ok(self.line("ADDED", o))).await.is_err() {
                return WatchEnd::Other;
            }
        }
        if end_bookmark && tx.send(Ok(self.bookmark(start_rv, true))).await.is_err() {
            return WatchEnd::Other;
        }
        let mut last_rv = start_rv;
        for ev in replay {
            last_rv = ev.rv;
            if let Some(line) = self.translate(&ev)
                && tx.send(Ok(line)).await.is_err()
            {
                return WatchEnd::Other;
            }
        }
        let started = tokio::time::Instant::now();
        // The end of the stream: the client's timeout, or an earlier injected cut.
        let end_of = |c: Option<Duration>| match c {
            Some(c) if c < timeout => (started + c, WatchEnd::Cut),
            _ => (started + timeout, WatchEnd::Deadline),
        };
        let (at, mut why) = end_of(*cut.borrow_and_update());
        let deadline = tokio::time::sleep_until(at);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(Duration::from_secs(2));
        tick.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => return why,
                Ok(()) = cut.changed() => {
                    let (at, w) = end_of(*cut.borrow_and_update());
                    deadline.as_mut().reset(at);
                    why = w;
                }
                _ = shutdown.changed() => return WatchEnd::Other,
                _ = tick.tick() => {
                    if bookmarks && tx.send(Ok(self.bookmark(last_rv, false))).await.is_err() {
                        return WatchEnd::Other;
                    }
                }
                ev = rx.recv() => match ev {
                    Ok(ev) => {
                        if ev.rv <= last_rv {
                            continue;
                        }
                        last_rv = ev.rv;
                        let Some(line) = self.translate(&ev) else { continue };
                        if tx.send(Ok(line)).await.is_err() {
                            return WatchEnd::Other;
                        }
                        if let Some(line) = self.stale(&ev)
                            && tx.send(Ok(line)).await.is_err() {
                                return WatchEnd::Other;
                            }
                    }
                    Err(RecvError::Lagged(_)) => {
                        let e = ApiError::gone(format!("too old resource version: {last_rv}"));
                        let line = format!("{}\n", json!({"type": "ERROR", "object": e.to_status()}));
                        let _ = tx.send(Ok(Bytes::from(line))).await;
                        return WatchEnd::Other;
                    }
                    Err(RecvError::Closed) => return WatchEnd::Other,
                },
            }
        }
    }
}

fn encode_continue(ns: &str, name: &str) -> String {
    let raw = format!("{ns}\u{1}{name}");
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> Result<(String, String), ApiError> {
    let bad = || ApiError::bad_request("continue key is not valid: incorrect encoded start resourceVersion");
    if !token.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes: Result<Vec<u8>, _> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&token[i..i + 2], 16))
        .collect();
    let s = String::from_utf8(bytes.map_err(|_| bad())?).map_err(|_| bad())?;
    let (ns, name) = s.split_once('\u{1}').ok_or_else(bad)?;
    Ok((ns.to_string(), name.to_string()))
}

fn set_path(obj: &mut Value, path: &str, value: Value) {
    let segs: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
    let mut cur = obj;
    for (i, s) in segs.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(m) = cur.as_object_mut() else { return };
        if i == segs.len() - 1 {
            m.insert(s.to_string(), value);
            return;
        }
        cur = m.entry(s.to_string()).or_insert(json!({}));
    }
}

/// A patch whose result does not decode into the built-in kind's Go types: 422 naming the field.
fn patch_type_error(patched: &Value, e: &crate::validate::TypeError) -> ApiError {
    ApiError::invalid(
        "",
        "",
        "",
        vec![crate::error::Cause::invalid(
            "patch",
            &json!(patched.to_string()),
            &e.message(),
        )],
    )
}

/// Sets a bound pod's `PodScheduled` condition to True, as kube-apiserver's binding does: a new
/// condition (or one whose status changes) gets the current time as its transition time.
fn mark_scheduled(pod: &mut Value) {
    let Some(obj) = pod.as_object_mut() else { return };
    let status = obj.entry("status").or_insert_with(|| json!({}));
    let Some(status) = status.as_object_mut() else {
        return;
    };
    let conds = status.entry("conditions").or_insert_with(|| json!([]));
    let Some(conds) = conds.as_array_mut() else { return };
    let scheduled = json!({
        "type": "PodScheduled", "status": "True", "lastProbeTime": null,
        "lastTransitionTime": crate::meta::now_rfc3339(),
    });
    match conds.iter_mut().find(|c| c["type"] == "PodScheduled") {
        Some(c) if c["status"] == "True" => {}
        // An Unschedulable condition is replaced whole (its reason and message go).
        Some(c) => *c = scheduled,
        None => conds.push(scheduled),
    }
}
