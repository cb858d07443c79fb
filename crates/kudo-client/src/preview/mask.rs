//! Hiding secret values in what a preview shows: Secrets' data masked as `kubectl diff` masks it,
//! sensitive parameter values elsewhere redacted (the rule `diagnostics collect` follows too).

use serde_json::Value;

use crate::sensitive::Redactor;

/// Hides secret values in what a preview prints.
#[derive(Debug, Default)]
pub struct Masker {
    /// Sensitive parameter values.
    redactor: Redactor,
}

impl Masker {
    /// A masker that also redacts what `redactor` redacts.
    pub fn new(redactor: Redactor) -> Masker {
        Masker { redactor }
    }

    /// The sensitive values it redacts.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Every string (keys included) with sensitive values replaced.
    fn redact(&self, v: &mut Value) {
        match v {
            Value::String(s) => *s = self.redactor.redact(s),
            Value::Array(a) => a.iter_mut().for_each(|x| self.redact(x)),
            Value::Object(m) => {
                let old = std::mem::take(m);
                for (k, mut x) in old {
                    self.redact(&mut x);
                    m.insert(self.redactor.redact(&k), x);
                }
            }
            _ => {}
        }
    }

    /// One object for printing: Secret values masked (`***`), sensitive values redacted.
    pub fn object(&self, obj: &Value) -> Value {
        let mut out = obj.clone();
        mask_secret_pair(Some(&mut out), None);
        self.redact(&mut out);
        out
    }

    /// Both sides of a diff, masked as `kubectl diff` masks Secrets, then redacted.
    pub fn pair(&self, from: Option<&Value>, to: Option<&Value>) -> (Option<Value>, Option<Value>) {
        let (mut from, mut to) = (from.cloned(), to.cloned());
        mask_secret_pair(from.as_mut(), to.as_mut());
        for v in from.iter_mut().chain(to.iter_mut()) {
            self.redact(v);
        }
        (from, to)
    }
}

/// `kubectl diff`'s Secret masking: each `data`/`stringData` value becomes `***`, or
/// `*** (before)` and `*** (after)` when it differs between the two sides.
pub fn mask_secret_pair(from: Option<&mut Value>, to: Option<&mut Value>) {
    let is_secret = |v: &Option<&mut Value>| {
        v.as_ref()
            .is_some_and(|o| o["kind"] == "Secret" && o["apiVersion"] == "v1")
    };
    if !is_secret(&from) && !is_secret(&to) {
        return;
    }
    let (mut from, mut to) = (from, to);
    for field in ["data", "stringData"] {
        let before = from
            .as_ref()
            .and_then(|o| o.get(field))
            .cloned()
            .unwrap_or(Value::Null);
        let after = to
            .as_ref()
            .and_then(|o| o.get(field))
            .cloned()
            .unwrap_or(Value::Null);
        let mask = |side: &mut Option<&mut Value>, mine: &Value, other: &Value, tag: &str| {
            let Some(map) = side
                .as_mut()
                .and_then(|o| o.get_mut(field))
                .and_then(Value::as_object_mut)
            else {
                return;
            };
            for (k, v) in map.iter_mut() {
                let changed = other.get(k).is_some_and(|o| o != &mine[k]);
                *v = Value::from(if changed {
                    format!("*** ({tag})")
                } else {
                    "***".to_string()
                });
            }
        };
        mask(&mut from, &before, &after, "before");
        mask(&mut to, &after, &before, "after");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_masked_as_kubectl_diff_masks_them() {
        let live = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"same": "YQ==", "changed": "Yg==", "gone": "Yw=="}});
        let merged = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"same": "YQ==", "changed": "ZA==", "new": "ZQ=="}, "stringData": {"p": "hunter22"}});
        let m = Masker::default();
        let (a, b) = m.pair(Some(&live), Some(&merged));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(
            a["data"],
            json!({"same": "***", "changed": "*** (before)", "gone": "***"})
        );
        assert_eq!(
            b["data"],
            json!({"same": "***", "changed": "*** (after)", "new": "***"})
        );
        assert_eq!(b["stringData"]["p"], "***");
        // A ConfigMap is not masked, but sensitive values anywhere are redacted.
        let m = Masker {
            redactor: Redactor::new(["s3cret-pw".to_string(), "ab".to_string()]),
        };
        let cm = json!({"kind": "ConfigMap", "data": {"url": "db://u:s3cret-pw@h", "x": "ab"}});
        let out = m.object(&cm);
        assert_eq!(out["data"]["url"], "db://u:(redacted)@h");
        assert_eq!(out["data"]["x"], "ab", "values under 4 characters are left alone");
    }
}
