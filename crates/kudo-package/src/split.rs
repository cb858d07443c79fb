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
    pub object: serde_json::Value,
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
    #[error("parsing rendered YAML from {file} failed (document {document}): {source}")]
    Yaml {
        file: String,
        document: usize,
        source: PackageError,
    },
    #[error(
        "parsing rendered YAML from {file} failed (document {document}): not a Kubernetes object (needs apiVersion and kind)"
    )]
    NotAnObject { file: String, document: usize },
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
}
