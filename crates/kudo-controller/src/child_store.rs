//! The store of one cached child kind (crate::cache): every `heritage=kudo` object of that kind in
//! the manager's scope, as compact JSON text, found by name or by the Instance it is labelled for.
//!
//! Written here rather than taken from kube-runtime's reflector `Store`, which the child caches
//! used before: that store keys every object by an `ObjectRef` repeating the kind's
//! `ApiResource` (five strings) and the object's resourceVersion and uid, and keeps each object
//! decoded (an `ObjectMeta` with its label map — a B-tree node of eleven slots even for two
//! labels) beside the body; a second map by Instance label sat next to it for readiness. At
//! `scale 10000` (50,000 cached children) the manager's heap was ~200 MiB, most of it those
//! structures. Here a namespace is kept once, an object is its name, the Instance it is labelled
//! for and its text, and the names by Instance live in the same table, under one lock.
//!
//! The text is what readers get back parsed: the object with `apiVersion` and `kind` set (watch
//! events of typed lists may omit them), after [`crate::cache::slim`].

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::api::DynamicObject;
use kube::runtime::watcher;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

/// The cached objects of one child kind.
pub(crate) struct ChildStore {
    api_version: String,
    kind: String,
    shelf: RwLock<Shelf>,
    /// Set once the first full list is in (an unready store is empty, not "nothing exists").
    ready: AtomicBool,
}

#[derive(Default)]
struct Shelf {
    live: Objects,
    /// A re-list in progress: built aside and swapped in when complete, as the reflector does.
    relisting: Option<Objects>,
}

#[derive(Default)]
struct Objects(HashMap<Box<str>, Namespace>);

#[derive(Default)]
struct Namespace {
    by_name: HashMap<Box<str>, Entry>,
    /// `kudo.dev/instance` label → names of its objects, sorted.
    by_instance: HashMap<Box<str>, Vec<Box<str>>>,
}

struct Entry {
    instance: Option<Box<str>>,
    text: Box<str>,
}

impl Objects {
    fn insert(&mut self, ns: &str, name: &str, instance: Option<&str>, text: String) {
        self.remove(ns, name);
        let space = match self.0.get_mut(ns) {
            Some(space) => space,
            None => self.0.entry(ns.into()).or_default(),
        };
        if let Some(i) = instance {
            let names = space.by_instance.entry(i.into()).or_default();
            if let Err(at) = names.binary_search_by(|n| (**n).cmp(name)) {
                names.insert(at, name.into());
            }
        }
        let entry = Entry {
            instance: instance.map(Into::into),
            text: text.into_boxed_str(),
        };
        space.by_name.insert(name.into(), entry);
    }

    fn remove(&mut self, ns: &str, name: &str) {
        let Some(space) = self.0.get_mut(ns) else {
            return;
        };
        if let Some(Entry {
            instance: Some(i), ..
        }) = space.by_name.remove(name)
            && let Some(names) = space.by_instance.get_mut(&*i)
        {
            names.retain(|n| &**n != name);
            if names.is_empty() {
                space.by_instance.remove(&*i);
            }
        }
        if space.by_name.is_empty() {
            self.0.remove(ns);
        }
    }

    fn put(&mut self, o: &DynamicObject, api_version: &str, kind: &str) {
        let (ns, name) = key(o);
        let instance = o
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(kudo_api::labels::INSTANCE));
        self.insert(
            ns,
            name,
            instance.map(String::as_str),
            typed_text(o, api_version, kind),
        );
    }
}

fn key(o: &DynamicObject) -> (&str, &str) {
    (
        o.metadata.namespace.as_deref().unwrap_or_default(),
        o.metadata.name.as_deref().unwrap_or_default(),
    )
}

impl ChildStore {
    pub fn new(api_version: &str, kind: &str) -> ChildStore {
        ChildStore {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            shelf: RwLock::default(),
            ready: AtomicBool::new(false),
        }
    }

    /// Follows one watch event of the kind (the object already slim).
    pub fn observe(&self, ev: &watcher::Event<DynamicObject>) {
        let mut shelf = self.shelf.write().unwrap_or_else(|e| e.into_inner());
        let (av, kind) = (self.api_version.as_str(), self.kind.as_str());
        match ev {
            watcher::Event::Apply(o) => shelf.live.put(o, av, kind),
            watcher::Event::Delete(o) => {
                let (ns, name) = key(o);
                shelf.live.remove(ns, name)
            }
            watcher::Event::Init => shelf.relisting = Some(Objects::default()),
            watcher::Event::InitApply(o) => shelf
                .relisting
                .get_or_insert_with(Objects::default)
                .put(o, av, kind),
            watcher::Event::InitDone => {
                if let Some(listed) = shelf.relisting.take() {
                    shelf.live = listed;
                }
                self.ready.store(true, Ordering::Release);
            }
        }
    }

    /// Whether the first full list is in.
    pub fn ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The cached object `ns/name`, typed, if the store has it.
    pub fn get(&self, ns: &str, name: &str) -> Option<Value> {
        let shelf = self.shelf.read().unwrap_or_else(|e| e.into_inner());
        let entry = shelf.live.0.get(ns)?.by_name.get(name)?;
        Some(parse(&entry.text))
    }

    /// The cached objects of `ns` labelled for `instance`, typed, by name.
    pub fn of_instance(&self, ns: &str, instance: &str) -> Vec<Value> {
        let shelf = self.shelf.read().unwrap_or_else(|e| e.into_inner());
        let Some(space) = shelf.live.0.get(ns) else {
            return Vec::new();
        };
        let names = space
            .by_instance
            .get(instance)
            .map(Vec::as_slice)
            .unwrap_or_default();
        names
            .iter()
            .filter_map(|n| space.by_name.get(n))
            .map(|e| parse(&e.text))
            .collect()
    }
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// `o` as JSON text with `apiVersion` and `kind` set, its metadata first, then its body (unpacked
/// if [`crate::cache::pack`]ed) — the same document [`crate::cache`]'s typed views build.
pub(crate) fn typed_text(o: &DynamicObject, api_version: &str, kind: &str) -> String {
    struct View<'a>(&'a DynamicObject, &'a str, &'a str, &'a Value);
    impl serde::Serialize for View<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut m = s.serialize_map(None)?;
            m.serialize_entry("apiVersion", self.1)?;
            m.serialize_entry("kind", self.2)?;
            m.serialize_entry("metadata", &self.0.metadata)?;
            for (k, v) in self.3.as_object().into_iter().flatten() {
                if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    m.serialize_entry(k, v)?;
                }
            }
            m.end()
        }
    }
    let unpacked;
    let body = match &o.data {
        Value::String(packed) => {
            unpacked = parse(packed);
            &unpacked
        }
        other => other,
    };
    serde_json::to_string(&View(o, api_version, kind, body)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, instance: Option<&str>, phase: &str) -> DynamicObject {
        let mut meta = json!({"name": name, "namespace": "ns", "uid": format!("u-{name}")});
        if let Some(i) = instance {
            meta["labels"] = json!({"heritage": "kudo", "kudo.dev/instance": i});
        }
        serde_json::from_value(json!({"metadata": meta, "status": {"phase": phase}})).unwrap()
    }

    fn names(objects: Vec<Value>) -> Vec<String> {
        objects
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn an_object_reads_back_typed_with_its_metadata_and_body() {
        let store = ChildStore::new("v1", "Pod");
        assert!(!store.ready());
        store.observe(&watcher::Event::Init);
        store.observe(&watcher::Event::InitApply(pod("a", Some("i"), "Running")));
        store.observe(&watcher::Event::InitDone);
        assert!(store.ready());
        assert_eq!(
            store.get("ns", "a"),
            Some(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "a", "namespace": "ns", "uid": "u-a",
                    "labels": {"heritage": "kudo", "kudo.dev/instance": "i"}},
                "status": {"phase": "Running"}}))
        );
        assert_eq!(store.get("ns", "b"), None);
        assert_eq!(store.get("other", "a"), None);
        // a packed body reads back the same
        let mut packed = pod("a", Some("i"), "Running");
        crate::cache::pack(&mut packed);
        assert_eq!(
            typed_text(&packed, "v1", "Pod"),
            typed_text(&pod("a", Some("i"), "Running"), "v1", "Pod")
        );
    }

    #[test]
    fn objects_by_instance_follow_applies_deletes_relabels_and_relists() {
        let store = ChildStore::new("v1", "Pod");
        let apply = |o| store.observe(&watcher::Event::Apply(o));
        apply(pod("b", Some("i"), "Pending"));
        apply(pod("a", Some("i"), "Pending"));
        apply(pod("c", Some("j"), "Pending"));
        apply(pod("x", None, "Pending"));
        assert_eq!(names(store.of_instance("ns", "i")), ["a", "b"]);
        assert!(store.of_instance("other", "i").is_empty());
        assert!(
            store.get("ns", "x").is_some(),
            "unlabelled objects are found by name"
        );
        apply(pod("b", Some("j"), "Running"));
        assert_eq!(names(store.of_instance("ns", "i")), ["a"]);
        assert_eq!(names(store.of_instance("ns", "j")), ["b", "c"]);
        assert_eq!(store.of_instance("ns", "j")[0]["status"]["phase"], "Running");
        store.observe(&watcher::Event::Delete(pod("a", Some("i"), "Pending")));
        assert!(store.of_instance("ns", "i").is_empty());
        assert_eq!(store.get("ns", "a"), None);
        // a re-list: the old objects stay until it is complete, then only the listed ones remain
        store.observe(&watcher::Event::Init);
        store.observe(&watcher::Event::InitApply(pod("d", Some("i"), "Pending")));
        assert_eq!(names(store.of_instance("ns", "j")), ["b", "c"]);
        store.observe(&watcher::Event::InitDone);
        assert_eq!(names(store.of_instance("ns", "i")), ["d"]);
        assert!(store.of_instance("ns", "j").is_empty());
        assert_eq!(store.get("ns", "x"), None);
    }
}
