//! Dictionary functions (Sprig `dict.go`). Go maps are references: `set`, `unset`, `merge` and
//! `mergeOverwrite` mutate their first argument in place and return it, visibly through every other
//! reference to that map (including the template's data).
//!
//! Go iterates maps in random order, so `keys`/`values` have no defined order in Sprig; we return
//! them in sorted key order (deterministic output, and what `keys | sortAlpha` yields anyway).

use std::collections::BTreeMap;
use std::rc::Rc;

use super::{a_any, a_map, a_str, is_empty, sig, strval, var};
use crate::func::ParamType as P;
use crate::func::{FuncError, FuncMap};
use crate::value::{ElemType, Map, Value};

/// mergo 0.3.12 `Merge`/`MergeWithOverwrite` of one `map[string]interface{}` into another, as
/// Sprig calls it (no slice appending, no type checks).
pub(crate) fn mergo_merge(dst: &Map, src: &Map, overwrite: bool) {
    if Rc::ptr_eq(&dst.entries, &src.entries) {
        return;
    }
    let src_entries: Vec<(String, Value)> = src
        .entries
        .borrow()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, sv) in src_entries {
        let de = dst.entries.borrow().get(&k).cloned();
        if matches!(sv, Value::Nil) {
            if overwrite {
                dst.entries.borrow_mut().insert(k, Value::Nil);
            }
            continue;
        }
        match &sv {
            Value::Map(sm) => {
                if let Some(Value::Map(dm)) = &de {
                    mergo_merge(dm, sm, overwrite);
                }
            }
            Value::List(sl) => {
                let dst_empty = dst.entries.borrow().is_empty();
                let new = if overwrite || dst_empty {
                    sv.clone()
                } else {
                    match &de {
                        Some(d) if !matches!(d, Value::Nil) => d.clone(),
                        _ => Value::typed_list(sl.elem, vec![]),
                    }
                };
                dst.entries.borrow_mut().insert(k.clone(), new);
            }
            _ => {}
        }
        if let Some(d) = &de
            && !is_empty(d)
            && matches!(sv, Value::Map(_) | Value::List(_))
        {
            continue;
        }
        if overwrite || de.as_ref().is_none_or(is_empty) {
            dst.entries.borrow_mut().insert(k, sv);
        }
    }
}

/// copystructure's deep copy: fresh maps and slices all the way down.
pub(crate) fn deep_copy(v: &Value) -> Value {
    match v {
        Value::List(l) => Value::typed_list(l.elem, l.items.iter().map(deep_copy).collect()),
        Value::Map(m) => Value::typed_map(
            m.elem,
            m.entries
                .borrow()
                .iter()
                .map(|(k, v)| (k.clone(), deep_copy(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn map_of(entries: BTreeMap<String, Value>) -> Value {
    Value::map(entries)
}

pub(super) fn register(m: &mut FuncMap) {
    m.insert("dict", var(&[], P::Any), |_, a| {
        let mut out = BTreeMap::new();
        for pair in a.chunks(2) {
            let key = strval(&pair[0]);
            out.insert(key, pair.get(1).cloned().unwrap_or_else(|| Value::str("")));
        }
        Ok(map_of(out))
    });
    m.insert("set", sig(&[P::MapAny, P::String, P::Any]), |_, a| {
        let d = a_map(a, 0)?;
        d.entries
            .borrow_mut()
            .insert(a_str(a, 1)?.to_string(), a_any(a, 2).clone());
        Ok(Value::Map(d.clone()))
    });
    m.insert("unset", sig(&[P::MapAny, P::String]), |_, a| {
        let d = a_map(a, 0)?;
        d.entries.borrow_mut().remove(a_str(a, 1)?);
        Ok(Value::Map(d.clone()))
    });
    m.insert("hasKey", sig(&[P::MapAny, P::String]), |_, a| {
        Ok(Value::Bool(
            a_map(a, 0)?.entries.borrow().contains_key(a_str(a, 1)?),
        ))
    });
    m.insert("pluck", var(&[P::String], P::MapAny), |_, a| {
        let key = a_str(a, 0)?;
        let mut out = Vec::new();
        for i in 1..a.len() {
            if let Some(v) = a_map(a, i)?.entries.borrow().get(key) {
                out.push(v.clone());
            }
        }
        Ok(Value::list(out))
    });
    m.insert("keys", var(&[], P::MapAny), |_, a| {
        let mut out = Vec::new();
        for i in 0..a.len() {
            out.extend(
                a_map(a, i)?
                    .entries
                    .borrow()
                    .keys()
                    .map(|k| Value::str(k.as_str())),
            );
        }
        Ok(Value::typed_list(ElemType::String, out))
    });
    m.insert("values", sig(&[P::MapAny]), |_, a| {
        Ok(Value::list(
            a_map(a, 0)?.entries.borrow().values().cloned().collect(),
        ))
    });
    m.insert("pick", var(&[P::MapAny], P::String), |_, a| {
        let d = a_map(a, 0)?.entries.borrow();
        let mut out = BTreeMap::new();
        for i in 1..a.len() {
            let k = a_str(a, i)?;
            if let Some(v) = d.get(k) {
                out.insert(k.to_string(), v.clone());
            }
        }
        Ok(map_of(out))
    });
    m.insert("omit", var(&[P::MapAny], P::String), |_, a| {
        let omit: Vec<&str> = (1..a.len()).map(|i| a_str(a, i)).collect::<Result<_, _>>()?;
        let d = a_map(a, 0)?.entries.borrow();
        Ok(map_of(
            d.iter()
                .filter(|(k, _)| !omit.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ))
    });
    m.insert("merge", var(&[P::MapAny], P::MapAny), |_, a| {
        let dst = a_map(a, 0)?;
        for i in 1..a.len() {
            mergo_merge(dst, a_map(a, i)?, false);
        }
        Ok(Value::Map(dst.clone()))
    });
    m.insert("mergeOverwrite", var(&[P::MapAny], P::MapAny), |_, a| {
        let dst = a_map(a, 0)?;
        for i in 1..a.len() {
            mergo_merge(dst, a_map(a, i)?, true);
        }
        Ok(Value::Map(dst.clone()))
    });
    m.insert("deepCopy", sig(&[P::Any]), |_, a| match a_any(a, 0) {
        Value::Nil => Err(FuncError(
            "reflect: call of reflect.Value.Type on zero Value".into(),
        )),
        v => Ok(deep_copy(v)),
    });
}
