//! Package → the `kudo.dev/v1beta1` objects `kubectl kudo install` creates: Operator,
//! OperatorVersion and Instance. The package already holds tasks, plans and parameter
//! definitions as the `kudo-api` types, so this only assembles the three objects.

use std::collections::BTreeMap;

use kudo_api as api;

use crate::error::PackageError;
use crate::model::{Package, TaskKind};

/// The three cluster objects of a package.
#[derive(Clone, Debug, PartialEq)]
pub struct Resources {
    /// The Operator object: the package as a whole.
    pub operator: api::Operator,
    /// The OperatorVersion object: tasks, plans and parameter definitions of this version.
    pub operator_version: api::OperatorVersion,
    /// The Instance object that runs the package with the given parameter values.
    pub instance: api::Instance,
}

/// Options for [`to_resources`].
#[derive(Clone, Debug, Default)]
pub struct ConvertOptions {
    /// Instance name; `<operator>-instance` when `None`.
    pub instance_name: Option<String>,
    /// Namespace put on all three objects (`None` leaves it unset, as the CLI does before apply).
    pub namespace: Option<String>,
    /// Instance parameter values (`-p`/`-P`), stored verbatim.
    pub parameters: BTreeMap<String, String>,
    /// `spec.serviceAccountName` of the Instance (`--service-account`).
    pub service_account: Option<String>,
}

fn meta(name: &str, namespace: &Option<String>) -> api::ObjectMeta {
    api::ObjectMeta {
        name: name.to_string(),
        namespace: namespace.clone(),
        ..Default::default()
    }
}

/// KUDO's conversion-time cross-check: referenced templates exist, Toggle has a parameter, Pipe has
/// entries, kinds are known.
pub fn check_tasks(pkg: &Package) -> Result<(), PackageError> {
    for t in &pkg.operator.tasks {
        let missing = |f: &str| {
            PackageError::Invalid(format!(
                "task {:?}: template {:?} is not defined in templates/",
                t.name, f
            ))
        };
        match &t.kind {
            TaskKind::Apply | TaskKind::Delete | TaskKind::Toggle => {
                for r in &t.spec.resources {
                    if !pkg.templates.contains_key(r) {
                        return Err(missing(r));
                    }
                }
                if t.kind == TaskKind::Toggle && t.spec.parameter.is_empty() {
                    return Err(PackageError::Invalid(format!(
                        "task {:?}: a Toggle task needs a parameter",
                        t.name
                    )));
                }
            }
            TaskKind::Pipe => {
                if !pkg.templates.contains_key(&t.spec.pod) {
                    return Err(missing(&t.spec.pod));
                }
                if t.spec.pipe.is_empty() {
                    return Err(PackageError::Invalid(format!(
                        "task {:?}: a Pipe task needs at least one pipe entry",
                        t.name
                    )));
                }
            }
            TaskKind::KudoOperator => {
                let f = &t.spec.parameter_file;
                if !f.is_empty() && !pkg.templates.contains_key(f) {
                    return Err(missing(f));
                }
            }
            TaskKind::Dummy => {}
            TaskKind::Unknown(other) => {
                return Err(PackageError::Invalid(format!(
                    "task {:?}: unknown task kind {other}",
                    t.name
                )));
            }
        }
    }
    Ok(())
}

/// The Instance of operator `operator` running OperatorVersion `ov_name`, named by
/// `opts.instance_name` (default `<operator>-instance`). Used for a package being installed and for
/// `install --in-cluster`, where only the OperatorVersion is known.
pub fn instance(operator: &str, ov_name: &str, opts: &ConvertOptions) -> api::Instance {
    let name = opts
        .instance_name
        .clone()
        .unwrap_or_else(|| format!("{operator}-instance"));
    let mut metadata = meta(&name, &opts.namespace);
    metadata
        .labels
        .insert(api::labels::OPERATOR.into(), operator.to_string());
    api::Instance {
        api_version: api::API_VERSION.into(),
        kind: "Instance".into(),
        metadata,
        spec: api::InstanceSpec {
            operator_version: api::ObjectReference {
                kind: None,
                namespace: None,
                name: ov_name.to_string(),
            },
            parameters: opts.parameters.clone(),
            parameter_sources: Default::default(),
            plan_execution: Default::default(),
            service_account_name: opts.service_account.clone().unwrap_or_default(),
        },
        status: None,
    }
}

/// Converts a package to its cluster objects.
pub fn to_resources(pkg: &Package, opts: &ConvertOptions) -> Result<Resources, PackageError> {
    check_tasks(pkg)?;
    let o = &pkg.operator;
    let operator = api::Operator {
        api_version: api::API_VERSION.into(),
        kind: "Operator".into(),
        metadata: meta(&o.name, &opts.namespace),
        spec: api::OperatorSpec {
            description: o.description.clone(),
            kudo_version: o.kudo_version.clone(),
            kubernetes_version: o.kubernetes_version.clone(),
            maintainers: o.maintainers.clone(),
            url: o.url.clone(),
            namespace_manifest: o.namespace_manifest.clone(),
        },
        status: None,
    };
    let ov_name = pkg.operator_version_name();
    let operator_version = api::OperatorVersion {
        api_version: api::API_VERSION.into(),
        kind: "OperatorVersion".into(),
        metadata: meta(&ov_name, &opts.namespace),
        spec: api::OperatorVersionSpec {
            operator: api::ObjectReference {
                kind: Some("Operator".into()),
                namespace: None,
                name: o.name.clone(),
            },
            version: o.operator_version.clone(),
            app_version: o.app_version.clone(),
            templates: pkg.templates.clone(),
            tasks: o.tasks.clone(),
            parameters: pkg.params.definitions(),
            plans: o.plans.clone(),
            connection_string: String::new(),
            upgradable_from: Vec::new(),
            api: o.api.clone(),
            parameter_validations: pkg.params.validations.clone(),
        },
        status: None,
    };
    let instance = instance(&o.name, &ov_name, opts);
    Ok(Resources {
        operator,
        operator_version,
        instance,
    })
}
