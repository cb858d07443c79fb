//! KUDO's lenient reading of package files, applied before the `kudo-api` types see them.
//!
//! KUDO reads `operator.yaml`/`params.yaml` with `sigs.k8s.io/yaml`, which turns any scalar into a
//! string where the target field is a string (`appVersion: 10.5` reads as `"10.5"`) and reads
//! `null` as the field's zero value. The cluster types in `kudo-api` are strict, as they must be
//! for objects the API server stores, so the package reader first rewrites the decoded document
//! into the strict shape ([`operator_document`], [`params_document`]) and then deserialises it
//! into the very types the OperatorVersion holds: one model, and KUDO's leniency in one place.
//! A value that cannot be read as its field is reported at its field path in the wording the
//! earlier field-by-field deserialisers used.
//!
//! The repository index (`kudo-repo`) reads its fields with the same deserialisers ([`de`]),
//! keeping numbers as decoded ([`Numbers`]).

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::yaml::go_sprint;

/// Deserialisers for the package-only structs (`OperatorFile`, `ParamsFile`, `Group`) and the
/// repository index (`kudo-repo`), tolerant in the way Kubernetes' YAML reader is.
pub mod de {
    use super::*;

    /// Any scalar → its string form; `null` → "".
    pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let v = Value::deserialize(d)?;
        scalar_string(&v).map_err(serde::de::Error::custom)
    }

    /// [`string`] with numbers kept as decoded ([`Numbers::Decoded`]: `1.0` stays "1.0").
    pub fn string_keeping_numbers<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let v = Value::deserialize(d)?;
        scalar_text(&v, Numbers::Decoded).map_err(serde::de::Error::custom)
    }

    /// [`string_keeping_numbers`] where `null` means absent.
    pub fn opt_string_keeping_numbers<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let v = Value::deserialize(d)?;
        if v.is_null() {
            return Ok(None);
        }
        scalar_text(&v, Numbers::Decoded)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }

    /// A list of maintainers read as `operator.yaml`'s (`null` → none, scalars → strings).
    pub fn maintainers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<kudo_api::Maintainer>, D::Error> {
        let mut v = Value::deserialize(d)?;
        if v.is_null() {
            return Ok(Vec::new());
        }
        if let Value::Array(items) = &mut v {
            for (i, it) in items.iter_mut().enumerate() {
                rewrite_struct(it, MAINTAINER, &format!("[{i}]"))
                    .map_err(|e| serde::de::Error::custom(format!("{}: {}", e.field, e.message)))?;
            }
        }
        Vec::<kudo_api::Maintainer>::deserialize(v).map_err(serde::de::Error::custom)
    }

    /// `null` → default, else the normal deserialisation.
    pub fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de> + Default,
    {
        Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
    }
}

/// How a number read where a string is expected is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numbers {
    /// As Go's `fmt.Sprint` writes the number KUDO's YAML reader decoded (`1.0` → "1", `1e3` →
    /// "1000"): package files, read as KUDO reads them.
    Go,
    /// As the decoded number prints (`1.0` → "1.0", `1e3` → "1000.0"): the repository index,
    /// where an unquoted `operatorVersion: 1.0` is found again under "1.0".
    Decoded,
}

/// A list or a map where a package file's field takes a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("expected a string, found a {found}")]
pub struct NotAScalar {
    /// `list` or `map`.
    pub found: &'static str,
}

/// A scalar as the string a Go string field would receive; `null` → "".
pub fn scalar_string(v: &Value) -> Result<String, NotAScalar> {
    scalar_text(v, Numbers::Go)
}

/// A scalar as a string field's value, numbers written as `numbers` says; `null` → "".
pub fn scalar_text(v: &Value, numbers: Numbers) -> Result<String, NotAScalar> {
    match (v, numbers) {
        (Value::Null, _) => Ok(String::new()),
        (Value::String(s), _) => Ok(s.clone()),
        (Value::Bool(b), _) => Ok(b.to_string()),
        (Value::Number(_), Numbers::Go) => Ok(go_sprint(v)),
        (Value::Number(n), Numbers::Decoded) => Ok(n.to_string()),
        (Value::Array(_), _) => Err(NotAScalar { found: "list" }),
        (Value::Object(_), _) => Err(NotAScalar { found: "map" }),
    }
}

/// How a field of a package file is read.
enum Field {
    /// A string: scalars become their string form, `null` or absent becomes "".
    Str,
    /// A list of strings: each scalar becomes a string, `null` an empty list.
    StrList,
    /// A `bool`, a list or a struct the cluster type defaults: `null` reads as absent.
    Defaulted,
    /// A `*bool`: `null` reads as unset; anything but a boolean is refused here.
    OptBool,
    /// A list of any values (`enum`): `null` reads as unset; anything but a list is refused here.
    OptList,
    /// A list of structs of this shape (`null` → empty).
    ListOf(&'static [(&'static str, Field)]),
    /// A map of structs of this shape (`null` → empty).
    MapOf(&'static [(&'static str, Field)]),
    /// A struct of this shape (`null` → its default).
    Struct(&'static [(&'static str, Field)]),
}

use Field::*;

const MAINTAINER: &[(&str, Field)] = &[("name", Str), ("email", Str)];
const PIPE: &[(&str, Field)] = &[("file", Str), ("envFile", Str), ("kind", Str), ("key", Str)];
const TASK_SPEC: &[(&str, Field)] = &[
    ("resources", StrList),
    ("parameter", Str),
    ("wantErr", Defaulted),
    ("fatal", Defaulted),
    ("done", Defaulted),
    ("pod", Str),
    ("pipe", ListOf(PIPE)),
    ("package", Str),
    ("instanceName", Str),
    ("appVersion", Str),
    ("operatorVersion", Str),
    ("parameterFile", Str),
];
const TASK: &[(&str, Field)] = &[("name", Str), ("kind", Str), ("spec", Struct(TASK_SPEC))];
const STEP: &[(&str, Field)] = &[("name", Str), ("tasks", StrList)];
const PHASE: &[(&str, Field)] = &[("name", Str), ("strategy", Str), ("steps", ListOf(STEP))];
const PLAN: &[(&str, Field)] = &[("strategy", Str), ("phases", ListOf(PHASE))];
const OPERATOR: &[(&str, Field)] = &[
    ("maintainers", ListOf(MAINTAINER)),
    ("tasks", ListOf(TASK)),
    ("plans", MapOf(PLAN)),
];
/// `params.yaml` parameters; `type` is renamed to the OperatorVersion's `value-type` afterwards.
const PARAMETER: &[(&str, Field)] = &[
    ("displayName", Str),
    ("name", Str),
    ("description", Str),
    ("required", OptBool),
    ("trigger", Str),
    ("type", Str),
    ("immutable", OptBool),
    ("enum", OptList),
    ("group", Str),
    ("advanced", OptBool),
    ("hint", Str),
    ("sensitive", OptBool),
];
const PARAMS: &[(&str, Field)] = &[("parameters", ListOf(PARAMETER))];

/// A field that cannot be read: its path (`tasks[0].spec.resources`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path.
    pub field: String,
    /// Why it cannot be read.
    pub message: String,
}

/// Rewrites a decoded `operator.yaml` (a mapping) into the shape of the `kudo-api` types.
pub fn operator_document(doc: &mut Value) -> Result<(), FieldError> {
    rewrite_struct(doc, OPERATOR, "")
}

/// Rewrites a decoded `params.yaml` (a mapping): strings as above, and each parameter's `type`
/// under the OperatorVersion's name `value-type` (a stray `value-type` key is not KUDO's and is
/// dropped, as KUDO's reader ignored it); `type: object` is read as `map`.
pub fn params_document(doc: &mut Value) -> Result<(), FieldError> {
    rewrite_struct(doc, PARAMS, "")?;
    if let Some(Value::Array(params)) = doc.get_mut("parameters") {
        for p in params.iter_mut().filter_map(Value::as_object_mut) {
            p.remove("value-type");
            if let Some(t) = p.remove("type") {
                // kudo-rs extension: JSON Schema's `object` is KUDO's `map`.
                let t = if t == "object" { Value::from("map") } else { t };
                p.insert("value-type".into(), t);
            }
        }
    }
    Ok(())
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Applies `shape` to the fields of `v` if it is a mapping (anything else is left for the typed
/// deserialisation to refuse with serde's wording).
fn rewrite_struct(v: &mut Value, shape: &[(&str, Field)], path: &str) -> Result<(), FieldError> {
    let Value::Object(map) = v else { return Ok(()) };
    for (key, field) in shape {
        rewrite_field(map, key, field, &join(path, key))?;
    }
    Ok(())
}

fn rewrite_field(
    map: &mut Map<String, Value>,
    key: &str,
    field: &Field,
    path: &str,
) -> Result<(), FieldError> {
    let err = |message: String| FieldError {
        field: path.to_string(),
        message,
    };
    if let Str = field {
        let s = scalar_string(map.get(key).unwrap_or(&Value::Null)).map_err(|e| err(e.to_string()))?;
        map.insert(key.to_string(), Value::String(s));
        return Ok(());
    }
    let Some(v) = map.get_mut(key) else { return Ok(()) };
    if v.is_null() {
        match field {
            StrList => *v = Value::Array(Vec::new()),
            _ => {
                map.remove(key);
            }
        }
        return Ok(());
    }
    match field {
        Str | Defaulted => {}
        OptBool => {
            Option::<bool>::deserialize(&*v).map_err(|e| err(e.to_string()))?;
        }
        OptList => {
            Option::<Vec<Value>>::deserialize(&*v).map_err(|e| err(e.to_string()))?;
        }
        StrList => match v {
            Value::Array(items) => {
                for (i, it) in items.iter_mut().enumerate() {
                    *it = Value::String(scalar_string(it).map_err(|e| err(format!("[{i}]: {e}")))?);
                }
            }
            Value::String(_) => return Err(err("expected a list, found a string".into())),
            _ => return Err(err("expected a list".into())),
        },
        ListOf(shape) => {
            if let Value::Array(items) = v {
                for (i, it) in items.iter_mut().enumerate() {
                    rewrite_struct(it, shape, &format!("{path}[{i}]"))?;
                }
            }
        }
        MapOf(shape) => {
            if let Value::Object(entries) = v {
                for (k, it) in entries.iter_mut() {
                    rewrite_struct(it, shape, &join(path, k))?;
                }
            }
        }
        Struct(shape) => rewrite_struct(v, shape, path)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_become_strings_and_nulls_defaults() {
        let mut doc = json!({
            "tasks": [{"name": 5, "kind": "Apply", "spec": {"resources": [1, true], "pipe": null, "done": null}}],
            "plans": {"deploy": {"strategy": null, "phases": [{"name": 1.5, "steps": null}]}},
            "maintainers": null,
        });
        operator_document(&mut doc).unwrap();
        assert_eq!(
            doc,
            json!({
                "tasks": [{"name": "5", "kind": "Apply", "spec": {
                    "resources": ["1", "true"], "parameter": "", "pod": "", "package": "",
                    "instanceName": "", "appVersion": "", "operatorVersion": "", "parameterFile": ""}}],
                "plans": {"deploy": {"strategy": "", "phases": [{"name": "1.5", "strategy": ""}]}},
            })
        );
    }

    #[test]
    fn numbers_are_written_as_go_or_as_decoded() {
        for (v, go, decoded) in [
            (json!(1.0), "1", "1.0"),
            (json!(1.5), "1.5", "1.5"),
            (json!(3), "3", "3"),
        ] {
            assert_eq!(scalar_text(&v, Numbers::Go).unwrap(), go);
            assert_eq!(scalar_text(&v, Numbers::Decoded).unwrap(), decoded);
        }
        assert_eq!(scalar_text(&json!(true), Numbers::Decoded).unwrap(), "true");
        assert_eq!(scalar_string(&json!(null)).unwrap(), "");
    }

    #[test]
    fn refusals_name_the_field() {
        let mut doc = json!({"plans": {"deploy": {"phases": [{"steps": [{"tasks": ["a", {"b": 1}]}]}]}}});
        assert_eq!(
            operator_document(&mut doc),
            Err(FieldError {
                field: "plans.deploy.phases[0].steps[0].tasks".into(),
                message: "[1]: expected a string, found a map".into(),
            })
        );
        let mut doc = json!({"parameters": [{"name": "A", "required": "yes"}]});
        let e = params_document(&mut doc).unwrap_err();
        assert_eq!(e.field, "parameters[0].required");
        assert_eq!(e.message, "invalid type: string \"yes\", expected a boolean");
    }

    #[test]
    fn parameter_type_becomes_value_type() {
        let mut doc = json!({"parameters": [{"name": "A", "type": "integer", "value-type": "x"}]});
        params_document(&mut doc).unwrap();
        assert_eq!(doc["parameters"][0]["value-type"], "integer");
        assert!(doc["parameters"][0].get("type").is_none());
    }
}
