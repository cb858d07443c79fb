//! Engine conformance tests. Every expected string in the tables below was produced by the Go
//! oracle (`/work/shared/go-template-oracle/bin/gotmpl-oracle --profile kudo --name
//! deployment.yaml`, Go 1.19.8 text/template), not by this crate.
//!
//! The engine tests use a small function map whose functions have the same Go signatures and (for
//! the inputs used here) the same results as Sprig's, so they test the engine, not the Sprig port.

use std::collections::BTreeMap;
use std::sync::Arc;

use kudo_template::parse::{Arg, Node};
use kudo_template::{
    ElemType, Error, FuncEnv, FuncError, FuncMap, ParamType as P, Signature, Template, Value,
};

const DATA: &str =
    r#"{"a":"str","n":null,"m":{"x":1},"l":[1,null,"s"],"e":[],"big":1000000,"small":0.00001,"f":3.25}"#;

fn funcs() -> Arc<FuncMap> {
    let mut m = FuncMap::new();
    m.insert("upper", Signature::new(&[P::String]), |_, a| {
        Ok(Value::str(a[0].as_str().unwrap_or_default().to_uppercase()))
    });
    m.insert("until", Signature::new(&[P::Int]), |_, a| {
        let n = match a[0] {
            Value::Int(i) => i,
            _ => 0,
        };
        Ok(Value::typed_list(
            ElemType::Int,
            (0..n.max(0)).map(Value::Int).collect(),
        ))
    });
    m.insert("fail", Signature::new(&[P::String]), |_, a| {
        Err(FuncError::new(a[0].as_str().unwrap_or_default()))
    });
    m.insert("dict", Signature::variadic(&[], P::Any), |_, a| {
        let mut m = BTreeMap::new();
        for c in a.chunks(2) {
            m.insert(
                kudo_template::gofmt::sprint(&c[0]),
                c.get(1).cloned().unwrap_or(Value::Nil),
            );
        }
        Ok(Value::map(m))
    });
    m.insert("list", Signature::variadic(&[], P::Any), |_, a| {
        Ok(Value::list(a.to_vec()))
    });
    Arc::new(m)
}

fn data() -> Value {
    Value::from_json(&serde_json::from_str(DATA).expect("test data is JSON"))
}

fn run_with(tpl: &str, data: &Value) -> Result<String, String> {
    let t = Template::parse("deployment.yaml", tpl, &funcs()).map_err(|e| e.to_string())?;
    t.execute(data, &mut FuncEnv::with_seed(0))
        .map_err(|e| e.to_string())
}

fn run(tpl: &str) -> Result<String, String> {
    run_with(tpl, &data())
}

fn check(cases: &[(&str, Result<&str, &str>)]) {
    let mut failures = Vec::new();
    for (tpl, want) in cases {
        let got = run(tpl);
        let want = want.map(str::to_string).map_err(str::to_string);
        if got != want {
            failures.push(format!("template: {tpl:?}\n  want: {want:?}\n  got:  {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from Go:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

use Result::{Err, Ok};

/// Field access, nil handling, builtins, control structures, variables, templates.
#[test]
fn core_semantics() {
    check(&[
        (
            r#"{{ .a.b }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:5: executing "deployment.yaml" at <.a.b>: can't evaluate field b in type interface {}"#,
            ),
        ),
        (
            r#"{{ $x := .a }}{{ $x.b }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:19: executing "deployment.yaml" at <$x.b>: can't evaluate field b in type string"#,
            ),
        ),
        (
            r#"{{ (.a).b }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:4: executing "deployment.yaml" at <.a>: can't evaluate field b in type string"#,
            ),
        ),
        (
            r#"{{ .n.b }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:5: executing "deployment.yaml" at <.n.b>: nil pointer evaluating interface {}.b"#,
            ),
        ),
        (r#"{{ .n }}"#, Ok(r#"<no value>"#)),
        (r#"{{ range .l }}{{ . }}|{{ end }}"#, Ok(r#"1|<no value>|s|"#)),
        (
            r#"{{ range .l }}{{ .x }}{{ end }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:17: executing "deployment.yaml" at <.x>: can't evaluate field x in type interface {}"#,
            ),
        ),
        (
            r#"{{ len nil }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <len nil>: error calling len: reflect: call of reflect.Value.Type on zero Value"#,
            ),
        ),
        (r#"{{ html nil }}"#, Ok(r#"&lt;no value&gt;"#)),
        (
            r#"{{ .m.x.y }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:5: executing "deployment.yaml" at <.m.x.y>: can't evaluate field y in type interface {}"#,
            ),
        ),
        (
            r#"{{ template "x" }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:12: executing "deployment.yaml" at <{{template "x"}}>: template "x" not defined"#,
            ),
        ),
        (r#"{{ printf "%v" .n }}"#, Ok(r#"<nil>"#)),
        (
            r#"{{ nil }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <nil>: nil is not a command"#,
            ),
        ),
        (
            r#"{{ (index .l 1).b }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:13: executing "deployment.yaml" at <1>: nil data; no entry for key "b""#,
            ),
        ),
        (
            r#"{{ eq .l .l }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <eq .l .l>: error calling eq: non-comparable type [%!s(float64=1) <nil> s]: []interface {}"#,
            ),
        ),
        (
            r#"{{ eq .m .l }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <eq .m .l>: error calling eq: non-comparable types map[x:%!s(float64=1)]: map[string]interface {}, []interface {}: [1 <nil> s]"#,
            ),
        ),
        (
            r#"{{ eq 1 1.0 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <eq 1 1.0>: error calling eq: incompatible types for comparison"#,
            ),
        ),
        (
            r#"{{ upper .n }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:9: executing "deployment.yaml" at <.n>: wrong type for value; expected string; got interface {}"#,
            ),
        ),
        (
            r#"{{ .n | upper }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:8: executing "deployment.yaml" at <upper>: invalid value; expected string"#,
            ),
        ),
        (
            r#"{{ upper nil }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:9: executing "deployment.yaml" at <nil>: cannot assign nil to string"#,
            ),
        ),
        (
            r#"{{ upper 3 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:9: executing "deployment.yaml" at <3>: expected string; found 3"#,
            ),
        ),
        (
            r#"{{ .m.x | upper }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:10: executing "deployment.yaml" at <upper>: wrong type for value; expected string; got float64"#,
            ),
        ),
        (
            r#"{{ index "abc" 3 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index "abc" 3>: error calling index: reflect: string index out of range"#,
            ),
        ),
        (
            r#"{{ index .l 3 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index .l 3>: error calling index: reflect: slice index out of range"#,
            ),
        ),
        (
            r#"{{ index .l 5 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index .l 5>: error calling index: index out of range: 5"#,
            ),
        ),
        (
            r#"{{ index .m 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index .m 1>: error calling index: value has type int; should be string"#,
            ),
        ),
        (r#"{{ index .m "zz" }}"#, Ok(r#"<no value>"#)),
        (
            r#"{{ 08 }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: integer overflow: "08""#),
        ),
        (r#"{{ 1_000 }}"#, Ok(r#"1000"#)),
        (r#"{{ 0x1p4 }}"#, Ok(r#"16"#)),
        (r#"{{ printf "%T" 0x10 }}"#, Ok(r#"int"#)),
        (
            r#"{{ and }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <and>: wrong number of args for and: want at least 1 got 0"#,
            ),
        ),
        (
            r#"{{ ne 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <ne>: wrong number of args for ne: want 2 got 1"#,
            ),
        ),
        (
            r#"{{ call .a }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <call .a>: error calling call: non-function of type string"#,
            ),
        ),
        (
            r#"{{ range 5 }}{{ end }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:9: executing "deployment.yaml" at <5>: range can't iterate over 5"#,
            ),
        ),
        (
            r#"{{ printf "%.3g|%g|%#v|%+d|%x|%05.1f|%-4d|%U" 1.0 1e21 .l 5 "hi" 3.14159 7 65 }}"#,
            Ok(r#"1|1e+21|[]interface {}{1, interface {}(nil), "s"}|+5|6869|003.1|7   |U+0041"#),
        ),
        (r#"a {{- "b" -}} c"#, Ok(r#"abc"#)),
        (
            r#"a {{-"b"}} c"#,
            Err(r#"error parsing template: template: deployment.yaml:1: illegal number syntax: "-""#),
        ),
        (r#"{{ if .a }}yes{{ else }}no{{ end }}"#, Ok(r#"yes"#)),
        (
            r#"{{ if .n }}yes{{ else if .a }}elif{{ else }}no{{ end }}"#,
            Ok(r#"elif"#),
        ),
        (
            r#"{{ range $i, $v := .l }}{{ $i }}={{ $v }};{{ end }}"#,
            Ok(r#"0=1;1=<no value>;2=s;"#),
        ),
        (
            r#"{{ range $k, $v := .m }}{{ $k }}={{ $v }};{{ end }}"#,
            Ok(r#"x=1;"#),
        ),
        (r#"{{ range .e }}x{{ else }}empty{{ end }}"#, Ok(r#"empty"#)),
        (r#"{{ with .a }}{{ . }}{{ end }}"#, Ok(r#"str"#)),
        (r#"{{ with .n }}{{ . }}{{ else }}none{{ end }}"#, Ok(r#"none"#)),
        (
            r#"{{ define "x" }}X{{ . }}{{ end }}{{ template "x" .a }}"#,
            Ok(r#"Xstr"#),
        ),
        (r#"{{ block "b" .a }}B{{ . }}{{ end }}"#, Ok(r#"Bstr"#)),
        (
            r#"{{ range .l }}{{ if eq (printf "%v" .) "s" }}{{ break }}{{ end }}{{ . }}{{ end }}"#,
            Ok(r#"1<no value>"#),
        ),
        (
            r#"{{ range .l }}{{ if not . }}{{ continue }}{{ end }}{{ . }}{{ end }}"#,
            Ok(r#"1s"#),
        ),
        (
            r#"{{ break }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: {{break}} outside {{range}}"#),
        ),
        (
            r#"{{ if }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: missing value for if"#),
        ),
        (
            r#"{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected {{end}}"#),
        ),
        (
            r#"{{ else }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected {{else}}"#),
        ),
        (
            r#"{{ if true }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected EOF"#),
        ),
        (
            r#"{{ $x }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: undefined variable "$x""#),
        ),
        (
            r#"{{ foo }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: function "foo" not defined"#),
        ),
        (
            r#"{{ "abc"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unterminated quoted string"#),
        ),
        (
            r#"{{ .a"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unclosed action"#),
        ),
        (
            r#"{{ 'a' }} {{ '\
' }} {{ printf "%c" 'x' }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unterminated character constant"#),
        ),
        (
            r#"{{ /* c */ }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected "/" in command"#),
        ),
        (r#"{{/* c */}}x"#, Ok(r#"x"#)),
        (r#"x {{- /* c */ -}} y"#, Ok(r#"xy"#)),
        (
            r#"{{ 1 | 2 }}"#,
            Err(
                r#"error parsing template: template: deployment.yaml:1: non executable command in pipeline stage 2"#,
            ),
        ),
        (r#"{{ .a | printf "%s-%s" "x" }}"#, Ok(r#"x-str"#)),
        (r#"{{ $x := 1 }}{{ $x = 2 }}{{ $x }}"#, Ok(r#"2"#)),
        (
            r#"{{ println 1 2 "a" "b" 3 }}"#,
            Ok(r#"1 2 a b 3
"#),
        ),
        (r#"{{ print 1 2 "a" "b" 3 nil }}"#, Ok(r#"1 2ab3 <nil>"#)),
        (
            r#"{{ .m.nokey }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:5: executing "deployment.yaml" at <.m.nokey>: map has no entry for key "nokey""#,
            ),
        ),
        (
            r#"{{ .nokey }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <.nokey>: map has no entry for key "nokey""#,
            ),
        ),
        (
            r#"{{ lt 1 2 }} {{ le 2 2 }} {{ gt "b" "a" }} {{ ge 1.5 2.5 }}"#,
            Ok(r#"true true true false"#),
        ),
        (
            r#"{{ lt 1 2.0 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <lt 1 2.0>: error calling lt: incompatible types for comparison"#,
            ),
        ),
        (
            r#"{{ lt .l 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <lt .l 1>: error calling lt: invalid type for comparison"#,
            ),
        ),
        (r#"{{ eq "a" "b" "a" }}"#, Ok(r#"true"#)),
        (r#"{{ eq .n nil }}"#, Ok(r#"true"#)),
        (
            r#"{{ not 0 }} {{ and 1 0 }} {{ or 0 "" "x" }} {{ and 1 2 }}"#,
            Ok(r#"true 0 x 2"#),
        ),
        (r#"{{ len .l }} {{ len .m }} {{ len "héllo" }}"#, Ok(r#"3 1 6"#)),
        (
            r#"{{ len 3 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <len 3>: error calling len: len of type int"#,
            ),
        ),
        (r#"{{ index .m "x" }}"#, Ok(r#"1"#)),
        (
            r#"{{ html "<a href='x'>&\"" }} {{ js "a'b\"<>=\\\\" }} {{ urlquery "a b&c=d/é" }}"#,
            Ok(r#"&lt;a href=&#39;x&#39;&gt;&amp;&#34; a\'b\"\u003C\u003E\u003D\\\\ a+b%26c%3Dd%2F%C3%A9"#),
        ),
        (
            r#"{{ 1e6 }} {{ 1.5 }} {{ 0.00001 }} {{ 123456.7 }}"#,
            Ok(r#"1e+06 1.5 1e-05 123456.7"#),
        ),
        (r#"{{ .big }} {{ .small }} {{ .f }}"#, Ok(r#"1e+06 1e-05 3.25"#)),
        (
            r#"{{ -5 }} {{ +5 }} {{ 0x1F }} {{ 0o17 }} {{ 017 }} {{ 0b101 }}"#,
            Ok(r#"-5 5 31 15 15 5"#),
        ),
        (
            r#"{{ 9223372036854775808 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <9223372036854775808>: 9223372036854775808 overflows int"#,
            ),
        ),
        (
            r#"{{ 1.5.x }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected . after term "1.5""#),
        ),
        (
            r#"{{ .a.b.c }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:5: executing "deployment.yaml" at <.a.b.c>: can't evaluate field b in type interface {}"#,
            ),
        ),
        (r#"{{ $.a }}"#, Ok(r#"str"#)),
        (
            r#"{{ range $i, $v := .l }}{{ $.a }}{{ end }}"#,
            Ok(r#"strstrstr"#),
        ),
        (r#"{{ with $x := .a }}{{ $x }}{{ end }}"#, Ok(r#"str"#)),
        (r#"{{ range $x := .l }}{{ $x }}{{ end }}"#, Ok(r#"1<no value>s"#)),
        (
            r#"{{ range $x, $y, $z := .l }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: too many declarations in range"#),
        ),
    ]);
}

/// Parse errors with Go's messages and lines; `printf` verbs, flags and error forms.
#[test]
fn parse_errors_and_fmt_verbs() {
    check(&[
        (
            r#"{{ if 1 }}
{{ end }"#,
            Err(r#"error parsing template: template: deployment.yaml:2: unexpected "}" in end"#),
        ),
        (
            r#"{{ range .l }}{{ else }}{{ else }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: expected end; found {{else}}"#),
        ),
        (
            r#"{{ with .a }}{{ else with .b }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected <with> in else"#),
        ),
        (
            r#"{{ if .a }}{{ else if }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: missing value for if"#),
        ),
        (
            r#"{{ define "a" }}{{ end }}{{ define "a" }}x{{ end }}"#,
            Ok(r#""#),
        ),
        (
            r#"{{ define "a" }}y{{ end }}{{ define "a" }}x{{ end }}"#,
            Err(
                r#"error parsing template: template: deployment.yaml:1: template: multiple definition of template "a""#,
            ),
        ),
        (
            r#"{{ define a }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected "a" in define clause"#),
        ),
        (
            r#"{{ template a }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected "a" in template clause"#),
        ),
        (
            r#"{{ template "a" 1 2 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:12: executing "deployment.yaml" at <{{template "a" 1 2}}>: template "a" not defined"#,
            ),
        ),
        (
            r#"{{ (1 }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unclosed left paren"#),
        ),
        (
            r#"{{ 1) }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected ")" in command"#),
        ),
        (
            r#"{{ ( ) }}"#,
            Err(
                r#"error parsing template: template: deployment.yaml:1: missing value for parenthesized pipeline"#,
            ),
        ),
        (
            r#"{{ | }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected "|" in command"#),
        ),
        (r#"{{ .a | }}"#, Ok(r#"str"#)),
        (
            r#"{{ $x := }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: missing value for command"#),
        ),
        (
            r#"{{ $x, $y := 1 }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: too many declarations in command"#),
        ),
        (
            r#"{{ range $x, $y := .l }}{{ $x }}{{ end }}{{ $x }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: undefined variable "$x""#),
        ),
        (
            r#"{{ .a.b c }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: function "c" not defined"#),
        ),
        (
            r#"{{ .a 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <.a>: a is not a method but has arguments"#,
            ),
        ),
        (
            r#"{{ "a" 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <"a">: can't give argument to non-function "a""#,
            ),
        ),
        (
            r#"{{ $ 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <$>: can't give argument to non-function $"#,
            ),
        ),
        (
            r#"{{ (1) 2 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <(1) 2>: can't give argument to non-function 1"#,
            ),
        ),
        (
            r#"{{ 1 | .a }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:7: executing "deployment.yaml" at <.a>: a is not a method but has arguments"#,
            ),
        ),
        (
            r#"{{ .m.x 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:5: executing "deployment.yaml" at <.m.x>: x is not a method but has arguments"#,
            ),
        ),
        (
            r#"{{ "a".b }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected . after term "\"a\"""#),
        ),
        (
            r#"{{ nil.b }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected . after term "nil""#),
        ),
        (
            r#"{{ (nil).b }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:4: executing "deployment.yaml" at <nil>: nil is not a command"#,
            ),
        ),
        (
            r#"{{ $.a.b }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:4: executing "deployment.yaml" at <$.a.b>: can't evaluate field b in type interface {}"#,
            ),
        ),
        (
            r#"{{ 1abc }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: bad number syntax: "1a""#),
        ),
        (
            r#"{{ @ }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected "@" in command"#),
        ),
        (
            r#"{{ .a@ }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: bad character U+0040 '@'"#),
        ),
        (r#"{{ "\\z" }}"#, Ok(r#"\z"#)),
        (
            r#"{{ '' }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: invalid syntax"#),
        ),
        (
            r#"{{ 'ab' }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: malformed character constant: 'ab'"#),
        ),
        (
            r#"{{ `raw\
` }}"#,
            Ok(r#"raw\
"#),
        ),
        (
            r#"{{ `unterminated }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unterminated raw quoted string"#),
        ),
        (
            r#"{{ /* x */ 1 }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected "/" in command"#),
        ),
        (
            r#"{{/* x */ 1 }}"#,
            Err(
                r#"error parsing template: template: deployment.yaml:1: comment ends before closing delimiter"#,
            ),
        ),
        (
            r#"{{/* unclosed"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unclosed comment"#),
        ),
        (
            r#"{{ 1+2 }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: bad number syntax: "1+2""#),
        ),
        (
            r#"{{ 0x }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: illegal number syntax: "0x""#),
        ),
        (
            r#"{{ 1e }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: illegal number syntax: "1e""#),
        ),
        (
            r#"{{ .a }}
{{ .b }}
{{ .c }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:2:3: executing "deployment.yaml" at <.b>: map has no entry for key "b""#,
            ),
        ),
        (
            r#"

  {{ if true }}
{{ .zz }}{{ end }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:4:3: executing "deployment.yaml" at <.zz>: map has no entry for key "zz""#,
            ),
        ),
        (
            r#"{{ if true }}

{{ .a.b }}
{{ end }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:3:5: executing "deployment.yaml" at <.a.b>: can't evaluate field b in type interface {}"#,
            ),
        ),
        (r#"{{- .a -}}"#, Ok(r#"str"#)),
        (
            r#"{{-.a}}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: bad number syntax: "-.a""#),
        ),
        (r#"{{ .a -}}"#, Ok(r#"str"#)),
        (
            r#"{{ .a-}}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: bad character U+002D '-'"#),
        ),
        (
            r#"{{ 1 -}}

  x"#,
            Ok(r#"1x"#),
        ),
        (
            r#"x  
 {{- 1 }}"#,
            Ok(r#"x1"#),
        ),
        (r#"{{- /* comment */ -}}"#, Ok(r#""#)),
        (r#"{{ "a" | printf "%s" | upper }}"#, Ok(r#"A"#)),
        (
            r#"{{ printf }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <printf>: wrong number of args for printf: want at least 1 got 0"#,
            ),
        ),
        (r#"{{ printf "%d %s" 1 }}"#, Ok(r#"1 %!s(MISSING)"#)),
        (r#"{{ printf "%d" "x" }}"#, Ok(r#"%!d(string=x)"#)),
        (
            r#"{{ printf "%d" 1 2 "x" }}"#,
            Ok(r#"1%!(EXTRA int=2, string=x)"#),
        ),
        (r#"{{ printf "%!" }}"#, Ok(r#"%!!(MISSING)"#)),
        (r#"{{ printf "%" }}"#, Ok(r#"%!(NOVERB)"#)),
        (r#"{{ printf "%[2]d %[1]d" 1 2 }}"#, Ok(r#"2 1"#)),
        (r#"{{ printf "%[3]d" 1 2 }}"#, Ok(r#"%!d(BADINDEX)"#)),
        (
            r#"{{ printf "%*d|%-*d|%.*f" 5 1 4 2 2 3.14159 }}"#,
            Ok(r#"    1|2   |3.14"#),
        ),
        (r#"{{ printf "%*d" 1.5 2 }}"#, Ok(r#"%!(BADWIDTH)2"#)),
        (
            r#"{{ printf "%6.2f|%-8.3e|%+.1e|%G|%E" 3.14159 1234.5678 0.000123 1e-10 12345.0 }}"#,
            Ok(r#"  3.14|1.235e+03|+1.2e-04|1E-10|1.234500E+04"#),
        ),
        (
            r#"{{ printf "%q|%#q|%+q|%x|%X|% x|%#x" "héllo\
" "back`q" "é" "abc" "abc" "abc" "abc" }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unterminated quoted string"#),
        ),
        (
            r#"{{ printf "%5s|%-5s|%.2s|%05s|%5.1s" "ab" "ab" "abcdef" "ab" "xyz" }}"#,
            Ok(r#"   ab|ab   |ab|000ab|    x"#),
        ),
        (
            r#"{{ printf "%d|%5d|%-5d|%05d|%+d|% d|%x|%X|%o|%#o|%b|%#x|%O" 42 42 42 42 42 42 255 255 8 8 5 255 8 }}"#,
            Ok(r#"42|   42|42   |00042|+42| 42|ff|FF|10|010|101|0xff|0o10"#),
        ),
        (
            r#"{{ printf "%c|%q|%U|%#U" 0x1F600 65 0x1F600 0x1F600 }}"#,
            Ok(r#"😀|'A'|U+1F600|U+1F600 '😀'"#),
        ),
        (
            r#"{{ printf "%t|%v|%5t" true false true }}"#,
            Ok(r#"true|false| true"#),
        ),
        (
            r#"{{ printf "%v|%d|%s" .l .l .l }}"#,
            Ok(r#"[1 <nil> s]|[%!d(float64=1) <nil> %!d(string=s)]|[%!s(float64=1) <nil> s]"#),
        ),
        (
            r#"{{ printf "%v|%+v|%#v" .m .m .m }}"#,
            Ok(r#"map[x:1]|map[x:1]|map[string]interface {}{"x":1}"#),
        ),
        (
            r#"{{ printf "%s" .n }} {{ printf "%d" nil }}"#,
            Ok(r#"%!s(<nil>) %!d(<nil>)"#),
        ),
        (
            r#"{{ printf "%T %T %T %T %T %T %T" 1 1.5 "s" true nil .l .m }}"#,
            Ok(r#"int float64 string bool <nil> []interface {} map[string]interface {}"#),
        ),
        (
            r#"{{ printf "%v %v %v %v %v" 1e20 1e21 123456789.0 0.000012345 100.0 }}"#,
            Ok(r#"1e+20 1e+21 1.23456789e+08 1.2345e-05 100"#),
        ),
        (
            r#"{{ printf "%g %g %g %.2g %.10g" 1e20 1e21 1e-5 123.0 0.1 }}"#,
            Ok(r#"1e+20 1e+21 1e-05 1.2e+02 0.1"#),
        ),
        (
            r#"{{ printf "%e %.0e %f %.0f %.3f" 0.0 5.5 1e20 2.5 1.0005 }}"#,
            Ok(r#"0.000000e+00 6e+00 100000000000000000000.000000 2 1.000"#),
        ),
        (
            r#"{{ printf "%#v %#v %#v %#v" 1 1.0 "s" true }}"#,
            Ok(r#"1 1 "s" true"#),
        ),
        (
            r#"{{ printf "%#g %#.3g %#e %#f" 1.0 2.0 3.0 4.0 }}"#,
            Ok(r#"1.00000 2.00 3.000000e+00 4.000000"#),
        ),
        (
            r#"{{ printf "%v" .f }} {{ printf "%08.3f|%-8.2f|%+08.2f" -3.14159 2.5 2.5 }}"#,
            Ok(r#"3.25 -003.142|2.50    |+0002.50"#),
        ),
        (r#"{{ printf "%x %X %x" 3.5 -1 "" }}"#, Ok(r#"0x1.cp+01 -1 "#)),
        (r#"{{ printf "%s %v" 1.5 .e }}"#, Ok(r#"%!s(float64=1.5) []"#)),
        (r#"{{ printf "%.3s|%.10s" "héllo" "ab" }}"#, Ok(r#"hél|ab"#)),
        (r#"{{ printf "%5.2q" "abc" }}"#, Ok(r#" "ab""#)),
        (
            r#"{{ printf "%-10v|%10v" .l .m }}"#,
            Ok(r#"[1          <nil> s         ]|map[         x:         1]"#),
        ),
        (
            r#"{{ printf "%03d|%-03d|%.3d|%8.3d" 5 5 5 -5 }}"#,
            Ok(r#"005|5  |005|    -005"#),
        ),
        (r#"{{ printf "%z %!" 1 }}"#, Ok(r#"%!z(int=1) %!!(MISSING)"#)),
    ]);
}

/// `%x` on floats and padding of composite values.
#[test]
fn hex_floats_and_padding() {
    check(&[
        (
            r#"{{ printf "%x %X %x %.2x %x %x %.0x" 3.5 -1.25 0.0 1.0 1e-310 0.1 1.5 }}"#,
            Ok(
                r#"0x1.cp+01 -0X1.4P+00 0x0p+00 0x1.00p+00 0x1.2688b70e62bp-1030 0x1.999999999999ap-04 0x1p+01"#,
            ),
        ),
        (
            r#"{{ printf "%-10v|%10v" .l .m }}"#,
            Ok(r#"[1          <nil> s         ]|map[         x:         1]"#),
        ),
    ]);
}

/// Argument conversion by signature, short-circuit `and`/`or`, `index`, comparisons.
#[test]
fn function_arguments_and_comparisons() {
    check(&[
        (
            r#"{{ define "a" }}A{{ .x }}{{ end }}{{ template "a" dict "x" 1 }}"#,
            Ok(r#"A1"#),
        ),
        (
            r#"{{ $x := 0 }}{{ range .l }}{{ $x = . }}{{ end }}{{ $x }}"#,
            Ok(r#"s"#),
        ),
        (
            r#"{{ range $i, $v := .l }}{{ $v }}{{ else }}E{{ end }}"#,
            Ok(r#"1<no value>s"#),
        ),
        (r#"{{ range .m }}{{ . }}{{ end }}"#, Ok(r#"1"#)),
        (
            r#"{{ with $x := "v" }}{{ $x }}{{ end }}{{ $x }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: undefined variable "$x""#),
        ),
        (r#"{{ if $x := .a }}{{ $x }}{{ end }}"#, Ok(r#"str"#)),
        (
            r#"{{ define "t" }}{{ $ }}{{ end }}{{ template "t" .a }}"#,
            Ok(r#"str"#),
        ),
        (
            r#"{{ define "t" }}{{ .q }}{{ end }}
{{ template "t" .m }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:19: executing "t" at <.q>: map has no entry for key "q""#,
            ),
        ),
        (
            r#"{{ block "t" . }}{{ .q }}{{ end }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:20: executing "t" at <.q>: map has no entry for key "q""#,
            ),
        ),
        (
            r#"{{ template "t" }}{{ define "t" }}{{ . }}{{ end }}"#,
            Ok(r#"<no value>"#),
        ),
        (r#"{{ .l | len }}"#, Ok(r#"3"#)),
        (r#"{{ until 3 | len }}"#, Ok(r#"3"#)),
        (r#"{{ printf "%T" (until 3) }}"#, Ok(r#"[]int"#)),
        (
            r#"{{ fail "boom" }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <fail "boom">: error calling fail: boom"#,
            ),
        ),
        (
            r#"{{ upper }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <upper>: wrong number of args for upper: want 1 got 0"#,
            ),
        ),
        (
            r#"{{ upper "a" "b" }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <upper>: wrong number of args for upper: want 1 got 2"#,
            ),
        ),
        (
            r#"{{ "a" | upper "b" }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:9: executing "deployment.yaml" at <upper>: wrong number of args for upper: want 1 got 2"#,
            ),
        ),
        (r#"{{ and .n (fail "x") }}"#, Ok(r#"<no value>"#)),
        (r#"{{ or .a (fail "x") }}"#, Ok(r#"str"#)),
        (
            r#"{{ and 1 (fail "x") }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:10: executing "deployment.yaml" at <fail "x">: error calling fail: x"#,
            ),
        ),
        (
            r#"{{ not }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <not>: wrong number of args for not: want 1 got 0"#,
            ),
        ),
        (r#"{{ index .l }}"#, Ok(r#"[1 <nil> s]"#)),
        (
            r#"{{ index .l 0 0 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index .l 0 0>: error calling index: can't index item of type float64"#,
            ),
        ),
        (
            r#"{{ index nil 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index nil 1>: error calling index: index of untyped nil"#,
            ),
        ),
        (
            r#"{{ index .n 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index .n 1>: error calling index: index of untyped nil"#,
            ),
        ),
        (
            r#"{{ index .m nil }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index .m nil>: error calling index: value is nil; should be of type string"#,
            ),
        ),
        (
            r#"{{ index .l "a" }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index .l "a">: error calling index: cannot index slice/array with type string"#,
            ),
        ),
        (
            r#"{{ index .l -1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index .l -1>: error calling index: index out of range: -1"#,
            ),
        ),
        (
            r#"{{ index .l 1.0 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index .l 1.0>: error calling index: cannot index slice/array with type float64"#,
            ),
        ),
        (
            r#"{{ index .m "x" "y" }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index .m "x" "y">: error calling index: can't index item of type float64"#,
            ),
        ),
        (
            r#"{{ .m.x.y.z }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:5: executing "deployment.yaml" at <.m.x.y.z>: can't evaluate field y in type interface {}"#,
            ),
        ),
        (
            r#"{{ $.nokey.x }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:4: executing "deployment.yaml" at <$.nokey.x>: map has no entry for key "nokey""#,
            ),
        ),
        (
            r#"{{ $y := .n }}{{ $y.x }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:19: executing "deployment.yaml" at <$y.x>: nil data; no entry for key "x""#,
            ),
        ),
        (r#"{{ range .l }}{{ $.a }}{{ end }}"#, Ok(r#"strstrstr"#)),
        (
            r#"{{ eq 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <eq 1>: error calling eq: missing argument for comparison"#,
            ),
        ),
        (r#"{{ eq nil nil }}"#, Ok(r#"true"#)),
        (r#"{{ eq .n .n }}"#, Ok(r#"true"#)),
        (r#"{{ eq .a nil }}"#, Ok(r#"false"#)),
        (
            r#"{{ eq .m .m }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <eq .m .m>: error calling eq: non-comparable type map[x:%!s(float64=1)]: map[string]interface {}"#,
            ),
        ),
        (r#"{{ ne .a "str" }}"#, Ok(r#"false"#)),
        (
            r#"{{ lt nil 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <lt nil 1>: error calling lt: invalid type for comparison"#,
            ),
        ),
        (
            r#"{{ lt true false }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <lt true false>: error calling lt: invalid type for comparison"#,
            ),
        ),
        (r#"{{ le 1 1 }} {{ ge "a" "b" }}"#, Ok(r#"true false"#)),
        (r#"{{ lt .f 4.0 }}"#, Ok(r#"true"#)),
        (r#"{{ lt (len .l) 5 }}"#, Ok(r#"true"#)),
    ]);
}

/// Multi-line positions, variable scoping, break/continue, pipelines, escapers.
#[test]
fn positions_scoping_and_pipelines() {
    check(&[
        (
            r#"line1
{{ if .a
  }}x{{ end }}
{{ .zz }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:4:3: executing "deployment.yaml" at <.zz>: map has no entry for key "zz""#,
            ),
        ),
        (
            r#"a
{{ .a
| upper }}
{{ .b
}}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:4:3: executing "deployment.yaml" at <.b>: map has no entry for key "b""#,
            ),
        ),
        (
            r#"{{ if true }}
{{ range .l }}
  - {{ . }}
{{- end }}
{{ end }}"#,
            Ok(r#"

  - 1
  - <no value>
  - s
"#),
        ),
        (
            r#"{{ "abc
" }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unterminated quoted string"#),
        ),
        (
            r#"{{ .a
"#,
            Err(
                r#"error parsing template: template: deployment.yaml:2: unclosed action started at deployment.yaml:1"#,
            ),
        ),
        (
            r#"{{ if .a }}
{{ .a }
{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:2: unexpected "}" in operand"#),
        ),
        (
            r#"x

{{ (1

}}"#,
            Err(
                r#"error parsing template: template: deployment.yaml:5: unclosed left paren in action started at deployment.yaml:3"#,
            ),
        ),
        (
            r#"{{/* a
b */}}
{{ .zz }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:3:3: executing "deployment.yaml" at <.zz>: map has no entry for key "zz""#,
            ),
        ),
        (
            r#"{{- if .a }}
  a: {{ .a }}
{{- end }}
"#,
            Ok(r#"
  a: str
"#),
        ),
        (
            r#"{{ range $i, $e := .l }}{{ if $i }},{{ end }}{{ $e }}{{ end }}"#,
            Ok(r#"1,<no value>,s"#),
        ),
        (
            r#"{{ $x := .m }}{{ $x.x }}{{ $x.q }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:29: executing "deployment.yaml" at <$x.q>: map has no entry for key "q""#,
            ),
        ),
        (r#"{{ with .m }}{{ .x }}{{ end }}"#, Ok(r#"1"#)),
        (
            r#"{{ define "T1" }}ONE{{ end }}{{ define "T2" }}TWO {{ template "T1" }}{{ end }}{{ template "T2" }}"#,
            Ok(r#"TWO ONE"#),
        ),
        (
            r#"{{ define "list" }}{{ range . }}[{{ . }}]{{ end }}{{ end }}{{ template "list" .l }}"#,
            Ok(r#"[1][<no value>][s]"#),
        ),
        (
            r#"{{ define "x" }}{{ .a.b }}{{ end }}
{{ template "x" . }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:21: executing "x" at <.a.b>: can't evaluate field b in type interface {}"#,
            ),
        ),
        (r#"{{ range .l }}{{ break }}{{ end }}done"#, Ok(r#"done"#)),
        (
            r#"{{ range .l }}{{ range .l }}{{ break }}{{ end }}{{ . }}{{ end }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:23: executing "deployment.yaml" at <.l>: can't evaluate field l in type interface {}"#,
            ),
        ),
        (
            r#"{{ if true }}{{ break }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: {{break}} outside {{range}}"#),
        ),
        (
            r#"{{ range .l }}{{ define "z" }}{{ break }}{{ end }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected <define> in command"#),
        ),
        (
            r#"{{ range .l }}{{ with . }}{{ continue }}{{ end }}x{{ end }}"#,
            Ok(r#"x"#),
        ),
        (
            r#"{{ break 1 }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected "1" in {{break}}"#),
        ),
        (
            r#"{{ range .l }}{{ break 1 }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected "1" in {{break}}"#),
        ),
        (
            r#"{{ else if .a }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected {{else}}"#),
        ),
        (
            r#"{{ if .a }}a{{ else if .n }}n{{ else if .m }}m{{ end }}"#,
            Ok(r#"a"#),
        ),
        (
            r#"{{ if .n }}{{ else }}{{ else }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: expected end; found {{else}}"#),
        ),
        (
            r#"{{ range .l }}{{ else if .a }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected <if> in input"#),
        ),
        (
            r#"{{ template "x" . . }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:12: executing "deployment.yaml" at <{{template "x" . .}}>: template "x" not defined"#,
            ),
        ),
        (
            r#"{{ template }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected "}}" in template clause"#),
        ),
        (
            r#"{{ define }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected "}}" in define clause"#),
        ),
        (
            r#"{{ define "a" 1 }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected "1" in define clause"#),
        ),
        (
            r#"{{ block "x" }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: missing value for block clause"#),
        ),
        (
            r#"{{ block "x" . }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected EOF"#),
        ),
        (
            r#"{{ define "x" }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected EOF"#),
        ),
        (
            r#"{{ $x := 1 }}{{ if true }}{{ $x := 2 }}{{ $x }}{{ end }}{{ $x }}"#,
            Ok(r#"21"#),
        ),
        (
            r#"{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}"#,
            Ok(r#"2"#),
        ),
        (
            r#"{{ range $i, $x := .l }}{{ end }}{{ $i }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: undefined variable "$i""#),
        ),
        (r#"{{ $ := 1 }}{{ $ }}"#, Ok(r#"1"#)),
        (
            r#"{{ $x = 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:8: executing "deployment.yaml" at <1>: undefined variable: $x"#,
            ),
        ),
        (
            r#"{{ $x.y := 1 }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: undefined variable "$x""#),
        ),
        (
            r#"{{ .a := 1 }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected ":=" in operand"#),
        ),
        (
            r#"{{ range $k = .l }}{{ end }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:14: executing "deployment.yaml" at <.l>: undefined variable: $k"#,
            ),
        ),
        (
            r#"{{ 1 := 2 }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected ":=" in operand"#),
        ),
        (
            r#"{{ $x := 1 | $x }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:13: executing "deployment.yaml" at <$x>: undefined variable: $x"#,
            ),
        ),
        (
            r#"{{ true.x }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected . after term "true""#),
        ),
        (
            r#"{{ .a..b }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected <.> in operand"#),
        ),
        (
            r#"{{ . . }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <.>: can't give argument to non-function ."#,
            ),
        ),
        (
            r#"{{ .a | .m }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:8: executing "deployment.yaml" at <.m>: m is not a method but has arguments"#,
            ),
        ),
        (r#"{{ (.m).x }}"#, Ok(r#"1"#)),
        (
            r#"{{ (.m).x.y }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:4: executing "deployment.yaml" at <.m>: can't evaluate field y in type interface {}"#,
            ),
        ),
        (r#"{{ ( .m ).x }}"#, Ok(r#"1"#)),
        (r#"{{ (index .l 0) }}"#, Ok(r#"1"#)),
        (r#"{{ ("a") }}"#, Ok(r#"a"#)),
        (r#"{{ .m.x | printf "%v-%v" 1 }}"#, Ok(r#"1-1"#)),
        (r#"{{ printf "%s" (print 1 2) }}"#, Ok(r#"1 2"#)),
        (
            r#"{{ print "a" 1 2 "b" nil nil 3.5 true }}"#,
            Ok(r#"a1 2b<nil> <nil> 3.5 true"#),
        ),
        (r#"{{ print .l .m }}"#, Ok(r#"[1 <nil> s] map[x:1]"#)),
        (
            r#"{{ println }}"#,
            Ok(r#"
"#),
        ),
        (r#"{{ print }}"#, Ok(r#""#)),
        (r#"{{ html }}"#, Ok(r#""#)),
        (r#"{{ urlquery "a" "b" 1 }}"#, Ok(r#"ab1"#)),
        (r#"{{ js 1 nil "x" }}"#, Ok(r#"1\u003Cno value\u003Ex"#)),
        (r#"{{ html .l }}"#, Ok(r#"[1 &lt;nil&gt; s]"#)),
        (
            r#"{{ len .e }}{{ if .e }}t{{ else }}f{{ end }}{{ if .m }}t{{ end }}{{ if 0.0 }}t{{ else }}f{{ end }}"#,
            Ok(r#"0ftf"#),
        ),
        (
            r#"{{ not .l }} {{ not .e }} {{ not "" }} {{ not .n }}"#,
            Ok(r#"false true true true"#),
        ),
        (
            r#"{{ and .a .m }} {{ or .n .e }} {{ or }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:34: executing "deployment.yaml" at <or>: wrong number of args for or: want at least 1 got 0"#,
            ),
        ),
        (r#"{{ .a | and "x" }}"#, Ok(r#"str"#)),
        (r#"{{ "" | or "" }}"#, Ok(r#""#)),
        (
            r#"{{ eq .m.x 1.0 }} {{ eq .m.x 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:21: executing "deployment.yaml" at <eq .m.x 1>: error calling eq: incompatible types for comparison"#,
            ),
        ),
        (r#"{{ eq (len .l) 3 }}"#, Ok(r#"true"#)),
        (r#"{{ eq .a .a .n }}"#, Ok(r#"true"#)),
        (r#"{{ eq "x" .n }}"#, Ok(r#"false"#)),
        (r#"{{ eq .n "x" }}"#, Ok(r#"false"#)),
        (r#"{{ ne .n .n }}"#, Ok(r#"false"#)),
        (
            r#"{{ eq true true }} {{ eq true false }} {{ eq 1.5 1.5 }}"#,
            Ok(r#"true false true"#),
        ),
        (r#"{{ lt "a" "B" }}"#, Ok(r#"false"#)),
        (r#"{{ 'x' }} {{ printf "%T" 'x' }}"#, Ok(r#"120 int"#)),
        (
            r#"{{ 1.0 }} {{ printf "%T" 1.0 }} {{ 1e3 }} {{ printf "%T" 1e3 }} {{ 0x10 }} {{ -0 }} {{ 0.5e-3 }}"#,
            Ok(r#"1 float64 1000 float64 16 0 0.0005"#),
        ),
        (
            r#"{{ 1_0.5 }} {{ 0x_1F }} {{ 1__0 }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: illegal number syntax: "1__0""#),
        ),
        (
            r#"{{ 00 }} {{ 0_7 }} {{ 0b }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: illegal number syntax: "0b""#),
        ),
        (
            r#"{{ .e.x }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:5: executing "deployment.yaml" at <.e.x>: can't evaluate field x in type interface {}"#,
            ),
        ),
        (
            r#"{{ .l.x }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:5: executing "deployment.yaml" at <.l.x>: can't evaluate field x in type interface {}"#,
            ),
        ),
        (
            r#"{{ .big.x }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:7: executing "deployment.yaml" at <.big.x>: can't evaluate field x in type interface {}"#,
            ),
        ),
        (
            r#"{{ .a.x.y }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:5: executing "deployment.yaml" at <.a.x.y>: can't evaluate field x in type interface {}"#,
            ),
        ),
        (
            r#"{{ $.n.x }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:4: executing "deployment.yaml" at <$.n.x>: nil pointer evaluating interface {}.x"#,
            ),
        ),
        (
            r#"{{ index .m.x 0 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <index .m.x 0>: error calling index: can't index item of type float64"#,
            ),
        ),
        (r#"{{ index . "a" }}"#, Ok(r#"str"#)),
        (r#"{{ index . "a" 1 }}"#, Ok(r#"116"#)),
        (
            r#"{{ .m.x.y 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:5: executing "deployment.yaml" at <.m.x.y>: can't evaluate field y in type interface {}"#,
            ),
        ),
        (
            r#"{{ .a 1 2 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <.a>: a is not a method but has arguments"#,
            ),
        ),
        (
            r#"{{ $x := "a" }}{{ $x 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:18: executing "deployment.yaml" at <$x>: can't give argument to non-function $x"#,
            ),
        ),
        (
            r#"{{ (.a) 1 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <(.a) 1>: can't give argument to non-function .a"#,
            ),
        ),
    ]);
}

/// Byte columns with UTF-8, redefinition rules, more `printf`/`print` formatting.
#[test]
fn more_fmt_and_templates() {
    check(&[
        (
            r#"{{ "é" }}{{ .zz }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:13: executing "deployment.yaml" at <.zz>: map has no entry for key "zz""#,
            ),
        ),
        (
            r#"héllo {{ .zz }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:10: executing "deployment.yaml" at <.zz>: map has no entry for key "zz""#,
            ),
        ),
        (
            r#"a\r
{{ .zz }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:2:3: executing "deployment.yaml" at <.zz>: map has no entry for key "zz""#,
            ),
        ),
        (
            r#"{{ define "a" }}{{ define "b" }}{{ end }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: unexpected <define> in command"#),
        ),
        (
            r#"{{}}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: missing value for command"#),
        ),
        (
            r#"{{ }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: missing value for command"#),
        ),
        (
            r#"{{ 1 2 }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:3: executing "deployment.yaml" at <1>: can't give argument to non-function 1"#,
            ),
        ),
        (r#"{{ $ = 1 }}{{ $ }}"#, Ok(r#"1"#)),
        (r#"{{ $x := 1 }}{{ $x := "b" }}{{ $x }}"#, Ok(r#"b"#)),
        (r#"{{ range $i, $v := .m }}{{ $i }}{{ end }}"#, Ok(r#"x"#)),
        (r#"{{ range .m }}{{ else }}e{{ end }}"#, Ok(r#""#)),
        (
            r#"{{ with .e }}x{{ else }}{{ . }}{{ end }}"#,
            Ok(r#"map[a:str big:1e+06 e:[] f:3.25 l:[1 <nil> s] m:map[x:1] n:<nil> small:1e-05]"#),
        ),
        (r#"{{ if .e }}{{ else if .e }}{{ else }}z{{ end }}"#, Ok(r#"z"#)),
        (
            r#"{{ define "a" }}{{ $ }}{{ end }}{{ template "a" }}"#,
            Ok(r#"<no value>"#),
        ),
        (
            r#"{{ define "a" }}{{ .x }}{{ end }}{{ template "a" }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:19: executing "a" at <.x>: nil data; no entry for key "x""#,
            ),
        ),
        (
            r#"{{ define "a" }}{{ $.x }}{{ end }}{{ template "a" .m }}"#,
            Ok(r#"1"#),
        ),
        (
            r#"{{ template "a" .m }}{{ define "a" }}{{ .zz }}{{ end }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:40: executing "a" at <.zz>: map has no entry for key "zz""#,
            ),
        ),
        (
            r#"{{ block "a" .m }}{{ .x }}{{ end }}{{ define "a" }}X{{ end }}"#,
            Err(
                r#"error parsing template: template: deployment.yaml:1: template: multiple definition of template "a""#,
            ),
        ),
        (
            r#"{{ define "a" }}X{{ end }}{{ block "a" .m }}{{ .x }}{{ end }}"#,
            Err(
                r#"error parsing template: template: deployment.yaml:1: template: multiple definition of template "a""#,
            ),
        ),
        (r#"{{ printf "%s" .l }}"#, Ok(r#"[%!s(float64=1) <nil> s]"#)),
        (r#"{{ printf "%q" .l }}"#, Ok(r#"[%!q(float64=1) <nil> "s"]"#)),
        (
            r#"{{ printf "%5.1f" .l }}"#,
            Ok(r#"[  1.0 <nil> %!f(string=    s)]"#),
        ),
        (r#"{{ printf "%x" .m }}"#, Ok(r#"map[78:0x1p+00]"#)),
        (r#"{{ printf "%v %s" true true }}"#, Ok(r#"true %!s(bool=true)"#)),
        (r#"{{ printf "%d" true }}"#, Ok(r#"%!d(bool=true)"#)),
        (r#"{{ printf "%s" 1.5 }}"#, Ok(r#"%!s(float64=1.5)"#)),
        (
            r#"{{ printf "%c %c" 1.5 "a" }}"#,
            Ok(r#"%!c(float64=1.5) %!c(string=a)"#),
        ),
        (
            r#"{{ printf "%#x %#o %#b" -255 -8 -5 }}"#,
            Ok(r#"-0xff -010 -0b101"#),
        ),
        (r#"{{ printf "% d % d %+ d" 5 -5 5 }}"#, Ok(r#" 5 -5 +5"#)),
        (
            r#"{{ printf "%010.3f|%-010.3f|%+010.3f" 3.14159 3.14159 -3.14159 }}"#,
            Ok(r#"000003.142|3.142     |-00003.142"#),
        ),
        (
            r#"{{ printf "%10.4v|%-10v|" 3.14159 "x" }}"#,
            Ok(r#"     3.142|x         |"#),
        ),
        (
            r#"{{ printf "%.0f %.0f %.0f %.0f" 0.5 1.5 2.5 -0.5 }}"#,
            Ok(r#"0 2 2 -0"#),
        ),
        (
            r#"{{ printf "%v %v %v" 0.1 0.2 0.30000000000000004 }}"#,
            Ok(r#"0.1 0.2 0.30000000000000004"#),
        ),
        (
            r#"{{ printf "%v %v" 1e-7 123456789012.0 }}"#,
            Ok(r#"1e-07 1.23456789012e+11"#),
        ),
        (
            r#"{{ printf "%g %G %e" 1e100 1e-100 1.7976931348623157e308 }}"#,
            Ok(r#"1e+100 1E-100 1.797693e+308"#),
        ),
        (r#"{{ printf "%.20f" 0.1 }}"#, Ok(r#"0.10000000000000000555"#)),
        (r#"{{ printf "%.3e" 9.9996 }}"#, Ok(r#"1.000e+01"#)),
        (r#"{{ printf "%6.2v" 1234.5678 }}"#, Ok(r#"1.2e+03"#)),
        (r#"{{ printf "%+v %+q" 5 "é" }}"#, Ok(r#"5 "\u00e9""#)),
        (r#"{{ printf "%#q %#q" "a`b" "é" }}"#, Ok(r#""a`b" `é`"#)),
        (
            r#"{{ printf "%q" "\\x01\\u200b\\t" }}"#,
            Ok(r#""\\x01\\u200b\\t""#),
        ),
        (
            r#"{{ printf "%U %#U" -1 0x110000 }}"#,
            Ok(r#"U+FFFFFFFFFFFFFFFF U+110000"#),
        ),
        (r#"{{ printf "%c" 0x110000 }}"#, Ok(r#"�"#)),
        (r#"{{ printf "%x" "é" }}"#, Ok(r#"c3a9"#)),
        (
            r#"{{ printf "%08s|%-8q|%8x" "é" "é" "é" }}"#,
            Ok(r#"0000000é|"é"     |    c3a9"#),
        ),
        (r#"{{ printf "%.1q" "abc" }}"#, Ok(r#""a""#)),
        (r#"{{ printf "%T" .m.x }}"#, Ok(r#"float64"#)),
        (r#"{{ printf "%3c|%-3c|" 65 66 }}"#, Ok(r#"  A|B  |"#)),
        (
            r#"{{ printf "%v" 1e21 }} {{ 1e21 }} {{ .big }} {{ 100000000000000000000.0 }}"#,
            Ok(r#"1e+21 1e+21 1e+06 1e+20"#),
        ),
        (
            r#"{{ printf "%05d" -42 }} {{ printf "%.5d" -42 }} {{ printf "%+.3d" 7 }}"#,
            Ok(r#"-0042 -00042 +007"#),
        ),
        (
            r#"{{ printf "%.2s" "日本語" }} {{ printf "%5s|" "日本" }}"#,
            Ok(r#"日本    日本|"#),
        ),
        (
            r#"{{ print 1 2 }} {{ print "a" 1 }} {{ print 1 "a" }} {{ print 1.5 2.5 }} {{ print true false }}"#,
            Ok(r#"1 2 a1 1a 1.5 2.5 true false"#),
        ),
        (
            r#"{{ print .l .l }} {{ print .m 1 }}"#,
            Ok(r#"[1 <nil> s] [1 <nil> s] map[x:1] 1"#),
        ),
        (
            r#"{{ println "a" 1 }}"#,
            Ok(r#"a 1
"#),
        ),
    ]);
}

/// Template (re)definition rules, `block`, and parse state restored after nested definitions.
#[test]
fn definitions_and_blocks() {
    check(&[
        (
            r#"{{ define "deployment.yaml" }}x{{ end }}y"#,
            Err(
                r#"error parsing template: template: deployment.yaml:1: template: multiple definition of template "deployment.yaml""#,
            ),
        ),
        (r#"{{ define "deployment.yaml" }}x{{ end }}"#, Ok(r#"x"#)),
        (
            r#"{{ define "deployment.yaml" }}x{{ end }}  
"#,
            Ok(r#"x"#),
        ),
        (r#"{{ define "deployment.yaml" }}{{ end }}y"#, Ok(r#"y"#)),
        (
            r#"{{ define "t" }}{{ end }}{{ define "t" }}b{{ end }}{{ template "t" }}"#,
            Ok(r#"b"#),
        ),
        (
            r#"{{ define "t" }}a{{ end }}{{ define "t" }} {{ end }}{{ template "t" }}"#,
            Ok(r#"a"#),
        ),
        (
            r#"{{ define "t" }}a{{ end }}{{ block "t" . }}b{{ end }}"#,
            Err(
                r#"error parsing template: template: deployment.yaml:1: template: multiple definition of template "t""#,
            ),
        ),
        (
            r#"{{ define "t" }}{{/* c */}}{{ end }}{{ define "t" }}b{{ end }}{{ template "t" }}"#,
            Ok(r#"b"#),
        ),
        (
            r#"{{ define "t" -}} a {{- end }}[{{ template "t" }}]"#,
            Ok(r#"[a]"#),
        ),
        (
            r#"{{ range .l }}{{ block "b" . }}{{ break }}{{ end }}{{ end }}"#,
            Err(r#"error parsing template: template: deployment.yaml:1: {{break}} outside {{range}}"#),
        ),
        (r#"{{ define `raw` }}R{{ end }}{{ template `raw` }}"#, Ok(r#"R"#)),
        (
            r#"{{ define "a\\tb" }}T{{ end }}{{ template "a\\tb" }}"#,
            Ok(r#"T"#),
        ),
        (
            r#"{{ define "x" }}{{ template "y" }}{{ end }}{{ define "y" }}{{ .zz }}{{ end }}{{ template "x" . }}"#,
            Err(
                r#"error rendering template: template: deployment.yaml:1:62: executing "y" at <.zz>: nil data; no entry for key "zz""#,
            ),
        ),
    ]);
}

/// Runs `f` on a thread with a small (256 KiB) stack: deep templates must not overflow it.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic")
}

#[test]
fn template_recursion_is_bounded_without_stack_overflow() {
    let got = on_small_stack(|| {
        run(
            r#"{{ define "r" }}{{ if true }}{{ range .l }}{{ with . }}{{ template "r" $ }}{{ end }}{{ end }}{{ end }}{{ end }}{{ template "r" . }}"#,
        )
    });
    let err = got.expect_err("infinite recursion must fail");
    assert!(
        err.starts_with("error rendering template: template: deployment.yaml:1:"),
        "{err}"
    );
    assert!(err.contains("exceeded maximum template depth (1000)"), "{err}");
    assert!(err.contains("MAX_TEMPLATE_DEPTH"), "{err}");
}

#[test]
fn deep_parse_nesting_is_an_error_not_a_crash() {
    let deep_parens = format!("{{{{ {}1{} }}}}", "(".repeat(5000), ")".repeat(5000));
    let deep_ifs = format!("{}x{}", "{{ if true }}".repeat(5000), "{{ end }}".repeat(5000));
    for tpl in [deep_parens, deep_ifs] {
        let got = on_small_stack(move || run(&tpl));
        let err = got.expect_err("too deep");
        assert!(
            err.starts_with("error parsing template: template: deployment.yaml:1: "),
            "{err}"
        );
        assert!(err.contains("nesting exceeds the limit of 200"), "{err}");
    }
    // Nesting up to the limit works, on a small stack too.
    let ok = format!("{{{{ {}1{} }}}}", "(".repeat(150), ")".repeat(150));
    assert_eq!(on_small_stack(move || run(&ok)), Ok("1".to_string()));
}

#[test]
fn range_iteration_budget() {
    let err =
        run("{{ range until 3000 }}{{ range until 3000 }}{{ range until 3000 }}{{ end }}{{ end }}{{ end }}")
            .expect_err("budget");
    assert!(
        err.starts_with(r#"error rendering template: template: deployment.yaml:1:"#)
            && err.contains("MAX_RANGE_ITERATIONS"),
        "{err}"
    );
}

#[test]
fn output_limit() {
    // 64 MiB limit: 5000 * 5000 iterations of a 4 KiB string exceed it well before the iteration budget.
    let big = "x".repeat(4096);
    let tpl = format!("{{{{ range until 5000 }}}}{{{{ range until 5000 }}}}{big}{{{{ end }}}}{{{{ end }}}}");
    let err = run(&tpl).expect_err("output limit");
    assert!(err.contains("MAX_OUTPUT"), "{}", &err[..err.len().min(300)]);
    assert!(
        err.starts_with("error rendering template: template: deployment.yaml:1:"),
        "{}",
        &err[..200]
    );
}

#[test]
fn error_enum_shapes() {
    let f = funcs();
    match Template::parse("x.yaml", "a\n{{ env \"HOME\" }}", &f) {
        Err(Error::Parse { name, line, message }) => {
            assert_eq!(
                (name.as_str(), line, message.as_str()),
                ("x.yaml", 2, r#"function "env" not defined"#)
            );
        }
        other => panic!("{other:?}"),
    }
    let t = Template::parse("x.yaml", "{{ .Params.X }}", &f).expect("parses");
    let data = Value::from_json(&serde_json::json!({"Params": {}}));
    match t.execute(&data, &mut FuncEnv::with_seed(0)) {
        Err(Error::Exec { message, limit }) => {
            assert!(!limit);
            assert_eq!(
                message,
                r#"template: x.yaml:1:10: executing "x.yaml" at <.Params.X>: map has no entry for key "X""#
            );
        }
        other => panic!("{other:?}"),
    }
}

/// The package verifier walks field chains; this pins down the AST shape it relies on.
#[test]
fn ast_exposes_field_chains() {
    let t = Template::parse(
        "deploy.yaml",
        r#"{{ define "d" }}{{ $.Params.B }}{{ end }}{{ if eq .Params.A "x" }}{{ .Name }}{{ end }}{{ range $v := .Params.L }}{{ $v }}{{ end }}"#,
        &funcs(),
    )
    .expect("parses");
    let mut fields = Vec::new();
    fn walk_args(args: &[Arg], out: &mut Vec<String>) {
        for a in args {
            match a {
                Arg::Field { idents, .. } => out.push(format!(".{}", idents.join("."))),
                Arg::Variable { idents, .. } => out.push(idents.join(".")),
                Arg::Pipe(p) => p.cmds.iter().for_each(|c| walk_args(&c.args, out)),
                Arg::Chain { node, .. } => walk_args(std::slice::from_ref(node), out),
                _ => {}
            }
        }
    }
    fn walk(nodes: &[Node], out: &mut Vec<String>) {
        for n in nodes {
            match n {
                Node::Action { pipe, .. } => pipe.cmds.iter().for_each(|c| walk_args(&c.args, out)),
                Node::If(b) | Node::Range(b) | Node::With(b) => {
                    b.pipe.cmds.iter().for_each(|c| walk_args(&c.args, out));
                    walk(&b.list, out);
                    if let Some(e) = &b.else_list {
                        walk(e, out);
                    }
                }
                Node::Template { pipe: Some(p), .. } => p.cmds.iter().for_each(|c| walk_args(&c.args, out)),
                _ => {}
            }
        }
    }
    walk(&t.tree().root, &mut fields);
    for (_, tree) in t.defined() {
        walk(&tree.root, &mut fields);
    }
    assert_eq!(fields, [".Params.A", ".Name", ".Params.L", "$v", "$.Params.B"]);
    assert_eq!(t.defined().map(|(n, _)| n).collect::<Vec<_>>(), ["d"]);
    assert_eq!(t.name(), "deploy.yaml");
}

#[test]
fn maps_are_shared_with_the_data() {
    // A function that mutates a map argument (like Sprig's `set`) is visible through the data.
    let mut m = FuncMap::new();
    m.insert("set", Signature::new(&[P::MapAny, P::String, P::Any]), |_, a| {
        if let Value::Map(map) = &a[0] {
            map.entries
                .borrow_mut()
                .insert(a[1].as_str().unwrap_or_default().to_string(), a[2].clone());
        }
        Ok(a[0].clone())
    });
    let t = Template::parse(
        "t",
        r#"{{ $_ := set .m "y" 2 }}{{ .m.y }} {{ len .m }}"#,
        &Arc::new(m),
    )
    .expect("parses");
    assert_eq!(
        t.execute(&data(), &mut FuncEnv::with_seed(0)),
        Ok("2 2".to_string())
    );
}

/// Random token soup must never panic, hang or overflow: every input parses or fails cleanly.
#[test]
fn random_templates_never_panic() {
    const PIECES: &[&str] = &[
        "{{",
        "}}",
        "{{-",
        "-}}",
        " ",
        "\n",
        ".",
        ".a",
        ".m.x",
        ".l",
        "$",
        "$x",
        ":=",
        "=",
        "|",
        "(",
        ")",
        "\"s\"",
        "`r`",
        "'c'",
        "1",
        "-2.5e3",
        "0x1F",
        "nil",
        "true",
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
        "and",
        "or",
        "not",
        "len",
        "index",
        "slice",
        "eq",
        "lt",
        "printf",
        "print",
        "\"%d %s %v\"",
        "html",
        "js",
        "urlquery",
        "call",
        "upper",
        "until",
        "dict",
        "/*",
        "*/",
        ",",
        "x",
        "é",
        "{",
        "}",
        "\"unterminated",
        "`",
        "\\",
        "{{ range .l }}",
        "{{ end }}",
        "{{ block \"b\" . }}",
        "{{ define \"d\" }}",
        "{{ break }}",
        "{{ continue }}",
        "{{ template \"d\" . }}",
        "{{ template \"b\" }}",
        "{{ else }}",
        "{{ if .a }}",
        "{{ with .m }}",
        "{{ else if .n }}",
        "{{ $x := .l }}",
        "{{ range $i, $v := .m }}",
    ];
    let data = data();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..30_000 {
        let n = (next() % 24) as usize + 1;
        let tpl: String = (0..n)
            .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
            .collect();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_with(&tpl, &data)));
        assert!(result.is_ok(), "panicked on {tpl:?}");
    }
}

#[test]
fn doubling_values_hit_a_limit_instead_of_exhausting_memory() {
    let err = run(
        r#"{{ $x := "abcdefgh" }}{{ range until 100 }}{{ $x = printf "%s%s" $x $x }}{{ end }}{{ len $x }}"#,
    )
    .expect_err("limit");
    assert!(
        err.contains("error calling printf: result exceeds the size limit"),
        "{err}"
    );
    assert!(err.contains("MAX_OUTPUT"), "{err}");
}
