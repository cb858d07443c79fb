//! `install`: the Operator and OperatorVersion of a package (and of its dependencies), its typed API,
//! and a new Instance of it; or, `--in-cluster`, a new Instance of an OperatorVersion already
//! installed. Everything is checked before the first object is written.

use std::collections::BTreeMap;

use kudo_api::{Instance, Operator, OperatorVersion};
use kudo_package::resources::{ConvertOptions, Resources, to_resources};
use kudo_repo::{Dependencies, Source};

use crate::checks::{check_autopilot_kinds, check_autopilot_rules, check_values};
use crate::cluster::{Cluster, FIELD_MANAGER, KudoKind};
use crate::provenance;
use crate::sensitive::{self, Split};
use crate::typed_api::{self, AppliedCrd};
use crate::{Error, Event, Progress, Result};

/// An `install` of a package read by the caller (from a directory, a tarball or a repository).
pub struct InstallRequest {
    /// The package.
    pub package: kudo_package::Package,
    /// Where it came from (an OCI artifact is recorded on its OperatorVersion).
    pub source: Source,
    /// Its resolved `KudoOperator` dependencies, installed first.
    pub dependencies: Dependencies,
    /// The Instance name (default: `<operator>-instance`).
    pub instance: Option<String>,
    /// Parameter values (`-P` files, then `-p`).
    pub values: BTreeMap<String, String>,
    /// `--parameter-secret NAME=SECRET/KEY` references.
    pub parameter_secrets: Vec<String>,
    /// `spec.serviceAccountName` of the new Instance.
    pub service_account: Option<String>,
    /// Install only the Operator and OperatorVersion.
    pub skip_instance: bool,
    /// Create the namespace first (from the package's `namespaceManifest` if it has one).
    pub create_namespace: bool,
    /// Write the typed API even where existing objects would no longer be valid.
    pub allow_breaking_changes: bool,
    /// Let the Instance's first plan adopt existing objects another tool created
    /// ([`kudo_engine::ownership::TAKE_OWNERSHIP_ANNOTATION`]).
    pub take_ownership: bool,
}

/// An `install --in-cluster`: a new Instance of an installed OperatorVersion.
pub struct InClusterRequest {
    /// The operator's name.
    pub operator: String,
    /// Only OperatorVersions of this appVersion.
    pub app_version: Option<String>,
    /// Only OperatorVersions of this operatorVersion.
    pub operator_version: Option<String>,
    /// The Instance name (default: `<operator>-instance`).
    pub instance: Option<String>,
    /// Parameter values.
    pub values: BTreeMap<String, String>,
    /// `--parameter-secret NAME=SECRET/KEY` references.
    pub parameter_secrets: Vec<String>,
    /// `spec.serviceAccountName` of the new Instance.
    pub service_account: Option<String>,
    /// See [`InstallRequest::take_ownership`].
    pub take_ownership: bool,
}

/// What `install` wrote. Each object was also reported to the [`Progress`] as it was written.
#[derive(Debug, Default)]
pub struct Installed {
    /// Whether the namespace was created.
    pub namespace_created: bool,
    /// Whether the Operator was created (false: it existed).
    pub operator_created: bool,
    /// Whether the OperatorVersion was created (false: it was already installed).
    pub operator_version_created: bool,
    /// The typed API's CRD, when the OperatorVersion declares one.
    pub typed_crd: Option<AppliedCrd>,
    /// The new Instance; `None` with `skip_instance`.
    pub instance: Option<CreatedInstance>,
}

/// A created Instance.
#[derive(Debug)]
pub struct CreatedInstance {
    /// Its name.
    pub name: String,
    /// Why the Instance could not be made the owner of its parameters Secret: the Instance exists,
    /// so this is a warning, not a failure.
    pub secret_owner_error: Option<Error>,
}

/// Installs a package: checks everything (parameters, autopilot rules, an existing Instance, the
/// typed API), then writes the namespace, the dependencies, the Operator and OperatorVersion, the
/// typed API and the Instance, reporting each to `progress`.
pub async fn install(
    cluster: &Cluster,
    req: InstallRequest,
    progress: &mut dyn Progress,
) -> Result<Installed> {
    let (res, split) = install_resources(&req, &cluster.namespace)?;
    // Autopilot rules the manager could not evaluate (kudo-rs extension): nothing is applied.
    check_autopilot_rules(&res.operator_version)?;
    check_autopilot_kinds(cluster, &res.operator_version).await?;
    // Validate everything before creating anything.
    if !req.skip_instance {
        check_new_instance(cluster, &res.instance, &res.operator_version, &split).await?;
    }
    let typed = typed_api::check(cluster, &res.operator_version, req.allow_breaking_changes).await?;
    let mut out = Installed::default();
    if req.create_namespace {
        create_namespace(cluster, &req.package, &res.instance.metadata.name, &req.values).await?;
        out.namespace_created = true;
        progress.report(Event::NamespaceCreated {
            name: &cluster.namespace,
        })?;
    }
    install_dependencies(cluster, &req.dependencies, progress).await?;
    (out.operator_created, out.operator_version_created) = install_operator_and_version(
        cluster,
        &res.operator,
        &res.operator_version,
        &req.source,
        progress,
    )
    .await?;
    if let Some(planned) = typed {
        out.typed_crd =
            Some(typed_api::apply(cluster, &res.operator_version, planned, FIELD_MANAGER, progress).await?);
    }
    if !req.skip_instance {
        out.instance = Some(create_instance(cluster, &res.instance, &split).await?);
    }
    Ok(out)
}

/// The Operator, OperatorVersion (its `KudoOperator` tasks pinned to the resolved dependencies)
/// and Instance `install` writes in `namespace`, with the split of its values (see
/// [`prepare_instance`]): built here for `install` and for its manifests alike
/// ([`crate::manifests`]).
pub(crate) fn install_resources(req: &InstallRequest, namespace: &str) -> Result<(Resources, Split)> {
    let mut res = to_resources(
        &req.package,
        &ConvertOptions {
            instance_name: req.instance.clone(),
            namespace: Some(namespace.to_string()),
            parameters: req.values.clone(),
            service_account: req.service_account.clone(),
        },
    )?;
    req.dependencies.pin(&mut res.operator_version);
    provenance::annotate(&mut res.operator_version, &req.source);
    ask_ownership(&mut res.instance, req.take_ownership);
    let split = prepare_instance(
        &mut res.instance,
        &res.operator_version,
        req.values.clone(),
        &req.parameter_secrets,
    )?;
    Ok((res, split))
}

/// Splits `values` and `--parameter-secret` for a new Instance (see [`sensitive::split`]): plain
/// values in `spec.parameters`, the others in `spec.parameterSources`.
fn prepare_instance(
    instance: &mut Instance,
    ov: &OperatorVersion,
    values: BTreeMap<String, String>,
    parameter_secrets: &[String],
) -> Result<Split> {
    let split = sensitive::split(ov, &instance.metadata.name, values, parameter_secrets)?;
    instance.spec.parameters = split.plain.clone();
    instance.spec.parameter_sources = split.sources.clone();
    Ok(split)
}

/// Creates the Operator and OperatorVersion of every dependency (leaves first, never Instances:
/// the parent's controller creates those), with their own `KudoOperator` tasks pinned.
pub(crate) async fn install_dependencies(
    cluster: &Cluster,
    deps: &Dependencies,
    progress: &mut dyn Progress,
) -> Result<()> {
    for (res, source) in dependency_resources(deps, &cluster.namespace)? {
        install_operator_and_version(cluster, &res.operator, &res.operator_version, source, progress).await?;
    }
    Ok(())
}

/// The Operator and OperatorVersion of every dependency in `namespace`, leaves first, their own
/// `KudoOperator` tasks pinned and their source recorded, each with that source.
pub(crate) fn dependency_resources<'d>(
    deps: &'d Dependencies,
    namespace: &str,
) -> Result<Vec<(Resources, &'d Source)>> {
    let mut out = Vec::new();
    for dep in &deps.packages {
        let mut res = to_resources(
            &dep.package,
            &ConvertOptions {
                namespace: Some(namespace.to_string()),
                ..Default::default()
            },
        )
        .map_err(|source| Error::Dependency {
            name: dep.package.operator_version_name(),
            source,
        })?;
        deps.pin(&mut res.operator_version);
        provenance::annotate(&mut res.operator_version, &dep.source);
        out.push((res, &dep.source));
    }
    Ok(out)
}

/// Creates the Operator unless it exists, and the OperatorVersion (already annotated with its
/// `source`) unless it exists, reporting each; returns which of the two were created. An existing
/// OperatorVersion of another source refuses a verified package (see [`provenance`]).
async fn install_operator_and_version(
    cluster: &Cluster,
    op: &Operator,
    ov: &OperatorVersion,
    source: &Source,
    progress: &mut dyn Progress,
) -> Result<(bool, bool)> {
    let existing = existing_operator_version(cluster, ov).await?;
    if let Some(existing) = &existing {
        provenance::check_existing(existing, source)?;
    }
    let op_missing = cluster
        .get::<Operator>(KudoKind::Operator, &op.metadata.name)
        .await?
        .is_none();
    if op_missing {
        cluster.create(KudoKind::Operator, op).await?;
        progress.report(Event::Created {
            kind: KudoKind::Operator,
            name: &op.metadata.name,
        })?;
    }
    let name = &ov.metadata.name;
    let ov_exists = existing.is_some();
    if ov_exists {
        progress.report(Event::AlreadyInstalled {
            kind: KudoKind::OperatorVersion,
            name,
        })?;
    } else {
        cluster.create(KudoKind::OperatorVersion, ov).await?;
        progress.report(Event::Created {
            kind: KudoKind::OperatorVersion,
            name,
        })?;
    }
    Ok((op_missing, !ov_exists))
}

/// The installed OperatorVersion of `ov`'s name, if any.
pub(crate) async fn existing_operator_version(
    cluster: &Cluster,
    ov: &OperatorVersion,
) -> Result<Option<OperatorVersion>> {
    // By object name, which includes the appVersion: KUDO compared only operatorVersion and silently
    // skipped a new appVersion (kudo-behaviour.md §4.13).
    cluster
        .get::<OperatorVersion>(KudoKind::OperatorVersion, &ov.metadata.name)
        .await
}

/// What `install` checks before creating an Instance: its parameters (required ones included)
/// against the OperatorVersion, and that no Instance of that name exists.
async fn check_new_instance(
    cluster: &Cluster,
    instance: &Instance,
    ov: &OperatorVersion,
    split: &Split,
) -> Result<()> {
    check_instance_values(ov, split)?;
    let name = &instance.metadata.name;
    if cluster.get::<Instance>(KudoKind::Instance, name).await?.is_some() {
        return Err(Error::InstanceExists {
            name: name.clone(),
            operator: format!("{}-{}", ov.spec.operator.name, ov.spec.version),
            namespace: cluster.namespace.clone(),
        });
    }
    Ok(())
}

/// The values of a new Instance (required ones included) against the OperatorVersion.
pub(crate) fn check_instance_values(ov: &OperatorVersion, split: &Split) -> Result<()> {
    check_values(&split.without_referenced(ov), &split.all_values(), true)
        .map_err(|e| Error::Refused(split.redact(&e.to_string())))
}

/// Creates the Instance, and before it the Secret of its sensitive values, if any.
async fn create_instance(cluster: &Cluster, instance: &Instance, split: &Split) -> Result<CreatedInstance> {
    let name = &instance.metadata.name;
    let mut secret_owner_error = None;
    if split.sensitive.is_empty() {
        cluster.create(KudoKind::Instance, instance).await?;
    } else {
        // The Secret first, so that a refused Secret leaves no Instance; a refused Instance
        // removes the Secret again. The owner is set once the Instance has its UID.
        sensitive::create_secret(cluster, name, &split.sensitive).await?;
        if let Err(e) = cluster.create(KudoKind::Instance, instance).await {
            sensitive::delete_secret(cluster, name).await;
            return Err(e);
        }
        secret_owner_error = sensitive::own_secret(cluster, name).await.err();
    }
    Ok(CreatedInstance {
        name: name.clone(),
        secret_owner_error,
    })
}

/// `--take-ownership`: the annotation the manager reads for the Instance's first run (and
/// removes when that run ends).
fn ask_ownership(instance: &mut kudo_api::Instance, take: bool) {
    if take {
        let key = kudo_engine::ownership::TAKE_OWNERSHIP_ANNOTATION.to_string();
        instance.metadata.annotations.insert(key, "true".to_string());
    }
}

/// `install NAME --in-cluster`: a new Instance of the newest matching OperatorVersion already
/// installed in the namespace.
pub async fn install_in_cluster(cluster: &Cluster, req: InClusterRequest) -> Result<CreatedInstance> {
    let ov = newest_installed(cluster, &req).await?;
    let mut instance = kudo_package::resources::instance(
        &req.operator,
        &ov.metadata.name,
        &ConvertOptions {
            instance_name: req.instance.clone(),
            namespace: Some(cluster.namespace.clone()),
            parameters: req.values.clone(),
            service_account: req.service_account.clone(),
        },
    );
    ask_ownership(&mut instance, req.take_ownership);
    check_autopilot_rules(&ov)?;
    check_autopilot_kinds(cluster, &ov).await?;
    let split = prepare_instance(&mut instance, &ov, req.values, &req.parameter_secrets)?;
    check_new_instance(cluster, &instance, &ov, &split).await?;
    create_instance(cluster, &instance, &split).await
}

/// The newest OperatorVersion of `req.operator` installed in the namespace that matches the
/// requested versions (KUDO's version order).
async fn newest_installed(cluster: &Cluster, req: &InClusterRequest) -> Result<OperatorVersion> {
    let name = req.operator.as_str();
    let (app, ver) = (req.app_version.as_deref(), req.operator_version.as_deref());
    let mut candidates: Vec<OperatorVersion> = cluster
        .list::<OperatorVersion>(KudoKind::OperatorVersion)
        .await?
        .into_iter()
        .filter(|ov| ov.spec.operator.name == name)
        .filter(|ov| ver.is_none_or(|v| ov.spec.version == v))
        .filter(|ov| app.is_none_or(|a| ov.spec.app_version == a))
        .collect();
    candidates.sort_by(|a, b| {
        kudo_repo::index::cmp_app_then_operator(
            (&a.spec.app_version, &a.spec.version),
            (&b.spec.app_version, &b.spec.version),
        )
    });
    candidates.pop().ok_or_else(|| {
        let mut wanted = format!("operator {name}");
        if let Some(v) = ver {
            wanted.push_str(&format!(" operatorVersion {v}"));
        }
        if let Some(a) = app {
            wanted.push_str(&format!(" appVersion {a}"));
        }
        Error::NoOperatorVersion {
            wanted,
            namespace: cluster.namespace.clone(),
        }
    })
}

/// Creates the cluster's namespace (refused when it exists), from the package's
/// `namespaceManifest` when it has one.
async fn create_namespace(
    cluster: &Cluster,
    pkg: &kudo_package::Package,
    instance: &str,
    values: &BTreeMap<String, String>,
) -> Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: kube::Api<Namespace> = kube::Api::all(cluster.client.clone());
    if api.get_opt(&cluster.namespace).await?.is_some() {
        return Err(Error::NamespaceExists(cluster.namespace.clone()));
    }
    let ns_obj = namespace_object(pkg, instance, &cluster.namespace, values)?;
    api.create(&Default::default(), &ns_obj)
        .await
        .map_err(Error::CreateNamespace)?;
    Ok(())
}

/// The Namespace `--create-namespace` creates: the package's `namespaceManifest` rendered, else
/// a plain one.
pub(crate) fn namespace_object(
    pkg: &kudo_package::Package,
    instance: &str,
    namespace: &str,
    values: &BTreeMap<String, String>,
) -> Result<k8s_openapi::api::core::v1::Namespace> {
    Ok(
        match render_namespace_manifest(pkg, instance, namespace, values)? {
            Some(obj) => serde_json::from_value(obj).map_err(Error::NotANamespace)?,
            None => serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}
            }))?,
        },
    )
}

/// Renders the package's `namespaceManifest` with KUDO's reduced variable set for it: the implicit
/// names plus `.Params` holding only the values given on the command line, as raw strings.
fn render_namespace_manifest(
    pkg: &kudo_package::Package,
    instance: &str,
    namespace: &str,
    values: &BTreeMap<String, String>,
) -> Result<Option<serde_json::Value>> {
    let file = &pkg.operator.namespace_manifest;
    if file.is_empty() {
        return Ok(None);
    }
    let text = pkg
        .templates
        .get(file)
        .ok_or_else(|| Error::ManifestMissing { file: file.clone() })?;
    // Built as template values directly (no JSON tree to convert), as every CLI render path.
    use kudo_template::Value;
    let params = values
        .iter()
        .map(|(k, v)| (k.clone(), Value::str(v.as_str())))
        .collect();
    let data = Value::map(BTreeMap::from([
        ("Name".to_string(), Value::str(instance)),
        ("Namespace".to_string(), Value::str(namespace)),
        ("OperatorName".to_string(), Value::str(pkg.operator.name.as_str())),
        (
            "OperatorVersion".to_string(),
            Value::str(pkg.operator.operator_version.as_str()),
        ),
        (
            "AppVersion".to_string(),
            Value::str(pkg.operator.app_version.as_str()),
        ),
        ("Params".to_string(), Value::map(params)),
    ]));
    let out = kudo_template::render(file, text, &data).map_err(|e| Error::ManifestTemplate(e.to_string()))?;
    // Read as KUDO reads it (sigs.k8s.io/yaml: a key written twice keeps its last value).
    let obj = kudo_template::data::yaml_to_json(&out).map_err(|e| Error::ManifestYaml {
        file: file.clone(),
        message: e.to_string(),
    })?;
    Ok(Some(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `namespaceManifest` sees the implicit names and `.Params` as a map of the given raw
    /// strings (its data is built as template values directly, with Go's map type).
    #[test]
    fn namespace_manifest_sees_names_and_raw_params() {
        let operator = "apiVersion: kudo.dev/v1beta1\nname: demo\nnamespaceManifest: ns.yaml\n\
            operatorVersion: 0.1.0\nappVersion: 2.0.0\ntasks: []\nplans: {}\n";
        let ns = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ .Namespace }}\n  labels:\n    \
            instance: {{ .Name }}\n    op: {{ .OperatorName }}-{{ .OperatorVersion }}-{{ .AppVersion }}\n    \
            x: \"{{ .Params.X }}\"\n    type: \"{{ printf \"%T\" .Params }}\"\n";
        let files = BTreeMap::from([
            ("operator.yaml".to_string(), operator.as_bytes().to_vec()),
            (
                "params.yaml".to_string(),
                b"apiVersion: kudo.dev/v1beta1\nparameters: []\n".to_vec(),
            ),
            ("templates/ns.yaml".to_string(), ns.as_bytes().to_vec()),
        ]);
        let pkg = kudo_package::reader::from_files(files, "test").expect("package");
        let values = BTreeMap::from([("X".to_string(), "3".to_string())]);
        let obj = render_namespace_manifest(&pkg, "inst", "space", &values)
            .expect("rendered")
            .expect("a manifest");
        assert_eq!(
            obj,
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": "space",
                "labels": {"instance": "inst", "op": "demo-0.1.0-2.0.0", "x": "3",
                    "type": "map[string]interface {}"}}})
        );
    }
}
