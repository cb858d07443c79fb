//! `$KUDO_HOME/repository/repositories.yaml`: the named repositories and which one is current.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::RepoError;

/// Format version of the repositories file.
pub const REPO_VERSION: &str = "v1";
/// Name of the repository KUDO ships configured.
pub const COMMUNITY_NAME: &str = "community";
/// URL of the community repository.
pub const COMMUNITY_URL: &str = "https://kudo-repository.storage.googleapis.com/v1";

/// One configured repository.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoEntry {
    /// The repository's name, as `--repo` and the context refer to it.
    pub name: String,
    /// Base URL of the repository, below which its `index.yaml` is found.
    pub url: String,
}

/// The whole repositories file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepositoryConfig {
    /// `repoVersion`: format version of the file ([`REPO_VERSION`]).
    #[serde(default)]
    pub repo_version: String,
    /// Name of the repository used when a command gets no `--repo`.
    #[serde(default)]
    pub context: String,
    /// The configured repositories; names are unique.
    #[serde(default)]
    pub repositories: Vec<RepoEntry>,
}

impl Default for RepositoryConfig {
    /// What `kubectl kudo init` writes: the community repository, as the context.
    fn default() -> RepositoryConfig {
        RepositoryConfig {
            repo_version: REPO_VERSION.into(),
            context: COMMUNITY_NAME.into(),
            repositories: vec![RepoEntry {
                name: COMMUNITY_NAME.into(),
                url: COMMUNITY_URL.into(),
            }],
        }
    }
}

/// `<home>/repository/repositories.yaml`.
pub fn config_path(home: &Path) -> PathBuf {
    home.join("repository").join("repositories.yaml")
}

impl RepositoryConfig {
    /// Reads the file under `home`; a missing file means the default configuration, so commands
    /// work before `kubectl kudo init` has written one.
    pub fn load(home: &Path) -> Result<RepositoryConfig, RepoError> {
        let path = config_path(home);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RepositoryConfig::default()),
            Err(e) => return Err(RepoError::io(path, e)),
        };
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses the file's text.
    pub fn parse(text: &str, what: &str) -> Result<RepositoryConfig, RepoError> {
        if text.trim().is_empty() {
            return Ok(RepositoryConfig {
                repo_version: REPO_VERSION.into(),
                context: String::new(),
                repositories: vec![],
            });
        }
        let cfg: RepositoryConfig =
            serde_saphyr::from_str_with_options(text, kudo_template::data::go_yaml_options()).map_err(
                |e| RepoError::Parse {
                    what: what.into(),
                    message: kudo_template::data::yaml_error_message(&e),
                },
            )?;
        Ok(cfg)
    }

    /// Writes the file under `home`, creating `repository/` as needed.
    pub fn save(&self, home: &Path) -> Result<(), RepoError> {
        let path = config_path(home);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| RepoError::io(dir, e))?;
        }
        let text = serde_saphyr::to_string(self).map_err(|e| RepoError::Parse {
            what: "repositories file".into(),
            message: e.to_string(),
        })?;
        std::fs::write(&path, text).map_err(|e| RepoError::io(path, e))
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&RepoEntry> {
        self.repositories.iter().find(|r| r.name == name)
    }

    /// Adds a repository; names are unique.
    pub fn add(&mut self, entry: RepoEntry) -> Result<(), RepoError> {
        if self.get(&entry.name).is_some() {
            return Err(RepoError::Config(format!(
                "repository name ({}) already exists, please specify a different name",
                entry.name
            )));
        }
        self.repositories.push(entry);
        Ok(())
    }

    /// Removes a repository. Removing the context repository leaves no context, so later commands
    /// ask for `--repo` instead of silently using another repository.
    pub fn remove(&mut self, name: &str) -> Result<(), RepoError> {
        let before = self.repositories.len();
        self.repositories.retain(|r| r.name != name);
        if self.repositories.len() == before {
            return Err(RepoError::Config(format!("no repo named {name:?} found")));
        }
        if self.context == name {
            self.context.clear();
        }
        Ok(())
    }

    /// Makes `name` the current repository.
    pub fn set_context(&mut self, name: &str) -> Result<(), RepoError> {
        if self.repositories.is_empty() {
            return Err(RepoError::Config("no repositories to set".into()));
        }
        if self.get(name).is_none() {
            return Err(RepoError::Config(format!("no repo named {name:?} found")));
        }
        self.context = name.into();
        Ok(())
    }

    /// The repository a command uses: `requested`, else the context.
    pub fn current(&self, requested: Option<&str>) -> Result<&RepoEntry, RepoError> {
        match requested.filter(|r| !r.is_empty()) {
            Some(name) => self
                .get(name)
                .ok_or_else(|| RepoError::Config(format!("no repo named {name:?} found"))),
            None if self.context.is_empty() => Err(RepoError::Config(
                "no current repository: set one with `kubectl kudo repo context NAME` or pass --repo".into(),
            )),
            None => self.get(&self.context).ok_or_else(|| {
                RepoError::Config(format!(
                    "the context repository {:?} is not configured",
                    self.context
                ))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_is_the_community_default_and_save_load_round_trips() {
        let home = tempfile::tempdir().unwrap();
        let cfg = RepositoryConfig::load(home.path()).unwrap();
        assert_eq!(cfg.current(None).unwrap().url, COMMUNITY_URL);
        let mut cfg = cfg;
        cfg.add(RepoEntry {
            name: "local".into(),
            url: "file:///tmp/r".into(),
        })
        .unwrap();
        cfg.set_context("local").unwrap();
        cfg.save(home.path()).unwrap();
        let text = std::fs::read_to_string(config_path(home.path())).unwrap();
        assert!(
            text.contains("repoVersion: v1") && text.contains("context: local"),
            "{text}"
        );
        assert_eq!(RepositoryConfig::load(home.path()).unwrap(), cfg);
    }

    #[test]
    fn reads_kudo_written_file() {
        let text = "repoVersion: v1\ncontext: community\nrepositories:\n  - name: community\n    url: https://kudo-repository.storage.googleapis.com/v1\n";
        assert_eq!(
            RepositoryConfig::parse(text, "x").unwrap(),
            RepositoryConfig::default()
        );
        assert!(RepositoryConfig::parse("repositories: 3\n", "x").is_err());
    }

    #[test]
    fn add_remove_context_rules() {
        let mut cfg = RepositoryConfig::default();
        let e = cfg
            .add(RepoEntry {
                name: "community".into(),
                url: "x".into(),
            })
            .unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
        assert!(cfg.set_context("nope").is_err());
        assert!(cfg.current(Some("nope")).is_err());
        cfg.remove("community").unwrap();
        assert!(cfg.context.is_empty());
        assert!(cfg.current(None).unwrap_err().to_string().contains("--repo"));
        assert_eq!(
            cfg.remove("community").unwrap_err().to_string(),
            "no repo named \"community\" found"
        );
        assert_eq!(
            cfg.set_context("x").unwrap_err().to_string(),
            "no repositories to set"
        );
    }
}
