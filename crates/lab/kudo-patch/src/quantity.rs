//! Resource quantities (`cpu: 0.3`, `memory: 1024Mi`) in their canonical form, as a real API
//! server stores them: it parses every `resource.Quantity` field and serialises it back
//! canonically (`0.3` → `"300m"`, `1024Mi` → `"1Gi"`, `1000` → `"1k"`). Templates render
//! quantities as YAML numbers and kuttl asserts compare against the canonical strings, so the
//! embedded server must do the same; the manager's drift check compares quantities by value.

use serde_json::Value;

/// Binary suffixes (powers of 1024).
const BINARY: [(&str, u32); 6] = [("Ki", 1), ("Mi", 2), ("Gi", 3), ("Ti", 4), ("Pi", 5), ("Ei", 6)];
/// Decimal SI suffixes and their power of ten.
const DECIMAL: [(&str, i32); 10] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    BinarySi,
    DecimalSi,
    DecimalExponent,
}

/// The canonical string of a quantity given as a JSON string or number; `None` if it is not a
/// quantity (left for validation to reject) or too large for this implementation.
pub fn canonical(v: &Value) -> Option<String> {
    let text = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(&text)),
    };
    let num_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (num, suffix) = body.split_at(num_end);
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return None;
    }
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    let digits = format!("{int_part}{frac_part}");
    let mut mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let mut exp: i32 = -(frac_part.len() as i32);
    let format = if let Some((_, n)) = BINARY.iter().find(|(s, _)| *s == suffix) {
        mantissa = mantissa.checked_mul(1i128.checked_shl(10 * n)?)?;
        Format::BinarySi
    } else if let Some((_, e)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
        exp += e;
        Format::DecimalSi
    } else if let Some(e) = suffix.strip_prefix(['e', 'E']) {
        exp += e.parse::<i32>().ok()?;
        Format::DecimalExponent
    } else {
        return None;
    };
    // value = mantissa × 10^exp; strip trailing zeros
    while mantissa != 0 && mantissa % 10 == 0 {
        mantissa /= 10;
        exp += 1;
    }
    if mantissa == 0 {
        return Some("0".into());
    }
    // below a nano-unit, round up to one (the server keeps nine decimals)
    if exp < -9 {
        let shift = (-9 - exp) as u32;
        let div = 10i128.checked_pow(shift)?;
        mantissa = (mantissa + div - 1) / div;
        exp = -9;
    }
    let sign = if negative { "-" } else { "" };
    if format == Format::BinarySi {
        // exact integers of at least 1024 keep a binary suffix; the rest is written in decimal
        if exp >= 0 {
            let value = mantissa.checked_mul(10i128.checked_pow(exp as u32)?)?;
            if value >= 1024 {
                let mut n = 0;
                let mut v = value;
                while n < 6 && v % 1024 == 0 {
                    v /= 1024;
                    n += 1;
                }
                let suffix = if n == 0 { "" } else { BINARY[n - 1].0 };
                return Some(format!("{sign}{v}{suffix}"));
            }
        }
    }
    let e3 = exp.div_euclid(3) * 3;
    let e3 = e3.min(18);
    let m = mantissa.checked_mul(10i128.checked_pow((exp - e3) as u32)?)?;
    if format == Format::DecimalExponent {
        return Some(if e3 == 0 {
            format!("{sign}{m}")
        } else {
            format!("{sign}{m}e{e3}")
        });
    }
    let suffix = DECIMAL.iter().find(|(_, e)| *e == e3).map(|(s, _)| *s)?;
    Some(format!("{sign}{m}{suffix}"))
}

/// Whether two values are the same quantity written differently (`0.3` and `"300m"`).
pub fn same_quantity(a: &Value, b: &Value) -> bool {
    matches!((canonical(a), canonical(b)), (Some(x), Some(y)) if x == y)
}

/// Canonicalises every value of a map of quantities (`requests`, `limits`, `hard`…) in place.
pub fn canonicalize_map(v: Option<&mut Value>) {
    let Some(Value::Object(map)) = v else { return };
    for q in map.values_mut() {
        if let Some(c) = canonical(q) {
            *q = Value::String(c);
        }
    }
}

/// The quantity fields of a pod spec: container resources, `overhead`, emptyDir size limits.
pub fn canonicalize_pod_spec(spec: &mut serde_json::Map<String, Value>) {
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(Value::Array(cs)) = spec.get_mut(list) {
            for c in cs.iter_mut() {
                canonicalize_map(c.pointer_mut("/resources/requests"));
                canonicalize_map(c.pointer_mut("/resources/limits"));
            }
        }
    }
    canonicalize_map(spec.get_mut("overhead"));
    if let Some(Value::Array(vols)) = spec.get_mut("volumes") {
        for v in vols.iter_mut() {
            if let Some(q) = v.pointer_mut("/emptyDir/sizeLimit")
                && let Some(c) = canonical(q)
            {
                *q = Value::String(c);
            }
        }
    }
}

/// The quantity fields of a PersistentVolumeClaim spec.
pub fn canonicalize_claim_spec(spec: Option<&mut Value>) {
    let Some(spec) = spec else { return };
    canonicalize_map(spec.pointer_mut("/resources/requests"));
    canonicalize_map(spec.pointer_mut("/resources/limits"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn c(v: Value) -> String {
        canonical(&v).unwrap_or_else(|| panic!("{v} is a quantity"))
    }

    #[test]
    fn canonical_forms_match_the_api_server() {
        for (given, want) in [
            (json!(0.3), "300m"),
            (json!("0.3"), "300m"),
            (json!(0.25), "250m"),
            (json!("250m"), "250m"),
            (json!("1000m"), "1"),
            (json!(1), "1"),
            (json!(1.5), "1500m"),
            (json!(1000), "1k"),
            (json!(1500), "1500"),
            (json!("100M"), "100M"),
            (json!("1G"), "1G"),
            (json!("256Mi"), "256Mi"),
            (json!("1024Mi"), "1Gi"),
            (json!("2048Mi"), "2Gi"),
            (json!("0.5Gi"), "512Mi"),
            (json!("1536Ki"), "1536Ki"),
            (json!("1e3"), "1e3"),
            (json!("0"), "0"),
            (json!("0Mi"), "0"),
            (json!("-1"), "-1"),
            (json!("0.0000000001"), "1n"),
            (json!("512"), "512"),
            (json!("1Ki"), "1Ki"),
            (json!("0.5Ki"), "512"),
        ] {
            assert_eq!(c(given.clone()), want, "{given}");
        }
    }

    #[test]
    fn non_quantities_are_left_alone() {
        for v in [
            json!("abc"),
            json!("1.2.3"),
            json!("1Xi"),
            json!(true),
            json!(null),
            json!(""),
        ] {
            assert_eq!(canonical(&v), None, "{v}");
        }
    }

    #[test]
    fn pod_spec_quantities_become_strings() {
        let mut spec = json!({"containers": [{"name": "c", "resources": {
            "requests": {"cpu": 0.3, "memory": "1024Mi"}, "limits": {"cpu": 1}}}],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "2048Mi"}}]});
        canonicalize_pod_spec(spec.as_object_mut().unwrap());
        assert_eq!(
            spec["containers"][0]["resources"]["requests"],
            json!({"cpu": "300m", "memory": "1Gi"})
        );
        assert_eq!(spec["containers"][0]["resources"]["limits"]["cpu"], "1");
        assert_eq!(spec["volumes"][0]["emptyDir"]["sizeLimit"], "2Gi");
    }
}
