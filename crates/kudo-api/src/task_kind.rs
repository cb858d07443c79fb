//! The kinds of task KUDO v0.19 knows (`kudo:pkg/engine/task/task.go`), case-sensitive. No other kinds
//! exist; any other spelling is kept verbatim in [`TaskKind::Unknown`] so that errors can name it and
//! the object round-trips unchanged.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A task's `kind`. Serialises as the bare string (`Apply`, `KudoOperator`, …); `Debug` prints it as
/// the quoted string too, exactly as the `String` it replaces did.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskKind {
    /// Applies (creates or patches) its rendered resources and waits until they are healthy.
    Apply,
    /// Deletes its rendered resources.
    Delete,
    /// Applies or deletes its resources depending on a boolean parameter.
    Toggle,
    /// Runs a generator Pod and stores files it produces as Secrets or ConfigMaps.
    Pipe,
    /// Does nothing; succeeds, fails or stays in progress as its spec says (for tests).
    Dummy,
    /// Installs another operator as a child Instance (an operator dependency).
    KudoOperator,
    /// Any other spelling (including the empty one), kept for error messages.
    Unknown(String),
}

impl TaskKind {
    /// Every kind KUDO knows, in the order KUDO's documentation lists them.
    pub const KNOWN: [TaskKind; 6] = [
        TaskKind::Apply,
        TaskKind::Delete,
        TaskKind::Toggle,
        TaskKind::Pipe,
        TaskKind::Dummy,
        TaskKind::KudoOperator,
    ];

    /// The spelling in YAML/JSON.
    pub fn as_str(&self) -> &str {
        match self {
            TaskKind::Apply => "Apply",
            TaskKind::Delete => "Delete",
            TaskKind::Toggle => "Toggle",
            TaskKind::Pipe => "Pipe",
            TaskKind::Dummy => "Dummy",
            TaskKind::KudoOperator => "KudoOperator",
            TaskKind::Unknown(s) => s,
        }
    }

    /// Whether KUDO knows this kind.
    pub fn is_known(&self) -> bool {
        !matches!(self, TaskKind::Unknown(_))
    }
}

impl Default for TaskKind {
    /// The empty (unknown) kind, what a task without `kind:` has.
    fn default() -> Self {
        TaskKind::Unknown(String::new())
    }
}

impl From<&str> for TaskKind {
    fn from(s: &str) -> Self {
        TaskKind::KNOWN
            .into_iter()
            .find(|k| k.as_str() == s)
            .unwrap_or_else(|| TaskKind::Unknown(s.to_string()))
    }
}

impl From<String> for TaskKind {
    fn from(s: String) -> Self {
        match TaskKind::from(s.as_str()) {
            TaskKind::Unknown(_) => TaskKind::Unknown(s),
            known => known,
        }
    }
}

impl fmt::Display for TaskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for TaskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq<str> for TaskKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for TaskKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for TaskKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TaskKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(TaskKind::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelling_round_trips() {
        for k in TaskKind::KNOWN {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<TaskKind>(&json).unwrap(), k);
            assert!(k.is_known());
        }
        let odd: TaskKind = serde_json::from_str("\"apply\"").unwrap();
        assert_eq!(odd, TaskKind::Unknown("apply".into()));
        assert_eq!(serde_json::to_string(&odd).unwrap(), "\"apply\"");
        assert_eq!(format!("{odd} {odd:?}"), "apply \"apply\"");
        assert_eq!(TaskKind::default(), "");
    }
}
