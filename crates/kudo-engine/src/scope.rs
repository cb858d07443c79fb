//! What a manager acts on when managers split a cluster: one scoped to a namespace
//! (`--namespace`) acts there only; a cluster-wide one acts everywhere but in the namespaces it is
//! told to ignore (`--ignore-namespace`, namespaces another manager owns). The Instance and typed
//! controllers skip an ignored namespace ([`ignored`]); a fleet rollout is run by exactly one
//! manager ([`rollout_namespaces`]): a scoped one runs the rollouts that name exactly its
//! namespace, a cluster-wide one every other rollout, over the namespaces it does not ignore. So
//! no two managers run one rollout, and a rollout never changes an Instance its manager does not
//! reconcile.

/// Whether namespace `ns` matches one of `patterns` (a name, or a prefix ending in `*`).
pub fn ignored(patterns: &[String], ns: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => ns.starts_with(prefix),
        None => p == ns,
    })
}

/// The namespaces a manager (scoped to `manager_ns`, ignoring `ignore`) runs a rollout over,
/// given its `spec.namespaces`: `None` when the rollout is not this manager's, `Some(vec![])` for
/// every namespace (less the ignored ones, which the caller filters).
pub fn rollout_namespaces(
    wanted: &[String],
    manager_ns: Option<&str>,
    ignore: &[String],
) -> Option<Vec<String>> {
    match manager_ns {
        Some(own) => (wanted.len() == 1 && wanted[0] == own).then(|| wanted.to_vec()),
        None if wanted.is_empty() => Some(Vec::new()),
        None => {
            let mine: Vec<String> = wanted.iter().filter(|n| !ignored(ignore, n)).cloned().collect();
            (!mine.is_empty()).then_some(mine)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_manager_runs_each_rollout() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let ignore = v(&["team-*", "lab"]);
        assert!(ignored(&ignore, "team-a") && ignored(&ignore, "lab") && !ignored(&ignore, "labs"));
        /// (spec.namespaces, manager namespace, the namespaces it runs over)
        type Case<'a> = (&'a [&'a str], Option<&'a str>, Option<Vec<String>>);
        let cases: &[Case] = &[
            (&[], None, Some(vec![])),
            (&["a", "team-x"], None, Some(v(&["a"]))),
            (&["team-x"], None, None),
            (&["team-x"], Some("team-x"), Some(v(&["team-x"]))),
            (&["team-x", "a"], Some("team-x"), None),
            (&[], Some("team-x"), None),
        ];
        for (wanted, own, want) in cases {
            assert_eq!(
                rollout_namespaces(&v(wanted), *own, &ignore),
                *want,
                "{wanted:?} {own:?}"
            );
        }
    }
}
