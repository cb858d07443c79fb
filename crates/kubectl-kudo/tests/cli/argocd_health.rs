//! The Argo CD health checks under `deploy/argocd/resource_customizations/` (Argo CD's own layout:
//! `<group>/<Kind>/health.lua`, `health_test.yaml`, `testdata/`), run case by case with a real
//! Lua 5.1 interpreter (Debian's `lua5.1`; Argo CD runs gopher-lua, a Lua 5.1).
//!
//! The harness does what Argo CD's `util/lua` does for a check registered in `argocd-cm`: the
//! object (the test's YAML, decoded to JSON) becomes the global table `obj` — maps keyed by
//! string, lists indexed from 1, JSON nulls absent (gopher-lua sets no key and appends nothing
//! for nil), numbers as Lua numbers — and the script runs as one chunk whose return value is the
//! health table. The YAML → JSON → Lua-table conversion is a small Rust shim ([`lua_value`]) that
//! writes the table as a Lua constructor; the Lua driver ([`DRIVER`]) runs the script with only
//! the libraries Argo CD opens for such scripts (base, table, a safe `os`; no `string`, `io`, `math`
//! or `debug`, and no string methods), then prints the status and message. Each case's status and
//! message must equal its `healthStatus`, as Argo CD's own test of its built-in checks requires.
//!
//! Without `lua5.1` the test says so and passes, except under `CI=true` (`.ci/run` installs it),
//! where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Runs `arg[1]` (a health.lua) with `obj` set, in Argo CD's environment for argocd-cm scripts.
const DRIVER: &str = r#"
local source = assert(io.open(arg[1], "rb")):read("*a")
local chunk = assert(loadstring(source, "health.lua"))
local env = { obj = obj, table = table }
for _, name in ipairs({ "assert", "collectgarbage", "error", "getfenv", "getmetatable", "ipairs",
    "load", "loadstring", "next", "pairs", "pcall", "print", "rawequal", "rawget", "rawset",
    "select", "setfenv", "setmetatable", "tonumber", "tostring", "type", "unpack", "xpcall",
    "require", "module", "_VERSION" }) do
  env[name] = _G[name]
end
env.os = { time = os.time, date = os.date, clock = os.clock, difftime = os.difftime }
env._G = env
setfenv(chunk, env)
local write = io.write
-- No string library: not even its methods on string values.
getmetatable("").__index = nil
local ok, hs = pcall(chunk)
if not ok then
  write("ERROR\0", tostring(hs), "\0")
elseif type(hs) ~= "table" then
  write("NOT A TABLE\0", type(hs), "\0")
else
  write(tostring(hs.status), "\0", hs.message == nil and "" or tostring(hs.message), "\0")
end
"#;

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The Argo CD health (status, message) of an Instance as `kudo.dev/Instance/health.lua` judges
/// it; `None` without `lua5.1` outside CI (see [`lua51`]).
pub(crate) fn instance_health(obj: &Value) -> Option<(String, String)> {
    static LUA: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let lua = LUA.get_or_init(lua51).as_ref()?;
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = customizations().join("kudo.dev/Instance/health.lua");
    Some(run(lua, &script, obj, tmp.path()))
}

fn lua51() -> Option<PathBuf> {
    let found = Command::new("lua5.1")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some(PathBuf::from("lua5.1"));
    }
    let msg = "lua5.1 is not installed (apt-get install lua5.1; .ci/run installs it)";
    assert!(!in_ci(), "{msg}: the Argo CD health checks must be tested in CI");
    eprintln!("SKIPPED (not in CI): {msg}");
    None
}

fn customizations() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/argocd/resource_customizations")
}

/// `v` as a Lua expression, as Argo CD's `decodeValue` builds it (see the module docs).
fn lua_value(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("nil"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.push_str(&i.to_string()),
            None => out.push_str(&format!("{:?}", n.as_f64().unwrap_or(0.0))),
        },
        Value::String(s) => lua_string(s, out),
        Value::Array(items) => {
            out.push('{');
            for item in items.iter().filter(|i| !i.is_null()) {
                lua_value(item, out);
                out.push(',');
            }
            out.push('}');
        }
        Value::Object(map) => {
            out.push('{');
            for (k, item) in map.iter().filter(|(_, i)| !i.is_null()) {
                out.push('[');
                lua_string(k, out);
                out.push_str("]=");
                lua_value(item, out);
                out.push(',');
            }
            out.push('}');
        }
    }
}

/// A Lua 5.1 string literal: quotes and backslashes escaped, control bytes as `\ddd`.
fn lua_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\{:03}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Runs `script` on `obj` with the driver: `(status, message)` as the script returned them.
fn run(lua: &Path, script: &Path, obj: &Value, tmp: &Path) -> (String, String) {
    let mut program = String::from("obj = ");
    lua_value(obj, &mut program);
    program.push('\n');
    program.push_str(DRIVER);
    let file = tmp.join("case.lua");
    std::fs::write(&file, program).expect("write the driver");
    let out = Command::new(lua)
        .arg(&file)
        .arg(script)
        .output()
        .expect("run lua5.1");
    assert!(
        out.status.success(),
        "lua5.1 failed on {}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    let mut parts = text.split('\0');
    let status = parts.next().unwrap_or_default().to_string();
    let message = parts.next().unwrap_or_default().to_string();
    (status, message)
}

/// Every `health_test.yaml` below `root`, depth first.
fn test_files(root: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            test_files(&p, out);
        } else if p.file_name().is_some_and(|n| n == "health_test.yaml") {
            out.push(p);
        }
    }
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_argocd_health_test_case_passes_in_lua_5_1() {
    let Some(lua) = lua51() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut files = Vec::new();
    test_files(&customizations(), &mut files);
    let dirs: Vec<String> = files
        .iter()
        .map(|f| {
            let dir = f.parent().unwrap();
            dir.strip_prefix(customizations()).unwrap().display().to_string()
        })
        .collect();
    assert_eq!(
        dirs,
        ["_.kudo.dev/_", "kudo.dev/Instance"],
        "the checks in Argo CD's layout"
    );
    let mut ran = 0;
    for file in &files {
        let dir = file.parent().unwrap();
        let script = dir.join("health.lua");
        let tests = yaml(file);
        let cases = tests["tests"].as_array().expect("tests: a list");
        assert!(!cases.is_empty(), "{}: no cases", file.display());
        for case in cases {
            let input = dir.join(case["inputPath"].as_str().expect("inputPath"));
            let want = &case["healthStatus"];
            let got = run(&lua, &script, &yaml(&input), tmp.path());
            assert_eq!(
                (got.0.as_str(), got.1.as_str()),
                (
                    want["status"].as_str().unwrap_or_default(),
                    want["message"].as_str().unwrap_or_default()
                ),
                "{}",
                input.display()
            );
            ran += 1;
        }
        // Every testdata file is a case.
        let listed: Vec<String> = cases
            .iter()
            .map(|c| c["inputPath"].as_str().unwrap().to_string())
            .collect();
        for entry in std::fs::read_dir(dir.join("testdata")).expect("testdata") {
            let name = format!("testdata/{}", entry.unwrap().file_name().to_string_lossy());
            assert!(listed.contains(&name), "{}: {name} is no case", file.display());
        }
    }
    eprintln!("{ran} Argo CD health cases passed in lua5.1");
}

#[test]
fn the_lua_shim_builds_argo_cds_table() {
    let Some(lua) = lua51() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = tmp.path().join("probe.lua");
    std::fs::write(
        &script,
        r#"local hs = {}
hs.status = "Healthy"
local upper = pcall(function() return ("x"):upper() end)
hs.message = obj.a[1] .. "," .. #obj.a .. "," .. tostring(obj.n) .. "," .. tostring(obj.gone)
  .. "," .. tostring(obj.t) .. "," .. obj.s .. "," .. tostring(string) .. "," .. tostring(upper)
return hs
"#,
    )
    .unwrap();
    let obj = serde_json::json!({"a": ["x", null, "y"], "n": 3, "gone": null, "t": true, "s": "q\"\\\n"});
    let (status, message) = run(&lua, &script, &obj, tmp.path());
    assert_eq!(status, "Healthy");
    assert_eq!(message, "x,2,3,nil,true,q\"\\\n,nil,false");
}
