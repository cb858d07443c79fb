//! Sensitive parameters on the CLI (a kudo-rs extension): values of parameters declared
//! `sensitive: true` go into the Secret `<instance>-parameters` (key = parameter name), owned by the
//! Instance, and are referenced from `spec.parameterSources`; `--parameter-secret NAME=SECRET/KEY`
//! references an existing Secret instead. Messages name parameters and Secrets, never a value.

use std::collections::BTreeMap;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kudo_api::{OperatorVersion, ParameterSource};

use crate::cluster::{Cluster, FIELD_MANAGER};
use crate::{Error, Result};

/// Parses `--parameter-secret NAME=SECRET/KEY`.
pub fn parse_parameter_secret(s: &str) -> Result<(String, ParameterSource)> {
    let bad = || Error::InvalidParameterSecret(s.to_string());
    let (name, rest) = s.split_once('=').ok_or_else(bad)?;
    let (secret, key) = rest.split_once('/').ok_or_else(bad)?;
    if name.is_empty() || secret.is_empty() || key.is_empty() || key.contains('/') {
        return Err(bad());
    }
    Ok((name.to_string(), ParameterSource::secret(secret, key)))
}

/// The name of the Secret the CLI stores sensitive values in.
pub fn secret_name(instance: &str) -> String {
    format!("{instance}-parameters")
}

/// Sensitive values shorter than this are not redacted: a 1–3 character value would blank out
/// unrelated text (see docs/cli.md, `diagnostics collect`).
pub const MIN_REDACTED_LEN: usize = 4;

/// Replaces sensitive values by `(redacted)` in text the CLI writes out (diagnostics files,
/// previews). Values are kept longest first, so that a value containing another is replaced whole;
/// values under [`MIN_REDACTED_LEN`] characters are left alone.
#[derive(Debug, Default, Clone)]
pub struct Redactor {
    values: Vec<String>,
}

impl Redactor {
    /// A redactor of `values` (see [`Redactor::add`]).
    pub fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut r = Redactor::default();
        r.add(values);
        r
    }

    /// Adds values to redact from now on.
    pub fn add(&mut self, values: impl IntoIterator<Item = String>) {
        for v in values {
            if v.chars().count() >= MIN_REDACTED_LEN && !self.values.contains(&v) {
                self.values.push(v);
            }
        }
        self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    /// `text` with every value replaced by `(redacted)`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), "(redacted)");
            }
        }
        out
    }
}

/// The parameters of one install/update, split for the Instance.
#[derive(Debug, Default, PartialEq)]
pub struct Split {
    /// Values that go into `spec.parameters`.
    pub plain: BTreeMap<String, String>,
    /// Values of sensitive parameters, for the Secret `<instance>-parameters`.
    pub sensitive: BTreeMap<String, String>,
    /// `spec.parameterSources` entries: the sensitive values' and the `--parameter-secret` ones.
    pub sources: BTreeMap<String, ParameterSource>,
}

impl Split {
    /// Replaces every sensitive value in a message.
    pub fn redact(&self, message: &str) -> String {
        let mut out = message.to_string();
        for v in self.sensitive.values() {
            if !v.is_empty() {
                out = out.replace(v.as_str(), "(redacted)");
            }
        }
        out
    }

    /// The declarations whose values are only known at render time (`--parameter-secret`): the
    /// CLI cannot check them.
    pub fn without_referenced(&self, ov: &OperatorVersion) -> OperatorVersion {
        let mut ov = ov.clone();
        let declared = ov.spec.parameters.len();
        ov.spec
            .parameters
            .retain(|p| !self.sources.contains_key(&p.name) || self.sensitive.contains_key(&p.name));
        if ov.spec.parameters.len() != declared {
            // The package-level rules need every value: the manager judges them when it renders,
            // where it reads the referenced Secrets.
            ov.spec.parameter_validations.clear();
        }
        ov
    }

    /// Plain and sensitive values together (for client-side validation only).
    pub fn all_values(&self) -> BTreeMap<String, String> {
        let mut v = self.plain.clone();
        v.extend(self.sensitive.iter().map(|(k, v)| (k.clone(), v.clone())));
        v
    }
}

/// Splits `values` by the OperatorVersion's `sensitive` flags and adds the `--parameter-secret`
/// references; a reference to an undeclared parameter, a malformed one, or a parameter given both
/// ways is an error (before anything is written).
pub fn split(
    ov: &OperatorVersion,
    instance: &str,
    values: BTreeMap<String, String>,
    refs: &[String],
) -> Result<Split> {
    let mut out = Split::default();
    for r in refs {
        let (name, src) = parse_parameter_secret(r)?;
        if !ov.spec.parameters.iter().any(|p| p.name == name) {
            return Err(Error::UnknownParameterSecret {
                name,
                operator_version: ov.metadata.name.clone(),
            });
        }
        if values.contains_key(&name) {
            return Err(Error::ParameterGivenTwice { name });
        }
        out.sources.insert(name, src);
    }
    for (name, value) in values {
        let sensitive = ov
            .spec
            .parameters
            .iter()
            .any(|p| p.name == name && p.is_sensitive());
        if sensitive {
            out.sources.insert(
                name.clone(),
                ParameterSource::secret(secret_name(instance), name.clone()),
            );
            out.sensitive.insert(name, value);
        } else {
            out.plain.insert(name, value);
        }
    }
    Ok(out)
}

fn secrets(cluster: &Cluster) -> Api<DynamicObject> {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("", "v1", "Secret"),
        "secrets",
    );
    Api::namespaced_with(cluster.client.clone(), &cluster.namespace, &ar)
}

/// Creates the Secret `<instance>-parameters` holding `values` (no owner yet: the Instance does not
/// exist). Errors name the Secret, never a value.
pub async fn create_secret(
    cluster: &Cluster,
    instance: &str,
    values: &BTreeMap<String, String>,
) -> Result<()> {
    let name = secret_name(instance);
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": cluster.namespace,
            "labels": {kudo_api::labels::INSTANCE: instance},
        },
        "type": "Opaque",
        "stringData": values,
    }))?;
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let secret = format!("{}/{name}", cluster.namespace);
    secrets(cluster).create(&pp, &obj).await.map_err(|e| match e {
        kube::Error::Api(r) if r.code == 409 => Error::SecretExists { secret },
        other => Error::StoreSecret {
            secret,
            reason: short(&other),
        },
    })?;
    Ok(())
}

/// `update -p` of sensitive parameters: writes the values into `<instance>-parameters` (created
/// and owned by the Instance when missing, else its keys are replaced). Returns whether any value
/// differs from what the Secret held (an unchanged value rotates nothing). Errors name the Secret,
/// never a value.
pub async fn store_values(
    cluster: &Cluster,
    instance: &str,
    values: &BTreeMap<String, String>,
) -> Result<bool> {
    let name = secret_name(instance);
    let api = secrets(cluster);
    let found = api.get_opt(&name).await.map_err(|e| Error::ReadSecret {
        secret: format!("{}/{name}", cluster.namespace),
        reason: short(&e),
    })?;
    let Some(found) = found else {
        create_secret(cluster, instance, values).await?;
        own_secret(cluster, instance).await?;
        return Ok(true);
    };
    use base64::Engine as _;
    let changed = values.iter().any(|(k, v)| {
        let old = found.data["data"][k]
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
        old.as_deref() != Some(v.as_bytes())
    });
    if changed {
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        api.patch(
            &name,
            &pp,
            &Patch::Merge(serde_json::json!({"stringData": values})),
        )
        .await
        .map_err(|e| Error::StoreSecret {
            secret: format!("{}/{name}", cluster.namespace),
            reason: short(&e),
        })?;
    }
    Ok(changed)
}

/// An API error without the server's body.
fn short(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(r) => format!("{} ({})", r.reason, r.code),
        other => other.to_string(),
    }
}

/// Deletes the Secret again (the Instance could not be created).
pub async fn delete_secret(cluster: &Cluster, instance: &str) {
    let _ = secrets(cluster)
        .delete(&secret_name(instance), &DeleteParams::default())
        .await;
}

/// Makes the Instance the owner of its parameters Secret (deleted with it).
pub async fn own_secret(cluster: &Cluster, instance: &str) -> Result<()> {
    let inst = cluster.instance(instance).await?;
    let uid = inst
        .metadata
        .other
        .get("uid")
        .and_then(|u| u.as_str())
        .unwrap_or_default()
        .to_string();
    let patch = serde_json::json!({"metadata": {"ownerReferences": [{
        "apiVersion": kudo_api::API_VERSION,
        "kind": "Instance",
        "name": instance,
        "uid": uid,
        "controller": true,
        "blockOwnerDeletion": true,
    }]}});
    let name = secret_name(instance);
    secrets(cluster)
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::OwnSecret {
            secret: format!("{}/{name}", cluster.namespace),
            reason: e.to_string(),
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov() -> OperatorVersion {
        let mut ov: OperatorVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
            "metadata": {"name": "demo-0.1.0"},
            "spec": {"parameters": [
                {"name": "PASSWORD", "required": true, "sensitive": true},
                {"name": "TOKEN", "required": true, "sensitive": true},
                {"name": "REPLICAS", "value-type": "integer", "default": "1"}
            ]}
        }))
        .unwrap();
        ov.metadata.namespace = Some("default".into());
        ov
    }

    #[test]
    fn parses_parameter_secret() {
        let (n, s) = parse_parameter_secret("PASSWORD=db/pw").unwrap();
        assert_eq!(n, "PASSWORD");
        assert_eq!(s, ParameterSource::secret("db", "pw"));
        for bad in ["PASSWORD", "PASSWORD=db", "=db/pw", "P=/pw", "P=db/", "P=db/a/b"] {
            let e = parse_parameter_secret(bad).unwrap_err().to_string();
            assert!(e.contains("expected NAME=SECRET/KEY"), "{bad}: {e}");
        }
    }

    #[test]
    fn splits_sensitive_values_into_the_instance_secret() {
        let values = [
            ("PASSWORD".to_string(), "hunter2".to_string()),
            ("REPLICAS".to_string(), "3".to_string()),
        ]
        .into();
        let s = split(&ov(), "db", values, &["TOKEN=vault/token".into()]).unwrap();
        assert_eq!(s.plain, [("REPLICAS".to_string(), "3".to_string())].into());
        assert_eq!(
            s.sensitive,
            [("PASSWORD".to_string(), "hunter2".to_string())].into()
        );
        assert_eq!(
            s.sources["PASSWORD"],
            ParameterSource::secret("db-parameters", "PASSWORD")
        );
        assert_eq!(s.sources["TOKEN"], ParameterSource::secret("vault", "token"));
        assert_eq!(s.redact("bad hunter2"), "bad (redacted)");
        let checked = s.without_referenced(&ov());
        let names: Vec<&str> = checked.spec.parameters.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["PASSWORD", "REPLICAS"]);
    }

    #[test]
    fn bad_references_are_refused_naming_the_parameter() {
        let e = split(&ov(), "db", BTreeMap::new(), &["NOPE=s/k".into()])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--parameter-secret NOPE: operator version demo-0.1.0 has no parameter \"NOPE\""
        );
        let values = [("PASSWORD".to_string(), "hunter2".to_string())].into();
        let e = split(&ov(), "db", values, &["PASSWORD=s/k".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("both as a value and with --parameter-secret"), "{e}");
        assert!(!e.contains("hunter2"));
    }
}
