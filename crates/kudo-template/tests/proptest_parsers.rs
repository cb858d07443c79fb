//! Bounded property tests of the template engine's untrusted-input parsers: the
//! lexer/parser (any text, and soups of template tokens), execution of whatever parses, and the
//! YAML/JSON data decoder. Properties: no panic, no stack overflow, bounded heap per input
//! (`support/bounded_fuzz.rs`). Case counts are sized for CI; `PROPTEST_CASES=100000` runs longer
//! locally (every property here then takes that many cases).

#[path = "support/bounded_fuzz.rs"]
mod bounded_fuzz;

use bounded_fuzz::{MAX_PEAK, bounded, config};
use kudo_template::{FuncEnv, Template, Value, data, kudo_funcs};
use proptest::prelude::*;

const TOKENS: &[&str] = &[
    "{{",
    "}}",
    "{{- ",
    " -}}",
    "(",
    ")",
    "|",
    " ",
    "\n",
    ".",
    "$",
    "$x",
    ":=",
    "=",
    ",",
    "\"s\"",
    "`r`",
    "'c'",
    "'",
    "\"",
    "0",
    "-1",
    "1.5",
    "0x1F",
    "1e3",
    "1i",
    "true",
    "nil",
    ".Name",
    ".a.b",
    "$.x",
    "if",
    "else",
    "end",
    "range",
    "with",
    "define",
    "template",
    "block",
    "break",
    "continue",
    "\"t\"",
    "/*",
    "*/",
    "{{/* c */}}",
    "len",
    "index",
    "printf",
    "\"%v\"",
    "toYaml",
    "default",
    "list",
    "dict",
    "until",
    "3",
    "eq",
    "and",
    "or",
    "not",
    "\\",
    "é",
    "}",
    "{",
];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..80).prop_map(|v| v.concat())
}

fn data() -> Value {
    Value::from_json(&serde_json::json!({
        "Name": "n", "a": {"b": [1, "x", null]}, "Params": {"N": "3"}, "x": 1.5
    }))
}

/// Parses and, when that succeeds, executes: neither may panic or hold unbounded memory.
fn parse_and_run(text: &str) {
    let funcs = kudo_funcs();
    bounded("parse+execute", MAX_PEAK, || {
        if let Ok(t) = Template::parse("tpl", text, &funcs) {
            let _ = t.execute(&data(), &mut FuncEnv::with_seed(0));
            // Node printing (Go's `String()`) is what error messages quote.
            for n in &t.tree().root {
                std::hint::black_box(n.to_string());
            }
        }
    });
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn any_text_parses_or_fails_cleanly(text in any::<String>()) {
        parse_and_run(&text);
        parse_and_run(&format!("{{{{{text}}}}}"));
    }

    #[test]
    fn token_soups_parse_or_fail_cleanly(text in token_soup()) {
        parse_and_run(&text);
        parse_and_run(&format!("{{{{ {text} }}}}"));
    }

    #[test]
    fn yaml_and_json_data_decode_or_fail_cleanly(text in yaml_soup()) {
        bounded("yaml data", MAX_PEAK, || {
            if let Ok(v) = data::yaml_to_json(&text) {
                let _ = Value::from_json(&v);
            }
            let _ = data::json(&text);
        });
    }
}

fn yaml_soup() -> impl Strategy<Value = String> {
    const Y: &[&str] = &[
        "a",
        ":",
        ": ",
        "- ",
        "\n",
        "  ",
        "&x ",
        "*x",
        "<<: ",
        "~",
        "!!str ",
        "!!int ",
        "!!binary ",
        "!foo ",
        "\"",
        "'",
        "[",
        "]",
        "{",
        "}",
        ",",
        "|",
        ">",
        "#",
        "? ",
        "---\n",
        "...\n",
        "%YAML 1.1\n",
        "0x",
        "07",
        "1e9",
        ".nan",
        "yes",
        "null",
        "é",
        "\t",
        "\\",
        "@",
        "`",
    ];
    prop::collection::vec(prop::sample::select(Y), 0..60).prop_map(|v| v.concat())
}

/// Deep nesting must be refused with a message, not overflow the stack.
#[test]
fn deep_nesting_is_refused() {
    let funcs = kudo_funcs();
    for text in [
        format!("{{{{{}1{}}}}}", "(".repeat(100_000), ")".repeat(100_000)),
        "{{if 1}}".repeat(100_000),
        "{{range .}}".repeat(50_000),
        format!("{{{{define \"a\"}}}}{}", "{{with 1}}".repeat(50_000)),
    ] {
        let r = bounded("deep nesting", MAX_PEAK, || Template::parse("tpl", &text, &funcs));
        let msg = r.expect_err("nesting 50,000 deep must not parse").to_string();
        assert!(
            msg.contains("nesting exceeds") || msg.contains("unexpected EOF"),
            "{msg}"
        );
    }
}

/// A YAML alias bomb ("billion laughs") must fail or stay small, not expand to gigabytes.
#[test]
fn yaml_alias_bomb_is_bounded() {
    let mut doc = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let p = i - 1;
        doc.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let r = bounded("alias bomb", MAX_PEAK, || data::yaml_to_json(&doc));
    assert!(r.is_err(), "a 10^12-element alias expansion must be refused");
}
