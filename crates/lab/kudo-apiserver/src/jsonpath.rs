//! The JSONPath subset CRD `additionalPrinterColumns` use, evaluated as kube-apiserver's
//! `k8s.io/client-go/util/jsonpath` does for table cells: fields, indexes, `[*]`, and filters
//! such as `.status.conditions[?(@.type=="Ready")].status`.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter(Filter),
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    path: Vec<String>,
    op: Option<(String, Value)>,
}

/// Every value `path` selects in `obj`, in document order. A path that does not parse selects
/// nothing (the real server leaves such a cell empty).
pub fn find<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    let Some(steps) = parse(path) else {
        return Vec::new();
    };
    let mut cur = vec![obj];
    for step in &steps {
        let mut next = Vec::new();
        for v in cur {
            match step {
                Step::Field(f) => next.extend(v.get(f.as_str())),
                Step::Index(i) => {
                    if let Some(a) = v.as_array() {
                        let len = a.len() as i64;
                        let idx = if *i < 0 { len + i } else { *i };
                        if (0..len).contains(&idx) {
                            next.push(&a[idx as usize]);
                        }
                    }
                }
                Step::All => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter(f) => {
                    if let Some(a) = v.as_array() {
                        next.extend(a.iter().filter(|e| f.matches(e)));
                    }
                }
            }
        }
        cur = next;
    }
    cur
}

impl Filter {
    fn matches(&self, e: &Value) -> bool {
        let mut v = Some(e);
        for seg in &self.path {
            v = v.and_then(|x| x.get(seg.as_str()));
        }
        match (&self.op, v) {
            (None, v) => v.is_some_and(|x| !x.is_null()),
            (Some(_), None) => false,
            (Some((op, lit)), Some(v)) => compare(v, op, lit),
        }
    }
}

fn compare(v: &Value, op: &str, lit: &Value) -> bool {
    let ord = match (v, lit) {
        (Value::Number(a), Value::Number(b)) => {
            a.as_f64().zip(b.as_f64()).and_then(|(a, b)| a.partial_cmp(&b))
        }
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (a, b) => {
            return match op {
                "==" => a == b,
                "!=" => a != b,
                _ => false,
            };
        }
    };
    let Some(ord) = ord else { return false };
    match op {
        "==" => ord.is_eq(),
        "!=" => ord.is_ne(),
        "<" => ord.is_lt(),
        "<=" => ord.is_le(),
        ">" => ord.is_gt(),
        ">=" => ord.is_ge(),
        _ => false,
    }
}

fn parse(path: &str) -> Option<Vec<Step>> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(p)
        .trim();
    let p = p.strip_prefix('$').unwrap_or(p);
    let b = p.as_bytes();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'.' => {
                i += 1;
                if b.get(i) == Some(&b'*') {
                    steps.push(Step::All);
                    i += 1;
                    continue;
                }
                let start = i;
                while i < b.len() && b[i] != b'.' && b[i] != b'[' {
                    i += 1;
                }
                if i > start {
                    steps.push(Step::Field(p[start..i].to_string()));
                }
            }
            b'[' => {
                let end = close_bracket(p, i)?;
                let inner = p[i + 1..end].trim();
                steps.push(bracket(inner)?);
                i = end + 1;
            }
            _ => {
                let start = i;
                while i < b.len() && b[i] != b'.' && b[i] != b'[' {
                    i += 1;
                }
                steps.push(Step::Field(p[start..i].to_string()));
            }
        }
    }
    Some(steps)
}

/// The `]` closing the bracket opened at `open`, skipping quoted strings and nested parentheses.
fn close_bracket(p: &str, open: usize) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut depth = 0i32;
    for (j, c) in p[open + 1..].char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth -= 1,
            (None, ']') if depth == 0 => return Some(open + 1 + j),
            _ => {}
        }
    }
    None
}

fn bracket(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(n) = inner.parse::<i64>() {
        return Some(Step::Index(n));
    }
    if let Some(q) = unquote(inner) {
        return Some(Step::Field(q));
    }
    let f = inner.strip_prefix("?(")?.strip_suffix(')')?.trim();
    let ops = ["==", "!=", "<=", ">=", "<", ">"];
    let (lhs, op) = match ops.iter().filter_map(|op| f.find(op).map(|i| (i, *op))).min() {
        Some((i, op)) => (&f[..i], Some((op, &f[i + op.len()..]))),
        None => (f, None),
    };
    let lhs = lhs.trim().strip_prefix('@')?;
    let path: Vec<String> = lhs
        .split('.')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let op = match op {
        None => None,
        Some((op, rhs)) => {
            let rhs = rhs.trim();
            let lit = match unquote(rhs) {
                Some(s) => Value::String(s),
                None => serde_json::from_str::<Value>(rhs).ok()?,
            };
            Some((op.to_string(), lit))
        }
    };
    Some(Step::Filter(Filter { path, op }))
}

fn unquote(s: &str) -> Option<String> {
    let s = s.trim();
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return Some(s[1..s.len() - 1].to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filters_fields_and_indexes() {
        let o = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "n": 1},
            {"type": "Other", "status": "True", "n": 2}
        ]}});
        assert_eq!(
            find(&o, r#".status.conditions[?(@.type=="Ready")].status"#),
            vec![&json!("False")]
        );
        assert_eq!(find(&o, "{.status.conditions[1].type}"), vec![&json!("Other")]);
        assert_eq!(find(&o, ".status.conditions[-1].n"), vec![&json!(2)]);
        assert_eq!(find(&o, ".status.conditions[*].n"), vec![&json!(1), &json!(2)]);
        assert_eq!(
            find(&o, ".status.conditions[?(@.n > 1)].type"),
            vec![&json!("Other")]
        );
        assert_eq!(
            find(&o, ".status.conditions[?(@.type!='Ready')].type"),
            vec![&json!("Other")]
        );
        assert!(find(&o, r#".status.conditions[?(@.type=="Gone")].status"#).is_empty());
        assert!(find(&o, ".status.missing").is_empty());
        assert!(find(&o, ".status.conditions[?(@.type==").is_empty());
    }
}
