//! `package verify`: every check of KUDO's verifiers (kudo-behaviour.md §6), in KUDO's order and
//! with KUDO's messages, plus a few checks of our own (marked below) for mistakes KUDO only
//! discovered at run time.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use regex::Regex;

use crate::model::{Package, TaskKind};
use crate::params::{ParamValueError, validate_decoded_for_type};
use crate::yaml::go_s;

/// Errors make a package invalid; warnings do not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verification {
    /// Problems that make the package invalid (`package verify` fails).
    pub errors: Vec<String>,
    /// Problems reported without failing the package.
    pub warnings: Vec<String>,
}

impl Verification {
    /// Whether no error was found (warnings do not count).
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
    /// Records an error.
    pub fn error(&mut self, s: impl Into<String>) {
        self.errors.push(s.into());
    }
    /// Records a warning.
    pub fn warn(&mut self, s: impl Into<String>) {
        self.warnings.push(s.into());
    }
    fn param_error(&mut self, name: &str, reason: &str) {
        self.error(format!("parameter {name:?} {reason}"));
    }
    fn param_warning(&mut self, name: &str, reason: &str) {
        self.warn(format!("parameter {name:?} {reason}"));
    }
}

/// The optional `--param-checks` (all produce warnings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParamChecks {
    /// `display`: warn about parameters without a proper `displayName`.
    pub display: bool,
    /// `hint`: warn about parameters without a proper `hint`.
    pub hint: bool,
    /// `desc`: warn about parameters without a proper `description`.
    pub desc: bool,
    /// `type`: warn about parameters without an explicit `type`.
    pub type_: bool,
    /// `hasgroup`: warn about parameters not assigned to a group.
    pub hasgroup: bool,
    /// `groups`: warn about groups without a proper `displayName` or `description`.
    pub groups: bool,
}

impl ParamChecks {
    /// Parses `display,hint,desc,type,hasgroup,groups,all`.
    pub fn parse(list: &[String]) -> Result<ParamChecks, UnknownParamCheck> {
        let mut c = ParamChecks::default();
        for item in list.iter().flat_map(|s| s.split(',')) {
            match item.trim() {
                "display" => c.display = true,
                "hint" => c.hint = true,
                "desc" => c.desc = true,
                "type" => c.type_ = true,
                "hasgroup" => c.hasgroup = true,
                "groups" => c.groups = true,
                "all" => {
                    c = ParamChecks {
                        display: true,
                        hint: true,
                        desc: true,
                        type_: true,
                        hasgroup: true,
                        groups: true,
                    }
                }
                "" => {}
                other => return Err(UnknownParamCheck(other.to_string())),
            }
        }
        Ok(c)
    }
}

/// A `--param-checks` item [`ParamChecks::parse`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown parameter check {0:?} (use display, hint, desc, type, hasgroup, groups or all)")]
pub struct UnknownParamCheck(pub String);

/// A version Masterminds' semver parser refuses ([`parse_semver`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid Semantic Version")]
pub struct InvalidSemver;

/// Parameter types KUDO defines.
pub const PARAM_TYPES: [&str; 6] = ["string", "integer", "number", "boolean", "array", "map"];

/// Runs every always-on check, then the optional parameter checks.
pub fn verify(pkg: &Package, checks: ParamChecks) -> Verification {
    let mut r = Verification::default();
    // Ours: keys written twice in the package files (rendered templates: `render_all`).
    for file in [crate::model::OPERATOR_FILE, crate::model::PARAMS_FILE] {
        let text = pkg
            .files
            .get(file)
            .map(|b| String::from_utf8_lossy(b))
            .unwrap_or_default();
        duplicate_key_warnings(file, &text, &mut r);
    }
    duplicates(pkg, &mut r);
    invalid_chars(pkg, &mut r);
    versions(pkg, &mut r);
    task_build(pkg, &mut r);
    task_references(pkg, &mut r);
    plan_references(pkg, &mut r);
    crate::tmpl::parameter_usage(pkg, &mut r);
    parameter_definitions(pkg, &mut r);
    // Ours: schema keywords and package-level rules.
    parameter_schemas(pkg, &mut r);
    sensitive_names(pkg, &mut r);
    template_references(pkg, &mut r);
    crate::tmpl::render_all(pkg, &mut r);
    namespaces(pkg, &mut r);
    // Ours: autopilot rules (kudo-rs extension) the manager could not evaluate.
    for e in crate::autopilot::check_package(pkg) {
        r.error(e);
    }
    extended(pkg, checks, &mut r);
    // Ours: the typed API section.
    if let Some(api) = &pkg.operator.api {
        for e in crate::typed_api::check_api(api, &pkg.params.definitions()) {
            r.error(e);
        }
    }
    r
}

fn duplicates(pkg: &Package, r: &mut Verification) {
    let mut seen = HashSet::new();
    for p in &pkg.params.parameters {
        if !seen.insert(p.name.to_lowercase()) {
            r.param_error(&p.name, "has a duplicate");
        }
    }
}

fn invalid_chars(pkg: &Package, r: &mut Verification) {
    for p in &pkg.params.parameters {
        for c in [';', ','] {
            if p.name.contains(c) {
                r.param_error(&p.name, &format!("contains invalid character '{c}'"));
            }
        }
        // Ours: a parameter without a name cannot be set or referenced.
        if p.name.is_empty() {
            r.error("params.yaml: a parameter has no name");
        }
    }
}

/// Semantic versions as KUDO's (Masterminds) parser accepts them: optional `v`, missing minor or
/// patch allowed.
pub fn parse_semver(s: &str) -> Result<(), InvalidSemver> {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(
            r"^v?(0|[1-9][0-9]*|[0-9]+)(\.[0-9]+)?(\.[0-9]+)?(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$",
        )
        .expect("static regex")
    });
    if re.is_match(s) {
        Ok(())
    } else {
        Err(InvalidSemver)
    }
}

fn versions(pkg: &Package, r: &mut Verification) {
    let o = &pkg.operator;
    if o.operator_version.is_empty() || parse_semver(&o.operator_version).is_err() {
        r.error("\"operatorVersion\" is required and must be semver");
    }
    if o.kubernetes_version.is_empty() || parse_semver(&o.kubernetes_version).is_err() {
        r.error("\"kubernetesVersion\" is required and must be semver");
    }
    for (field, v) in [("appVersion", &o.app_version), ("kudoVersion", &o.kudo_version)] {
        if !v.is_empty()
            && let Err(e) = parse_semver(v)
        {
            r.error(format!("unable to parse {field:?}: {e}"));
        }
    }
    // Ours: the name prefixes every object name, so it must be a DNS-1123 label.
    if o.name.is_empty() {
        r.error("operator.yaml: \"name\" is required");
    } else if !crate::scaffold::valid_name(&o.name) {
        r.error(format!(
            "operator.yaml: name {:?} is not a valid DNS-1123 label (lower-case letters, digits, '-')",
            o.name
        ));
    }
}

fn pipe_file_display(p: &kudo_api::PipeSpec) -> String {
    format!("{{{} {} {} {}}}", p.file, p.env_file, p.kind, p.key)
}

fn task_build(pkg: &Package, r: &mut Verification) {
    let key_re = Regex::new(r"^[a-zA-Z0-9_\-]+$").expect("static regex");
    let mut names = HashSet::new();
    for t in &pkg.operator.tasks {
        // Ours: steps reference tasks by name, so a name must be unique and non-empty.
        if t.name.is_empty() {
            r.error(format!("operator.yaml: a task of kind {:?} has no name", t.kind));
        } else if !names.insert(t.name.as_str()) {
            r.error(format!("task {:?} is defined more than once", t.name));
        }
        let s = &t.spec;
        match &t.kind {
            TaskKind::Apply | TaskKind::Delete if s.resources.is_empty() => r.error(format!(
                "task validation error: {} task '{}' has an empty resource list. if that's what you need, use a Dummy task instead",
                t.kind.as_str().to_lowercase(),
                t.name
            )),
            TaskKind::Toggle if s.resources.is_empty() => r.error(
                "task validation error: toggle task has an empty resource list. if that's what you need, use a Dummy task instead",
            ),
            TaskKind::Toggle if s.parameter.is_empty() => {
                r.error("task validation error: Missing parameter to evaluate the Toggle Task")
            }
            TaskKind::Pipe if s.pipe.is_empty() => r.error("task validation error: pipe task has an empty pipe files list"),
            TaskKind::Pipe => {
                for p in &s.pipe {
                    let shown = pipe_file_display(p);
                    if p.file.is_empty() == p.env_file.is_empty() {
                        r.error(format!(
                            "task validation error: pipe file {shown} must have either 'file' or 'envFile' field set but not both"
                        ));
                    } else if p.kind != "Secret" && p.kind != "ConfigMap" {
                        r.error(format!("task validation error: invalid pipe kind (must be Secret or ConfigMap): {shown}"));
                    } else if !key_re.is_match(&p.key) {
                        r.error(format!(
                            "task validation error: invalid pipe key (only letters, numbers and _ and - are allowed): {shown}"
                        ));
                    }
                }
            }
            TaskKind::KudoOperator if s.package.is_empty() => {
                r.error(format!("task validation error: kudo operator task '{}' has an empty package name", t.name))
            }
            TaskKind::Unknown(k) => r.error(format!("unknown task kind {k}")),
            TaskKind::Apply | TaskKind::Delete | TaskKind::Toggle | TaskKind::KudoOperator | TaskKind::Dummy => {}
        }
    }
}

fn task_references(pkg: &Package, r: &mut Verification) {
    let defined: BTreeSet<&str> = pkg.operator.tasks.iter().map(|t| t.name.as_str()).collect();
    let mut used = BTreeSet::new();
    for (plan_name, plan) in &pkg.operator.plans {
        let mut phases = HashSet::new();
        for phase in &plan.phases {
            // Ours: statuses are keyed by phase and step names, duplicates make them ambiguous.
            if !phases.insert(phase.name.as_str()) {
                r.error(format!(
                    "phase {:?} in plan {plan_name:?} is defined more than once",
                    phase.name
                ));
            }
            let mut steps = HashSet::new();
            for step in &phase.steps {
                if !steps.insert(step.name.as_str()) {
                    r.error(format!(
                        "step {:?} in phase {:?} of plan {plan_name:?} is defined more than once",
                        step.name, phase.name
                    ));
                }
                for t in &step.tasks {
                    used.insert(t.as_str());
                    if !defined.contains(t.as_str()) {
                        r.error(format!("task {t:?} in plan {plan_name:?} is not defined"));
                    }
                }
            }
        }
        for (label, s) in [("plan", &plan.strategy.0)]
            .into_iter()
            .chain(plan.phases.iter().map(|p| ("phase", &p.strategy.0)))
        {
            // Ours: KUDO silently treats any other strategy as parallel.
            if !s.is_empty() && s != "serial" && s != "parallel" {
                r.warn(format!(
                    "plan {plan_name:?}: {label} strategy {s:?} is neither \"serial\" nor \"parallel\" and behaves as parallel"
                ));
            }
        }
    }
    for t in &pkg.operator.tasks {
        if !used.contains(t.name.as_str()) {
            r.warn(format!("task {:?} defined but not used", t.name));
        }
    }
}

fn plan_references(pkg: &Package, r: &mut Verification) {
    for p in &pkg.params.parameters {
        if !p.trigger.is_empty() && !pkg.operator.plans.contains_key(&p.trigger) {
            r.error(format!(
                "plan {:?} used in parameter {:?} is not defined",
                p.trigger, p.name
            ));
        }
    }
    if !pkg.operator.plans.contains_key("deploy") {
        r.error("an operator is required to have 'deploy' plan");
    }
}

fn parameter_definitions(pkg: &Package, r: &mut Verification) {
    let params = &pkg.params.parameters;
    for p in params {
        // KUDO's verifier asks the package file (`HasDefault` of the YAML default), before the
        // reader stores `null` as the default of an `array` or `map` parameter.
        if p.is_immutable() && p.yaml_default.is_none() && !p.is_required() {
            r.param_error(
                &p.name,
                "is immutable but is not marked as required or has a default value",
            );
        }
    }
    for p in params {
        // Ours: KUDO accepts any type string and then treats unknown types as strings.
        if !p.value_type.is_empty() && !PARAM_TYPES.contains(&p.value_type.as_str()) {
            r.param_error(
                &p.name,
                &format!(
                    "has an unknown type {:?} (must be one of {})",
                    p.value_type,
                    PARAM_TYPES.join(", ")
                ),
            );
        }
    }
    for p in params {
        if let Some(vals) = &p.yaml_enum {
            if vals.is_empty() {
                r.param_error(&p.name, "is an enum but has no allowed values");
                continue;
            }
            for v in vals {
                if let Err(e) = validate_decoded_for_type(&p.value_type, v) {
                    r.param_error(&p.name, &format!("has an invalid enum value: {e}"));
                }
            }
        }
    }
    for p in params {
        let Some(d) = &p.yaml_default else { continue };
        if let Err(e) = validate_decoded_for_type(&p.value_type, d) {
            r.error(format!(
                "parameter {:?} has an invalid default value: {e}",
                p.name
            ));
            continue;
        }
        if let Some(vals) = &p.yaml_enum
            && !vals.is_empty()
            && !vals.contains(d)
        {
            let allowed: Vec<String> = vals.iter().map(go_s).collect();
            r.error(format!(
                "parameter {:?} has an invalid default value: value is {:?}, but only allowed values are [{}]",
                p.name,
                go_s(d),
                allowed.join(" ")
            ));
        }
        // Ours: Go prints large/small floats in exponent form, which is what the cluster stores.
        if let serde_json::Value::Number(n) = d {
            let shown = crate::yaml::go_sprint(d);
            if shown.contains('e') && !p.value_type.eq("number") {
                r.param_warning(
                    &p.name,
                    &format!("has the numeric default {n}, which KUDO stores as {shown:?}; quote it to keep the digits"),
                );
            }
        }
    }
    for p in params {
        if p.group.contains('/') {
            r.param_error(&p.name, "has a group with invalid character '/'");
        }
        if p.advanced && p.yaml_default.is_none() && p.is_required() {
            r.param_error(
                &p.name,
                "is marked as advanced, but also as required and has no default. An advanced parameter must either be optional or have a default value",
            );
        }
    }
    let mut groups = BTreeMap::new();
    for g in &pkg.params.groups {
        if g.name.contains('/') {
            r.error(format!("group {:?} contains invalid character '/'", g.name));
        }
        if groups.insert(g.name.as_str(), g).is_some() {
            r.error(format!("group {:?} is duplicated", g.name));
        }
    }
    for p in params {
        if !p.group.is_empty() && !groups.contains_key(p.group.as_str()) {
            r.param_error(&p.name, "has a group that is not defined in the group section");
        }
    }
}

/// The schema-keyword errors of one value of `p`, as `at PATH: message` when nested, else the
/// message (KUDO's own type/enum errors are reported by [`parameter_definitions`]).
fn schema_violations(p: &kudo_api::Parameter, value: &str) -> Vec<String> {
    crate::params::check_value(p, value)
        .into_iter()
        .filter_map(|e| match e {
            ParamValueError::Schema { name, path, message } if path == name => Some(message),
            ParamValueError::Schema { path, message, .. } => Some(format!("at {path}: {message}")),
            _ => None,
        })
        .collect()
}

/// Ours: every declared schema is usable (`kudo_schema::check_schema`, naming the
/// parameter and keyword), every default and enum value satisfies it, the package-level rules
/// compile and — when the defaults form a complete value set — hold for the defaults.
fn parameter_schemas(pkg: &Package, r: &mut Verification) {
    let mut broken = false;
    for p in pkg.params.parameters.iter().filter(|p| !p.schema.is_empty()) {
        let errors = kudo_schema::check_schema(&crate::schema::param_schema(p));
        for e in &errors {
            r.param_error(&p.name, &format!("has an invalid schema: {e}"));
        }
        if !errors.is_empty() {
            broken = true;
            continue;
        }
        for d in p
            .default
            .iter()
            .filter(|_| typed_ok(&p.value_type, p.yaml_default.as_ref()))
        {
            for v in schema_violations(p, d) {
                broken = true;
                r.param_error(&p.name, &format!("has an invalid default value: {v}"));
            }
        }
        for e in p.r#enum.iter().flatten() {
            for v in schema_violations(p, e) {
                r.param_error(&p.name, &format!("has an invalid enum value: {v}"));
            }
        }
    }
    package_rules(pkg, broken, r);
}

/// Whether a YAML default has its declared type (else KUDO's check already reported it).
fn typed_ok(value_type: &str, v: Option<&serde_json::Value>) -> bool {
    v.is_some_and(|v| validate_decoded_for_type(value_type, v).is_ok())
}

/// The package-level rules: they compile; the defaults satisfy them when every required
/// parameter has a default (else an install supplies values the rules need, and the defaults
/// alone say nothing).
fn package_rules(pkg: &Package, broken: bool, r: &mut Verification) {
    let rules = &pkg.params.validations;
    if rules.is_empty() {
        return;
    }
    let defs = pkg.params.definitions();
    let errors = kudo_schema::check_schema(&crate::schema::rules_schema(rules));
    for e in &errors {
        r.error(format!("params.yaml: x-kubernetes-validations: {e}"));
    }
    let complete = !defs.iter().any(kudo_api::Parameter::needs_value);
    if !errors.is_empty() || broken || !complete {
        return;
    }
    for e in crate::params::check_rules(&defs, rules, &BTreeMap::new()) {
        r.error(format!(
            "params.yaml: the default values do not satisfy a rule: {e}"
        ));
    }
}

/// Ours: a key written twice in one mapping of `text` (`place` names the file) is read as KUDO
/// reads it, the last value winning, but is almost always a mistake: one warning per repetition.
pub(crate) fn duplicate_key_warnings(place: &str, text: &str, r: &mut Verification) {
    for d in crate::yaml::duplicate_keys(text) {
        r.warn(format!(
            "{place} line {}: key {:?} appears twice in one mapping (first at line {}); the last value is used, as KUDO reads it",
            d.line, d.key, d.first_line
        ));
    }
}

/// Nouns that make a parameter look like it holds a secret when the name ends with them (the head
/// of a compound name comes last: `DB_PASSWORD`, `apiKey`, `OAUTH_CLIENT_SECRET`); earlier in the
/// name they qualify something else (`TLS_SECRET_NAME` names a Secret, `PASSWORD_FILE` a path,
/// `CREDENTIALS_VALIDITY_IN_MS` a duration, `KAFKA_CONNECT_KEY_CONVERTER` a class).
/// Plurals other than CREDENTIALS count things instead (`NUM_TOKENS`).
pub const SECRET_NOUNS: [&str; 9] = [
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "SECRET",
    "TOKEN",
    "CREDENTIAL",
    "CREDENTIALS",
    "KEY",
    "APIKEY",
];

/// Segment pairs that look like a secret anywhere in the name (`PRIVATE_KEY_PEM`).
pub const SECRET_SEGMENT_PAIRS: [[&str; 2]; 1] = [["PRIVATE", "KEY"]];

/// The segments of a parameter name, upper-cased: split at anything but letters and digits and
/// where a lower-case letter or digit is followed by an upper-case one (`adminPassword`).
fn name_segments(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            out.extend((!cur.is_empty()).then(|| std::mem::take(&mut cur)));
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        cur.push(c.to_ascii_uppercase());
    }
    out.extend((!cur.is_empty()).then_some(cur));
    out
}

/// Whether a parameter name looks like it holds a secret: its last segment is one of
/// [`SECRET_NOUNS`], or [`SECRET_SEGMENT_PAIRS`] occur in a row. Whole segments only:
/// `KEYSPACE_NAME`, `COUNTER_CACHE_KEYS_TO_SAVE` and `MONKEY` do not.
pub fn looks_secret(name: &str) -> bool {
    let seg = name_segments(name);
    seg.last().is_some_and(|s| SECRET_NOUNS.contains(&s.as_str()))
        || seg
            .windows(2)
            .any(|w| SECRET_SEGMENT_PAIRS.iter().any(|[a, b]| w[0] == *a && w[1] == *b))
}

/// Ours (the `sensitive` field is a kudo-rs extension): a secret-looking parameter that is not
/// `sensitive` would have its value stored in plain text in the Instance.
fn sensitive_names(pkg: &Package, r: &mut Verification) {
    for p in &pkg.params.parameters {
        if looks_secret(&p.name) && !p.is_sensitive() {
            r.param_warning(
                &p.name,
                "looks like it holds a secret but is not marked 'sensitive: true'; its value would be stored in plain text in the Instance",
            );
        }
    }
}

/// Templates each task needs (resources, Pipe pod, KudoOperator parameter file).
pub fn task_templates(t: &kudo_api::Task) -> Vec<&str> {
    match t.kind {
        TaskKind::Apply | TaskKind::Delete | TaskKind::Toggle => {
            t.spec.resources.iter().map(String::as_str).collect()
        }
        TaskKind::Pipe if !t.spec.pod.is_empty() => vec![t.spec.pod.as_str()],
        TaskKind::KudoOperator if !t.spec.parameter_file.is_empty() => vec![t.spec.parameter_file.as_str()],
        TaskKind::Pipe | TaskKind::KudoOperator | TaskKind::Dummy | TaskKind::Unknown(_) => Vec::new(),
    }
}

fn template_references(pkg: &Package, r: &mut Verification) {
    let mut referenced = BTreeSet::new();
    for t in &pkg.operator.tasks {
        for f in task_templates(t) {
            referenced.insert(f);
            if !pkg.templates.contains_key(f) {
                r.error(format!(
                    "template {f:?} required by {} but is not defined",
                    t.name
                ));
            }
        }
        if t.kind == TaskKind::Pipe && t.spec.pod.is_empty() {
            // Ours: KUDO only fails when the Pipe task runs.
            r.error(format!("task {:?}: a Pipe task needs a pod template", t.name));
        }
    }
    for name in pkg.templates.keys() {
        if !referenced.contains(name.as_str()) && *name != pkg.operator.namespace_manifest {
            r.warn(format!("template {name:?} is not referenced from any task"));
        }
    }
}

fn namespaces(pkg: &Package, r: &mut Verification) {
    let re = Regex::new(r"kind:\s*Namespace").expect("static regex");
    let nm = &pkg.operator.namespace_manifest;
    for (name, text) in &pkg.templates {
        if name != nm && re.is_match(text) {
            r.error(format!("template {name:?} contains 'kind: Namespace' not allowed unless specified as 'NamespaceManifest'"));
        }
    }
    if nm.is_empty() {
        return;
    }
    let Some(text) = pkg.templates.get(nm) else {
        r.error(format!("NamespaceManifest {nm:?} not found in /templates folder"));
        return;
    };
    crate::tmpl::check_namespace_manifest(pkg, nm, text, r);
}

fn starts_upper(s: &str) -> bool {
    s.chars().next().is_some_and(char::is_uppercase)
}

fn extended(pkg: &Package, c: ParamChecks, r: &mut Verification) {
    for p in &pkg.params.parameters {
        if c.display {
            if p.display_name.is_empty() {
                r.param_warning(&p.name, "has no displayName");
            } else {
                if p.display_name.ends_with(':') {
                    r.param_warning(&p.name, "has a displayName ending with ':'");
                }
                if !starts_upper(&p.display_name) {
                    r.param_warning(
                        &p.name,
                        "has a displayName that does not start with a capital letter",
                    );
                }
            }
        }
        if c.desc {
            if p.description.is_empty() {
                r.param_warning(&p.name, "has no description");
            } else {
                if !p.description.ends_with(['.', '!', '?', ')']) {
                    r.param_warning(&p.name, "has a description not ending with one of '.!?)'");
                }
                if !starts_upper(&p.description) {
                    r.param_warning(
                        &p.name,
                        "has a description that does not start with a capital letter",
                    );
                }
            }
        }
        if c.hint {
            if p.hint.is_empty() {
                r.param_warning(&p.name, "has no hint");
            } else if !p.hint.ends_with('.') {
                r.param_warning(&p.name, "has a hint not ending with '.'");
            }
        }
        if c.type_ && p.value_type.is_empty() {
            r.param_warning(&p.name, "has no explicit type assigned");
        }
        if c.hasgroup && p.group.is_empty() {
            r.param_warning(&p.name, "has no group assigned");
        }
    }
    if c.groups {
        for g in &pkg.params.groups {
            if g.display_name.is_empty() {
                r.warn(format!("group {:?} has no displayName", g.name));
            } else if g.display_name.ends_with(':') || !starts_upper(&g.display_name) {
                r.warn(format!(
                    "group {:?} has a displayName that does not start upper-case or ends with ':'",
                    g.name
                ));
            }
            if g.description.is_empty() {
                r.warn(format!("group {:?} has no description", g.name));
            } else if !g.description.ends_with(['.', '!', '?', ')']) || !starts_upper(&g.description) {
                r.warn(format!(
                    "group {:?} has a description that does not start upper-case or end with one of '.!?)'",
                    g.name
                ));
            }
        }
    }
}
