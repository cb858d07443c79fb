//! The `sensitive` parameter field (a kudo-rs extension): read from `params.yaml`, carried into the
//! OperatorVersion only when true, and `package verify` warns for secret-looking names without it.

use kudo_package::reader::read_path;
use kudo_package::verify::{ParamChecks, looks_secret, verify};

const OP: &str = "apiVersion: kudo.dev/v1beta1\nname: demo\noperatorVersion: 0.1.0\nkubernetesVersion: 1.17.0\ntasks: []\nplans:\n  deploy:\n    strategy: serial\n    phases: []\n";

fn package(params: &str) -> kudo_package::Package {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("operator.yaml"), OP).unwrap();
    std::fs::write(dir.path().join("params.yaml"), params).unwrap();
    read_path(dir.path()).unwrap()
}

#[test]
fn sensitive_is_read_and_written_to_the_operator_version_only_when_true() {
    let pkg = package(
        "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: DB_PASSWORD\n    sensitive: true\n    required: true\n  - name: REPLICAS\n    default: \"1\"\n  - name: API_TOKEN\n    sensitive: false\n    default: x\n",
    );
    let ps = &pkg.params.parameters;
    assert!(ps[0].is_sensitive());
    assert!(!ps[1].is_sensitive());
    assert!(!ps[2].is_sensitive());
    let api = pkg.params.definitions();
    assert_eq!(api[0].sensitive, Some(true));
    assert!(api[0].is_sensitive());
    assert_eq!(api[1].sensitive, None);
    assert_eq!(api[2].sensitive, None);
    let json = serde_json::to_value(&api[1]).unwrap();
    assert!(json.get("sensitive").is_none(), "{json}");
    assert_eq!(serde_json::to_value(&api[0]).unwrap()["sensitive"], true);
}

#[test]
fn verify_warns_for_secret_looking_names_that_are_not_sensitive() {
    let pkg = package(
        "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: DB_PASSWORD\n    sensitive: true\n    default: a\n  - name: api_token\n    default: a\n  - name: ACCESS_KEY\n    default: a\n  - name: REPLICAS\n    default: \"1\"\n",
    );
    let v = verify(&pkg, ParamChecks::default());
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    let about: Vec<&String> = v.warnings.iter().filter(|w| w.contains("sensitive")).collect();
    assert_eq!(about.len(), 2, "{:?}", v.warnings);
    assert!(about[0].starts_with("parameter \"api_token\" looks like it holds a secret"));
    assert!(about[1].starts_with("parameter \"ACCESS_KEY\""));
}

/// The secret-name heuristic, one row per case: whole name segments, the secret noun last.
#[test]
fn secret_looking_names() {
    let rows = [
        ("PASSWORD", true),
        ("sst_password", true),
        ("MYSQL_ROOT_PASSWORD", true),
        ("adminPassword", true),
        ("db-passwd", true),
        ("OAUTH_CLIENT_SECRET", true),
        ("TOKEN", true),
        ("api_token", true),
        ("SSH_KEY", true),
        ("ACCESS_KEY", true),
        ("apiKey", true),
        ("APIKEY", true),
        ("TLS_PRIVATE_KEY", true),
        ("PRIVATE_KEY_PEM", true),
        ("AWS_CREDENTIALS", true),
        ("REPLICAS", false),
        ("IMAGE", false),
        ("NODE_COUNT", false),
        ("PASS", false),
        ("KEYSPACE_NAME", false),
        ("COUNTER_CACHE_KEYS_TO_SAVE", false),
        ("KAFKA_CONNECT_KEY_CONVERTER", false),
        ("KEY_CACHE_SIZE_IN_MB", false),
        ("keyspaceName", false),
        ("MONKEY", false),
        ("TOKENIZER", false),
        ("SECRETARY_EMAIL", false),
        ("TLS_SECRET_NAME", false),
        ("PASSWORD_FILE", false),
        ("CREDENTIALS_VALIDITY_IN_MS", false),
        ("NUM_TOKENS", false),
    ];
    for (name, secret) in rows {
        assert_eq!(looks_secret(name), secret, "{name}");
    }
}
