//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) for the few
//! simple core kinds kubectl's typed `create` subcommands send that way (`kubectl create namespace`,
//! `configmap`, `secret`, `serviceaccount`). Responses are always JSON, which kubectl accepts.

use serde_json::{Map, Value, json};

use crate::error::ApiError;

#[derive(Clone, Copy)]
enum Ty {
    Str,
    Int,
    Bool,
    Msg(&'static [Field]),
    MapStrStr,
    MapStrBytes,
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
    (6, "controller", Ty::Bool),
    (7, "blockOwnerDeletion", Ty::Bool),
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
    (4, "immutable", Ty::Bool),
];

const SECRET: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "data", Ty::MapStrBytes),
    (3, "type", Ty::Str),
    (4, "stringData", Ty::MapStrStr),
    (5, "immutable", Ty::Bool),
];

const SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "secrets", Ty::RepMsg(OBJECT_REF)),
    (3, "imagePullSecrets", Ty::RepMsg(LOCAL_REF)),
    (4, "automountServiceAccountToken", Ty::Bool),
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

fn map_entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), ApiError> {
    let mut r = Reader { b, pos: 0 };
    let (mut k, mut v) = (String::new(), json!(""));
    while let Some((f, w)) = r.key()? {
        match (f, w) {
            (1, 2) => k = text(r.bytes()?)?,
            (2, 2) => {
                let raw = r.bytes()?;
                v = if bytes_value {
                    json!(b64(raw))
                } else {
                    json!(text(raw)?)
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
                out.insert(name, json!(text(r.bytes()?)?));
            }
            Ty::Int if w == 0 => {
                out.insert(name, json!(r.varint()? as i64));
            }
            Ty::Bool if w == 0 => {
                out.insert(name, json!(r.varint()? != 0));
            }
            Ty::Msg(sub) if w == 2 => {
                out.insert(name, message(r.bytes()?, sub)?);
            }
            Ty::MapStrStr | Ty::MapStrBytes if w == 2 => {
                let (k, v) = map_entry(r.bytes()?, matches!(ty, Ty::MapStrBytes))?;
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
