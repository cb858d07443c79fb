//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) for the
//! built-in kinds kubectl's typed `create` subcommands send that way. client-go only falls back to
//! JSON after a 415 for CBOR, never for protobuf, so the server has to understand these bodies:
//! `kubectl create namespace|configmap|secret|serviceaccount|deployment|job|cronjob|service|role|
//! rolebinding|clusterrole|clusterrolebinding|poddisruptionbudget|priorityclass|quota`.
//! Responses are always JSON, which kubectl accepts.
//!
//! Go's generated marshallers write non-pointer scalars even when they hold the zero value, whereas
//! the JSON form omits them; the decoder therefore drops empty strings and zero non-pointer numbers
//! and booleans ([`Ty::Int`], [`Ty::Bool`]) but keeps zeros of pointer fields ([`Ty::OptInt`],
//! [`Ty::OptBool`]), so that defaulting sees the same object as for a JSON request.

use serde_json::{Map, Value, json};

use crate::error::ApiError;

#[derive(Clone, Copy)]
enum Ty {
    Str,
    /// Non-pointer integer: zero means unset.
    Int,
    /// Pointer integer (`*int32`): present means set, even when zero.
    OptInt,
    /// Non-pointer boolean: false means unset.
    Bool,
    /// Pointer boolean.
    OptBool,
    Msg(&'static [Field]),
    MapStrStr,
    MapStrBytes,
    /// `map<string, resource.Quantity>` (resource lists).
    MapStrQty,
    /// `intstr.IntOrString`.
    IntOrStr,
    RepStr,
    RepMsg(&'static [Field]),
    Time,
    Skip,
}

type Field = (u64, &'static str, Ty);

const OWNER_REF: &[Field] = &[
    (1, "kind", Ty::Str),
    (3, "name", Ty::Str),
    (4, "uid", Ty::Str),
    (5, "apiVersion", Ty::Str),
    (6, "controller", Ty::OptBool),
    (7, "blockOwnerDeletion", Ty::OptBool),
];

const OBJECT_META: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "generateName", Ty::Str),
    (3, "namespace", Ty::Str),
    (5, "uid", Ty::Str),
    (6, "resourceVersion", Ty::Str),
    (7, "generation", Ty::Int),
    (8, "creationTimestamp", Ty::Time),
    (11, "labels", Ty::MapStrStr),
    (12, "annotations", Ty::MapStrStr),
    (13, "ownerReferences", Ty::RepMsg(OWNER_REF)),
    (14, "finalizers", Ty::RepStr),
];

const OBJECT_REF: &[Field] = &[
    (1, "kind", Ty::Str),
    (2, "namespace", Ty::Str),
    (3, "name", Ty::Str),
    (4, "uid", Ty::Str),
    (5, "apiVersion", Ty::Str),
];

const LOCAL_REF: &[Field] = &[(1, "name", Ty::Str)];

const NAMESPACE: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "spec", Ty::Msg(&[(1, "finalizers", Ty::RepStr)])),
    (3, "status", Ty::Skip),
];

const CONFIG_MAP: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "data", Ty::MapStrStr),
    (3, "binaryData", Ty::MapStrBytes),
    (4, "immutable", Ty::OptBool),
];

const SECRET: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "data", Ty::MapStrBytes),
    (3, "type", Ty::Str),
    (4, "stringData", Ty::MapStrStr),
    (5, "immutable", Ty::OptBool),
];

const SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "secrets", Ty::RepMsg(OBJECT_REF)),
    (3, "imagePullSecrets", Ty::RepMsg(LOCAL_REF)),
    (4, "automountServiceAccountToken", Ty::OptBool),
];

const LABEL_SELECTOR_REQ: &[Field] = &[
    (1, "key", Ty::Str),
    (2, "operator", Ty::Str),
    (3, "values", Ty::RepStr),
];

const LABEL_SELECTOR: &[Field] = &[
    (1, "matchLabels", Ty::MapStrStr),
    (2, "matchExpressions", Ty::RepMsg(LABEL_SELECTOR_REQ)),
];

const CONTAINER_PORT: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "hostPort", Ty::Int),
    (3, "containerPort", Ty::Int),
    (4, "protocol", Ty::Str),
    (5, "hostIP", Ty::Str),
];

const KEY_SELECTOR: &[Field] = &[
    (1, "localObjectReference", Ty::Skip),
    (2, "key", Ty::Str),
    (3, "optional", Ty::OptBool),
];

const ENV_VAR_SOURCE: &[Field] = &[
    (
        1,
        "fieldRef",
        Ty::Msg(&[(1, "apiVersion", Ty::Str), (2, "fieldPath", Ty::Str)]),
    ),
    (3, "configMapKeyRef", Ty::Msg(KEY_SELECTOR)),
    (4, "secretKeyRef", Ty::Msg(KEY_SELECTOR)),
];

const ENV_VAR: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "value", Ty::Str),
    (3, "valueFrom", Ty::Msg(ENV_VAR_SOURCE)),
];

const RESOURCES: &[Field] = &[(1, "limits", Ty::MapStrQty), (2, "requests", Ty::MapStrQty)];

const VOLUME_MOUNT: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "readOnly", Ty::Bool),
    (3, "mountPath", Ty::Str),
    (4, "subPath", Ty::Str),
];

const CONTAINER: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "image", Ty::Str),
    (3, "command", Ty::RepStr),
    (4, "args", Ty::RepStr),
    (5, "workingDir", Ty::Str),
    (6, "ports", Ty::RepMsg(CONTAINER_PORT)),
    (7, "env", Ty::RepMsg(ENV_VAR)),
    (8, "resources", Ty::Msg(RESOURCES)),
    (9, "volumeMounts", Ty::RepMsg(VOLUME_MOUNT)),
    (13, "terminationMessagePath", Ty::Str),
    (14, "imagePullPolicy", Ty::Str),
    (16, "stdin", Ty::Bool),
    (17, "stdinOnce", Ty::Bool),
    (18, "tty", Ty::Bool),
    (20, "terminationMessagePolicy", Ty::Str),
    (24, "restartPolicy", Ty::Str),
];

const POD_SPEC: &[Field] = &[
    (2, "containers", Ty::RepMsg(CONTAINER)),
    (3, "restartPolicy", Ty::Str),
    (4, "terminationGracePeriodSeconds", Ty::OptInt),
    (5, "activeDeadlineSeconds", Ty::OptInt),
    (6, "dnsPolicy", Ty::Str),
    (7, "nodeSelector", Ty::MapStrStr),
    (8, "serviceAccountName", Ty::Str),
    (9, "serviceAccount", Ty::Str),
    (10, "nodeName", Ty::Str),
    (11, "hostNetwork", Ty::Bool),
    (15, "imagePullSecrets", Ty::RepMsg(LOCAL_REF)),
    (16, "hostname", Ty::Str),
    (17, "subdomain", Ty::Str),
    (19, "schedulerName", Ty::Str),
    (20, "initContainers", Ty::RepMsg(CONTAINER)),
    (21, "automountServiceAccountToken", Ty::OptBool),
    (24, "priorityClassName", Ty::Str),
    (25, "priority", Ty::OptInt),
];

const POD_TEMPLATE: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "spec", Ty::Msg(POD_SPEC)),
];

const ROLLING_UPDATE: &[Field] = &[(1, "maxUnavailable", Ty::IntOrStr), (2, "maxSurge", Ty::IntOrStr)];

const DEPLOYMENT_SPEC: &[Field] = &[
    (1, "replicas", Ty::OptInt),
    (2, "selector", Ty::Msg(LABEL_SELECTOR)),
    (3, "template", Ty::Msg(POD_TEMPLATE)),
    (
        4,
        "strategy",
        Ty::Msg(&[
            (1, "type", Ty::Str),
            (2, "rollingUpdate", Ty::Msg(ROLLING_UPDATE)),
        ]),
    ),
    (5, "minReadySeconds", Ty::Int),
    (6, "revisionHistoryLimit", Ty::OptInt),
    (7, "paused", Ty::Bool),
    (9, "progressDeadlineSeconds", Ty::OptInt),
];

const DEPLOYMENT: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "spec", Ty::Msg(DEPLOYMENT_SPEC)),
    (3, "status", Ty::Skip),
];

const JOB_SPEC: &[Field] = &[
    (1, "parallelism", Ty::OptInt),
    (2, "completions", Ty::OptInt),
    (3, "activeDeadlineSeconds", Ty::OptInt),
    (4, "selector", Ty::Msg(LABEL_SELECTOR)),
    (5, "manualSelector", Ty::OptBool),
    (6, "template", Ty::Msg(POD_TEMPLATE)),
    (7, "backoffLimit", Ty::OptInt),
    (8, "ttlSecondsAfterFinished", Ty::OptInt),
    (9, "completionMode", Ty::Str),
    (10, "suspend", Ty::OptBool),
];

const JOB: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "spec", Ty::Msg(JOB_SPEC)),
    (3, "status", Ty::Skip),
];

const CRON_JOB_SPEC: &[Field] = &[
    (1, "schedule", Ty::Str),
    (2, "startingDeadlineSeconds", Ty::OptInt),
    (3, "concurrencyPolicy", Ty::Str),
    (4, "suspend", Ty::OptBool),
    (
        5,
        "jobTemplate",
        Ty::Msg(&[
            (1, "metadata", Ty::Msg(OBJECT_META)),
            (2, "spec", Ty::Msg(JOB_SPEC)),
        ]),
    ),
    (6, "successfulJobsHistoryLimit", Ty::OptInt),
    (7, "failedJobsHistoryLimit", Ty::OptInt),
    (8, "timeZone", Ty::Str),
];

const CRON_JOB: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "spec", Ty::Msg(CRON_JOB_SPEC)),
    (3, "status", Ty::Skip),
];

const SERVICE_PORT: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "protocol", Ty::Str),
    (3, "port", Ty::Int),
    (4, "targetPort", Ty::IntOrStr),
    (5, "nodePort", Ty::Int),
    (6, "appProtocol", Ty::Str),
];

const SERVICE_SPEC: &[Field] = &[
    (1, "ports", Ty::RepMsg(SERVICE_PORT)),
    (2, "selector", Ty::MapStrStr),
    (3, "clusterIP", Ty::Str),
    (4, "type", Ty::Str),
    (5, "externalIPs", Ty::RepStr),
    (7, "sessionAffinity", Ty::Str),
    (8, "loadBalancerIP", Ty::Str),
    (10, "externalName", Ty::Str),
    (11, "externalTrafficPolicy", Ty::Str),
    (13, "publishNotReadyAddresses", Ty::Bool),
    (18, "clusterIPs", Ty::RepStr),
];

const SERVICE: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "spec", Ty::Msg(SERVICE_SPEC)),
    (3, "status", Ty::Skip),
];

const POLICY_RULE: &[Field] = &[
    (1, "verbs", Ty::RepStr),
    (2, "apiGroups", Ty::RepStr),
    (3, "resources", Ty::RepStr),
    (4, "resourceNames", Ty::RepStr),
    (5, "nonResourceURLs", Ty::RepStr),
];

const ROLE: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "rules", Ty::RepMsg(POLICY_RULE)),
];

const CLUSTER_ROLE: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "rules", Ty::RepMsg(POLICY_RULE)),
    (
        3,
        "aggregationRule",
        Ty::Msg(&[(1, "clusterRoleSelectors", Ty::RepMsg(LABEL_SELECTOR))]),
    ),
];

const SUBJECT: &[Field] = &[
    (1, "kind", Ty::Str),
    (2, "apiGroup", Ty::Str),
    (3, "name", Ty::Str),
    (4, "namespace", Ty::Str),
];

const ROLE_BINDING: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "subjects", Ty::RepMsg(SUBJECT)),
    (
        3,
        "roleRef",
        Ty::Msg(&[
            (1, "apiGroup", Ty::Str),
            (2, "kind", Ty::Str),
            (3, "name", Ty::Str),
        ]),
    ),
];

const PDB: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Ty::Msg(&[
            (1, "minAvailable", Ty::IntOrStr),
            (2, "selector", Ty::Msg(LABEL_SELECTOR)),
            (3, "maxUnavailable", Ty::IntOrStr),
            (4, "unhealthyPodEvictionPolicy", Ty::Str),
        ]),
    ),
    (3, "status", Ty::Skip),
];

const PRIORITY_CLASS: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "value", Ty::OptInt),
    (3, "globalDefault", Ty::Bool),
    (4, "description", Ty::Str),
    (5, "preemptionPolicy", Ty::Str),
];

const SCOPE_SELECTOR_REQ: &[Field] = &[
    (1, "scopeName", Ty::Str),
    (2, "operator", Ty::Str),
    (3, "values", Ty::RepStr),
];

const RESOURCE_QUOTA: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Ty::Msg(&[
            (1, "hard", Ty::MapStrQty),
            (2, "scopes", Ty::RepStr),
            (
                3,
                "scopeSelector",
                Ty::Msg(&[(1, "matchExpressions", Ty::RepMsg(SCOPE_SELECTOR_REQ))]),
            ),
        ]),
    ),
    (3, "status", Ty::Skip),
];

const RESOURCE_ATTRIBUTES: &[Field] = &[
    (1, "namespace", Ty::Str),
    (2, "verb", Ty::Str),
    (3, "group", Ty::Str),
    (4, "version", Ty::Str),
    (5, "resource", Ty::Str),
    (6, "subresource", Ty::Str),
    (7, "name", Ty::Str),
];

const NON_RESOURCE_ATTRIBUTES: &[Field] = &[(1, "path", Ty::Str), (2, "verb", Ty::Str)];

/// `SelfSubjectAccessReview` (what `kubectl auth can-i` sends).
const SELF_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Ty::Msg(&[
            (1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRIBUTES)),
            (2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRIBUTES)),
        ]),
    ),
    (3, "status", Ty::Skip),
];

const SUBJECT_ACCESS_REVIEW: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Ty::Msg(&[
            (1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRIBUTES)),
            (2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRIBUTES)),
            (3, "user", Ty::Str),
            (4, "groups", Ty::RepStr),
            (5, "extra", Ty::Skip),
            (6, "uid", Ty::Str),
        ]),
    ),
    (3, "status", Ty::Skip),
];

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

fn bad(why: &str) -> ApiError {
    ApiError::bad_request(format!("unable to decode protobuf body: {why}"))
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ApiError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.pos).ok_or_else(|| bad("truncated varint"))?;
            self.pos += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint too long"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], ApiError> {
        let n = usize::try_from(self.varint()?).map_err(|_| bad("length overflow"))?;
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.b.len())
            .ok_or_else(|| bad("truncated field"))?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// Next (field number, wire type), or None at the end.
    fn key(&mut self) -> Result<Option<(u64, u64)>, ApiError> {
        if self.pos >= self.b.len() {
            return Ok(None);
        }
        let k = self.varint()?;
        Ok(Some((k >> 3, k & 7)))
    }

    fn skip(&mut self, wire: u64) -> Result<(), ApiError> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.advance(8),
            2 => self.bytes().map(|_| ()),
            5 => self.advance(4),
            _ => Err(bad("unsupported wire type")),
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), ApiError> {
        if self.pos + n > self.b.len() {
            return Err(bad("truncated fixed field"));
        }
        self.pos += n;
        Ok(())
    }
}

fn text(b: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("string is not UTF-8"))
}

/// Standard base64, the JSON form of protobuf `bytes` and Secret data.
pub(crate) fn b64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// How a map entry's value is encoded.
#[derive(Clone, Copy)]
enum MapVal {
    Str,
    Bytes,
    Quantity,
}

fn map_entry(b: &[u8], val: MapVal) -> Result<(String, Value), ApiError> {
    let mut r = Reader { b, pos: 0 };
    let (mut k, mut v) = (String::new(), json!(""));
    while let Some((f, w)) = r.key()? {
        match (f, w) {
            (1, 2) => k = text(r.bytes()?)?,
            (2, 2) => {
                let raw = r.bytes()?;
                v = match val {
                    MapVal::Bytes => json!(b64(raw)),
                    MapVal::Str => json!(text(raw)?),
                    MapVal::Quantity => message(raw, &[(1, "string", Ty::Str)])?
                        .get("string")
                        .cloned()
                        .unwrap_or_else(|| json!("0")),
                };
            }
            _ => r.skip(w)?,
        }
    }
    Ok((k, v))
}

fn message(b: &[u8], fields: &[Field]) -> Result<Value, ApiError> {
    let mut r = Reader { b, pos: 0 };
    let mut out = Map::new();
    while let Some((f, w)) = r.key()? {
        let Some((_, name, ty)) = fields.iter().find(|(n, _, _)| *n == f) else {
            r.skip(w)?;
            continue;
        };
        let name = name.to_string();
        match ty {
            Ty::Str if w == 2 => {
                let s = text(r.bytes()?)?;
                if !s.is_empty() {
                    out.insert(name, json!(s));
                }
            }
            Ty::Int | Ty::OptInt if w == 0 => {
                // int32 negatives arrive sign-extended to 64 bits; `as i64` restores them.
                let v = r.varint()? as i64;
                if v != 0 || matches!(ty, Ty::OptInt) {
                    out.insert(name, json!(v));
                }
            }
            Ty::Bool | Ty::OptBool if w == 0 => {
                let v = r.varint()? != 0;
                if v || matches!(ty, Ty::OptBool) {
                    out.insert(name, json!(v));
                }
            }
            Ty::Msg(sub) if w == 2 => {
                out.insert(name, message(r.bytes()?, sub)?);
            }
            Ty::IntOrStr if w == 2 => {
                let m = message(
                    r.bytes()?,
                    &[
                        (1, "type", Ty::Int),
                        (2, "intVal", Ty::Int),
                        (3, "strVal", Ty::Str),
                    ],
                )?;
                let v = if m["type"].as_i64() == Some(1) {
                    m.get("strVal").cloned().unwrap_or_else(|| json!(""))
                } else {
                    m.get("intVal").cloned().unwrap_or_else(|| json!(0))
                };
                out.insert(name, v);
            }
            Ty::MapStrStr | Ty::MapStrBytes | Ty::MapStrQty if w == 2 => {
                let val = match ty {
                    Ty::MapStrBytes => MapVal::Bytes,
                    Ty::MapStrQty => MapVal::Quantity,
                    _ => MapVal::Str,
                };
                let (k, v) = map_entry(r.bytes()?, val)?;
                out.entry(name).or_insert_with(|| json!({}))[k] = v;
            }
            Ty::RepStr if w == 2 => {
                let s = text(r.bytes()?)?;
                if let Some(a) = out.entry(name).or_insert_with(|| json!([])).as_array_mut() {
                    a.push(json!(s));
                }
            }
            Ty::RepMsg(sub) if w == 2 => {
                let m = message(r.bytes()?, sub)?;
                if let Some(a) = out.entry(name).or_insert_with(|| json!([])).as_array_mut() {
                    a.push(m);
                }
            }
            Ty::Time if w == 2 => {
                let t = message(r.bytes()?, &[(1, "seconds", Ty::Int)])?;
                let secs = t["seconds"].as_i64().unwrap_or(0);
                // The zero time is how Go encodes "unset" (JSON null).
                if secs == 0 {
                    continue;
                }
                if let Some(dt) = chrono::DateTime::from_timestamp(secs, 0) {
                    out.insert(name, json!(dt.format("%Y-%m-%dT%H:%M:%SZ").to_string()));
                }
            }
            _ => r.skip(w)?,
        }
    }
    Ok(Value::Object(out))
}

/// Decode a `k8s\0`-prefixed protobuf body into the JSON form of the object.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let rest = body
        .strip_prefix(b"k8s\0")
        .ok_or_else(|| bad("missing k8s envelope"))?;
    let mut r = Reader { b: rest, pos: 0 };
    let (mut api_version, mut kind, mut raw): (String, String, &[u8]) = (String::new(), String::new(), &[]);
    while let Some((f, w)) = r.key()? {
        match (f, w) {
            (1, 2) => {
                let tm = message(r.bytes()?, &[(1, "apiVersion", Ty::Str), (2, "kind", Ty::Str)])?;
                api_version = tm["apiVersion"].as_str().unwrap_or("").into();
                kind = tm["kind"].as_str().unwrap_or("").into();
            }
            (2, 2) => raw = r.bytes()?,
            _ => r.skip(w)?,
        }
    }
    let fields = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("v1", "Service") => SERVICE,
        ("v1", "ResourceQuota") => RESOURCE_QUOTA,
        ("apps/v1", "Deployment") => DEPLOYMENT,
        ("batch/v1", "Job") => JOB,
        ("batch/v1", "CronJob") => CRON_JOB,
        ("rbac.authorization.k8s.io/v1", "Role") => ROLE,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => CLUSTER_ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => ROLE_BINDING,
        ("policy/v1", "PodDisruptionBudget") => PDB,
        ("scheduling.k8s.io/v1", "PriorityClass") => PRIORITY_CLASS,
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => SELF_SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io/v1", "SubjectAccessReview") => SUBJECT_ACCESS_REVIEW,
        _ => {
            return Err(ApiError::unsupported_media_type(
                "application/vnd.kubernetes.protobuf",
                &["application/json", "application/yaml"],
            ));
        }
    };
    let mut obj = message(raw, fields)?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}
