//! Patch algorithms of the embedded Kubernetes API server.
//!
//! The API server (`kudo-apiserver`) must be indistinguishable from kube-apiserver for
//! kubectl and kube-rs, and every write that is not a plain create/replace goes through one of
//! the four patch flavours Kubernetes accepts. They live here as pure functions on
//! [`serde_json::Value`] so that they can be tested against the RFC examples and the documented
//! Kubernetes behaviour without any HTTP in the way:
//!
//! * [`json_patch`]: RFC 6902 with the `evanphx/json-patch` quirks kube-apiserver has;
//! * [`merge`]: RFC 7386 JSON merge patch;
//! * [`strategic`]: strategic merge patch for built-in kinds, driven by [`schema`];
//! * [`ssa`]: server-side apply and `metadata.managedFields` bookkeeping, built on
//!   [`fieldpath`] (the FieldsV1 set representation).
//!
//! How the API server uses it:
//! * `PATCH` with `application/json-patch+json` → [`json_patch::apply`] (check
//!   [`json_patch::MAX_OPERATIONS`] first), `merge-patch+json` → [`merge::apply`],
//!   `strategic-merge-patch+json` → [`strategic::apply`] (built-in kinds only, see
//!   [`schema::is_builtin`]); then [`ssa::record_update`] on the result;
//! * `apply-patch+yaml` → [`ssa::apply`] (or [`ssa::apply_with`] with the CRD's
//!   [`schema::Schema::from_openapi_v3`], the subresource and whether the kind has a status
//!   subresource); `None` as live object means "create";
//! * `POST`/`PUT` → [`ssa::record_update`] with `old = None` / the stored object;
//! * errors render as kube-apiserver's `Status` bodies with [`PatchError::to_status`] /
//!   [`SsaError::to_status`];
//! * OpenAPI emission of patch metadata → [`schema::list_fields`] and
//!   [`schema::field_shapes`].

pub mod fieldpath;
pub mod json_patch;
pub mod merge;
pub mod quantity;
pub mod schema;
pub mod ssa;
pub mod strategic;

mod error;

pub use error::{Conflict, PatchError, SsaError};
pub use schema::{ListStrategy, ListType};

/// Group, version and kind of the object being patched.
///
/// Strategic merge patch and server-side apply depend on per-type metadata (merge keys,
/// list types); the GVK is how callers pick it without this crate knowing the REST layer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    /// API group, empty for the core (`v1`) group.
    pub group: String,
    /// API version inside the group, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
}

impl Gvk {
    /// Builds a GVK from its three parts.
    pub fn new(group: impl Into<String>, version: impl Into<String>, kind: impl Into<String>) -> Self {
        Gvk {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// Builds a GVK from an object's `apiVersion` (`group/version` or just `version` for the
    /// core group) and `kind`, the way manifests spell them.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        match api_version.split_once('/') {
            Some((group, version)) => Gvk::new(group, version, kind),
            None => Gvk::new("", api_version, kind),
        }
    }

    /// Reads `apiVersion` and `kind` from an object, `None` when either is missing.
    pub fn of_object(obj: &serde_json::Value) -> Option<Self> {
        let api_version = obj.get("apiVersion")?.as_str()?;
        let kind = obj.get("kind")?.as_str()?;
        Some(Gvk::from_api_version(api_version, kind))
    }

    /// The `apiVersion` string (`group/version`, or `version` for the core group), as written
    /// into `managedFields[].apiVersion`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Go's schema.GroupVersionKind.String(): "/v1, Kind=Pod" for the core group.
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// Removes from an object the fields that a client must not send in a server-side apply
/// body and that the server never tracks in field sets: `metadata.managedFields`,
/// `metadata.resourceVersion`, `metadata.uid`, `metadata.creationTimestamp`,
/// `metadata.generation`, `metadata.selfLink` and `status`.
///
/// The API server uses it to turn a stored object into an "applied configuration" (for
/// example when migrating a client-side-applied object), never on the apply path itself.
pub fn strip_for_apply(obj: &serde_json::Value) -> serde_json::Value {
    let mut out = obj.clone();
    if let Some(map) = out.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            for k in [
                "managedFields",
                "resourceVersion",
                "uid",
                "creationTimestamp",
                "generation",
                "selfLink",
            ] {
                meta.remove(k);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gvk_from_api_version() {
        assert_eq!(
            Gvk::from_api_version("apps/v1", "Deployment"),
            Gvk::new("apps", "v1", "Deployment")
        );
        assert_eq!(
            Gvk::from_api_version("v1", "ConfigMap"),
            Gvk::new("", "v1", "ConfigMap")
        );
        assert_eq!(Gvk::new("", "v1", "Pod").api_version(), "v1");
        assert_eq!(Gvk::new("apps", "v1", "Pod").api_version(), "apps/v1");
    }

    #[test]
    fn strip_removes_server_fields() {
        let obj = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "uid": "u", "resourceVersion": "3", "managedFields": [],
                          "labels": {"x": "y"}},
            "data": {"k": "v"}, "status": {}
        });
        assert_eq!(
            strip_for_apply(&obj),
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "labels": {"x": "y"}}, "data": {"k": "v"}})
        );
    }
}
