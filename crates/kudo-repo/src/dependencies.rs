//! Resolving a package's operator dependencies (`KudoOperator` tasks) before install/upgrade.
//!
//! Each `KudoOperator` task names a package the same way a user does on the command line — a
//! path, a URL or an operator name in a repository (with optional `appVersion`/`operatorVersion`)
//! — except that a relative path is taken relative to the *parent package* (its directory, or the
//! directory of its tarball), so a package and its dependencies can be kept side by side. The graph
//! is walked through every plan's tasks, recursively; a cycle is an error naming the path. The
//! result lists each distinct dependency once, in install order (a package after everything it
//! depends on), together with what the parent's tasks must be rewritten to: the in-cluster
//! reference `{package: <operator name>, appVersion, operatorVersion}` the controller understands.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kudo_api::TaskKind;
use kudo_package::Package;

use crate::error::RepoError;
use crate::fetch::Fetcher;
use crate::resolve::{Request, Source, is_package_at, resolve};

/// What a resolved `KudoOperator` task points at, as written into the OperatorVersion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// The child's operator name.
    pub package: String,
    /// The child's appVersion (may be empty).
    pub app_version: String,
    /// The child's operatorVersion.
    pub operator_version: String,
}

/// One dependency package, with the source it was loaded from (for messages).
#[derive(Debug)]
pub struct Dependency {
    /// The dependency package as read.
    pub package: Package,
    /// Where it was loaded from.
    pub source: Source,
}

/// The resolved graph of a root package.
#[derive(Debug, Default)]
pub struct Dependencies {
    /// Distinct dependencies (by OperatorVersion name), leaves first; the root is not included.
    pub packages: Vec<Dependency>,
    /// The parent's `KudoOperator` task → what the task refers to.
    pub pins: BTreeMap<PinKey, Pin>,
}

/// A `KudoOperator` task of a package: the OperatorVersion name of the parent and the task name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PinKey {
    /// OperatorVersion name of the package that has the `KudoOperator` task.
    pub parent_operator_version: String,
    /// The task's name, as in the parent's `operator.yaml`.
    pub task: String,
}

impl PinKey {
    /// The key of task `task` of the package whose OperatorVersion is `parent_operator_version`.
    pub fn new(parent_operator_version: &str, task: &str) -> PinKey {
        PinKey {
            parent_operator_version: parent_operator_version.to_string(),
            task: task.to_string(),
        }
    }
}

impl Dependencies {
    /// Rewrites the `KudoOperator` tasks of a converted OperatorVersion (the root's or a
    /// dependency's) to the in-cluster references the controller resolves.
    pub fn pin(&self, ov: &mut kudo_api::OperatorVersion) {
        let ov_name = ov.metadata.name.clone();
        for task in ov
            .spec
            .tasks
            .iter_mut()
            .filter(|t| t.kind == TaskKind::KudoOperator)
        {
            if let Some(pin) = self.pins.get(&PinKey::new(&ov_name, &task.name)) {
                task.spec.package = pin.package.clone();
                task.spec.app_version = pin.app_version.clone();
                task.spec.operator_version = pin.operator_version.clone();
            }
        }
    }
}

/// Resolves every `KudoOperator` task reachable from `root`. `root_source` says where the root
/// came from, so relative dependency paths can be anchored.
pub fn resolve_dependencies(
    home: &Path,
    root: &Package,
    root_source: &Source,
    fetcher: &Fetcher,
) -> Result<Dependencies, RepoError> {
    let mut out = Dependencies::default();
    let mut path = vec![root.operator_version_name()];
    walk(home, root, root_source, fetcher, &mut path, &mut out)?;
    Ok(out)
}

/// Directory relative dependency paths of a package from `source` are resolved against.
fn anchor(source: &Source) -> Option<PathBuf> {
    match source {
        Source::Local(p) => {
            let p = Path::new(p);
            if p.is_dir() {
                Some(p.to_path_buf())
            } else {
                Some(p.parent().map(Path::to_path_buf).unwrap_or_default())
            }
        }
        Source::Url(_) | Source::Repository { .. } | Source::Oci { .. } => None,
    }
}

fn walk(
    home: &Path,
    pkg: &Package,
    source: &Source,
    fetcher: &Fetcher,
    path: &mut Vec<String>,
    out: &mut Dependencies,
) -> Result<(), RepoError> {
    let parent_ov = pkg.operator_version_name();
    for task in pkg
        .operator
        .tasks
        .iter()
        .filter(|t| t.kind == TaskKind::KudoOperator)
    {
        let reference = task.spec.package.as_str();
        if reference.is_empty() {
            return Err(RepoError::Config(format!(
                "task {:?} of {parent_ov} is a KudoOperator task without a package",
                task.name
            )));
        }
        let local = !reference.contains("://") && looks_local_from(reference, source);
        let name_or_path = if local && Path::new(reference).is_relative() {
            match anchor(source) {
                Some(dir) => dir.join(reference).display().to_string(),
                None => {
                    return Err(RepoError::Config(format!(
                        "task {:?} of {parent_ov} refers to the relative path {reference}, but {parent_ov} did not come from a local directory or file; use an operator name or URL",
                        task.name
                    )));
                }
            }
        } else {
            reference.to_string()
        };
        let req = Request {
            name_or_path: &name_or_path,
            repo: None,
            app_version: Some(task.spec.app_version.as_str()).filter(|s| !s.is_empty()),
            operator_version: Some(task.spec.operator_version.as_str()).filter(|s| !s.is_empty()),
        };
        let (child, child_source) = resolve(home, req, fetcher).map_err(|e| {
            RepoError::NotFound(format!(
                "dependency {reference} of {parent_ov} (task {:?}): {e}",
                task.name
            ))
        })?;
        let child_ov = child.operator_version_name();
        if let Some(pos) = path.iter().position(|p| *p == child_ov) {
            let mut cycle = path[pos..].to_vec();
            cycle.push(child_ov);
            return Err(RepoError::Config(format!(
                "cyclic operator dependency: {}",
                cycle.join(" → ")
            )));
        }
        out.pins.insert(
            PinKey::new(&parent_ov, &task.name),
            Pin {
                package: child.operator.name.clone(),
                app_version: child.operator.app_version.clone(),
                operator_version: child.operator.operator_version.clone(),
            },
        );
        if out
            .packages
            .iter()
            .any(|d| d.package.operator_version_name() == child_ov)
        {
            continue;
        }
        path.push(child_ov);
        walk(home, &child, &child_source, fetcher, path, out)?;
        path.pop();
        out.packages.push(Dependency {
            package: child,
            source: child_source,
        });
    }
    Ok(())
}

/// Like [`crate::resolve::looks_local`], but a bare name is probed next to the parent package,
/// not in the current directory.
fn looks_local_from(reference: &str, source: &Source) -> bool {
    if reference.contains('/') || reference.contains(std::path::MAIN_SEPARATOR) {
        return true;
    }
    anchor(source).is_some_and(|dir| is_package_at(&dir.join(reference)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pkg(dir: &Path, name: &str, version: &str, deps: &[&str]) {
        std::fs::create_dir_all(dir.join("templates")).unwrap();
        let mut tasks =
            String::from("  - name: app\n    kind: Apply\n    spec:\n      resources: [cm.yaml]\n");
        let mut steps = String::from("          - name: app\n            tasks: [app]\n");
        for (i, d) in deps.iter().enumerate() {
            tasks.push_str(&format!(
                "  - name: dep{i}\n    kind: KudoOperator\n    spec:\n      package: {d}\n"
            ));
            steps.push_str(&format!(
                "          - name: dep{i}\n            tasks: [dep{i}]\n"
            ));
        }
        std::fs::write(
            dir.join("operator.yaml"),
            format!(
                "apiVersion: kudo.dev/v1beta1\nname: {name}\noperatorVersion: {version}\ntasks:\n{tasks}plans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n{steps}"
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("params.yaml"),
            "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("templates/cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}\n",
        )
        .unwrap();
    }

    fn resolve_root(dir: &Path) -> Result<Dependencies, RepoError> {
        let root = kudo_package::read_path(dir).unwrap();
        let home = tempfile::tempdir().unwrap();
        resolve_dependencies(
            home.path(),
            &root,
            &Source::Local(dir.display().to_string()),
            &Fetcher::default(),
        )
    }

    #[test]
    fn relative_paths_resolve_next_to_the_parent_leaves_first() {
        let t = tempfile::tempdir().unwrap();
        write_pkg(&t.path().join("app"), "app", "1.0.0", &["../db", "../cache"]);
        write_pkg(&t.path().join("db"), "db", "2.0.0", &["../disk"]);
        write_pkg(&t.path().join("disk"), "disk", "0.1.0", &[]);
        write_pkg(&t.path().join("cache"), "cache", "3.0.0", &["../disk"]);
        let deps = resolve_root(&t.path().join("app")).unwrap();
        let order: Vec<String> = deps
            .packages
            .iter()
            .map(|d| d.package.operator_version_name())
            .collect();
        assert_eq!(order, ["disk-0.1.0", "db-2.0.0", "cache-3.0.0"]);
        assert_eq!(
            deps.pins[&PinKey::new("app-1.0.0", "dep0")],
            Pin {
                package: "db".into(),
                app_version: String::new(),
                operator_version: "2.0.0".into()
            }
        );
        assert_eq!(deps.pins[&PinKey::new("cache-3.0.0", "dep0")].package, "disk");
        assert_eq!(deps.pins.len(), 4);
    }

    #[test]
    fn cycles_are_rejected_with_their_path() {
        let t = tempfile::tempdir().unwrap();
        write_pkg(&t.path().join("a"), "a", "1.0.0", &["../b"]);
        write_pkg(&t.path().join("b"), "b", "1.0.0", &["../a"]);
        let err = resolve_root(&t.path().join("a")).unwrap_err().to_string();
        assert_eq!(err, "cyclic operator dependency: a-1.0.0 → b-1.0.0 → a-1.0.0");
    }

    #[test]
    fn a_missing_dependency_names_parent_and_task() {
        let t = tempfile::tempdir().unwrap();
        write_pkg(&t.path().join("a"), "a", "1.0.0", &["../nowhere"]);
        let err = resolve_root(&t.path().join("a")).unwrap_err().to_string();
        assert!(
            err.starts_with("dependency ../nowhere of a-1.0.0 (task \"dep0\"): package "),
            "{err}"
        );
        assert!(err.contains("not found"), "{err}");
    }

    #[test]
    fn pin_rewrites_only_the_resolved_tasks() {
        let t = tempfile::tempdir().unwrap();
        write_pkg(&t.path().join("app"), "app", "1.0.0", &["../db"]);
        write_pkg(&t.path().join("db"), "db", "2.0.0", &[]);
        let root = kudo_package::read_path(&t.path().join("app")).unwrap();
        let deps = resolve_root(&t.path().join("app")).unwrap();
        let mut res = kudo_package::resources::to_resources(&root, &Default::default()).unwrap();
        deps.pin(&mut res.operator_version);
        let task = res
            .operator_version
            .spec
            .tasks
            .iter()
            .find(|t| t.name == "dep0")
            .unwrap();
        assert_eq!(task.spec.package, "db");
        assert_eq!(task.spec.operator_version, "2.0.0");
        assert_eq!(task.spec.child_operator_version_name(), "db-2.0.0");
    }
}
