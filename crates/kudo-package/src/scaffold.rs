//! `package new`: the skeleton KUDO's CLI writes (`operator/operator.yaml` and
//! `operator/params.yaml`).

use std::path::{Path, PathBuf};

use crate::error::PackageError;

/// The scaffold's `operator.yaml`: a deploy plan with one serial phase and step applying one
/// template, ready to fill in.
pub fn operator_yaml(name: &str) -> String {
    let lines = [
        "apiVersion: kudo.dev/v1beta1".to_string(),
        format!("name: {name}"),
        "operatorVersion: 0.1.0".into(),
        "kubernetesVersion: 0.16.0".into(),
        "maintainers:".into(),
        "- name: Your name".into(),
        "  email: <your@email.com>".into(),
        "url: https://kudo.dev".into(),
        "tasks:".into(),
        "- name: app".into(),
        "  kind: Apply".into(),
        "  spec:".into(),
        "    resources:".into(),
        "    - deployment.yaml".into(),
        "plans:".into(),
        "  deploy:".into(),
        "    strategy: serial".into(),
        "    phases:".into(),
        "    - name: main".into(),
        "      strategy: serial".into(),
        "      steps:".into(),
        "      - name: everything".into(),
        "        tasks:".into(),
        "        - app".into(),
    ];
    lines.join("\n") + "\n"
}

/// The scaffold's `params.yaml`.
pub const PARAMS_YAML: &str = "apiVersion: kudo.dev/v1beta1\nparameters: []\n";

/// Is `name` usable as an operator name (a DNS-1123 label: it prefixes object names)?
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Creates `<dir>/operator/{operator,params}.yaml`. Fails if `operator/` exists, unless
/// `overwrite`. Returns the files written.
pub fn new_package(dir: &Path, name: &str, overwrite: bool) -> Result<Vec<PathBuf>, PackageError> {
    if !valid_name(name) {
        return Err(PackageError::Invalid(format!(
            "invalid operator name {name:?}: use lower-case letters, digits and '-' (at most 63 characters)"
        )));
    }
    let root = dir.join("operator");
    if root.exists() && !overwrite {
        return Err(PackageError::io(
            root.display(),
            "folder already exists, use --overwrite to replace its package files",
        ));
    }
    std::fs::create_dir_all(&root).map_err(|e| PackageError::io(root.display(), e))?;
    let op = root.join("operator.yaml");
    let params = root.join("params.yaml");
    std::fs::write(&op, operator_yaml(name)).map_err(|e| PackageError::io(op.display(), e))?;
    std::fs::write(&params, PARAMS_YAML).map_err(|e| PackageError::io(params.display(), e))?;
    Ok(vec![op, params])
}
