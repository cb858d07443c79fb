//! Sharded managers: the shard hash and one replica's moves at a tick (kudo_engine::shard).

use std::collections::{BTreeMap, BTreeSet};

use kudo_engine::shard::{
    BUCKET_LABEL, BUCKETS, LeaseView, ShardMove, Survey, bucket_label, bucket_of, bucket_selector,
    buckets_of, decide, fair_share, fnv1a64, live_members, missing_bucket_label, shard_of,
};

#[test]
fn the_hash_is_fnv1a_64_as_published() {
    // Test vectors of the FNV reference (draft-eastlake-fnv): "", "a", "foobar".
    assert_eq!(fnv1a64(*b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(*b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(*b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn an_instance_shard_is_the_hash_of_namespace_slash_name_modulo_the_count() {
    for (ns, name) in [("default", "galera"), ("team-a", "db-1"), ("", "x")] {
        let h = fnv1a64(format!("{ns}/{name}").into_bytes());
        assert_eq!(u64::from(bucket_of(ns, name)), h % 1024);
        // Whenever the count divides 1024, the shard is the hash modulo the count itself.
        for n in [1u32, 2, 4, 64, 1024] {
            assert_eq!(u64::from(shard_of(ns, name, n)), h % u64::from(n));
        }
        // Otherwise it is the bucket modulo the count (the bucket label never changes with it).
        assert_eq!(shard_of(ns, name, 7), bucket_of(ns, name) % 7);
    }
    // One shard (or a nonsensical 0) puts everything in shard 0.
    assert_eq!(shard_of("a", "b", 1), 0);
    assert_eq!(shard_of("a", "b", 0), 0);
    // The separator matters: "a/bc" and "ab/c" may land apart, and never collide by construction.
    assert_ne!(fnv1a64(*b"a/bc"), fnv1a64(*b"ab/c"));
}

#[test]
fn only_a_sharded_manager_labels_and_only_what_lacks_the_label() {
    let bucket = bucket_of("ns", "db").to_string();
    let labelled = BTreeMap::from([(BUCKET_LABEL.to_string(), bucket.clone())]);
    let wrong = BTreeMap::from([(BUCKET_LABEL.to_string(), "9999".to_string())]);
    type Labels = BTreeMap<String, String>;
    let cases: [(&str, u32, &Labels, Option<&str>); 5] = [
        ("unsharded: no label", 1, &BTreeMap::new(), None),
        ("sharded, unlabelled", 4, &BTreeMap::new(), Some(&bucket)),
        ("sharded, labelled", 4, &labelled, None),
        ("sharded, a wrong label", 4, &wrong, Some(&bucket)),
        ("unsharded, a stale label stays", 1, &wrong, None),
    ];
    for (what, shards, labels, want) in cases {
        assert_eq!(
            missing_bucket_label(shards, labels, "ns", "db").as_deref(),
            want,
            "{what}"
        );
    }
    assert_eq!(bucket_label(1, "ns", "db"), None);
    assert_eq!(bucket_label(2, "ns", "db"), Some(bucket));
}

#[test]
fn a_shard_is_the_set_of_buckets_congruent_to_it() {
    let held = BTreeSet::from([1, 3]);
    let buckets = buckets_of(&held, 4);
    assert_eq!(buckets.len(), 512);
    assert!(buckets.iter().all(|b| b % 4 == 1 || b % 4 == 3));
    assert_eq!(&buckets[..4], &[1, 3, 5, 7]);
    let sel = bucket_selector(&BTreeSet::from([2]), 1024).unwrap_or_default();
    assert_eq!(sel, "kudo.dev/bucket in (2)");
    assert_eq!(bucket_selector(&BTreeSet::new(), 4), None);
    assert_eq!(buckets_of(&BTreeSet::from([0]), 1).len(), BUCKETS as usize);
    // Every Instance is in exactly the shard whose buckets contain its bucket.
    for i in 0..100 {
        let (ns, name) = ("team", format!("db-{i}"));
        for n in [2u32, 3, 4, 1000] {
            let s = shard_of(ns, &name, n);
            assert!(buckets_of(&BTreeSet::from([s]), n).contains(&bucket_of(ns, &name)));
        }
    }
}

#[test]
fn ten_thousand_instances_spread_within_five_percent_over_four_shards() {
    let mut counts = [0u32; 4];
    for i in 0..10_000 {
        counts[shard_of("bench", &format!("scale-{i}"), 4) as usize] += 1;
    }
    for c in counts {
        assert!((2375..=2625).contains(&c), "{counts:?}");
    }
}

#[test]
fn fair_share_is_the_ceiling_of_shards_over_members() {
    for (shards, members, want) in [
        (4, 1, 4),
        (4, 2, 2),
        (4, 3, 2),
        (5, 2, 3),
        (1, 3, 1),
        (4, 0, 4),
        (8, 3, 3),
    ] {
        assert_eq!(fair_share(shards, members), want, "{shards} over {members}");
    }
}

const NOW: i64 = 1_000_000;

fn held_by(who: &str) -> LeaseView {
    LeaseView {
        holder: Some(who.into()),
        valid_until_ms: NOW + 10_000,
    }
}

fn expired(who: &str) -> LeaseView {
    LeaseView {
        holder: Some(who.into()),
        valid_until_ms: NOW - 1,
    }
}

fn released() -> LeaseView {
    LeaseView {
        holder: None,
        valid_until_ms: NOW + 10_000,
    }
}

struct Case {
    what: &'static str,
    leases: Vec<(u32, LeaseView)>,
    members: Vec<LeaseView>,
    held: Vec<u32>,
    want: Vec<ShardMove>,
}

fn run(c: Case) {
    let leases: BTreeMap<u32, LeaseView> = c.leases.into_iter().collect();
    let held: BTreeSet<u32> = c.held.into_iter().collect();
    let s = Survey {
        me: "a",
        now_ms: NOW,
        shards: 4,
        leases: &leases,
        members: &c.members,
        held: &held,
    };
    assert_eq!(decide(&s), c.want, "{}", c.what);
}

use ShardMove::{Acquire, Lost, Release, Renew};

#[test]
fn a_lone_replica_takes_every_shard_and_keeps_them() {
    run(Case {
        what: "no Lease exists yet",
        leases: vec![],
        members: vec![],
        held: vec![],
        want: vec![Acquire(0), Acquire(1), Acquire(2), Acquire(3)],
    });
    run(Case {
        what: "all held: renew them",
        leases: (0..4).map(|n| (n, held_by("a"))).collect(),
        members: vec![held_by("a")],
        held: vec![0, 1, 2, 3],
        want: vec![Renew(0), Renew(1), Renew(2), Renew(3)],
    });
}

#[test]
fn a_newcomer_makes_the_holder_release_down_to_its_fair_share() {
    run(Case {
        what: "b joined: a keeps the two lowest, releases the rest",
        leases: (0..4).map(|n| (n, held_by("a"))).collect(),
        members: vec![held_by("a"), held_by("b")],
        held: vec![0, 1, 2, 3],
        want: vec![Release(2), Release(3), Renew(0), Renew(1)],
    });
}

#[test]
fn a_newcomer_takes_released_shards_but_never_live_ones() {
    let leases = vec![
        (0, held_by("b")),
        (1, held_by("b")),
        (2, released()),
        (3, held_by("b")),
    ];
    run(Case {
        what: "one released shard is free, the others are b's",
        leases,
        members: vec![held_by("a"), held_by("b")],
        held: vec![],
        want: vec![Acquire(2)],
    });
}

#[test]
fn a_survivor_takes_the_expired_shards_of_a_dead_replica() {
    let leases = vec![
        (0, held_by("a")),
        (1, held_by("a")),
        (2, expired("b")),
        (3, expired("b")),
    ];
    run(Case {
        what: "b's member Lease and shard Leases expired",
        leases: leases.clone(),
        members: vec![held_by("a"), expired("b")],
        held: vec![0, 1],
        want: vec![Renew(0), Renew(1), Acquire(2), Acquire(3)],
    });
    run(Case {
        what: "b's shard Leases expired but its member Lease still counts: wait for it",
        leases,
        members: vec![held_by("a"), held_by("b")],
        held: vec![0, 1],
        want: vec![Renew(0), Renew(1)],
    });
}

#[test]
fn a_shard_whose_lease_names_another_holder_is_lost_at_once() {
    run(Case {
        what: "someone took shard 1 (a's renewals failed for a lease duration)",
        leases: vec![
            (0, held_by("a")),
            (1, held_by("b")),
            (2, held_by("b")),
            (3, held_by("b")),
        ],
        members: vec![held_by("a"), held_by("b")],
        held: vec![0, 1],
        want: vec![Lost(1), Renew(0)],
    });
    run(Case {
        what: "the Lease of a held shard was deleted",
        leases: vec![(1, held_by("a")), (2, held_by("b")), (3, held_by("b"))],
        members: vec![held_by("a"), held_by("b")],
        held: vec![0, 1],
        want: vec![Lost(0), Renew(1)],
    });
}

#[test]
fn leases_still_naming_this_replica_are_taken_back_first_or_released() {
    run(Case {
        what: "a restarted with its old identity: its Leases come first",
        leases: vec![(0, released()), (3, held_by("a"))],
        members: vec![held_by("a"), held_by("b")],
        held: vec![],
        want: vec![Acquire(3), Acquire(0)],
    });
    run(Case {
        what: "at its share already: the extra Lease naming a is released, not left to expire",
        leases: vec![
            (0, held_by("a")),
            (1, held_by("a")),
            (2, held_by("a")),
            (3, held_by("b")),
        ],
        members: vec![held_by("a"), held_by("b")],
        held: vec![0, 1],
        want: vec![Renew(0), Renew(1), Release(2)],
    });
}

#[test]
fn members_are_counted_once_and_this_replica_always() {
    let members = vec![held_by("b"), held_by("b"), expired("c")];
    let leases = BTreeMap::new();
    let held = BTreeSet::new();
    let s = Survey {
        me: "a",
        now_ms: NOW,
        shards: 4,
        leases: &leases,
        members: &members,
        held: &held,
    };
    assert_eq!(live_members(&s), 2);
}
