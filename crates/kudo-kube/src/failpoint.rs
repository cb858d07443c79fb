//! Named fail points: places inside the manager (and `kubectl kudo migrate`) where a fault test
//! can make the process die at once, exactly there, to prove that a process killed between two
//! writes resumes without loss. Here, below both the manager and the client library, so that
//! either can name a point.
//!
//! `KUDO_FAILPOINT=NAME[:N]` in the manager's environment makes the N-th time (1 when left out)
//! the point `NAME` is reached abort the process (`std::process::abort`: no destructor runs,
//! nothing is flushed, no request in flight completes — what a SIGKILL does to the state the
//! manager shares with the cluster). Just before, one line `kudo failpoint NAME:N hit` goes to
//! stderr (unbuffered), so the test knows where the process died. The points are [`POINTS`].
//!
//! Why an environment variable and not the `fail` crate behind a cargo feature: the fault stage
//! drives the very binary `cargo test --workspace` built, and a feature would mean a second build
//! of the whole CLI (minutes of CI on two cores) and a binary nobody runs in production. Unset,
//! a point costs one load of a once-initialised cell and a branch; the environment is read once
//! per process. A point never changes what the manager does unless the variable names it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that arms one fail point.
pub const ENV: &str = "KUDO_FAILPOINT";

/// After an object of a plan's step was applied (the server answered), before the step's
/// status is written.
pub const AFTER_CHILD_APPLY: &str = "after-child-apply";
/// After an admission (a new run's uid, the plan's start) was written, before its revision,
/// its Events and the plan's pass.
pub const AFTER_ADMISSION_WRITE: &str = "after-admission-write";
/// After the Instance's status was written (the server answered), before anything else.
pub const AFTER_STATUS_WRITE: &str = "after-status-write";
/// Before an Event on the Instance is published.
pub const BEFORE_EVENT: &str = "before-event";
/// In a Pipe task, after the files were copied out of the pod, before the artifacts are applied.
pub const MID_PIPE: &str = "mid-pipe";
/// During deletion: after a cluster-scoped object of an uninstalled Instance was deleted, or
/// before a finalizer is released.
pub const MID_DELETE: &str = "mid-delete";
/// During a shard handover: before a replica frees the Lease of a shard it gives up.
pub const SHARD_HANDOVER: &str = "shard-handover";

/// In `kubectl kudo migrate --yes`: after a step's effects, before the record says it is done
/// (`:N` is the N-th step this run executes).
pub const MIGRATE_STEP_DONE: &str = "migrate-step-done";

/// Every named point, for the fault harness and for `KUDO_FAILPOINT` validation.
pub const POINTS: &[&str] = &[
    AFTER_CHILD_APPLY,
    AFTER_ADMISSION_WRITE,
    AFTER_STATUS_WRITE,
    BEFORE_EVENT,
    MID_PIPE,
    MID_DELETE,
    SHARD_HANDOVER,
    MIGRATE_STEP_DONE,
];

/// The armed point: its name and on which visit it fires.
struct Armed {
    name: String,
    nth: u64,
    visits: AtomicU64,
}

static ARMED: OnceLock<Option<Armed>> = OnceLock::new();

/// Reads `NAME[:N]`; `None` for an empty value, an unknown name or a bad count (the manager then
/// runs with no point armed, after a line on stderr naming the mistake).
pub fn parse(value: &str) -> Option<(String, u64)> {
    let (name, nth) = match value.split_once(':') {
        Some((n, c)) => (n, c.parse::<u64>().ok().filter(|c| *c > 0)?),
        None => (value, 1),
    };
    POINTS.contains(&name).then(|| (name.to_string(), nth))
}

fn armed() -> &'static Option<Armed> {
    ARMED.get_or_init(|| {
        let value = std::env::var(ENV).ok()?;
        let Some((name, nth)) = parse(&value) else {
            eprintln!(
                "kudo failpoint: ignoring {ENV}={value:?} (want one of {POINTS:?}, optionally :N with N >= 1)"
            );
            return None;
        };
        Some(Armed {
            name,
            nth,
            visits: AtomicU64::new(0),
        })
    })
}

/// Passes the point `name`; aborts the process when it is the armed point's N-th visit.
pub fn hit(name: &'static str) {
    let Some(armed) = armed() else { return };
    if armed.name != name {
        return;
    }
    let visit = armed.visits.fetch_add(1, Ordering::Relaxed) + 1;
    if visit == armed.nth {
        eprintln!("kudo failpoint {name}:{visit} hit");
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_a_known_point_and_an_optional_positive_visit() {
        assert_eq!(parse("mid-pipe"), Some(("mid-pipe".into(), 1)));
        assert_eq!(parse("before-event:3"), Some(("before-event".into(), 3)));
        assert_eq!(parse("before-event:0"), None);
        assert_eq!(parse("before-event:x"), None);
        assert_eq!(parse("no-such-point"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn an_unarmed_point_passes() {
        // The test process has no KUDO_FAILPOINT: every point is a no-op.
        for p in POINTS {
            hit(p);
        }
    }
}
