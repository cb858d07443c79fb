//! Static checks of autopilot rules (plan field `when`, a kudo-rs extension) and the
//! bounded compilation of their CEL conditions.
//!
//! The same checks run at `package verify` (over the package's params.yaml) and at install (over
//! the OperatorVersion about to be created), so a rule the manager could never evaluate is refused
//! before anything is applied.
//!
//! **Bounds.** A rule's condition is evaluated by the manager on every change of the watched
//! object, so its cost is bounded statically:
//! * at most [`MAX_RULES_PER_PLAN`] rules per plan;
//! * a condition is at most [`MAX_CONDITION_LEN`] bytes long;
//! * brackets (`(`, `[`, `{`) nest at most [`MAX_NESTING`] deep (this also bounds the parser's
//!   recursion);
//! * at most [`MAX_COMPREHENSIONS`] comprehension macros (`all`, `exists`, `exists_one`, `map`,
//!   `filter`), so the work is at most quadratic in the size of the watched object, which the API
//!   server itself bounds.

use std::collections::BTreeMap;

use kudo_api::AutopilotRule;

/// Rules one plan may declare.
pub const MAX_RULES_PER_PLAN: usize = 16;
/// Longest condition accepted, in bytes.
pub const MAX_CONDITION_LEN: usize = 1024;
/// Deepest bracket nesting accepted in a condition.
pub const MAX_NESTING: usize = 32;
/// Most comprehension macros accepted in one condition.
pub const MAX_COMPREHENSIONS: usize = 2;

const COMPREHENSIONS: [&str; 5] = [".all(", ".exists(", ".exists_one(", ".map(", ".filter("];

/// Why a condition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    /// The condition is blank.
    #[error("condition is empty")]
    Empty,
    /// The condition is longer than [`MAX_CONDITION_LEN`] bytes (its length).
    #[error("condition is {0} bytes long; at most {MAX_CONDITION_LEN} are allowed")]
    TooLong(usize),
    /// Brackets nest deeper than [`MAX_NESTING`] (the depth found).
    #[error("condition nests brackets {0} deep; at most {MAX_NESTING} are allowed")]
    TooDeep(usize),
    /// More than [`MAX_COMPREHENSIONS`] comprehension macros (the number found).
    #[error("condition uses {0} comprehension macros; at most {MAX_COMPREHENSIONS} are allowed")]
    TooManyComprehensions(usize),
    /// The CEL parser refused the condition (its message, on one line).
    #[error("condition is not valid CEL: {0}")]
    Syntax(String),
}

/// Compiles a rule condition within the bounds of this module.
pub fn compile_condition(src: &str) -> Result<cel_interpreter::Program, ConditionError> {
    let s = src.trim();
    if s.is_empty() {
        return Err(ConditionError::Empty);
    }
    if s.len() > MAX_CONDITION_LEN {
        return Err(ConditionError::TooLong(s.len()));
    }
    let (mut depth, mut max) = (0usize, 0usize);
    for c in s.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if max > MAX_NESTING {
        return Err(ConditionError::TooDeep(max));
    }
    let macros: usize = COMPREHENSIONS.iter().map(|m| s.matches(m).count()).sum();
    if macros > MAX_COMPREHENSIONS {
        return Err(ConditionError::TooManyComprehensions(macros));
    }
    // The parser is third-party code fed package input: a panic in it is a refusal, not a crash.
    match std::panic::catch_unwind(|| cel_interpreter::Program::compile(s)) {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(ConditionError::Syntax(e.to_string().trim().replace('\n', " "))),
        Err(_) => Err(ConditionError::Syntax(
            "the CEL parser failed on this input".into(),
        )),
    }
}

/// Why a rule's `for`/`cooldown` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a Go duration string (the text as given).
    #[error("{0:?} is not a Go duration (e.g. 30s, 5m, 1h30m)")]
    Invalid(String),
    /// A valid Go duration, but below zero (the text as given).
    #[error("{0:?} is negative")]
    Negative(String),
}

/// A rule's `for`/`cooldown`: a Go duration (empty = 0), not negative.
pub fn parse_rule_duration(s: &str) -> Result<std::time::Duration, DurationError> {
    let t = s.trim();
    if t.is_empty() {
        return Ok(std::time::Duration::ZERO);
    }
    match kudo_api::duration::parse(t) {
        Ok(n) => u64::try_from(n)
            .map(std::time::Duration::from_nanos)
            .map_err(|_| DurationError::Negative(s.to_string())),
        Err(_) => Err(DurationError::Invalid(s.to_string())),
    }
}

/// What the checks need to know of a declared parameter.
#[derive(Debug, Clone, Copy)]
pub struct ParamInfo {
    /// Whether `params.yaml` declares the parameter `immutable`, which a rule may not set.
    pub immutable: bool,
}

fn is_template(s: &str) -> bool {
    s.contains("{{")
}

/// A Kubernetes `apiVersion`: `v1` or `group/version` (DNS-ish group, version `v1`, `v1beta1`, …).
fn valid_api_version(av: &str) -> bool {
    let (group, version) = match av.split_once('/') {
        Some((g, v)) => (Some(g), v),
        None => (None, av),
    };
    let version_ok = version.len() <= 63
        && version.starts_with('v')
        && version[1..].starts_with(|c: char| c.is_ascii_digit())
        && version
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let group_ok = group.is_none_or(|g| {
        !g.is_empty()
            && g.len() <= 253
            && g.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    });
    version_ok && group_ok
}

/// A Kubernetes kind: an identifier starting with an upper-case letter.
fn valid_kind(kind: &str) -> bool {
    kind.starts_with(|c: char| c.is_ascii_uppercase())
        && kind.len() <= 63
        && kind.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Every problem of one plan's rules, each naming the plan, the rule index and the field.
pub fn check_plan_rules(
    plan: &str,
    rules: &[AutopilotRule],
    params: &BTreeMap<String, ParamInfo>,
) -> Vec<String> {
    let mut errs = Vec::new();
    if rules.len() > MAX_RULES_PER_PLAN {
        errs.push(format!(
            "plan {plan:?} has {} autopilot rules (when); at most {MAX_RULES_PER_PLAN} are allowed",
            rules.len()
        ));
    }
    for (i, r) in rules.iter().enumerate() {
        let at = format!("plan {plan:?} when[{i}]");
        let res = &r.resource;
        if !is_template(&res.api_version) && !valid_api_version(&res.api_version) {
            errs.push(format!(
                "{at}.resource.apiVersion {:?} is not an API version (v1 or GROUP/VERSION)",
                res.api_version
            ));
        }
        if !is_template(&res.kind) && !valid_kind(&res.kind) {
            errs.push(format!(
                "{at}.resource.kind {:?} is not a kind (e.g. ConfigMap)",
                res.kind
            ));
        }
        if res.name.trim().is_empty() {
            errs.push(format!("{at}.resource.name is empty"));
        }
        if let Err(e) = compile_condition(&r.condition) {
            errs.push(format!("{at}.condition: {e}"));
        }
        // A templated duration (e.g. `for: "{{ .Params.RECOVER_AFTER }}"`) is checked by the
        // manager once rendered.
        if !is_template(&r.for_)
            && let Err(e) = parse_rule_duration(&r.for_)
        {
            errs.push(format!("{at}.for: {e}"));
        }
        if !is_template(&r.cooldown)
            && let Err(e) = parse_rule_duration(&r.cooldown)
        {
            errs.push(format!("{at}.cooldown: {e}"));
        }
        for name in r.set_parameters.keys() {
            match params.get(name) {
                None => errs.push(format!(
                    "{at}.setParameters: parameter {name:?} is not declared in params.yaml"
                )),
                Some(p) if p.immutable => errs.push(format!(
                    "{at}.setParameters: parameter {name:?} is immutable and cannot be set by a rule"
                )),
                Some(_) => {}
            }
        }
    }
    errs
}

/// [`check_plan_rules`] over every plan of an OperatorVersion (the install-time check).
pub fn check_operator_version(ov: &kudo_api::OperatorVersion) -> Vec<String> {
    check_plans(&ov.spec.plans, ov.spec.parameters.iter())
}

/// [`check_plan_rules`] over every plan of a package (the `package verify` check).
pub fn check_package(pkg: &crate::model::Package) -> Vec<String> {
    check_plans(&pkg.operator.plans, pkg.params.parameters.iter().map(|p| &p.def))
}

fn check_plans<'a>(
    plans: &BTreeMap<String, kudo_api::Plan>,
    defs: impl Iterator<Item = &'a kudo_api::Parameter>,
) -> Vec<String> {
    let params: BTreeMap<String, ParamInfo> = defs
        .map(|p| {
            let info = ParamInfo {
                immutable: p.is_immutable(),
            };
            (p.name.clone(), info)
        })
        .collect();
    plans
        .iter()
        .flat_map(|(name, plan)| check_plan_rules(name, &plan.when, &params))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudo_api::AutopilotResource;

    fn rule(condition: &str) -> AutopilotRule {
        AutopilotRule {
            resource: AutopilotResource {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "{{ .Name }}-signal".into(),
            },
            condition: condition.into(),
            ..AutopilotRule::default()
        }
    }

    fn params() -> BTreeMap<String, ParamInfo> {
        BTreeMap::from([
            ("NODES".to_string(), ParamInfo { immutable: false }),
            ("DISK".to_string(), ParamInfo { immutable: true }),
        ])
    }

    #[test]
    fn a_good_rule_passes() {
        let mut r = rule(r#"object.data.load == "high""#);
        r.for_ = "30s".into();
        r.cooldown = "5m".into();
        r.set_parameters
            .insert("NODES".into(), "{{ .Params.NODES }}".into());
        assert_eq!(check_plan_rules("scale", &[r], &params()), Vec::<String>::new());
    }

    #[test]
    fn each_bad_field_is_named() {
        let mut r = rule("object.data.load ==");
        r.resource.api_version = "apps/".into();
        r.resource.kind = "configmap".into();
        r.for_ = "soon".into();
        r.cooldown = "-1s".into();
        r.set_parameters.insert("NOPE".into(), "1".into());
        r.set_parameters.insert("DISK".into(), "1".into());
        let errs = check_plan_rules("scale", &[r], &params());
        let want = [
            "when[0].resource.apiVersion \"apps/\"",
            "when[0].resource.kind \"configmap\"",
            "when[0].condition: condition is not valid CEL",
            "when[0].for: \"soon\" is not a Go duration",
            "when[0].cooldown: \"-1s\" is negative",
            "parameter \"NOPE\" is not declared",
            "parameter \"DISK\" is immutable",
        ];
        assert_eq!(errs.len(), want.len(), "{errs:#?}");
        for w in want {
            assert!(errs.iter().any(|e| e.contains(w)), "{w} missing in {errs:#?}");
        }
        assert!(errs.iter().all(|e| e.starts_with("plan \"scale\" when[0]")));
    }

    #[test]
    fn templated_resource_fields_are_not_judged_statically() {
        let mut r = rule("true");
        r.resource.api_version = "{{ .Params.AV }}".into();
        r.resource.kind = "{{ .Params.KIND }}".into();
        r.for_ = "{{ .Params.AFTER }}".into();
        assert!(check_plan_rules("p", &[r], &params()).is_empty());
    }

    #[test]
    fn api_versions_and_kinds() {
        for ok in ["v1", "apps/v1", "batch/v1beta1", "example.com/v1alpha1"] {
            assert!(valid_api_version(ok), "{ok}");
        }
        for bad in [
            "",
            "1",
            "apps/",
            "/v1",
            "Apps/v1",
            "apps/V1",
            "a..b/v1",
            "apps/v1/x",
        ] {
            assert!(!valid_api_version(bad), "{bad}");
        }
        assert!(valid_kind("StatefulSet"));
        assert!(!valid_kind("statefulset") && !valid_kind("") && !valid_kind("Stateful-Set"));
    }

    #[test]
    fn bounds() {
        let rules = vec![rule("true"); MAX_RULES_PER_PLAN + 1];
        let errs = check_plan_rules("p", &rules, &params());
        assert_eq!(
            errs,
            vec![format!(
                "plan \"p\" has 17 autopilot rules (when); at most 16 are allowed"
            )]
        );
        let long = format!("{} == 1", "a + ".repeat(300));
        assert_eq!(
            compile_condition(&long).unwrap_err(),
            ConditionError::TooLong(long.len())
        );
        let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
        assert_eq!(compile_condition(&deep).unwrap_err(), ConditionError::TooDeep(40));
        let many = "a.all(x, x > 1) && a.exists(x, x > 1) && a.map(x, x).size() > 0";
        assert_eq!(
            compile_condition(many).unwrap_err(),
            ConditionError::TooManyComprehensions(3)
        );
        assert_eq!(compile_condition("  ").unwrap_err(), ConditionError::Empty);
        assert!(compile_condition("a.all(x, x > 1) && a.exists(y, y > 2)").is_ok());
    }

    #[test]
    fn the_longest_unbracketed_chains_compile_without_exhausting_the_stack() {
        // The length bound also bounds what the bracket bound cannot see: prefix operators and
        // long operator chains. Run on a small (256 KiB) stack, below a tokio worker's 2 MiB.
        let handle = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let bangs = format!("{}true", "!".repeat(MAX_CONDITION_LEN - 4));
                let sums = format!("{}1 == 1", "1 + ".repeat((MAX_CONDITION_LEN - 6) / 4));
                (
                    compile_condition(&bangs).is_ok(),
                    compile_condition(&sums).is_ok(),
                )
            })
            .unwrap();
        assert_eq!(handle.join().unwrap(), (true, true));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_rule_duration(""), Ok(std::time::Duration::ZERO));
        assert_eq!(
            parse_rule_duration("1m30s"),
            Ok(std::time::Duration::from_secs(90))
        );
        assert_eq!(
            parse_rule_duration("250ms"),
            Ok(std::time::Duration::from_millis(250))
        );
        assert!(parse_rule_duration("10").is_err());
    }
}
