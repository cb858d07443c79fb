//! Bounded property tests of the repository files kudo-rs downloads or reads: a
//! repository's `index.yaml`, the local `repositories.yaml`, and package locations. Mutated real
//! files and random bytes: a value or an error, never a panic, bounded heap.
//! `PROPTEST_CASES=N` for a longer local run.

#[path = "../../kudo-template/tests/support/bounded_fuzz.rs"]
mod bounded_fuzz;

use bounded_fuzz::{MAX_PEAK, YAML_TOKENS, bounded, config, mutated};
use kudo_repo::RepositoryConfig;
use kudo_repo::fetch::Location;
use kudo_repo::index::IndexFile;
use proptest::prelude::*;

const INDEX: &str = r#"apiVersion: v1
entries:
  mysql:
  - appVersion: "5.7"
    digest: 0123abcd
    maintainers:
    - email: a@example.org
      name: A
    name: mysql
    operatorVersion: 0.1.0
    urls:
    - https://example.org/mysql-5.7_0.1.0.tgz
  - appVersion: "8.0"
    name: mysql
    operatorVersion: 0.10.0
    removed: true
    urls: [https://example.org/mysql-8.0_0.10.0.tgz]
  kafka:
  - name: kafka
    operatorVersion: 1.0
    urls: [kafka-1.0.tgz]
generated: "2019-09-12T15:04:34.675941-05:00"
"#;

const REPOS: &str = r#"repoVersion: v1
context: community
repositories:
- name: community
  url: https://kudo-repository.storage.googleapis.com/v1
- name: local
  url: http://localhost:8080/
"#;

proptest! {
    #![proptest_config(config(1500))]

    #[test]
    fn index_yaml_parses_or_fails_cleanly(text in mutated(INDEX, YAML_TOKENS)) {
        bounded("index.yaml", MAX_PEAK, || {
            if let Ok(idx) = IndexFile::parse(text.as_bytes(), "fuzz/index.yaml") {
                // What `search` and resolution do with a parsed index.
                let _ = idx.to_yaml();
                for versions in idx.entries.values() {
                    for v in versions {
                        let _ = v.version_label();
                    }
                }
            }
        });
    }

    #[test]
    fn repositories_yaml_parses_or_fails_cleanly(text in mutated(REPOS, YAML_TOKENS)) {
        bounded("repositories.yaml", MAX_PEAK, || {
            let _ = RepositoryConfig::parse(&text, "fuzz/repositories.yaml");
        });
    }

    #[test]
    fn random_bytes_and_locations(bytes in prop::collection::vec(any::<u8>(), 0..1024), loc in any::<String>()) {
        bounded("index bytes", MAX_PEAK, || {
            let _ = IndexFile::parse(&bytes, "fuzz/index.yaml");
            let _ = Location::parse(&loc);
        });
    }
}
