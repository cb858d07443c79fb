//! `diagnostics collect`: everything useful for a bug report about one Instance, written into a
//! directory tree in KUDO's layout:
//!
//! ```text
//! diag/version.yaml, diag/settings.yaml
//! diag/operator_<op>/<op>.yaml
//! diag/operator_<op>/operatorversion_<ov>/<ov>.yaml
//! diag/operator_<op>/instance_<inst>/<inst>.yaml, servicelist.yaml, statefulsetlist.yaml, …
//! diag/operator_<op>/instance_<inst>/pod_<pod>/<pod>.yaml, <container>.log.gz
//! diag/kudo/…  (the KUDO manager namespace)
//! ```
//!
//! Failing to read the Instance, its OperatorVersion or its Operator is fatal (written to
//! `diag/<kind>.err` and returned); every other failure is written next to where its output would
//! have been as `<what>.err`, collection goes on, and the failures are listed in the outcome.
//!
//! **Sensitive values are redacted** (kudo-rs; KUDO had no sensitive parameters): the values of
//! an Instance's `parameterSources` (read from their Secrets) and the plain values of parameters
//! marked `sensitive: true` are replaced by `(redacted)` in every file written, logs included —
//! a package may render a value into a pod's environment and a program may print it. Only the
//! current values are known: a value rotated away may remain in the pod template of an earlier
//! ReplicaSet revision. Values shorter than [`MIN_REDACTED_LEN`](crate::sensitive::MIN_REDACTED_LEN)
//! characters are left alone (replacing every `1` or `ab` would make the bundle useless); Secrets
//! are never collected.

use std::io::Write;
use std::path::{Path, PathBuf};

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, LogParams};
use kudo_kube::known_resource;
use serde_json::{Value, json};

use crate::cluster::{Cluster, KudoKind};
use crate::sensitive::Redactor;
use crate::{Error, Result};

/// Namespace the KUDO manager runs in.
const KUDO_NAMESPACE: &str = "kudo-system";
/// Label KUDO puts on everything it creates for an Instance.
const INSTANCE_LABEL: &str = "kudo.dev/instance";

/// How the CLI was asked to connect (written to `settings.yaml`).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `$KUDO_HOME`.
    pub home: String,
    /// `--kubeconfig` (empty: none given).
    pub kubeconfig: String,
    /// `--request-timeout`.
    pub request_timeout: u64,
}

/// A `diagnostics collect`.
pub struct CollectRequest<'a> {
    /// The Instance.
    pub instance: &'a str,
    /// The directory to write (created; the caller checks that it did not exist).
    pub output_directory: &'a Path,
    /// Only logs newer than this many seconds.
    pub log_since: Option<i64>,
    /// How the CLI was asked to connect.
    pub settings: Settings,
}

/// What a collection could not collect (each also written as an `.err` file).
#[derive(Debug, Default)]
pub struct Collected {
    /// `<file>: <why>`, in the order they happened.
    pub errors: Vec<String>,
}

/// Collects the Instance (and its child Instances) and the KUDO manager's namespace into
/// `request.output_directory` (see the module docs).
pub async fn collect(cluster: &Cluster, request: &CollectRequest<'_>) -> Result<Collected> {
    let root = request.output_directory;
    std::fs::create_dir_all(root).map_err(|source| Error::CreateDir {
        path: root.display().to_string(),
        source,
    })?;
    let mut w = Writer {
        root: root.to_path_buf(),
        errors: Vec::new(),
        redactor: Redactor::default(),
    };
    let client = &cluster.client;
    let ns = cluster.namespace.as_str();
    let s = &request.settings;
    let settings = json!({
        "home": s.home,
        "kubeConfig": s.kubeconfig,
        "namespace": ns,
        "requestTimeout": s.request_timeout,
    });
    w.yaml("settings.yaml", &settings)?;
    match client.apiserver_version().await {
        Ok(v) => w.yaml(
            "version.yaml",
            &json!({
                "kudoctlVersion": env!("CARGO_PKG_VERSION"),
                "kubernetesVersion": v.git_version,
            }),
        )?,
        Err(e) => w.error("version.err", &format!("server version: {e}"))?,
    }
    let mut seen = Vec::new();
    collect_instance(&mut w, client, ns, request.instance, request.log_since, &mut seen).await?;
    collect_manager(&mut w, client, request.log_since).await?;
    Ok(Collected { errors: w.errors })
}

/// The KUDO manager's namespace, or why it cannot be collected.
async fn collect_manager(w: &mut Writer, client: &Client, log_since: Option<i64>) -> Result<()> {
    let kudo_dir = PathBuf::from("kudo");
    let kudo_ns: Api<DynamicObject> = Api::all_with(client.clone(), &known_resource("", "Namespace"));
    match kudo_ns.get_opt(KUDO_NAMESPACE).await {
        Ok(Some(_)) => {
            let scope = Scope {
                ns: KUDO_NAMESPACE,
                selector: None,
                cluster_scoped: false,
            };
            collect_workloads(w, client, &scope, &kudo_dir, log_since).await
        }
        Ok(None) => w.error(
            kudo_dir.join("namespace.err"),
            &format!("namespace {KUDO_NAMESPACE} not found: is KUDO installed? (`kubectl kudo init`)"),
        ),
        Err(e) => w.error(
            kudo_dir.join("namespace.err"),
            &format!("namespace {KUDO_NAMESPACE}: {e}"),
        ),
    }
}

/// An error and its causes, as the CLI prints them (`outer: inner: …`).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Writes files under the output root, with sensitive values redacted, and remembers what failed.
struct Writer {
    root: PathBuf,
    errors: Vec<String>,
    /// The sensitive values seen so far.
    redactor: Redactor,
}

impl Writer {
    fn write(&mut self, rel: &Path, data: &[u8]) -> Result<()> {
        let path = self.root.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| Error::CreateDir {
                path: dir.display().to_string(),
                source,
            })?;
        }
        std::fs::write(&path, data).map_err(|source| Error::WriteFile {
            path: path.display().to_string(),
            source,
        })
    }

    /// Writes text, sensitive values redacted.
    fn text(&mut self, rel: &Path, text: &str) -> Result<()> {
        let text = self.redact(text);
        self.write(rel, text.as_bytes())
    }

    fn yaml(&mut self, rel: impl AsRef<Path>, value: &Value) -> Result<()> {
        let text = serde_saphyr::to_string(value).map_err(Error::ToYaml)?;
        self.text(rel.as_ref(), &text)
    }

    /// Adds sensitive values to redact from now on.
    fn add_secrets(&mut self, values: impl IntoIterator<Item = String>) {
        self.redactor.add(values);
    }

    fn redact(&self, text: &str) -> String {
        self.redactor.redact(text)
    }

    /// Records a collector failure as `<rel>` (an `.err` file) and in the outcome.
    fn error(&mut self, rel: impl AsRef<Path>, message: &str) -> Result<()> {
        let rel = rel.as_ref();
        let msg = self.redact(message);
        self.errors.push(format!("{}: {msg}", rel.display()));
        self.write(rel, format!("{msg}\n").as_bytes())
    }
}

/// The namespaced kinds dumped as `<kind>list.yaml` (pods get their own directories).
fn listed_kinds() -> Vec<ApiResource> {
    vec![
        known_resource("", "Service"),
        known_resource("apps", "Deployment"),
        known_resource("apps", "StatefulSet"),
        known_resource("apps", "ReplicaSet"),
        known_resource("", "ServiceAccount"),
        known_resource("rbac.authorization.k8s.io", "Role"),
        known_resource("rbac.authorization.k8s.io", "RoleBinding"),
    ]
}

fn cluster_kinds() -> Vec<ApiResource> {
    vec![
        known_resource("rbac.authorization.k8s.io", "ClusterRole"),
        known_resource("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ]
}

/// A dynamic object as a full manifest (list items come back without apiVersion/kind).
fn manifest(mut obj: DynamicObject, r: &ApiResource) -> Result<Value> {
    obj.types = Some(kube::api::TypeMeta {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
    });
    Ok(serde_json::to_value(obj)?)
}

fn list_value(items: Vec<Value>, r: &ApiResource) -> Value {
    json!({"apiVersion": r.api_version, "kind": format!("{}List", r.kind), "items": items})
}

async fn list(
    client: &Client,
    ns: Option<&str>,
    r: &ApiResource,
    selector: Option<&str>,
) -> std::result::Result<Vec<DynamicObject>, String> {
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, r),
        None => Api::all_with(client.clone(), r),
    };
    let mut lp = ListParams::default();
    if let Some(s) = selector {
        lp = lp.labels(s);
    }
    Ok(api
        .list(&lp)
        .await
        .map_err(|e| format!("listing {}: {e}", r.plural))?
        .items)
}

async fn get(client: &Client, ns: &str, r: &ApiResource, name: &str) -> Result<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, r);
    let failed = |reason: String| Error::Collect(reason);
    match api.get_opt(name).await {
        Ok(Some(o)) => Ok(o),
        Ok(None) => Err(failed(format!("{} {ns}/{name} not found", r.kind))),
        Err(e) => Err(failed(format!("getting {} {ns}/{name}: {e}", r.kind))),
    }
}

fn name_of(obj: &DynamicObject) -> String {
    obj.metadata.name.clone().unwrap_or_default()
}

/// Where workloads are collected from.
struct Scope<'a> {
    ns: &'a str,
    /// The label selector of the objects (none: all of the namespace).
    selector: Option<&'a str>,
    /// Whether the cluster-scoped RBAC kinds are collected too.
    cluster_scoped: bool,
}

/// Writes every non-empty `<kind>list.yaml` and the pods (with logs) of `scope` under `dir`.
async fn collect_workloads(
    w: &mut Writer,
    client: &Client,
    scope: &Scope<'_>,
    dir: &Path,
    log_since: Option<i64>,
) -> Result<()> {
    let mut kinds: Vec<(ApiResource, bool)> = listed_kinds().into_iter().map(|k| (k, true)).collect();
    if scope.cluster_scoped {
        kinds.extend(cluster_kinds().into_iter().map(|k| (k, false)));
    }
    for (r, namespaced) in kinds {
        let kind_lower = r.kind.to_lowercase();
        match list(client, namespaced.then_some(scope.ns), &r, scope.selector).await {
            Ok(items) if items.is_empty() => {}
            Ok(items) => {
                let values = items
                    .into_iter()
                    .map(|o| manifest(o, &r))
                    .collect::<Result<Vec<_>>>()?;
                w.yaml(
                    dir.join(format!("{kind_lower}list.yaml")),
                    &list_value(values, &r),
                )?;
            }
            Err(e) => w.error(dir.join(format!("{kind_lower}.err")), &e)?,
        }
    }
    collect_pods(w, client, scope, dir, log_since).await
}

/// Each pod of `scope` as `pod_<name>/<name>.yaml`, with its containers' logs gzipped.
async fn collect_pods(
    w: &mut Writer,
    client: &Client,
    scope: &Scope<'_>,
    dir: &Path,
    log_since: Option<i64>,
) -> Result<()> {
    let ns = scope.ns;
    let pod_res = known_resource("", "Pod");
    let pods = match list(client, Some(ns), &pod_res, scope.selector).await {
        Ok(p) => p,
        Err(e) => return w.error(dir.join("pod.err"), &e),
    };
    let pod_api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    for pod in pods {
        let name = name_of(&pod);
        let pod_dir = dir.join(format!("pod_{name}"));
        let containers: Vec<String> = pod
            .data
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        w.yaml(pod_dir.join(format!("{name}.yaml")), &manifest(pod, &pod_res)?)?;
        for c in containers {
            let lp = LogParams {
                container: Some(c.clone()),
                since_seconds: log_since,
                ..Default::default()
            };
            let log = pod_dir.join(format!("{c}.log.gz"));
            match pod_api.logs(&name, &lp).await {
                Ok(text) => {
                    let text = w.redact(&text);
                    let data = gzip(text.as_bytes()).map_err(|source| Error::WriteFile {
                        path: w.root.join(&log).display().to_string(),
                        source,
                    })?;
                    w.write(&log, &data)?
                }
                Err(e) => w.error(
                    pod_dir.join(format!("{c}.log.err")),
                    &format!("logs of {ns}/{name} container {c}: {e}"),
                )?,
            }
        }
    }
    Ok(())
}

fn gzip(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data)?;
    enc.finish()
}

/// An Instance and what it runs.
struct InstanceObjects {
    instance: DynamicObject,
    ov_ref: kudo_api::ObjectReference,
    ov: DynamicObject,
    op_name: String,
    op: DynamicObject,
}

/// The Instance, its OperatorVersion and its Operator; a failure is written as
/// `<kind>.err` and returned.
async fn read_instance(
    w: &mut Writer,
    client: &Client,
    ns: &str,
    instance_name: &str,
) -> Result<InstanceObjects> {
    let fatal = |w: &mut Writer, file: &str, e: Error| -> Result<Error> {
        w.error(file, &e.to_string())?;
        Ok(e)
    };
    let instance = match get(client, ns, &KudoKind::Instance.resource(), instance_name).await {
        Ok(i) => i,
        Err(e) => return Err(fatal(w, "instance.err", e)?),
    };
    let ov_ref: kudo_api::ObjectReference = instance
        .data
        .pointer("/spec/operatorVersion")
        .and_then(|r| serde_json::from_value(r.clone()).ok())
        .unwrap_or_default();
    let ov_res = KudoKind::OperatorVersion.resource();
    let ov = match get(client, ov_ref.namespace_or(ns), &ov_res, &ov_ref.name).await {
        Ok(o) => o,
        Err(e) => return Err(fatal(w, "operatorversion.err", e)?),
    };
    let op_name = ov
        .data
        .pointer("/spec/operator/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let op = match get(client, ns, &KudoKind::Operator.resource(), &op_name).await {
        Ok(o) => o,
        Err(e) => return Err(fatal(w, "operator.err", e)?),
    };
    Ok(InstanceObjects {
        instance,
        ov_ref,
        ov,
        op_name,
        op,
    })
}

/// Collects one Instance and, recursively, the Instances it owns (`KudoOperator` dependencies).
/// `seen` guards against ownership cycles.
async fn collect_instance(
    w: &mut Writer,
    client: &Client,
    ns: &str,
    instance_name: &str,
    log_since: Option<i64>,
    seen: &mut Vec<String>,
) -> Result<()> {
    if seen.iter().any(|s| s == instance_name) {
        return Ok(());
    }
    seen.push(instance_name.to_string());
    let InstanceObjects {
        instance,
        ov_ref,
        ov,
        op_name,
        op,
    } = read_instance(w, client, ns, instance_name).await?;
    w.add_secrets(sensitive_values(client, ns, &instance, &ov).await);
    let op_dir = PathBuf::from(format!("operator_{op_name}"));
    let inst_dir = op_dir.join(format!("instance_{instance_name}"));
    let inst_uid = instance.metadata.uid.clone();
    let inst_res = KudoKind::Instance.resource();
    w.yaml(
        op_dir.join(format!("{op_name}.yaml")),
        &manifest(op, &KudoKind::Operator.resource())?,
    )?;
    w.yaml(
        op_dir
            .join(format!("operatorversion_{}", ov_ref.name))
            .join(format!("{}.yaml", ov_ref.name)),
        &manifest(ov, &KudoKind::OperatorVersion.resource())?,
    )?;
    w.yaml(
        inst_dir.join(format!("{instance_name}.yaml")),
        &manifest(instance, &inst_res)?,
    )?;
    let selector = format!("{INSTANCE_LABEL}={instance_name}");
    let scope = Scope {
        ns,
        selector: Some(&selector),
        cluster_scoped: true,
    };
    collect_workloads(w, client, &scope, &inst_dir, log_since).await?;
    // Child instances carry an owner reference to their parent.
    let children = match list(client, Some(ns), &inst_res, None).await {
        Ok(all) => all
            .into_iter()
            .filter(|i| {
                i.metadata.owner_references.iter().flatten().any(|o| {
                    o.kind == "Instance"
                        && o.name == instance_name
                        && inst_uid.as_ref().is_none_or(|u| &o.uid == u)
                })
            })
            .map(|i| name_of(&i))
            .collect::<Vec<_>>(),
        Err(e) => {
            w.error(inst_dir.join("children.err"), &e)?;
            Vec::new()
        }
    };
    for child in children {
        if let Err(e) = Box::pin(collect_instance(w, client, ns, &child, log_since, seen)).await {
            // The child's own .err file is already written; keep collecting the rest.
            w.errors.push(format!("child instance {child}: {}", chain(&e)));
        }
    }
    Ok(())
}

/// The values of an Instance's sensitive parameters: those given through `parameterSources`
/// (read from their Secrets; one that cannot be read has nothing to leak) and the plain values of
/// parameters its OperatorVersion marks `sensitive: true`.
async fn sensitive_values(
    client: &Client,
    ns: &str,
    instance: &DynamicObject,
    ov: &DynamicObject,
) -> Vec<String> {
    let mut out = Vec::new();
    let sensitive: Vec<&str> = ov
        .data
        .pointer("/spec/parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| p["sensitive"] == true)
        .filter_map(|p| p["name"].as_str())
        .collect();
    if let Some(params) = instance
        .data
        .pointer("/spec/parameters")
        .and_then(Value::as_object)
    {
        out.extend(
            params
                .iter()
                .filter(|(k, _)| sensitive.contains(&k.as_str()))
                .filter_map(|(_, v)| v.as_str().map(String::from)),
        );
    }
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    let sources = instance
        .data
        .pointer("/spec/parameterSources")
        .and_then(Value::as_object);
    for src in sources.into_iter().flat_map(|m| m.values()) {
        let (Some(name), Some(key)) = (
            src.pointer("/secretKeyRef/name").and_then(Value::as_str),
            src.pointer("/secretKeyRef/key").and_then(Value::as_str),
        ) else {
            continue;
        };
        if let Ok(Some(secret)) = secrets.get_opt(name).await
            && let Some(v) = secret.data.as_ref().and_then(|d| d.get(key))
        {
            out.push(String::from_utf8_lossy(&v.0).into_owned());
        }
    }
    out
}
