//! The value of a sensitive parameter from its source (`spec.parameterSources`): a key of a
//! Secret, decoded, with errors that name the parameter and the Secret, never the value. The
//! manager resolves sources when it renders (`kudo_controller::param_sources`) and the CLI's
//! preview (`kudo_client::preview`) reads them to render as the manager will: both read a
//! Secret's data with [`value_from_secret`], so they accept and refuse the same Secrets.

use base64::Engine as _;
use serde_json::Value;

/// Why a sensitive parameter has no value from its source. Every message names the parameter and
/// the Secret, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The `secretKeyRef` of the source lacks its `name` or its `key`.
    #[error("parameter {param:?}: parameterSources.secretKeyRef needs both name and key")]
    IncompleteSelector {
        /// The sensitive parameter whose source failed.
        param: String,
    },
    /// The source is not a `secretKeyRef` (the only kind of source supported).
    #[error("parameter {param:?}: parameterSources supports only secretKeyRef")]
    UnsupportedSource {
        /// The sensitive parameter whose source failed.
        param: String,
    },
    /// The Secret could not be read (`reason`: the server's reason and code, not its body).
    #[error("parameter {param:?}: reading Secret {namespace}/{secret} failed: {reason}")]
    Read {
        /// The sensitive parameter whose source failed.
        param: String,
        /// Namespace of the Secret (the Instance's).
        namespace: String,
        /// Name of the Secret (`secretKeyRef.name`).
        secret: String,
        /// The server's reason and status code.
        reason: String,
    },
    /// The Secret the source names does not exist.
    #[error("parameter {param:?}: Secret {namespace}/{secret} not found")]
    SecretNotFound {
        /// The sensitive parameter whose source failed.
        param: String,
        /// Namespace of the Secret (the Instance's).
        namespace: String,
        /// Name of the Secret (`secretKeyRef.name`).
        secret: String,
    },
    /// The Secret exists but has no such key in its `data`.
    #[error("parameter {param:?}: Secret {namespace}/{secret} has no key {key:?}")]
    NoKey {
        /// The sensitive parameter whose source failed.
        param: String,
        /// Namespace of the Secret (the Instance's).
        namespace: String,
        /// Name of the Secret (`secretKeyRef.name`).
        secret: String,
        /// The Secret key (`secretKeyRef.key`).
        key: String,
    },
    /// The key's data is not valid base64 (as the API serves Secret `data`).
    #[error("parameter {param:?}: key {key:?} of Secret {namespace}/{secret} is not valid base64")]
    NotBase64 {
        /// The sensitive parameter whose source failed.
        param: String,
        /// Namespace of the Secret (the Instance's).
        namespace: String,
        /// Name of the Secret (`secretKeyRef.name`).
        secret: String,
        /// The Secret key (`secretKeyRef.key`).
        key: String,
    },
    /// The decoded value is not UTF-8 text, so it cannot be a parameter value.
    #[error("parameter {param:?}: key {key:?} of Secret {namespace}/{secret} is not UTF-8 text")]
    NotUtf8 {
        /// The sensitive parameter whose source failed.
        param: String,
        /// Namespace of the Secret (the Instance's).
        namespace: String,
        /// Name of the Secret (`secretKeyRef.name`).
        secret: String,
        /// The Secret key (`secretKeyRef.key`).
        key: String,
    },
    /// `spec.parameterSources` names a parameter the OperatorVersion does not declare.
    #[error("parameter {param:?} in parameterSources is not a parameter of {operator_version}")]
    Undeclared {
        /// The undeclared parameter name.
        param: String,
        /// Name of the Instance's OperatorVersion.
        operator_version: String,
    },
    /// A required parameter's source holds an empty value (`what`: the Secret key).
    #[error("parameter {param:?} is required but {what} is empty")]
    Required {
        /// The sensitive parameter whose source failed.
        param: String,
        /// Where the empty value came from, e.g. `Secret key db/password`.
        what: String,
    },
    /// KUDO's validation refused the value (`what`: the Secret key, `value_type`: the declared
    /// type).
    #[error(
        "parameter {param:?} has an invalid value (from {what}, type {value_type:?}; the value is not shown)"
    )]
    Invalid {
        /// The sensitive parameter whose source failed.
        param: String,
        /// Where the value came from, e.g. `Secret key db/password`.
        what: String,
        /// The parameter's declared `value-type`.
        value_type: String,
    },
}

/// The value of `sel.key` in a Secret read from the API (`None`: it does not exist). Pure.
pub fn value_from_secret(
    param: &str,
    ns: &str,
    sel: &kudo_api::SecretKeySelector,
    secret: Option<&Value>,
) -> Result<String, SourceError> {
    let (param, namespace, name, key) = (
        param.to_string(),
        ns.to_string(),
        sel.name.clone(),
        sel.key.clone(),
    );
    let Some(secret) = secret else {
        return Err(SourceError::SecretNotFound {
            param,
            namespace,
            secret: name,
        });
    };
    let Some(encoded) = secret["data"][&sel.key].as_str() else {
        return Err(SourceError::NoKey {
            param,
            namespace,
            secret: name,
            key,
        });
    };
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
        return Err(SourceError::NotBase64 {
            param,
            namespace,
            secret: name,
            key,
        });
    };
    String::from_utf8(bytes).map_err(|_| SourceError::NotUtf8 {
        param,
        namespace,
        secret: name,
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudo_api::SecretKeySelector;
    use serde_json::json;

    fn sel() -> SecretKeySelector {
        SecretKeySelector {
            name: "db".into(),
            key: "pw".into(),
        }
    }

    #[test]
    fn reads_and_decodes_the_key() {
        let s = json!({"data": {"pw": "czNjcjN0"}});
        assert_eq!(value_from_secret("P", "ns", &sel(), Some(&s)).unwrap(), "s3cr3t");
    }

    #[test]
    fn missing_secret_key_or_bad_data_name_parameter_and_secret() {
        assert_eq!(
            value_from_secret("P", "ns", &sel(), None)
                .unwrap_err()
                .to_string(),
            "parameter \"P\": Secret ns/db not found"
        );
        let s = json!({"data": {"other": "eA=="}});
        assert_eq!(
            value_from_secret("P", "ns", &sel(), Some(&s))
                .unwrap_err()
                .to_string(),
            "parameter \"P\": Secret ns/db has no key \"pw\""
        );
        let s = json!({"data": {"pw": "!!"}});
        assert!(
            value_from_secret("P", "ns", &sel(), Some(&s))
                .unwrap_err()
                .to_string()
                .contains("base64")
        );
        let s = json!({"data": {"pw": "/w=="}});
        assert!(
            value_from_secret("P", "ns", &sel(), Some(&s))
                .unwrap_err()
                .to_string()
                .contains("UTF-8")
        );
    }
}
