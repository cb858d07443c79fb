//! Splitting rendered template output into Kubernetes objects, the way KUDO does.
//!
//! KUDO splits on the plain string `"\n---"` (not a YAML-aware document stream — chosen to avoid a
//! scanner size limit) and skips documents that are empty or contain only comments. We keep that
//! rule so a template renders into exactly the objects KUDO would apply.

use crate::error::PackageError;

/// One decoded object with where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// 1-based index among the non-empty documents of the file.
    pub index: usize,
    /// The decoded object (a mapping with `apiVersion` and `kind`).
    pub object: serde_json::Value,
}

/// The documents of rendered texts parsed lately, by a fingerprint of the file name and text.
///
/// A running plan renders its templates again at every pass, and the text is the same until a
/// parameter or the OperatorVersion changes; parsing it as YAML was most of a render (three
/// quarters of it in the real-cluster scale bench). The documents are kept as compact
/// JSON text (a parsed tree is ~5× larger; decoding JSON is many times cheaper than parsing YAML).
/// The fingerprint is two SipHashes with per-process random keys (128 bits no one outside the
/// process can aim at), so two different texts are never taken for each other in practice. Only
/// successful parses are kept; beyond its budget of bytes ([`Self::MAX_BYTES`] by default) the
/// memo starts over (no LRU). The budget is in bytes rather than entries because one entry per
/// template and Instance must fit: at `scale 10000` a bound of 4,096 entries was reached every
/// few seconds and the memo answered almost nothing (an Instance's passes are minutes apart when
/// 10,000 plans run at once), so every pass parsed YAML again.
pub struct ParseMemo {
    keys: (std::hash::RandomState, std::hash::RandomState),
    budget: usize,
    parsed: std::sync::Mutex<Remembered>,
}

/// Fingerprint → each document's index and all the objects as one JSON array; and the bytes
/// the entries take, roughly.
#[derive(Default)]
struct Remembered {
    entries: std::collections::HashMap<(u64, u64), (Vec<usize>, Box<str>)>,
    bytes: usize,
}

impl Default for ParseMemo {
    fn default() -> ParseMemo {
        ParseMemo::with_budget(Self::MAX_BYTES)
    }
}

impl ParseMemo {
    /// Default bound on the remembered texts' size: ~45,000 renders of first-operator's
    /// Deployment (~370 bytes each), all of `scale 10000`'s.
    pub const MAX_BYTES: usize = 16 << 20;

    /// A memo that starts over once its entries take more than `budget` bytes.
    pub fn with_budget(budget: usize) -> ParseMemo {
        ParseMemo {
            keys: Default::default(),
            budget,
            parsed: Default::default(),
        }
    }

    /// How many texts are remembered.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Remembered> {
        self.parsed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`parse_objects`], answered from the memo when this text was parsed before.
    pub fn parse(&self, file: &str, text: &str) -> Result<Vec<Document>, ObjectsError> {
        use std::hash::BuildHasher;
        let key = (
            self.keys.0.hash_one((file, text)),
            self.keys.1.hash_one((file, text)),
        );
        let remembered = self.lock().entries.get(&key).and_then(|(indices, json)| {
            let objects: Vec<serde_json::Value> = serde_json::from_str(json).ok()?;
            let docs = indices.iter().zip(objects);
            Some(docs.map(|(&index, object)| Document { index, object }).collect())
        });
        if let Some(docs) = remembered {
            return Ok(docs);
        }
        let docs = parse_objects(file, text)?;
        let objects: Vec<&serde_json::Value> = docs.iter().map(|d| &d.object).collect();
        if let Ok(json) = serde_json::to_string(&objects) {
            // the text, the indices, the key and the table's own slot
            let size = json.len() + docs.len() * 8 + 64;
            let mut parsed = self.lock();
            if parsed.bytes + size > self.budget {
                *parsed = Remembered::default();
            }
            let indices = docs.iter().map(|d| d.index).collect();
            if parsed
                .entries
                .insert(key, (indices, json.into_boxed_str()))
                .is_none()
            {
                parsed.bytes += size;
            }
        }
        Ok(docs)
    }
}

/// Splits `text` into the non-empty documents (raw text), KUDO's way.
pub fn split_documents(text: &str) -> Vec<&str> {
    text.split("\n---")
        .filter(|doc| {
            doc.lines().any(|l| {
                let t = l.trim();
                !t.is_empty() && !t.starts_with('#') && t != "---"
            })
        })
        .collect()
}

/// Why rendered output is not a list of Kubernetes objects ([`parse_objects`]).
#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    /// A document of the output is not valid YAML.
    #[error("parsing rendered YAML from {file} failed (document {document}): {source}")]
    Yaml {
        /// The template key the output was rendered from.
        file: String,
        /// 1-based index of the failing document among the non-empty ones.
        document: usize,
        /// The YAML reader's error.
        source: PackageError,
    },
    /// A document is valid YAML but not a mapping with `apiVersion` and `kind`.
    #[error(
        "parsing rendered YAML from {file} failed (document {document}): not a Kubernetes object (needs apiVersion and kind)"
    )]
    NotAnObject {
        /// The template key the output was rendered from.
        file: String,
        /// 1-based index of the failing document among the non-empty ones.
        document: usize,
    },
}

/// Splits and decodes rendered output of template `file` into objects (each must be a mapping with
/// `apiVersion` and `kind`).
pub fn parse_objects(file: &str, text: &str) -> Result<Vec<Document>, ObjectsError> {
    let mut out = Vec::new();
    for (i, doc) in split_documents(text).into_iter().enumerate() {
        let n = i + 1;
        // A document that begins right after the split point still carries the rest of the
        // separator line (`--- # comment`), which YAML accepts as a document start.
        let v = crate::yaml::parse_value(file, doc).map_err(|source| ObjectsError::Yaml {
            file: file.to_string(),
            document: n,
            source,
        })?;
        let ok = v.as_object().is_some_and(|o| {
            o.get("kind")
                .and_then(|k| k.as_str())
                .is_some_and(|k| !k.is_empty())
                && o.get("apiVersion")
                    .and_then(|k| k.as_str())
                    .is_some_and(|k| !k.is_empty())
        });
        if !ok {
            return Err(ObjectsError::NotAnObject {
                file: file.to_string(),
                document: n,
            });
        }
        out.push(Document { index: n, object: v });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_kudo() {
        let t = "a: 1\n---\n# only a comment\n---\n\n---\nb: 2\n";
        assert_eq!(split_documents(t), vec!["a: 1", "\nb: 2\n"]);
        let objs = parse_objects(
            "x.yaml",
            "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: B\n",
        )
        .unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[1].object["kind"], "B");
        assert!(
            parse_objects("x.yaml", "foo: bar\n")
                .unwrap_err()
                .to_string()
                .contains("x.yaml")
        );
    }

    #[test]
    fn the_memo_answers_like_a_fresh_parse_and_keeps_no_errors() {
        let memo = ParseMemo::default();
        let a = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nspec: {n: 3, f: 1.5, e: 1.0e+3, b: true, z: ~, big: 12345678901234567, l: [a, -1]}\n---\n# c\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n";
        let b = a.replace("name: a", "name: b");
        for _ in 0..2 {
            assert_eq!(
                memo.parse("x.yaml", a).unwrap(),
                parse_objects("x.yaml", a).unwrap()
            );
            assert_eq!(
                memo.parse("x.yaml", &b).unwrap(),
                parse_objects("x.yaml", &b).unwrap()
            );
        }
        assert_ne!(
            memo.parse("x.yaml", a).unwrap(),
            memo.parse("x.yaml", &b).unwrap()
        );
        for _ in 0..2 {
            let err = memo.parse("bad.yaml", "kind: [").unwrap_err().to_string();
            assert!(err.contains("bad.yaml"), "{err}");
        }
        assert_eq!(memo.len(), 2);
    }

    #[test]
    fn the_memo_starts_over_when_full() {
        let memo = ParseMemo::with_budget(1000);
        let text = |i| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i:03}\n");
        // each entry counts its JSON (67 bytes), one index (8) and 64: 139 bytes, 7 fit
        for i in 0..7 {
            memo.parse("x.yaml", &text(i)).unwrap();
        }
        memo.parse("x.yaml", &text(0)).unwrap();
        assert_eq!(memo.len(), 7, "a repeat takes no room");
        memo.parse("x.yaml", &text(7)).unwrap();
        assert_eq!(memo.len(), 1);
    }
}
