//! Bounded property tests of the package reader: gzip/tar archives (random bytes,
//! random tar content, real packages with mutated files), `operator.yaml`, `params.yaml` and
//! template documents. Whatever the input: an error or a package, never a panic, never more than
//! `MAX_PEAK` bytes of heap at once. `PROPTEST_CASES=N` for a longer local run.

#[path = "../../kudo-template/tests/support/bounded_fuzz.rs"]
mod bounded_fuzz;

use std::collections::BTreeMap;
use std::io::Write;

use bounded_fuzz::{MAX_PEAK, YAML_TOKENS, bounded, config, mutated};
use kudo_package::reader::{from_files, parse_operator, parse_params, read_tgz};
use kudo_package::split::parse_objects;
use kudo_package::verify::{ParamChecks, verify};
use proptest::prelude::*;

const OPERATOR: &str = include_str!("../../../examples/galera/operator.yaml");
const PARAMS: &str = include_str!("../../../examples/galera/params.yaml");
const TEMPLATE: &str = include_str!("../../../examples/galera/templates/statefulset.yaml");
const CONFIG: &str = include_str!("../../../examples/galera/templates/galera_config.yaml");

fn tgz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        // The name goes in raw: `tar` refuses to *write* `../x` or `/x`, but an attacker's archive
        // can hold them.
        let raw = &mut h.as_gnu_mut().unwrap().name;
        raw[..name.len()].copy_from_slice(name.as_bytes());
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// Reads, and when that succeeds verifies (the verifier parses and walks every template).
fn read_and_verify(bytes: &[u8]) {
    bounded("read_tgz + verify", MAX_PEAK, || {
        if let Ok(pkg) = read_tgz(bytes, "fuzz.tgz") {
            let _ = verify(&pkg, ParamChecks::default());
        }
    });
}

fn all_checks() -> ParamChecks {
    ParamChecks {
        display: true,
        hint: true,
        desc: true,
        type_: true,
        hasgroup: true,
        groups: true,
    }
}

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn random_bytes_are_refused_cleanly(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        read_and_verify(&bytes);
        read_and_verify(&gzip(&bytes));
    }

    #[test]
    fn mutated_packages_read_or_fail_cleanly(
        op in mutated(OPERATOR, YAML_TOKENS),
        params in mutated(PARAMS, YAML_TOKENS),
        tmpl in mutated(TEMPLATE, YAML_TOKENS),
        name in prop::sample::select(&["templates/statefulset.yaml", "templates/../x.yaml", "/abs.yaml",
            "templates/a/b/c.yaml", "templates/", "operator.yaml", "x/operator.yaml"][..]),
    ) {
        let files: [(&str, &[u8]); 4] = [
            ("operator.yaml", op.as_bytes()),
            ("params.yaml", params.as_bytes()),
            (name, tmpl.as_bytes()),
            ("templates/galera_config.yaml", CONFIG.as_bytes()),
        ];
        read_and_verify(&tgz(&files));
        let map: BTreeMap<String, Vec<u8>> =
            files.iter().map(|(n, d)| (n.to_string(), d.to_vec())).collect();
        bounded("from_files + verify", MAX_PEAK, || {
            if let Ok(pkg) = from_files(map, "fuzz") {
                let _ = verify(&pkg, all_checks());
            }
        });
    }

    #[test]
    fn package_files_parse_or_fail_cleanly(
        op in mutated(OPERATOR, YAML_TOKENS),
        params in mutated(PARAMS, YAML_TOKENS),
        tmpl in mutated(TEMPLATE, YAML_TOKENS),
    ) {
        bounded("package files", MAX_PEAK, || {
            let _ = parse_operator(&op);
            let _ = parse_params(&params);
            let _ = parse_objects("t.yaml", &tmpl);
            let _ = parse_objects("op.yaml", &op);
        });
    }
}

/// A gzip bomb (a small archive that inflates to 200 MiB) is refused within bounded memory.
#[test]
fn gzip_bomb_is_refused() {
    let zeros = vec![0u8; 200 << 20];
    let bomb = tgz(&[("operator.yaml", &zeros)]);
    drop(zeros);
    assert!(bomb.len() < 2 << 20, "the bomb should be small: {}", bomb.len());
    let r = bounded("gzip bomb", MAX_PEAK, || read_tgz(&bomb[..], "bomb.tgz"));
    let e = r.expect_err("a 200 MiB file must be refused").to_string();
    assert!(!e.is_empty());
}
