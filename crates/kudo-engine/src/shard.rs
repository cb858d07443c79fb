//! Sharded managers: which shard an Instance belongs to, and what one replica does with
//! the shard Leases at each tick. Pure: the manager lists the Leases, asks [`decide`], and sends
//! the writes ([`ShardMove`]) itself.
//!
//! * **Shards.** `--shards N` splits the Instances into N shards by [`shard_of`]; each shard is a
//!   Lease, and only its holder reconciles the shard's Instances. A shard is a set of the 1,024
//!   [`bucket_of`] buckets, which label what the replicas watch (so they receive only their own).
//! * **Members.** Every replica keeps a Lease of its own (a member Lease, renewed like the shard
//!   Leases), so the replicas know how many of them are alive even while one holds no shard.
//! * **Fair share.** With M live members each replica holds at most ⌈N / M⌉ shards
//!   ([`fair_share`]): it releases what it holds above that (highest shard numbers first) and
//!   acquires free or expired shards below it (lowest first). A survivor keeps its shards and takes
//!   the dead replica's once their Leases expire; a newcomer gets the shards the others release.
//! * **Exclusion** comes from the Leases alone: a shard is acquired only by a write conditioned on
//!   the resourceVersion the replica saw free (or a create), so of two replicas racing for one,
//!   one write fails. Two replicas that disagree on the member count only delay the balance.
//!
//! Expiry compares a Lease's `renewTime + leaseDurationSeconds` with the local clock, as
//! Kubernetes' own Lease users do: the replicas' clocks must agree to well within a lease duration.

use std::collections::{BTreeMap, BTreeSet};

/// How many buckets the Instances are hashed into, whatever the shard count: an Instance's bucket
/// is a label on it and on what its plans apply (pod templates included), so it must never change
/// with `--shards`; a shard is a set of buckets. `--shards` is capped at this.
pub const BUCKETS: u32 = 1024;

/// The label carrying [`bucket_of`] on a sharded manager's Instances and applied objects, for
/// the label-selected watches of each replica (only the buckets of its shards reach it).
pub const BUCKET_LABEL: &str = kudo_api::labels::BUCKET;

/// The bucket of Instance `namespace/name`: FNV-1a (64-bit) of the UTF-8 bytes of
/// `namespace/name`, modulo [`BUCKETS`]. Stable across versions and platforms (a changed hash
/// would relabel every workload) and documented in docs/architecture.md.
pub fn bucket_of(namespace: &str, name: &str) -> u32 {
    let h = fnv1a64(namespace.bytes().chain(std::iter::once(b'/')).chain(name.bytes()));
    u32::try_from(h % u64::from(BUCKETS)).unwrap_or(0)
}

/// The [`BUCKET_LABEL`] value of Instance `namespace/name` (and of what its plans apply) for a
/// manager split into `shards`; `None` unsharded (`shards` ≤ 1: no label at all).
pub fn bucket_label(shards: u32, namespace: &str, name: &str) -> Option<String> {
    (shards > 1).then(|| bucket_of(namespace, name).to_string())
}

/// The [`bucket_label`] an Instance with `labels` still lacks, for the manager's next write of it;
/// `None` when it carries the right one or the manager is not sharded.
pub fn missing_bucket_label(
    shards: u32,
    labels: &BTreeMap<String, String>,
    namespace: &str,
    name: &str,
) -> Option<String> {
    let bucket = bucket_label(shards, namespace, name)?;
    (labels.get(BUCKET_LABEL) != Some(&bucket)).then_some(bucket)
}

/// The shard of Instance `namespace/name` among `shards` (at least 1, at most [`BUCKETS`]): its
/// [`bucket_of`] modulo `shards` — the FNV-1a hash modulo `shards` itself whenever `shards`
/// divides 1024. Stable across versions and platforms, so an operator can tell where an Instance
/// is handled.
pub fn shard_of(namespace: &str, name: &str, shards: u32) -> u32 {
    bucket_of(namespace, name) % shards.clamp(1, BUCKETS)
}

/// The buckets of `held` shards among `shards`, ascending.
pub fn buckets_of(held: &BTreeSet<u32>, shards: u32) -> Vec<u32> {
    let n = shards.clamp(1, BUCKETS);
    (0..BUCKETS).filter(|b| held.contains(&(b % n))).collect()
}

/// The label selector requirement matching the objects of `held` shards among `shards`
/// (`kudo.dev/bucket in (…)`); `None` when nothing is held (an empty set is no valid selector).
pub fn bucket_selector(held: &BTreeSet<u32>, shards: u32) -> Option<String> {
    let buckets = buckets_of(held, shards);
    if buckets.is_empty() {
        return None;
    }
    let list: Vec<String> = buckets.iter().map(u32::to_string).collect();
    Some(format!("{BUCKET_LABEL} in ({})", list.join(",")))
}

/// FNV-1a, 64-bit (the published algorithm: offset basis 0xcbf29ce484222325, prime 2^40 + 0x1b3).
/// Twelve lines do not justify a dependency, and the hash must never change under us.
pub fn fnv1a64(bytes: impl IntoIterator<Item = u8>) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .into_iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

/// Most shards a replica holds when `members` replicas are alive: ⌈shards / members⌉.
pub fn fair_share(shards: u32, members: usize) -> u32 {
    let m = u32::try_from(members.max(1)).unwrap_or(u32::MAX);
    shards.div_ceil(m)
}

/// A Lease as the tick saw it: its holder and until when (milliseconds since the Unix epoch) the
/// holder's last renewal keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseView {
    /// `spec.holderIdentity`; `None` when empty or released.
    pub holder: Option<String>,
    /// `renewTime + leaseDurationSeconds` in Unix milliseconds (0 when never renewed).
    pub valid_until_ms: i64,
}

impl LeaseView {
    /// Held by someone whose renewal still counts at `now_ms`.
    pub fn live(&self, now_ms: i64) -> bool {
        self.holder.is_some() && now_ms < self.valid_until_ms
    }
}

/// What one replica knows at a tick.
#[derive(Debug, Clone)]
pub struct Survey<'a> {
    /// This replica's identity.
    pub me: &'a str,
    /// The tick's time in Unix milliseconds, compared with [`LeaseView::valid_until_ms`].
    pub now_ms: i64,
    /// The shard count (`--shards`).
    pub shards: u32,
    /// The shard Leases that exist, by shard number.
    pub leases: &'a BTreeMap<u32, LeaseView>,
    /// Every member Lease (holder = the member's identity), this replica's own included if written.
    pub members: &'a [LeaseView],
    /// The shards this replica acts on now.
    pub held: &'a BTreeSet<u32>,
}

/// One step of a tick. The manager carries them out by kind: losses first (stop acting at once),
/// then renewals (before anything that may wait), releases and acquisitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardMove {
    /// The Lease of a shard this replica acts on names someone else, or is gone: stop now.
    Lost(u32),
    /// Above the fair share (or holding a Lease it does not act on): stop acting, then free it.
    Release(u32),
    /// Keep the shard: renew its Lease.
    Renew(u32),
    /// Free, expired, or ours but not acted on: take the Lease, then act on the shard.
    Acquire(u32),
}

impl ShardMove {
    /// The shard the move is about.
    pub fn shard(&self) -> u32 {
        match *self {
            ShardMove::Lost(n) | ShardMove::Release(n) | ShardMove::Renew(n) | ShardMove::Acquire(n) => n,
        }
    }
}

/// Live replicas: the distinct identities of live member Leases, this replica always counted.
pub fn live_members(s: &Survey) -> usize {
    let mut ids: BTreeSet<&str> = s
        .members
        .iter()
        .filter(|m| m.live(s.now_ms))
        .filter_map(|m| m.holder.as_deref())
        .collect();
    ids.insert(s.me);
    ids.len()
}

/// This replica's moves at one tick (see the module docs).
pub fn decide(s: &Survey) -> Vec<ShardMove> {
    let cap = fair_share(s.shards, live_members(s)) as usize;
    let mine = |n: &u32| s.leases.get(n).and_then(|l| l.holder.as_deref()) == Some(s.me);
    let (kept, lost): (Vec<u32>, Vec<u32>) = s.held.iter().partition(|n| mine(n) && **n < s.shards);
    let mut moves: Vec<ShardMove> = lost.into_iter().map(ShardMove::Lost).collect();
    let release_from = kept.len().min(cap);
    moves.extend(kept[release_from..].iter().map(|n| ShardMove::Release(*n)));
    moves.extend(kept[..release_from].iter().map(|n| ShardMove::Renew(*n)));
    let wanted = cap.saturating_sub(release_from);
    // Leases naming this replica that it does not act on come first (a restart with the same
    // identity, a renewal that failed): taking them back costs nobody anything.
    let (ours, free): (Vec<u32>, Vec<u32>) = (0..s.shards)
        .filter(|n| !s.held.contains(n))
        .filter(|n| s.leases.get(n).is_none_or(|l| mine(n) || !l.live(s.now_ms)))
        .partition(|n| mine(n));
    let take: Vec<u32> = ours.iter().chain(&free).take(wanted).copied().collect();
    moves.extend(take.iter().map(|n| ShardMove::Acquire(*n)));
    moves.extend(
        ours.iter()
            .filter(|n| !take.contains(n))
            .map(|n| ShardMove::Release(*n)),
    );
    moves
}
