//! Persistence backends for the store.
//!
//! The store keeps every object in memory and writes through to a backend, so that a server restarted on
//! the same data directory comes back with the same objects and resourceVersions.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
    /// Make every record written so far durable. Called after a write, *outside* the store lock and
    /// before the write is acknowledged, so that concurrent writers can share one flush (group
    /// commit) and readers are not blocked while the disk works.
    fn sync(&self) -> Result<(), BackendError> {
        Ok(())
    }
    /// Whether [`Backend::sync`] may block on the disk (callers then take it off the async runtime's
    /// worker threads).
    fn syncs(&self) -> bool {
        false
    }
}

/// When a [`FileBackend`] forces its records to stable storage.
///
/// `kubectl kudo dev --data-dir` should keep what it acknowledged through a power loss or a kernel
/// crash, not only through the process being killed; that costs one `fdatasync` per write (shared
/// by concurrent writes), so the cheaper mode stays available on request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SyncMode {
    /// `fdatasync` the log before a write is acknowledged (and the directory when the log file is
    /// replaced): an acknowledged write survives power loss. The default.
    #[default]
    Always,
    /// Hand each record to the OS (`write`) before acknowledging, never `fsync`: survives the server
    /// being killed, but the last seconds of acknowledged writes can be lost on power loss.
    Never,
}

impl SyncMode {
    /// The flag spelling: `always` or `never`.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncMode::Always => "always",
            SyncMode::Never => "never",
        }
    }
}

impl std::fmt::Display for SyncMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--data-dir-sync` value other than `always` or `never`.
#[derive(Debug, thiserror::Error)]
#[error("invalid sync mode {0:?}: expected \"always\" or \"never\"")]
pub struct ParseSyncModeError(String);

impl std::str::FromStr for SyncMode {
    type Err = ParseSyncModeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "always" => Ok(SyncMode::Always),
            "never" => Ok(SyncMode::Never),
            other => Err(ParseSyncModeError(other.to_string())),
        }
    }
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
/// Each record is written with one `write` call under the store lock, in resourceVersion order. With
/// [`SyncMode::Always`] (the default) the write is acknowledged only after [`Backend::sync`] has
/// `fdatasync`ed the log up to (at least) that record, so an acknowledged write survives power loss;
/// with [`SyncMode::Never`] it survives the process being killed (SIGKILL) but not a power loss.
///
/// A change is applied in memory (and sent to watchers) under the store lock and flushed right
/// after, so a reader can see it a few milliseconds before it is durable; a power loss in that window
/// loses only writes that were never acknowledged, and since the log is sequential the flush for any
/// acknowledged write covers every change before it.
///
/// At load, a final record cut short by a kill or crash (an acknowledged write is never cut: its
/// record was complete before the answer) is dropped; an unreadable record *before* the last one is
/// refused as corruption, because skipping it would silently lose the acknowledged writes after it.
#[derive(Debug)]
pub struct FileBackend {
    path: PathBuf,
    mode: SyncMode,
    file: Mutex<Option<File>>,
    /// A second descriptor of the log for `fdatasync`, so flushing does not hold the append lock.
    sync_file: Mutex<Option<File>>,
    /// Records appended so far (a sequence, not a resourceVersion: loads restart it at 0).
    written: AtomicU64,
    /// Records known to be on stable storage.
    synced: AtomicU64,
    /// Set when an `fdatasync` failed: after that the kernel may have dropped the dirty pages, so
    /// nothing written can be promised durable any more and every later write is refused.
    failed: AtomicBool,
}

impl FileBackend {
    /// Use (or create) `dir/objects.jsonl`, with [`SyncMode::Always`].
    pub fn open(dir: &Path) -> Result<Self, BackendError> {
        Self::open_with(dir, SyncMode::Always)
    }

    /// Use (or create) `dir/objects.jsonl` with the given durability.
    pub fn open_with(dir: &Path, mode: SyncMode) -> Result<Self, BackendError> {
        let existed = dir.is_dir();
        std::fs::create_dir_all(dir).map_err(|source| BackendError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        if !existed
            && mode == SyncMode::Always
            && let Some(parent) = dir.parent()
        {
            // The new directory's own entry must reach the disk too.
            sync_dir(parent)?;
        }
        Ok(FileBackend {
            path: dir.join("objects.jsonl"),
            mode,
            file: Mutex::new(None),
            sync_file: Mutex::new(None),
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            failed: AtomicBool::new(false),
        })
    }

    /// The durability this backend was opened with.
    pub fn sync_mode(&self) -> SyncMode {
        self.mode
    }

    fn io(&self, source: std::io::Error) -> BackendError {
        BackendError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn append(&self, record: &Value) -> Result<(), BackendError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(self.io(std::io::Error::other(
                "an earlier fsync of the log failed; writes are refused until the server is restarted",
            )));
        }
        let mut guard = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .map_err(|e| self.io(e))?;
            if self.mode == SyncMode::Always {
                let dup = f.try_clone().map_err(|e| self.io(e))?;
                *self.sync_file.lock().unwrap_or_else(|p| p.into_inner()) = Some(dup);
            }
            *guard = Some(f);
        }
        let mut line = record.to_string();
        line.push('\n');
        match guard.as_mut() {
            Some(f) => f.write_all(line.as_bytes()).map_err(|e| self.io(e))?,
            None => return Err(self.io(std::io::Error::other("log file not open"))),
        }
        self.written.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

/// `fsync` a directory, so that entries created or renamed in it survive a power loss.
fn sync_dir(dir: &Path) -> Result<(), BackendError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| BackendError::Io {
            path: dir.to_path_buf(),
            source,
        })
}

fn key_json(key: &ObjKey) -> Value {
    json!([key.gr.group, key.gr.resource, key.namespace, key.name])
}

impl Backend for FileBackend {
    fn load(&self) -> Result<Snapshot, BackendError> {
        let mut objects: std::collections::BTreeMap<ObjKey, Value> = Default::default();
        let mut rv = 0;
        let mut content = Vec::new();
        match File::open(&self.path) {
            Ok(mut f) => {
                f.read_to_end(&mut content).map_err(|e| self.io(e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(self.io(e)),
        }
        // Bytes, not `lines()`: a torn last record may end inside a multi-byte UTF-8 character.
        let lines: Vec<&[u8]> = content.split(|b| *b == b'\n').collect();
        // The segment after the final newline is empty unless the last write was cut short.
        let last = lines.iter().rposition(|l| !l.trim_ascii().is_empty());
        for (i, line) in lines.iter().enumerate() {
            if line.trim_ascii().is_empty() {
                continue;
            }
            let corrupt = |message: &str| BackendError::Corrupt {
                path: self.path.clone(),
                line: i + 1,
                message: message.into(),
            };
            let rec: Value = match serde_json::from_slice(line) {
                Ok(v) => v,
                // A torn final record from a kill mid-write: everything before it is intact, and it was
                // never acknowledged.
                Err(_) if Some(i) == last => {
                    tracing::warn!(
                        "{}:{}: dropping a final record cut short by a crash ({} bytes)",
                        self.path.display(),
                        i + 1,
                        line.len()
                    );
                    break;
                }
                Err(e) => {
                    return Err(corrupt(&format!(
                        "{e}; the records after it were acknowledged and would be lost by skipping it, so \
                         the server refuses to start: repair or move the file"
                    )));
                }
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
        if self.mode == SyncMode::Always
            && let Some(dir) = self.path.parent()
        {
            // The rename must be on disk before anything appended to the new file is acknowledged.
            sync_dir(dir)?;
        }
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

    fn syncs(&self) -> bool {
        self.mode == SyncMode::Always
    }

    fn sync(&self) -> Result<(), BackendError> {
        if self.mode == SyncMode::Never {
            return Ok(());
        }
        // Everything this caller wrote is counted in `target`.
        let target = self.written.load(Ordering::Acquire);
        if self.synced.load(Ordering::Acquire) >= target {
            return Ok(());
        }
        // One flush at a time; whoever waits here usually finds its records flushed by the one before
        // (group commit).
        let guard = self.sync_file.lock().unwrap_or_else(|p| p.into_inner());
        if self.failed.load(Ordering::Acquire) {
            return Err(self.io(std::io::Error::other("an earlier fsync of the log failed")));
        }
        if self.synced.load(Ordering::Acquire) >= target {
            return Ok(());
        }
        // Records appended up to now are covered by this flush, also those of later callers.
        let upto = self.written.load(Ordering::Acquire);
        let Some(f) = guard.as_ref() else {
            return Err(self.io(std::io::Error::other("log file not open")));
        };
        if let Err(e) = f.sync_data() {
            self.failed.store(true, Ordering::Release);
            return Err(self.io(e));
        }
        self.synced.fetch_max(upto, Ordering::AcqRel);
        Ok(())
    }
}
