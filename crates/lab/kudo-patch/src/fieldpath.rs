//! Field sets as kube-apiserver records them in `metadata.managedFields[].fieldsV1`.
//!
//! A field set is a trie of path elements:
//! * `f:<name>` — a field of an object (struct field or map key);
//! * `k:<json object>` — an item of an associative list, by its key fields (sorted by name);
//! * `v:<json value>` — an item of a set;
//! * `i:<index>` — an item by position (not used by built-in types, parsed for robustness).
//!
//! In FieldsV1 JSON a path that is itself a member *and* has members below it carries a
//! `".": {}` entry; a member without children is written as `{}`. Children are written in
//! structured-merge-diff order: all `f:` first (by name), then `k:`, `v:` and `i:`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// A scalar (or, rarely, composite) JSON value used inside a path element, ordered the way
/// structured-merge-diff orders values: numbers (numerically) < strings < booleans < lists
/// < maps < null.
#[derive(Debug, Clone)]
pub struct KeyValue(pub Value);

impl KeyValue {
    fn rank(&self) -> u8 {
        match &self.0 {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
}

impl std::hash::Hash for KeyValue {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Consistent with `Ord`: numbers that compare equal hash equal.
        self.rank().hash(state);
        match &self.0 {
            Value::Number(n) => n.as_f64().unwrap_or(0.0).to_bits().hash(state),
            Value::String(s) => s.hash(state),
            Value::Bool(b) => b.hash(state),
            Value::Null => {}
            other => other.to_string().hash(state),
        }
    }
}

impl PartialEq for KeyValue {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for KeyValue {}
impl PartialOrd for KeyValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for KeyValue {
    fn cmp(&self, other: &Self) -> Ordering {
        match (&self.0, &other.0) {
            (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => a.as_f64().unwrap_or(0.0).total_cmp(&b.as_f64().unwrap_or(0.0)),
            },
            (Value::String(a), Value::String(b)) => a.cmp(b),
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (Value::Null, Value::Null) => Ordering::Equal,
            (a, b) if self.rank() == other.rank() => a.to_string().cmp(&b.to_string()),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// An object field or map key.
    Field(String),
    /// An associative-list item, by its key fields sorted by name.
    Key(Vec<(String, KeyValue)>),
    /// A set item, by value.
    Value(KeyValue),
    /// A list item by position.
    Index(usize),
}

impl PathElement {
    /// The FieldsV1 key spelling (`f:name`, `k:{...}`, `v:...`, `i:N`).
    pub fn to_fields_v1_key(&self) -> String {
        match self {
            PathElement::Field(n) => format!("f:{n}"),
            PathElement::Key(fields) => {
                let mut m = Map::new();
                for (k, v) in fields {
                    m.insert(k.clone(), v.0.clone());
                }
                format!("k:{}", Value::Object(m))
            }
            PathElement::Value(v) => format!("v:{}", v.0),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a FieldsV1 key.
    pub fn from_fields_v1_key(s: &str) -> Result<PathElement, FieldsV1Error> {
        if let Some(n) = s.strip_prefix("f:") {
            return Ok(PathElement::Field(n.to_string()));
        }
        if let Some(j) = s.strip_prefix("k:") {
            let v: Value = serde_json::from_str(j).map_err(|source| FieldsV1Error::Key {
                element: s.to_string(),
                source,
            })?;
            let obj = v
                .as_object()
                .ok_or_else(|| FieldsV1Error::KeyNotObject(s.to_string()))?;
            let mut fields: Vec<(String, KeyValue)> = obj
                .iter()
                .map(|(k, v)| (k.clone(), KeyValue(v.clone())))
                .collect();
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            return Ok(PathElement::Key(fields));
        }
        if let Some(j) = s.strip_prefix("v:") {
            let v: Value = serde_json::from_str(j).map_err(|source| FieldsV1Error::Value {
                element: s.to_string(),
                source,
            })?;
            return Ok(PathElement::Value(KeyValue(v)));
        }
        if let Some(i) = s.strip_prefix("i:") {
            let i = i.parse().map_err(|source| FieldsV1Error::Index {
                element: s.to_string(),
                source,
            })?;
            return Ok(PathElement::Index(i));
        }
        Err(FieldsV1Error::UnknownElement(s.to_string()))
    }
}

/// Why a `fieldsV1` value cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum FieldsV1Error {
    /// A `k:` element's JSON does not parse.
    #[error("invalid key element {element:?}: {source}")]
    Key {
        /// The element as written.
        element: String,
        /// The JSON parser's error.
        source: serde_json::Error,
    },
    /// A `k:` element's JSON is not an object of key fields (the element).
    #[error("invalid key element {0:?}: not an object")]
    KeyNotObject(String),
    /// A `v:` element's JSON does not parse.
    #[error("invalid value element {element:?}: {source}")]
    Value {
        /// The element as written.
        element: String,
        /// The JSON parser's error.
        source: serde_json::Error,
    },
    /// An `i:` element's index is not a number.
    #[error("invalid index element {element:?}: {source}")]
    Index {
        /// The element as written.
        element: String,
        /// The integer parser's error.
        source: std::num::ParseIntError,
    },
    /// An element without one of the prefixes `f:`, `k:`, `v:`, `i:` (the element).
    #[error("unknown path element {0:?}")]
    UnknownElement(String),
    /// The `fieldsV1` value is not a JSON object.
    #[error("FieldsV1 must be a JSON object")]
    NotAnObject,
    /// The value under a path element is not a JSON object (the element's key).
    #[error("FieldsV1 entry {0:?} must be an object")]
    EntryNotObject(String),
}

impl std::fmt::Display for PathElement {
    /// structured-merge-diff's path notation, used in conflict messages:
    /// `.name`, `[name="nginx",port=80]`, `[="value"]`, `[3]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathElement::Field(n) => write!(f, ".{n}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={}", v.0)).collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", v.0),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the object root.
pub type Path = Vec<PathElement>;

/// Formats a path in structured-merge-diff notation (`.spec.containers[name="a"].image`).
pub fn path_to_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of field paths, stored as a trie.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the set has no paths.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds a path (the empty path is ignored: the root is never a member).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => match self.children.get_mut(first) {
                Some(child) => child.insert(rest),
                None => {
                    let mut child = FieldSet::new();
                    child.insert(rest);
                    self.children.insert(first.clone(), child);
                }
            },
        }
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether `path` is a member or any member lies below it.
    pub fn has_prefix(&self, path: &[PathElement]) -> bool {
        match path {
            [] => !self.is_empty(),
            [last] => self.members.contains(last) || self.children.contains_key(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has_prefix(rest)),
        }
    }

    /// The sub-set of members below element `pe` (paths relative to it).
    pub fn child(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    /// Whether element `pe` itself is a member at this level.
    pub fn has_member(&self, pe: &PathElement) -> bool {
        self.members.contains(pe)
    }

    /// Set union.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// Members of `self` not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.difference(&other.members).cloned().collect();
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(pe.clone(), d);
            }
        }
        out
    }

    /// Members in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.intersection(&other.members).cloned().collect();
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    out.children.insert(pe.clone(), i);
                }
            }
        }
        out
    }

    /// Adds element `pe` at this level: as a member if `member`, with `sub` (paths relative
    /// to `pe`) below it. Building sets level by level avoids re-walking from the root.
    pub fn put(&mut self, pe: PathElement, member: bool, sub: FieldSet) {
        if sub.is_empty() {
            if member {
                self.members.insert(pe);
            }
            return;
        }
        if member {
            self.members.insert(pe.clone());
        }
        match self.children.get_mut(&pe) {
            Some(existing) => *existing = existing.union(&sub),
            None => {
                self.children.insert(pe, sub);
            }
        }
    }

    /// Removes `pe` as a member at this level (members below it stay).
    pub fn remove_member(&mut self, pe: &PathElement) {
        self.members.remove(pe);
    }

    /// Runs `f` on the sub-set below `pe`, if any, dropping it when it becomes empty.
    pub fn with_child_mut(&mut self, pe: &PathElement, f: impl FnOnce(&mut FieldSet)) {
        if let Some(child) = self.children.get_mut(pe) {
            f(child);
            if child.is_empty() {
                self.children.remove(pe);
            }
        }
    }

    /// Keeps only the top-level elements (and everything below them) for which `keep` holds.
    pub fn retain_elements(&mut self, mut keep: impl FnMut(&PathElement) -> bool) {
        self.members.retain(|pe| keep(pe));
        self.children.retain(|pe, _| keep(pe));
    }

    /// Removes every member under (and including) the top-level element `pe`.
    pub fn remove_element(&mut self, pe: &PathElement) {
        self.members.remove(pe);
        self.children.remove(pe);
    }

    /// All member paths, in FieldsV1 order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        let keys: BTreeSet<&PathElement> = self.members.iter().chain(self.children.keys()).collect();
        for pe in keys {
            prefix.push(pe.clone());
            if self.members.contains(pe) {
                out.push(prefix.clone());
            }
            if let Some(c) = self.children.get(pe) {
                c.collect(prefix, out);
            }
            prefix.pop();
        }
    }

    /// Serializes to FieldsV1 JSON.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        let keys: BTreeSet<&PathElement> = self.members.iter().chain(self.children.keys()).collect();
        for pe in keys {
            let v = match self.children.get(pe) {
                Some(c) => {
                    let mut inner = Map::new();
                    if self.members.contains(pe) {
                        inner.insert(".".to_string(), Value::Object(Map::new()));
                    }
                    if let Value::Object(rest) = c.to_fields_v1() {
                        inner.extend(rest);
                    }
                    Value::Object(inner)
                }
                None => Value::Object(Map::new()),
            };
            m.insert(pe.to_fields_v1_key(), v);
        }
        Value::Object(m)
    }

    /// Parses FieldsV1 JSON.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, FieldsV1Error> {
        let obj = v.as_object().ok_or(FieldsV1Error::NotAnObject)?;
        let mut out = FieldSet::new();
        for (k, child) in obj {
            if k == "." {
                continue;
            }
            let pe = PathElement::from_fields_v1_key(k)?;
            let cobj = child
                .as_object()
                .ok_or_else(|| FieldsV1Error::EntryNotObject(k.clone()))?;
            if cobj.is_empty() || cobj.contains_key(".") {
                out.members.insert(pe.clone());
            }
            let sub = FieldSet::from_fields_v1(child)?;
            if !sub.is_empty() {
                out.children.insert(pe, sub);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_v1_round_trip_and_order() {
        let v = json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:containers": {
                "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}
            }}
        });
        let s = FieldSet::from_fields_v1(&v).unwrap();
        assert_eq!(s.to_fields_v1(), v);
        assert_eq!(
            serde_json::to_string(&s.to_fields_v1()).unwrap(),
            serde_json::to_string(&v).unwrap()
        );
    }

    #[test]
    fn numeric_keys_sort_numerically() {
        let mut s = FieldSet::new();
        for port in [8080, 443, 80] {
            s.insert(&[PathElement::Key(vec![("port".into(), KeyValue(json!(port)))])]);
        }
        let keys: Vec<String> = s.to_fields_v1().as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            vec![
                "k:{\"port\":80}".to_string(),
                "k:{\"port\":443}".to_string(),
                "k:{\"port\":8080}".to_string()
            ]
        );
    }

    #[test]
    fn path_notation() {
        let p = vec![
            PathElement::Field("spec".into()),
            PathElement::Key(vec![("name".into(), KeyValue(json!("a")))]),
            PathElement::Value(KeyValue(json!("x"))),
        ];
        assert_eq!(path_to_string(&p), ".spec[name=\"a\"][=\"x\"]");
    }

    #[test]
    fn set_algebra() {
        let f = |s: &str| PathElement::Field(s.into());
        let mut a = FieldSet::new();
        a.insert(&[f("a"), f("b")]);
        a.insert(&[f("c")]);
        let mut b = FieldSet::new();
        b.insert(&[f("a"), f("b")]);
        assert_eq!(a.intersection(&b), b);
        let d = a.difference(&b);
        assert!(d.has(&[f("c")]) && !d.has(&[f("a"), f("b")]));
        assert!(a.has_prefix(&[f("a")]) && !a.has(&[f("a")]));
        assert_eq!(b.union(&d), a);
    }
}
