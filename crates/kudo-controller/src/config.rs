//! The manager's configuration: its tunables ([`ControllerConfig`]) and leader election
//! ([`LeaderElection`]), with the checks that reject what cannot work.

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::Error;

/// Tunables of the controller. The defaults suit both tests and a real cluster.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Field manager for server-side apply and for our own writes: the owner of every field the
    /// operator's templates set, so SSA conflicts with other managers are resolved in our favour.
    pub field_manager: String,
    /// Longest time a running plan waits before the controller looks again without any watch event.
    /// A plan waiting only for watched objects of its Instance is looked at again after this
    /// long unless an event comes first; other waits keep KUDO's 1–60 s backoff, capped by this.
    /// Five minutes, like [`Self::idle_resync`]: the watches re-list after any break, so the timer
    /// only guards against a wake rule that missed a change; at 60 s a rollout of a few minutes on
    /// a busy cluster got a pass each minute that found nothing new (~3 of 7.8 reconciles per
    /// Instance in the real-cluster bench).
    pub requeue_backstop: Duration,
    /// How often idle Instances re-check their readiness without a watch event.
    pub idle_resync: Duration,
    /// Delay before retrying after a reconcile failed with an unexpected (non-plan) error.
    pub error_requeue: Duration,
    /// Maximum number of Instances reconciled at the same time (0 = unbounded). One Instance is
    /// never reconciled concurrently with itself.
    pub concurrency: u16,
    /// How long a triggered reconcile waits for more triggers of the same Instance (each one
    /// restarts the wait; kube-runtime's debounce). Zero runs at once.
    pub debounce: Duration,
    /// Address of the `/metrics`, `/healthz`, `/readyz` server; `None` serves nothing (the
    /// in-process `kubectl kudo dev` manager and most tests). Use [`crate::run_with`] and an
    /// [`crate::OpsServer`] bound beforehand to learn the address of port 0.
    pub metrics_addr: Option<SocketAddr>,
    /// Compete for a Lease and reconcile only while holding it; `None` always reconciles (one
    /// replica, or the in-process manager).
    pub leader_election: Option<LeaderElection>,
    /// Watch and reconcile only Instances (and their children) in this namespace; `None` watches
    /// the whole cluster. Lets several managers share one cluster without fighting over the same
    /// Instances (tests on a shared real control plane, one manager per team namespace).
    pub namespace: Option<String>,
    /// Namespaces this manager does not act on although it watches them (a name, or a prefix
    /// ending in `*`): another manager owns them (`kudo_engine::scope`). No Instance or typed
    /// object there is reconciled, and no rollout changes an Instance there.
    pub ignored_namespaces: Vec<String>,
    /// The ServiceAccount (in each Instance's own namespace) impersonated for an Instance without
    /// `spec.serviceAccountName`; `None` applies such Instances with the manager's own identity
    /// (KUDO's behaviour). See [`crate::impersonation`].
    pub default_service_account: Option<String>,
    /// How many revisions (`kubectl kudo history`) are kept per Instance; older ones are deleted
    /// when a new run is recorded. See [`crate::revisions`].
    pub revision_history_limit: usize,
    /// Split the Instances into this many shards, each a Lease (see [`crate::shard`]); replicas
    /// share them fairly. 1 (the default) is one acting replica, elected by [`Self::leader_election`]
    /// if set. More than 1 needs [`Self::leader_election`] (its lease name, namespace, identity
    /// and duration are the shard Leases').
    pub shards: u32,
    /// Run only OperatorVersions stored by an OperatorSource that verified their signature and
    /// unchanged since (`kudo_engine::source::policy`); an Instance of any other fails with a
    /// condition and an Event, and nothing is applied for it. Sources with `verify.provider: none`
    /// are refused.
    pub require_verified_sources: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            field_manager: kudo_engine::field_ownership::FIELD_MANAGER.to_string(),
            requeue_backstop: Duration::from_secs(300),
            idle_resync: Duration::from_secs(300),
            error_requeue: Duration::from_secs(5),
            concurrency: 4,
            debounce: Duration::ZERO,
            metrics_addr: None,
            leader_election: None,
            namespace: None,
            ignored_namespaces: Vec::new(),
            default_service_account: None,
            revision_history_limit: kudo_engine::revision::DEFAULT_HISTORY_LIMIT,
            shards: 1,
            require_verified_sources: false,
        }
    }
}

impl ControllerConfig {
    /// Whether the configuration can work; `Err` says what is wrong.
    pub fn validate(&self) -> Result<(), Error> {
        let config = self;
        if config.field_manager.is_empty() {
            return Err(Error::InvalidConfig("field_manager must not be empty".into()));
        }
        if let Some(le) = &config.leader_election {
            le.validate().map_err(|e| Error::InvalidConfig(e.to_string()))?;
        }
        if config.shards == 0 {
            return Err(Error::InvalidConfig("shards must be at least 1".into()));
        }
        if config.shards > kudo_engine::shard::BUCKETS {
            return Err(Error::InvalidConfig(format!(
                "shards must be at most {} (a shard is a set of the Instances' hash buckets)",
                kudo_engine::shard::BUCKETS
            )));
        }
        if let Some(ns) = &config.namespace
            && kudo_engine::scope::ignored(&config.ignored_namespaces, ns)
        {
            return Err(Error::InvalidConfig(format!(
                "namespace {ns} is both the only one watched and ignored"
            )));
        }
        if config.shards > 1 && config.leader_election.is_none() {
            return Err(Error::InvalidConfig(
                "shards above 1 need leader election: each shard is a Lease".into(),
            ));
        }
        Ok(())
    }
}

/// Leader election settings of [`ControllerConfig::leader_election`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// Name of the Lease object all replicas compete for.
    pub lease_name: String,
    /// Namespace of the Lease (usually the manager's own namespace).
    pub namespace: String,
    /// Unique identity of this replica (the pod name in a cluster); also the
    /// `reportingInstance` of the Events it publishes.
    pub identity: String,
    /// How long a lease stays valid after its last renewal: the longest a crashed leader blocks
    /// its successor. Whole seconds, at least 2. The holder renews a third of it (at least 1 s)
    /// before expiry.
    pub lease_duration: Duration,
}

/// A leader-election setting that cannot work ([`LeaderElection::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaderConfigError {
    /// A name, namespace or identity is empty or blank; holds which setting (`lease name`, …).
    #[error("leader election: the {0} must not be empty")]
    Empty(&'static str),
    /// The lease duration is below 2 s or not a whole number of seconds; holds the value given.
    #[error("leader election: the lease duration must be a whole number of seconds, at least 2 (got {0:?})")]
    LeaseDuration(Duration),
}

impl LeaderElection {
    /// Checks the settings; `Err` says what is wrong.
    pub fn validate(&self) -> Result<(), LeaderConfigError> {
        for (what, v) in [
            ("lease name", &self.lease_name),
            ("lease namespace", &self.namespace),
            ("identity", &self.identity),
        ] {
            if v.trim().is_empty() {
                return Err(LeaderConfigError::Empty(what));
            }
        }
        if self.lease_duration.as_secs() < 2 || self.lease_duration.subsec_nanos() != 0 {
            return Err(LeaderConfigError::LeaseDuration(self.lease_duration));
        }
        Ok(())
    }

    pub(crate) fn duration_secs(&self) -> u64 {
        self.lease_duration.as_secs()
    }

    /// Renewal margin before expiry; always below the duration (validated ≥ 2 s).
    pub(crate) fn grace_secs(&self) -> u64 {
        (self.duration_secs() / 3).max(1)
    }
}
