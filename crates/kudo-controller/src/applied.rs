//! What this manager last applied (see [`AppliedCache`]): memory only, safe to lose.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

/// What this manager last applied, by object identity: a hash of the applied content. A step
/// waiting for a Deployment is passed again at every watch event that wakes it; applying
/// identical content each time costs the server a full server-side-apply merge for nothing (the
/// controller bench measured 10 applies for a one-object plan). Identical content is therefore
/// read instead of re-applied; new content (another run — the plan-uid label differs — or
/// changed parameters) is applied, and so is an object found deleted. Only an optimisation: a
/// restarted manager starts empty and applies everything once.
///
/// Each entry also keeps the uid and generation of the object the apply answered with: the
/// watch cache's copy may only be judged instead of a GET when it is that object at that
/// generation or later (a copy from before our apply would judge the previous spec).
#[derive(Default)]
pub struct AppliedCache(Mutex<HashMap<String, Applied>>);

/// What an apply of one object answered with (see [`AppliedCache`]).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    digest: u64,
    uid: Option<String>,
    generation: Option<i64>,
}

impl AppliedCache {
    /// Bound on remembered objects; beyond it the cache starts over.
    const MAX_ENTRIES: usize = 100_000;

    fn key(obj: &Value) -> String {
        format!(
            "{}/{}/{}/{}",
            obj["apiVersion"].as_str().unwrap_or(""),
            obj["kind"].as_str().unwrap_or(""),
            obj["metadata"]["namespace"].as_str().unwrap_or(""),
            obj["metadata"]["name"].as_str().unwrap_or("")
        )
    }

    fn digest(obj: &Value) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        obj.to_string().hash(&mut h);
        h.finish()
    }

    /// The answer of our last apply of exactly this content, if any.
    pub(crate) fn already_applied(&self, obj: &Value) -> Option<Applied> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&Self::key(obj))
            .filter(|a| a.digest == Self::digest(obj))
            .cloned()
    }

    /// Remembers that `obj` was applied and the server answered with `live`.
    pub(crate) fn record(&self, obj: &Value, live: &Value) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= Self::MAX_ENTRIES {
            map.clear();
        }
        map.insert(
            Self::key(obj),
            Applied {
                digest: Self::digest(obj),
                uid: live["metadata"]["uid"].as_str().map(str::to_string),
                generation: live["metadata"]["generation"].as_i64(),
            },
        );
    }
}

impl Applied {
    /// Whether a cached copy of the object is at least what our apply answered with: the same
    /// object (uid) at the same or a later generation.
    pub(crate) fn current(&self, cached: &Value) -> bool {
        let uid = cached["metadata"]["uid"].as_str();
        let generation = cached["metadata"]["generation"].as_i64();
        uid == self.uid.as_deref()
            && match (self.generation, generation) {
                (Some(applied), Some(seen)) => seen >= applied,
                (Some(_), None) => false,
                (None, _) => true,
            }
    }
}
