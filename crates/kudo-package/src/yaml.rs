//! YAML decoding as KUDO decodes, and the Go formatting rules KUDO applies to decoded values.
//!
//! KUDO reads package files (`operator.yaml`, `params.yaml`), parameter values and rendered
//! templates with the non-strict `sigs.k8s.io/yaml` (YAML 1.1 → JSON → Go struct). What users
//! observe follows from that and is reproduced here, through the one reader
//! [`kudo_template::data::yaml_to_json`]: `yes`/`on`/`False` are booleans and `0755` is octal 493,
//! a key written twice keeps its last value (`package verify` warns, [`duplicate_keys`]), and a
//! non-string parameter default reaches the OperatorVersion as Go's `%v` of the decoded value
//! (`default: true` → `"true"`). Errors are in our words
//! ([`kudo_template::data::yaml_error_message`]), never the reader library's.

use serde::de::DeserializeOwned;

use crate::error::PackageError;

/// A YAML reading error of one package file, value or rendered document, as users read it.
pub(crate) fn reading_error(e: &kudo_template::data::DataError) -> String {
    e.to_string()
}

/// Decodes one YAML document of `file` into a JSON value as KUDO reads it (empty document →
/// `null`).
pub fn parse_value(file: &str, text: &str) -> Result<serde_json::Value, PackageError> {
    kudo_template::data::yaml_to_json(text).map_err(|e| PackageError::Yaml {
        file: file.to_string(),
        message: reading_error(&e),
    })
}

/// A key written twice in one mapping of a YAML text. KUDO (and kudo-rs) use the last value;
/// `package verify` warns about each one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// The key as decoded (quotes and escapes resolved).
    pub key: String,
    /// Line (1-based) of the occurrence whose value is used, the last one.
    pub line: usize,
    /// Line of the first occurrence.
    pub first_line: usize,
}

/// Every key written more than once in one mapping of `text` (all its documents), in order, each
/// repetition once. Read from the YAML event stream, so it sees what a decoder folds away; a text
/// the reader refuses ends the scan where it fails (its error is reported by the reader).
pub fn duplicate_keys(text: &str) -> Vec<DuplicateKey> {
    use serde_saphyr::granit_parser::{Event, Parser};
    /// A mapping being read: its keys with their lines, and whether a key comes next.
    struct Mapping {
        keys: std::collections::HashMap<String, usize>,
        key_next: bool,
    }
    let mut open: Vec<Option<Mapping>> = Vec::new();
    let mut found = Vec::new();
    // A node ended: in a mapping, a key is followed by its value and a value by the next key.
    let done = |open: &mut Vec<Option<Mapping>>| {
        if let Some(Some(m)) = open.last_mut() {
            m.key_next = !m.key_next;
        }
    };
    for event in Parser::new_from_str(text) {
        let Ok((event, span)) = event else { break };
        match event {
            Event::Scalar(value, ..) => {
                if let Some(Some(m)) = open.last_mut()
                    && m.key_next
                {
                    let line = span.start.line();
                    match m.keys.get(value.as_ref()) {
                        Some(&first_line) => found.push(DuplicateKey {
                            key: value.to_string(),
                            line,
                            first_line,
                        }),
                        None => {
                            m.keys.insert(value.to_string(), line);
                        }
                    }
                }
                done(&mut open);
            }
            Event::Alias(_) | Event::UnresolvedAlias(_) => done(&mut open),
            Event::MappingStart(..) => open.push(Some(Mapping {
                keys: Default::default(),
                key_next: true,
            })),
            Event::SequenceStart(..) => open.push(None),
            Event::MappingEnd | Event::SequenceEnd => {
                open.pop();
                done(&mut open);
            }
            _ => {}
        }
    }
    found
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
    fn duplicate_keys_are_found_with_their_lines() {
        let text = "a: 1\nb:\n  x: 1\n  \"x\": 2\n  list: [{k: 1, k: 2}]\na: 3\nc: {a: 1}\n---\na: 1\n";
        let found: Vec<(String, usize, usize)> = duplicate_keys(text)
            .into_iter()
            .map(|d| (d.key, d.line, d.first_line))
            .collect();
        assert_eq!(
            found,
            [("x".into(), 4, 3), ("k".into(), 5, 5), ("a".into(), 6, 1)]
        );
        // The value read is the last one, as sigs.k8s.io/yaml reads it.
        let v = parse_value("x.yaml", "a: 1\na: 2\n").unwrap();
        assert_eq!(v["a"], 2);
        assert!(duplicate_keys("a: [1\n").is_empty());
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
