//! The template-dependent verifiers: which parameters and implicit variables each template uses
//! (by walking the parsed AST), whether every template renders with the defaults, and our warnings
//! for non-hermetic functions.

use std::collections::{BTreeMap, BTreeSet};

use kudo_template::parse::{Arg, Ident, Node, Pipe, Tree};
use kudo_template::{FuncEnv, Template, Value, kudo_funcs};

use crate::model::{Package, TaskKind};
use crate::verify::Verification;

/// The implicit top-level variables templates may use (besides `.Params` and `.Pipes`).
pub const IMPLICITS: [&str; 8] = [
    "Name",
    "Namespace",
    "OperatorName",
    "OperatorVersion",
    "AppVersion",
    "PlanName",
    "PhaseName",
    "StepName",
];

/// Functions whose output differs between renders (time, randomness, DNS). KUDO re-renders on
/// every reconcile pass, so objects using them are re-patched and pods restarted.
pub const NON_HERMETIC: [&str; 13] = [
    "now",
    "ago",
    "randAlphaNum",
    "randAlpha",
    "randAscii",
    "randNumeric",
    "uuidv4",
    "shuffle",
    "genPrivateKey",
    "genCA",
    "genSelfSignedCert",
    "genSignedCert",
    "getHostByName",
];

/// What one template references.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct References {
    /// `.Params.X`, `$.Params.X`, `index .Params "X"`.
    pub params: BTreeSet<String>,
    /// `.Pipes.X`, `$.Pipes.X`.
    pub pipes: BTreeSet<String>,
    /// Single-segment fields on the root data (`.Name`, `$.Foo`).
    pub implicits: BTreeSet<String>,
    /// Non-hermetic functions called.
    pub non_hermetic: BTreeSet<String>,
}

/// Is `dot` the template's root data at this point? (`range`/`with` bodies and `define` bodies
/// rebind it.)
#[derive(Clone, Copy)]
struct Scope {
    dot_is_root: bool,
}

impl References {
    fn root_chain(&mut self, idents: &[Ident]) {
        match idents {
            [] => {}
            [one] => {
                self.implicits.insert(one.to_string());
            }
            [first, second, ..] if first == "Params" => {
                self.params.insert(second.to_string());
            }
            [first, second, ..] if first == "Pipes" => {
                self.pipes.insert(second.to_string());
            }
            // `.Name.Foo`: the implicit is used (its field access fails at run time, not here).
            [first, ..] => {
                self.implicits.insert(first.to_string());
            }
        }
    }

    fn arg(&mut self, a: &Arg, s: Scope) {
        match a {
            Arg::Field { idents, .. } if s.dot_is_root => self.root_chain(idents),
            Arg::Variable { idents, .. }
                if idents.first().map(Ident::as_str) == Some("$") && s.dot_is_root =>
            {
                self.root_chain(&idents[1..])
            }
            // Inside a `define` the root is whatever was passed; still, `$.Params.X` there almost always
            // means the package's parameter.
            Arg::Variable { idents, .. }
                if idents.first().map(Ident::as_str) == Some("$")
                    && idents.len() >= 3
                    && idents[1] == "Params" =>
            {
                self.params.insert(idents[2].to_string());
            }
            Arg::Identifier { name, .. } if NON_HERMETIC.contains(&name.as_str()) => {
                self.non_hermetic.insert(name.to_string());
            }
            Arg::Chain { node, .. } => self.arg(node, s),
            Arg::Pipe(p) => self.pipe(p, s),
            _ => {}
        }
    }

    fn is_root_params(a: &Arg, s: Scope) -> bool {
        match a {
            Arg::Field { idents, .. } => s.dot_is_root && idents.len() == 1 && idents[0] == "Params",
            Arg::Variable { idents, .. } => idents.len() == 2 && idents[0] == "$" && idents[1] == "Params",
            _ => false,
        }
    }

    fn pipe(&mut self, p: &Pipe, s: Scope) {
        for c in &p.cmds {
            // `index .Params "X"` names parameter X as surely as `.Params.X` does.
            if let [Arg::Identifier { name, .. }, target, Arg::String { text, .. }, ..] = c.args.as_slice()
                && name == "index"
                && Self::is_root_params(target, s)
            {
                self.params.insert(text.to_string());
                // Do not also record `.Params` as an implicit named "Params".
                for a in c.args.iter().skip(3) {
                    self.arg(a, s);
                }
                continue;
            }
            for a in &c.args {
                // A bare `.Params` (e.g. `toYaml .Params`) is neither an implicit nor one param.
                if Self::is_root_params(a, s) {
                    continue;
                }
                self.arg(a, s);
            }
        }
    }

    fn nodes(&mut self, nodes: &[Node], s: Scope) {
        for n in nodes {
            match n {
                Node::Action { pipe, .. } => self.pipe(pipe, s),
                Node::If(b) => {
                    self.pipe(&b.pipe, s);
                    self.nodes(&b.list, s);
                    if let Some(e) = &b.else_list {
                        self.nodes(e, s);
                    }
                }
                Node::Range(b) | Node::With(b) => {
                    self.pipe(&b.pipe, s);
                    self.nodes(&b.list, Scope { dot_is_root: false });
                    if let Some(e) = &b.else_list {
                        // `else` of range/with runs with the outer dot.
                        self.nodes(e, s);
                    }
                }
                Node::Template { pipe: Some(p), .. } => self.pipe(p, s),
                _ => {}
            }
        }
    }

    /// Collects the references of a parsed template file.
    pub fn of(t: &Template) -> References {
        let mut r = References::default();
        r.tree(t.tree(), Scope { dot_is_root: true });
        for (_, tree) in t.defined() {
            r.tree(tree, Scope { dot_is_root: false });
        }
        r
    }

    fn tree(&mut self, t: &Tree, s: Scope) {
        self.nodes(&t.root, s);
    }
}

/// Parses every template once. Parse errors are returned per file.
pub(crate) fn parse_all(pkg: &Package) -> BTreeMap<String, Result<Template, kudo_template::Error>> {
    let funcs = kudo_funcs();
    pkg.templates
        .iter()
        .map(|(k, v)| (k.clone(), Template::parse(k, v, &funcs)))
        .collect()
}

/// Verifier 7 (template half): undefined/unused parameters, invalid implicits, parse errors; plus
/// our non-hermetic-function warnings.
pub(crate) fn parameter_usage(pkg: &Package, r: &mut Verification) {
    let declared: BTreeSet<&str> = pkg.params.parameters.iter().map(|p| p.name.as_str()).collect();
    let mut used: BTreeSet<String> = BTreeSet::new();
    // kudo-rs extension: a plan's `schedule:` is a template too (its parameters are used).
    let funcs = kudo_funcs();
    let schedules = pkg.operator.plans.iter().filter_map(|(plan, p)| {
        let text = p.schedule.as_deref()?;
        let name = format!("{plan}.schedule");
        let parsed = Template::parse(&name, text, &funcs);
        Some((name, parsed))
    });
    for (name, parsed) in parse_all(pkg).into_iter().chain(schedules) {
        let t = match parsed {
            Ok(t) => t,
            Err(e) => {
                r.error(format!("template file {name:?} reports the following error: {e}"));
                continue;
            }
        };
        let refs = References::of(&t);
        for p in &refs.params {
            if !declared.contains(p.as_str()) {
                r.error(format!("parameter {p:?} in template {name} is not defined"));
            }
        }
        used.extend(refs.params.iter().cloned());
        for i in &refs.implicits {
            if !IMPLICITS.contains(&i.as_str()) && i != "Params" && i != "Pipes" {
                r.error(format!(
                    "template {name} defines an invalid implicit parameter {i:?}"
                ));
            }
        }
        for f in &refs.non_hermetic {
            r.warn(format!(
                "template {name} uses {f:?}, whose result changes between renders: the controller re-renders on every pass, so the object is re-applied with a new value each time"
            ));
        }
    }
    for t in &pkg.operator.tasks {
        if t.kind == TaskKind::Toggle && !t.spec.parameter.is_empty() {
            if !declared.contains(t.spec.parameter.as_str()) {
                r.error(format!(
                    "parameter {:?} in ToggleTask {} is not defined",
                    t.spec.parameter, t.name
                ));
            }
            used.insert(t.spec.parameter.clone());
        }
    }
    rule_usage(pkg, &declared, &mut used, r);
    for p in &pkg.params.parameters {
        if !used.contains(&p.name) && p.trigger.is_empty() {
            r.warn(format!("parameter {:?} defined but not used.", p.name));
        }
    }
}

/// The templates of autopilot rules (resource fields, `for`, `cooldown`, `setParameters` values)
/// and the `params.NAME` references of their CEL conditions: parse errors and undeclared
/// parameters are errors; the parameters they name count as used.
fn rule_usage(pkg: &Package, declared: &BTreeSet<&str>, used: &mut BTreeSet<String>, r: &mut Verification) {
    let funcs = kudo_funcs();
    for (plan, p) in &pkg.operator.plans {
        for (i, rule) in p.when.iter().enumerate() {
            let at = format!("plan {plan:?} when[{i}]");
            let mut fields = vec![
                ("resource.apiVersion".to_string(), &rule.resource.api_version),
                ("resource.kind".to_string(), &rule.resource.kind),
                ("resource.name".to_string(), &rule.resource.name),
                ("for".to_string(), &rule.for_),
                ("cooldown".to_string(), &rule.cooldown),
            ];
            fields.extend(
                rule.set_parameters
                    .iter()
                    .map(|(k, v)| (format!("setParameters.{k}"), v)),
            );
            for (field, text) in fields {
                if !text.contains("{{") {
                    continue;
                }
                match Template::parse(&format!("{at}.{field}"), text, &funcs) {
                    Ok(t) => {
                        let refs = References::of(&t);
                        for name in &refs.params {
                            if !declared.contains(name.as_str()) {
                                r.error(format!("{at}.{field}: parameter {name:?} is not defined"));
                            }
                        }
                        used.extend(refs.params.iter().cloned());
                    }
                    Err(e) => r.error(format!("{at}.{field}: template error: {e}")),
                }
            }
            let c = &rule.condition;
            let mut rest = c.as_str();
            while let Some(pos) = rest.find("params.") {
                let before = c.len() - rest.len() + pos;
                let after = &rest[pos + "params.".len()..];
                let name: String = after
                    .chars()
                    .take_while(|ch| ch.is_ascii_alphanumeric() || *ch == '_')
                    .collect();
                let standalone = before == 0
                    || !c[..before]
                        .ends_with(|ch: char| ch.is_ascii_alphanumeric() || ch == '_' || ch == '.');
                if standalone && !name.is_empty() {
                    if !declared.contains(name.as_str()) {
                        r.error(format!("{at}.condition: parameter {name:?} is not defined"));
                    }
                    used.insert(name);
                }
                rest = after;
            }
        }
    }
}

/// The `.Pipes` map a plan's templates see: every Pipe task of the plan, key → artifact name.
pub fn pipes_for_plan(
    instance: &str,
    plan_name: &str,
    plan: &kudo_api::Plan,
    tasks: &[kudo_api::Task],
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for phase in &plan.phases {
        for step in &phase.steps {
            for tname in &step.tasks {
                if let Some(t) = tasks
                    .iter()
                    .find(|t| &t.name == tname && t.kind == TaskKind::Pipe)
                {
                    for p in &t.spec.pipe {
                        out.insert(
                            p.key.clone(),
                            crate::render::pipe_artifact_name(&[
                                instance,
                                plan_name,
                                &phase.name,
                                &step.name,
                                &t.name,
                                &p.key,
                            ]),
                        );
                    }
                }
            }
        }
    }
    out
}

/// The data `package verify` renders with: implicit variables as their own names (`.Name` is
/// `"Name"`), parameters at their defaults with the runtime typing, pipes with computed names.
fn verify_data(pkg: &Package) -> Result<BTreeMap<String, Value>, String> {
    let params = crate::params::template_params(&pkg.params.definitions(), &BTreeMap::new())
        .map_err(|e| e.to_string())?;
    let mut pipes = BTreeMap::new();
    for (name, plan) in &pkg.operator.plans {
        pipes.extend(pipes_for_plan("Name", name, plan, &pkg.operator.tasks));
    }
    let mut data = BTreeMap::new();
    for i in IMPLICITS {
        data.insert(i.to_string(), Value::str(i));
    }
    data.insert("Params".into(), Value::map(params));
    data.insert(
        "Pipes".into(),
        Value::map(pipes.into_iter().map(|(k, v)| (k, Value::str(v))).collect()),
    );
    Ok(data)
}

/// Verifier 9: every template renders with placeholder implicits and the parameter defaults, and
/// (except KudoOperator parameter files) its output parses as Kubernetes objects.
pub(crate) fn render_all(pkg: &Package, r: &mut Verification) {
    let param_files: BTreeSet<&str> = pkg
        .operator
        .tasks
        .iter()
        .filter(|t| t.kind == TaskKind::KudoOperator)
        .map(|t| t.spec.parameter_file.as_str())
        .collect();
    let data = match verify_data(pkg) {
        Ok(d) => d,
        Err(e) => {
            r.error(e);
            return;
        }
    };
    for (name, parsed) in parse_all(pkg) {
        let Ok(t) = parsed else { continue }; // reported by parameter_usage
        let data = Value::map(data.clone());
        let mut env = FuncEnv::with_seed(0);
        match t.execute(&data, &mut env) {
            Err(e) => r.error(format!("error expanding template {name}: {e}")),
            Ok(out) => {
                let place = format!("template {name} (rendered with the defaults)");
                crate::verify::duplicate_key_warnings(&place, &out, r);
                if !param_files.contains(name.as_str()) && name != pkg.operator.namespace_manifest {
                    match crate::split::parse_objects(&name, &out) {
                        Err(e) => r.error(e.to_string()),
                        Ok(objs) => {
                            for o in &objs {
                                translation_warning(&name, &o.object, r);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Ours: an object of an API version current Kubernetes no longer serves is translated when
/// applied (crate::translate); say so, or say why it cannot be.
fn translation_warning(template: &str, obj: &serde_json::Value, r: &mut Verification) {
    let av = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let Some(m) = crate::translate::mapping(av, kind) else {
        return;
    };
    match crate::translate::translate(obj) {
        Ok(_) => r.warn(format!(
            "template {template}: {kind} {av} is not served since Kubernetes 1.{}; it will be applied as {} where the cluster does not serve {av}",
            m.removed_in, m.to
        )),
        Err(e) => r.warn(format!(
            "template {template}: {kind} {av} is not served since Kubernetes 1.{} and {e}",
            m.removed_in
        )),
    }
}

/// Verifier 10 (manifest half): the namespace manifest must render to exactly one Namespace.
pub(crate) fn check_namespace_manifest(pkg: &Package, nm: &str, text: &str, r: &mut Verification) {
    let funcs = kudo_funcs();
    let data = verify_data(pkg).unwrap_or_default();
    let rendered = Template::parse(nm, text, &funcs)
        .ok()
        .and_then(|t| t.execute(&Value::map(data), &mut FuncEnv::with_seed(0)).ok());
    let objs = rendered.and_then(|out| crate::split::parse_objects(nm, &out).ok());
    match objs {
        None => r.error(format!("Unable to marshal NamespaceManifest {nm:?} ")),
        Some(objs) if objs.is_empty() => r.error(format!(
            "NamespaceManifest {nm:?} found but does not contain a manifest"
        )),
        Some(objs) if objs.len() > 1 => r.error(format!(
            "NamespaceManifest {nm:?} found but contains {} manifests which is greater than 1",
            objs.len()
        )),
        Some(objs) => {
            if objs[0].object["kind"] != "Namespace" {
                r.error(format!(
                    "NamespaceManifest {nm:?} found but manifest is not kind: Namespace"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(text: &str) -> References {
        References::of(&Template::parse("t.yaml", text, &kudo_funcs()).unwrap())
    }

    #[test]
    fn finds_params_through_dollar_index_and_nested_pipes() {
        let r = refs(
            "{{ .Params.A }}{{ range $i := until 2 }}{{ $.Params.B }}{{ .Ignored }}{{ end }}\
             {{ index .Params \"C\" }}{{ if (eq (int .Params.D) 1) }}{{ .Name }}{{ else }}{{ .Bogus }}{{ end }}\
             {{ with .Params.E }}{{ .Inner }}{{ end }}{{ toYaml .Params }}",
        );
        let params: Vec<&str> = r.params.iter().map(String::as_str).collect();
        assert_eq!(params, ["A", "B", "C", "D", "E"]);
        let implicits: Vec<&str> = r.implicits.iter().map(String::as_str).collect();
        assert_eq!(implicits, ["Bogus", "Name"]);
    }

    #[test]
    fn flags_non_hermetic_functions() {
        let r = refs("{{ now | date \"2006\" }}{{ randAlphaNum 5 }}{{ sha256sum .Name }}");
        let f: Vec<&str> = r.non_hermetic.iter().map(String::as_str).collect();
        assert_eq!(f, ["now", "randAlphaNum"]);
    }

    #[test]
    fn verify_warns_about_non_hermetic_templates() {
        let mut pkg = crate::model::Package::default();
        pkg.templates.insert("a.yaml".into(), "x: {{ uuidv4 }}\n".into());
        let mut v = Verification::default();
        parameter_usage(&pkg, &mut v);
        assert_eq!(v.warnings.len(), 1, "{:?}", v.warnings);
        assert!(v.warnings[0].starts_with("template a.yaml uses \"uuidv4\""));
    }
}
