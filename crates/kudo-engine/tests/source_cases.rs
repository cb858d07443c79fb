//! The decisions about an OperatorSource (`kudo_engine::source`), one case per branch: what the
//! spec asks for, when the registry is asked, which tag a range picks, whether a pulled package
//! may be stored, what the status says, and whether an Instance may run an OperatorVersion under
//! `--require-verified-sources`. No registry, no server, no clock.

use kudo_api::source::{
    LocalObjectReference, OperatorSource, OperatorSourceSpec, OperatorSourceStatus, SOURCE_LABEL,
    SourceArtifact, SourceRef, SourceVerification, StoredOperatorVersion, conditions,
};
use kudo_api::{Condition, OperatorVersion};
use kudo_engine::Timestamp;
use kudo_engine::source::status::{Checking, Outcome, Stored, checked, reconciling};
use kudo_engine::source::{
    Admission, Candidate, DEFAULT_INTERVAL_SECS, Due, Existing, FAILURE_RETRY_SECS, Failure, FailureKind,
    Pick, Verify, admit, choose_tag, due, policy, policy_refusal, read_spec, spec_digest,
};

fn at(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

const NOW: &str = "2026-01-02T03:00:00Z";
const URL: &str = "oci://reg:5000/ops/demo";
const PINNED: &str = "oci://reg:5000/ops/demo@sha256:aaaa";
const KEY: &str = "cosign key sha256:0123456789abcdef";

fn spec(
    reference: SourceRef,
    verify: Option<(&str, Option<&str>)>,
    interval: Option<&str>,
) -> OperatorSourceSpec {
    OperatorSourceSpec {
        url: URL.into(),
        reference,
        interval: interval.map(str::to_string),
        verify: verify.map(|(provider, secret)| SourceVerification {
            provider: provider.into(),
            secret_ref: secret.map(|n| LocalObjectReference { name: n.into() }),
        }),
        ..Default::default()
    }
}

fn tag(t: &str) -> SourceRef {
    SourceRef {
        tag: Some(t.into()),
        ..Default::default()
    }
}

const KEYS: Option<(&str, Option<&str>)> = Some(("cosign", Some("keys")));

#[test]
fn read_spec_takes_one_ref_an_interval_and_a_provider() {
    let ok = read_spec(&spec(tag("0.1.0"), KEYS, None)).unwrap();
    assert_eq!(ok.pick, Pick::Tag("0.1.0".into()));
    assert_eq!(ok.interval_secs, DEFAULT_INTERVAL_SECS);
    assert_eq!(
        ok.verify,
        Verify::Keys {
            secret: "keys".into()
        }
    );
    let range = SourceRef {
        semver: Some(">=0.2.0 <1.0.0".into()),
        ..Default::default()
    };
    assert_eq!(
        read_spec(&spec(range, KEYS, Some("30s"))).unwrap(),
        kudo_engine::source::Wanted {
            url: URL.into(),
            pick: Pick::Range(">=0.2.0 <1.0.0".into()),
            interval_secs: 30,
            verify: Verify::Keys {
                secret: "keys".into()
            },
        }
    );
    let digest = SourceRef {
        digest: Some("sha256:aaaa".into()),
        ..Default::default()
    };
    let none = read_spec(&spec(digest, Some(("none", None)), Some("1h"))).unwrap();
    assert_eq!(
        (none.pick, none.verify, none.interval_secs),
        (Pick::Digest("sha256:aaaa".into()), Verify::None, 3600)
    );

    let two = SourceRef {
        tag: Some("1".into()),
        digest: Some("sha256:aaaa".into()),
        ..Default::default()
    };
    let bad_range = SourceRef {
        semver: Some(">=x.y".into()),
        ..Default::default()
    };
    let cases: Vec<(OperatorSourceSpec, &str)> = vec![
        (
            spec(SourceRef::default(), KEYS, None),
            "spec.ref: set exactly one of tag, semver and digest",
        ),
        (spec(two, KEYS, None), "spec.ref: set exactly one"),
        (
            spec(bad_range, KEYS, None),
            "spec.ref.semver \">=x.y\": improper constraint",
        ),
        (
            spec(tag("1"), KEYS, Some("500ms")),
            "spec.interval \"500ms\": at least 1s",
        ),
        (spec(tag("1"), KEYS, Some("ten minutes")), "spec.interval: "),
        (spec(tag("1"), None, None), "spec.verify is required"),
        (
            spec(tag("1"), Some(("cosign", None)), None),
            "keyless verification is not supported",
        ),
        (
            spec(tag("1"), Some(("notation", None)), None),
            "spec.verify.provider \"notation\": cosign or none",
        ),
    ];
    for (s, want) in cases {
        let e = read_spec(&s).unwrap_err();
        assert!(e.contains(want), "{want}: {e}");
    }
}

fn cond(type_: &str, status: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        observed_generation: Some(2),
        last_transition_time: "2026-01-02T02:00:00Z".into(),
        reason: "R".into(),
        message: String::new(),
    }
}

fn status_with(ready: &str, last_check: Option<&str>) -> OperatorSourceStatus {
    OperatorSourceStatus {
        observed_generation: Some(2),
        conditions: vec![cond(conditions::READY, ready)],
        last_check_time: last_check.map(str::to_string),
        ..Default::default()
    }
}

#[test]
fn due_at_once_for_news_else_after_the_interval_or_the_failure_retry() {
    let now = at(NOW);
    assert_eq!(due(None, Some(2), 600, now), Due::Now, "never checked");
    let ok = status_with("True", Some("2026-01-02T02:58:00Z"));
    assert_eq!(due(Some(&ok), Some(3), 600, now), Due::Now, "a new generation");
    let mut running = ok.clone();
    let mut progressing = cond(conditions::RECONCILING, "True");
    progressing.reason = "Progressing".into();
    running.conditions.push(progressing);
    assert_eq!(
        due(Some(&running), Some(2), 600, now),
        Due::Now,
        "a check that never ended"
    );
    let mut retrying = status_with("False", Some("2026-01-02T02:59:30Z"));
    let mut retry = cond(conditions::RECONCILING, "True");
    retry.reason = "RegistryError".into();
    retrying.conditions.push(retry);
    assert_eq!(
        due(Some(&retrying), Some(2), 600, now),
        Due::After(FAILURE_RETRY_SECS - 30),
        "a failure being retried waits for the retry"
    );
    assert_eq!(
        due(Some(&status_with("True", None)), Some(2), 600, now),
        Due::Now,
        "no time"
    );
    assert_eq!(
        due(Some(&ok), Some(2), 600, now),
        Due::After(480),
        "within the interval"
    );
    assert_eq!(due(Some(&ok), Some(2), 120, now), Due::Now, "the interval passed");
    let failed = status_with("False", Some("2026-01-02T02:59:30Z"));
    assert_eq!(
        due(Some(&failed), Some(2), 600, now),
        Due::After(FAILURE_RETRY_SECS - 30),
        "retry"
    );
    assert_eq!(
        due(Some(&failed), Some(2), 40, now),
        Due::After(10),
        "a shorter interval is kept"
    );
}

#[test]
fn the_require_verified_policy_refuses_sources_that_check_nothing() {
    let f = policy_refusal(true, &Verify::None).unwrap();
    assert_eq!(f.kind, FailureKind::VerificationRequired);
    assert!(f.message.contains("--require-verified-sources"), "{}", f.message);
    assert_eq!(policy_refusal(true, &Verify::Keys { secret: "k".into() }), None);
    assert_eq!(policy_refusal(false, &Verify::None), None);
}

fn tags(ts: &[&str]) -> Vec<String> {
    ts.iter().map(|t| t.to_string()).collect()
}

#[test]
fn a_range_picks_the_first_of_the_newest_first_tags_in_it() {
    let newest_first = tags(&["1.0.0", "0.3.0_build.1", "0.2.1", "0.2.0", "0.1.0"]);
    assert_eq!(
        choose_tag(URL, ">=0.2.0 <1.0.0", &newest_first).unwrap(),
        "0.3.0_build.1"
    );
    assert_eq!(choose_tag(URL, "~0.2", &newest_first).unwrap(), "0.2.1");
    let e = choose_tag(URL, ">=2.0.0", &newest_first).unwrap_err();
    assert_eq!(e.kind, FailureKind::NoMatchingTag);
    assert_eq!(
        e.message,
        "no tag of oci://reg:5000/ops/demo is in the range \">=2.0.0\": its version tags are 1.0.0, \
         0.3.0_build.1, 0.2.1, 0.2.0, 0.1.0"
    );
    let e = choose_tag(URL, ">=2.0.0", &[]).unwrap_err();
    assert!(e.message.ends_with("it has no version tags"), "{}", e.message);
    let many: Vec<String> = (0..12).rev().map(|i| format!("0.{i}.0")).collect();
    let e = choose_tag(URL, ">=2.0.0", &many).unwrap_err();
    assert!(e.message.ends_with("0.2.0, …"), "{}", e.message);
    assert_eq!(
        choose_tag(URL, "nonsense!", &many).unwrap_err().kind,
        FailureKind::Spec
    );
}

fn cand<'a>(range_tag: Option<&'a str>, version: &'a str, digest: &'a str) -> Candidate<'a> {
    Candidate {
        url: PINNED,
        range_tag,
        package_version: version,
        operator_version: "demo-1.0-0.2.0",
        spec_digest: digest,
        signature: Some(KEY),
    }
}

fn entry(url: &str, digest: &str, signature: Option<&str>) -> StoredOperatorVersion {
    StoredOperatorVersion {
        name: "demo-1.0-0.2.0".into(),
        url: url.into(),
        spec_digest: digest.into(),
        signature: signature.map(str::to_string),
    }
}

#[test]
fn a_package_is_stored_only_over_nothing_or_the_same_content() {
    let mine = [entry(PINNED, "sha256:s1", Some(KEY))];
    assert_eq!(
        admit(&cand(None, "0.2.0", "sha256:s1"), None, &mine),
        Admission::Create
    );
    assert_eq!(
        admit(&cand(Some("0.2.0"), "0.2.0", "sha256:s1"), None, &[]),
        Admission::Create
    );
    let same = Existing {
        spec_digest: "sha256:s1",
        source: Some(PINNED),
    };
    assert_eq!(
        admit(&cand(None, "0.2.0", "sha256:s1"), Some(&same), &mine),
        Admission::Keep
    );
    assert_eq!(
        admit(&cand(None, "0.2.0", "sha256:s1"), Some(&same), &[]),
        Admission::Adopt,
        "installed before with exactly this content"
    );
    let refused = |a: Admission| match a {
        Admission::Refuse(f) => f,
        other => panic!("{other:?}"),
    };
    let f = refused(admit(&cand(Some("0.3.0"), "0.2.0", "sha256:s1"), None, &[]));
    assert_eq!(
        (f.kind, f.signature.as_deref()),
        (FailureKind::Artifact, Some(KEY))
    );
    assert!(
        f.message.contains("(tag 0.3.0) holds operator version 0.2.0"),
        "{}",
        f.message
    );
    let edited = Existing {
        spec_digest: "sha256:edited",
        source: Some(PINNED),
    };
    let f = refused(admit(&cand(None, "0.2.0", "sha256:s1"), Some(&edited), &mine));
    assert_eq!(f.kind, FailureKind::Conflict);
    assert!(
        f.message.contains("was changed after this source stored it"),
        "{}",
        f.message
    );
    let other = Existing {
        spec_digest: "sha256:other",
        source: Some("oci://elsewhere/demo@sha256:bbbb"),
    };
    let f = refused(admit(&cand(None, "0.2.0", "sha256:s1"), Some(&other), &[]));
    assert_eq!(
        f.message,
        "operator version demo-1.0-0.2.0 exists with other content and was installed from \
         oci://elsewhere/demo@sha256:bbbb; oci://reg:5000/ops/demo@sha256:aaaa was not stored: delete \
         that OperatorVersion or publish a new version"
    );
    let by_hand = Existing {
        spec_digest: "sha256:other",
        source: None,
    };
    let f = refused(admit(&cand(None, "0.2.0", "sha256:s1"), Some(&by_hand), &[]));
    assert!(
        f.message.contains("was not installed from a registry"),
        "{}",
        f.message
    );
}

fn find<'s>(st: &'s OperatorSourceStatus, t: &str) -> Option<&'s Condition> {
    st.conditions.iter().find(|c| c.type_ == t)
}

fn states(st: &OperatorSourceStatus) -> Vec<(String, String, String)> {
    st.conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
        .collect()
}

fn strs(v: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    v.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

fn stored(signature: Option<&str>) -> Outcome {
    Outcome::Stored(Box::new(Stored {
        artifact: SourceArtifact {
            url: PINNED.into(),
            digest: "sha256:aaaa".into(),
            tag: Some("0.2.0".into()),
            operator: "demo".into(),
            version: "0.2.0".into(),
            app_version: Some("1.0".into()),
            operator_version: "demo-1.0-0.2.0".into(),
            signature: signature.map(str::to_string),
        },
        entry: entry(PINNED, "sha256:s1", signature),
    }))
}

#[test]
fn the_status_while_a_new_generation_is_checked() {
    let now = at(NOW);
    let st = reconciling(None, Some(1), URL, now).unwrap();
    assert_eq!(st.observed_generation, Some(1));
    assert_eq!(
        states(&st),
        strs(&[
            ("Ready", "Unknown", "Progressing"),
            ("Reconciling", "True", "Progressing"),
        ])
    );
    assert!(
        st.conditions
            .iter()
            .all(|c| c.observed_generation == Some(1) && c.message == format!("checking {URL}"))
    );
    assert_eq!(
        reconciling(Some(&st), Some(1), URL, now),
        None,
        "a periodic re-check writes nothing first"
    );
}

#[test]
fn a_stored_artifact_is_ready_and_says_who_signed_it() {
    let now = at(NOW);
    let old = reconciling(None, Some(3), URL, at("2026-01-02T02:00:00Z")).unwrap();
    let st = checked(
        Some(&old),
        Some(3),
        &stored(Some(KEY)),
        Checking::Signatures,
        Some(&[]),
        now,
    );
    assert_eq!(
        states(&st),
        strs(&[
            ("Ready", "True", "Stored"),
            ("SignatureVerified", "True", "Verified"),
        ])
    );
    assert!(st.conditions.iter().all(|c| c.observed_generation == Some(3)));
    // Reconciling is gone (abnormal-true: present only while True); the times are the check's.
    let moved: Vec<&str> = st
        .conditions
        .iter()
        .filter(|c| c.last_transition_time == NOW)
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(moved, ["Ready", "SignatureVerified"]);
    assert_eq!(
        find(&st, "Ready").unwrap().message,
        "operator version demo-1.0-0.2.0 is stored from oci://reg:5000/ops/demo@sha256:aaaa"
    );
    assert_eq!(
        find(&st, "SignatureVerified").unwrap().message,
        format!("{PINNED} is signed by {KEY}")
    );
    assert_eq!(
        st.operator_versions,
        [entry(PINNED, "sha256:s1", Some(KEY))],
        "added though not listed yet"
    );
    assert_eq!(st.last_check_time.as_deref(), Some(NOW));
    // The next check with the same outcome changes the time only.
    let later = checked(
        Some(&st),
        Some(3),
        &stored(Some(KEY)),
        Checking::Signatures,
        None,
        at("2026-01-02T03:10:00Z"),
    );
    assert_eq!(later.conditions, st.conditions);
    assert_eq!(later.last_check_time.as_deref(), Some("2026-01-02T03:10:00Z"));
    // provider none: no SignatureVerified condition at all.
    let none = checked(Some(&st), Some(4), &stored(None), Checking::Nothing, None, now);
    assert!(find(&none, "SignatureVerified").is_none());
    assert_eq!(none.operator_versions[0].signature, None);
}

#[test]
fn a_failed_check_is_stalled_or_retried_keeps_what_runs_and_says_what_the_signature_check_found() {
    let now = at(NOW);
    let good = checked(None, Some(1), &stored(Some(KEY)), Checking::Signatures, None, now);
    let fail = |kind, signature: Option<&str>| {
        Outcome::Failed(Failure {
            kind,
            message: format!("{kind:?} happened"),
            signature: signature.map(str::to_string),
        })
    };
    let sig = |st: &OperatorSourceStatus| {
        find(st, "SignatureVerified").map(|c| (c.status.clone(), c.reason.clone()))
    };
    let cases = [
        (
            FailureKind::Unsigned,
            None,
            Checking::Signatures,
            Some(("False", "Unsigned")),
        ),
        (
            FailureKind::Untrusted,
            None,
            Checking::Signatures,
            Some(("False", "UntrustedSignature")),
        ),
        (
            FailureKind::WrongDigest,
            None,
            Checking::Signatures,
            Some(("False", "SignatureForAnotherArtifact")),
        ),
        (
            FailureKind::VerificationRequired,
            None,
            Checking::Nothing,
            Some(("False", "VerificationRequired")),
        ),
        (
            FailureKind::Secret,
            None,
            Checking::Signatures,
            Some(("Unknown", "SecretUnavailable")),
        ),
        (
            FailureKind::Registry,
            None,
            Checking::Signatures,
            Some(("Unknown", "RegistryError")),
        ),
        (
            FailureKind::Spec,
            None,
            Checking::Unknown,
            Some(("Unknown", "InvalidSpec")),
        ),
        (FailureKind::Artifact, None, Checking::Nothing, None),
        (
            FailureKind::Conflict,
            Some(KEY),
            Checking::Signatures,
            Some(("True", "Verified")),
        ),
    ];
    for (kind, signature, checking, want) in cases {
        let st = checked(
            Some(&good),
            Some(2),
            &fail(kind, signature),
            checking,
            Some(&[]),
            now,
        );
        let reason = kind.reason();
        // A failure the next check may overcome is retried (Reconciling), any other is Stalled.
        let (shown, gone) = if kind.is_transient() {
            ("Reconciling", "Stalled")
        } else {
            ("Stalled", "Reconciling")
        };
        for (t, status) in [("Ready", "False"), (shown, "True")] {
            let c = find(&st, t).unwrap();
            assert_eq!(
                (c.status.as_str(), c.reason.as_str()),
                (status, reason),
                "{kind:?}"
            );
        }
        assert!(find(&st, gone).is_none(), "{kind:?}");
        assert_eq!(find(&st, shown).unwrap().message, format!("{kind:?} happened"));
        assert_eq!(
            sig(&st),
            want.map(|(s, r)| (s.to_string(), r.to_string())),
            "{kind:?}"
        );
        assert_eq!(
            st.artifact, good.artifact,
            "the stored artifact stays: it is what runs"
        );
        assert!(
            st.operator_versions.is_empty(),
            "its OperatorVersion is gone: no longer listed"
        );
    }
}

fn ov(label: Option<&str>) -> OperatorVersion {
    let mut ov: OperatorVersion = serde_json::from_value(serde_json::json!({
        "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
        "metadata": {"name": "demo-1.0-0.2.0", "namespace": "pkgs"},
        "spec": {"operator": {"name": "demo", "kind": "Operator"}, "version": "0.2.0", "appVersion": "1.0",
                 "templates": {"a.yaml": "x", "b.yaml": "y"}}
    }))
    .unwrap();
    if let Some(l) = label {
        ov.metadata.labels.insert(SOURCE_LABEL.into(), l.into());
    }
    ov
}

fn source(entries: Vec<StoredOperatorVersion>) -> OperatorSource {
    OperatorSource {
        api_version: kudo_api::source::API_VERSION.into(),
        kind: "OperatorSource".into(),
        metadata: Default::default(),
        spec: Default::default(),
        status: Some(OperatorSourceStatus {
            operator_versions: entries,
            ..Default::default()
        }),
    }
}

#[test]
fn an_instance_runs_only_what_a_source_verified_and_nobody_changed() {
    let v = ov(Some("demo-src"));
    let digest = spec_digest(&v.spec);
    let ok = source(vec![entry(PINNED, &digest, Some(KEY))]);
    assert_eq!(policy::verified(&v, "pkgs", Some(&ok)).unwrap(), KEY);
    let cases: Vec<(OperatorVersion, Option<OperatorSource>, &str)> = vec![
        (
            ov(None),
            Some(ok.clone()),
            "was not stored by an OperatorSource (it has no kudo-rs.dev/operator-source label",
        ),
        (
            v.clone(),
            None,
            "names OperatorSource demo-src, which does not exist in namespace pkgs",
        ),
        (
            v.clone(),
            Some(source(vec![])),
            "is not among the OperatorVersions OperatorSource demo-src stored",
        ),
        (
            v.clone(),
            Some(source(vec![entry(PINNED, "sha256:before", Some(KEY))])),
            "was changed after OperatorSource demo-src stored it from oci://reg:5000/ops/demo@sha256:aaaa",
        ),
        (
            v.clone(),
            Some(source(vec![entry(PINNED, &digest, None)])),
            "without a signature check",
        ),
    ];
    for (o, s, want) in cases {
        let e = policy::verified(&o, "pkgs", s.as_ref()).unwrap_err();
        assert!(e.contains(want), "{want}: {e}");
    }
    assert_eq!(
        policy::refusal(
            "ns/app",
            "pkgs",
            "demo-1.0-0.2.0",
            "was not stored by an OperatorSource"
        ),
        "the manager runs only verified OperatorVersions (--require-verified-sources): OperatorVersion \
         pkgs/demo-1.0-0.2.0 was not stored by an OperatorSource; nothing is applied for instance ns/app"
    );
}

#[test]
fn the_spec_digest_does_not_depend_on_key_order() {
    let a = ov(None);
    let mut b = ov(None);
    let templates: Vec<(String, String)> = b.spec.templates.clone().into_iter().rev().collect();
    b.spec.templates = templates.into_iter().collect();
    assert_eq!(spec_digest(&a.spec), spec_digest(&b.spec));
    assert!(spec_digest(&a.spec).starts_with("sha256:") && spec_digest(&a.spec).len() == 71);
    b.spec.templates.insert("c.yaml".into(), "z".into());
    assert_ne!(spec_digest(&a.spec), spec_digest(&b.spec));
}
