//! Label and field selectors, with the grammar and supported fields of the real server.

use serde_json::Value;

use crate::error::ApiError;
use crate::meta;
use crate::registry::ResourceDef;

#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelReq>);

fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c)
            }
            ')' => {
                depth -= 1;
                cur.push(c)
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty() && k.len() <= 317 && k.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

impl LabelSelector {
    /// Parse the query-string form (`a=b,c!=d,e in (f,g),!h`).
    pub fn parse(s: &str) -> Result<LabelSelector, ApiError> {
        let bad = |why: &str| ApiError::bad_request(format!("unable to parse requirement: {why}"));
        let mut reqs = Vec::new();
        for term in split_top(s) {
            let values = |rest: &str| -> Result<Vec<String>, ApiError> {
                let r = rest.trim();
                let inner = r
                    .strip_prefix('(')
                    .and_then(|x| x.strip_suffix(')'))
                    .ok_or_else(|| bad(&format!("found '{r}', expected: '('")))?;
                Ok(inner
                    .split(',')
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .collect())
            };
            let words: Vec<&str> = term.split_whitespace().collect();
            if words.len() >= 2 && (words[1] == "in" || words[1] == "notin") {
                let key = words[0].to_string();
                let rest = term[term.find(words[1]).unwrap_or(0) + words[1].len()..].to_string();
                let vals = values(&rest)?;
                if !valid_key(&key) {
                    return Err(bad(&format!("invalid label key {key:?}")));
                }
                reqs.push(if words[1] == "in" {
                    LabelReq::In(key, vals)
                } else {
                    LabelReq::NotIn(key, vals)
                });
            } else if let Some((k, v)) = term.split_once("!=") {
                reqs.push(LabelReq::Ne(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = term.split_once("==") {
                reqs.push(LabelReq::Eq(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = term.split_once('=') {
                reqs.push(LabelReq::Eq(k.trim().into(), v.trim().into()));
            } else if let Some(k) = term.strip_prefix('!') {
                let k = k.trim();
                if !valid_key(k) {
                    return Err(bad(&format!("invalid label key {k:?}")));
                }
                reqs.push(LabelReq::NotExists(k.into()));
            } else {
                if !valid_key(&term) {
                    return Err(bad(&format!("invalid label key {term:?}")));
                }
                reqs.push(LabelReq::Exists(term));
            }
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether an object's labels satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let labels = meta::labels(obj);
        let get = |k: &str| labels.get(k).and_then(|v| v.as_str());
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::Ne(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed `fieldSelector`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

fn supported_fields(def: &ResourceDef) -> Vec<String> {
    let mut v: Vec<String> = vec!["metadata.name".into(), "metadata.namespace".into()];
    let extra: &[&str] = match (def.group.as_str(), def.plural.as_str()) {
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("events.k8s.io", "events") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "reason",
            "type",
            "reportingController",
        ],
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("", "nodes") => &["spec.unschedulable"],
        ("apps", "replicasets") => &["status.replicas"],
        ("batch", "jobs") => &["status.successful"],
        _ => &[],
    };
    v.extend(extra.iter().map(|s| s.to_string()));
    if let Some(c) = &def.custom {
        v.extend(
            c.selectable_fields
                .iter()
                .map(|p| p.trim_start_matches('.').to_string()),
        );
    }
    v
}

impl FieldSelector {
    /// Parse `a=b,c!=d` and reject fields the type does not support, as the real server does.
    pub fn parse(s: &str, def: &ResourceDef) -> Result<FieldSelector, ApiError> {
        let supported = supported_fields(def);
        let mut out = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = term.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = term.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = term.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            let k = k.trim();
            if !supported.iter().any(|f| f == k) {
                return Err(ApiError::bad_request(format!(
                    "\"{k}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                ))
                .with_message(format!("field label not supported: {k}")));
            }
            out.push((k.to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(out))
    }

    /// Whether an object satisfies every term (absent fields compare as `""`).
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(k, eq, v)| {
            let actual = match meta::json_path(obj, k) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == *v) == *eq
        })
    }
}

impl FieldSelector {
    /// Both selectors' terms.
    pub fn and(mut self, other: FieldSelector) -> FieldSelector {
        self.0.extend(other.0);
        self
    }
}
