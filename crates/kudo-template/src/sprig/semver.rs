//! `semver` and `semverCompare` with Masterminds/semver v3.2.0 semantics (what Sprig v3 uses):
//! loose version parsing (`v1`, `1.2` are accepted), constraint syntax `= != > < >= <= ~ ~> ^`,
//! `x`/`*` wildcards, hyphen ranges `1.2 - 1.4`, `,`/space for AND and `||` for OR, and the rule
//! that a pre-release version only satisfies constraints that themselves carry a pre-release.
//!
//! The `semver` crate implements Cargo's rules, which differ (`^0.x`, wildcards, pre-releases),
//! so this is written against the Masterminds behaviour instead.

use std::any::Any;
use std::cmp::Ordering;
use std::rc::Rc;
use std::sync::OnceLock;

use regex::Regex;

use super::{a_str, sig};
use crate::func::ParamType as P;
use crate::func::{FuncError, FuncMap};
use crate::value::{GoObject, Value};

/// Masterminds `*semver.Version`.
#[derive(Clone, Debug)]
pub(crate) struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
    metadata: String,
    original: String,
    /// A `semver.Version` value (what `IncMajor`… return) rather than a `*semver.Version`:
    /// pointer-receiver methods such as `Original` are not callable on it from a template.
    by_value: bool,
}

const WS: &str = r"[\t\n\x0C\r ]";
const VERSION_CORE: &str = r"v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?";
// Constraint versions also allow x/X/* wildcards; the class includes a literal `|` like upstream.
const CV: &str = r"v?([0-9|xX*]+)(\.[0-9|xX*]+)?(\.[0-9|xX*]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?";
const OPS: &str = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^";

struct Regexes {
    version: Regex,
    constraint: Regex,
    range: Regex,
    find: Regex,
    valid: Regex,
}

fn res() -> &'static Regexes {
    static R: OnceLock<Regexes> = OnceLock::new();
    R.get_or_init(|| {
        let build = |p: String| Regex::new(&p).unwrap_or_else(|_| Regex::new("$^").expect("trivial regex"));
        Regexes {
            version: build(format!("^{VERSION_CORE}$")),
            constraint: build(format!("^{WS}*({OPS}){WS}*({CV}){WS}*$")),
            range: build(format!("{WS}*({CV}){WS}+-{WS}+({CV}){WS}*")),
            find: build(format!("({OPS}){WS}*({CV})")),
            valid: build(format!(
                "^({WS}*({OPS}){WS}*({CV}){WS}*)((?:{WS}+|,{WS}*)({OPS}){WS}*({CV}){WS}*)*$"
            )),
        }
    })
}

fn only(s: &str, allowed: impl Fn(char) -> bool) -> bool {
    s.chars().all(allowed)
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

fn parse_u64(s: &str) -> Result<u64, String> {
    s.parse::<u64>().map_err(|_| {
        format!(
            "Error parsing version segment: strconv.ParseUint: parsing {}: value out of range",
            super::conv::go_quote(s)
        )
    })
}

impl Version {
    /// Masterminds `NewVersion` (loose parsing).
    pub fn parse(v: &str) -> Result<Version, String> {
        let caps = res().version.captures(v).ok_or("Invalid Semantic Version")?;
        let g = |i: usize| caps.get(i).map(|m| m.as_str()).unwrap_or("");
        let major = parse_u64(g(1))?;
        let minor = if g(2).is_empty() {
            0
        } else {
            parse_u64(&g(2)[1..])?
        };
        let patch = if g(3).is_empty() {
            0
        } else {
            parse_u64(&g(3)[1..])?
        };
        let pre = g(5).to_string();
        let metadata = g(8).to_string();
        if !pre.is_empty() {
            for p in pre.split('.') {
                if only(p, |c| c.is_ascii_digit()) {
                    if p.len() > 1 && p.starts_with('0') {
                        return Err("Version segment starts with 0".into());
                    }
                } else if !only(p, ident_char) {
                    return Err("Invalid Prerelease string".into());
                }
            }
        }
        if !metadata.is_empty() && !metadata.split('.').all(|p| only(p, ident_char)) {
            return Err("Invalid Metadata string".into());
        }
        Ok(Version {
            major,
            minor,
            patch,
            pre,
            metadata,
            original: v.to_string(),
            by_value: false,
        })
    }

    /// Masterminds `IncMajor`/`IncMinor`/`IncPatch` (pre-release and metadata are dropped; a
    /// pre-release `IncPatch` only drops them); `Original` keeps a leading `v`.
    fn incremented(&self, part: &str) -> Version {
        let mut n = Version {
            pre: String::new(),
            metadata: String::new(),
            by_value: true,
            ..self.clone()
        };
        match part {
            "IncMajor" => {
                n.major += 1;
                n.minor = 0;
                n.patch = 0;
            }
            "IncMinor" => {
                n.minor += 1;
                n.patch = 0;
            }
            _ => {
                if self.pre.is_empty() {
                    n.patch += 1;
                }
            }
        }
        let v = if self.original.starts_with('v') { "v" } else { "" };
        n.original = format!("{v}{}", n.string());
        n
    }

    fn string(&self) -> String {
        let mut s = format!("{}.{}.{}", self.major, self.minor, self.patch);
        if !self.pre.is_empty() {
            s.push('-');
            s.push_str(&self.pre);
        }
        if !self.metadata.is_empty() {
            s.push('+');
            s.push_str(&self.metadata);
        }
        s
    }

    fn compare(&self, o: &Version) -> Ordering {
        self.major
            .cmp(&o.major)
            .then(self.minor.cmp(&o.minor))
            .then(self.patch.cmp(&o.patch))
            .then_with(|| match (self.pre.is_empty(), o.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_prerelease(&self.pre, &o.pre),
            })
    }
}

fn compare_prerelease(a: &str, b: &str) -> Ordering {
    let sa: Vec<&str> = a.split('.').collect();
    let sb: Vec<&str> = b.split('.').collect();
    for i in 0..sa.len().max(sb.len()) {
        let d = compare_pre_part(sa.get(i).copied().unwrap_or(""), sb.get(i).copied().unwrap_or(""));
        if d != Ordering::Equal {
            return d;
        }
    }
    Ordering::Equal
}

fn compare_pre_part(s: &str, o: &str) -> Ordering {
    if s == o {
        return Ordering::Equal;
    }
    if s.is_empty() {
        return Ordering::Less;
    }
    if o.is_empty() {
        return Ordering::Greater;
    }
    match (s.parse::<u64>(), o.parse::<u64>()) {
        (Err(_), Err(_)) => {
            if s > o {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Ok(x), Ok(y)) => {
            if x > y {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Constraint {
    con: Version,
    op: String,
    minor_dirty: bool,
    patch_dirty: bool,
    dirty: bool,
}

fn is_x(s: &str) -> bool {
    matches!(s, "x" | "*" | "X")
}

fn parse_constraint(c: &str) -> Result<Constraint, String> {
    if c.is_empty() {
        let con = Version::parse("0.0.0")?;
        return Ok(Constraint {
            con,
            op: String::new(),
            minor_dirty: false,
            patch_dirty: false,
            dirty: true,
        });
    }
    let caps = res()
        .constraint
        .captures(c)
        .ok_or_else(|| format!("improper constraint: {c}"))?;
    let g = |i: usize| caps.get(i).map(|m| m.as_str()).unwrap_or("");
    let (m3, m4, m5, m6) = (g(3), g(4), g(5), g(6));
    let mut ver = g(2).to_string();
    let (mut minor_dirty, mut patch_dirty, mut dirty) = (false, false, false);
    let pre = if m6.is_empty() {
        String::new()
    } else {
        m6.to_string()
    };
    if is_x(m3) || m3.is_empty() {
        ver = format!("0.0.0{pre}");
        dirty = true;
    } else if is_x(m4.trim_start_matches('.')) || m4.is_empty() {
        minor_dirty = true;
        dirty = true;
        ver = format!("{m3}.0.0{pre}");
    } else if is_x(m5.trim_start_matches('.')) || m5.is_empty() {
        dirty = true;
        patch_dirty = true;
        ver = format!("{m3}{m4}.0{pre}");
    }
    let con = Version::parse(&ver).map_err(|_| "constraint Parser Error".to_string())?;
    Ok(Constraint {
        con,
        op: g(1).to_string(),
        minor_dirty,
        patch_dirty,
        dirty,
    })
}

fn rewrite_range(s: &str) -> String {
    let mut out = s.to_string();
    for caps in res().range.captures_iter(s) {
        let whole = caps.get(0).map(|m| m.as_str()).unwrap_or("");
        let a = caps.get(1).map(|m| m.as_str()).unwrap_or("");
        let b = caps.get(11).map(|m| m.as_str()).unwrap_or("");
        out = out.replacen(whole, &format!(">= {a}, <= {b}"), 1);
    }
    out
}

/// Masterminds `NewConstraint`: OR groups of AND-ed constraints.
fn new_constraints(c: &str) -> Result<Vec<Vec<Constraint>>, String> {
    let c = rewrite_range(c);
    let mut ors = Vec::new();
    for part in c.split("||") {
        if !res().valid.is_match(part) {
            return Err(format!("improper constraint: {part}"));
        }
        let mut found: Vec<&str> = res().find.find_iter(part).map(|m| m.as_str()).collect();
        if found.is_empty() {
            found.push(part);
        }
        ors.push(
            found
                .into_iter()
                .map(parse_constraint)
                .collect::<Result<Vec<_>, _>>()?,
        );
    }
    Ok(ors)
}

fn check(v: &Version, c: &Constraint) -> bool {
    let pre_blocked = !v.pre.is_empty() && c.con.pre.is_empty();
    let lt = |a: &Version, b: &Version| a.compare(b) == Ordering::Less;
    match c.op.as_str() {
        "" | "=" => {
            if pre_blocked {
                return false;
            }
            if c.dirty {
                tilde(v, c)
            } else {
                v.compare(&c.con) == Ordering::Equal
            }
        }
        "!=" => {
            if c.dirty {
                if pre_blocked {
                    return false;
                }
                if c.con.major != v.major {
                    return true;
                }
                if c.con.minor != v.minor && !c.minor_dirty {
                    return true;
                } else if c.minor_dirty {
                    return false;
                } else if c.con.patch != v.patch && !c.patch_dirty {
                    return true;
                } else if c.patch_dirty {
                    if !v.pre.is_empty() || !c.con.pre.is_empty() {
                        return compare_prerelease(&v.pre, &c.con.pre) != Ordering::Equal;
                    }
                    return false;
                }
            }
            v.compare(&c.con) != Ordering::Equal
        }
        ">" => {
            if pre_blocked {
                return false;
            }
            if !c.dirty {
                return v.compare(&c.con) == Ordering::Greater;
            }
            if v.major > c.con.major {
                true
            } else if v.major < c.con.major || c.minor_dirty {
                false
            } else if c.patch_dirty {
                v.minor > c.con.minor
            } else {
                v.compare(&c.con) == Ordering::Greater
            }
        }
        "<" => !pre_blocked && lt(v, &c.con),
        ">=" | "=>" => !pre_blocked && v.compare(&c.con) != Ordering::Less,
        "<=" | "=<" => {
            if pre_blocked {
                return false;
            }
            if !c.dirty {
                return v.compare(&c.con) != Ordering::Greater;
            }
            !(v.major > c.con.major || (v.major == c.con.major && v.minor > c.con.minor && !c.minor_dirty))
        }
        "~" | "~>" => !pre_blocked && tilde(v, c),
        "^" => {
            if pre_blocked || lt(v, &c.con) {
                return false;
            }
            if c.con.major > 0 || c.minor_dirty {
                return v.major == c.con.major;
            }
            if v.major > 0 {
                return false;
            }
            if c.con.minor > 0 || c.patch_dirty {
                return v.minor == c.con.minor;
            }
            if v.minor > 0 {
                return false;
            }
            c.con.patch == v.patch
        }
        _ => false,
    }
}

fn tilde(v: &Version, c: &Constraint) -> bool {
    if !v.pre.is_empty() && c.con.pre.is_empty() {
        return false;
    }
    if v.compare(&c.con) == Ordering::Less {
        return false;
    }
    if c.con.major == 0 && c.con.minor == 0 && c.con.patch == 0 && !c.minor_dirty && !c.patch_dirty {
        return true;
    }
    if v.major != c.con.major {
        return false;
    }
    v.minor == c.con.minor || c.minor_dirty
}

/// `semverCompare CONSTRAINT VERSION`.
pub(crate) fn semver_compare(constraint: &str, version: &str) -> Result<bool, String> {
    let range = VersionRange::parse(constraint)?;
    let v = Version::parse(version)?;
    Ok(range.admits(&v))
}

/// A version range as `semverCompare` reads it (Masterminds semver v3: the syntax Helm and Flux
/// use for ranges), parsed once: what an OperatorSource's `ref.semver` is matched with.
#[derive(Clone, Debug)]
pub struct VersionRange {
    ors: Vec<Vec<Constraint>>,
}

impl VersionRange {
    /// Parses `>=0.2.0 <1.0.0`, `^1.2 || ~2.0`, …; the error is Masterminds' wording.
    pub fn parse(range: &str) -> Result<VersionRange, String> {
        Ok(VersionRange {
            ors: new_constraints(range)?,
        })
    }

    /// Whether `version` (loosely parsed: `v1`, `1.2`) is in the range; a string that is not a
    /// version is in no range.
    pub fn matches(&self, version: &str) -> bool {
        Version::parse(version).is_ok_and(|v| self.admits(&v))
    }

    fn admits(&self, v: &Version) -> bool {
        self.ors.iter().any(|and| and.iter().all(|c| check(v, c)))
    }
}

impl GoObject for Version {
    fn type_name(&self) -> String {
        if self.by_value {
            "semver.Version".into()
        } else {
            "*semver.Version".into()
        }
    }
    fn kind(&self) -> &'static str {
        if self.by_value { "struct" } else { "ptr" }
    }
    fn go_string(&self) -> String {
        self.string()
    }
    fn field(&self, name: &str) -> Option<Result<Value, String>> {
        Some(Ok(match name {
            "Major" => Value::Int64(self.major as i64),
            "Minor" => Value::Int64(self.minor as i64),
            "Patch" => Value::Int64(self.patch as i64),
            "Prerelease" => Value::str(self.pre.as_str()),
            "Metadata" => Value::str(self.metadata.as_str()),
            "Original" if !self.by_value => Value::str(self.original.as_str()),
            "IncMajor" | "IncMinor" | "IncPatch" => Value::Object(Rc::new(self.incremented(name))),
            "String" => Value::str(self.string()),
            _ => return None,
        }))
    }
    fn method_arity(&self, name: &str) -> Option<usize> {
        matches!(name, "LessThan" | "GreaterThan" | "Equal" | "Compare").then_some(1)
    }
    fn call_method(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        let other = match args {
            [Value::Object(o)] => o.as_any().downcast_ref::<Version>(),
            _ => None,
        };
        let cmp = |f: fn(Ordering) -> Value| -> Option<Result<Value, String>> {
            Some(
                other
                    .map(|o| f(self.compare(o)))
                    .ok_or_else(|| format!("{name} expects a *semver.Version")),
            )
        };
        match name {
            "LessThan" => cmp(|o| Value::Bool(o == Ordering::Less)),
            "GreaterThan" => cmp(|o| Value::Bool(o == Ordering::Greater)),
            "Equal" => cmp(|o| Value::Bool(o == Ordering::Equal)),
            "Compare" => cmp(|o| Value::Int(o as i64)),
            _ => None,
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// JSON form of a `*semver.Version` (its `String()`, quoted), for `toJson`.
pub(crate) fn object_json(o: &dyn GoObject) -> Option<String> {
    o.as_any()
        .downcast_ref::<Version>()
        .map(|v| format!("\"{}\"", v.string()))
}

pub(super) fn register(m: &mut FuncMap) {
    m.insert("semver", sig(&[P::String]), |_, a| {
        Version::parse(a_str(a, 0)?)
            .map(|v| Value::Object(Rc::new(v)))
            .map_err(FuncError)
    });
    m.insert("semverCompare", sig(&[P::String, P::String]), |_, a| {
        semver_compare(a_str(a, 0)?, a_str(a, 1)?)
            .map(Value::Bool)
            .map_err(FuncError)
    });
}
