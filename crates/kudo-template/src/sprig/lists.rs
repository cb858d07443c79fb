//! List functions (Sprig `list.go`). They accept any slice (`[]int` from `until` as well as
//! `[]interface{}`), return `[]interface{}` (except `slice`, which keeps the slice's type), and
//! fail with Sprig's messages (`Cannot push on type int`) for non-slices.

use super::conv::to_int64;
use super::{a_any, deep_equal, is_empty, kind_or_nil_panic, list_items, sig, var};
use crate::func::ParamType as P;
use crate::func::{FuncError, FuncMap};
use crate::value::Value;

/// The items of a slice argument, or Sprig's `Cannot <what> on type K` error.
fn items_or<'a>(v: &'a Value, what: &str) -> Result<&'a [Value], FuncError> {
    let kind = kind_or_nil_panic(v)?;
    list_items(v).ok_or_else(|| FuncError(format!("Cannot {what} on type {kind}")))
}

pub(super) fn register(m: &mut FuncMap) {
    for name in ["list", "tuple"] {
        m.insert(name, var(&[], P::Any), |_, a| Ok(Value::list(a.to_vec())));
    }
    for name in ["push", "append"] {
        m.insert(name, sig(&[P::Any, P::Any]), |_, a| {
            let mut v = items_or(a_any(a, 0), "push")?.to_vec();
            v.push(a_any(a, 1).clone());
            Ok(Value::list(v))
        });
    }
    m.insert("prepend", sig(&[P::Any, P::Any]), |_, a| {
        let items = items_or(a_any(a, 0), "prepend")?;
        let mut v = Vec::with_capacity(items.len() + 1);
        v.push(a_any(a, 1).clone());
        v.extend_from_slice(items);
        Ok(Value::list(v))
    });
    m.insert("first", sig(&[P::Any]), |_, a| {
        Ok(items_or(a_any(a, 0), "find first")?
            .first()
            .cloned()
            .unwrap_or(Value::Nil))
    });
    m.insert("last", sig(&[P::Any]), |_, a| {
        Ok(items_or(a_any(a, 0), "find last")?
            .last()
            .cloned()
            .unwrap_or(Value::Nil))
    });
    m.insert("rest", sig(&[P::Any]), |_, a| {
        let items = items_or(a_any(a, 0), "find rest")?;
        Ok(Value::list(items.iter().skip(1).cloned().collect()))
    });
    m.insert("initial", sig(&[P::Any]), |_, a| {
        let items = items_or(a_any(a, 0), "find initial")?;
        let n = items.len().saturating_sub(1);
        Ok(Value::list(items[..n].to_vec()))
    });
    m.insert("reverse", sig(&[P::Any]), |_, a| {
        let items = items_or(a_any(a, 0), "find reverse")?;
        Ok(Value::list(items.iter().rev().cloned().collect()))
    });
    m.insert("compact", sig(&[P::Any]), |_, a| {
        let items = items_or(a_any(a, 0), "compact")?;
        Ok(Value::list(
            items.iter().filter(|v| !is_empty(v)).cloned().collect(),
        ))
    });
    m.insert("uniq", sig(&[P::Any]), |_, a| {
        let items = items_or(a_any(a, 0), "find uniq")?;
        let mut out: Vec<Value> = Vec::new();
        for it in items {
            if !out.iter().any(|o| deep_equal(it, o)) {
                out.push(it.clone());
            }
        }
        Ok(Value::list(out))
    });
    m.insert("without", var(&[P::Any], P::Any), |_, a| {
        let items = items_or(a_any(a, 0), "find without")?;
        let omit = &a[1..];
        Ok(Value::list(
            items
                .iter()
                .filter(|it| !omit.iter().any(|o| deep_equal(it, o)))
                .cloned()
                .collect(),
        ))
    });
    m.insert("has", sig(&[P::Any, P::Any]), |_, a| {
        let hay = a_any(a, 1);
        if matches!(hay, Value::Nil) {
            return Ok(Value::Bool(false));
        }
        let items = items_or(hay, "find has")?;
        let needle = a_any(a, 0);
        Ok(Value::Bool(items.iter().any(|it| deep_equal(needle, it))))
    });
    m.insert("slice", var(&[P::Any], P::Any), |_, a| {
        let v = a_any(a, 0);
        let kind = kind_or_nil_panic(v)?;
        let Value::List(l) = v else {
            return Err(FuncError(format!(
                "list should be type of slice or array but {kind}"
            )));
        };
        let len = l.items.len() as i64;
        if len == 0 {
            return Ok(Value::Nil);
        }
        let start = if a.len() > 1 { to_int64(&a[1]) } else { 0 };
        let end = if a.len() > 2 { to_int64(&a[2]) } else { len };
        if start < 0 || end < start || end > len {
            return Err(FuncError("reflect.Value.Slice: slice index out of bounds".into()));
        }
        Ok(Value::typed_list(
            l.elem,
            l.items[start as usize..end as usize].to_vec(),
        ))
    });
    m.insert("concat", var(&[], P::Any), |_, a| {
        let mut out = Vec::new();
        for v in a {
            let kind = kind_or_nil_panic(v)?;
            let items =
                list_items(v).ok_or_else(|| FuncError(format!("Cannot concat type {kind} as list")))?;
            out.extend_from_slice(items);
        }
        Ok(Value::list(out))
    });
}
