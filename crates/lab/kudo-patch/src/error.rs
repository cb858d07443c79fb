//! Errors of the patch algorithms, with the HTTP status and `Status` body kube-apiserver uses
//! for each, so that clients see the same failure they would against a real cluster.

use serde_json::{Value, json};

/// Why a JSON Patch, merge patch or strategic merge patch could not be applied.
///
/// The variant decides the HTTP answer, following kube-apiserver's patch handler:
/// * [`PatchError::BadRequest`]: 400 `BadRequest` — the patch document itself is malformed
///   (not a JSON Patch array, unknown op, bad directive format);
/// * [`PatchError::Invalid`]: 422 `Invalid` — a well-formed patch that cannot be applied to
///   this object (missing path, failed `test`, lists of lists, `$retainKeys` mismatch);
///   kube-apiserver answers these with the generic message "the server rejected our request
///   due to an error in our request" and the detail as an `UnexpectedServerResponse` cause;
/// * [`PatchError::Internal`]: 500 with no reason — strategic merge patch errors that the
///   real server does not classify (e.g. a list item without its merge key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document is malformed (HTTP 400).
    #[error("{0}")]
    BadRequest(String),
    /// The patch cannot be applied to the object (HTTP 422).
    #[error("{0}")]
    Invalid(String),
    /// Other strategic-merge failures (HTTP 500).
    #[error("{0}")]
    Internal(String),
}

impl PatchError {
    /// HTTP status code kube-apiserver answers with.
    pub fn status_code(&self) -> u16 {
        match self {
            PatchError::BadRequest(_) => 400,
            PatchError::Invalid(_) => 422,
            PatchError::Internal(_) => 500,
        }
    }

    /// `Status.reason` kube-apiserver answers with (empty for errors it does not classify,
    /// which it reports as a bare 500 with the message only).
    pub fn reason(&self) -> &'static str {
        match self {
            PatchError::BadRequest(_) => "BadRequest",
            PatchError::Invalid(_) => "Invalid",
            PatchError::Internal(_) => "",
        }
    }

    /// The complete `meta.k8s.io/v1 Status` body for this error, shaped as kube-apiserver
    /// shapes it (422 carries the detail as a cause; 500 wraps it as an internal error).
    pub fn to_status(&self) -> Value {
        match self {
            PatchError::BadRequest(m) => status(400, "BadRequest", m, None),
            PatchError::Invalid(m) => status(
                422,
                "Invalid",
                "the server rejected our request due to an error in our request",
                Some(json!({"causes": [{"reason": "UnexpectedServerResponse", "message": m}]})),
            ),
            PatchError::Internal(m) => status(500, "", m, None),
        }
    }
}

/// One field that a server-side apply would take from another manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Field path in structured-merge-diff notation, e.g. `.spec.replicas` or
    /// `.spec.containers[name="nginx"].image`.
    pub path: String,
    /// Name of the manager that owns the field.
    pub manager: String,
    /// Operation of the owning entry (`Apply` or `Update`).
    pub operation: String,
    /// `apiVersion` of the owning entry.
    pub api_version: String,
    /// Time of the owning entry, if recorded.
    pub time: Option<String>,
    /// Subresource of the owning entry (e.g. `status`), if any.
    pub subresource: Option<String>,
}

impl Conflict {
    /// How kube-apiserver names the owner in conflict messages: `"mgr"` for appliers,
    /// `"mgr" using v1 at 2024-01-01T00:00:00Z` for updaters, plus the subresource.
    pub fn owner_description(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s = format!("{s} with subresource {sub:?}");
        }
        if self.operation == "Update" {
            match &self.time {
                Some(t) => format!("{s} using {} at {t}", self.api_version),
                None => format!("{s} using {}", self.api_version),
            }
        } else {
            s
        }
    }
}

/// Why a server-side apply was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SsaError {
    /// The applied configuration changes fields owned by other managers and `force` was not
    /// set (HTTP 409 `Conflict` with one `FieldManagerConflict` cause per field).
    #[error("{}", conflict_message(.causes))]
    Conflict {
        /// One entry per conflicting (field, owner) pair.
        causes: Vec<Conflict>,
    },
    /// The request is malformed for apply, e.g. it carries `metadata.managedFields`
    /// (HTTP 400 `BadRequest`).
    #[error("{0}")]
    BadRequest(String),
    /// The applied configuration cannot be interpreted with the type's schema, e.g. an
    /// associative list item without its key (kube-apiserver answers HTTP 500).
    #[error("{0}")]
    Invalid(String),
}

impl SsaError {
    /// HTTP status code kube-apiserver answers with.
    pub fn status_code(&self) -> u16 {
        match self {
            SsaError::Conflict { .. } => 409,
            SsaError::BadRequest(_) => 400,
            SsaError::Invalid(_) => 500,
        }
    }

    /// The complete `meta.k8s.io/v1 Status` body for this error.
    pub fn to_status(&self) -> Value {
        match self {
            SsaError::Conflict { causes } => {
                let c: Vec<Value> = causes
                    .iter()
                    .map(|c| {
                        json!({
                            "reason": "FieldManagerConflict",
                            "message": format!("conflict with {}", c.owner_description()),
                            "field": c.path,
                        })
                    })
                    .collect();
                status(
                    409,
                    "Conflict",
                    &conflict_message(causes),
                    Some(json!({ "causes": c })),
                )
            }
            SsaError::BadRequest(m) => status(400, "BadRequest", m, None),
            SsaError::Invalid(m) => status(500, "", m, None),
        }
    }
}

/// The conflict message in kube-apiserver's wording: one line for a single conflict, a
/// per-manager bulleted list otherwise.
fn conflict_message(causes: &[Conflict]) -> String {
    if causes.len() == 1 {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            causes[0].owner_description(),
            causes[0].path
        );
    }
    let mut owners: Vec<String> = causes.iter().map(|c| c.owner_description()).collect();
    owners.sort();
    owners.dedup();
    let mut lines = Vec::new();
    for owner in owners {
        lines.push(format!("conflicts with {owner}:"));
        for c in causes.iter().filter(|c| c.owner_description() == owner) {
            lines.push(format!("- {}", c.path));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        causes.len(),
        lines.join("\n")
    )
}

/// A `Status` body; an empty `reason` is omitted, as Go's `omitempty` does.
fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut s = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    });
    if !reason.is_empty() {
        s["reason"] = json!(reason);
    }
    if let Some(d) = details {
        s["details"] = d;
    }
    s["code"] = json!(code);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_patch_status_shape() {
        let s = PatchError::Invalid("testing value /a failed: test failed".into()).to_status();
        assert_eq!(
            s,
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "the server rejected our request due to an error in our request",
                "reason": "Invalid",
                "details": {"causes": [{"reason": "UnexpectedServerResponse",
                    "message": "testing value /a failed: test failed"}]},
                "code": 422
            })
        );
        let keys: Vec<&String> = s.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "kind",
                "apiVersion",
                "metadata",
                "status",
                "message",
                "reason",
                "details",
                "code"
            ]
        );
    }

    #[test]
    fn unclassified_errors_have_no_reason() {
        let s = PatchError::Internal("boom".into()).to_status();
        assert!(s.get("reason").is_none());
        assert_eq!(s["code"], 500);
        assert_eq!(s["message"], "boom");
    }

    #[test]
    fn multi_conflict_message_groups_by_owner() {
        let c = |path: &str, manager: &str| Conflict {
            path: path.into(),
            manager: manager.into(),
            operation: "Apply".into(),
            api_version: "v1".into(),
            time: None,
            subresource: None,
        };
        let e = SsaError::Conflict {
            causes: vec![c(".data.a", "bob"), c(".data.b", "alice"), c(".data.c", "bob")],
        };
        assert_eq!(
            e.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"alice\":\n- .data.b\nconflicts with \"bob\":\n- .data.a\n- .data.c"
        );
    }
}
