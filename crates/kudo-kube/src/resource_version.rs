//! Ordering resourceVersions, as Kubernetes 1.35 allows clients to (KEP-5504, "comparable
//! resource versions", stable in 1.35): a resourceVersion is a decimal integer without leading
//! zeros, so the longer one is newer and two of the same length compare as text. Before that KEP
//! they were opaque and only comparable for equality; a server whose versions do not have that
//! form (an aggregated API, say) still gets equality only: [`compare`] answers `None`.

use std::cmp::Ordering;

/// Whether `rv` has the comparable form: a decimal integer without leading zeros.
fn comparable(rv: &str) -> bool {
    !rv.is_empty() && rv.bytes().all(|b| b.is_ascii_digit()) && (rv == "0" || !rv.starts_with('0'))
}

/// How `a` orders against `b` (`Greater`: `a` is newer); `None` when either is not comparable.
///
/// ```
/// use std::cmp::Ordering;
/// use kudo_kube::resource_version::compare;
/// assert_eq!(compare("100", "99"), Some(Ordering::Greater));
/// assert_eq!(compare("7", "7"), Some(Ordering::Equal));
/// assert_eq!(compare("12", "13"), Some(Ordering::Less));
/// assert_eq!(compare("007", "8"), None);
/// assert_eq!(compare("abc", "8"), None);
/// ```
pub fn compare(a: &str, b: &str) -> Option<Ordering> {
    (comparable(a) && comparable(b)).then(|| a.len().cmp(&b.len()).then_with(|| a.cmp(b)))
}

/// Moves `known` to `seen` unless `seen` is older; whether it moved (or was equal). Versions
/// that cannot be compared move it: the latest word wins, as when versions were opaque.
pub fn advance(known: &mut String, seen: &str) -> bool {
    if compare(seen, known) == Some(Ordering::Less) {
        return false;
    }
    seen.clone_into(known);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_by_length_then_text_and_odd_ones_only_by_the_latest_word() {
        // (known, seen, known afterwards, moved)
        let cases = [
            ("9", "10", "10", true),
            ("10", "9", "10", false),
            ("123", "122", "123", false),
            ("5", "5", "5", true),
            ("0", "1", "1", true),
            ("x1", "2", "2", true),
            ("2", "x1", "x1", true),
            ("", "3", "3", true),
        ];
        for (known, seen, want, moved) in cases {
            let mut k = known.to_string();
            assert_eq!(
                (advance(&mut k, seen), k.as_str()),
                (moved, want),
                "{known} vs {seen}"
            );
        }
    }
}
