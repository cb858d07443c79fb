//! The dependency checks of a `KudoOperator` task before its child Instance is applied.

use std::collections::BTreeMap;

use kube::api::{Api, DynamicObject};
use kudo_api::OperatorVersion;
use kudo_engine::dependencies::{DependencyError, check_child_parameters, check_graph};
use kudo_engine::{TaskCall, TaskOutcome};
use serde_json::Value;

use crate::context::Context;
use crate::reasons::{self, fatal};
use crate::render::Rendered;

/// The graph check of a `KudoOperator` task (see [`kudo_engine::dependencies`]): every
/// OperatorVersion below the parent is installed, there is no cycle, and the child gets its
/// required parameters. Failures are fatal, as in KUDO (`CircularDependency`).
pub(crate) async fn check(
    ctx: &Context,
    call: &TaskCall<'_>,
    ov: &OperatorVersion,
    rendered: &Rendered,
) -> Result<(), TaskOutcome> {
    let installed = installed(ctx, ov).await?;
    check_graph(ov, &installed).map_err(as_fatal)?;
    let child_name = call.task.spec.child_operator_version_name();
    // check_graph found every child of `ov` installed, this task's included
    let Some(child_ov) = installed.get(&child_name) else {
        return Err(fatal(
            reasons::KUDO_OPERATOR_TASK_ERROR,
            format!(
                "operator version {child_name} of task {} is not installed",
                call.task_name
            ),
        ));
    };
    for obj in rendered.for_task(call) {
        check_child_parameters(call.task_name, child_ov, &child_parameters(&obj.object)).map_err(as_fatal)?;
    }
    Ok(())
}

/// The OperatorVersions installed in `ov`'s namespace, by name: the watch cache first; a LIST when
/// it is not synced or misses an OperatorVersion of the graph (one installed a moment ago), so a
/// failure is never decided on a stale cache.
async fn installed(
    ctx: &Context,
    ov: &OperatorVersion,
) -> Result<BTreeMap<String, OperatorVersion>, TaskOutcome> {
    let ns = ov.metadata.namespace.as_deref().unwrap_or("default");
    let cached = ctx
        .caches
        .operator_versions_in(ns)
        .map(|v| decode(v.into_iter().map(|o| (*o).clone()).collect()))
        .filter(|installed| check_graph(ov, installed).is_ok());
    if let Some(installed) = cached {
        return Ok(installed);
    }
    let ovs = crate::resources::operator_version_resource();
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.cluster.client.clone(), ns, &ovs);
    let list = api
        .list(&Default::default())
        .await
        .map_err(|e| TaskOutcome::Transient(format!("listing operator versions in {ns} failed: {e}")))?;
    Ok(decode(list.items))
}

fn decode(items: Vec<DynamicObject>) -> BTreeMap<String, OperatorVersion> {
    let mut installed = BTreeMap::new();
    for item in items {
        let Ok(v) = serde_json::to_value(&item) else {
            continue;
        };
        if let Ok(o) = serde_json::from_value::<OperatorVersion>(v) {
            installed.insert(o.metadata.name.clone(), o);
        }
    }
    installed
}

/// The parameters a rendered child Instance sets. A sensitive value passed on as a
/// parameterSources entry is set too (its value is validated by the child's manager when it reads
/// the Secret).
fn child_parameters(child: &Value) -> BTreeMap<String, String> {
    let mut params: BTreeMap<String, String> = child["spec"]["parameters"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    if let Some(sources) = child["spec"]["parameterSources"].as_object() {
        for k in sources.keys() {
            params.insert(k.clone(), "(from a Secret)".to_string());
        }
    }
    params
}

fn as_fatal(e: DependencyError) -> TaskOutcome {
    let reason = match e {
        DependencyError::Cycle(_) | DependencyError::Missing { .. } => {
            kudo_engine::reasons::CIRCULAR_DEPENDENCY
        }
        DependencyError::InvalidParameters { .. } => reasons::KUDO_OPERATOR_TASK_ERROR,
    };
    fatal(reason, e.to_string())
}
