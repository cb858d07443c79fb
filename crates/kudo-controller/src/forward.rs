//! A watch's view never goes back in time: a live event carrying an older copy of an object than
//! one the same watch already delivered is dropped before it reaches the caches and the triggers.
//!
//! One kube-apiserver sends each object's changes in order, but a client can still be shown the
//! past: after a re-connection to another API server whose watch cache lags, or by a faulty
//! proxy — the stale views Sieve (OSDI '22) found bugs with in ten controllers. A cache holding
//! the older copy would be believed: a StatefulSet's status would read as not yet updated for
//! as long as nothing else changes it, an Instance as not yet changed. Which copy is older is
//! decided by [`kudo_kube::resource_version::compare`] (Kubernetes 1.35's comparable
//! resourceVersions); copies that cannot be compared are passed on, as before that rule.
//!
//! Only live changes are dropped: a re-list (`InitApply`) is the watch's whole new state and
//! passes on whole, and it moves the newest versions known to what it lists.

use std::collections::HashMap;

use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::watcher::Event;

use crate::views::ViewStream;

/// The newest resourceVersion a watch delivered of each object, by (namespace, name).
#[derive(Default)]
struct Newest(HashMap<(String, String), String>);

impl Newest {
    /// Whether a live change carrying `rv` of `key` is passed on (it is not older than the
    /// newest delivered); the newest is moved to it when passed.
    fn live(&mut self, key: (String, String), rv: &str) -> bool {
        kudo_kube::resource_version::advance(self.0.entry(key).or_default(), rv)
    }
}

/// `events` without the live changes that go back in time.
pub(crate) fn forward_only(events: ViewStream) -> ViewStream {
    let mut newest = Newest::default();
    events
        .filter(move |ev| {
            let pass = match ev {
                Ok(Event::Apply(o)) => {
                    let rv = o.resource_version().unwrap_or_default();
                    newest.live((o.namespace().unwrap_or_default(), o.name_any()), &rv)
                }
                Ok(Event::InitApply(o)) => {
                    let key = (o.namespace().unwrap_or_default(), o.name_any());
                    newest.0.insert(key, o.resource_version().unwrap_or_default());
                    true
                }
                Ok(Event::Delete(o)) => {
                    newest
                        .0
                        .remove(&(o.namespace().unwrap_or_default(), o.name_any()));
                    true
                }
                _ => true,
            };
            futures::future::ready(pass)
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_change_older_than_one_delivered_is_dropped() {
        let key = |n: &str| ("ns".to_string(), n.to_string());
        let mut n = Newest::default();
        // (object, resourceVersion, passed on)
        let cases = [
            ("a", "10", true),
            ("a", "12", true),
            ("a", "11", false),
            ("a", "12", true),
            ("b", "5", true),
            ("a", "100", true),
            ("a", "99", false),
            ("a", "x7", true),
            ("a", "3", true),
        ];
        for (name, rv, want) in cases {
            assert_eq!(n.live(key(name), rv), want, "{name}@{rv}");
        }
    }
}
