//! Sensitive parameters (a kudo-rs extension): `spec.parameterSources` of an Instance are resolved
//! here, at render time, into the parameter values the templates see. The values live only in
//! memory for the render: they are never written to the Instance, its status, Events or logs, and
//! every message about them names the parameter and the Secret, never the value.
//!
//! The Secret is read with a GET (a user's Secret does not carry the `heritage: kudo` label of the
//! cached objects). A missing Secret or key is not fatal: the plan's tasks wait (transient) with a
//! message naming both, so a Secret that arrives after its Instance (GitOps) is picked up.
//!
//! The Secret is read once per reconcile ([`resolve`]; the pass and the drift check share the
//! result, [`Sourced`]).
//!
//! # Rotation
//! A change of a referenced Secret's data is a change of the parameter
//! ([`kudo_engine::rotation`]): the manager watches Secrets (crate::run_controller maps a Secret
//! event to the Instances whose `parameterSources` name it) and compares *fingerprints* of the
//! values. What it remembers must not let anyone recover a value offline, so a fingerprint is an
//! HMAC-SHA256 of the value under a random 256-bit key of the Instance's own, kept in the Secret
//! `<instance>-parameter-fingerprint-key` (owned by the Instance, so it goes with it). The
//! fingerprints are in the Instance annotation [`FINGERPRINTS_ANNOTATION`]; without the key they
//! are useless to a password guesser, and whoever can read the key Secret can read the value's
//! Secret anyway. Why not keep the last values in memory only: a manager restart would then have
//! nothing to compare with and either miss a rotation or fire a spurious run; the annotation is
//! written in the same patch that schedules the triggered plan, so a restart does neither. A lost
//! key Secret is recreated and the fingerprints are recorded afresh without a run.

use std::collections::BTreeMap;

use base64::Engine as _;
use kube::api::{Api, DynamicObject};
use kudo_api::{OperatorVersion, ParameterSource};
use serde_json::Value;

use crate::context::Context;
/// The reading of a source's Secret, shared with the CLI's preview.
pub use kudo_kube::param_sources::{SourceError, value_from_secret};

/// Parameter values read from their sources, by parameter name.
pub type SourcedValues = BTreeMap<String, String>;

/// The outcome of one [`resolve`]: the values, or why a parameter cannot be resolved.
pub type Sourced = Result<SourcedValues, SourceError>;

/// A KudoOperator task's child Instance would carry a sensitive value
/// ([`source_child_parameters`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "parameter {child_parameter:?} of child instance {child} would hold the value of sensitive parameter {sensitive:?} inside a longer value; pass it unchanged ({{{{ .Params.{sensitive} }}}}) so that the child reads it from its Secret"
)]
pub struct ChildSourceError {
    /// Name of the child Instance the KudoOperator task creates.
    pub child: String,
    /// The parameter of the child whose rendered value would embed the sensitive value.
    pub child_parameter: String,
    /// The parent's sensitive parameter whose value would leak into the child's spec.
    pub sensitive: String,
}

pub use kudo_engine::reconcile::FINGERPRINTS_ANNOTATION;

/// The Secret holding an Instance's fingerprint key.
pub fn key_secret_name(instance: &str) -> String {
    format!("{instance}-parameter-fingerprint-key")
}

/// The data key of the fingerprint key in [`key_secret_name`].
const KEY_FIELD: &str = "hmac-sha256-key";

fn secrets(ctx: &Context, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(ctx.acting_client(), ns, &kudo_kube::known_resource("", "Secret"))
}

/// The Instance's fingerprint key, created (random, owned by the Instance) when missing; the
/// flag says it was just created (fingerprints made with a lost key cannot be compared).
pub(crate) async fn fingerprint_key(
    ctx: &Context,
    ns: &str,
    instance: &str,
    instance_uid: &str,
) -> Result<(Vec<u8>, bool), String> {
    let api = secrets(ctx, ns);
    let name = key_secret_name(instance);
    let read = |o: &DynamicObject| -> Option<Vec<u8>> {
        let b64 = o.data["data"][KEY_FIELD].as_str()?;
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .filter(|k| k.len() >= 32)
    };
    let failed = |e: kube::Error| format!("fingerprint key Secret {ns}/{name}: {}", kube_reason(&e));
    if let Some(found) = api.get_opt(&name).await.map_err(failed)? {
        return read(&found)
            .map(|k| (k, false))
            .ok_or_else(|| format!("fingerprint key Secret {ns}/{name} has no valid key {KEY_FIELD:?}"));
    }
    let key: [u8; 32] = rand::random();
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": name, "namespace": ns,
            "labels": {"kudo.dev/instance": instance},
            "ownerReferences": [{
                "apiVersion": kudo_api::API_VERSION, "kind": "Instance", "name": instance,
                "uid": instance_uid, "controller": true, "blockOwnerDeletion": true
            }]
        },
        "type": "Opaque",
        "data": {KEY_FIELD: base64::engine::general_purpose::STANDARD.encode(key)}
    }))
    .map_err(|e| e.to_string())?;
    match api.create(&Default::default(), &obj).await {
        Ok(_) => Ok((key.to_vec(), true)),
        // Another reconcile won the race: use its key.
        Err(kube::Error::Api(r)) if r.code == 409 => {
            let found = api.get(&name).await.map_err(failed)?;
            read(&found)
                .map(|k| (k, false))
                .ok_or_else(|| format!("fingerprint key Secret {ns}/{name} has no valid key {KEY_FIELD:?}"))
        }
        Err(e) => Err(failed(e)),
    }
}

/// Fingerprints of the sourced values under `key` (pure): `<secret>/<key>:<HMAC-SHA256 hex>`,
/// the parameter name bound into the MAC so equal values of two parameters differ.
pub fn fingerprints(
    key: &[u8],
    sources: &BTreeMap<String, ParameterSource>,
    values: &SourcedValues,
) -> kudo_engine::rotation::Fingerprints {
    use hmac::Mac as _;
    let mut out = kudo_engine::rotation::Fingerprints::new();
    for (param, value) in values {
        let Some(sel) = sources.get(param).and_then(|s| s.secret_key_ref.as_ref()) else {
            continue;
        };
        let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(key) else {
            continue;
        };
        mac.update(param.as_bytes());
        mac.update(&[0]);
        mac.update(value.as_bytes());
        let digest = hex::encode(mac.finalize().into_bytes());
        out.insert(
            param.clone(),
            kudo_engine::rotation::fingerprint(&sel.name, &sel.key, &digest),
        );
    }
    out
}

/// Reads every source of `sources` from namespace `ns`. `Err` names the first parameter that
/// cannot be resolved and why (never a value).
pub(crate) async fn resolve(
    ctx: &Context,
    ns: &str,
    ov: &OperatorVersion,
    sources: &BTreeMap<String, ParameterSource>,
) -> Result<SourcedValues, SourceError> {
    let mut out = SourcedValues::new();
    if sources.is_empty() {
        return Ok(out);
    }
    let api = secrets(ctx, ns);
    let mut read: BTreeMap<String, Option<Value>> = BTreeMap::new();
    for (param, source) in sources {
        let sel = selector(param, source)?;
        if !read.contains_key(&sel.name) {
            let found = api.get_opt(&sel.name).await.map_err(|e| SourceError::Read {
                param: param.clone(),
                namespace: ns.to_string(),
                secret: sel.name.clone(),
                reason: kube_reason(&e),
            })?;
            let found = found.map(|o| serde_json::to_value(o).unwrap_or(Value::Null));
            read.insert(sel.name.clone(), found);
        }
        let secret = read.get(&sel.name).and_then(Option::as_ref);
        let value = value_from_secret(param, ns, sel, secret)?;
        out.insert(param.clone(), value);
    }
    validate(ov, sources, &out)?;
    Ok(out)
}

/// The error of a failed read without the server's body (which cannot hold a value, but keep
/// messages short and stable).
fn kube_reason(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(r) => format!("{} ({})", r.reason, r.code),
        other => other.to_string(),
    }
}

fn selector<'s>(
    param: &str,
    source: &'s ParameterSource,
) -> Result<&'s kudo_api::SecretKeySelector, SourceError> {
    let param = param.to_string();
    match &source.secret_key_ref {
        Some(sel) if !sel.name.is_empty() && !sel.key.is_empty() => Ok(sel),
        Some(_) => Err(SourceError::IncompleteSelector { param }),
        None => Err(SourceError::UnsupportedSource { param }),
    }
}

/// KUDO's parameter validation for sourced values, with a message that does not quote the value.
/// A source for a parameter the OperatorVersion does not declare is an error.
pub fn validate(
    ov: &OperatorVersion,
    sources: &BTreeMap<String, ParameterSource>,
    values: &SourcedValues,
) -> Result<(), SourceError> {
    for (param, value) in values {
        let what = sources
            .get(param)
            .and_then(|s| s.secret_key_ref.as_ref())
            .map(|s| format!("Secret key {s}"))
            .unwrap_or_else(|| "its source".to_string());
        let Some(def) = ov.spec.parameters.iter().find(|p| &p.name == param) else {
            return Err(SourceError::Undeclared {
                param: param.clone(),
                operator_version: ov.metadata.name.clone(),
            });
        };
        if kudo_package::params::validate_value(def, value).is_err() {
            let param = param.clone();
            return Err(if value.is_empty() {
                SourceError::Required { param, what }
            } else {
                SourceError::Invalid {
                    param,
                    what,
                    value_type: def.value_type().to_string(),
                }
            });
        }
    }
    Ok(())
}

/// `parameters` with the sourced values merged in (a source wins over a plain value).
pub fn merged(parameters: &BTreeMap<String, String>, values: &SourcedValues) -> BTreeMap<String, String> {
    let mut out = parameters.clone();
    out.extend(values.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

/// A KudoOperator task's child Instance must not carry a sensitive value in its spec: a child
/// parameter whose rendered value *is* a sourced value becomes a `parameterSources` entry naming
/// the same Secret key (the child lives in the same namespace); one that merely contains such a
/// value cannot be referenced and is an error naming both parameters, never the value.
pub fn source_child_parameters(
    child: &mut Value,
    sources: &BTreeMap<String, ParameterSource>,
    values: &SourcedValues,
) -> Result<(), ChildSourceError> {
    let name = child["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let Some(params) = child["spec"]["parameters"].as_object_mut() else {
        return Ok(());
    };
    let mut moved = serde_json::Map::new();
    for (k, v) in params.iter() {
        let Some(text) = v.as_str() else {
            continue;
        };
        for (p, val) in values {
            if val.is_empty() {
                continue;
            }
            if text == val {
                if let Some(src) = sources.get(p) {
                    moved.insert(k.clone(), serde_json::to_value(src).unwrap_or(Value::Null));
                }
                break;
            }
            if text.contains(val.as_str()) {
                return Err(ChildSourceError {
                    child: name,
                    child_parameter: k.clone(),
                    sensitive: p.clone(),
                });
            }
        }
    }
    for k in moved.keys() {
        params.remove(k);
    }
    if !moved.is_empty() {
        child["spec"]["parameterSources"] = Value::Object(moved);
    }
    Ok(())
}

/// Replaces every sourced value in `message` (a render error could quote one).
pub fn redact(message: &str, values: &SourcedValues) -> String {
    let mut out = message.to_string();
    for v in values.values() {
        if !v.is_empty() {
            out = out.replace(v.as_str(), "(redacted)");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ov() -> OperatorVersion {
        let mut ov: OperatorVersion = serde_json::from_value(json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
            "metadata": {"name": "demo-0.1.0"}, "spec": {}
        }))
        .unwrap();
        ov.spec.parameters = vec![
            kudo_api::Parameter {
                name: "PORT".into(),
                value_type: "integer".into(),
                required: Some(true),
                sensitive: Some(true),
                ..Default::default()
            },
            kudo_api::Parameter {
                name: "PASSWORD".into(),
                required: Some(true),
                ..Default::default()
            },
        ];
        ov
    }

    #[test]
    fn validation_never_quotes_the_value() {
        let sources: BTreeMap<String, ParameterSource> = [
            ("PORT".to_string(), ParameterSource::secret("db", "port")),
            ("PASSWORD".to_string(), ParameterSource::secret("db", "pw")),
        ]
        .into();
        let values: SourcedValues = [
            ("PORT".to_string(), "hunter2".to_string()),
            ("PASSWORD".to_string(), "x".to_string()),
        ]
        .into();
        let e = validate(&ov(), &sources, &values).unwrap_err().to_string();
        assert!(!e.contains("hunter2"), "{e}");
        assert!(e.contains("\"PORT\"") && e.contains("db/port"), "{e}");
        let values: SourcedValues = [("PASSWORD".to_string(), String::new())].into();
        assert_eq!(
            validate(&ov(), &sources, &values).unwrap_err().to_string(),
            "parameter \"PASSWORD\" is required but Secret key db/pw is empty"
        );
        let values: SourcedValues = [("NOPE".to_string(), "v".to_string())].into();
        assert!(
            validate(&ov(), &sources, &values)
                .unwrap_err()
                .to_string()
                .contains("not a parameter of demo-0.1.0")
        );
    }

    #[test]
    fn merge_and_redact() {
        let values: SourcedValues = [("PASSWORD".to_string(), "hunter2".to_string())].into();
        let plain: BTreeMap<String, String> = [
            ("PASSWORD".to_string(), "old".to_string()),
            ("A".to_string(), "1".to_string()),
        ]
        .into();
        let m = merged(&plain, &values);
        assert_eq!(m["PASSWORD"], "hunter2");
        assert_eq!(m["A"], "1");
        assert_eq!(redact("bad hunter2 value", &values), "bad (redacted) value");
    }

    #[test]
    fn fingerprints_are_keyed_and_bound_to_the_parameter() {
        let sources: BTreeMap<String, ParameterSource> = [
            ("A".to_string(), ParameterSource::secret("db", "a")),
            ("B".to_string(), ParameterSource::secret("db", "b")),
        ]
        .into();
        let values: SourcedValues = [
            ("A".to_string(), "hunter2".to_string()),
            ("B".to_string(), "hunter2".to_string()),
        ]
        .into();
        let f1 = fingerprints(&[1; 32], &sources, &values);
        let f2 = fingerprints(&[2; 32], &sources, &values);
        assert!(
            f1["A"].starts_with("db/a:") && f1["B"].starts_with("db/b:"),
            "{f1:?}"
        );
        assert_ne!(f1["A"], f2["A"], "another key, another fingerprint");
        assert_ne!(
            f1["A"].split(':').nth(1),
            f1["B"].split(':').nth(1),
            "bound to the name"
        );
        // not a plain hash of the value
        use sha2::Digest as _;
        let plain = hex::encode(sha2::Sha256::digest(b"hunter2"));
        assert!(!f1["A"].contains(&plain));
        assert!(!f1.values().any(|v| v.contains("hunter2")));
    }

    #[test]
    fn child_instances_reference_the_secret_instead_of_the_value() {
        let sources: BTreeMap<String, ParameterSource> = [(
            "PASSWORD".to_string(),
            ParameterSource::secret("p-parameters", "PASSWORD"),
        )]
        .into();
        let values: SourcedValues = [("PASSWORD".to_string(), "hunter2".to_string())].into();
        let mut child = json!({"metadata": {"name": "p-db"}, "spec": {"parameters": {
            "ROOT_PASSWORD": "hunter2", "USER": "admin"}}});
        source_child_parameters(&mut child, &sources, &values).unwrap();
        assert_eq!(child["spec"]["parameters"], json!({"USER": "admin"}));
        assert_eq!(
            child["spec"]["parameterSources"],
            json!({"ROOT_PASSWORD": {"secretKeyRef": {"name": "p-parameters", "key": "PASSWORD"}}})
        );
        assert!(!child.to_string().contains("hunter2"));

        let mut child =
            json!({"metadata": {"name": "p-db"}, "spec": {"parameters": {"URL": "mysql://root:hunter2@db"}}});
        let e = source_child_parameters(&mut child, &sources, &values)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"URL\" of child instance p-db") && e.contains("\"PASSWORD\""),
            "{e}"
        );
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn selector_requires_secret_key_ref() {
        let e = selector("P", &ParameterSource::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("only secretKeyRef"), "{e}");
        let e = selector("P", &ParameterSource::secret("", "k"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs both name and key"), "{e}");
    }
}
