//! What every reconcile of one controller incarnation shares ([`Context`]), grouped by role: how
//! the manager reaches the cluster, what its watches keep, and what it remembers of its own
//! writes (memory only: a restarted manager starts empty and loses nothing that matters, see
//! docs/architecture.md).

use std::sync::Arc;

use kudo_kube::discovery;

use crate::applied::AppliedCache;
use crate::autopilot;
use crate::cache::Caches;
use crate::config::ControllerConfig;
use crate::echoes::Echoes;
use crate::events::{REPORTER, Recorder};
use crate::gate::ShardGate;
use crate::impersonation::{self, Identities};
use crate::metrics::Metrics;
use crate::revisions::Revisions;
use crate::timings::Timings;
use crate::translate;

/// Shared state of all reconciles.
pub(crate) struct Context {
    /// How the manager reaches the cluster.
    pub cluster: Cluster,
    /// Watch-fed caches of Instances, OperatorVersions and managed objects (see
    /// [`crate::cache`]).
    pub caches: Caches,
    /// Watches of the objects autopilot rules look at, and their caches (see
    /// [`crate::autopilot`]).
    pub autopilot: autopilot::Watches,
    /// What this manager applied and wrote, remembered between reconciles.
    pub memory: Memory,
    pub config: ControllerConfig,
    pub metrics: Arc<Metrics>,
    /// Which Instances this replica reconciles (see [`crate::gate`]).
    pub shards: Arc<ShardGate>,
}

/// How the manager reaches the cluster.
pub(crate) struct Cluster {
    /// The manager's own identity, for its bookkeeping only (the Instance and its status,
    /// OperatorVersions, the Lease, caches); requests made for an Instance go through
    /// [`Context::acting_client`].
    pub client: kube::Client,
    /// Kinds resolved to API resources.
    pub discovery: discovery::Cache,
    /// The ServiceAccounts Instances are applied as (see [`crate::impersonation`]).
    pub identities: Identities,
    /// Events on Instances.
    pub recorder: Recorder,
    /// The revision history of plan runs (see [`crate::revisions`]).
    pub revisions: Revisions,
}

/// What this manager applied and wrote, kept in memory only.
#[derive(Default)]
pub(crate) struct Memory {
    /// The content of each object last applied (see [`crate::applied`]).
    pub applied: AppliedCache,
    /// Translations of removed API versions already announced by an Event.
    pub translations: translate::Announced,
    /// The versions of this manager's own Instance writes (see [`crate::echoes`]).
    pub echoes: Arc<Echoes>,
    /// The versions of the objects plans applied (see [`crate::echoes`]).
    pub child_echoes: Arc<Echoes>,
    /// Plan timing not yet stored in the Instances (see [`crate::timings`]).
    pub timings: Timings,
    /// Rendered texts parsed before: a running plan renders the same text at every pass.
    pub parse_memo: Arc<kudo_package::split::ParseMemo>,
}

/// What the watches of an incarnation hand to its reconciles.
pub(crate) struct Watched {
    pub caches: Caches,
    pub autopilot: autopilot::Watches,
    /// Echoes of the Instance writes and of the applied objects, shared with the watches that
    /// skip them.
    pub echoes: Arc<Echoes>,
    pub child_echoes: Arc<Echoes>,
}

impl Context {
    /// The state every reconcile shares. Events name the replica that acted: its leader election
    /// identity (the pod name in a cluster), else the pod name from the environment.
    pub fn new(
        client: kube::Client,
        config: ControllerConfig,
        watched: Watched,
        shards: Arc<ShardGate>,
        metrics: Arc<Metrics>,
    ) -> Context {
        let instance = config
            .leader_election
            .as_ref()
            .map(|le| le.identity.clone())
            .or_else(|| std::env::var("KUDO_POD_NAME").ok());
        let cluster = Cluster {
            discovery: discovery::Cache::new(client.clone()),
            identities: Identities::new(client.clone()),
            recorder: Recorder::new(client.clone(), REPORTER, instance),
            revisions: Revisions::new(client.clone(), config.revision_history_limit),
            client,
        };
        let memory = Memory {
            echoes: watched.echoes,
            child_echoes: watched.child_echoes,
            ..Memory::default()
        };
        Context {
            cluster,
            caches: watched.caches,
            autopilot: watched.autopilot,
            memory,
            config,
            metrics,
            shards,
        }
    }

    /// The client for requests made *for* the Instance being reconciled: impersonating its
    /// ServiceAccount when it has one (see [`crate::impersonation`]), else the manager's own.
    pub fn acting_client(&self) -> kube::Client {
        impersonation::current().map_or_else(|| self.cluster.client.clone(), |a| a.client)
    }
}
