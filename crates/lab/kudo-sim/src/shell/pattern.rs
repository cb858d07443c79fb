//! Shell patterns (`*`, `?`, `[…]`, backslash escapes), for `case`, `[[ == ]]`, `${x#pattern}`
//! and pathname expansion.

/// Escapes pattern characters so `s` matches only itself.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Removes backslash escapes (the literal text of a pattern without wildcards).
pub(crate) fn unescape(p: &str) -> String {
    let mut out = String::new();
    let mut it = p.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            out.extend(it.next());
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether the whole of `s` matches `pattern`.
pub(crate) fn matches(pattern: &str, s: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = s.chars().collect();
    match_at(&p, &s)
}

fn match_at(p: &[char], s: &[char]) -> bool {
    let (mut pi, mut si) = (0, 0);
    // The last `*`: where it was in the pattern and how much of the text it has taken.
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, si));
                pi += 1;
                continue;
            }
            Some(&pc) => {
                if let Some((len, ok)) = one(&p[pi..], s[si], pc)
                    && ok
                {
                    pi += len;
                    si += 1;
                    continue;
                }
            }
            None => {}
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Matches one pattern element against `c`: its length in the pattern and whether it matched.
fn one(p: &[char], c: char, pc: char) -> Option<(usize, bool)> {
    match pc {
        '?' => Some((1, true)),
        '\\' => p.get(1).map(|e| (2, *e == c)),
        '[' => class(p, c).or(Some((1, c == '['))),
        _ => Some((1, pc == c)),
    }
}

/// A bracket expression at the start of `p`.
fn class(p: &[char], c: char) -> Option<(usize, bool)> {
    let mut i = 1;
    let negate = matches!(p.get(i), Some('!' | '^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    loop {
        let ch = *p.get(i)?;
        if ch == ']' && !first {
            return Some((i + 1, hit != negate));
        }
        first = false;
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|e| *e != ']') {
            let hi = p[i + 2];
            hit |= ch <= c && c <= hi;
            i += 3;
        } else {
            hit |= ch == c;
            i += 1;
        }
    }
}

fn char_boundaries(s: &str) -> Vec<usize> {
    let mut v: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
    v.push(s.len());
    v
}

/// `${x#p}` / `${x##p}`.
pub(crate) fn trim_prefix(s: &str, p: &str, longest: bool) -> String {
    let cuts = char_boundaries(s);
    let mut order: Vec<usize> = cuts.clone();
    if longest {
        order.reverse();
    }
    for i in order {
        if matches(p, &s[..i]) {
            return s[i..].to_string();
        }
    }
    s.to_string()
}

/// `${x%p}` / `${x%%p}`.
pub(crate) fn trim_suffix(s: &str, p: &str, longest: bool) -> String {
    let mut order = char_boundaries(s);
    if !longest {
        order.reverse();
    }
    for i in order {
        if matches(p, &s[i..]) {
            return s[..i].to_string();
        }
    }
    s.to_string()
}

/// `${x/p/r}` / `${x//p/r}`: the longest match at each position, left to right.
pub(crate) fn replace(s: &str, p: &str, r: &str, all: bool) -> String {
    if p.is_empty() {
        return s.to_string();
    }
    let cuts = char_boundaries(s);
    let mut out = String::new();
    let mut k = 0;
    while k < cuts.len() - 1 {
        let start = cuts[k];
        let end = cuts[k..]
            .iter()
            .rev()
            .find(|&&e| e > start && matches(p, &s[start..e]));
        match end {
            Some(&e) => {
                out.push_str(r);
                k = cuts.iter().position(|&c| c == e).unwrap_or(cuts.len() - 1);
                if !all {
                    out.push_str(&s[e..]);
                    return out;
                }
            }
            None => {
                out.push_str(&s[start..cuts[k + 1]]);
                k += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(matches("*", ""));
        assert!(matches("a*b?c", "axxbyc"));
        assert!(matches("[a-c]x", "bx"));
        assert!(!matches("[!a-c]x", "bx"));
        assert!(matches("\\*", "*"));
        assert!(!matches("\\*", "a"));
        assert!(matches("*.yaml", "x.yaml"));
        assert_eq!(trim_prefix("kafka-broker-2", "*-", true), "2");
        assert_eq!(trim_prefix("kafka-broker-2", "*-", false), "broker-2");
        assert_eq!(trim_suffix("a.b.c", ".*", false), "a.b");
        assert_eq!(trim_suffix("a.b.c", ".*", true), "a");
        assert_eq!(replace("a-b-c", "-", "_", true), "a_b_c");
        assert_eq!(replace("a-b-c", "-", "_", false), "a_b-c");
        assert_eq!(unescape(&escape("a*b")), "a*b");
    }
}
