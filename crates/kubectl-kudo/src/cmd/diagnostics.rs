//! `kubectl kudo diagnostics collect`: dump everything useful for a bug report about one Instance
//! into a directory tree, in KUDO's layout:
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
//! have been as `<what>.err`, collection goes on, and the failures are listed at the end.
//!
//! **Sensitive values are redacted** (kudo-rs; KUDO had no sensitive parameters): the values of
//! an Instance's `parameterSources` (read from their Secrets) and the plain values of parameters
//! marked `sensitive: true` are replaced by `(redacted)` in every file written, logs included —
//! a package may render a value into a pod's environment and a program may print it. Only the
//! current values are known: a value rotated away may remain in the pod template of an earlier
//! ReplicaSet revision. Values shorter than [`MIN_REDACTED_LEN`] characters are left alone
//! (replacing every `1` or `ab` would make the bundle useless); Secrets are never collected.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, LogParams};
use kudo_client::cluster::KudoKind;
use kudo_client::sensitive::Redactor;
use kudo_kube::known_resource;
use serde_json::{Value, json};

use super::cluster::{ClusterOpts, connect};

/// Namespace the KUDO manager runs in.
const KUDO_NAMESPACE: &str = "kudo-system";
/// Label KUDO puts on everything it creates for an Instance.
const INSTANCE_LABEL: &str = "kudo.dev/instance";

#[derive(Args, Debug)]
pub struct DiagnosticsArgs {
    #[command(subcommand)]
    pub command: DiagnosticsCommand,
}

#[derive(Subcommand, Debug)]
pub enum DiagnosticsCommand {
    /// Collect the objects and logs of an Instance (and its child Instances) and of the KUDO manager.
    #[command(
        after_help = "Examples:\n  kubectl kudo diagnostics collect --instance galera-instance\n  kubectl kudo diagnostics collect --instance db -O /tmp/db-diag --log-since 1h"
    )]
    Collect(CollectArgs),
}

#[derive(Args, Debug)]
pub struct CollectArgs {
    /// The Instance to collect diagnostics for.
    #[arg(long)]
    pub instance: String,
    /// Directory to write to; must not exist yet.
    #[arg(short = 'O', long = "output-directory", default_value = "diag")]
    pub output_directory: PathBuf,
    /// Only logs newer than this duration (e.g. 30s, 5m, 1h30m).
    #[arg(long, value_parser = parse_duration_seconds)]
    pub log_since: Option<i64>,
}

pub async fn run(opts: &ClusterOpts, args: DiagnosticsArgs, io: &mut crate::Io<'_>) -> Result<ExitCode> {
    match args.command {
        DiagnosticsCommand::Collect(a) => collect(opts, a, io).await,
    }
}

/// `--log-since`: a Go duration ([`kudo_api::duration::parse`]: `1h30m`, `45s`, `2m`) in whole
/// seconds, rounded up and at least 1 (the smallest `sinceSeconds` the API server takes);
/// surrounding whitespace is ignored and a negative duration is refused.
fn parse_duration_seconds(s: &str) -> Result<i64, String> {
    let nanos = kudo_api::duration::parse(s.trim()).map_err(|e| e.to_string())?;
    let nanos = u64::try_from(nanos).map_err(|_| format!("invalid duration {s:?}: negative"))?;
    Ok(i64::try_from(nanos.div_ceil(1_000_000_000))
        .unwrap_or(i64::MAX)
        .max(1))
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
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&path, data).with_context(|| format!("cannot write {}", path.display()))
    }

    /// Writes text, sensitive values redacted.
    fn text(&mut self, rel: &Path, text: &str) -> Result<()> {
        let text = self.redact(text);
        self.write(rel, text.as_bytes())
    }

    fn yaml(&mut self, rel: impl AsRef<Path>, value: &Value) -> Result<()> {
        let text = serde_saphyr::to_string(value).context("cannot serialise to YAML")?;
        self.text(rel.as_ref(), &text)
    }

    /// Adds sensitive values to redact from now on.
    fn add_secrets(&mut self, values: impl IntoIterator<Item = String>) {
        self.redactor.add(values);
    }

    fn redact(&self, text: &str) -> String {
        self.redactor.redact(text)
    }

    /// Records a collector failure as `<rel>` (an `.err` file) and in the final report.
    fn error(&mut self, rel: impl AsRef<Path>, err: &anyhow::Error) -> Result<()> {
        let rel = rel.as_ref();
        let msg = self.redact(&format!("{err:#}"));
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
) -> Result<Vec<DynamicObject>> {
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
        .map_err(|e| anyhow!("listing {}: {e}", r.plural))?
        .items)
}

async fn get(client: &Client, ns: &str, r: &ApiResource, name: &str) -> Result<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, r);
    match api.get_opt(name).await {
        Ok(Some(o)) => Ok(o),
        Ok(None) => bail!("{} {ns}/{name} not found", r.kind),
        Err(e) => bail!("getting {} {ns}/{name}: {e}", r.kind),
    }
}

fn name_of(obj: &DynamicObject) -> String {
    obj.metadata.name.clone().unwrap_or_default()
}

/// Writes every non-empty `<kind>list.yaml` and the pods (with logs) selected by `selector` in
/// `ns` under `dir`; cluster-scoped RBAC kinds too when `cluster_scoped`.
async fn collect_workloads(
    w: &mut Writer,
    client: &Client,
    ns: &str,
    selector: Option<&str>,
    dir: &Path,
    cluster_scoped: bool,
    log_since: Option<i64>,
) -> Result<()> {
    let mut kinds: Vec<(ApiResource, bool)> = listed_kinds().into_iter().map(|k| (k, true)).collect();
    if cluster_scoped {
        kinds.extend(cluster_kinds().into_iter().map(|k| (k, false)));
    }
    for (r, namespaced) in kinds {
        let kind_lower = r.kind.to_lowercase();
        match list(client, namespaced.then_some(ns), &r, selector).await {
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
    let pod_res = known_resource("", "Pod");
    let pods = match list(client, Some(ns), &pod_res, selector).await {
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
            match pod_api.logs(&name, &lp).await {
                Ok(text) => {
                    let text = w.redact(&text);
                    w.write(&pod_dir.join(format!("{c}.log.gz")), &gzip(text.as_bytes())?)?
                }
                Err(e) => w.error(
                    pod_dir.join(format!("{c}.log.err")),
                    &anyhow!("logs of {ns}/{name} container {c}: {e}"),
                )?,
            }
        }
    }
    Ok(())
}

fn gzip(data: &[u8]) -> Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data)?;
    Ok(enc.finish()?)
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
    let inst_res = KudoKind::Instance.resource();
    let ov_res = KudoKind::OperatorVersion.resource();
    let op_res = KudoKind::Operator.resource();

    let instance = match get(client, ns, &inst_res, instance_name).await {
        Ok(i) => i,
        Err(e) => {
            w.error("instance.err", &e)?;
            return Err(e);
        }
    };
    let ov_ref: kudo_api::ObjectReference = instance
        .data
        .pointer("/spec/operatorVersion")
        .and_then(|r| serde_json::from_value(r.clone()).ok())
        .unwrap_or_default();
    let ov = match get(client, ov_ref.namespace_or(ns), &ov_res, &ov_ref.name).await {
        Ok(o) => o,
        Err(e) => {
            w.error("operatorversion.err", &e)?;
            return Err(e);
        }
    };
    let op_name = ov
        .data
        .pointer("/spec/operator/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let op = match get(client, ns, &op_res, &op_name).await {
        Ok(o) => o,
        Err(e) => {
            w.error("operator.err", &e)?;
            return Err(e);
        }
    };
    w.add_secrets(sensitive_values(client, ns, &instance, &ov).await);
    let op_dir = PathBuf::from(format!("operator_{op_name}"));
    let inst_dir = op_dir.join(format!("instance_{instance_name}"));
    let inst_uid = instance.metadata.uid.clone();
    w.yaml(op_dir.join(format!("{op_name}.yaml")), &manifest(op, &op_res)?)?;
    w.yaml(
        op_dir
            .join(format!("operatorversion_{}", ov_ref.name))
            .join(format!("{}.yaml", ov_ref.name)),
        &manifest(ov, &ov_res)?,
    )?;
    w.yaml(
        inst_dir.join(format!("{instance_name}.yaml")),
        &manifest(instance, &inst_res)?,
    )?;

    let selector = format!("{INSTANCE_LABEL}={instance_name}");
    collect_workloads(w, client, ns, Some(&selector), &inst_dir, true, log_since).await?;

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
            w.errors.push(format!("child instance {child}: {e:#}"));
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

async fn collect(opts: &ClusterOpts, args: CollectArgs, io: &mut crate::Io<'_>) -> Result<ExitCode> {
    let root = args.output_directory.clone();
    if root.exists() {
        bail!(
            "output directory {} already exists: choose another with -O",
            root.display()
        );
    }
    let cluster = connect(opts).await?;
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let mut w = Writer {
        root: root.clone(),
        errors: Vec::new(),
        redactor: Redactor::default(),
    };
    let client = cluster.client.clone();
    let ns = cluster.namespace.clone();

    let settings = json!({
        "home": opts.home_dir().display().to_string(),
        "kubeConfig": opts.kubeconfig.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        "namespace": ns,
        "requestTimeout": opts.request_timeout,
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
        Err(e) => w.error("version.err", &anyhow!("server version: {e}"))?,
    }

    let mut seen = Vec::new();
    collect_instance(&mut w, &client, &ns, &args.instance, args.log_since, &mut seen).await?;

    let kudo_dir = PathBuf::from("kudo");
    let ns_res = known_resource("", "Namespace");
    let kudo_ns: Api<DynamicObject> = Api::all_with(client.clone(), &ns_res);
    match kudo_ns.get_opt(KUDO_NAMESPACE).await {
        Ok(Some(_)) => {
            collect_workloads(
                &mut w,
                &client,
                KUDO_NAMESPACE,
                None,
                &kudo_dir,
                false,
                args.log_since,
            )
            .await?
        }
        Ok(None) => w.error(
            kudo_dir.join("namespace.err"),
            &anyhow!("namespace {KUDO_NAMESPACE} not found: is KUDO installed? (`kubectl kudo init`)"),
        )?,
        Err(e) => w.error(
            kudo_dir.join("namespace.err"),
            &anyhow!("namespace {KUDO_NAMESPACE}: {e}"),
        )?,
    }

    writeln!(io.out, "Diagnostics written to {}", root.display())?;
    if !w.errors.is_empty() {
        writeln!(io.err, "Errors during collection (details in the .err files):")?;
        for e in &w.errors {
            writeln!(io.err, "  {e}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_duration_seconds;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_seconds("1h30m"), Ok(5400));
        assert_eq!(parse_duration_seconds("45s"), Ok(45));
        assert_eq!(parse_duration_seconds("1.5m"), Ok(90));
        assert_eq!(parse_duration_seconds("10ms"), Ok(1));
        assert!(parse_duration_seconds("10").is_err());
        assert!(parse_duration_seconds("1d").is_err());
        assert!(parse_duration_seconds("").is_err());
        // The caller's rules over Go's parser: rounded up, at least 1, never negative.
        assert_eq!(parse_duration_seconds("0"), Ok(1));
        assert_eq!(parse_duration_seconds(" 2s "), Ok(2));
        assert_eq!(parse_duration_seconds("1500us"), Ok(1));
        assert!(parse_duration_seconds("-5s").is_err());
        assert_eq!(
            parse_duration_seconds("1x").unwrap_err(),
            r#"time: unknown unit "x" in duration "1x""#
        );
    }
}
