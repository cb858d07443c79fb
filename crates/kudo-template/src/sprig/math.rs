//! Integer/float math and number conversion (Sprig `numeric.go` + the inline math of
//! `functions.go`). All integer math goes through cast's `ToInt64` (strings parsed with Go literal
//! syntax, failures → 0) and wraps around on overflow like Go's `int64`.

use super::conv::{parse_int, to_float64, to_int64};
use super::{a_any, a_f64, a_int, check_items, sig, sprint, var};
use crate::func::ParamType as P;
use crate::func::{FuncError, FuncMap};
use crate::value::{ElemType, Value};

const DIV_ZERO: &str = "runtime error: integer divide by zero";

/// Sprig's `untilStep` with the element limit applied before building anything.
fn until_step(max: usize, start: i64, stop: i64, step: i64, name: &str) -> Result<Value, FuncError> {
    let count: u128 = if stop < start {
        if step >= 0 {
            0
        } else {
            let span = (start as i128 - stop as i128) as u128;
            span.div_ceil((-(step as i128)) as u128)
        }
    } else if step <= 0 {
        0
    } else {
        let span = (stop as i128 - start as i128) as u128;
        span.div_ceil(step as u128)
    };
    check_items(max, count, name)?;
    let mut v = Vec::with_capacity(count as usize);
    let mut i = start as i128;
    for _ in 0..count {
        v.push(Value::Int(i as i64));
        i += step as i128;
    }
    Ok(Value::typed_list(ElemType::Int, v))
}

/// Go's `math.Modf` fractional part (sign follows the argument).
fn modf_frac(f: f64) -> f64 {
    if f.is_infinite() {
        return f64::NAN;
    }
    f - f.trunc()
}

pub(super) fn register(m: &mut FuncMap) {
    m.insert("int", sig(&[P::Any]), |_, a| {
        Ok(Value::Int(to_int64(a_any(a, 0))))
    });
    m.insert("int64", sig(&[P::Any]), |_, a| {
        Ok(Value::Int64(to_int64(a_any(a, 0))))
    });
    m.insert("float64", sig(&[P::Any]), |_, a| {
        Ok(Value::Float(to_float64(a_any(a, 0))))
    });
    m.insert("toDecimal", sig(&[P::Any]), |_, a| {
        Ok(Value::Int64(parse_int(&sprint(a_any(a, 0)), 8).unwrap_or(0)))
    });
    m.insert("add1", sig(&[P::Any]), |_, a| {
        Ok(Value::Int64(to_int64(a_any(a, 0)).wrapping_add(1)))
    });
    m.insert("add", var(&[], P::Any), |_, a| {
        Ok(Value::Int64(
            a.iter().fold(0i64, |acc, v| acc.wrapping_add(to_int64(v))),
        ))
    });
    m.insert("sub", sig(&[P::Any, P::Any]), |_, a| {
        Ok(Value::Int64(
            to_int64(a_any(a, 0)).wrapping_sub(to_int64(a_any(a, 1))),
        ))
    });
    m.insert("mul", var(&[P::Any], P::Any), |_, a| {
        Ok(Value::Int64(
            a.iter().fold(1i64, |acc, v| acc.wrapping_mul(to_int64(v))),
        ))
    });
    m.insert("div", sig(&[P::Any, P::Any]), |_, a| {
        let (x, y) = (to_int64(a_any(a, 0)), to_int64(a_any(a, 1)));
        if y == 0 {
            return Err(FuncError(DIV_ZERO.into()));
        }
        Ok(Value::Int64(x.wrapping_div(y)))
    });
    m.insert("mod", sig(&[P::Any, P::Any]), |_, a| {
        let (x, y) = (to_int64(a_any(a, 0)), to_int64(a_any(a, 1)));
        if y == 0 {
            return Err(FuncError(DIV_ZERO.into()));
        }
        Ok(Value::Int64(x.wrapping_rem(y)))
    });
    for name in ["max", "biggest"] {
        m.insert(name, var(&[P::Any], P::Any), |_, a| {
            Ok(Value::Int64(a.iter().map(to_int64).max().unwrap_or(0)))
        });
    }
    m.insert("min", var(&[P::Any], P::Any), |_, a| {
        Ok(Value::Int64(a.iter().map(to_int64).min().unwrap_or(0)))
    });
    m.insert("ceil", sig(&[P::Any]), |_, a| {
        Ok(Value::Float(to_float64(a_any(a, 0)).ceil()))
    });
    m.insert("floor", sig(&[P::Any]), |_, a| {
        Ok(Value::Float(to_float64(a_any(a, 0)).floor()))
    });
    m.insert("round", var(&[P::Any, P::Int], P::Float64), |_, a| {
        let val = to_float64(a_any(a, 0));
        let places = a_int(a, 1)? as f64;
        let round_on = if a.len() > 2 { a_f64(a, 2)? } else { 0.5 };
        let pow = 10f64.powf(places);
        let digit = pow * val;
        let r = if modf_frac(digit) >= round_on {
            digit.ceil()
        } else {
            digit.floor()
        };
        Ok(Value::Float(r / pow))
    });
    m.insert("until", sig(&[P::Int]), |env, a| {
        let n = a_int(a, 0)?;
        until_step(env.max_items, 0, n, if n < 0 { -1 } else { 1 }, "until")
    });
    m.insert("untilStep", sig(&[P::Int, P::Int, P::Int]), |env, a| {
        until_step(
            env.max_items,
            a_int(a, 0)?,
            a_int(a, 1)?,
            a_int(a, 2)?,
            "untilStep",
        )
    });
}
