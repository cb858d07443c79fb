//! The filesystems of a simulated pod: a private root per container, one tree per volume (an
//! `emptyDir` shared by the pod's containers, a claim's data shared by the pods that mount it,
//! a ConfigMap's or Secret's files), and the shell's file operations on them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::exec::Shell;

/// Directories every container's root has.
const SYSTEM_DIRS: [&str; 24] = [
    "bin",
    "dev",
    "etc",
    "home",
    "opt",
    "proc",
    "proc/sys",
    "root",
    "run",
    "sbin",
    "srv",
    "sys",
    "tmp",
    "usr",
    "usr/bin",
    "usr/local",
    "usr/local/bin",
    "usr/sbin",
    "usr/share",
    "var",
    "var/lib",
    "var/log",
    "var/run",
    "var/tmp",
];

/// Mode, owner and group of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Permission bits (`0o755` for a new directory, `0o644` for a new file).
    pub mode: u32,
    /// Owning user id.
    pub uid: u32,
    /// Owning group id.
    pub gid: u32,
}

/// One directory tree: files with contents and directories, by path relative to its root (no
/// leading slash; the root itself is "").
#[derive(Debug, Default, Clone)]
pub struct Tree {
    pub(crate) files: BTreeMap<String, Vec<u8>>,
    pub(crate) dirs: BTreeSet<String>,
    pub(crate) meta: BTreeMap<String, Meta>,
}

impl Tree {
    /// A tree holding `files` (relative paths; their directories are created).
    pub fn with_files(files: impl IntoIterator<Item = (String, Vec<u8>)>) -> Tree {
        let mut t = Tree::default();
        for (path, data) in files {
            let path = path.trim_start_matches('/').to_string();
            let mut dir = path.as_str();
            while let Some((d, _)) = dir.rsplit_once('/') {
                t.dirs.insert(d.to_string());
                dir = d;
            }
            t.files.insert(path, data);
        }
        t
    }

    /// The files of the tree, by relative path.
    pub fn files(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.files
    }

    /// Sets the mode and owner of a path of the tree.
    pub fn set_meta(&mut self, path: &str, m: Meta) {
        self.meta.insert(path.trim_start_matches('/').to_string(), m);
    }
}

/// The filesystems of one pod: a private root per container and one tree per volume.
#[derive(Debug, Default, Clone)]
pub struct PodFs {
    pub(crate) roots: HashMap<String, Tree>,
    /// Volume name → its tree (created empty when first used).
    pub volumes: HashMap<String, Tree>,
}

/// `base` joined with `p`, with `.`, `..` and repeated slashes resolved.
pub(crate) fn normalize(base: &str, p: &str) -> String {
    let joined = if p.starts_with('/') {
        p.to_string()
    } else {
        format!("{base}/{p}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in joined.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

pub(crate) fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

pub(crate) fn basename(p: &str) -> &str {
    let t = p.trim_end_matches('/');
    t.rsplit('/').next().unwrap_or(t)
}

impl Shell<'_> {
    pub fn abs(&self, p: &str) -> String {
        normalize(&self.cwd, p)
    }

    /// The mount `abs` is under, if any (the longest mount path wins).
    fn mount_of(&self, abs: &str) -> Option<&super::Mount> {
        self.ctr
            .mounts
            .iter()
            .filter(|m| abs == m.path || abs.starts_with(&format!("{}/", m.path.trim_end_matches('/'))))
            .max_by_key(|m| m.path.len())
    }

    /// The tree and relative path an absolute path lives in.
    fn locate(&mut self, abs: &str) -> (&mut Tree, String) {
        match self.mount_of(abs).cloned() {
            Some(m) => {
                let rest = abs[m.path.len().min(abs.len())..].trim_start_matches('/');
                let rel = match (m.sub_path.trim_matches('/'), rest) {
                    ("", r) => r.to_string(),
                    (s, "") => s.to_string(),
                    (s, r) => format!("{s}/{r}"),
                };
                (self.fs.volumes.entry(m.volume).or_default(), rel)
            }
            None => (
                self.fs.roots.entry(self.ctr.name.clone()).or_default(),
                abs.trim_start_matches('/').to_string(),
            ),
        }
    }

    /// A `subPath` mount of one file of a ConfigMap or Secret.
    fn file_mount(&self, m: &super::Mount) -> bool {
        !m.sub_path.is_empty() && matches!(m.source.as_str(), "configMap" | "secret" | "projected")
    }

    /// The volume kind and name `abs` is in, when it is a volume whose files kudo-sim does not
    /// provide (downward API, hostPath).
    pub fn unprovided_volume(&self, abs: &str) -> Option<(String, String)> {
        self.mount_of(abs)
            .filter(|m| matches!(m.source.as_str(), "downwardAPI" | "hostPath"))
            .map(|m| (m.source.clone(), m.volume.clone()))
    }

    fn read_only(&self, abs: &str) -> bool {
        self.mount_of(abs).is_some_and(|m| m.read_only)
    }

    /// Mount points, their parents, the working directory and the system directories exist.
    fn implicit_dir(&self, abs: &str) -> bool {
        let rel = abs.trim_start_matches('/');
        abs == "/"
            || SYSTEM_DIRS.contains(&rel)
            || normalize("/", &self.ctr.workdir) == abs && !self.ctr.workdir.is_empty()
            || self.ctr.mounts.iter().any(|m| {
                (m.path == abs && !self.file_mount(m))
                    || m.path.starts_with(&format!("{}/", abs.trim_end_matches('/')))
            })
    }

    pub fn is_dir(&mut self, abs: &str) -> bool {
        if self.implicit_dir(abs) {
            return true;
        }
        let (t, rel) = self.locate(abs);
        rel.is_empty() || t.dirs.contains(&rel)
    }

    pub fn read_file(&mut self, abs: &str) -> Option<Vec<u8>> {
        match abs {
            "/dev/null" => return Some(Vec::new()),
            "/etc/hostname" => return Some(format!("{}\n", self.ctr.hostname).into_bytes()),
            _ => {}
        }
        let (t, rel) = self.locate(abs);
        t.files.get(&rel).cloned()
    }

    pub fn exists(&mut self, abs: &str) -> bool {
        self.is_dir(abs) || self.read_file(abs).is_some()
    }

    /// Writes a file; `Err` is the shell's message.
    pub fn write_file(&mut self, abs: &str, data: &[u8], append: bool) -> Result<(), String> {
        if abs == "/dev/null" {
            return Ok(());
        }
        if self.is_dir(abs) {
            return Err(format!("{abs}: Is a directory"));
        }
        let par = parent(abs).to_string();
        if !self.is_dir(&par) {
            return Err(format!("{abs}: No such file or directory"));
        }
        if self.read_only(abs) {
            return Err(format!("{abs}: Read-only file system"));
        }
        let (t, rel) = self.locate(abs);
        let f = t.files.entry(rel).or_default();
        if !append {
            f.clear();
        }
        f.extend_from_slice(data);
        Ok(())
    }

    pub fn mkdir(&mut self, abs: &str) {
        if self.implicit_dir(abs) {
            return;
        }
        let (t, rel) = self.locate(abs);
        if !rel.is_empty() {
            t.dirs.insert(rel);
        }
    }

    /// Paths (absolute) under directory `abs`, files and directories, sorted.
    pub fn children(&mut self, abs: &str) -> Vec<String> {
        let mut out = BTreeSet::new();
        let (t, rel) = self.locate(abs);
        let prefix = if rel.is_empty() {
            String::new()
        } else {
            format!("{rel}/")
        };
        for k in t.files.keys().chain(t.dirs.iter()) {
            if let Some(rest) = k.strip_prefix(&prefix)
                && !rest.is_empty()
            {
                out.insert(rest.split('/').next().unwrap_or(rest).to_string());
            }
        }
        let base = abs.trim_end_matches('/').to_string();
        let extra = self.ctr.mounts.iter().map(|m| m.path.clone()).chain(
            (abs == "/")
                .then(|| {
                    SYSTEM_DIRS
                        .iter()
                        .filter(|d| !d.contains('/'))
                        .map(|d| format!("/{d}"))
                })
                .into_iter()
                .flatten(),
        );
        for p in extra.collect::<Vec<_>>() {
            if parent(&p) == abs && p != abs {
                out.insert(basename(&p).to_string());
            }
        }
        out.into_iter().map(|n| format!("{base}/{n}")).collect()
    }

    pub fn remove(&mut self, abs: &str, recursive: bool) -> Result<(), String> {
        if self.read_only(abs) {
            return Err(format!("cannot remove '{abs}': Read-only file system"));
        }
        if self.is_dir(abs) {
            if !recursive {
                return Err(format!("cannot remove '{abs}': Is a directory"));
            }
            let (t, rel) = self.locate(abs);
            let prefix = format!("{rel}/");
            t.files.retain(|k, _| !k.starts_with(&prefix));
            t.dirs.retain(|k| !k.starts_with(&prefix) && *k != rel);
            return Ok(());
        }
        let (t, rel) = self.locate(abs);
        if t.files.remove(&rel).is_none() {
            return Err(format!("cannot remove '{abs}': No such file or directory"));
        }
        t.meta.remove(&rel);
        Ok(())
    }

    pub fn meta(&mut self, abs: &str) -> Meta {
        let dir = self.is_dir(abs);
        let (t, rel) = self.locate(abs);
        t.meta.get(&rel).copied().unwrap_or(Meta {
            mode: if dir { 0o755 } else { 0o644 },
            uid: 0,
            gid: 0,
        })
    }

    pub fn set_meta(&mut self, abs: &str, m: Meta) -> Result<(), String> {
        if self.read_only(abs) {
            return Err("Read-only file system".into());
        }
        let (t, rel) = self.locate(abs);
        t.meta.insert(rel, m);
        Ok(())
    }

    /// Every path below `abs` (itself first), for recursive operations.
    pub fn walk(&mut self, abs: &str) -> Vec<String> {
        let mut out = vec![abs.to_string()];
        if self.is_dir(abs) {
            for c in self.children(abs) {
                out.extend(self.walk(&c));
            }
        }
        out
    }

    /// Pathname expansion: the sorted paths matching `pattern` (relative to the working
    /// directory when it is relative).
    pub fn glob(&mut self, pattern: &str) -> Vec<String> {
        let absolute = pattern.starts_with('/');
        let mut current: Vec<String> = vec![if absolute { "/".into() } else { self.cwd.clone() }];
        let mut shown: Vec<String> = vec![String::new()];
        for comp in pattern.split('/').filter(|c| !c.is_empty()) {
            let mut next = Vec::new();
            let mut next_shown = Vec::new();
            for (dir, show) in current.iter().zip(&shown) {
                let join = |base: &str, name: &str| {
                    if base.is_empty() {
                        name.to_string()
                    } else {
                        format!("{}/{name}", base.trim_end_matches('/'))
                    }
                };
                if !comp.contains(['*', '?', '[']) {
                    let name = super::pattern::unescape(comp);
                    let p = normalize(dir, &name);
                    if self.exists(&p) {
                        next.push(p);
                        next_shown.push(join(show, &name));
                    }
                    continue;
                }
                for child in self.children(dir) {
                    let name = basename(&child).to_string();
                    if name.starts_with('.') && !comp.starts_with('.') {
                        continue;
                    }
                    if super::pattern::matches(comp, &name) {
                        next.push(child);
                        next_shown.push(join(show, &name));
                    }
                }
            }
            current = next;
            shown = next_shown;
        }
        let mut out: Vec<String> = shown
            .into_iter()
            .map(|s| {
                if absolute {
                    format!("/{}", s.trim_start_matches('/'))
                } else {
                    s
                }
            })
            .filter(|s| !s.is_empty())
            .collect();
        out.sort();
        out
    }
}
