//! Persistence backends for the store.
//!
//! The store keeps every object in memory and writes through to a backend, so that a server restarted on
//! the same data directory comes back with the same objects and resourceVersions.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::registry::GroupResource;

/// Identity of one stored object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjKey {
    /// Type of the object.
    pub gr: GroupResource,
    /// Namespace, `""` for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// A persistence failure.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// Reading or writing the data file failed.
    #[error("storage I/O error on {path}: {source}")]
    Io {
        /// File involved.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A record in the data file could not be parsed.
    #[error("corrupt storage record at {path}:{line}: {message}")]
    Corrupt {
        /// File involved.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What was wrong.
        message: String,
    },
}

/// Everything a backend restores at startup.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Highest resourceVersion ever written.
    pub resource_version: u64,
    /// Live objects.
    pub objects: Vec<(ObjKey, Value)>,
}

/// Write-through persistence. Calls happen under the store lock, in resourceVersion order.
pub trait Backend: Send + Sync {
    /// Load everything at startup.
    fn load(&self) -> Result<Snapshot, BackendError>;
    /// Record a create or update.
    fn put(&self, key: &ObjKey, value: &Value, rv: u64) -> Result<(), BackendError>;
    /// Record a removal.
    fn delete(&self, key: &ObjKey, rv: u64) -> Result<(), BackendError>;
}

/// No persistence: the default for tests.
#[derive(Debug, Default)]
pub struct MemoryBackend;

impl Backend for MemoryBackend {
    fn load(&self) -> Result<Snapshot, BackendError> {
        Ok(Snapshot::default())
    }
    fn put(&self, _: &ObjKey, _: &Value, _: u64) -> Result<(), BackendError> {
        Ok(())
    }
    fn delete(&self, _: &ObjKey, _: u64) -> Result<(), BackendError> {
        Ok(())
    }
}

/// An append-only JSON-lines log, compacted at load.
///
/// Each write is handed to the OS before the API call returns, so the data survives the server process
/// being killed (SIGKILL); it is not fsynced per write, so it does not promise survival of a power loss.
#[derive(Debug)]
pub struct FileBackend {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl FileBackend {
    /// Use (or create) `dir/objects.jsonl`.
    pub fn open(dir: &Path) -> Result<Self, BackendError> {
        std::fs::create_dir_all(dir).map_err(|source| BackendError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(FileBackend {
            path: dir.join("objects.jsonl"),
            file: Mutex::new(None),
        })
    }

    fn io(&self, source: std::io::Error) -> BackendError {
        BackendError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn append(&self, record: &Value) -> Result<(), BackendError> {
        let mut guard = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .map_err(|e| self.io(e))?;
            *guard = Some(f);
        }
        let mut line = record.to_string();
        line.push('\n');
        match guard.as_mut() {
            Some(f) => f.write_all(line.as_bytes()).map_err(|e| self.io(e)),
            None => Err(self.io(std::io::Error::other("log file not open"))),
        }
    }
}

fn key_json(key: &ObjKey) -> Value {
    json!([key.gr.group, key.gr.resource, key.namespace, key.name])
}

impl Backend for FileBackend {
    fn load(&self) -> Result<Snapshot, BackendError> {
        let mut objects: std::collections::BTreeMap<ObjKey, Value> = Default::default();
        let mut rv = 0;
        match File::open(&self.path) {
            Ok(f) => {
                for (i, line) in BufReader::new(f).lines().enumerate() {
                    let line = line.map_err(|e| self.io(e))?;
                    if line.trim().is_empty() {
                        continue;
                    }
                    let corrupt = |message: &str| BackendError::Corrupt {
                        path: self.path.clone(),
                        line: i + 1,
                        message: message.into(),
                    };
                    let rec: Value = match serde_json::from_str(&line) {
                        Ok(v) => v,
                        // A torn final line from a kill mid-write: everything before it is intact.
                        Err(_) => break,
                    };
                    let k = rec["k"].as_array().ok_or_else(|| corrupt("missing key"))?;
                    let part = |j: usize| k.get(j).and_then(|v| v.as_str()).unwrap_or("").to_string();
                    let key = ObjKey {
                        gr: GroupResource::new(&part(0), &part(1)),
                        namespace: part(2),
                        name: part(3),
                    };
                    rv = rv.max(rec["rv"].as_u64().ok_or_else(|| corrupt("missing rv"))?);
                    match rec["op"].as_str() {
                        Some("put") => {
                            objects.insert(key, rec["o"].clone());
                        }
                        Some("del") => {
                            objects.remove(&key);
                        }
                        Some("rv") => {}
                        _ => return Err(corrupt("unknown op")),
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(self.io(e)),
        }
        // Compact: rewrite the log with only live objects.
        let tmp = self.path.with_extension("jsonl.tmp");
        {
            let mut f = File::create(&tmp).map_err(|e| self.io(e))?;
            let mut buf = String::new();
            // Keep the resourceVersion counter even when no object is left.
            buf.push_str(&json!({"op": "rv", "k": [], "rv": rv}).to_string());
            buf.push('\n');
            for (k, o) in &objects {
                buf.push_str(&json!({"op": "put", "k": key_json(k), "rv": rv, "o": o}).to_string());
                buf.push('\n');
            }
            f.write_all(buf.as_bytes()).map_err(|e| self.io(e))?;
            f.sync_all().map_err(|e| self.io(e))?;
        }
        std::fs::rename(&tmp, &self.path).map_err(|e| self.io(e))?;
        Ok(Snapshot {
            resource_version: rv,
            objects: objects.into_iter().collect(),
        })
    }

    fn put(&self, key: &ObjKey, value: &Value, rv: u64) -> Result<(), BackendError> {
        self.append(&json!({"op": "put", "k": key_json(key), "rv": rv, "o": value}))
    }

    fn delete(&self, key: &ObjKey, rv: u64) -> Result<(), BackendError> {
        self.append(&json!({"op": "del", "k": key_json(key), "rv": rv}))
    }
}
