//! Turning test directories into test cases and steps.
//!
//! A test case is a directory; its files named `NN-<name>.yaml` form step `NN`. Within a step,
//! files whose first name component is `assert` hold objects that must eventually match, `errors`
//! objects that must not, and every other file objects to apply. Several files may share an index
//! (they are read in name order). Files without an index, and files not ending in `.yaml`, are not
//! part of any step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::Error;
use crate::config::{TestAssert, TestStep, is_harness_kind};

/// What a step file contributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    /// Objects to create or update.
    Apply,
    /// Objects that must eventually match.
    Assert,
    /// Objects that must not exist (or not match).
    Errors,
}

/// A step file name, decomposed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileName {
    /// The numeric prefix, if any.
    pub index: Option<i64>,
    /// The role of the file.
    pub file_type: FileType,
    /// For apply files, the name after the index (used as the step name).
    pub step_name: String,
}

/// Splits `NN-name[-more].yaml` the way kuttl does: the first dash-separated component after the
/// index decides the type (`assert`, `errors`, anything else = apply). Returns `None` for names
/// that do not follow the pattern (dots inside the name, empty components).
pub fn parse_file_name(name: &str) -> Option<FileName> {
    let stem = name.strip_suffix(".yaml").unwrap_or(name);
    if stem.is_empty() || stem.contains('.') {
        return None;
    }
    let (index, rest) = match stem.split_once('-') {
        Some((digits, rest)) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            (Some(digits.parse::<i64>().ok()?), rest)
        }
        _ => (None, stem),
    };
    let first = rest.split('-').next().unwrap_or("");
    if first.is_empty() {
        return None;
    }
    let file_type = match first.to_ascii_lowercase().as_str() {
        "assert" => FileType::Assert,
        "errors" => FileType::Errors,
        _ => FileType::Apply,
    };
    Some(FileName {
        index,
        file_type,
        step_name: rest.to_string(),
    })
}

/// One object read from a file, with where it came from for messages.
#[derive(Debug, Clone, PartialEq)]
pub struct SourcedObject {
    /// The object as written (before the harness fills in the namespace).
    pub object: Value,
    /// The file it was read from.
    pub source: PathBuf,
}

impl SourcedObject {
    /// `Kind namespace/name` (or `Kind name`, or `Kind` for selector-only objects).
    pub fn describe(&self) -> String {
        describe_object(&self.object)
    }
}

/// `Kind namespace/name` for logs.
pub fn describe_object(obj: &Value) -> String {
    let kind = obj["kind"].as_str().unwrap_or("?");
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
    match (ns.is_empty(), name.is_empty()) {
        (_, true) => kind.to_string(),
        (true, false) => format!("{kind} {name}"),
        (false, false) => format!("{kind} {ns}/{name}"),
    }
}

/// One step of a test case.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// The numeric prefix shared by the step's files.
    pub index: i64,
    /// From the `TestStep`'s metadata, else the first apply file's name, else the first file's.
    pub name: String,
    /// Objects to create or update.
    pub apply: Vec<SourcedObject>,
    /// Objects that must eventually match.
    pub asserts: Vec<SourcedObject>,
    /// Objects that must not match.
    pub errors: Vec<SourcedObject>,
    /// The step's `TestStep`, if one was given.
    pub test_step: Option<TestStep>,
    /// The step's `TestAssert`, if one was given.
    pub test_assert: Option<TestAssert>,
}

impl Step {
    /// `NN-name`, as used in logs and reports.
    pub fn label(&self) -> String {
        format!("{:02}-{}", self.index, self.name)
    }
}

/// A test case: a directory of steps.
#[derive(Debug, Clone, PartialEq)]
pub struct TestCase {
    /// The directory name.
    pub name: String,
    /// The directory; commands run here and relative paths resolve against it.
    pub dir: PathBuf,
    /// Steps in index order.
    pub steps: Vec<Step>,
}

/// Parses a YAML stream into its non-empty documents.
pub fn parse_documents(text: &str, origin: &Path) -> Result<Vec<Value>, Error> {
    // As kuttl reads them (sigs.k8s.io/yaml: YAML 1.1 octals, a key written twice keeps its last
    // value), with errors in our words.
    let opts = kudo_template::data::go_yaml_options();
    let docs: Vec<Value> =
        serde_saphyr::from_multiple_with_options(text, opts).map_err(|e| Error::Invalid {
            path: origin.into(),
            message: format!("invalid YAML: {}", kudo_template::data::yaml_error_message(&e)),
        })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Reads a file of Kubernetes objects: every document must be a mapping with `apiVersion` and
/// `kind`.
pub fn read_objects(path: &Path) -> Result<Vec<SourcedObject>, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.into(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, doc) in parse_documents(&text, path)?.into_iter().enumerate() {
        let ok = doc.is_object()
            && doc["apiVersion"].as_str().is_some_and(|s| !s.is_empty())
            && doc["kind"].as_str().is_some_and(|s| !s.is_empty());
        if !ok {
            return Err(Error::Invalid {
                path: path.into(),
                message: format!(
                    "document {} is not a Kubernetes object (needs apiVersion and kind)",
                    i + 1
                ),
            });
        }
        out.push(SourcedObject {
            object: doc,
            source: path.to_path_buf(),
        });
    }
    Ok(out)
}

/// The `*.yaml` files of a path: the file itself, or a directory's files in name order.
pub fn yaml_files(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let meta = std::fs::metadata(path).map_err(|source| Error::Io {
        path: path.into(),
        source,
    })?;
    if meta.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|source| Error::Io {
            path: path.into(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    Ok(files)
}

/// The test cases of a test directory: each subdirectory, in name order.
pub fn discover_cases(test_dir: &Path) -> Result<Vec<TestCase>, Error> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(test_dir)
        .map_err(|source| Error::Io {
            path: test_dir.into(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.iter().map(|d| load_case(d)).collect()
}

/// Reads one test case directory.
pub fn load_case(dir: &Path) -> Result<TestCase, Error> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut by_index: BTreeMap<i64, Vec<(PathBuf, FileName)>> = BTreeMap::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| Error::Io {
            path: dir.into(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    entries.sort();
    for path in entries {
        let file = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !file.ends_with(".yaml") {
            continue;
        }
        let parsed = parse_file_name(&file).ok_or_else(|| Error::Invalid {
            path: path.clone(),
            message: "file name does not follow the pattern NN-<name>.yaml".into(),
        })?;
        let Some(index) = parsed.index else { continue };
        by_index.entry(index).or_default().push((path, parsed));
    }
    let mut steps = Vec::new();
    for (index, files) in by_index {
        steps.push(load_step(dir, index, &files)?);
    }
    Ok(TestCase {
        name,
        dir: dir.to_path_buf(),
        steps,
    })
}

fn load_step(case_dir: &Path, index: i64, files: &[(PathBuf, FileName)]) -> Result<Step, Error> {
    let mut step = Step {
        index,
        ..Step::default()
    };
    let mut apply_name: Option<String> = None;
    for (path, fname) in files {
        let objects = read_objects(path)?;
        match fname.file_type {
            FileType::Apply => {
                apply_name.get_or_insert_with(|| fname.step_name.clone());
                for obj in objects {
                    let (api, kind) = api_kind(&obj.object);
                    if is_harness_kind(&api, &kind, "TestStep") {
                        if step.test_step.is_some() {
                            return Err(Error::Invalid {
                                path: path.clone(),
                                message: format!("more than one TestStep in step {index}"),
                            });
                        }
                        let ts: TestStep =
                            serde_json::from_value(obj.object.clone()).map_err(|e| Error::Invalid {
                                path: path.clone(),
                                message: format!("invalid TestStep: {e}"),
                            })?;
                        step.test_step = Some(ts);
                    } else if is_harness_kind(&api, &kind, "TestFile") {
                        continue;
                    } else {
                        step.apply.push(obj);
                    }
                }
            }
            FileType::Assert => {
                for obj in objects {
                    let (api, kind) = api_kind(&obj.object);
                    if is_harness_kind(&api, &kind, "TestAssert") {
                        let ta: TestAssert =
                            serde_json::from_value(obj.object.clone()).map_err(|e| Error::Invalid {
                                path: path.clone(),
                                message: format!("invalid TestAssert: {e}"),
                            })?;
                        step.test_assert = Some(ta);
                    } else {
                        step.asserts.push(obj);
                    }
                }
            }
            FileType::Errors => step.errors.extend(objects),
        }
    }
    if let Some(ts) = step.test_step.clone() {
        for p in &ts.apply {
            for f in yaml_files(&resolve(case_dir, p))? {
                step.apply.extend(read_objects(&f)?);
            }
        }
        for p in &ts.assert {
            for f in yaml_files(&resolve(case_dir, p))? {
                step.asserts.extend(read_objects(&f)?);
            }
        }
        for p in &ts.error {
            for f in yaml_files(&resolve(case_dir, p))? {
                step.errors.extend(read_objects(&f)?);
            }
        }
    }
    step.name = match &step.test_step {
        Some(ts) if !ts.metadata.name.is_empty() => ts.metadata.name.clone(),
        _ => apply_name.unwrap_or_else(|| {
            files
                .first()
                .map(|(_, f)| f.step_name.clone())
                .unwrap_or_default()
        }),
    };
    Ok(step)
}

fn api_kind(obj: &Value) -> (String, String) {
    (
        obj["apiVersion"].as_str().unwrap_or("").to_string(),
        obj["kind"].as_str().unwrap_or("").to_string(),
    )
}

/// Resolves a path from a `TestStep` list: `$VAR`s from the environment expanded, relative paths
/// taken from the test case directory.
fn resolve(case_dir: &Path, p: &str) -> PathBuf {
    let expanded = crate::command::expand_env(p, &BTreeMap::new());
    let path = PathBuf::from(expanded);
    if path.is_absolute() {
        path
    } else {
        case_dir.join(path)
    }
}
