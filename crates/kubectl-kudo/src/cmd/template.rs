//! `kubectl kudo template render`: render Go templates (text/template + Sprig, KUDO's function set)
//! exactly as the KUDO controller renders operator resources, without a cluster.
//!
//! Two modes share one engine:
//! * single: one template to stdout (what an operator developer uses to preview a resource);
//! * `--batch DIR`: the Go oracle's batch conventions (`NAME.tmpl` → `NAME.out` | `NAME.err`), so a
//!   directory of cases can be rendered by both implementations and diffed byte for byte.
//!
//! Exit codes (same as the oracle): 0 ok, 1 template parse/execution error, 2 unreadable file, bad
//! data or bad flag, 3 a batch case could not be run.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use kudo_template::data::{self, Format};
use kudo_template::{FuncEnv, FuncMap, Template, Value, kudo_funcs};

use crate::Io;

/// `kubectl kudo template …`: template tooling that needs no cluster.
#[derive(Args, Debug)]
pub struct TemplateArgs {
    #[command(subcommand)]
    pub command: TemplateCommand,
}

/// The `template` subcommands.
#[derive(Subcommand, Debug)]
pub enum TemplateCommand {
    /// Render a template (or a directory of templates) with KUDO's Go template engine.
    Render(RenderArgs),
}

const RENDER_HELP: &str = "\
Renders with the semantics of KUDO v0.19's renderer: Go text/template with missingkey=error and
Sprig's functions as KUDO exposes them (plus toYaml; minus env, expandenv, base, dir, clean, ext,
isAbs). Data is JSON or YAML; every number is a float64, as in KUDO. KUDO parameters are strings,
so --set values are always strings.

Exit status: 0 rendered; 1 template parse or execution error (message on stderr); 2 unreadable
file, bad data or bad --set; 3 (--batch) a case could not be run.

Examples:
  # Preview a resource of an operator package with instance data
  kubectl kudo template render templates/statefulset.yaml --data instance.yaml

  # KUDO-style parameters from the command line (dotted paths create maps)
  kubectl kudo template render galera_config.yaml \\
      --set Name=galera-instance --set OperatorName=galera \\
      --set StepName=firstboot_config --set Params.NODE_COUNT=3

  # Template from stdin
  echo '{{ .Params.NODE_COUNT | int | until }}' | kubectl kudo template render - --set Params.NODE_COUNT=3

  # Render every DIR/NAME.tmpl into NAME.out or NAME.err (the Go oracle's batch layout)
  kubectl kudo template render --batch tests/corpus/galera";

/// Flags of `template render`; one struct for both modes so they cannot drift apart.
#[derive(Args, Debug)]
#[command(after_long_help = RENDER_HELP)]
pub struct RenderArgs {
    /// Template file to render to stdout; `-` reads the template from stdin.
    #[arg(
        value_name = "TEMPLATE",
        required_unless_present = "batch",
        conflicts_with = "batch"
    )]
    pub template: Option<PathBuf>,

    /// Data file (JSON or YAML, chosen by extension unless --data-format); `-` reads stdin.
    /// Without it the template sees an empty map.
    #[arg(long, short = 'd', value_name = "FILE", conflicts_with = "batch")]
    pub data: Option<PathBuf>,

    /// Format of data files: by extension (.yaml/.yml are YAML, anything else JSON), or forced.
    #[arg(long, value_enum, default_value_t = DataFormat::Auto)]
    pub data_format: DataFormat,

    /// Set a string value at a dotted path of the data, after --data (e.g. Params.NODE_COUNT=3).
    /// Repeatable; missing maps on the path are created. In --batch mode applied to every case.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,

    /// Template name used in error messages [default: the template file's name; `tpl` for stdin
    /// and in --batch mode, as the Go oracle].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// Seed of the random functions (randAlpha, uuidv4, shuffle, genPrivateKey…), so renders
    /// are reproducible.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,

    /// Render every DIR/NAME.tmpl into DIR/NAME.out, or DIR/NAME.err (message + newline) on a
    /// template error. Data: DIR/NAME.{json,yaml,yml}, else DIR/data.{json,yaml,yml}, else {}.
    #[arg(long, value_name = "DIR")]
    pub batch: Option<PathBuf>,

    /// With --batch: no summary on stderr.
    #[arg(long, requires = "batch")]
    pub quiet: bool,
}

/// How data files are decoded; `auto` follows the extension, like the Go oracle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DataFormat {
    /// `.yaml`/`.yml` are YAML, anything else JSON.
    Auto,
    /// Go `encoding/json` typing (every number a float64).
    Json,
    /// `sigs.k8s.io/yaml` typing (YAML 1.1 scalars, converted to JSON).
    Yaml,
}

const EXIT_TEMPLATE: u8 = 1;
const EXIT_INPUT: u8 = 2;
const EXIT_BATCH: u8 = 3;

/// A problem with the inputs (not with the template): exit code 2.
#[derive(Debug)]
struct InputError(String);

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Runs a `template` subcommand. Template and input problems are reported here with their own exit
/// codes (1, 2, 3), so the caller only sees errors that are not about the user's inputs.
pub fn run(args: TemplateArgs, io: &mut Io<'_>) -> anyhow::Result<ExitCode> {
    match args.command {
        TemplateCommand::Render(r) => Ok(match &r.batch {
            Some(dir) => run_batch(&r, dir, io),
            None => run_single(&r, io),
        }),
    }
}

fn run_single(args: &RenderArgs, io: &mut Io<'_>) -> ExitCode {
    let Some(tpl_path) = &args.template else {
        let _ = writeln!(io.err, "kubectl-kudo: a TEMPLATE (or --batch DIR) is required");
        return ExitCode::from(EXIT_INPUT);
    };
    let from_stdin = tpl_path.as_os_str() == "-";
    let prepared = (|| -> Result<(String, Value), InputError> {
        if from_stdin && args.data.as_deref().is_some_and(|d| d.as_os_str() == "-") {
            return Err(InputError(
                "template and data cannot both be read from stdin".into(),
            ));
        }
        let text = read_input(tpl_path)?;
        let data = match &args.data {
            Some(p) => decode_data(p, &read_input(p)?, args.data_format)?,
            None => Value::map(BTreeMap::new()),
        };
        apply_sets(&data, &args.set)?;
        Ok((text, data))
    })();
    let (text, data) = match prepared {
        Ok(v) => v,
        Err(e) => {
            let _ = writeln!(io.err, "kubectl-kudo: {e}");
            return ExitCode::from(EXIT_INPUT);
        }
    };
    let name = args.name.clone().unwrap_or_else(|| {
        if from_stdin {
            "tpl".to_string()
        } else {
            tpl_path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "tpl".into())
        }
    });
    match render(&kudo_funcs(), &name, &text, &data, args.seed) {
        Ok(out) => {
            if let Err(e) = io.out.write_all(out.as_bytes()).and_then(|_| io.out.flush()) {
                let _ = writeln!(io.err, "kubectl-kudo: writing output: {e}");
                return ExitCode::from(EXIT_INPUT);
            }
            ExitCode::SUCCESS
        }
        Err(msg) => {
            let _ = writeln!(io.err, "{msg}");
            ExitCode::from(EXIT_TEMPLATE)
        }
    }
}

/// Parses and executes once; the error is the one-line message KUDO reports
/// (`error parsing template: …` / `error rendering template: …`). `funcs` is the process's one
/// function table, passed in so a batch looks it up once rather than per case.
fn render(funcs: &Arc<FuncMap>, name: &str, text: &str, data: &Value, seed: u64) -> Result<String, String> {
    let tpl = Template::parse(name, text, funcs).map_err(|e| e.to_string())?;
    let mut env = FuncEnv::with_seed(seed);
    tpl.execute(data, &mut env).map_err(|e| e.to_string())
}

fn read_input(path: &Path) -> Result<String, InputError> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| InputError(format!("reading stdin: {e}")))?;
        return Ok(s);
    }
    fs::read_to_string(path).map_err(|e| InputError(format!("{}: {e}", path.display())))
}

fn format_of(path: &Path, forced: DataFormat) -> Format {
    match forced {
        DataFormat::Auto => Format::of(path),
        DataFormat::Json => Format::Json,
        DataFormat::Yaml => Format::Yaml,
    }
}

/// Decodes data as the oracle and KUDO do: JSON with Go's `encoding/json` typing, YAML with
/// `sigs.k8s.io/yaml` (YAML 1.1 scalars, converted to JSON). `null`/empty documents become `{}`.
/// JSON goes straight into template values ([`data::decode_value_as`]): the intermediate
/// `serde_json::Value` tree was over half of a batch case's CPU time.
fn decode_data(path: &Path, raw: &str, forced: DataFormat) -> Result<Value, InputError> {
    data::decode_value_as(format_of(path, forced), raw)
        .map_err(|e| InputError(format!("data {}: {e}", path.display())))
}

/// Applies `--set a.b.c=value` (string values, maps created along the path) to decoded data. It
/// edits the template's values in place (their maps are shared and mutable, like Go maps), so
/// data is decoded once, with no JSON tree kept for `--set`.
fn apply_sets(data: &Value, sets: &[String]) -> Result<(), InputError> {
    for set in sets {
        let (key, value) = set.split_once('=').ok_or_else(|| {
            InputError(format!(
                "--set {set:?}: expected KEY=VALUE (e.g. Params.NODE_COUNT=3)"
            ))
        })?;
        if key.is_empty() || key.split('.').any(str::is_empty) {
            return Err(InputError(format!("--set {set:?}: empty key or path segment")));
        }
        let mut cur = data.clone();
        let segments: Vec<&str> = key.split('.').collect();
        for (i, seg) in segments.iter().enumerate() {
            let Value::Map(map) = &cur else {
                let parent = if i == 0 {
                    "the data".to_string()
                } else {
                    segments[..i].join(".")
                };
                return Err(InputError(format!("--set {set:?}: {parent} is not a map")));
            };
            let mut entries = map.entries.borrow_mut();
            if i + 1 == segments.len() {
                entries.insert((*seg).to_string(), Value::str(value));
                break;
            }
            let next = entries
                .entry((*seg).to_string())
                .or_insert_with(|| Value::map(BTreeMap::new()))
                .clone();
            drop(entries);
            cur = next;
        }
    }
    Ok(())
}

/// Raw data of a batch case; decoded anew for every case because templates can mutate their data.
struct DataSource {
    path: PathBuf,
    raw: String,
}

fn find_data(dir: &Path, stem: &str) -> Result<Option<DataSource>, InputError> {
    for ext in ["json", "yaml", "yml"] {
        let path = dir.join(format!("{stem}.{ext}"));
        match fs::read_to_string(&path) {
            Ok(raw) => return Ok(Some(DataSource { path, raw })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(InputError(format!("{}: {e}", path.display()))),
        }
    }
    Ok(None)
}

enum CaseResult {
    Ok,
    TemplateError,
}

/// What every case of one batch shares: read, decoded or looked up once per process.
struct Batch<'a> {
    args: &'a RenderArgs,
    dir: &'a Path,
    /// `DIR/data.*`, the data of cases without their own file.
    shared: Option<DataSource>,
    /// Template name in error messages.
    name: String,
    /// The function table: one per process, not one per case.
    funcs: Arc<FuncMap>,
}

fn run_batch(args: &RenderArgs, dir: &Path, io: &mut Io<'_>) -> ExitCode {
    let start = Instant::now();
    let mut tmpls: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "tmpl") && p.is_file())
            .collect(),
        Err(e) => {
            let _ = writeln!(io.err, "kubectl-kudo: {}: {e}", dir.display());
            return ExitCode::from(EXIT_BATCH);
        }
    };
    tmpls.sort();
    let shared = match find_data(dir, "data") {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(io.err, "kubectl-kudo: {e}");
            return ExitCode::from(EXIT_BATCH);
        }
    };
    let batch = Batch {
        args,
        dir,
        shared,
        name: args.name.clone().unwrap_or_else(|| "tpl".to_string()),
        funcs: kudo_funcs(),
    };
    let (mut n_ok, mut n_err, mut n_fail) = (0usize, 0usize, 0usize);
    for tmpl in &tmpls {
        match batch_case(&batch, tmpl) {
            Ok(CaseResult::Ok) => n_ok += 1,
            Ok(CaseResult::TemplateError) => n_err += 1,
            Err(e) => {
                let _ = writeln!(io.err, "kubectl-kudo: {}: {e}", tmpl.display());
                n_fail += 1;
            }
        }
    }
    if !args.quiet {
        let _ = writeln!(
            io.err,
            "kubectl-kudo: {} templates: {n_ok} ok, {n_err} template errors, {n_fail} failures in {:.3}s",
            tmpls.len(),
            start.elapsed().as_secs_f64()
        );
    }
    if n_fail > 0 {
        ExitCode::from(EXIT_BATCH)
    } else {
        ExitCode::SUCCESS
    }
}

fn batch_case(batch: &Batch<'_>, tmpl: &Path) -> Result<CaseResult, InputError> {
    let (args, dir) = (batch.args, batch.dir);
    let stem = tmpl
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let out_path = dir.join(format!("{stem}.out"));
    let err_path = dir.join(format!("{stem}.err"));
    for p in [&out_path, &err_path] {
        match fs::remove_file(p) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(InputError(format!("{}: {e}", p.display()))),
        }
    }
    let text = fs::read_to_string(tmpl).map_err(|e| InputError(e.to_string()))?;
    let own = find_data(dir, &stem)?;
    let data = match own.as_ref().or(batch.shared.as_ref()) {
        Some(src) => decode_data(&src.path, &src.raw, args.data_format)?,
        None => Value::map(BTreeMap::new()),
    };
    apply_sets(&data, &args.set)?;
    let write = |path: &Path, bytes: &[u8]| {
        fs::write(path, bytes).map_err(|e| InputError(format!("{}: {e}", path.display())))
    };
    match render(&batch.funcs, &batch.name, &text, &data, args.seed) {
        Ok(out) => {
            write(&out_path, out.as_bytes())?;
            Ok(CaseResult::Ok)
        }
        Err(msg) => {
            write(&err_path, format!("{msg}\n").as_bytes())?;
            Ok(CaseResult::TemplateError)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The template view of a JSON literal, compared by `Debug` (map contents, Go types).
    fn val(v: serde_json::Value) -> Value {
        Value::from_json(&v)
    }

    #[test]
    fn set_creates_maps_and_sets_strings() {
        let d = val(serde_json::json!({"Name": "x", "Params": {"A": "1"}}));
        apply_sets(
            &d,
            &[
                "Params.NODE_COUNT=3".into(),
                "New.Deep.Key=a=b".into(),
                "Name=".into(),
            ],
        )
        .unwrap();
        let want = val(
            serde_json::json!({"Name": "", "Params": {"A": "1", "NODE_COUNT": "3"}, "New": {"Deep": {"Key": "a=b"}}}),
        );
        assert_eq!(format!("{d:?}"), format!("{want:?}"));
    }

    #[test]
    fn set_rejects_bad_paths() {
        let d = val(serde_json::json!({"Name": "x", "Nil": null}));
        assert!(
            apply_sets(&d, &["Name.Sub=1".into()])
                .unwrap_err()
                .0
                .contains("Name is not a map")
        );
        assert!(
            apply_sets(&d, &["novalue".into()])
                .unwrap_err()
                .0
                .contains("KEY=VALUE")
        );
        assert!(
            apply_sets(&d, &["a..b=1".into()])
                .unwrap_err()
                .0
                .contains("empty")
        );
        assert!(
            apply_sets(&d, &["Nil.a=1".into()])
                .unwrap_err()
                .0
                .contains("Nil is not a map")
        );
        let list = val(serde_json::json!([1]));
        assert!(
            apply_sets(&list, &["a=1".into()])
                .unwrap_err()
                .0
                .contains("the data is not a map")
        );
    }

    #[test]
    fn yaml_uses_yaml11_and_json_typing() {
        let v = kudo_template::data::yaml_to_json("a: 3\nb: yes\nc: 0755\nd: '3'\n1: one\ne: ~\n").unwrap();
        assert_eq!(
            v,
            serde_json::json!({"a": 3, "b": true, "c": 493, "d": "3", "1": "one", "e": null})
        );
        assert_eq!(
            kudo_template::data::yaml_to_json("").unwrap(),
            serde_json::Value::Null
        );
        assert!(kudo_template::data::yaml_to_json("a: .nan\n").is_err());
    }

    #[test]
    fn data_format_by_extension() {
        assert_eq!(format_of(Path::new("x.YAML"), DataFormat::Auto), Format::Yaml);
        assert_eq!(format_of(Path::new("x.yml"), DataFormat::Auto), Format::Yaml);
        assert_eq!(format_of(Path::new("x.txt"), DataFormat::Auto), Format::Json);
        assert_eq!(format_of(Path::new("x.json"), DataFormat::Yaml), Format::Yaml);
        assert_eq!(format_of(Path::new("x.yaml"), DataFormat::Json), Format::Json);
    }
}
