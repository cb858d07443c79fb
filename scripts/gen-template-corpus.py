#!/usr/bin/env python3
"""Writes the differential corpus of crates/kudo-template (templates and data files only).

The expected results (NAME.out / NAME.err) are NOT written here: they come from the Go oracle via
scripts/regen-template-goldens.sh. Re-running this script rewrites every .tmpl/.json/.yaml it owns
and removes case files (and their goldens) whose case no longer exists, so the corpus stays the
single source of truth checked into git.

Layout: tests/corpus/<category>/NAME.tmpl, optional NAME.json/NAME.yaml, shared data.json.
Usage: python3 scripts/gen-template-corpus.py
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "crates", "kudo-template", "tests", "corpus")

# KUDO-style data: what KUDO hands a template (all parameters are strings), plus a few
# JSON-typed values to exercise the engine on every Go type a template can see.
KUDO = {
    "Name": "galera-instance",
    "Namespace": "default",
    "OperatorName": "galera",
    "OperatorVersion": "0.1.0",
    "AppVersion": "10.4",
    "PlanName": "deploy",
    "PhaseName": "deploy",
    "StepName": "firstboot_config",
    "Params": {
        "NODE_COUNT": "3",
        "SST_USER": "root",
        "SST_PASSWORD": "admin",
        "MYSQL_PORT": "3306",
        "SST_PORT": "4444",
        "REPLICATION_PORT": "4567",
        "IST_PORT": "4568",
        "MYSQL_ROOT_PASSWORD": "admin",
        "VOLUME_SIZE": "10M",
        "ANTI_AFFINITY": "true",
        "EMPTY": "",
        "BOOL": "false",
    },
}

TYPED = dict(KUDO)
TYPED.update({
    "str": "hello",
    "word": "Hello World",
    "upper": "HELLO",
    "csv": "a,b,c",
    "space": "  padded  ",
    "html": "<a href=\"x\">Tom & 'Jerry'</a>",
    "multi": "line one\nline two\n",
    "uni": "héllo wörld ✓",
    "num": 3,
    "zero": 0,
    "neg": -4,
    "float": 2.5,
    "big": 1000000,
    "huge": 1e21,
    "small": 0.000001,
    "t": True,
    "f": False,
    "nil": None,
    "list": [1, 2, 3],
    "strs": ["banana", "apple", "cherry"],
    "mixed": [1, "two", True, None, 2.5],
    "empty": [],
    "dups": ["a", "b", "a", "c", "b"],
    "map": {"b": 2, "a": 1, "c": 3},
    "smap": {"zeta": "z", "alpha": "a", "mid": "m"},
    "emptymap": {},
    "nested": {"a": {"b": {"c": "deep"}}},
    "users": [
        {"name": "ann", "age": 30, "admin": True},
        {"name": "bob", "age": 25, "admin": False},
    ],
    "matrix": [[1, 2], [3, 4]],
    "date": "2020-05-01",
    "ver": "1.2.3-beta.1+build.5",
})

class Raw(str):
    """Data written verbatim (for JSON spellings json.dumps would not produce)."""


CASES = {}  # category -> list of (name, template, data or None, data_ext)


def case(cat, name, tpl, data=None, ext="json"):
    lst = CASES.setdefault(cat, [])
    assert all(c[0] != name for c in lst), (cat, name)
    lst.append((name, tpl, data, ext))


# ---------------------------------------------------------------------------------------------
# oracle: the oracle's own testdata/cases (copied, so the corpus is self-contained)
# ---------------------------------------------------------------------------------------------
ORACLE_CASES = "/work/shared/go-template-oracle/testdata/cases"


def oracle_cases():
    here = os.path.join(ROOT, "..", "shared", "go-template-oracle", "testdata", "cases")
    src = here if os.path.isdir(here) else ORACLE_CASES
    files = {}
    for f in sorted(os.listdir(src)):
        with open(os.path.join(src, f), encoding="utf-8") as fh:
            files[f] = fh.read()
    return files


# ---------------------------------------------------------------------------------------------
# galera: the templates of the Galera walkthrough (seeds/galera-part1..3), KUDO data only
# ---------------------------------------------------------------------------------------------
GALERA_ADDR_FIRSTBOOT = "wsrep_cluster_address = gcomm://{{ .Name }}-bootstrap-svc,{{ $.Name }}-{{ $.OperatorName }}-0.{{ $.Name }}-hs{{ range $i, $v := untilStep 1 (int .Params.NODE_COUNT) 1 }},{{ $.Name }}-{{ $.OperatorName }}-{{ $v }}.{{ $.Name }}-hs{{end}}"
GALERA_ADDR_OTHER = "wsrep_cluster_address = gcomm://{{ $.Name }}-{{ $.OperatorName }}-0.{{ $.Name }}-hs{{ range $i, $v := untilStep 1 (int .Params.NODE_COUNT) 1 }},{{ $.Name }}-{{ $.OperatorName }}-{{ $v }}.{{ $.Name }}-hs{{end}}"

G_BOOTSTRAP_CONFIG = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-bootstrap
  namespace: {{ .Namespace }}
data:
  galera.cnf: |
    [galera]
    wsrep_on = ON
    wsrep_provider = /usr/lib/galera/libgalera_smm.so
    wsrep_sst_method = mariabackup
    wsrep_cluster_address = gcomm://
    wsrep_sst_auth = "{{ .Params.SST_USER }}:{{ .Params.SST_PASSWORD }}"
    binlog_format = ROW
"""

G_BOOTSTRAP_SERVICE = """apiVersion: v1
kind: Service
metadata:
  name: {{ .Name }}-bootstrap-svc
  namespace: {{ .Namespace }}
  labels:
    app: galera-bootstrap
spec:
  ports:
    - port: {{ .Params.MYSQL_PORT }}
      name: mysql
    - port: {{ .Params.SST_PORT }}
      name: sst 
    - port: {{ .Params.REPLICATION_PORT }}
      name: replication
    - port: {{ .Params.IST_PORT }}
      name: ist 
  selector:
    app: galera-bootstrap
    instance: {{ .Name }}
  clusterIP: None
"""

G_BOOTSTRAP_DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}-bootstrap
  namespace: {{ .Namespace }}
  labels:
    app: galera-bootstrap
    instance: {{ .Name }}
spec:
  selector:
    matchLabels:
      app: galera-bootstrap
      instance: {{ .Name }}
  strategy:
    type: Recreate
  template:
    metadata:
      labels:
        app: galera-bootstrap
        instance: {{ .Name }}
    spec:
      containers:
      - image: mariadb:latest
        name: mariadb
        args:
        - "--ignore_db_dirs=lost+found"
        env:
          # Use secret in real usage
        - name: MYSQL_ROOT_PASSWORD
          value: {{ .Params.MYSQL_ROOT_PASSWORD }}
        ports:
        - containerPort: {{ .Params.MYSQL_PORT }}
          name: mysql
        - containerPort: {{ .Params.SST_PORT }}
          name: sst
        - containerPort: {{ .Params.REPLICATION_PORT }}
          name: replication
        - containerPort: {{ .Params.IST_PORT }}
          name: ist
        livenessProbe:
          exec:
            command: ["mysqladmin", "-p{{ .Params.MYSQL_ROOT_PASSWORD }}", "ping"]
          initialDelaySeconds: 30
          periodSeconds: 10
          timeoutSeconds: 5
        readinessProbe:
          exec:
            # Check we can execute queries over TCP (skip-networking is off).
            command: ["mysql", "-p{{ .Params.MYSQL_ROOT_PASSWORD }}", "-h", "127.0.0.1", "-e", "SELECT 1"]
          initialDelaySeconds: 5
          periodSeconds: 2
          timeoutSeconds: 1
        volumeMounts:
        - name: {{ .Name }}-bootstrap
          mountPath: /etc/mysql/conf.d
      volumes:
        - name: {{ .Name }}-bootstrap
          configMap:
            name: {{ .Name }}-bootstrap
            items:
            - key: galera.cnf
              path: galera.cnf
"""

G_CONFIG_V1 = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-nodeconfig
  namespace: {{ .Namespace }}
data:
  galera.cnf: |
    [galera]
    wsrep_on = ON
    wsrep_provider = /usr/lib/galera/libgalera_smm.so
    wsrep_sst_method = mariabackup
    """ + GALERA_ADDR_FIRSTBOOT + """
    wsrep_sst_auth = "{{ .Params.SST_USER }}:{{ .Params.SST_PASSWORD }}"
    binlog_format = ROW
  innodb.cnf: |
    [innodb]
    innodb_autoinc_lock_mode = 2
    innodb_flush_log_at_trx_commit = 0
    innodb_buffer_pool_size = 122M
"""

G_CONFIG_V2 = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-nodeconfig
  namespace: {{ .Namespace }}
data:
  galera.cnf: |
    [galera]
    wsrep_on = ON
    wsrep_provider = /usr/lib/galera/libgalera_smm.so
    wsrep_sst_method = mariabackup
    {{ if eq .StepName "firstboot_config" -}}
    """ + GALERA_ADDR_FIRSTBOOT + """
    {{ else -}}
    """ + GALERA_ADDR_OTHER + """
    {{ end -}}
    wsrep_sst_auth = "{{ .Params.SST_USER }}:{{ .Params.SST_PASSWORD }}"
    binlog_format = ROW
  innodb.cnf: |
    [innodb]
    innodb_autoinc_lock_mode = 2
    innodb_flush_log_at_trx_commit = 0
    innodb_buffer_pool_size = 122M
"""

G_CONFIG_KO = """{{ if eq .StepName "firstboot_config" -}}
  """ + GALERA_ADDR_FIRSTBOOT + """
{{ else -}}
  wsrep_cluster_address = gcomm://{{ $.Name }}-galera-0.{{ $.Name }}-hs{{ range $i, $v := untilStep 1 (int .Params.NODE_COUNT) 1 }},{{ $.Name }}-galera-{{ $v }}.{{ $.Name }}-hs{{end}}
{{ end -}}
"""

G_HS_SERVICE = """apiVersion: v1
kind: Service
metadata:
  name: {{ .Name }}-hs
  namespace: {{ .Namespace }}
  labels:
    app: galera
    galera: {{ .Name }} 
spec:
  ports:
    - port: {{ .Params.MYSQL_PORT }}
      name: mysql
    - port: {{ .Params.SST_PORT }}
      name: sst
    - port: {{ .Params.REPLICATION_PORT }}
      name: replication
    - port: {{ .Params.IST_PORT }}
      name: ist
  clusterIP: None
  selector:
    app: galera
    instance: {{ .Name }}
"""

G_CS_SERVICE = """apiVersion: v1
kind: Service
metadata:
  name: {{ .Name }}-cs
  namespace: {{ .Namespace }}
  labels:
    app: galera
    galera: {{ .Name }} 
spec:
  ports:
    - port: {{ .Params.MYSQL_PORT }}
      name: mysql
  selector:
    app: galera
    instance: {{ .Name }}
"""

G_NODE_SCRIPTS = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-node-scripts
  namespace: {{ .Namespace }}
data:
  wait-for-sync.sh: |
    until mysql -u root -p{{ .Params.MYSQL_ROOT_PASSWORD }} -e "SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment';" | grep -q Synced 
    do
        echo "Waiting for sync"
        sleep 5
    done
"""

G_STATEFULSET = """apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Name }}-{{ .OperatorName }}
  namespace: {{ .Namespace }}
  labels:
    galera: {{ .OperatorName }}
    app: galera
    instance: {{ .Name }}
  annotations:
    reloader.kudo.dev/auto: "true"
spec:
  selector:
    matchLabels:
      app: galera
      galera: {{ .OperatorName }}
      instance: {{ .Name }}
  serviceName: {{ .Name }}-hs
  replicas: {{ .Params.NODE_COUNT }}
  updateStrategy:
    type: RollingUpdate
  template:
    metadata:
      labels:
        app: galera
        galera: {{ .OperatorName }}
        instance: {{ .Name }}
    spec:
      {{ if eq .Params.ANTI_AFFINITY "true" }}
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector:
                matchExpressions:
                  - key: "app"
                    operator: In
                    values:
                    - galera
                  - key: "instance"
                    operator: In
                    values:
                    - {{ .Name }}
              topologyKey: "kubernetes.io/hostname"
      {{ end }}
      initContainers:
      # Stop the image bootstrap script from trying to set up single master
      - name: {{ .Name }}-init
        image: busybox:1.28
        command: ['sh', '-c', 'set -x; if [ ! -d /datadir/mysql ]; then mkdir /datadir/mysql; fi']
        volumeMounts:
          - name: {{ .Name }}-datadir
            mountPath: "/datadir"
      containers:
      - name: mariadb
        image: mariadb:latest
        args:
        - "--ignore_db_dirs=lost+found"
        env:
          # Use secret in real usage
        - name: MYSQL_ROOT_PASSWORD
          value: {{ .Params.MYSQL_ROOT_PASSWORD }}
        ports:
        - containerPort: {{ .Params.MYSQL_PORT }}
          name: mysql
        - containerPort: {{ .Params.SST_PORT }}
          name: sst
        - containerPort: {{ .Params.REPLICATION_PORT }}
          name: replication
        - containerPort: {{ .Params.IST_PORT }}
          name: ist
        livenessProbe:
          exec:
            command: ["mysqladmin", "-p{{ .Params.MYSQL_ROOT_PASSWORD }}", "ping"]
          initialDelaySeconds: 30
          periodSeconds: 10
          timeoutSeconds: 5
        readinessProbe:
          exec:
            # Check we can execute queries over TCP (skip-networking is off).
            command: ["mysql", "-p{{ .Params.MYSQL_ROOT_PASSWORD }}", "-h", "127.0.0.1", "-e", "SELECT 1"]
          initialDelaySeconds: 5
          periodSeconds: 2
          timeoutSeconds: 1
        volumeMounts:
        - name: {{ .Name }}-config
          mountPath: /etc/mysql/conf.d
        - name: {{ .Name }}-datadir
          mountPath: /var/lib/mysql
        - name: {{ .Name }}-node-scripts
          mountPath: /etc/galera/wait-for-sync.sh
          subPath: wait-for-sync.sh
      volumes:
      - name: {{ .Name }}-config
        configMap:
          name: {{ .Name }}-nodeconfig
          items:
            - key: galera.cnf
              path: galera.cnf
            - key: innodb.cnf
              path: innodb.cnf
      - name: {{ .Name }}-node-scripts
        configMap:
          name: {{ .Name }}-node-scripts
          defaultMode: 0755
  volumeClaimTemplates:
    - metadata:
        name: {{ .Name }}-datadir
      spec:
        accessModes: [ "ReadWriteOnce" ]
        resources:
          requests:
            storage: {{ .Params.VOLUME_SIZE }}
"""


def kudo_data(name="galera-instance", ns="default", step="firstboot_config", **params):
    d = json.loads(json.dumps(KUDO))
    d["Name"] = name
    d["Namespace"] = ns
    d["StepName"] = step
    d["Params"].update(params)
    return d


def galera():
    c = lambda n, t, d=None: case("galera", n, t, d)
    c("bootstrap-config", G_BOOTSTRAP_CONFIG)
    c("bootstrap-config-other-instance", G_BOOTSTRAP_CONFIG, kudo_data("db1", "prod", SST_USER="sst", SST_PASSWORD="p@ss:w\"rd"))
    c("bootstrap-service", G_BOOTSTRAP_SERVICE)
    c("bootstrap-service-ports", G_BOOTSTRAP_SERVICE, kudo_data("g2", "ns2", MYSQL_PORT="13306", SST_PORT="14444", REPLICATION_PORT="14567", IST_PORT="14568"))
    c("bootstrap-deploy", G_BOOTSTRAP_DEPLOY)
    c("bootstrap-deploy-password", G_BOOTSTRAP_DEPLOY, kudo_data(MYSQL_ROOT_PASSWORD="s3cr3t&<>"))
    c("galera-config-v1", G_CONFIG_V1)
    for n in (1, 2, 3, 5, 9):
        c(f"galera-config-v1-nodes-{n}", G_CONFIG_V1, kudo_data(f"gal{n}", NODE_COUNT=str(n)))
    for step in ("firstboot_config", "node_config", "cluster_config"):
        for n in (1, 3, 7):
            c(f"galera-config-v2-{step.replace('_', '-')}-{n}", G_CONFIG_V2, kudo_data(step=step, NODE_COUNT=str(n)))
    c("galera-config-v2-node-count-0", G_CONFIG_V2, kudo_data(NODE_COUNT="0"))
    c("galera-config-v2-node-count-empty", G_CONFIG_V2, kudo_data(NODE_COUNT=""))
    c("galera-config-v2-node-count-bad", G_CONFIG_V2, kudo_data(NODE_COUNT="three"))
    c("galera-config-v2-node-count-float", G_CONFIG_V2, kudo_data(NODE_COUNT="3.0"))
    c("galera-config-v2-no-stepname", G_CONFIG_V2, {k: v for k, v in KUDO.items() if k != "StepName"})
    c("galera-config-ko-firstboot", G_CONFIG_KO)
    c("galera-config-ko-other", G_CONFIG_KO, kudo_data(step="node_config", NODE_COUNT="4"))
    c("galera-address-only", GALERA_ADDR_FIRSTBOOT + "\n")
    c("galera-address-explained", "gcomm://{{ .Name }}-bootstrap-svc,{{ $.Name }}-{{ $.OperatorName }}-0.{{ $.Name }}-hs\n{{ range $i, $v := untilStep 1 (int .Params.NODE_COUNT) 1 }},{{ $.Name }}-{{ $.OperatorName }}-{{ $v }}.{{ $.Name }}-hs{{end}}\n")
    c("hs-service", G_HS_SERVICE)
    c("hs-service-other", G_HS_SERVICE, kudo_data("mysql-ha", "db"))
    c("cs-service", G_CS_SERVICE)
    c("node-scripts", G_NODE_SCRIPTS)
    c("node-scripts-password", G_NODE_SCRIPTS, kudo_data(MYSQL_ROOT_PASSWORD="$(rm -rf)"))
    c("statefulset-anti-affinity", G_STATEFULSET)
    c("statefulset-no-anti-affinity", G_STATEFULSET, kudo_data(ANTI_AFFINITY="false", NODE_COUNT="5", VOLUME_SIZE="1Gi"))
    c("statefulset-missing-param", G_STATEFULSET, {**KUDO, "Params": {k: v for k, v in KUDO["Params"].items() if k != "VOLUME_SIZE"}})
    c("statefulset-missing-anti-affinity", G_STATEFULSET, {**KUDO, "Params": {k: v for k, v in KUDO["Params"].items() if k != "ANTI_AFFINITY"}})
    c("params-toyaml", "params:\n{{ toYaml .Params | indent 2 }}")
    c("params-range", "{{ range $k, $v := .Params }}{{ $k }}={{ $v }}\n{{ end }}")
    c("instance-labels", "metadata:\n  labels:\n    kudo.dev/instance: {{ .Name | quote }}\n    kudo.dev/operator: {{ .OperatorName | quote }}\n    kudo.dev/plan: {{ .PlanName }}\n    kudo.dev/phase: {{ .PhaseName }}\n    kudo.dev/step: {{ .StepName }}\n    app.kubernetes.io/version: {{ .AppVersion | quote }}\n")
    c("replicas-int", "replicas: {{ int .Params.NODE_COUNT }}\nlast: {{ sub (int .Params.NODE_COUNT) 1 }}\n")
    c("anti-affinity-bool-compare", "{{ if eq .Params.ANTI_AFFINITY \"true\" }}on{{ else }}off{{ end }}\n")
    c("anti-affinity-bool-literal", "{{ if eq .Params.BOOL true }}on{{ else }}off{{ end }}\n")


# ---------------------------------------------------------------------------------------------
# syntax: every construct of text/template
# ---------------------------------------------------------------------------------------------
def syntax():
    c = lambda n, t, d=None: case("syntax", n, t, d)
    # text, comments, trim markers
    c("text-only", "plain text, no actions\n")
    c("empty-template", "")
    c("comment-only", "{{/* a comment */}}")
    c("comment-multiline", "a{{/* line one\nline two */}}b\n")
    c("comment-trimmed", "a  \n  {{- /* trimmed */ -}}  \n  b\n")
    c("comment-trim-left", "a   {{- /* x */}}   b\n")
    c("trim-both", "a  {{- .Name -}}  b\n")
    c("trim-left-newlines", "x\n\n\n{{- .Name }}\n")
    c("trim-right-newlines", "{{ .Name -}}\n\n\ny\n")
    c("trim-tabs-cr", "a \t\r\n{{- .Name -}} \t\r\nb")
    c("trim-number-not-minus", "{{-3}}|{{- 3}}|{{3 -}} |{{ -3 }}\n")
    c("trim-in-range", "{{ range .strs -}}\n  {{ . }}\n{{ end -}}\nend\n")
    c("trim-yaml-list", "items:\n{{- range .strs }}\n- {{ . }}\n{{- end }}\n")
    c("no-spaces-action", "{{.Name}}/{{.Namespace}}\n")
    c("unicode-text", "héllo {{ .uni }} ✓ 日本語\n")
    # fields and printing
    c("field-nested", "{{ .nested.a.b.c }}\n")
    c("field-root-dollar", "{{ $.Name }} {{ $.Params.NODE_COUNT }}\n")
    c("print-dot", "{{ . }}\n")
    c("print-map", "{{ .map }} {{ .smap }} {{ .emptymap }}\n")
    c("print-list", "{{ .list }} {{ .strs }} {{ .empty }}\n")
    c("print-mixed", "{{ .mixed }}\n")
    c("print-nil", "{{ .nil }}\n")
    c("print-users", "{{ .users }}\n")
    c("print-matrix", "{{ .matrix }}\n")
    c("print-bools", "{{ .t }} {{ .f }}\n")
    c("print-floats", "{{ .num }} {{ .zero }} {{ .neg }} {{ .float }} {{ .big }} {{ .huge }} {{ .small }}\n")
    c("print-nested-map", "{{ .nested }}\n")
    c("field-on-map-in-list", "{{ (index .users 1).name }} {{ (index .users 0).age }}\n")
    c("field-chain-paren", "{{ (.nested.a).b.c }}\n")
    c("field-of-dict-result", "{{ (dict \"a\" (dict \"b\" 1)).a.b }}\n")
    c("field-on-variable", "{{ $n := .nested }}{{ $n.a.b.c }}\n")
    c("dollar-in-range", "{{ range .strs }}{{ $.Name }}:{{ . }} {{ end }}\n")
    # literals
    c("literal-ints", "{{ 42 }} {{ -7 }} {{ 0x1F }} {{ 0o17 }} {{ 017 }} {{ 0b101 }} {{ 1_000 }}\n")
    c("literal-floats", "{{ 1.5 }} {{ 1.0 }} {{ 1e3 }} {{ 3.14159 }} {{ -0.5 }} {{ 1e21 }} {{ 0x1p4 }}\n")
    c("literal-chars", "{{ 'a' }} {{ '\\n' }} {{ '\\x41' }} {{ 'é' }}\n")
    c("literal-strings", "{{ \"a\\tb\" }}|{{ \"\\u00e9\\x41\" }}|{{ `raw\\n` }}|{{ \"q\\\"q\" }}\n")
    c("literal-bools", "{{ true }} {{ false }}\n")
    c("literal-raw-multiline", "{{ `line1\nline2` }}\n")
    c("literal-big-int", "{{ 9223372036854775807 }}\n")
    c("literal-int-overflow", "{{ 9223372036854775808 }}\n")
    c("literal-complex", "{{ 1i }}\n")
    # variables
    c("var-declare", "{{ $x := 1 }}{{ $x }}\n")
    c("var-assign", "{{ $x := 1 }}{{ $x = 2 }}{{ $x }}\n")
    c("var-assign-in-if", "{{ $x := \"a\" }}{{ if true }}{{ $x = \"b\" }}{{ end }}{{ $x }}\n")
    c("var-shadow-in-if", "{{ $x := \"a\" }}{{ if true }}{{ $x := \"b\" }}{{ $x }}{{ end }}{{ $x }}\n")
    c("var-assign-in-range", "{{ $sum := 0 }}{{ range .list }}{{ $sum = add $sum . }}{{ end }}{{ $sum }}\n")
    c("var-pipeline", "{{ $u := .str | upper }}{{ $u }} {{ $u | lower }}\n")
    c("var-decl-prints-nothing", "[{{ $x := 5 }}]\n")
    c("var-dollar-reassign", "{{ $ := 3 }}{{ $ }}\n")
    c("var-list", "{{ $l := .strs }}{{ range $l }}{{ . }},{{ end }}\n")
    c("var-multi-decl-line", "{{ $a := 1 }}{{ $b := 2 }}{{ $a }}{{ $b }}{{ $a = $b }}{{ $a }}\n")
    # range
    c("range-list", "{{ range .list }}[{{ . }}]{{ end }}\n")
    c("range-list-value-var", "{{ range $v := .strs }}{{ $v }};{{ end }}\n")
    c("range-list-index-var", "{{ range $i, $v := .strs }}{{ $i }}={{ $v }} {{ end }}\n")
    c("range-map-sorted", "{{ range $k, $v := .map }}{{ $k }}:{{ $v }} {{ end }}\n")
    c("range-map-value-only", "{{ range .smap }}{{ . }} {{ end }}\n")
    c("range-map-one-var", "{{ range $v := .smap }}{{ $v }} {{ end }}\n")
    c("range-empty-else", "{{ range .empty }}x{{ else }}empty{{ end }}\n")
    c("range-emptymap-else", "{{ range .emptymap }}x{{ else }}no entries{{ end }}\n")
    c("range-nil-else", "{{ range .nil }}x{{ else }}nil{{ end }}\n")
    c("range-nonempty-else", "{{ range .strs }}{{ . }} {{ else }}none{{ end }}\n")
    c("range-break", "{{ range .list }}{{ if eq . 2.0 }}{{ break }}{{ end }}{{ . }}{{ end }}\n")
    c("range-continue", "{{ range .list }}{{ if eq . 2.0 }}{{ continue }}{{ end }}{{ . }}{{ end }}\n")
    c("range-nested-break", "{{ range $a := .matrix }}{{ range $a }}{{ if gt . 2.0 }}{{ break }}{{ end }}{{ . }}{{ end }}|{{ end }}\n")
    c("range-nested", "{{ range .matrix }}{{ range . }}{{ . }} {{ end }}/{{ end }}\n")
    c("range-users", "{{ range .users }}{{ .name }}({{ .age }}){{ if .admin }}*{{ end }} {{ end }}\n")
    c("range-params", "{{ range $k, $v := .Params }}{{ $k }}={{ $v | quote }}\n{{ end }}")
    c("range-until", "{{ range until 3 }}{{ . }}{{ end }}\n")
    c("range-untilstep-index", "{{ range $i, $v := untilStep 1 (int .Params.NODE_COUNT) 1 }}{{ $i }}:{{ $v }} {{ end }}\n")
    c("range-string-error", "{{ range .str }}{{ . }}{{ end }}\n")
    c("range-int-error", "{{ range 5 }}{{ . }}{{ end }}\n")
    c("range-float-error", "{{ range .num }}{{ . }}{{ end }}\n")
    c("range-bool-error", "{{ range .t }}x{{ end }}\n")
    c("range-dot-restored", "{{ range .strs }}{{ end }}{{ .Name }}\n")
    c("range-var-scope", "{{ range $i, $v := .strs }}{{ end }}{{ $i }}\n")
    c("range-mixed-list", "{{ range .mixed }}<{{ . }}>{{ end }}\n")
    c("range-pipeline", "{{ range .strs | sortAlpha }}{{ . }} {{ end }}\n")
    c("range-over-dict", "{{ range $k, $v := dict \"z\" 1 \"a\" 2 \"m\" 3 }}{{ $k }}{{ $v }}{{ end }}\n")
    c("range-break-in-with", "{{ range .strs }}{{ with . }}{{ if eq . \"apple\" }}{{ break }}{{ end }}{{ . }}{{ end }}{{ end }}\n")
    c("range-continue-else-if", "{{ range .list }}{{ if eq . 1.0 }}one{{ else if eq . 2.0 }}{{ continue }}{{ else }}{{ . }}{{ end }};{{ end }}\n")
    # if / else if / else
    c("if-true", "{{ if .t }}yes{{ end }}\n")
    c("if-false-else", "{{ if .f }}yes{{ else }}no{{ end }}\n")
    c("if-else-if", "{{ if eq .num 1.0 }}one{{ else if eq .num 3.0 }}three{{ else }}other{{ end }}\n")
    c("if-else-if-chain", "{{ if .f }}a{{ else if .zero }}b{{ else if .empty }}c{{ else if .str }}d{{ else }}e{{ end }}\n")
    c("if-truthiness", "{{ range $k, $v := dict \"zero\" 0 \"one\" 1 \"estr\" \"\" \"str\" \"x\" \"nil\" .nil \"el\" .empty \"l\" .list \"em\" .emptymap \"m\" .map \"f\" .f \"t\" .t \"zf\" 0.0 }}{{ $k }}={{ if $v }}T{{ else }}F{{ end }} {{ end }}\n")
    c("if-not", "{{ if not .f }}negated{{ end }}\n")
    c("if-and-or", "{{ if and .t (or .f .str) }}ok{{ end }}\n")
    c("if-with-var", "{{ if $x := .str }}{{ $x }}{{ end }}\n")
    c("if-var-scope", "{{ if $x := .str }}{{ end }}{{ $x }}\n")
    c("if-nested", "{{ if .t }}{{ if .f }}a{{ else }}b{{ end }}{{ end }}\n")
    c("if-missing-key", "{{ if .Nope }}x{{ end }}\n")
    c("if-param-empty", "{{ if .Params.EMPTY }}set{{ else }}unset{{ end }}\n")
    c("if-string-false", "{{ if .Params.BOOL }}truthy{{ end }}\n")
    # with
    c("with-value", "{{ with .nested.a }}{{ .b.c }}{{ end }}\n")
    c("with-else", "{{ with .empty }}x{{ else }}empty{{ end }}\n")
    c("with-var", "{{ with $n := .nested }}{{ $n.a.b.c }} {{ .a.b.c }}{{ end }}\n")
    c("with-dollar", "{{ with .nested }}{{ $.Name }}{{ end }}\n")
    c("with-nil", "{{ with .nil }}x{{ else }}nil{{ end }}\n")
    c("with-missing-key", "{{ with .Nope }}x{{ end }}\n")
    c("with-zero", "{{ with 0 }}x{{ else }}zero{{ end }}\n")
    c("with-dot-after", "{{ with .str }}{{ . }}{{ end }} {{ .Name }}\n")
    # define / template / block
    c("define-template", "{{ define \"x\" }}X:{{ . }}{{ end }}{{ template \"x\" .str }}\n")
    c("template-no-data", "{{ define \"x\" }}[{{ . }}]{{ end }}{{ template \"x\" }}\n")
    c("template-dot", "{{ define \"labels\" }}app: {{ .Name }}\nns: {{ .Namespace }}{{ end }}{{ template \"labels\" . }}\n")
    c("template-in-range", "{{ define \"item\" }}<{{ . }}>{{ end }}{{ range .strs }}{{ template \"item\" . }}{{ end }}\n")
    c("template-pipeline-arg", "{{ define \"u\" }}{{ . }}{{ end }}{{ template \"u\" .str | upper }}\n")
    c("block-default", "{{ block \"b\" .Name }}default {{ . }}{{ end }}\n")
    c("block-overridden", "{{ block \"b\" .Name }}default {{ . }}{{ end }}{{ define \"b\" }}override {{ . }}{{ end }}\n")
    c("define-after-use", "{{ template \"later\" . }}{{ define \"later\" }}{{ .Namespace }}{{ end }}\n")
    c("define-only", "{{ define \"x\" }}never{{ end }}")
    c("define-text-around", "before\n{{ define \"x\" }}X{{ end }}\nafter\n")
    c("template-recursive", "{{ define \"r\" }}{{ if gt . 0 }}{{ . }} {{ template \"r\" (sub . 1) }}{{ end }}{{ end }}{{ template \"r\" 5 }}\n")
    c("template-nested-define-vars", "{{ define \"v\" }}{{ $x := . }}{{ $x }}{{ end }}{{ $x := 1 }}{{ template \"v\" 2 }}{{ $x }}\n")
    c("template-dollar-inside", "{{ define \"d\" }}{{ $ }}{{ end }}{{ template \"d\" .str }}\n")
    c("template-missing", "{{ template \"nope\" }}\n")
    c("template-redefine", "{{ define \"x\" }}a{{ end }}{{ define \"x\" }}b{{ end }}{{ template \"x\" }}\n")
    c("template-redefine-empty", "{{ define \"x\" }}a{{ end }}{{ define \"x\" }}{{ end }}{{ template \"x\" }}\n")
    c("template-infinite-recursion", "{{ define \"loop\" }}{{ template \"loop\" . }}{{ end }}{{ template \"loop\" . }}\n")
    c("template-exec-error-inside", "{{ define \"bad\" }}ok {{ .Nope }}{{ end }}{{ template \"bad\" . }}\n")
    c("template-calls-main", "{{ define \"x\" }}x{{ end }}{{ template \"tpl\" }}\n")
    # pipelines / parenthesised calls
    c("pipe-simple", "{{ .str | upper }}\n")
    c("pipe-chain", "{{ .str | upper | printf \"%s!\" | quote }}\n")
    c("pipe-last-arg", "{{ \"x\" | printf \"%s-%s\" \"a\" }}\n")
    c("pipe-paren", "{{ printf \"%d items\" (len .list) }}\n")
    c("pipe-nested-paren", "{{ upper (printf \"%s-%s\" (lower .upper) (trim .space)) }}\n")
    c("pipe-paren-pipeline", "{{ (.str | upper) }} {{ (printf \"%s\" .Name | len) }}\n")
    c("pipe-into-paren", "{{ .str | printf \"%s/%s\" (.Name | upper) }}\n")
    c("pipe-to-non-function", "{{ .str | .Name }}\n")
    c("pipe-variable-first", "{{ $x := \"v\" }}{{ $x | upper }}\n")
    # and / or / not
    c("and-values", "{{ and 1 2 }} {{ and 0 2 }} {{ and \"a\" \"\" \"b\" }} {{ and .t .str }}\n")
    c("or-values", "{{ or 0 \"\" \"x\" }}|{{ or 0 \"\" }}|{{ or .nil .empty .str }}\n")
    c("and-short-circuit", "{{ and .f (fail \"must not run\") }}\n")
    c("or-short-circuit", "{{ or .t (fail \"must not run\") }}\n")
    c("and-error-evaluated", "{{ and .t (fail \"evaluated\") }}\n")
    c("or-short-circuit-index", "{{ or .str (index .list 99) }}\n")
    c("and-missing-key-skipped", "{{ and .f .Nope }}\n")
    c("not-values", "{{ not 0 }} {{ not \"x\" }} {{ not .empty }} {{ not .map }} {{ not .nil }}\n")
    c("and-single", "{{ and .str }} {{ or .zero }}\n")
    # comparisons
    c("eq-strings", "{{ eq .Params.NODE_COUNT \"3\" }} {{ eq .str \"x\" }}\n")
    c("eq-multi", "{{ eq .str \"a\" \"hello\" \"b\" }} {{ eq .str \"a\" \"b\" }}\n")
    c("eq-float-data-int-literal", "{{ eq .num 3 }}\n")
    c("eq-float-float", "{{ eq .num 3.0 }} {{ eq .float 2.5 }}\n")
    c("eq-int-float-literals", "{{ eq 1 1.0 }}\n")
    c("eq-bool", "{{ eq .t true }} {{ eq .f true }}\n")
    c("eq-string-int", "{{ eq \"1\" 1 }}\n")
    c("eq-nil", "{{ eq .nil .nil }}\n")
    c("eq-list-error", "{{ eq .list .list }}\n")
    c("eq-map-error", "{{ eq .map 1 }}\n")
    c("eq-one-arg", "{{ eq 1 }}\n")
    c("eq-int-results", "{{ eq (len .list) 3 }} {{ eq (int .Params.NODE_COUNT) 3 }}\n")
    c("ne-values", "{{ ne 1 2 }} {{ ne \"a\" \"a\" }} {{ ne .str \"hello\" }}\n")
    c("ne-type-error", "{{ ne \"a\" 1 }}\n")
    c("lt-le-gt-ge-ints", "{{ lt 1 2 }} {{ le 2 2 }} {{ gt 1 2 }} {{ ge 3 2 }}\n")
    c("lt-strings", "{{ lt \"a\" \"b\" }} {{ gt \"apple\" \"banana\" }} {{ le \"x\" \"x\" }}\n")
    c("lt-floats", "{{ lt .float 3.0 }} {{ ge .num 3.0 }} {{ gt 1.5 1.25 }}\n")
    c("lt-mixed-type-error", "{{ lt 1 \"a\" }}\n")
    c("lt-float-int-error", "{{ lt .num 5 }}\n")
    c("lt-bool-error", "{{ lt true false }}\n")
    c("lt-list-error", "{{ lt .list 1 }}\n")
    c("gt-nil-error", "{{ gt .nil 1 }}\n")
    c("ge-int64", "{{ ge (int64 5) 5 }} {{ lt (int64 4) 5 }}\n")
    c("le-missing-arg", "{{ le 1 }}\n")
    c("lt-negative-int-uint", "{{ lt -1 (len .list) }}\n")
    # builtins: index slice len print printf println html js urlquery call
    c("index-list", "{{ index .list 0 }} {{ index .strs 2 }}\n")
    c("index-nested", "{{ index .matrix 1 0 }} {{ index .users 0 \"name\" }}\n")
    c("index-map", "{{ index .map \"b\" }} {{ index .Params \"NODE_COUNT\" }}\n")
    c("index-map-missing", "{{ index .map \"zz\" }}\n")
    c("index-out-of-range", "{{ index .list 5 }}\n")
    c("index-negative", "{{ index .list -1 }}\n")
    c("index-string", "{{ index .str 1 }}\n")
    c("index-nil", "{{ index .nil 1 }}\n")
    c("index-no-keys", "{{ index .str }}\n")
    c("index-wrong-key-type", "{{ index .map 1 }}\n")
    c("index-float-key", "{{ index .list 1.0 }}\n")
    c("index-var-key", "{{ $k := \"a\" }}{{ index .map $k }} {{ range $i, $_ := .strs }}{{ index $.strs $i }}{{ end }}\n")
    c("slice-list", "{{ slice .strs 1 2 }} {{ slice .list 1 }} {{ slice .list }}\n")
    c("slice-three-index", "{{ slice .list 0 1 2 }}\n")
    c("slice-out-of-range", "{{ slice .list 2 9 }}\n")
    c("slice-string", "{{ slice .str 1 3 }}\n")
    c("len-values", "{{ len .str }} {{ len .list }} {{ len .map }} {{ len .empty }} {{ len \"héllo\" }}\n")
    c("len-nil", "{{ len .nil }}\n")
    c("len-number", "{{ len 3 }}\n")
    c("print-values", "{{ print \"a\" 1 2 \"b\" 3.5 .t }}|{{ print }}|{{ print .nil }}\n")
    c("print-spaces", "{{ print 1 2 }}|{{ print \"a\" \"b\" }}|{{ print 1 \"a\" 2 }}\n")
    c("println-values", "{{ println \"a\" 1 }}{{ println }}{{ println .strs }}")
    c("printf-verbs", "{{ printf \"%s|%q|%v|%d|%5.2f|%-5s|%x|%X|%o|%b|%e|%g|%%\" \"s\" \"q\" .list 42 3.14159 \"ab\" 255 255 8 5 1234.5678 0.000001 }}\n")
    c("printf-type", "{{ printf \"%T %T %T %T %T %T %T\" .str .num 1 .list .map .nil .t }}\n")
    c("printf-float-as-d", "{{ printf \"%d\" .num }}\n")
    c("printf-missing-arg", "{{ printf \"%s %s\" \"a\" }}\n")
    c("printf-extra-arg", "{{ printf \"%s\" \"a\" 2 }}\n")
    c("printf-plus-v", "{{ printf \"%+v|%#v|%v\" .users .strs .map }}\n")
    c("printf-width-star", "{{ printf \"%*d|%-*d|\" 5 42 4 7 }}\n")
    c("printf-quote-unicode", "{{ printf \"%q %+q %x\" .uni .uni \"hi\" }}\n")
    c("printf-bad-verb", "{{ printf \"%z %!\" 1 }}\n")
    c("printf-no-format", "{{ printf }}\n")
    c("printf-nil-arg", "{{ printf \"%v %s %d\" .nil .nil .nil }}\n")
    c("printf-big-floats", "{{ printf \"%v %v %v %f\" .big .huge .small .big }}\n")
    c("html-escape", "{{ html .html }}|{{ .html | html }}|{{ html \"a\" 1 .nil }}\n")
    c("js-escape", "{{ js .html }}|{{ js \"line\\nnext\\t\\\\ é = <>\" }}\n")
    c("urlquery-escape", "{{ urlquery \"a b&c=d/é?\" }}|{{ urlquery \"x\" 1 }}\n")
    c("call-non-function", "{{ call .str }}\n")
    c("call-nil", "{{ call .nil }}\n")
    c("call-missing-arg", "{{ call }}\n")
    c("dot-in-pipeline-args", "{{ range .strs }}{{ printf \"%s-%s\" . $.Name }} {{ end }}\n")
    c("method-like-field-args", "{{ .Name 3 }}\n")
    c("whitespace-in-actions", "{{   .Name   }}{{\t.Namespace\t}}{{\n.StepName\n}}\n")
    c("long-output-loop", "{{ range until 200 }}{{ . }},{{ end }}\n")


# ---------------------------------------------------------------------------------------------
# errors: parse errors and execution errors (messages compared exactly)
# ---------------------------------------------------------------------------------------------
def errors():
    c = lambda n, t, d=None: case("errors", n, t, d)
    # parse errors
    c("parse-unclosed-action", "{{ .Name \n")
    c("parse-unexpected-eof-if", "{{ if .t }}x\n")
    c("parse-unexpected-eof-range", "line1\nline2\n{{ range .list }}x\n")
    c("parse-unexpected-end", "a{{ end }}\n")
    c("parse-else-outside", "{{ else }}\n")
    c("parse-double-else", "{{ if .t }}a{{ else }}b{{ else }}c{{ end }}\n")
    c("parse-undefined-function", "{{ nope 1 }}\n")
    c("parse-undefined-variable", "{{ $x }}\n")
    c("parse-undefined-var-assign", "{{ $x = 1 }}\n")
    c("parse-var-out-of-scope", "{{ if .t }}{{ $y := 1 }}{{ end }}{{ $y }}\n")
    c("parse-bad-number", "{{ 1x }}\n")
    c("parse-bad-hex", "{{ 0xZZ }}\n")
    c("parse-unterminated-string", "{{ \"abc }}\n")
    c("parse-unterminated-raw", "{{ `abc }}\n")
    c("parse-unterminated-char", "{{ 'a }}\n")
    c("parse-bad-char-literal", "{{ 'ab' }}\n")
    c("parse-empty-pipe-end", "{{ .Name | }}\n")
    c("parse-pipe-start", "{{ | .Name }}\n")
    c("parse-empty-action", "{{ }}\n")
    c("parse-empty-trimmed-action", "{{- -}}\n")
    c("parse-if-no-arg", "{{ if }}x{{ end }}\n")
    c("parse-range-no-arg", "{{ range }}x{{ end }}\n")
    c("parse-with-no-arg", "{{ with }}x{{ end }}\n")
    c("parse-define-no-name", "{{ define }}x{{ end }}\n")
    c("parse-define-bad-name", "{{ define x }}x{{ end }}\n")
    c("parse-template-no-name", "{{ template }}\n")
    c("parse-template-var-name", "{{ template .Name }}\n")
    c("parse-break-outside-range", "{{ break }}\n")
    c("parse-continue-outside-range", "{{ if .t }}{{ continue }}{{ end }}\n")
    c("parse-break-in-define", "{{ range .list }}{{ define \"x\" }}{{ break }}{{ end }}{{ end }}\n")
    c("parse-else-if-no-arg", "{{ if .f }}a{{ else if }}b{{ end }}\n")
    c("parse-else-with", "{{ with .nil }}a{{ else with .str }}b{{ end }}\n")
    c("parse-v3-only-function", "{{ toRawJson .map }}\n")
    c("parse-v3-only-seq", "{{ seq 1 3 }}\n")
    c("parse-v3-only-dig", "{{ dig \"a\" \"b\" \"\" .nested }}\n")
    c("parse-env-removed", "{{ env \"HOME\" }}\n")
    c("parse-expandenv-removed", "{{ expandenv \"$HOME\" }}\n")
    c("parse-base-removed", "{{ base \"/a/b\" }}\n")
    c("parse-helm-include", "{{ include \"x\" . }}\n")
    c("parse-helm-required", "{{ required \"msg\" .Name }}\n")
    c("parse-helm-tpl", "{{ tpl \"{{ .Name }}\" . }}\n")
    c("parse-helm-fromyaml", "{{ fromYaml \"a: 1\" }}\n")
    c("parse-helm-lookup", "{{ lookup \"v1\" \"Pod\" \"\" \"\" }}\n")
    c("parse-number-with-args", "{{ 3 4 }}\n")
    c("parse-string-with-args", "{{ \"x\" 4 }}\n")
    c("parse-unclosed-paren", "{{ (1 }}\n")
    c("parse-unexpected-paren", "{{ .Name) }}\n")
    c("parse-bad-character", "{{ # }}\n")
    c("parse-range-too-many-vars", "{{ range $i, $v, $w := .list }}{{ end }}\n")
    c("parse-decl-non-var", "{{ 1 := 2 }}\n")
    c("parse-decl-missing-value", "{{ $x := }}\n")
    c("parse-comment-not-alone", "{{/* c */ .Name }}\n")
    c("parse-comment-unclosed", "{{/* never closed }}\n")
    c("parse-multiple-definition", "{{ define \"x\" }}a{{ end }}{{ define \"x\" }}b{{ end }}\n")
    c("parse-end-extra-arg", "{{ if .t }}a{{ end 1 }}\n")
    c("parse-else-extra", "{{ if .t }}a{{ else 1 }}b{{ end }}\n")
    c("parse-error-line-3", "ok\nok\n{{ .a | }}\n")
    c("parse-error-in-define", "{{ define \"d\" }}\n\n{{ nope }}{{ end }}\n")
    c("parse-dot-field-on-literal", "{{ 1.x }}\n")
    c("parse-nil-command", "{{ nil }}\n")
    c("parse-nil-in-pipeline", "{{ .str | nil }}\n")
    c("parse-unclosed-define", "{{ define \"x\" }}abc\n")
    c("parse-double-dot", "{{ ..Name }}\n")
    c("parse-dollar-field-space", "{{ $ .Name }}\n")
    c("parse-assign-to-dollar", "{{ $ = 1 }}\n")
    c("parse-break-with-arg", "{{ range .list }}{{ break 1 }}{{ end }}\n")
    c("parse-template-extra", "{{ template \"x\" . . }}\n")
    c("parse-unknown-keyword-ish", "{{ elif .t }}\n")
    # exec errors: missingkey=error
    c("missingkey-top", "{{ .Nope }}\n")
    c("missingkey-params", "replicas: {{ .Params.NOPE }}\n")
    c("missingkey-nested", "{{ .nested.a.x }}\n")
    c("missingkey-dollar", "{{ range .list }}{{ $.Missing }}{{ end }}\n")
    c("missingkey-in-pipeline", "{{ .Params.MISSING | default \"fallback\" }}\n")
    c("missingkey-in-define", "{{ define \"x\" }}{{ .Nope }}{{ end }}{{ template \"x\" . }}\n")
    c("missingkey-line-col", "line one\n  two {{ .Name }}\n three {{ .Params.NODE_COUNT }} {{ .Missing.Deeper }}\n")
    c("missingkey-on-dict", "{{ (dict \"a\" 1).b }}\n")
    c("missingkey-partial-output-discarded", "lots of output before\n{{ .Nope }}\n")
    # exec errors: fields
    c("field-on-nil", "{{ .nil.x }}\n")
    c("field-on-string", "{{ .str.x }}\n")
    c("field-on-list", "{{ .list.x }}\n")
    c("field-on-number", "{{ .num.x }}\n")
    c("field-on-missing-chain", "{{ .Nope.x }}\n")
    # exec errors: functions
    c("fail-message", "{{ fail \"custom failure\" }}\n")
    c("fail-in-if", "{{ if eq .Params.NODE_COUNT \"3\" }}{{ fail (printf \"bad count %s\" .Params.NODE_COUNT) }}{{ end }}\n")
    c("func-wrong-type", "{{ upper 3 }}\n")
    c("func-wrong-type-list", "{{ join \",\" 3 }}|{{ upper .list }}\n")
    c("func-too-few-args", "{{ upper }}\n")
    c("func-too-many-args", "{{ upper \"a\" \"b\" }}\n")
    c("func-nil-for-string", "{{ upper .nil }}\n")
    c("func-float-for-int", "{{ repeat .num \"x\" }}\n")
    c("func-string-for-int", "{{ repeat \"3\" \"x\" }}\n")
    c("func-int-for-float-param", "{{ round 2 0 }}\n")
    c("func-bool-for-string", "{{ trim true }}\n")
    c("div-by-zero", "{{ div 1 0 }}\n")
    c("mod-by-zero", "{{ mod 5 0 }}\n")
    c("semver-invalid", "{{ semver \"not-a-version\" }}\n")
    c("semvercompare-invalid", "{{ semverCompare \"!!\" \"1.0.0\" }}\n")
    c("first-on-string", "{{ first .str }}\n")
    c("append-on-string", "{{ append .str \"x\" }}\n")
    c("substr-bad-range", "{{ substr 3 1 \"hello\" }}\n")
    c("uniq-on-map", "{{ uniq .map }}\n")
    c("error-after-output-in-range", "{{ range .list }}{{ . }}{{ if eq . 2.0 }}{{ fail \"stop\" }}{{ end }}{{ end }}\n")
    c("error-position-multiline", "a\nb\n  c {{ index .list 10 }}\n")
    c("error-in-nested-template-call", "{{ define \"a\" }}{{ template \"b\" . }}{{ end }}{{ define \"b\" }}{{ .x.y }}{{ end }}{{ template \"a\" . }}\n")
    c("error-in-else-if", "{{ if .f }}a{{ else if .Nope }}b{{ end }}\n")
    c("error-in-with-pipeline", "{{ with index .list 9 }}{{ . }}{{ end }}\n")
    c("error-in-variable-decl", "{{ $x := .Nope }}\n")
    c("error-in-range-pipeline", "{{ range .Nope }}{{ end }}\n")
    c("error-in-paren", "{{ printf \"%s\" (.Nope) }}\n")
    c("error-func-in-pipe", "{{ .str | repeat \"x\" }}\n")
    c("error-required-style", "{{ if not .Params.EMPTY }}{{ fail \"EMPTY is required\" }}{{ end }}\n")


# ---------------------------------------------------------------------------------------------
# sprig: every function of the kudo profile, at least twice
# ---------------------------------------------------------------------------------------------
TIME = '(toDate "2006-01-02 15:04:05" "2020-05-01 13:14:15")'


def sprig():
    c = lambda n, t, d=None: case("sprig", n, t, d)
    T = TIME
    # strings
    c("abbrev", '{{ abbrev 5 "hello world" }}|{{ abbrev 20 "hello world" }}|{{ abbrev 3 "hello" }}\n')
    c("abbrevboth", '{{ abbrevboth 5 10 "1234 5678 9123" }}|{{ abbrevboth 0 4 "abcdefg" }}\n')
    c("camelcase", '{{ camelcase "http_server" }} {{ camelcase "foo-bar_baz" }} {{ camelcase "" }} {{ "galera_instance_name" | camelcase }}\n')
    c("kebabcase", '{{ kebabcase "FirstName" }} {{ kebabcase "HTTPServer" }} {{ kebabcase "already-kebab" }} {{ kebabcase "snake_case_x" }}\n')
    c("snakecase", '{{ snakecase "FirstName" }} {{ snakecase "HTTPServer" }} {{ snakecase "some-thing" }} {{ snakecase "ID" }}\n')
    c("swapcase", '{{ swapcase "Hello World" }} {{ swapcase "ÉtÉ" }}\n')
    c("title-untitle", '{{ title "hello world" }} {{ untitle "Hello World" }} {{ title "élan vital" }} {{ untitle "ABC" }}\n')
    c("upper-lower", '{{ upper .str }} {{ lower .upper }} {{ upper "straße" }} {{ lower "ÀÉ" }}\n')
    c("trim-family", '[{{ trim .space }}][{{ trimAll "$" "$$5.00$" }}][{{ trimall "x" "xxaxx" }}][{{ trimPrefix "pre-" "pre-fix" }}][{{ trimSuffix ".yaml" "a.yaml" }}]\n')
    c("trim-unicode-space", '[{{ trim "\\t\\n x \\u00a0" }}]\n')
    c("trunc", '{{ trunc 3 "hello" }}|{{ trunc 10 "hi" }}|{{ trunc -2 "hello" }}|{{ trunc 0 "x" }}\n')
    c("substr", '{{ substr 1 3 "hello" }}|{{ substr 0 -1 "hello" }}|{{ substr -1 2 "hello" }}|{{ substr 2 99 "hello" }}\n')
    c("nospace", '[{{ nospace " a b  c \\t d " }}]\n')
    c("initials", '{{ initials "Hello World" }}|{{ initials "" }}|{{ initials "kudo universal declarative operator" }}\n')
    c("wrap", '{{ wrap 5 "hello world foo" }}\n{{ wrap 80 "short" }}\n')
    c("wrapWith", '{{ wrapWith 5 "\\t" "hello world" }}|{{ wrapWith 3 "<br>" "a b c d" }}\n')
    c("contains", '{{ contains "ell" .str }} {{ contains "z" "abc" }} {{ contains "" "x" }}\n')
    c("hasPrefix-hasSuffix", '{{ hasPrefix "hel" .str }} {{ hasPrefix "x" .str }} {{ hasSuffix "lo" .str }} {{ hasSuffix "he" .str }}\n')
    c("quote-squote", '{{ quote "a" }} {{ squote "b" }} {{ quote "a\\"b" }} {{ squote "it\'s" }} {{ quote 1 .nil 2.5 }} {{ squote .nil .t }}\n')
    c("quote-params", 'value: {{ .Params.NODE_COUNT | quote }}\nother: {{ .Params.SST_USER | squote }}\n')
    c("cat", '{{ cat "a" 1 .nil "b" }}|{{ cat .list .str }}|{{ cat }}\n')
    c("indent", '{{ indent 4 "a\\nb" }}|{{ indent 2 "" }}|{{ "x\\n" | indent 3 }}|\n')
    c("nindent", 'spec:{{ nindent 2 "a: 1\\nb: 2" }}\nitems:{{ .multi | nindent 4 }}\n')
    c("replace", '{{ replace "a" "b" "banana" }} {{ "x-y-z" | replace "-" "_" }} {{ replace "" "." "ab" }}\n')
    c("plural", '{{ plural "one" "many" 1 }} {{ plural "one" "many" 2 }} {{ plural "one" "many" 0 }} {{ len .list | plural "item" "items" }}\n')
    c("repeat", '[{{ repeat 3 "ab" }}][{{ repeat 0 "x" }}][{{ repeat 2 "" }}]\n')
    c("hello", '{{ hello }} {{ hello | upper }}\n')
    c("toString", '{{ toString 3 }}|{{ toString .float }}|{{ toString .nil }}|{{ toString .list }}|{{ toString .t }}|{{ toString .big }}|{{ typeOf (toString 1) }}\n')
    c("toStrings", '{{ toStrings .list }}|{{ toStrings (list 1 .nil "a" 2.5) }}|{{ typeOf (toStrings .list) }}|{{ toStrings "x" }}\n')
    c("join", '{{ join "," .strs }}|{{ join "-" .list }}|{{ join "," .str }}|{{ join ", " .mixed }}|{{ join "" .empty }}\n')
    c("split", '{{ split "," .csv }}|{{ (split "," .csv)._1 }}|{{ split "" "ab" }}\n')
    c("splitList", '{{ splitList "," .csv }}|{{ splitList "" "abc" }}|{{ splitList "," "" | len }}|{{ typeOf (splitList "," "a") }}\n')
    c("splitn", '{{ splitn "," 2 .csv }}|{{ (splitn "," 2 .csv)._1 }}|{{ splitn "," 0 "a,b" }}\n')
    c("sortAlpha", '{{ sortAlpha .strs }}|{{ sortAlpha .list }}|{{ sortAlpha (list "b" 10 "a" 9) }}|{{ sortAlpha .str }}\n')
    c("toDecimal", '{{ toDecimal "0777" }} {{ toDecimal "10" }} {{ toDecimal "x" }} {{ typeOf (toDecimal "7") }}\n')
    c("ternary", '{{ ternary "a" "b" true }} {{ ternary "a" "b" .f }} {{ .t | ternary "yes" "no" }}\n')
    c("shuffle", '{{ shuffle "aaa" }} {{ shuffle "hello" | len }} {{ shuffle "hello" | splitList "" | sortAlpha | join "" }}\n')
    # encodings and hashes
    c("b64", '{{ b64enc "hello" }} {{ b64dec "aGVsbG8=" }} {{ b64enc "" }} {{ "kudo" | b64enc | b64dec }}\n')
    c("b64dec-invalid", '{{ b64dec "!!notbase64" }}\n')
    c("b32", '{{ b32enc "hello" }} {{ b32dec "NBSWY3DP" }} {{ b32dec "!!" }}\n')
    c("hashes", '{{ sha1sum "hello" }}\n{{ sha256sum "hello" }}\n{{ adler32sum "hello" }}\n{{ adler32sum "" }}\n{{ sha256sum "" }}\n')
    c("hash-params", '{{ .Params | toJson | sha256sum | trunc 10 }} {{ sha1sum .Name }}\n')
    c("derivePassword", '{{ derivePassword 1 "long" "password" "user" "example.com" }}\n{{ derivePassword 2 "maximum" "secret" "admin" "kudo.dev" }}\n{{ derivePassword 1 "pin" "p" "u" "s" }}\n')
    c("encryptAES-roundtrip", '{{ encryptAES "secretkey" "plaintext" | decryptAES "secretkey" }}\n{{ $e := encryptAES "k" .Name }}{{ decryptAES "k" $e }} {{ regexMatch "^[A-Za-z0-9+/]+=*$" $e }}\n')
    c("decryptAES-invalid", '{{ decryptAES "k" "notbase64!" }}\n')
    c("decryptAES-short", '{{ decryptAES "k" "YWJj" }}\n')
    # regex
    c("regexMatch", '{{ regexMatch "^[a-z]+$" .str }} {{ regexMatch "[0-9]" .str }} {{ regexMatch "(" "x" }}\n')
    c("regexFind", '[{{ regexFind "[0-9]+" "abc123def456" }}][{{ regexFind "x" "abc" }}]\n')
    c("regexFindAll", '{{ regexFindAll "[0-9]" "a1b2c3" -1 }}|{{ regexFindAll "[0-9]" "a1b2c3" 2 }}|{{ regexFindAll "z" "abc" -1 }}\n')
    c("regexReplaceAll", '{{ regexReplaceAll "a(x*)b" "-ab-axxb-" "${1}W" }}|{{ regexReplaceAll "[aeiou]" .str "_" }}\n')
    c("regexReplaceAllLiteral", '{{ regexReplaceAllLiteral "a(x*)b" "-ab-axxb-" "${1}" }}|{{ regexReplaceAllLiteral "\\\\." "a.b.c" "$" }}\n')
    c("regexSplit", '{{ regexSplit "z+" "pizza" -1 }}|{{ regexSplit "," "a,b,c" 2 }}|{{ regexSplit "x" "" -1 }}\n')
    # numbers (Sprig coerces with cast.ToInt64 / ToFloat64)
    c("add-sub-mul", '{{ add 1 2 3 }} {{ sub 5 3 }} {{ mul 2 3 4 }} {{ add .num 1 }} {{ sub .num 10 }} {{ mul .num "2" }}\n')
    c("add-coercion", '{{ add "3" 2 }} {{ add 1.9 1 }} {{ add .nil 1 }} {{ add "x" 1 }} {{ add .t 1 }} {{ typeOf (add 1 1) }}\n')
    c("add1", '{{ add1 .Params.NODE_COUNT }} {{ add1 -1 }} {{ add1 .float }}\n')
    c("div-mod", '{{ div 7 2 }} {{ div .big 1000 }} {{ mod 7 3 }} {{ mod -7 3 }} {{ div -7 2 }}\n')
    c("max-min-biggest", '{{ max 1 5 3 }} {{ min 4 2 8 }} {{ biggest 1 9 2 }} {{ min .num -2 }} {{ max .big }} {{ biggest "7" 3 }}\n')
    c("ceil-floor", '{{ ceil 1.2 }} {{ ceil "2.5" }} {{ ceil -1.5 }} {{ floor 1.7 }} {{ floor "-1.2" }} {{ floor .float }} {{ typeOf (ceil 1) }}\n')
    c("round", '{{ round 3.14159 2 }} {{ round 2.5 0 }} {{ round -2.5 0 }} {{ round "1.005" 2 }} {{ round 1.4 0 0.4 }} {{ round .float 0 }}\n')
    c("int-int64-float64", '{{ int "3" }} {{ int .num }} {{ int "010" }} {{ int "0x10" }} {{ int "3.0" }} {{ int "x" }} {{ int .nil }} {{ int .t }} {{ typeOf (int "3") }}\n')
    c("int64-float64", '{{ int64 "9223372036854775807" }} {{ int64 .big }} {{ typeOf (int64 1) }} {{ float64 "1.5" }} {{ float64 3 }} {{ float64 "x" }} {{ typeOf (float64 1) }}\n')
    c("atoi", '{{ atoi "42" }} {{ atoi "x" }} {{ atoi " 4" }} {{ atoi "-3" }} {{ typeOf (atoi "1") }}\n')
    c("int-params-arith", '{{ sub (int .Params.NODE_COUNT) 1 }} {{ mul (atoi .Params.MYSQL_PORT) 2 }} {{ add1 (int64 .Params.IST_PORT) }}\n')
    c("until", '{{ until 5 }} {{ until 0 }} {{ until -3 }} {{ typeOf (until 2) }}\n')
    c("untilStep", '{{ untilStep 1 10 3 }} {{ untilStep 10 1 -3 }} {{ untilStep 1 1 1 }} {{ untilStep 0 5 0 }} {{ untilStep 0 -3 1 }}\n')
    # lists
    c("list-tuple", '{{ list 1 "a" .nil 2.5 }} {{ list }} {{ tuple 1 "b" }} {{ tuple }} {{ typeOf (list 1) }}\n')
    c("first-last", '{{ first .list }} {{ last .strs }} {{ first .empty }} {{ last .empty }} {{ first (list "x") }}\n')
    c("initial-rest", '{{ initial .list }} {{ rest .list }} {{ initial .empty }} {{ rest .empty }} {{ rest (list 1) }}\n')
    c("append-push-prepend", '{{ append .list 4 }} {{ push .strs "z" }} {{ prepend .list 0 }} {{ .list }}\n')
    c("concat", '{{ concat .list .strs }} {{ concat (list 1) (list 2 3) .empty }} {{ concat }}\n')
    c("reverse", '{{ reverse .strs }} {{ reverse .empty }} {{ reverse (list 1 2 3 4) }}\n')
    c("uniq-compact", '{{ uniq .dups }} {{ uniq .list }} {{ compact (list 1 "" .nil 0 "a" false) }} {{ compact .mixed }}\n')
    c("without-has", '{{ without .list 2.0 }} {{ without .strs "apple" "x" }} {{ has 2.0 .list }} {{ has 2 .list }} {{ has "apple" .strs }} {{ .strs | has "kiwi" }}\n')
    c("slice-sprig", '{{ slice (list 1 2 3 4) 1 3 }} {{ slice .strs 1 }} {{ slice .list }}\n')
    c("chained-list-ops", '{{ .dups | uniq | sortAlpha | reverse | join "/" }}\n')
    # dicts
    c("dict", '{{ dict "a" 1 "b" "two" }} {{ dict "a" }} {{ dict 1 2 }} {{ dict }} {{ typeOf (dict) }}\n')
    c("get-set-unset", '{{ $d := dict "a" 1 }}{{ $_ := set $d "b" 2 }}{{ $d }} {{ $_ := unset $d "a" }}{{ $d }} {{ set $d "c" 3 }}\n')
    c("set-data-visible", '{{ $_ := set .map "d" 4 }}{{ .map }} {{ $_ := unset .Params "EMPTY" }}{{ len .Params }}\n')
    c("hasKey", '{{ hasKey .map "a" }} {{ hasKey .emptymap "a" }} {{ hasKey .Params "NODE_COUNT" }}\n')
    c("keys-values", '{{ keys .map | sortAlpha }} {{ keys .map .smap | sortAlpha }} {{ values .smap | sortAlpha }} {{ values .map | sortAlpha }} {{ keys .emptymap }}\n')
    c("pick-omit", '{{ pick .map "a" "z" }} {{ omit .map "a" }} {{ pick .map }} {{ omit .smap "alpha" "mid" }}\n')
    c("pluck", '{{ pluck "name" (index .users 0) (index .users 1) }} {{ pluck "x" (dict "x" 1) (dict "y" 2) (dict "x" 3) }}\n')
    c("merge", '{{ merge (dict "a" 1) (dict "a" 2 "b" 3) }} {{ merge (dict "n" (dict "x" 1)) (dict "n" (dict "y" 2)) }}\n')
    c("merge-mutates-dst", '{{ $d := dict "a" 1 }}{{ $_ := merge $d (dict "b" 2) (dict "c" 3) }}{{ $d }}\n')
    c("mergeOverwrite", '{{ mergeOverwrite (dict "a" 1 "b" 2) (dict "a" 9) }} {{ mergeOverwrite (dict "n" (dict "x" 1 "y" 1)) (dict "n" (dict "y" 2)) }}\n')
    c("deepCopy", '{{ $c := deepCopy .map }}{{ $_ := set $c "z" 26 }}{{ .map }} {{ $c }} {{ deepCopy .list }} {{ deepCopy "s" }}\n')
    c("deepEqual", '{{ deepEqual .list (list 1 2 3) }} {{ deepEqual .map .map }} {{ deepEqual (list 1 2) (list 1 2) }} {{ deepEqual "a" "a" }} {{ deepEqual 1 1.0 }}\n')
    # defaults and type checks
    c("default", '{{ default "x" .nil }} {{ default "x" "" }} {{ default "x" "y" }} {{ default 5 0 }} {{ .Params.EMPTY | default "d" }} {{ default "e" .empty }} {{ default "f" .f }}\n')
    c("default-missing-param", '{{ .Params.NODE_COUNT | default "1" }}\n')
    c("empty", '{{ empty "" }} {{ empty .emptymap }} {{ empty 0 }} {{ empty .nil }} {{ empty .list }} {{ empty .zero }} {{ empty .f }} {{ empty "0" }}\n')
    c("coalesce", '{{ coalesce .nil "" "x" }} {{ coalesce 0 .empty }} {{ coalesce .Params.EMPTY .Params.SST_USER }}\n')
    c("typeOf", '{{ typeOf .str }} {{ typeOf .num }} {{ typeOf .list }} {{ typeOf .map }} {{ typeOf .nil }} {{ typeOf .t }} {{ typeOf 1 }} {{ typeOf 1.5 }} {{ typeOf (list) }}\n')
    c("typeIs-typeIsLike", '{{ typeIs "string" .str }} {{ typeIs "int" .num }} {{ typeIs "float64" .num }} {{ typeIsLike "string" .str }} {{ typeIsLike "*string" .str }} {{ typeIsLike "float64" .float }}\n')
    c("kindOf-kindIs", '{{ kindOf .map }} {{ kindOf .list }} {{ kindOf .nil }} {{ kindOf .str }} {{ kindOf 1 }} {{ kindIs "string" .str }} {{ kindIs "slice" .map }} {{ kindIs "float64" .num }}\n')
    c("toJson", '{{ toJson .map }}|{{ toJson .users }}|{{ toJson .html }}|{{ toJson .big }}|{{ toJson .huge }}|{{ toJson .nil }}|{{ toJson .mixed }}\n')
    c("toJson-params", '{{ .Params | toJson }}\n')
    c("toPrettyJson", '{{ toPrettyJson .nested }}\n{{ toPrettyJson .users }}\n{{ toPrettyJson .empty }} {{ toPrettyJson .emptymap }} {{ toPrettyJson "<x>" }}\n')
    # toYaml (KUDO's own function: yaml.v2 Marshal)
    c("toYaml-map", '{{ toYaml .map }}')
    c("toYaml-users", '{{ toYaml .users }}')
    c("toYaml-params", 'params:\n{{ toYaml .Params | indent 2 }}')
    c("toYaml-scalars", '[{{ toYaml .nil }}][{{ toYaml "str" }}][{{ toYaml .big }}][{{ toYaml .float }}][{{ toYaml .t }}][{{ toYaml 3 }}][{{ toYaml .huge }}][{{ toYaml .small }}]\n')
    c("toYaml-quoting", '{{ toYaml (list "true" "3" "" "yes" "null" "~" "a: b" "- x" "#c" "0755" "1e3" "on" "N") }}')
    c("toYaml-multiline", '{{ toYaml (dict "script" .multi "one" "a\\nb" "trail" "x\\n\\n") }}')
    c("toYaml-nested", '{{ toYaml . }}')
    c("toYaml-empty", '{{ toYaml .empty }}{{ toYaml .emptymap }}{{ toYaml (dict "e" .empty "m" .emptymap) }}')
    c("toYaml-html-unicode", '{{ toYaml (dict "h" .html "u" .uni) }}')
    c("toYaml-nindent-resource", 'spec:\n  template:\n    metadata:\n      labels:{{ dict "app" .Name "tier" "db" | toYaml | nindent 8 }}')
    # dates (fixed instants; the oracle runs in UTC)
    c("date-fixed", '{{ date "2006-01-02" ' + T + ' }} {{ ' + T + ' | date "Jan 2, 2006 15:04:05 MST" }} {{ date "2006" 0 }}\n')
    c("date-int-seconds", '{{ date "2006-01-02T15:04:05Z07:00" 1588338855 }} {{ date "15:04" (int64 60) }}\n')
    c("dateInZone", '{{ dateInZone "2006-01-02 15:04 MST" ' + T + ' "UTC" }} {{ date_in_zone "15:04" ' + T + ' "UTC" }}\n')
    c("dateInZone-named-zone", '{{ dateInZone "2006-01-02 15:04 MST -0700" ' + T + ' "Europe/Berlin" }}\n')
    c("dateInZone-bad-zone", '{{ dateInZone "15:04" ' + T + ' "Nowhere/Zone" }}\n')
    c("dateModify", '{{ dateModify "1h" ' + T + ' | date "15:04" }} {{ date_modify "-30m" ' + T + ' | date "15:04" }} {{ dateModify "bogus" ' + T + ' | date "15:04" }}\n')
    c("htmlDate", '{{ htmlDate ' + T + ' }} {{ htmlDateInZone ' + T + ' "UTC" }} {{ htmlDate 0 }} {{ htmlDateInZone 86400 "UTC" }}\n')
    c("toDate-unixEpoch", '{{ unixEpoch ' + T + ' }} {{ toDate "2006-01-02" .date | unixEpoch }} {{ toDate "2006-01-02" "bad" }}\n')
    c("toDate-print", '{{ toDate "2006-01-02" .date }} {{ typeOf (toDate "2006-01-02" .date) }}\n')
    c("time-fields", '{{ $t := ' + T + ' }}{{ $t.Year }} {{ $t.Month }} {{ $t.Day }} {{ $t.Weekday }} {{ $t.Unix }} {{ $t.Format "Mon" }}\n')
    # non-deterministic functions through deterministic projections
    c("now-projections", '{{ typeOf now }} {{ gt (now | unixEpoch | atoi) 1600000000 }} {{ now | date "2006" | len }}\n')
    c("ago", '{{ regexMatch "^[0-9]+(ms|s|m|h)?[0-9.]*s?$" (ago now) }} {{ regexMatch "^[0-9]+h" (ago ' + T + ') }}\n')
    c("rand-strings", '{{ len (randAlpha 5) }} {{ regexMatch "^[A-Za-z]{8}$" (randAlpha 8) }} {{ regexMatch "^[A-Za-z0-9]{12}$" (randAlphaNum 12) }} {{ len (randAscii 7) }} {{ regexMatch "^[0-9]{6}$" (randNumeric 6) }}\n')
    c("rand-strings-zero", '[{{ randAlpha 0 }}][{{ randNumeric 0 }}][{{ randAscii 0 }}][{{ randAlphaNum 0 }}]\n')
    c("uuidv4", '{{ regexMatch "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$" uuidv4 }} {{ len uuidv4 }} {{ ne uuidv4 uuidv4 }}\n')
    c("genPrivateKey", '{{ hasPrefix "-----BEGIN EC PRIVATE KEY-----" (genPrivateKey "ecdsa") }} {{ hasPrefix "-----BEGIN PRIVATE KEY-----" (genPrivateKey "ed25519") }} {{ genPrivateKey "nope" }}\n')
    c("genCA", '{{ $ca := genCA "kudo-ca" 365 }}{{ hasPrefix "-----BEGIN CERTIFICATE-----" $ca.Cert }} {{ hasPrefix "-----BEGIN RSA PRIVATE KEY-----" $ca.Key }} {{ typeOf $ca }}\n')
    c("genSignedCert", '{{ $ca := genCA "kudo-ca" 365 }}{{ $c := genSignedCert "galera.default.svc" (list "127.0.0.1") (list "galera" "galera.default") 365 $ca }}{{ hasPrefix "-----BEGIN CERTIFICATE-----" $c.Cert }} {{ hasSuffix "-----END RSA PRIVATE KEY-----\\n" $c.Key }}\n')
    c("genSelfSignedCert", '{{ $c := genSelfSignedCert "kudo.example" nil nil 30 }}{{ hasPrefix "-----BEGIN CERTIFICATE-----" $c.Cert }} {{ $c.Key | hasPrefix "-----BEGIN RSA PRIVATE KEY-----" }}\n')
    c("getHostByName", '{{ getHostByName "127.0.0.1" }} {{ getHostByName "::1" | len }}\n')
    # semver / urls
    c("semver", '{{ $v := semver .ver }}{{ $v.Major }}.{{ $v.Minor }}.{{ $v.Patch }} {{ $v.Prerelease }} {{ $v.Metadata }} {{ $v }} {{ (semver "v2.0").Original }}\n')
    c("semverCompare", '{{ semverCompare ">=1.2" "1.3.0" }} {{ semverCompare "^1.2.0" "2.0.0" }} {{ semverCompare "~1.2.3" "1.2.9" }} {{ semverCompare "1.x" .ver }} {{ semverCompare ">1.0.0-0" .ver }}\n')
    c("semver-compare-method", '{{ (semver "1.2.3").Compare (semver "1.10.0") }} {{ (semver "2.0.0").GreaterThan (semver "1.0.0") }}\n')
    c("urlParse", '{{ urlParse "https://user:pw@host:8080/p/a?q=1#frag" }}|{{ (urlParse "http://example.com/x").host }}|{{ (urlParse "mailto:a@b").scheme }}\n')
    c("urlJoin", '{{ urlJoin (dict "scheme" "https" "host" "example.com" "path" "/x" "query" "a=b") }}|{{ urlJoin (urlParse "http://h/p?q#f") }}\n')
    # buildCustomCert with a fixed self-signed pair (data file)
    c("buildCustomCert", '{{ $c := buildCustomCert (b64enc .cert) (b64enc .key) }}{{ eq $c.Cert .cert }} {{ eq $c.Key .key }} {{ typeOf $c }}\n', CERT)
    c("buildCustomCert-invalid", '{{ buildCustomCert "bm90IGEgY2VydA==" "bm90IGEga2V5" }}\n')
    # combinations typical of operator templates
    c("combo-configmap", 'data:\n{{- range $k, $v := .Params }}\n  {{ $k | lower | replace "_" "-" }}: {{ $v | quote }}\n{{- end }}\n')
    c("combo-labels-dict", '{{- $labels := dict "app" .OperatorName "instance" .Name -}}\nlabels:\n{{- range $k, $v := $labels }}\n  {{ $k }}: {{ $v }}\n{{- end }}\n')
    c("combo-hosts-list", '{{ $hosts := list }}{{ range $i := until (int .Params.NODE_COUNT) }}{{ $hosts = append $hosts (printf "%s-%d" $.Name $i) }}{{ end }}{{ join "," $hosts }}\n')
    c("combo-memory-calc", '{{ $mb := div (mul (atoi .Params.MYSQL_PORT) 3) 4 }}{{ $mb }}Mi {{ printf "%.1f" (float64 $mb) }}\n')
    c("combo-checksum-annotation", 'checksum/config: {{ printf "%s-%s" .Name .Params.NODE_COUNT | sha256sum }}\n')
    c("combo-nested-defaults", '{{ $cfg := dict "replicas" (default "1" .Params.REPLICAS_NOPE) }}{{ $cfg.replicas }}\n')
    c("combo-contains-split", '{{ range splitList "," "a,b,c" }}{{ if contains "b" . }}[{{ . }}]{{ else }}{{ . }}{{ end }}{{ end }}\n')
    c("combo-printf-join", '{{ printf "%s" (list "a" "b" | join "+") }} {{ list 1 2 | toJson | b64enc }}\n')


CERT = None  # filled in below from the fixed pair


# ---------------------------------------------------------------------------------------------
# Extra per-function cases (second usages for rarely used functions, edge cases)
# ---------------------------------------------------------------------------------------------
def sprig_extra():
    c = lambda n, t, d=None: case("sprig", n, t, d)
    T = TIME
    c("x-abbrev-params", '{{ .Params.MYSQL_ROOT_PASSWORD | abbrev 4 }}|{{ abbrev 4 "abcdef" }}\n')
    c("x-abbrevboth-short", '{{ abbrevboth 1 5 "abcdefghij" }}\n')
    c("x-adler32sum-name", '{{ adler32sum .Name }}\n')
    c("x-ago-typed", '{{ typeOf (ago now) }}\n')
    c("x-atoi-float-string", '{{ atoi "3.5" }} {{ atoi "" }}\n')
    c("x-b32enc-name", '{{ b32enc .Name | b32dec }}\n')
    c("x-biggest-neg", '{{ biggest -5 -2 -9 }}\n')
    c("x-buildCustomCert-bad-b64", '{{ buildCustomCert "!!" "!!" }}\n')
    c("x-camelcase-upper", '{{ camelcase "HELLO_WORLD" }} {{ camelcase "a__b" }}\n')
    c("x-cat-params", '{{ cat .Params.SST_USER .Params.SST_PASSWORD }}\n')
    c("x-ceil-int", '{{ ceil 3 }} {{ ceil .num }}\n')
    c("x-coalesce-all-empty", '[{{ coalesce "" 0 .nil }}]\n')
    # found by tests/differential_fuzz.rs
    c("x-fuzz-field-of-nil-result", '[{{ coalesce.nil }}]\n')
    c("x-fuzz-printf-b-float", '{{ printf "%b|%b|%b|%8b" 1234.5678 0.0 -2.5 1.0 }}\n')
    c("x-fuzz-unknown-method-args", '{{ (semver "2.0.0").Ghan (semver "1.0.0") }}\n')
    c("x-fuzz-method-without-args", '{{ (semver "2.0.0").GreaterThan }}\n')
    c("x-fuzz-time-param-type", '{{ "x" | dateModify "1h" }}\n')
    c("x-fuzz-time-param-const", '{{ unixEpoch "2020" }}\n')
    c("x-fuzz-method-arg-count", '{{ (semver "1.2.3").Compare (semver "1.0.0") (semver "x") }}\n')
    c("x-compact-strings", '{{ compact (splitList "," "a,,b,") }}\n')
    c("x-concat-types", '{{ typeOf (concat .strs .list) }} {{ concat (list "a") (splitList "," "b,c") }}\n')
    c("x-date-formats", '{{ date "Monday, 02-Jan-06 15:04:05.000 -0700" ' + T + ' }}\n')
    c("x-date-in-zone-int", '{{ dateInZone "2006-01-02" 0 "UTC" }} {{ date_in_zone "2006" 1588338855 "UTC" }}\n')
    c("x-dateModify-day", '{{ dateModify "24h" ' + T + ' | date "2006-01-02" }} {{ date_modify "1h30m" ' + T + ' | date "15:04" }}\n')
    c("x-decryptAES-wrong-key", '{{ $e := encryptAES "k1" "secret" }}{{ ne (decryptAES "k1" $e) "wrong" }}\n')
    c("x-deepCopy-nested", '{{ $c := deepCopy .nested }}{{ $_ := set $c.a "x" 1 }}{{ .nested }} {{ $c }}\n')
    c("x-deepEqual-maps", '{{ deepEqual (dict "a" 1) (dict "a" 1) }} {{ deepEqual (dict "a" 1) (dict "a" 2) }}\n')
    c("x-default-list", '{{ default (list 1) .empty }} {{ default .strs .nil }}\n')
    c("x-derivePassword-basic", '{{ derivePassword 3 "basic" "pw" "name" "site" }} {{ derivePassword 1 "short" "pw" "name" "site" }} {{ derivePassword 1 "medium" "pw" "name" "site" }}\n')
    c("x-dict-overwrite", '{{ dict "a" 1 "a" 2 }} {{ (dict "k" .list).k }}\n')
    c("x-div-float-args", '{{ div 7.9 2 }} {{ div "9" "3" }}\n')
    c("x-empty-strings", '{{ empty " " }} {{ empty .Params.EMPTY }} {{ empty .Params.BOOL }}\n')
    c("x-encryptAES-empty", '{{ encryptAES "key" "" | decryptAES "key" }}|{{ encryptAES "key" "x" | len | lt 10 }}\n')
    c("x-fail-empty", '{{ fail "" }}\n')
    c("x-first-strs", '{{ first .strs }} {{ first .mixed }}\n')
    c("x-float64-params", '{{ float64 .Params.NODE_COUNT }} {{ float64 "1e3" }} {{ float64 .t }}\n')
    c("x-floor-neg", '{{ floor -0.5 }} {{ floor 3 }}\n')
    c("x-genCA-days", '{{ $ca := genCA "x" 1 }}{{ len $ca.Cert | lt 100 }}\n')
    c("x-genPrivateKey-types", '{{ genPrivateKey "ecdsa" | hasSuffix "-----END EC PRIVATE KEY-----\\n" }} {{ genPrivateKey "bogus" }}\n')
    c("x-genSelfSignedCert-ips", '{{ $c := genSelfSignedCert "h" (list "10.0.0.1") (list "a.b") 1 }}{{ contains "CERTIFICATE" $c.Cert }}\n')
    c("x-genSignedCert-typeof", '{{ $ca := genCA "ca" 2 }}{{ typeOf (genSignedCert "n" nil nil 2 $ca) }}\n')
    c("x-getHostByName-type", '{{ typeOf (getHostByName "127.0.0.1") }}\n')
    c("x-has-nil", '{{ has .nil .mixed }} {{ has 1 .nil }}\n')
    c("x-hasKey-nested", '{{ hasKey .nested "a" }} {{ hasKey .nested.a "b" }}\n')
    c("x-hello-len", '{{ len hello }}\n')
    c("x-htmlDate-mod", '{{ htmlDate (dateModify "48h" ' + T + ') }}\n')
    c("x-htmlDateInZone-zero", '{{ htmlDateInZone 0 "UTC" }}\n')
    c("x-indent-multi", '{{ indent 2 .multi }}|\n')
    c("x-initial-strs", '{{ initial .strs }} {{ initial (list 1) }}\n')
    c("x-initials-unicode", '{{ initials "élan vital" }}\n')
    c("x-int64-neg", '{{ int64 "-5" }} {{ int64 .neg }} {{ int64 "1e3" }}\n')
    c("x-join-nil", '{{ join "," .nil }}|{{ join "," (list .nil "a") }}\n')
    c("x-kebabcase-spaces", '{{ kebabcase "Hello World Foo" }}\n')
    c("x-keys-count", '{{ keys .Params | len }}\n')
    c("x-kindIs-map", '{{ kindIs "map" .map }} {{ kindIs "invalid" .nil }}\n')
    c("x-kindOf-func-results", '{{ kindOf (list) }} {{ kindOf (dict) }} {{ kindOf 1.5 }} {{ kindOf true }} {{ kindOf (semver "1.0.0") }}\n')
    c("x-last-list", '{{ last .list }} {{ last .mixed }}\n')
    c("x-list-nested", '{{ list (list 1 2) (dict "a" 1) }}\n')
    c("x-lower-params", '{{ lower .Name }} {{ lower .OperatorName }}\n')
    c("x-max-strings", '{{ max "3" "10" }} {{ min "3" "10" }}\n')
    c("x-merge-data", '{{ $m := merge (dict) .map .smap }}{{ $m }}\n')
    c("x-mergeOverwrite-data", '{{ mergeOverwrite (dict "a" "keep" "z" 0) .map }}\n')
    c("x-min-single", '{{ min 7 }} {{ min .neg 3 }}\n')
    c("x-mod-neg", '{{ mod 7 -3 }} {{ mod .num 2 }}\n')
    c("x-mul-single", '{{ mul 5 }} {{ mul 1.5 2 }}\n')
    c("x-nindent-zero", '[{{ nindent 0 "a" }}]\n')
    c("x-nospace-params", '{{ nospace "a b c" }} {{ nospace .word }}\n')
    c("x-now-year", '{{ gt (now | date "2006" | atoi) 2019 }}\n')
    c("x-omit-none", '{{ omit .map }} {{ omit .map "zz" }}\n')
    c("x-pick-none", '{{ pick .map "zz" }} {{ pick .smap "alpha" }}\n')
    c("x-pluck-none", '{{ pluck "zz" .map }} {{ pluck "b" .map .map }}\n')
    c("x-plural-neg", '{{ plural "a" "b" -1 }}\n')
    c("x-prepend-empty", '{{ prepend .empty "x" }} {{ prepend .strs "a" | join "," }}\n')
    c("x-push-empty", '{{ push .empty 1 }} {{ push .list "x" }}\n')
    c("x-quote-list", '{{ quote .list }} {{ squote .map }}\n')
    c("x-randAlpha-distinct", '{{ ne (randAlpha 32) (randAlpha 32) }}\n')
    c("x-randAlphaNum-len", '{{ randAlphaNum 9 | len }}\n')
    c("x-randAscii-printable", '{{ regexMatch "^[ -~]{20}$" (randAscii 20) }}\n')
    c("x-randNumeric-len", '{{ randNumeric 15 | len }}\n')
    c("x-regexFind-params", '{{ regexFind "[0-9]+" .Params.VOLUME_SIZE }}{{ regexFind "[A-Z]+" .Params.VOLUME_SIZE }}\n')
    c("x-regexFindAll-groups", '{{ regexFindAll "a(b)" "abab" -1 }} {{ regexFindAll "" "ab" -1 }}\n')
    c("x-regexMatch-anchors", '{{ regexMatch "^galera-" .Name }} {{ regexMatch "(?i)HELLO" .str }}\n')
    c("x-regexReplaceAll-named", '{{ regexReplaceAll "(?P<first>\\\\w+) (?P<last>\\\\w+)" "John Smith" "${last}, ${first}" }}\n')
    c("x-regexReplaceAllLiteral-dollar", '{{ regexReplaceAllLiteral "o" "foo" "$0" }}\n')
    c("x-regexSplit-zero", '{{ regexSplit "," "a,b" 0 }} {{ regexSplit "" "abc" -1 }}\n')
    c("x-repeat-params", '{{ repeat (int .Params.NODE_COUNT) "=" }}\n')
    c("x-replace-params", '{{ replace "-" "_" .Name | upper }}\n')
    c("x-rest-strs", '{{ rest .strs }} {{ rest .mixed }}\n')
    c("x-reverse-mixed", '{{ reverse .mixed }}\n')
    c("x-round-neg-precision", '{{ round 1234.5678 -2 }} {{ round 0.5 0 }} {{ round "x" 1 }}\n')
    c("x-semver-fields", '{{ (semver "1.2.3").Minor }} {{ typeOf (semver "1.2.3") }}\n')
    c("x-semverCompare-params", '{{ semverCompare ">= 0.1.0" .OperatorVersion }} {{ semverCompare "< 0.1.0" .OperatorVersion }}\n')
    c("x-set-overwrite", '{{ $d := dict "a" 1 }}{{ set $d "a" 2 }}\n')
    c("x-sha1sum-empty", '{{ sha1sum "" }}\n')
    c("x-sha256sum-unicode", '{{ sha256sum .uni }}\n')
    c("x-shuffle-empty", '[{{ shuffle "" }}] {{ shuffle "z" }}\n')
    c("x-slice-sprig-strs", '{{ slice .strs 0 1 }} {{ slice .empty }}\n')
    c("x-snakecase-camel", '{{ snakecase "camelCaseString" }} {{ snakecase "ALLCAPS" }}\n')
    c("x-sortAlpha-mixed", '{{ sortAlpha .mixed }}\n')
    c("x-split-empty", '{{ split "," "" }} {{ len (split "x" "axbxc") }}\n')
    c("x-splitList-params", '{{ splitList "." .Params.VOLUME_SIZE }} {{ splitList "-" .Name | last }}\n')
    c("x-splitn-neg", '{{ splitn "," -1 .csv }}\n')
    c("x-squote-params", '{{ squote .Name }}\n')
    c("x-sub-neg", '{{ sub 0 5 }} {{ sub .float 1 }}\n')
    c("x-substr-unicode", '{{ substr 0 2 .uni }}\n')
    c("x-swapcase-mixed", '{{ swapcase "aBc 123" }}\n')
    c("x-ternary-values", '{{ ternary 1 2 true }} {{ ternary .list .map false }}\n')
    c("x-title-params", '{{ title .OperatorName }} {{ title "hello_world" }}\n')
    c("x-toDate-layouts", '{{ toDate "02/01/2006" "15/06/2021" | date "2006-01-02" }} {{ toDate "2006-01-02" "x" | date "2006" }}\n')
    c("x-toDate-rfc3339", '{{ toDate "2006-01-02T15:04:05Z07:00" "2021-03-04T05:06:07+02:00" | date "2006-01-02 15:04 -0700" }}\n')
    c("x-toDecimal-neg", '{{ toDecimal "-17" }} {{ toDecimal "8" }}\n')
    c("x-toJson-types", '{{ toJson (list 1 "a" .nil .t 1.5) }} {{ toJson (dict) }} {{ toJson .empty }} {{ toJson "\\u2028" }}\n')
    c("x-toPrettyJson-map", '{{ toPrettyJson .map }}\n')
    c("x-toString-map", '{{ toString .map }} {{ toString (semver "1.2.3") }}\n')
    c("x-toStrings-nil", '{{ toStrings .nil }} {{ toStrings .strs }}\n')
    c("x-toYaml-matrix", '{{ toYaml .matrix }}')
    c("x-toYaml-semver", '{{ toYaml (list 1 (int64 2) (float64 3) "4") }}')
    c("x-trim-params", '[{{ trim "  x  " }}][{{ trim "" }}]\n')
    c("x-trimAll-multi", '{{ trimAll "ab" "abcba" }}\n')
    c("x-trimall-order", '{{ trimall "-" "--x--" }}\n')
    c("x-trimPrefix-none", '{{ trimPrefix "zz" .str }} {{ trimSuffix "zz" .str }}\n')
    c("x-trunc-unicode", '{{ trunc 2 .uni }}\n')
    c("x-tuple-nested", '{{ tuple (tuple 1) 2 }}\n')
    c("x-typeIs-list", '{{ typeIs "[]interface {}" .list }} {{ typeIsLike "[]interface {}" .list }}\n')
    c("x-typeOf-results", '{{ typeOf (splitList "," "a") }} {{ typeOf (split "," "a") }} {{ typeOf (keys .map) }} {{ typeOf (sortAlpha .list) }} {{ typeOf (uniq .list) }} {{ typeOf (dict) }} {{ typeOf (toDecimal "1") }} {{ typeOf (until 1) }} {{ typeOf (urlParse "x") }}\n')
    c("x-uniq-mixed", '{{ uniq (list 1 1.0 "1" 1) }}\n')
    c("x-unixEpoch-zero", '{{ unixEpoch (toDate "2006-01-02" "1970-01-01") }}\n')
    c("x-unset-missing", '{{ $d := dict "a" 1 }}{{ unset $d "zz" }}\n')
    c("x-until-params", '{{ until (int .Params.NODE_COUNT) | join "," }}\n')
    c("x-untilStep-neg-step", '{{ untilStep 5 0 -1 }} {{ untilStep 0 5 -1 }}\n')
    c("x-untitle-single", '{{ untitle "A" }} {{ untitle "" }}\n')
    c("x-upper-unicode", '{{ upper .uni }}\n')
    c("x-urlJoin-min", '{{ urlJoin (dict "host" "h" "scheme" "s") }}\n')
    c("x-urlParse-fields", '{{ $u := urlParse "https://u@h:1/p?x=1#f" }}{{ $u.scheme }} {{ $u.userinfo }} {{ $u.path }} {{ $u.query }} {{ $u.fragment }} {{ $u.opaque }}\n')
    c("x-uuidv4-distinct", '{{ $a := uuidv4 }}{{ $b := uuidv4 }}{{ ne $a $b }} {{ typeOf $a }}\n')
    c("x-values-params", '{{ values .Params | sortAlpha | len }}\n')
    c("x-without-none", '{{ without .empty 1 }} {{ without .dups "a" }}\n')
    c("x-wrap-long-word", '{{ wrap 3 "abcdefgh ij" }}\n')
    c("x-wrapWith-newline", '{{ wrapWith 4 "|" "aa bb cc" }}\n')
    c("x-append-nil", '{{ append .nil 1 }}\n')
    c("x-compact-nil", '{{ compact .nil }}\n')
    c("x-deepCopy-nil", '{{ deepCopy .nil }}\n')
    c("x-hasPrefix-empty", '{{ hasPrefix "" .str }} {{ hasSuffix "" "" }}\n')
    c("x-indent-neg", '{{ indent -1 "x" }}\n')
    c("x-contains-params", '{{ contains "ADMIN" (upper .Params.SST_PASSWORD) }}\n')
    c("x-sha1sum-params", '{{ sha1sum .Params.SST_PASSWORD | trunc 8 }}\n')
    c("x-mustlike-v2-names", '{{ if has "b" (list "a" "b") }}found{{ end }} {{ index (dict "x" (list 1 2)) "x" 1 }}\n')


def yaml_cases():
    c = lambda n, t, d: case("yaml", n, t, d, "yaml")
    c("kudo-params", "{{ .Name }} {{ .Params.NODE_COUNT }} {{ typeOf .Params.NODE_COUNT }}\n",
      "Name: galera-instance\nNamespace: default\nOperatorName: galera\nParams:\n  NODE_COUNT: \"3\"\n  SST_USER: root\n")
    c("numbers", "{{ .a }} {{ .b }} {{ .c }} {{ .d }} {{ .e }} {{ typeOf .a }} {{ typeOf .b }}\n",
      "a: 3\nb: 2.5\nc: 1000000\nd: -7\ne: 1e3\n")
    c("bools-yaml11", "{{ .a }} {{ .b }} {{ .c }} {{ .d }} {{ typeOf .a }} {{ typeOf .c }}\n",
      "a: true\nb: false\nc: yes\nd: off\n")
    c("nulls", "{{ .a }} {{ .b }} {{ .c }} {{ typeOf .a }}\n", "a: null\nb: ~\nc:\n")
    # found by tests/differential_fuzz.rs: yaml.v2 keeps the last duplicate key, and a value
    # it discards is never converted to JSON, so a null key or NaN inside it is no error
    c("x-fuzz-duplicate-keys", "{{ toJson . }}\n", "a: 1\nb: x\na: 2\nc:\n  ~: 1\n  n: .nan\nc: ok\n")
    c("strings-quoted", "{{ .a }}|{{ .b }}|{{ .c }}|{{ typeOf .c }}\n", "a: 'single'\nb: \"double \\t tab\"\nc: \"3\"\n")
    c("block-literal", "{{ .script }}|{{ .folded }}|\n", "script: |\n  line one\n  line two\nfolded: >\n  folded\n  text\n")
    c("lists", "{{ .tags }} {{ join \",\" .tags }} {{ index .nested 1 0 }} {{ len .empty }}\n",
      "tags: [a, b, c]\nnested:\n  - [1, 2]\n  - [3, 4]\nempty: []\n")
    c("maps-sorted", "{{ range $k, $v := .labels }}{{ $k }}={{ $v }} {{ end }}\n",
      "labels:\n  zeta: 1\n  alpha: 2\n  mid: three\n")
    c("anchors-aliases", "{{ .a.x }} {{ .b.x }} {{ .b.y }}\n", "base: &base\n  x: 1\na: *base\nb:\n  <<: *base\n  y: 2\n")
    c("merge-key-print", "{{ toJson . }}\n", "base: &base\n  x: 1\nb:\n  <<: *base\n  y: 2\n")
    c("yaml11-bool-keys", "{{ toJson . }}\n", "y: 1\nn: 2\nyes: 3\non: 4\nkey: 5\n")
    c("numeric-keys", "{{ index . \"1\" }} {{ index . \"true\" }}\n", "1: one\ntrue: yes-key\n")
    c("octal-hex", "{{ .o }} {{ .h }} {{ .s }}\n", "o: 0755\nh: 0x1F\ns: '0755'\n")
    c("timestamps-as-strings", "{{ .d }} {{ typeOf .d }}\n", "d: 2020-05-01\n")
    c("big-numbers", "{{ .a }} {{ .b }} {{ toJson .a }}\n", "a: 12345678901234567890\nb: 1.5e300\n")
    c("empty-document", "{{ . }} {{ len . }}\n", "")
    c("comment-only-document", "{{ . }}\n", "# nothing here\n")
    c("list-of-maps", "{{ range .users }}{{ .name }}:{{ .age }} {{ end }}\n",
      "users:\n  - name: ann\n    age: 30\n  - name: bob\n    age: 25\n")
    c("toYaml-roundtrip", "{{ toYaml . }}", "b: 2\na:\n  - x\n  - y: 1\nc: \"str\"\n")
    c("toJson-from-yaml", "{{ toJson . }}\n", "n: 1\nf: 1.5\nl: [1, two]\nm: {k: v}\n")
    c("missing-key-yaml", "{{ .nope }}\n", "a: 1\n")
    c("unicode-yaml", "{{ .greeting }} {{ len .greeting }}\n", "greeting: \"héllo ✓\"\n")
    c("galera-params-yaml", GALERA_ADDR_FIRSTBOOT + "\n",
      "Name: gal\nOperatorName: galera\nStepName: firstboot_config\nParams:\n  NODE_COUNT: \"4\"\n")
    c("int-param-unquoted", "{{ int .Params.NODE_COUNT }} {{ typeOf .Params.NODE_COUNT }} {{ until (int .Params.NODE_COUNT) }}\n",
      "Params:\n  NODE_COUNT: 3\n")
    c("eq-float-yaml", "{{ eq .n 3.0 }}\n", "n: 3\n")


def json_data_cases():
    c = lambda n, t, d: case("json", n, t, d)
    c("numbers-float64", "{{ .a }} {{ .b }} {{ .c }} {{ .d }} {{ .e }} {{ typeOf .a }}\n",
      {"a": 1, "b": 1000000, "c": 123456789, "d": 0.1, "e": -0.0})
    c("number-formats", "{{ .a }} {{ .b }} {{ .c }} {{ .d }}\n", {"a": 1e20, "b": 1e21, "c": 1.5e-5, "d": 123456.789})
    c("int-conversion-big", "{{ int .a }} {{ int64 .a }} {{ printf \"%.0f\" .a }}\n", {"a": 9007199254740993})
    c("unicode-escapes", "{{ .a }} {{ len .a }}\n", Raw('{"a": "\\u00e9\\u2713\\ud83d\\ude00 \\/ \\"q\\""}\n'))
    c("null-root-fields", "{{ .a }} {{ typeOf .a }}\n", {"a": None})
    c("deep-nesting", "{{ .a.b.c.d.e.f }}\n", {"a": {"b": {"c": {"d": {"e": {"f": "bottom"}}}}}})
    c("array-root", "{{ . }} {{ index . 1 }}\n", [1, "x", None])
    c("string-root", "{{ . }} {{ typeOf . }}\n", "just a string")
    c("number-root", "{{ . }}\n", 42)
    c("empty-object", "{{ . }} {{ len . }}\n", {})
    c("keys-with-dashes", "{{ index . \"my-key\" }} {{ index . \"with space\" }}\n", {"my-key": 1, "with space": 2})
    c("dash-field-parse-error", "{{ .my-key }}\n", {"my-key": 1})
    c("mutation-isolated", "{{ $_ := set . \"x\" 1 }}{{ .x }}\n", {"y": 2})
    c("case-sensitive-keys", "{{ .name }} {{ .Name }}\n", {"name": "lower", "Name": "upper"})
    c("bool-strings-compare", "{{ eq .a \"true\" }} {{ eq .b true }}\n", {"a": "true", "b": True})
    c("json-null-root", "{{ . }}\n", None)
    c("range-over-object-of-lists", "{{ range $k, $v := . }}{{ $k }}:{{ len $v }} {{ end }}\n", {"b": [1], "a": [1, 2], "c": []})
    c("exponent-int-like", "{{ .a }} {{ int .a }}\n", {"a": 3e2})
    c("max-safe", "{{ .a }}\n", {"a": 9007199254740991})
    c("negative-zero", "{{ .a }} {{ printf \"%v\" .a }}\n", {"a": -0.0})


# ---------------------------------------------------------------------------------------------
# extra: formatting and typing corners (fmt, constants, yaml.v2/json encoders, positions)
# ---------------------------------------------------------------------------------------------
def extra():
    c = lambda n, t, d=None: case("extra", n, t, d)
    T = TIME
    c("const-float-printing", '{{ 1e6 }} {{ 2.0 }} {{ 0.1 }} {{ 100000000000000000000.0 }} {{ 1e-7 }} {{ 123456789.0 }}\n')
    c("const-types", '{{ printf "%T %T %T %T %T %T" 1 1.0 1e3 0x10 \'a\' "s" }}\n')
    c("const-integral-float-to-int-param", '{{ repeat 2.0 "x" }}\n')
    c("const-fraction-to-int-param", '{{ repeat 1.5 "x" }}\n')
    c("const-string-to-int-param", '{{ until "3" }}\n')
    c("const-int-to-string-param", '{{ upper 5 }}\n')
    c("const-untilStep-float", '{{ untilStep 0 1.5 1 }}\n')
    c("data-float-printing", '{{ .a }} {{ .b }} {{ .c }} {{ .d }} {{ .e }} {{ .f }}\n', {"a": 123456789, "b": 1e20, "c": 0.1, "d": 100.5, "e": 1.0e-5, "f": 12345678.9})
    c("printf-verbs-on-types", '{{ printf "%s|%d|%v|%q" .strs .list .map .strs }}\n')
    c("printf-padding", '{{ printf "[%5s][%-5s][%05d][%+d][%8.3f][%-8.2f][%x][% x]" "ab" "ab" 42 7 3.14159 2.5 "hi" "hi" }}\n')
    c("printf-char-unicode", '{{ printf "%c %U %c" 65 0x1F600 \'é\' }}\n')
    c("printf-nil-and-bool", '{{ printf "%t %v %s" .t .nil .f }}\n')
    c("printf-g-e", '{{ printf "%g %g %e %G %.3g" .big .huge .float 1e-10 3.14159 }}\n')
    c("printf-int64", '{{ printf "%d %v %T" (int64 5) (int64 -3) (int64 1) }}\n')
    c("printf-sharp", '{{ printf "%#v|%#v|%#v" .str .num .t }}\n')
    c("printf-map-of-lists", '{{ printf "%v" (dict "b" (list 1 2) "a" (dict "x" .nil)) }}\n')
    c("print-sprig-typed-lists", '{{ splitList "," "a,b" }} {{ until 3 }} {{ toStrings .list }} {{ list (int64 1) 2 }}\n')
    c("print-numeric-like-keys", '{{ dict "10" 1 "2" 2 "a" 3 "B" 4 }} {{ range $k, $v := dict "10" 1 "2" 2 "1" 3 }}{{ $k }}{{ end }}\n')
    c("eq-int64-int", '{{ eq (int64 1) 1 }} {{ lt (int64 1) 2 }} {{ eq (int 3) (int64 3) }}\n')
    c("eq-int64-float-error", '{{ lt (int64 1) 2.0 }}\n')
    c("eq-string-nil", '{{ eq .str .nil }}\n')
    c("eq-nil-literal", '{{ eq .nil nil }}\n')
    c("not-two-args", '{{ not 1 2 }}\n')
    c("and-no-args", '{{ and }}\n')
    c("len-int64", '{{ len (int64 3) }}\n')
    c("len-dict", '{{ len (dict "a" 1 "b" 2) }} {{ len (list) }} {{ len (splitList "," "a,b,c") }}\n')
    c("field-on-int-var", '{{ $x := 1 }}{{ $x.foo }}\n')
    c("nil-chain", '{{ .nil.a.b }}\n')
    c("index-too-many", '{{ index .users 0 "name" 1 }}\n')
    c("index-map-list", '{{ index .users 1 "age" }} {{ index (index .matrix 0) 1 }}\n')
    c("error-col-after-multibyte", '{{ "é✓" }}{{ .Nope }}\n')
    c("error-col-after-crlf", 'a\r\nb {{ .Nope }}\r\n')
    c("error-in-block", '{{ block "b" . }}{{ .Nope }}{{ end }}\n')
    c("error-template-arg", '{{ define "x" }}{{ . }}{{ end }}{{ template "x" .Nope }}\n')
    c("error-second-line-define", '{{ define "x" }}\nok\n{{ .Nope }}{{ end }}{{ template "x" . }}\n')
    c("error-in-trimmed-action", 'a\n  {{- .Nope -}}\nb\n')
    c("trim-if-block-yaml", 'spec:\n  {{- if .t }}\n  enabled: true\n  {{- end }}\n  {{- if .f }}\n  disabled: true\n  {{- end }}\nend\n')
    c("with-range-scoping", '{{ with $u := index .users 0 }}{{ range $.strs }}{{ $u.name }}-{{ . }} {{ end }}{{ end }}\n')
    c("template-dict-arg", '{{ define "x" }}{{ .a }}/{{ .b }}{{ end }}{{ template "x" (dict "a" 1 "b" .Name) }}\n')
    c("multiple-defines", '{{ define "a" }}A{{ template "b" }}{{ end }}{{ define "b" }}B{{ end }}{{ template "a" }}{{ template "b" }}\n')
    c("block-uses-later-define", '{{ template "x" . }}|{{ block "y" .Name }}[{{ . }}]{{ end }}{{ define "x" }}{{ .Namespace }}{{ end }}\n')
    c("range-map-numeric-keys", '{{ range $k, $v := .m }}{{ $k }}={{ $v }} {{ end }}\n', {"m": {"10": "a", "9": "b", "1": "c", "B": "d", "a": "e"}})
    c("range-else-break", '{{ range .list }}{{ break }}{{ else }}none{{ end }}done\n')
    c("html-types", '{{ html 1 2 }} {{ html .t }} {{ js "\'\\"" }} {{ js 1 }} {{ urlquery "a+b c" .nil }}\n')
    c("js-unicode", '{{ js "é\\u2028<script>" }}\n')
    c("toJson-escapes", '{{ toJson "<a>&\\u2028\\u2029" }} {{ toJson (dict "k<" "v>") }} {{ toJson "é✓\\t\\n" }}\n')
    c("toJson-key-order", '{{ toJson (dict "b" 1 "a" 2 "B" 3 "10" 4 "2" 5) }}\n')
    c("toJson-floats", '{{ toJson (list .big .huge .small 0.1 1e-7 123456789.0 .float) }}\n')
    c("toYaml-key-order", '{{ toYaml (dict "a10" 1 "a2" 2 "b" 3 "B" 4 "1" 5 "10" 6 "2" 7) }}')
    c("toYaml-long-string", '{{ toYaml (dict "long" "this is a very long sentence that goes on and on well past the eighty column limit of yaml v2 folding") }}')
    c("toYaml-special-strings", '{{ toYaml (list " lead" "trail " "a:b" "a: b" "a #b" "@x" "`x" "%x" "*x" "&x" "!x" "|x" ">x" "\'q" "\\"dq" "1.0" "0x10" "+1" ".5" "1_000" "2001-12-14" "Yes" "NO" "" "-" "?" "x\\ty") }}')
    c("toYaml-floats", '{{ toYaml (list 1.0 0.5 1e-7 123456789.0 .big .huge -0.0 100.0) }}')
    c("toYaml-unicode-keys", '{{ toYaml (dict "é" "✓" "" "empty-key" "a b" "space key") }}')
    c("toYaml-nested-lists", '{{ toYaml (dict "l" (list (list 1 2) (dict "a" (list)) .nil)) }}')
    c("toYaml-bools-ints", '{{ toYaml (list true false (int 3) (int64 -4) "true") }}')
    c("toYaml-multiline-trailing", '{{ toYaml (dict "a" "x\\ny\\n" "b" "x\\ny" "c" "\\nlead" "d" "x\\n\\n\\n" "e" "  indented\\nnext") }}')
    c("quote-escapes", '{{ quote "a\\nb\\t\\"c\\" é \\u2028" }} {{ squote "a\\nb" }}\n')
    c("regex-dollar-group-names", '{{ regexReplaceAll "(a)(b)" "ab" "$1W|${1}W|$2" }}\n')
    c("regexFindAll-zero", '{{ regexFindAll "a" "aaa" 0 }} {{ regexFindAll "a" "aaa" 1 }}\n')
    c("splitn-more", '{{ splitn "," 10 "a,b" }}\n')
    c("semverCompare-ranges", '{{ semverCompare "1.2 - 1.4" "1.3.0" }} {{ semverCompare ">=1.0, <2.0" "1.5.0" }} {{ semverCompare "<1.0 || >=3.0" "3.1.0" }} {{ semverCompare "^0.1.0" "0.2.0" }}\n')
    c("semver-prerelease-order", '{{ (semver "1.0.0-alpha").Compare (semver "1.0.0") }} {{ (semver "1.0.0-alpha.1").LessThan (semver "1.0.0-alpha.beta") }} {{ (semver "1.2.3").IncMinor }}\n')
    c("cast-int-strings", '{{ int64 "0x1F" }} {{ int "1e3" }} {{ float64 "0x10" }} {{ atoi "010" }} {{ toDecimal "0x10" }} {{ int " 3" }} {{ int "-010" }}\n')
    c("math-float-truncation", '{{ max 1.5 2 }} {{ div 1 3.0 }} {{ mul .float 2 }} {{ add1 1.5 }} {{ sub 2.9 0.9 }} {{ mod 7.5 2 }}\n')
    c("round-negatives", '{{ round -0.5 0 }} {{ round -1.55 1 }} {{ round 0.045 2 }} {{ round 1e20 2 }}\n')
    c("dates-layouts", '{{ date "Mon Jan _2 15:04:05 2006" ' + T + ' }}|{{ date ".000 3:04PM Z07:00" ' + T + ' }}|{{ dateInZone "Z07:00 MST" ' + T + ' "Asia/Kolkata" }}\n')
    c("toDate-zone-abbrev", '{{ toDate "2006-01-02 MST" "2020-01-01 PST" | date "2006-01-02 15:04 MST -0700" }}\n')
    c("toDate-offset", '{{ toDate "2006-01-02T15:04:05-07:00" "2020-05-01T10:00:00+05:30" | unixEpoch }}\n')
    c("kindOf-time", '{{ kindOf ' + T + ' }} {{ typeOf ' + T + ' }}\n')
    c("time-methods", '{{ $t := ' + T + ' }}{{ $t.UTC.Hour }} {{ $t.YearDay }} {{ ($t.Add 3600000000000).Hour }} {{ $t.IsZero }}\n')
    c("wrap-newlines", '{{ wrap 10 "line one is long\\nshort\\n\\nlast paragraph words" }}\n')
    c("abbrev-unicode", '{{ abbrev 5 "héllo wörld" }}\n')
    c("indent-crlf", '{{ indent 2 "a\\r\\nb" }}|\n')
    c("b64dec-urlsafe", '{{ b64dec "_-8=" }}|{{ b64enc "\\xff" }}\n')
    c("trimAll-cutset", '{{ trimAll "abc" "cabxcba" }} {{ trimAll "" " x " }}|\n')
    c("cat-lists", '{{ cat (list 1 2) (dict "a" 1) .nil }}\n')
    c("deepEqual-typed", '{{ deepEqual (list 1) (list 1.0) }} {{ deepEqual (splitList "," "a") (list "a") }} {{ deepEqual .nil .nil }}\n')
    c("has-typed", '{{ has 1 (list 1 2) }} {{ has "1" (list 1) }} {{ has 1.0 .list }}\n')
    c("uniq-typed", '{{ uniq (list 1 (int64 1) 1.0 "1") }}\n')
    c("without-typed", '{{ without (list 1 1.0 "1") 1 }}\n')
    c("sortAlpha-unicode", '{{ sortAlpha (list "é" "e" "z" "E" "a") }}\n')
    c("coalesce-types", '{{ coalesce .emptymap .empty 0 .f "" .nil .list }}\n')
    c("ternary-nil", '{{ ternary .nil "b" true }}\n')
    c("set-nested-path", '{{ $_ := set .nested.a "new" "v" }}{{ .nested }}\n')
    c("unset-then-missing", '{{ $_ := unset .Params "NODE_COUNT" }}{{ .Params.NODE_COUNT }}\n')
    c("merge-lists-not-merged", '{{ merge (dict "l" (list 1)) (dict "l" (list 2 3) "m" 1) }}\n')
    c("mergeOverwrite-empty-values", '{{ mergeOverwrite (dict "a" 1 "b" "x") (dict "a" 0 "b" "") }}\n')
    c("pick-omit-typed", '{{ typeOf (pick .map "a") }} {{ typeOf (omit .smap "x") }}\n')
    c("dict-nil-value", '{{ dict "a" .nil }} {{ toJson (dict "a" .nil) }}\n')
    c("list-of-lists-toJson", '{{ toJson (list .matrix .users) }}\n')
    c("urlParse-edge", '{{ urlParse "" }}|{{ urlParse "/just/path?x=1" }}|{{ urlParse "http://[::1]:80/" }}\n')
    c("urlJoin-edge", '{{ urlJoin (dict "scheme" "http" "host" "h" "userinfo" "u:p" "fragment" "f g") }}\n')
    c("nindent-empty", '[{{ nindent 2 "" }}]\n')
    c("pipeline-decl-in-if", '{{ if $n := len .list }}{{ $n }} items{{ end }}\n')
    c("range-assign-outer", '{{ $last := "" }}{{ range .strs }}{{ $last = . }}{{ end }}{{ $last }}\n')
    c("deep-paren-nesting", '{{ add (add (add (add 1 2) 3) (mul 2 (sub 5 3))) (len (list (list) (list))) }}\n')
    c("chained-method-on-paren", '{{ (semver (printf "%d.%d.0" 1 2)).Minor }}\n')


# ---------------------------------------------------------------------------------------------
# operators: realistic KUDO operator templates (ZooKeeper/Kafka/Cassandra-style), KUDO data
# ---------------------------------------------------------------------------------------------
ZK_DATA = {
    "Name": "zk", "Namespace": "kudo-test", "OperatorName": "zookeeper", "OperatorVersion": "0.3.0",
    "AppVersion": "3.4.14", "PlanName": "deploy", "PhaseName": "zookeeper", "StepName": "everything",
    "Params": {"NODE_COUNT": "3", "CLIENT_PORT": "2181", "SERVER_PORT": "2888", "ELECTION_PORT": "3888",
               "CPUS": "0.25", "MEMORY": "1Gi", "DISK_SIZE": "5Gi", "STORAGE_CLASS": "",
               "METRICS_ENABLED": "true", "JVM_OPTS": "-Xmx512M -Xms512M", "CUSTOM_CONFIG": "",
               "ZOOKEEPER_URI": "zk-zookeeper-0.zk-hs:2181,zk-zookeeper-1.zk-hs:2181", "TLS": "false",
               "RESOURCES": "{\"cpu\":\"1\",\"memory\":\"2Gi\"}"},
}

ZK_CONFIG = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-configuration
  namespace: {{ .Namespace }}
data:
  zoo.cfg: |
    clientPort={{ .Params.CLIENT_PORT }}
    dataDir=/var/lib/zookeeper/data
    tickTime=2000
    initLimit=10
    syncLimit=5
{{- range $i := until (int .Params.NODE_COUNT) }}
    server.{{ add1 $i }}={{ $.Name }}-{{ $.OperatorName }}-{{ $i }}.{{ $.Name }}-hs.{{ $.Namespace }}.svc.cluster.local:{{ $.Params.SERVER_PORT }}:{{ $.Params.ELECTION_PORT }}
{{- end }}
  java.env: |
    JVMFLAGS="{{ .Params.JVM_OPTS }}"
"""

ZK_STS = """apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Name }}-{{ .OperatorName }}
  namespace: {{ .Namespace }}
  labels:
    app: zookeeper
    zookeeper: {{ .OperatorName }}
    instance: {{ .Name }}
spec:
  serviceName: {{ .Name }}-hs
  replicas: {{ .Params.NODE_COUNT }}
  podManagementPolicy: Parallel
  template:
    metadata:
      labels:
        app: zookeeper
        instance: {{ .Name }}
      annotations:
        {{- if eq .Params.METRICS_ENABLED "true" }}
        prometheus.io/scrape: "true"
        prometheus.io/port: "7000"
        {{- end }}
    spec:
      containers:
      - name: kubernetes-zookeeper
        image: "zookeeper:{{ .AppVersion }}"
        resources:
          requests:
            memory: {{ .Params.MEMORY | quote }}
            cpu: {{ .Params.CPUS | quote }}
        ports:
        - containerPort: {{ .Params.CLIENT_PORT }}
          name: client
        - containerPort: {{ .Params.SERVER_PORT }}
          name: server
        - containerPort: {{ .Params.ELECTION_PORT }}
          name: leader-election
        env:
        - name: ZOO_SERVERS
          value: "{{ range $i, $e := until (int .Params.NODE_COUNT) }}{{ if $i }} {{ end }}server.{{ add1 $i }}={{ $.Name }}-{{ $.OperatorName }}-{{ $i }}.{{ $.Name }}-hs:{{ $.Params.SERVER_PORT }}:{{ $.Params.ELECTION_PORT }}{{ end }}"
  volumeClaimTemplates:
  - metadata:
      name: datadir
    spec:
      accessModes: [ "ReadWriteOnce" ]
      {{- with .Params.STORAGE_CLASS }}
      storageClassName: {{ . }}
      {{- end }}
      resources:
        requests:
          storage: {{ .Params.DISK_SIZE }}
"""

ZK_PDB = """apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .Name }}-pdb
  namespace: {{ .Namespace }}
spec:
  selector:
    matchLabels:
      app: zookeeper
      instance: {{ .Name }}
  {{- if gt (int .Params.NODE_COUNT) 2 }}
  minAvailable: {{ sub (int .Params.NODE_COUNT) 1 }}
  {{- else }}
  maxUnavailable: 1
  {{- end }}
"""

KAFKA_SERVER = """broker.id.generation.enable=true
zookeeper.connect={{ .Params.ZOOKEEPER_URI }}/{{ .Name | replace "-" "_" }}
listeners={{ if eq .Params.TLS "true" }}SSL{{ else }}PLAINTEXT{{ end }}://:9093
{{- $brokers := list }}
{{- range $i := until (int .Params.NODE_COUNT) }}
{{- $brokers = append $brokers (printf "%s-kafka-%d.%s-svc:9093" $.Name $i $.Name) }}
{{- end }}
bootstrap.servers={{ join "," $brokers }}
num.partitions={{ default "1" .Params.CUSTOM_CONFIG }}
default.replication.factor={{ min 3 (int .Params.NODE_COUNT) }}
log.dirs=/var/lib/kafka/data/{{ .Name | sha256sum | trunc 8 }}
"""

RESOURCES_JSON = """{{- $res := dict "cpu" .Params.CPUS "memory" .Params.MEMORY -}}
resources:
{{ toYaml (dict "requests" $res "limits" $res) | indent 2 }}
labels:
{{- range $k, $v := (dict "app" .OperatorName "version" .AppVersion "instance" .Name) }}
  {{ $k }}: {{ $v | quote }}
{{- end }}
"""


def operators():
    c = lambda n, t, d=None: case("operators", n, t, d)
    c("zk-config", ZK_CONFIG)
    c("zk-config-5-nodes", ZK_CONFIG, {**ZK_DATA, "Params": {**ZK_DATA["Params"], "NODE_COUNT": "5"}})
    c("zk-config-1-node", ZK_CONFIG, {**ZK_DATA, "Params": {**ZK_DATA["Params"], "NODE_COUNT": "1"}})
    c("zk-statefulset", ZK_STS)
    c("zk-statefulset-storage-class", ZK_STS, {**ZK_DATA, "Params": {**ZK_DATA["Params"], "STORAGE_CLASS": "fast", "METRICS_ENABLED": "false"}})
    c("zk-pdb", ZK_PDB)
    c("zk-pdb-small", ZK_PDB, {**ZK_DATA, "Params": {**ZK_DATA["Params"], "NODE_COUNT": "2"}})
    c("kafka-server-properties", KAFKA_SERVER)
    c("kafka-server-tls", KAFKA_SERVER, {**ZK_DATA, "Name": "kafka-prod", "Params": {**ZK_DATA["Params"], "TLS": "true", "NODE_COUNT": "5", "CUSTOM_CONFIG": "12"}})
    c("resources-toyaml", RESOURCES_JSON)
    c("secret-b64", 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Name }}-creds\ntype: Opaque\ndata:\n  user: {{ .Params.CPUS | b64enc }}\n  jvm: {{ .Params.JVM_OPTS | b64enc | quote }}\n')
    c("cronjob-schedule", 'schedule: "{{ mod (adler32sum .Name | atoi) 60 }} */6 * * *"\n')
    c("service-ports-loop", 'ports:\n{{- range $name, $port := dict "client" .Params.CLIENT_PORT "server" .Params.SERVER_PORT "election" .Params.ELECTION_PORT }}\n- name: {{ $name }}\n  port: {{ $port }}\n  targetPort: {{ int $port }}\n{{- end }}\n')
    c("jvm-heap-calc", '{{ $mem := .Params.MEMORY | trimSuffix "Gi" | int }}-Xmx{{ div (mul $mem 1024) 2 }}m -Xms{{ div (mul $mem 1024) 2 }}m\n')
    c("feature-flags", '{{- $flags := splitList " " .Params.JVM_OPTS }}\n{{- range $flags }}\n- {{ . | trimPrefix "-" | quote }}\n{{- end }}\n')
    c("plan-conditional", '{{ if and (eq .PlanName "deploy") (ne .PhaseName "cleanup") }}deploying {{ .StepName | title }}{{ else }}other{{ end }}\n')
    c("version-gate", '{{ if semverCompare ">=3.4.0" .AppVersion }}new-config{{ else }}old-config{{ end }} {{ (semver .AppVersion).Minor }}\n')
    c("params-json-resources", '{{ .Params.RESOURCES }}\n')
    c("instance-owner-annotation", 'annotations:\n  kudo.dev/instance: {{ printf "%s/%s" .Namespace .Name | quote }}\n  checksum: {{ toJson .Params | sha1sum }}\n')
    c("missing-param-typo", 'replicas: {{ .Params.NODE_CONUT }}\n')


def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(content)


def main():
    global CERT
    cert_file = os.path.join(os.path.dirname(os.path.abspath(__file__)), "template-corpus-cert.json")
    with open(cert_file, encoding="utf-8") as fh:
        CERT = json.load(fh)

    galera()
    syntax()
    errors()
    sprig()
    sprig_extra()
    yaml_cases()
    json_data_cases()
    extra()
    operators()

    shared = {"galera": KUDO, "syntax": TYPED, "errors": TYPED, "sprig": TYPED, "extra": TYPED, "operators": ZK_DATA}
    written = set()
    for cat, cases in CASES.items():
        d = os.path.join(CORPUS, cat)
        if cat in shared:
            p = os.path.join(d, "data.json")
            write(p, json.dumps(shared[cat], indent=2, ensure_ascii=False) + "\n")
            written.add(p)
        for name, tpl, data, ext in cases:
            p = os.path.join(d, name + ".tmpl")
            write(p, tpl)
            written.add(p)
            if data is not None:
                p = os.path.join(d, f"{name}.{ext}")
                if isinstance(data, Raw):
                    write(p, data)
                elif ext == "json":
                    write(p, json.dumps(data, ensure_ascii=False) + "\n")
                else:
                    write(p, data)
                written.add(p)

    # The oracle's own cases, verbatim.
    for fname, content in oracle_cases().items():
        p = os.path.join(CORPUS, "oracle", fname)
        write(p, content)
        written.add(p)

    # Remove case files that no longer correspond to a case (and their goldens).
    for cat in sorted(os.listdir(CORPUS)):
        d = os.path.join(CORPUS, cat)
        if not os.path.isdir(d):
            continue
        stems = {os.path.splitext(os.path.basename(p))[0] for p in written if os.path.dirname(p) == d}
        for f in sorted(os.listdir(d)):
            p = os.path.join(d, f)
            stem, ext = os.path.splitext(f)
            if p in written:
                continue
            if ext in (".out", ".err") and stem in stems:
                continue
            os.remove(p)

    total = sum(len(v) for v in CASES.values())
    oracle = sum(1 for f in oracle_cases() if f.endswith(".tmpl"))
    for cat in sorted(CASES):
        print(f"{cat:8} {len(CASES[cat]):4} cases", file=sys.stderr)
    print(f"oracle   {oracle:4} cases", file=sys.stderr)
    print(f"total    {total + oracle:4} cases", file=sys.stderr)


if __name__ == "__main__":
    main()
