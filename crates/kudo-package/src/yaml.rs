//! YAML decoding with Kubernetes' YAML 1.1 typing, and the Go formatting rules KUDO applies to
//! decoded values.
//!
//! KUDO reads package files with `sigs.k8s.io/yaml` (YAML 1.1 → JSON → Go struct). Two things users
//! observe follow from that and are reproduced here: `yes`/`on`/`False` are booleans and `0755` is
//! octal 493, and a non-string parameter default reaches the OperatorVersion as Go's `%v` of the
//! decoded value (`default: true` → `"true"`).

use serde::de::DeserializeOwned;

use crate::error::PackageError;

/// Decoder options shared by every package file: YAML 1.1 octals as Kubernetes reads them.
pub fn options() -> serde_saphyr::Options {
    serde_saphyr::options! { legacy_octal_numbers: true }
}

/// First line of a saphyr error without the `error: ` prefix; the rest is a source snippet that
/// would clutter one-line CLI messages.
pub(crate) fn short_error(e: &impl std::fmt::Display) -> String {
    let s = e.to_string();
    let first = s.lines().next().unwrap_or("").trim();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

/// Decodes one YAML document of `file` into a JSON value (empty document → `null`).
pub fn parse_value(file: &str, text: &str) -> Result<serde_json::Value, PackageError> {
    serde_saphyr::from_str_with_options::<serde_json::Value>(text, options()).map_err(|e| {
        PackageError::Yaml {
            file: file.to_string(),
            message: short_error(&e),
        }
    })
}

/// Converts a decoded document into a typed model, naming the offending field path on failure.
pub fn from_value<T: DeserializeOwned>(file: &str, value: serde_json::Value) -> Result<T, PackageError> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        PackageError::Field {
            file: file.to_string(),
            field: path,
            message: e.into_inner().to_string(),
        }
    })
}

/// Go's `fmt.Sprint(float64)` (`strconv.FormatFloat(f, 'g', -1, 64)`): shortest round-trip
/// digits, exponent form when the decimal exponent is < -4 or >= 6 — so `default: 1000000` reaches
/// the OperatorVersion as `"1e+06"`, exactly as KUDO stores it.
pub fn go_float(f: f64) -> String {
    // The template engine's implementation, checked against Go by its oracle tests.
    kudo_template::sprig::conv::format_float_g(f)
}

/// Go's `fmt.Sprint` (`%v`) of a value decoded from YAML into `interface{}`.
pub fn go_sprint(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "<nil>".into(),
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.to_string()
            } else if let Some(u) = n.as_u64() {
                u.to_string()
            } else {
                go_float(n.as_f64().unwrap_or(0.0))
            }
        }
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(go_sprint).collect();
            format!("[{}]", parts.join(" "))
        }
        serde_json::Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", k, go_sprint(&o[*k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// Go's `%s` of a decoded value: strings print as themselves, anything else in Go's
/// `%!s(type=value)` form (used verbatim in some of KUDO's messages).
pub fn go_s(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "%!s(<nil>)".into(),
        serde_json::Value::Bool(b) => format!("%!s(bool={b})"),
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => format!("%!s(int={n})"),
        serde_json::Value::Number(_) => format!("%!s(float64={})", go_sprint(v)),
        serde_json::Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(go_s).collect();
            format!("[{}]", parts.join(" "))
        }
        serde_json::Value::Object(_) => go_sprint(v),
    }
}

fn sorted(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let mut m = serde_json::Map::new();
            for k in keys {
                m.insert(k.clone(), sorted(&o[k]));
            }
            serde_json::Value::Object(m)
        }
        serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// YAML text of an `array`/`map` parameter value, as KUDO stores such defaults in the
/// OperatorVersion (keys sorted, block style, trailing newline).
pub fn to_yaml(v: &serde_json::Value) -> String {
    serde_saphyr::to_string(&sorted(v)).unwrap_or_else(|_| serde_json::to_string(v).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_float_matches_go_sprint() {
        // Expected strings are what Go's fmt.Sprint prints for these float64 values.
        assert_eq!(go_float(3.0), "3");
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(10000000.0), "1e+07");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(-2.25), "-2.25");
    }

    #[test]
    fn yaml_1_1_typing() {
        let v = parse_value("x.yaml", "a: 0755\nb: yes\nc: False\nd: '0755'\n").unwrap();
        assert_eq!(v["a"], 493);
        assert_eq!(v["b"], true);
        assert_eq!(v["c"], false);
        assert_eq!(v["d"], "0755");
    }
}
