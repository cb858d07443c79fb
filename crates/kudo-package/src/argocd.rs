//! Argo CD health checks for what KUDO puts in a cluster: `kudo.dev/Instance`, and the objects of a
//! package's typed API (a kudo-rs extension). The scripts live in Argo CD's own layout under
//! `deploy/argocd/resource_customizations/` (`<group>/<Kind>/health.lua` with `health_test.yaml`
//! and `testdata/`, tested case by case with Lua 5.1 in `kubectl-kudo`'s tests); this module
//! embeds them and says how `argocd-cm` registers them.
//!
//! ```
//! let patch = kudo_package::argocd::argocd_cm_patch(None);
//! assert!(patch.contains("\n  resource.customizations.health.kudo.dev_Instance: |\n"));
//! ```

use kudo_api::TypedApi;

/// The health check of `kudo.dev/Instance`.
pub const INSTANCE_HEALTH: &str =
    include_str!("../../../deploy/argocd/resource_customizations/kudo.dev/Instance/health.lua");

/// The health check of any typed API's objects (in Argo CD's layout under `_.kudo.dev/_`: every
/// kind of every group ending in `.kudo.dev`; a typed API of another group registers it under its
/// own key, see [`argocd_cm_patch`]).
pub const TYPED_API_HEALTH: &str =
    include_str!("../../../deploy/argocd/resource_customizations/_.kudo.dev/_/health.lua");

/// The `argocd-cm` key of a kind's health check: `resource.customizations.health.<group>_<Kind>`.
pub fn health_key(group: &str, kind: &str) -> String {
    format!("resource.customizations.health.{group}_{kind}")
}

/// A merge patch of `argocd-cm` (YAML, with the command that applies it) registering the
/// Instance's health check and, for a package with a typed API (`api`), its kind's.
pub fn argocd_cm_patch(api: Option<&TypedApi>) -> String {
    let mut out = String::from(
        "# Argo CD health checks for KUDO: merge into the argocd-cm ConfigMap, e.g.\n\
         #   kubectl -n argocd patch configmap argocd-cm --type merge --patch-file THIS_FILE\n\
         data:\n",
    );
    block(
        &mut out,
        &health_key(kudo_api::GROUP, "Instance"),
        INSTANCE_HEALTH,
    );
    if let Some(api) = api {
        block(&mut out, &health_key(&api.group, &api.kind), TYPED_API_HEALTH);
    }
    out
}

/// `key: |` and `script` as a YAML literal block indented under it.
fn block(out: &mut String, key: &str, script: &str) {
    out.push_str(&format!("  {key}: |\n"));
    for line in script.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_holds_each_script_verbatim() {
        let api = TypedApi {
            group: "galera.kudo.dev".into(),
            kind: "Galera".into(),
            ..TypedApi::default()
        };
        let patch: serde_json::Value = serde_saphyr::from_str(&argocd_cm_patch(Some(&api))).unwrap();
        let data = patch["data"].as_object().unwrap();
        assert_eq!(data.len(), 2);
        assert_eq!(
            data["resource.customizations.health.kudo.dev_Instance"],
            INSTANCE_HEALTH
        );
        assert_eq!(
            data["resource.customizations.health.galera.kudo.dev_Galera"],
            TYPED_API_HEALTH
        );
    }
}
