//! Kubernetes `Status` errors.
//!
//! Clients (kubectl, kube-rs) branch on `code` and `reason`, and kubectl prints `message` verbatim, so
//! these mirror the wording the real API server uses.

use serde_json::{Value, json};

/// A failed API call, rendered as a `meta/v1 Status` body.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable `reason` (`NotFound`, `Conflict`, ...).
    pub reason: String,
    /// Human message, printed by kubectl.
    pub message: String,
    /// Optional `details` object (name, group, kind, causes).
    pub details: Option<Box<Value>>,
}

/// One field-level cause in a 422 Invalid error.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueForbidden`, `FieldValueRequired`...
    pub reason: String,
    /// The path of the field, e.g. `spec.clusterIP`.
    pub field: String,
    /// The message as kubectl prints it after the field path.
    pub message: String,
}

impl Cause {
    /// An `Invalid value` cause with the value rendered like Go's `%#v`-ish output.
    pub fn invalid(field: &str, value: &Value, detail: &str) -> Self {
        let shown = match value {
            Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        Cause {
            reason: "FieldValueInvalid".into(),
            field: field.into(),
            message: format!("Invalid value: {shown}: {detail}"),
        }
    }
    /// A `Forbidden` cause.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Cause {
            reason: "FieldValueForbidden".into(),
            field: field.into(),
            message: format!("Forbidden: {detail}"),
        }
    }
    /// A `Too long` cause: the value is over `max` bytes (kube-apiserver leaves the value out).
    pub fn too_long(field: &str, max: usize) -> Self {
        Cause {
            reason: "FieldValueTooLong".into(),
            field: field.into(),
            message: format!("Too long: must have at most {max} bytes"),
        }
    }
    /// A `Required value` cause.
    pub fn required(field: &str, detail: &str) -> Self {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        Cause {
            reason: "FieldValueRequired".into(),
            field: field.into(),
            message,
        }
    }
}

/// `configmaps` or `deployments.apps`: the "qualified resource" used in Go error messages.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl ApiError {
    fn new(code: u16, reason: &str, message: String) -> Self {
        ApiError {
            code,
            reason: reason.into(),
            message,
            details: None,
        }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut d = serde_json::Map::new();
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !group.is_empty() {
            d.insert("group".into(), json!(group));
        }
        d.insert("kind".into(), json!(kind));
        self.details = Some(Box::new(Value::Object(d)));
        self
    }

    /// 404 for a missing object.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    /// 404 for a path the server does not serve.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        )
        .with_details("", "", "")
    }

    /// 409 for a create of an existing name.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    /// 409 for a stale resourceVersion or failed precondition.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, resource)
            ),
        )
        .with_details(group, resource, name)
    }

    /// The standard optimistic-concurrency conflict.
    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with field causes.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let text: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let joined = if text.len() == 1 {
            text[0].clone()
        } else {
            format!("[{}]", text.join(", "))
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{kind}{} \"{name}\" is invalid: {joined}", {
                if group.is_empty() {
                    String::new()
                } else {
                    format!(".{group}")
                }
            }),
        )
        .with_details(group, kind, name);
        if let Some(Value::Object(d)) = e.details.as_deref_mut() {
            d.insert(
                "causes".into(),
                Value::Array(
                    causes
                        .iter()
                        .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                        .collect(),
                ),
            );
        }
        e
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message.into())
    }

    /// 413 for a request body over the server's limit.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 403.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message.into())
    }

    /// 403 from authorization, with the `details` kube-apiserver gives (empty fields left out:
    /// a non-resource path has `details: {}`).
    pub fn forbidden_of(group: &str, resource: &str, name: &str, message: String) -> Self {
        let mut d = serde_json::Map::new();
        for (k, v) in [("name", name), ("group", group), ("kind", resource)] {
            if !v.is_empty() {
                d.insert(k.into(), json!(v));
            }
        }
        let mut e = Self::new(403, "Forbidden", message);
        e.details = Some(Box::new(Value::Object(d)));
        e
    }

    /// 405.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource".into(),
        )
    }

    /// 415 for a PATCH content type the resource does not accept.
    pub fn unsupported_media_type(content_type: &str, accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                if accepted.is_empty() {
                    content_type.to_string()
                } else {
                    accepted.join(", ")
                }
            ),
        )
    }

    /// 410 for a watch from a resourceVersion no longer in history.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message.into())
    }

    /// 429, as an overloaded server (API priority and fairness) answers.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", message.into())
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message.into())
    }

    /// The `Status` body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = (**d).clone();
        }
        s
    }
}
