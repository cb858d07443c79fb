//! Resolving an object's `apiVersion`/`kind` to an API resource (plural, namespacedness) through
//! the discovery API, cached and refreshed on a miss so that CRDs installed by an earlier step of
//! the same plan are found.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use kube::api::{ApiResource, GroupVersionKind};
use kube::discovery::{Scope, pinned_kind};
use kudo_api::kinds::GvkKey;
use kudo_package::live::KindLookup;

/// The API resource of a kind of the shared table [`kudo_api::kinds`], for kinds the code names
/// itself (watches, readiness, the CLI); arbitrary objects go through [`Cache::resolve`].
///
/// ```
/// let secrets = kudo_kube::known_resource("", "Secret");
/// assert_eq!((secrets.api_version.as_str(), secrets.plural.as_str()), ("v1", "secrets"));
/// ```
pub fn known_resource(group: &str, kind: &str) -> ApiResource {
    let k = kudo_api::kinds::known(group, kind);
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(k.group, k.version, k.kind), k.plural)
}

/// Outcome of a lookup.
#[derive(Debug, Clone)]
pub enum Resolved {
    /// The server serves the kind.
    Found {
        /// The resource to address objects of the kind with (group, version, plural).
        resource: ApiResource,
        /// Whether objects of the kind live in a namespace.
        namespaced: bool,
    },
    /// The server does not serve this kind (e.g. the CRD is absent): a fatal task error.
    Unknown(String),
}

/// (apiVersion, kind) → (resource, namespaced).
type Known = HashMap<GvkKey, (ApiResource, bool)>;

/// A discovery cache shared by all reconciles.
#[derive(Clone)]
pub struct Cache {
    client: kube::Client,
    known: Arc<RwLock<Known>>,
    /// Removed built-in API versions (those with a translation) found not served: they never
    /// come back, so they are not asked again at every render.
    removed: Arc<RwLock<HashMap<GvkKey, String>>>,
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

impl Cache {
    /// An empty cache that asks the API server through `client` on a miss.
    pub fn new(client: kube::Client) -> Cache {
        Cache {
            client,
            known: Arc::default(),
            removed: Arc::default(),
        }
    }

    /// Namespacedness from the cache only (synchronous, for the renderer); `None` on a miss.
    pub fn cached_namespaced(&self, api_version: &str, kind: &str) -> Option<bool> {
        let known = self.known.read().unwrap_or_else(|e| e.into_inner());
        known.get(&GvkKey::new(api_version, kind)).map(|(_, n)| *n)
    }

    /// What discovery says about a kind, for a live render ([`kudo_package::live`]).
    pub async fn lookup(&self, api_version: &str, kind: &str) -> KindLookup {
        match self.resolve(api_version, kind).await {
            Ok(Resolved::Found { namespaced, .. }) => KindLookup::Served { namespaced },
            Ok(Resolved::Unknown(_)) => KindLookup::NotServed,
            Err(_) => KindLookup::Failed,
        }
    }

    /// Resolves a kind, asking the server on a cache miss. `Err` is a transient failure (the
    /// server could not be asked); an unserved kind is `Ok(Resolved::Unknown)`.
    pub async fn resolve(&self, api_version: &str, kind: &str) -> Result<Resolved, kube::Error> {
        let key = GvkKey::new(api_version, kind);
        if let Some((resource, namespaced)) = self
            .known
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned()
        {
            return Ok(Resolved::Found { resource, namespaced });
        }
        if let Some(msg) = self.removed.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(Resolved::Unknown(msg.clone()));
        }
        if api_version.is_empty() || kind.is_empty() {
            return Ok(Resolved::Unknown(format!(
                "object without apiVersion/kind (apiVersion {api_version:?}, kind {kind:?})"
            )));
        }
        let (group, version) = split_api_version(api_version);
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let unknown = |msg: String| {
            if kudo_package::translate::mapping(api_version, kind).is_some() {
                self.removed
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key.clone(), msg.clone());
            }
            Ok(Resolved::Unknown(msg))
        };
        match pinned_kind(&self.client, &gvk).await {
            Ok((resource, caps)) => {
                let namespaced = caps.scope == Scope::Namespaced;
                self.known
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, (resource.clone(), namespaced));
                Ok(Resolved::Found { resource, namespaced })
            }
            Err(kube::Error::Api(e)) if e.code == 404 => unknown(format!(
                "no matches for kind {kind:?} in version {api_version:?}: the API server does not serve {api_version}"
            )),
            Err(kube::Error::Discovery(e)) => unknown(format!(
                "no matches for kind {kind:?} in version {api_version:?}: {e}"
            )),
            Err(e) => Err(e),
        }
    }
}
