//! Line-oriented, prefixed logging shared by concurrently running test cases.
//!
//! Each line goes to the run's sink (stdout for the CLI, a buffer in tests) at once, prefixed with
//! the case and step it belongs to, so interleaved parallel output stays attributable; each case
//! also keeps its own lines for the report.

use std::sync::{Arc, Mutex};

/// Where finished lines go.
pub type Sink = Arc<dyn Fn(&str) + Send + Sync>;

/// A logger with a prefix; cheap to clone.
#[derive(Clone)]
pub struct Log {
    sink: Sink,
    prefix: String,
    captured: Arc<Mutex<Vec<String>>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log").field("prefix", &self.prefix).finish()
    }
}

impl Log {
    /// A root logger writing to `sink`.
    pub fn new(sink: Sink) -> Log {
        Log {
            sink,
            prefix: String::new(),
            captured: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// A logger whose lines are prefixed with `prefix` (appended to the current prefix with `/`)
    /// and captured separately.
    pub fn child(&self, prefix: &str) -> Log {
        let prefix = if self.prefix.is_empty() {
            prefix.to_string()
        } else {
            format!("{}/{prefix}", self.prefix)
        };
        Log {
            sink: self.sink.clone(),
            prefix,
            captured: self.captured.clone(),
        }
    }

    /// A logger with the same prefix and a fresh capture buffer (one per test case).
    pub fn capturing(&self, prefix: &str) -> Log {
        let mut l = self.child(prefix);
        l.captured = Arc::new(Mutex::new(Vec::new()));
        l
    }

    /// Emits one line (multi-line text is split so every line carries the prefix).
    pub fn line(&self, text: impl AsRef<str>) {
        for l in text.as_ref().lines() {
            let full = if self.prefix.is_empty() {
                l.to_string()
            } else {
                format!("{}: {l}", self.prefix)
            };
            (self.sink)(&full);
            if let Ok(mut c) = self.captured.lock() {
                c.push(full);
            }
        }
    }

    /// Everything logged through this logger's capture buffer so far.
    pub fn captured(&self) -> Vec<String> {
        self.captured.lock().map(|c| c.clone()).unwrap_or_default()
    }
}
