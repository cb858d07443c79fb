//! PATCH dispatch. The patch algorithms themselves live in `kudo-patch`; this module maps content
//! types to them and their errors to Kubernetes `Status` errors.

use serde_json::Value;

use crate::error::ApiError;
use crate::registry::ResourceDef;

/// The PATCH flavours a client can send, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json` (built-in kinds only).
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchKind {
    /// Parse a `Content-Type` header value.
    pub fn from_content_type(ct: &str) -> Option<PatchKind> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml"
            | "application/apply-patch+json"
            | "application/apply-patch+cbor" => Some(PatchKind::Apply),
            _ => None,
        }
    }
}

/// Content types a resource accepts for PATCH (listed in 415 errors).
pub fn accepted_types(def: &ResourceDef) -> Vec<&'static str> {
    let mut v = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    if def.supports_smp() {
        v.push("application/strategic-merge-patch+json");
    }
    v
}

pub(crate) fn gvk(def: &ResourceDef) -> kudo_patch::Gvk {
    kudo_patch::Gvk {
        group: def.group.clone(),
        version: def.version.clone(),
        kind: def.kind.clone(),
    }
}

/// RFC 6902 with the real server's `test` semantics (a missing path equals `null`).
pub fn json_patch(doc: &Value, patch: &Value) -> Result<Value, ApiError> {
    if !patch.is_array() {
        return Err(ApiError::bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ));
    }
    kudo_patch::json_patch::apply(doc, patch).map_err(|e| from_status(&e.to_status()))
}

/// RFC 7386.
pub fn merge_patch(doc: Value, patch: &Value) -> Value {
    kudo_patch::merge::apply_owned(doc, patch)
}

/// Strategic merge patch for built-in kinds.
pub fn strategic(doc: &Value, patch: &Value, def: &ResourceDef) -> Result<Value, ApiError> {
    kudo_patch::strategic::apply(doc, patch, &gvk(def)).map_err(|e| from_status(&e.to_status()))
}

/// Server-side apply; `Ok` carries the new object including `managedFields`.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    def: &ResourceDef,
) -> Result<Value, ApiError> {
    let now = crate::meta::now_rfc3339();
    kudo_patch::ssa::apply(live, applied, manager, force, &gvk(def), &now)
        .map_err(|e| from_status(&e.to_status()))
}

/// managedFields bookkeeping for non-apply writes (create, update, patch).
pub fn record_update(
    old: Option<&Value>,
    new: &Value,
    manager: Option<&str>,
    def: &ResourceDef,
    subresource: Option<&str>,
) -> Value {
    let manager = manager.filter(|m| !m.is_empty()).unwrap_or("unknown");
    let now = crate::meta::now_rfc3339();
    kudo_patch::ssa::record_update(old, new, manager, "Update", subresource, &gvk(def), &now)
}

/// Turn a `Status` body produced by kudo-patch into our error type.
fn from_status(st: &Value) -> ApiError {
    ApiError {
        code: st["code"]
            .as_u64()
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(500),
        reason: st["reason"].as_str().unwrap_or("InternalError").to_string(),
        message: st["message"].as_str().unwrap_or("").to_string(),
        details: st.get("details").cloned().map(Box::new),
    }
}
