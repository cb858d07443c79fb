//! Package files read as KUDO reads them (sigs.k8s.io/yaml, non-strict): a key written twice keeps
//! its last value in `operator.yaml`, `params.yaml` and rendered templates alike, and `package
//! verify` warns about each repetition, naming the file, the line and the key.

use std::collections::BTreeMap;

use kudo_package::reader::from_files;
use kudo_package::verify::{ParamChecks, verify};

const OPERATOR: &str = "apiVersion: kudo.dev/v1beta1
name: twice
operatorVersion: 0.0.1
kubernetesVersion: 1.17.0
operatorVersion: 0.1.0
tasks:
  - name: app
    kind: Apply
    spec:
      resources: [cm.yaml]
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: serial
        steps:
          - name: app
            tasks: [app]
";

const PARAMS: &str = "apiVersion: kudo.dev/v1beta1
parameters:
  - name: GREETING
    default: hi
    default: hello
";

const TEMPLATE: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}
data:
  greeting: {{ .Params.GREETING }}
  greeting: {{ .Params.GREETING }}!
";

fn package() -> kudo_package::Package {
    let files: BTreeMap<String, Vec<u8>> = [
        ("operator.yaml", OPERATOR),
        ("params.yaml", PARAMS),
        ("templates/cm.yaml", TEMPLATE),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
    .collect();
    from_files(files, "twice").expect("a package with repeated keys reads as KUDO reads it")
}

#[test]
fn the_last_value_of_a_repeated_key_is_used() {
    let pkg = package();
    assert_eq!(pkg.operator.operator_version, "0.1.0");
    assert_eq!(pkg.params.parameters[0].default.as_deref(), Some("hello"));
    let docs = kudo_package::split::parse_objects(
        "cm.yaml",
        "kind: ConfigMap\napiVersion: v1\ndata:\n  a: 1\n  a: 2\n",
    )
    .unwrap();
    assert_eq!(docs[0].object["data"]["a"], 2);
}

#[test]
fn verify_warns_about_each_repeated_key_with_file_line_and_key() {
    let v = verify(&package(), ParamChecks::default());
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    let repeated: Vec<&String> = v
        .warnings
        .iter()
        .filter(|w| w.contains("appears twice"))
        .collect();
    assert_eq!(
        repeated,
        [
            "operator.yaml line 5: key \"operatorVersion\" appears twice in one mapping (first at line 3); the last value is used, as KUDO reads it",
            "params.yaml line 5: key \"default\" appears twice in one mapping (first at line 4); the last value is used, as KUDO reads it",
            "template cm.yaml (rendered with the defaults) line 7: key \"greeting\" appears twice in one mapping (first at line 6); the last value is used, as KUDO reads it",
        ]
    );
}
