//! Decoding template data exactly as the Go oracle (and KUDO) do, into `serde_json::Value`; then
//! [`crate::Value::from_json`] gives the template's view. Shared by `kubectl kudo template render` and
//! the differential test, so both decode data the same way.
//!
//! JSON: Go's `encoding/json` into `interface{}`; `Value::from_json` then makes every number a
//! `float64`. YAML: `sigs.k8s.io/yaml` (YAML 1.1 via yaml.v2, converted to JSON): YAML 1.1 scalars
//! (`yes`/`on`/`y` booleans, `0755` octal), non-string keys rendered as strings (`true`, `1`),
//! merge keys expanded, non-finite floats rejected (JSON cannot hold them), empty document = `{}`.

use std::collections::BTreeMap;
use std::fmt;

use crate::value::Value;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Why template data cannot be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The data is not valid JSON (`serde_json`'s error).
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    /// The data is not valid YAML (the reader's error, displayed as `line L column C: what`).
    #[error("{}", yaml_error_message(.0))]
    Yaml(#[source] serde_saphyr::Error),
    /// YAML that `sigs.k8s.io/yaml` cannot convert to JSON (a null key, a non-finite float).
    #[error("error converting YAML to JSON: {0}")]
    Convert(String),
}

/// Decodes a data file by extension (`.yaml`/`.yml` → YAML, anything else JSON). A `null` or empty
/// document becomes `{}`, as the oracle passes KUDO's (possibly empty) map.
pub fn decode_data(path: &std::path::Path, raw: &str) -> Result<serde_json::Value, DataError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let v = if ext == "yaml" || ext == "yml" {
        yaml_to_json(raw)?
    } else {
        json(raw)?
    };
    Ok(if v.is_null() {
        serde_json::Value::Object(Default::default())
    } else {
        v
    })
}

/// [`decode_data`] followed by [`Value::from_json`], in one step: JSON is decoded straight into
/// template values, without the intermediate `serde_json::Value` tree (building, converting and
/// freeing that tree was over half of a batch case's CPU time on the differential corpus, issue
/// 17). Same results and same error messages: the same `serde_json` parser drives both, only the
/// tree it builds differs. YAML still goes through [`yaml_to_json`] (its Go conversion rules live
/// there).
pub fn decode_value(path: &std::path::Path, raw: &str) -> Result<Value, DataError> {
    decode_value_as(Format::of(path), raw)
}

/// How a data file is decoded. Callers that let the user force the format (`kubectl kudo template
/// render --data-format`) pick it themselves; [`Format::of`] is the oracle's by-extension rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Go `encoding/json` into `interface{}`.
    Json,
    /// `sigs.k8s.io/yaml` (YAML 1.1, converted to JSON).
    Yaml,
}

impl Format {
    /// `.yaml`/`.yml` (any case) are YAML, anything else JSON, as the Go oracle decides.
    pub fn of(path: &std::path::Path) -> Format {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml") {
            Format::Yaml
        } else {
            Format::Json
        }
    }
}

/// [`decode_value`] with the format chosen by the caller: the one-step decoding for callers that
/// do not go by the file's extension (a forced `--data-format`, data read from stdin).
pub fn decode_value_as(format: Format, raw: &str) -> Result<Value, DataError> {
    let v = match format {
        Format::Yaml => Value::from_json(&yaml_to_json(raw)?),
        Format::Json => json_value(raw)?,
    };
    Ok(if matches!(v, Value::Nil) {
        Value::map(BTreeMap::new())
    } else {
        v
    })
}

/// JSON text as template values, as `Value::from_json(&json(raw)?)`: objects become
/// `map[string]interface {}` (duplicate keys: the last wins), arrays `[]interface {}`, every
/// number `float64`.
pub fn json_value(raw: &str) -> Result<Value, DataError> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let GoJson(v) = GoJson::deserialize(&mut de).map_err(DataError::Json)?;
    de.end().map_err(DataError::Json)?;
    Ok(v)
}

/// A JSON value decoded into a template [`Value`] (see [`json_value`]).
struct GoJson(Value);

impl<'de> Deserialize<'de> for GoJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(GoJsonVisitor)
    }
}

struct GoJsonVisitor;

impl<'de> Visitor<'de> for GoJsonVisitor {
    type Value = GoJson;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<GoJson, E> {
        Ok(GoJson(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<GoJson, E> {
        Ok(GoJson(Value::Float(v as f64)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<GoJson, E> {
        Ok(GoJson(Value::Float(v as f64)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<GoJson, E> {
        // As `serde_json::Value`: a non-finite number has no JSON value (null).
        Ok(GoJson(if v.is_finite() {
            Value::Float(v)
        } else {
            Value::Nil
        }))
    }
    fn visit_str<E>(self, v: &str) -> Result<GoJson, E> {
        Ok(GoJson(Value::str(v)))
    }
    fn visit_string<E>(self, v: String) -> Result<GoJson, E> {
        Ok(GoJson(Value::str(v)))
    }
    fn visit_unit<E>(self) -> Result<GoJson, E> {
        Ok(GoJson(Value::Nil))
    }
    fn visit_none<E>(self) -> Result<GoJson, E> {
        Ok(GoJson(Value::Nil))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<GoJson, D::Error> {
        GoJson::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<GoJson, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(GoJson(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(GoJson(Value::list(items)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GoJson, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(k) = map.next_key::<String>()? {
            let GoJson(v) = map.next_value()?;
            out.insert(k, v);
        }
        Ok(GoJson(Value::map(out)))
    }
}

/// JSON with Go `encoding/json` rules.
pub fn json(raw: &str) -> Result<serde_json::Value, DataError> {
    serde_json::from_str(raw).map_err(DataError::Json)
}

/// YAML → JSON with `sigs.k8s.io/yaml` rules; an empty document is `null`.
pub fn yaml_to_json(raw: &str) -> Result<serde_json::Value, DataError> {
    if raw.trim().is_empty() {
        return Ok(serde_json::Value::Null);
    }
    let mut opts = go_yaml_options();
    // Non-finite floats reach the visitor, which marks them: whether they fail the document depends
    // on whether a later duplicate key discards them (yaml.v2 decodes first, JSON conversion after).
    opts.non_finite_float_policy = serde_saphyr::NonFiniteFloatPolicy::PassThrough;
    let v: GoYaml = serde_saphyr::from_str_with_options(raw, opts).map_err(DataError::Yaml)?;
    match first_invalid(&v.0) {
        Some(msg) => Err(DataError::Convert(msg)),
        None => Ok(v.0),
    }
}

/// The reader options of `sigs.k8s.io/yaml` (yaml.v2, then JSON): YAML 1.1 octals (`0755` is
/// 493), the last of duplicate keys kept instead of failing, non-finite floats refused (JSON has
/// none). For typed reading of files Go tools read that way (repository indexes, kuttl steps);
/// [`yaml_to_json`] builds on them.
pub fn go_yaml_options() -> serde_saphyr::Options {
    let mut opts = serde_saphyr::Options::default();
    opts.legacy_octal_numbers = true;
    opts.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
    opts.non_finite_float_policy = serde_saphyr::NonFiniteFloatPolicy::Reject;
    opts
}

/// A YAML reading error in our words, `line L column C: what`, for every message a user sees:
/// the library's own texts name its API and options (`set DuplicateKeyPolicy in Options`, `use
/// from_str_multiple`), which a user can do nothing with.
pub fn yaml_error_message(e: &serde_saphyr::Error) -> String {
    let options = serde_saphyr::render_options! {
        formatter: &OurYamlWords,
        snippets: serde_saphyr::SnippetMode::Off,
    };
    let rendered = e.render_with_options(options);
    let first = rendered.lines().next().unwrap_or("").trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    match e.location() {
        Some(l) if l.line() > 0 => {
            let suffix = format!(" at line {}, column {}", l.line(), l.column());
            let what = first.strip_suffix(suffix.as_str()).unwrap_or(first);
            format!("line {} column {}: {what}", l.line(), l.column())
        }
        _ => first.to_string(),
    }
}

/// The messages of [`yaml_error_message`]: ours where the library speaks of itself, its
/// user-facing ones (the YAML grammar's: `mapping values are not allowed in this context`) else.
struct OurYamlWords;

impl serde_saphyr::MessageFormatter for OurYamlWords {
    fn format_message<'a>(&self, err: &'a serde_saphyr::Error) -> std::borrow::Cow<'a, str> {
        use serde_saphyr::Error as E;
        use std::borrow::Cow;
        match err {
            E::WithSnippet { error, .. } => Cow::Owned(self.format_message(error).into_owned()),
            E::DuplicateMappingKey { key: Some(k), .. } => Cow::Owned(format!("the key {k:?} appears twice")),
            E::DuplicateMappingKey { key: None, .. } => Cow::Borrowed("a key appears twice"),
            E::MultipleDocuments { .. } => Cow::Borrowed("more than one YAML document where one is expected"),
            E::UnknownAnchor { .. } => {
                Cow::Borrowed("an alias names an anchor that is not defined before it")
            }
            E::Eof { .. } => Cow::Borrowed("the document ends unexpectedly"),
            E::Budget { .. }
            | E::AliasReplayCounterOverflow { .. }
            | E::AliasReplayLimitExceeded { .. }
            | E::AliasExpansionLimitExceeded { .. }
            | E::AliasReplayStackDepthExceeded { .. } => {
                Cow::Borrowed("the document is too large or too deeply nested (or expands aliases too often)")
            }
            E::NonFiniteFloat { value, .. } => Cow::Owned(format!("{value} is not a finite number")),
            E::BinaryNotUtf8 { .. } => Cow::Borrowed("a !!binary value is not UTF-8 text"),
            other => serde_saphyr::UserMessageFormatter.format_message(other),
        }
    }
}

/// Marks a value that sigs.k8s.io/yaml cannot convert to JSON (a null key, a non-finite float).
/// The visitor cannot fail at once: in yaml.v2 a later duplicate key replaces the whole earlier
/// value before conversion, so an invalid value that is overwritten is no error.
const INVALID: &str = "\u{0}kudo-template: not convertible to JSON";

fn invalid(msg: String) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert(INVALID.to_string(), serde_json::Value::String(msg));
    serde_json::Value::Object(m)
}

/// The first invalid marker left in the decoded document, if any.
fn first_invalid(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(serde_json::Value::String(msg)) = m.get(INVALID) {
                return Some(msg.clone());
            }
            m.values().find_map(first_invalid)
        }
        serde_json::Value::Array(a) => a.iter().find_map(first_invalid),
        _ => None,
    }
}

/// A YAML node converted the way `sigs.k8s.io/yaml` converts it to JSON.
struct GoYaml(serde_json::Value);

impl<'de> Deserialize<'de> for GoYaml {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(GoYamlVisitor)
    }
}

struct GoYamlVisitor;

impl<'de> Visitor<'de> for GoYamlVisitor {
    type Value = GoYaml;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<GoYaml, E> {
        Ok(GoYaml(v.into()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<GoYaml, E> {
        Ok(GoYaml(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<GoYaml, E> {
        Ok(GoYaml(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<GoYaml, E> {
        Ok(GoYaml(match serde_json::Number::from_f64(v) {
            Some(n) => n.into(),
            None => invalid(format!("json: unsupported value: {v}")),
        }))
    }
    fn visit_str<E>(self, v: &str) -> Result<GoYaml, E> {
        Ok(GoYaml(v.into()))
    }
    fn visit_string<E>(self, v: String) -> Result<GoYaml, E> {
        Ok(GoYaml(v.into()))
    }
    fn visit_unit<E>(self) -> Result<GoYaml, E> {
        Ok(GoYaml(serde_json::Value::Null))
    }
    fn visit_none<E>(self) -> Result<GoYaml, E> {
        Ok(GoYaml(serde_json::Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<GoYaml, D::Error> {
        GoYaml::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<GoYaml, A::Error> {
        let mut items = Vec::new();
        while let Some(GoYaml(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(GoYaml(serde_json::Value::Array(items)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GoYaml, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(GoYaml(k)) = map.next_key()? {
            let GoYaml(v) = map.next_value()?;
            if k.is_null() {
                // sigs.k8s.io/yaml refuses a null key (`~:`, `null:`) rather than inventing a name;
                // the whole map is invalid (unless a later duplicate key replaces it).
                out.insert(
                    INVALID.to_string(),
                    "Unsupported map key of type: <nil> (a null key has no JSON spelling)".into(),
                );
                continue;
            }
            out.insert(key_string(&k), v);
        }
        Ok(GoYaml(serde_json::Value::Object(out)))
    }
}

/// How sigs.k8s.io/yaml spells a non-string mapping key in JSON.
fn key_string(k: &serde_json::Value) -> String {
    match k {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Number(n) => {
            if n.is_f64() {
                go_float_key(n.as_f64().unwrap_or(0.0))
            } else {
                n.to_string()
            }
        }
        other => other.to_string(),
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`.
fn go_float_key(f: f64) -> String {
    let exp = if f == 0.0 {
        0
    } else {
        f.abs().log10().floor() as i32
    };
    if (-4..6).contains(&exp) {
        format!("{f}")
    } else {
        let s = format!("{f:e}");
        let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        format!("{mant}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
    }
}

#[cfg(test)]
mod decode_value_tests {
    use super::*;
    use std::path::Path;

    /// `decode_value` against the two-step path it replaces, by `Debug` (which tells `-0` from
    /// `0` and shows map contents): values and error messages must be identical.
    fn same(name: &str, raw: &str) {
        let path = Path::new(name);
        let two_step = decode_data(path, raw).map(|v| Value::from_json(&v));
        let direct = decode_value(path, raw);
        assert_eq!(format!("{direct:?}"), format!("{two_step:?}"), "{name}: {raw}");
    }

    #[test]
    fn json_edge_cases_decode_as_the_two_step_path() {
        for raw in [
            "{}",
            "null",
            "",
            "  ",
            "[]",
            "[1, -1, 0, -0, -0.0, 1.5e300, 18446744073709551615, 18446744073709551616, -9223372036854775809]",
            r#"{"a": 1, "a": 2, "b": {"c": [true, false, null, "x"]}}"#,
            r#"{"s": "\u00e9\n\t\"\\\/", "e": "", "k\u0000": 1}"#,
            r#"{"big": 1e400}"#,
            r#"{"a": 1,}"#,
            r#"{"a": 1} x"#,
            r#""just a string""#,
            "3",
            r#"{"lone": "\ud800"}"#,
            &format!("{}1{}", "[".repeat(200), "]".repeat(200)),
        ] {
            same("d.json", raw);
        }
        same("d.yaml", "a: 1\nb: [yes, 0755, ~]\n");
        same("d.yml", "");
    }

    #[test]
    fn a_forced_format_decodes_as_that_extension() {
        assert_eq!(Format::of(Path::new("d.YML")), Format::Yaml);
        assert_eq!(Format::of(Path::new("d.Yaml")), Format::Yaml);
        assert_eq!(Format::of(Path::new("d")), Format::Json);
        for raw in ["a: yes\nb: 0755\n", "{\"a\": 1}", "", "[1, x"] {
            for (format, like) in [(Format::Yaml, "d.yaml"), (Format::Json, "d.json")] {
                let forced = decode_value_as(format, raw);
                let by_ext = decode_value(Path::new(like), raw);
                assert_eq!(format!("{forced:?}"), format!("{by_ext:?}"), "{format:?}: {raw}");
            }
        }
    }

    #[test]
    fn corpus_data_files_decode_as_the_two_step_path() {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
        let mut n = 0;
        for dir in std::fs::read_dir(&corpus).expect("corpus") {
            let dir = dir.expect("entry").path();
            if !dir.is_dir() {
                continue;
            }
            for f in std::fs::read_dir(&dir).expect("category") {
                let p = f.expect("entry").path();
                let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
                if matches!(ext, "json" | "yaml" | "yml") {
                    let raw = std::fs::read_to_string(&p).expect("readable");
                    same(&p.display().to_string(), &raw);
                    n += 1;
                }
            }
        }
        assert!(n > 10, "only {n} data files found under {}", corpus.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a user reads when a YAML file cannot be read: where, and what, in our words; nothing
    /// about the reader library's options or functions.
    #[test]
    fn yaml_errors_are_in_our_words() {
        let strict = |text: &str| serde_saphyr::from_str::<serde_json::Value>(text).unwrap_err();
        let rows = [
            (
                strict("a: 1\na: 2\n"),
                "line 2 column 1: the key \"a\" appears twice",
            ),
            (
                strict("a: 1\n---\nb: 2\n"),
                "line 3 column 1: more than one YAML document where one is expected",
            ),
            (strict("a: [1, 2\n"), "line 1 column 4: unclosed bracket '['"),
            (
                strict("a: *x\n"),
                "line 1 column 4: an alias names an anchor that is not defined before it",
            ),
            (
                strict("a: .nan\n"),
                "line 1 column 4: .nan is not a finite number",
            ),
            (
                strict("a: b: c\n"),
                "line 1 column 5: mapping values are not allowed in this context",
            ),
        ];
        for (e, want) in rows {
            assert_eq!(yaml_error_message(&e), want);
            assert_eq!(DataError::Yaml(e).to_string(), want);
        }
    }

    #[test]
    fn duplicate_keys_keep_the_last_value_as_sigs_yaml_does() {
        let v = yaml_to_json("a: 1\nb: {x: 1, x: 2}\na: 3\n").unwrap();
        assert_eq!(v, serde_json::json!({"a": 3, "b": {"x": 2}}));
    }
}
