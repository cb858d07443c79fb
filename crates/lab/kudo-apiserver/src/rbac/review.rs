//! `SelfSubjectAccessReview` and `SubjectAccessReview` (authorization.k8s.io/v1): ask the
//! authorizer a question instead of trying the request. `kubectl auth can-i` sends the first,
//! with the impersonation headers of `--as`/`--as-group`.

use serde_json::{Value, json};

use super::{Attributes, Decision, UserInfo, authorize};
use crate::error::ApiError;
use crate::store::Store;

/// The attributes a review's `spec` asks about.
fn spec_attributes(spec: &Value) -> Result<Attributes, ApiError> {
    let s = |v: &Value, k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
    if let Some(ra) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
        return Ok(Attributes::resource(
            &s(ra, "verb"),
            &s(ra, "group"),
            &s(ra, "resource"),
            &s(ra, "subresource"),
            &s(ra, "namespace"),
            &s(ra, "name"),
        ));
    }
    if let Some(na) = spec.get("nonResourceAttributes").filter(|v| v.is_object()) {
        return Ok(Attributes::non_resource(&s(na, "verb"), &s(na, "path")));
    }
    Err(ApiError::invalid(
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "",
        vec![crate::error::Cause::required(
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )],
    ))
}

/// The review answered: the request echoed with `status.allowed` (and the reason, when any).
fn answer(review: Value, kind: &str, decision: Decision) -> (u16, Value) {
    let mut status = json!({"allowed": decision.allowed()});
    let reason = match decision {
        Decision::Allow(r) | Decision::Deny(r) => r,
    };
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    let spec = review.get("spec").cloned().unwrap_or(json!({}));
    (
        201,
        json!({
            "kind": kind,
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": status,
        }),
    )
}

/// `POST selfsubjectaccessreviews`: may the requesting identity do what the spec says?
pub fn self_subject(store: &Store, user: &UserInfo, review: Value) -> Result<(u16, Value), ApiError> {
    let attrs = spec_attributes(review.get("spec").unwrap_or(&Value::Null))?;
    let decision = authorize(store, user, &attrs);
    Ok(answer(review, "SelfSubjectAccessReview", decision))
}

/// `POST subjectaccessreviews`: may the user named in the spec (`user`, `groups`, `uid`) do it?
pub fn subject(store: &Store, review: Value) -> Result<(u16, Value), ApiError> {
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    let attrs = spec_attributes(&spec)?;
    let strs = |k: &str| -> Vec<String> {
        spec.get(k)
            .and_then(|v| v.as_array())
            .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    let user = UserInfo {
        name: spec["user"].as_str().unwrap_or("").to_string(),
        uid: spec["uid"].as_str().unwrap_or("").to_string(),
        groups: strs("groups"),
        extra: Vec::new(),
    };
    if user.name.is_empty() && user.groups.is_empty() {
        return Err(ApiError::invalid(
            "authorization.k8s.io",
            "SubjectAccessReview",
            "",
            vec![crate::error::Cause::invalid(
                "spec.user",
                &json!(""),
                "at least one of user or group must be specified",
            )],
        ));
    }
    let decision = authorize(store, &user, &attrs);
    Ok(answer(review, "SubjectAccessReview", decision))
}
