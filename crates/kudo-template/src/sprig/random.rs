//! Random functions (`randAlpha*`, `shuffle`, `uuidv4`). Sprig draws from `crypto/rand`; here all
//! randomness comes from the render's seeded ChaCha generator (`FuncEnv::rng`), so re-rendering
//! the same plan run yields the same objects instead of re-patching resources on every pass. The
//! character sets and distributions are Sprig's (goutils `CryptoRandom*`, xstrings `Shuffle`).

use rand::Rng;

use super::{a_int, a_str, check_bytes, sig};
use crate::func::ParamType as P;
use crate::func::{FuncEnv, FuncError, FuncMap};
use crate::value::Value;

/// goutils `CryptoRandom` over the printable range `' '..='z'` (or `' '..='~'` for ASCII),
/// keeping only the wanted characters; a negative count yields "" (Sprig ignores the error).
fn random_string(
    env: &mut FuncEnv,
    count: i64,
    pick: fn(char) -> bool,
    hi: char,
    name: &str,
) -> Result<Value, FuncError> {
    if count <= 0 {
        return Ok(Value::str(""));
    }
    check_bytes(env.max_items, count as u128, name)?;
    let alphabet: Vec<char> = (' '..=hi).filter(|&c| pick(c)).collect();
    let s: String = (0..count)
        .map(|_| alphabet[env.rng.random_range(0..alphabet.len())])
        .collect();
    Ok(Value::str(s))
}

pub(super) fn register(m: &mut FuncMap) {
    m.insert("randAlphaNum", sig(&[P::Int]), |env, a| {
        random_string(
            env,
            a_int(a, 0)?,
            |c| c.is_ascii_alphanumeric(),
            'z',
            "randAlphaNum",
        )
    });
    m.insert("randAlpha", sig(&[P::Int]), |env, a| {
        random_string(env, a_int(a, 0)?, |c| c.is_ascii_alphabetic(), 'z', "randAlpha")
    });
    m.insert("randNumeric", sig(&[P::Int]), |env, a| {
        random_string(env, a_int(a, 0)?, |c| c.is_ascii_digit(), 'z', "randNumeric")
    });
    m.insert("randAscii", sig(&[P::Int]), |env, a| {
        random_string(env, a_int(a, 0)?, |_| true, '~', "randAscii")
    });
    m.insert("shuffle", sig(&[P::String]), |env, a| {
        let mut chars: Vec<char> = a_str(a, 0)?.chars().collect();
        for i in (1..chars.len()).rev() {
            let j = env.rng.random_range(0..=i);
            chars.swap(i, j);
        }
        Ok(Value::str(chars.into_iter().collect::<String>()))
    });
    m.insert("uuidv4", sig(&[]), |env, _| {
        let mut b: [u8; 16] = env.rng.random();
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h = hex::encode(b);
        Ok(Value::str(format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )))
    });
}
