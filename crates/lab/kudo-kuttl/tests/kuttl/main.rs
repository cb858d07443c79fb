//! Integration tests of the kuttl harness: parsing, matching, commands, and end-to-end runs
//! against the embedded API server.

mod commands;
mod e2e;
mod matching;
mod parse;

use std::path::Path;

/// Writes `files` (relative path → content) under `root`.
pub fn write_tree(root: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("file has a parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
    }
}
