//! Reading a package from a directory, a `.tgz`, or an in-memory file set.
//!
//! Packages come from repositories and URLs, so a tarball is untrusted input: entries with absolute
//! paths or `..`, links, devices and FIFOs are rejected (never "skipped" silently: a package that
//! needs them is broken), and sizes are bounded both per file and for the whole archive *after*
//! decompression, which stops gzip bombs. The same limits apply to directories, so a package that
//! reads from disk also packs and installs.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::error::PackageError;
use crate::model::{
    API_VERSION, DeclaredParameter, OPERATOR_FILE, OperatorFile, PARAMS_FILE, Package, ParamsFile,
};
use crate::params::wrap_value;
use crate::yaml;

/// Bounds on what a package may contain. The defaults are far above any real operator (the largest
/// community operator, Cassandra, is < 1 MiB) and far below what could hurt the CLI or controller.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest single file, in bytes.
    pub max_file_size: u64,
    /// Largest sum of all file sizes (after decompression), in bytes.
    pub max_total_size: u64,
    /// Largest number of entries (files and directories).
    pub max_entries: usize,
    /// Deepest directory nesting.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_file_size: 8 << 20,
            max_total_size: 32 << 20,
            max_entries: 4096,
            max_depth: 16,
        }
    }
}

/// Reads a package from `path`: a directory, or a file ending in `.tgz`/`.tar.gz`.
pub fn read_path(path: &Path) -> Result<Package, PackageError> {
    read_path_with(path, &Limits::default())
}

/// [`read_path`] with explicit [`Limits`] instead of the defaults.
pub fn read_path_with(path: &Path, limits: &Limits) -> Result<Package, PackageError> {
    let meta = std::fs::metadata(path).map_err(|e| PackageError::io(path.display(), e))?;
    if meta.is_dir() {
        read_dir_with(path, limits)
    } else if meta.is_file() {
        if meta.len() > limits.max_total_size {
            return Err(PackageError::unsafe_entry(
                path.display(),
                format!(
                    "archive is {} bytes, more than the limit of {} bytes",
                    meta.len(),
                    limits.max_total_size
                ),
            ));
        }
        let f = std::fs::File::open(path).map_err(|e| PackageError::io(path.display(), e))?;
        read_tgz_with(f, &path.display().to_string(), limits)
    } else {
        Err(PackageError::io(
            path.display(),
            "neither a directory nor a regular file",
        ))
    }
}

/// Reads a package directory.
pub fn read_dir(root: &Path) -> Result<Package, PackageError> {
    read_dir_with(root, &Limits::default())
}

/// [`read_dir`] with explicit [`Limits`] instead of the defaults.
pub fn read_dir_with(root: &Path, limits: &Limits) -> Result<Package, PackageError> {
    let mut files = BTreeMap::new();
    let mut state = WalkState { entries: 0, total: 0 };
    walk(root, root, 0, limits, &mut state, &mut files)?;
    from_files(files, &root.display().to_string())
}

struct WalkState {
    entries: usize,
    total: u64,
}

fn walk(
    root: &Path,
    dir: &Path,
    depth: usize,
    limits: &Limits,
    st: &mut WalkState,
    files: &mut BTreeMap<String, Vec<u8>>,
) -> Result<(), PackageError> {
    if depth > limits.max_depth {
        return Err(PackageError::unsafe_entry(
            dir.display(),
            format!("nested deeper than {} levels", limits.max_depth),
        ));
    }
    let rd = std::fs::read_dir(dir).map_err(|e| PackageError::io(dir.display(), e))?;
    let mut entries: Vec<_> = rd
        .collect::<Result<_, _>>()
        .map_err(|e| PackageError::io(dir.display(), e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(PackageError::unsafe_entry(
                entry.path().display(),
                "file name is not valid UTF-8",
            ));
        };
        // Hidden files and directories (.git, .DS_Store, editor swap files) are not package content.
        if name.starts_with('.') {
            continue;
        }
        st.entries += 1;
        if st.entries > limits.max_entries {
            return Err(PackageError::unsafe_entry(
                root.display(),
                format!("more than {} entries", limits.max_entries),
            ));
        }
        let path = entry.path();
        let ft = entry
            .file_type()
            .map_err(|e| PackageError::io(path.display(), e))?;
        if ft.is_symlink() {
            return Err(PackageError::unsafe_entry(
                path.display(),
                "symbolic links are not allowed in a package",
            ));
        } else if ft.is_dir() {
            walk(root, &path, depth + 1, limits, st, files)?;
        } else if ft.is_file() {
            let len = entry
                .metadata()
                .map_err(|e| PackageError::io(path.display(), e))?
                .len();
            check_sizes(&path.display().to_string(), len, st.total, limits)?;
            let mut buf = Vec::with_capacity(len as usize);
            std::fs::File::open(&path)
                .and_then(|f| f.take(limits.max_file_size + 1).read_to_end(&mut buf))
                .map_err(|e| PackageError::io(path.display(), e))?;
            check_sizes(&path.display().to_string(), buf.len() as u64, st.total, limits)?;
            st.total += buf.len() as u64;
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            files.insert(rel.join("/"), buf);
        } else {
            return Err(PackageError::unsafe_entry(
                path.display(),
                "not a regular file or directory (device, FIFO or socket)",
            ));
        }
    }
    Ok(())
}

fn check_sizes(path: &str, len: u64, total: u64, limits: &Limits) -> Result<(), PackageError> {
    if len > limits.max_file_size {
        return Err(PackageError::unsafe_entry(
            path,
            format!("file is larger than the limit of {} bytes", limits.max_file_size),
        ));
    }
    if total + len > limits.max_total_size {
        return Err(PackageError::unsafe_entry(
            path,
            format!(
                "package content exceeds the limit of {} bytes in total",
                limits.max_total_size
            ),
        ));
    }
    Ok(())
}

/// Reads a gzip-compressed tar archive. `label` names the archive in error messages.
pub fn read_tgz(reader: impl Read, label: &str) -> Result<Package, PackageError> {
    read_tgz_with(reader, label, &Limits::default())
}

/// A reader that fails once more than `limit` bytes came through: bounds decompression output.
struct Bounded<R> {
    inner: R,
    read: u64,
    limit: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.limit {
            return Err(std::io::Error::other(format!(
                "archive decompresses to more than {} bytes (gzip bomb?)",
                self.limit
            )));
        }
        Ok(n)
    }
}

/// [`read_tgz`] with explicit [`Limits`] instead of the defaults.
pub fn read_tgz_with(reader: impl Read, label: &str, limits: &Limits) -> Result<Package, PackageError> {
    // Tar framing adds 512 bytes per entry on top of the content.
    let raw_limit = limits.max_total_size + (limits.max_entries as u64 + 2) * 1024;
    let gz = flate2::read::GzDecoder::new(reader);
    let mut archive = tar::Archive::new(Bounded {
        inner: gz,
        read: 0,
        limit: raw_limit,
    });
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    let mut count = 0usize;
    let entries = archive
        .entries()
        .map_err(|e| PackageError::io(label, format!("not a gzip-compressed tar archive: {e}")))?;
    for entry in entries {
        let mut entry =
            entry.map_err(|e| PackageError::io(label, format!("corrupt or oversized archive: {e}")))?;
        count += 1;
        if count > limits.max_entries {
            return Err(PackageError::unsafe_entry(
                label,
                format!("archive has more than {} entries", limits.max_entries),
            ));
        }
        let raw = entry.path_bytes().into_owned();
        let Ok(raw) = String::from_utf8(raw) else {
            return Err(PackageError::unsafe_entry(
                label,
                "archive entry name is not valid UTF-8",
            ));
        };
        let shown = format!("{label}: {raw}");
        let name = safe_entry_name(&raw).map_err(|m| PackageError::unsafe_entry(&shown, m))?;
        use tar::EntryType as T;
        match entry.header().entry_type() {
            T::Regular | T::Continuous => {}
            T::Directory => continue,
            T::Symlink => {
                return Err(PackageError::unsafe_entry(
                    &shown,
                    "symbolic links are not allowed in a package",
                ));
            }
            T::Link => {
                return Err(PackageError::unsafe_entry(
                    &shown,
                    "hard links are not allowed in a package",
                ));
            }
            T::Char | T::Block => {
                return Err(PackageError::unsafe_entry(
                    &shown,
                    "device files are not allowed in a package",
                ));
            }
            T::Fifo => {
                return Err(PackageError::unsafe_entry(
                    &shown,
                    "FIFOs are not allowed in a package",
                ));
            }
            T::XGlobalHeader | T::XHeader | T::GNULongName | T::GNULongLink => continue,
            other => {
                return Err(PackageError::unsafe_entry(
                    &shown,
                    format!("unsupported tar entry type {other:?}"),
                ));
            }
        }
        let Some(name) = name else { continue };
        let declared = entry.header().size().unwrap_or(u64::MAX);
        check_sizes(&shown, declared, total, limits)?;
        let mut buf = Vec::with_capacity(declared as usize);
        (&mut entry)
            .take(limits.max_file_size + 1)
            .read_to_end(&mut buf)
            .map_err(|e| PackageError::io(&shown, e))?;
        check_sizes(&shown, buf.len() as u64, total, limits)?;
        total += buf.len() as u64;
        if files.insert(name.clone(), buf).is_some() {
            return Err(PackageError::unsafe_entry(&shown, "duplicate entry in archive"));
        }
    }
    from_files(files, label)
}

/// Validates and normalises a tar entry name: relative, no `..`, no empty or `.` components.
/// `Ok(None)` for the archive root itself.
fn safe_entry_name(raw: &str) -> Result<Option<String>, String> {
    if raw.starts_with('/') || raw.starts_with('\\') {
        return Err("absolute paths are not allowed in a package".into());
    }
    if raw.contains('\\') || raw.contains('\0') {
        return Err("backslashes and NUL bytes are not allowed in entry names".into());
    }
    if raw.len() > 1 && raw.as_bytes()[1] == b':' {
        return Err("drive-letter paths are not allowed in a package".into());
    }
    let mut parts = Vec::new();
    for comp in raw.split('/') {
        match comp {
            "" | "." => {}
            ".." => return Err("path escapes the package root (`..`)".into()),
            c => parts.push(c),
        }
    }
    if parts.is_empty() {
        Ok(None)
    } else {
        Ok(Some(parts.join("/")))
    }
}

fn utf8(path: &str, bytes: &[u8]) -> Result<String, PackageError> {
    String::from_utf8(bytes.to_vec()).map_err(|e| PackageError::NotUtf8 {
        path: path.to_string(),
        offset: e.utf8_error().valid_up_to(),
    })
}

/// Is `name` (relative to the package root) a template? Its directory starts with `templates` and
/// its file name matches KUDO's unanchored `.*\.yaml`.
fn template_key(name: &str) -> Option<String> {
    let (dir, file) = name.rsplit_once('/')?;
    if !(dir == "templates" || dir.starts_with("templates/")) || !file.contains(".yaml") {
        return None;
    }
    let idx = name.rfind("templates/")?;
    Some(name[idx + "templates/".len()..].to_string())
}

/// Builds a package from root-relative file paths and contents (the form every reader produces).
/// If the files sit in one top-level folder (`galera/operator.yaml`, as `tar czf x.tgz galera`
/// produces), that folder is the package root.
pub fn from_files(mut files: BTreeMap<String, Vec<u8>>, label: &str) -> Result<Package, PackageError> {
    if !files.contains_key(OPERATOR_FILE) {
        let tops: std::collections::BTreeSet<&str> = files
            .keys()
            .filter_map(|k| k.split_once('/').map(|(t, _)| t))
            .collect();
        let root_files = files.keys().any(|k| !k.contains('/'));
        if tops.len() == 1 && !root_files {
            let top = format!("{}/", tops.iter().next().copied().unwrap_or_default());
            if files.contains_key(&format!("{top}{OPERATOR_FILE}")) {
                files = files
                    .into_iter()
                    .map(|(k, v)| (k[top.len()..].to_string(), v))
                    .collect();
            }
        }
    }
    let op_bytes = files
        .get(OPERATOR_FILE)
        .ok_or_else(|| PackageError::Missing(format!("{OPERATOR_FILE} in {label}")))?;
    let params_bytes = files
        .get(PARAMS_FILE)
        .ok_or_else(|| PackageError::Missing(format!("{PARAMS_FILE} in {label}")))?;
    let operator = parse_operator(&utf8(OPERATOR_FILE, op_bytes)?)?;
    let params = parse_params(&utf8(PARAMS_FILE, params_bytes)?)?;
    let mut templates = BTreeMap::new();
    for (name, bytes) in &files {
        if let Some(key) = template_key(name) {
            templates.insert(key, utf8(name, bytes)?);
        }
    }
    Ok(Package {
        operator,
        params,
        templates,
        files,
    })
}

fn check_api_version(file: &str, got: &str) -> Result<(), PackageError> {
    if got.is_empty() || got == API_VERSION {
        Ok(())
    } else {
        Err(PackageError::ApiVersion {
            file: file.to_string(),
            got: got.to_string(),
        })
    }
}

fn expect_mapping(file: &str, v: &serde_json::Value) -> Result<(), PackageError> {
    match v {
        serde_json::Value::Object(_) | serde_json::Value::Null => Ok(()),
        _ => Err(PackageError::Field {
            file: file.to_string(),
            field: ".".into(),
            message: "the document must be a YAML mapping".into(),
        }),
    }
}

/// A field [`crate::lenient`] refused, as a package error of `file`.
fn field_error(file: &str, e: crate::lenient::FieldError) -> PackageError {
    PackageError::Field {
        file: file.to_string(),
        field: e.field,
        message: e.message,
    }
}

/// Decodes one package file into a mapping (an empty document reads as an empty one).
fn document(file: &str, text: &str) -> Result<serde_json::Value, PackageError> {
    let v = yaml::parse_value(file, text)?;
    expect_mapping(file, &v)?;
    Ok(if v.is_null() { serde_json::json!({}) } else { v })
}

/// Parses `operator.yaml`.
pub fn parse_operator(text: &str) -> Result<OperatorFile, PackageError> {
    let mut v = document(OPERATOR_FILE, text)?;
    crate::lenient::operator_document(&mut v).map_err(|e| field_error(OPERATOR_FILE, e))?;
    let mut op: OperatorFile = yaml::from_value(OPERATOR_FILE, v)?;
    check_api_version(OPERATOR_FILE, &op.api_version)?;
    op.api_version = API_VERSION.to_string();
    Ok(op)
}

/// Parses `params.yaml`: each parameter becomes the OperatorVersion's definition (KUDO's
/// `required: true` default applied, `immutable` explicit, `sensitive` only when true, defaults
/// and enum values as the strings the cluster stores) with its package-only fields beside it.
pub fn parse_params(text: &str) -> Result<ParamsFile, PackageError> {
    let mut v = document(PARAMS_FILE, text)?;
    crate::lenient::params_document(&mut v).map_err(|e| field_error(PARAMS_FILE, e))?;
    let entries = v.as_object_mut().and_then(|m| m.remove("parameters"));
    let mut pf: ParamsFile = yaml::from_value(PARAMS_FILE, v)?;
    let entries = match entries {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Array(items)) => items,
        Some(other) => {
            // Not a list: the typed reading states what it found, as for any other field.
            yaml::from_value::<Vec<serde_json::Value>>(PARAMS_FILE, other)
                .map_err(|e| at_field("parameters", e))?;
            Vec::new()
        }
    };
    pf.parameters = entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| declared_parameter(entry).map_err(|e| at_field(&format!("parameters[{i}]"), e)))
        .collect::<Result<_, _>>()?;
    check_api_version(PARAMS_FILE, &pf.api_version)?;
    pf.api_version = API_VERSION.to_string();
    Ok(pf)
}

/// Puts `prefix` in front of the field a [`PackageError::Field`] names (`.` is the document
/// itself).
fn at_field(prefix: &str, e: PackageError) -> PackageError {
    match e {
        PackageError::Field { file, field, message } => PackageError::Field {
            file,
            field: if field == "." {
                prefix.to_string()
            } else if field.starts_with('[') {
                format!("{prefix}{field}")
            } else {
                format!("{prefix}.{field}")
            },
            message,
        },
        other => other,
    }
}

/// One `params.yaml` entry, already rewritten by [`crate::lenient::params_document`], split into
/// the cluster's definition and the package-only fields.
fn declared_parameter(mut entry: serde_json::Value) -> Result<DeclaredParameter, PackageError> {
    let mut take = |key: &str| {
        entry
            .as_object_mut()
            .and_then(|m| m.remove(key))
            .filter(|v| !v.is_null())
    };
    let yaml_default = take("default");
    let yaml_enum = take("enum").and_then(|v| serde_json::from_value::<Vec<serde_json::Value>>(v).ok());
    let text =
        |v: Option<serde_json::Value>| v.and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    let group = text(take("group"));
    let hint = text(take("hint"));
    let advanced = take("advanced").and_then(|v| v.as_bool()).unwrap_or(false);
    // The schema keywords are flattened into the parameter, where serde loses the field path of
    // an error: read them alone first, so a bad one is named (`parameters[2].maxLength`).
    yaml::from_value::<kudo_api::ParameterSchema>(PARAMS_FILE, entry.clone())?;
    let mut def: kudo_api::Parameter = yaml::from_value(PARAMS_FILE, entry)?;
    def.required = Some(def.required.unwrap_or(true));
    def.immutable = Some(def.is_immutable());
    // Written only when true, so OperatorVersions of ordinary packages stay byte-identical.
    def.sensitive = def.is_sensitive().then_some(true);
    let value_type = def.value_type().to_string();
    def.default = crate::params::wrap_default(yaml_default.as_ref(), &value_type);
    def.r#enum = yaml_enum
        .as_ref()
        .map(|vs| vs.iter().map(|v| wrap_value(v, &value_type)).collect());
    Ok(DeclaredParameter {
        def,
        yaml_default,
        yaml_enum,
        group,
        advanced,
        hint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names() {
        assert_eq!(
            safe_entry_name("./templates/a.yaml").unwrap().as_deref(),
            Some("templates/a.yaml")
        );
        assert_eq!(safe_entry_name("./").unwrap(), None);
        assert!(safe_entry_name("/etc/passwd").is_err());
        assert!(safe_entry_name("templates/../../x").is_err());
        assert!(safe_entry_name("C:/x").is_err());
    }

    #[test]
    fn template_keys() {
        assert_eq!(template_key("templates/a.yaml").as_deref(), Some("a.yaml"));
        assert_eq!(
            template_key("templates/sub/dir/b.yaml").as_deref(),
            Some("sub/dir/b.yaml")
        );
        assert_eq!(
            template_key("templates/x.yaml.bak").as_deref(),
            Some("x.yaml.bak")
        );
        assert_eq!(template_key("templates/readme.md"), None);
        assert_eq!(template_key("other/a.yaml"), None);
        assert_eq!(template_key("a.yaml"), None);
    }

    #[test]
    fn required_defaults_to_true_and_types_follow_yaml_1_1() {
        let p = parse_params("parameters:\n  - name: A\n    default: False\n  - name: B\n    required: false\n    default: 0755\n").unwrap();
        assert_eq!(p.parameters[0].required, Some(true));
        assert_eq!(p.parameters[0].default.as_deref(), Some("false"));
        assert_eq!(p.parameters[1].required, Some(false));
        assert_eq!(p.parameters[1].default.as_deref(), Some("493"));
    }

    #[test]
    fn structured_parameters_without_a_default_store_null_as_kudo_does() {
        let p = parse_params(
            "parameters:\n  - name: M\n    type: map\n  - name: A\n    type: array\n    default:\n  - name: S\n",
        )
        .unwrap();
        let defaults: Vec<Option<&str>> = p.parameters.iter().map(|p| p.default.as_deref()).collect();
        assert_eq!(defaults, [Some("null\n"), Some("null\n"), None]);
        let needs: Vec<bool> = p.parameters.iter().map(|p| p.needs_value()).collect();
        assert_eq!(needs, [false, false, true]);
        // What the package file says is kept for `package verify`.
        assert!(p.parameters.iter().all(|p| p.yaml_default.is_none()));
    }

    #[test]
    fn foreign_api_version_is_rejected() {
        let e = parse_operator("apiVersion: kudo.dev/v1alpha1\nname: x\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "operator.yaml: expecting supported API version kudo.dev/v1beta1 but got kudo.dev/v1alpha1"
        );
    }
}
