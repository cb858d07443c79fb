//! Bounded property tests of the kuttl files `kubectl kudo test` reads: the suite file
//! (`kuttl-test.yaml`), step/assert files (multi-document YAML with `TestStep`/`TestAssert`
//! objects), and step file names. Mutated real files: a value or an error, never a panic, bounded
//! heap. `PROPTEST_CASES=N` for a longer local run.

#[path = "../../../kudo-template/tests/support/bounded_fuzz.rs"]
mod bounded_fuzz;

use std::path::Path;

use bounded_fuzz::{MAX_PEAK, YAML_TOKENS, bounded, config, mutated};
use kudo_kuttl::TestSuite;
use kudo_kuttl::load::{describe_object, parse_documents, parse_file_name};
use proptest::prelude::*;

const SUITE: &str = include_str!("../../../../examples/galera/kuttl-test.yaml");
const STEP: &str = include_str!("../../../../examples/wordpress-on-mysql/tests/install/00-install.yaml");
const ASSERT: &str = include_str!("../../../../examples/wordpress-on-mysql/tests/install/00-assert.yaml");

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn suite_file_parses_or_fails_cleanly(text in mutated(SUITE, YAML_TOKENS)) {
        bounded("kuttl-test.yaml", MAX_PEAK, || {
            let _ = TestSuite::parse(&text, Path::new("fuzz/kuttl-test.yaml"));
        });
    }

    #[test]
    fn step_files_parse_or_fail_cleanly(step in mutated(STEP, YAML_TOKENS), assert in mutated(ASSERT, YAML_TOKENS)) {
        bounded("step files", MAX_PEAK, || {
            for (text, name) in [(&step, "fuzz/00-install.yaml"), (&assert, "fuzz/00-assert.yaml")] {
                if let Ok(docs) = parse_documents(text, Path::new(name)) {
                    for d in &docs {
                        let _ = describe_object(d);
                    }
                }
            }
        });
    }

    #[test]
    fn step_file_names(name in any::<String>(), n in 0u32..200) {
        let _ = parse_file_name(&name);
        let _ = parse_file_name(&format!("{n:02}-{name}.yaml"));
    }
}
