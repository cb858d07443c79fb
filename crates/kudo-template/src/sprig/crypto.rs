//! Cryptographic functions (Sprig `crypto.go`): `derivePassword` (Master Password algorithm,
//! deterministic), `encryptAES`/`decryptAES` (AES-256-CBC, zero-padded password key, PKCS#7-style
//! padding, random IV from the render's seeded RNG), and the key/certificate generators.

use std::any::Any;

use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit, block_padding::NoPadding};
use hmac::Mac;
use rand::RngCore;

use super::misc::{b64_decode, b64_encode};
use super::{a_int, a_str, sig};
use crate::func::ParamType as P;
use crate::func::{FuncError, FuncMap};
use crate::value::{GoObject, Value};

/// Sprig's `certificate` struct (`.Cert`, `.Key` PEM strings).
#[derive(Clone, Debug)]
pub(crate) struct Certificate {
    pub cert: String,
    pub key: String,
}

impl GoObject for Certificate {
    fn type_name(&self) -> String {
        "sprig.certificate".into()
    }
    fn kind(&self) -> &'static str {
        "struct"
    }
    fn go_string(&self) -> String {
        format!("{{{} {}}}", self.cert, self.key)
    }
    fn field(&self, name: &str) -> Option<Result<Value, String>> {
        match name {
            "Cert" => Some(Ok(Value::str(self.cert.as_str()))),
            "Key" => Some(Ok(Value::str(self.key.as_str()))),
            _ => None,
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Struct fields of a certificate object in declaration order, for `toJson`.
pub(crate) fn object_fields(o: &dyn GoObject) -> Option<Vec<(&'static str, String)>> {
    o.as_any()
        .downcast_ref::<Certificate>()
        .map(|c| vec![("Cert", c.cert.clone()), ("Key", c.key.clone())])
}

const MASTER_SEED: &str = "com.lyndir.masterpassword";

fn templates(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "maximum" => &["anoxxxxxxxxxxxxxxxxx", "axxxxxxxxxxxxxxxxxno"],
        "long" => &[
            "CvcvnoCvcvCvcv", "CvcvCvcvnoCvcv", "CvcvCvcvCvcvno", "CvccnoCvcvCvcv", "CvccCvcvnoCvcv",
            "CvccCvcvCvcvno", "CvcvnoCvccCvcv", "CvcvCvccnoCvcv", "CvcvCvccCvcvno", "CvcvnoCvcvCvcc",
            "CvcvCvcvnoCvcc", "CvcvCvcvCvccno", "CvccnoCvccCvcv", "CvccCvccnoCvcv", "CvccCvccCvcvno",
            "CvcvnoCvccCvcc", "CvcvCvccnoCvcc", "CvcvCvccCvccno", "CvccnoCvcvCvcc", "CvccCvcvnoCvcc",
            "CvccCvcvCvccno",
        ],
        "medium" => &["CvcnoCvc", "CvcCvcno"],
        "short" => &["Cvcn"],
        "basic" => &["aaanaaan", "aannaaan", "aaannaaa"],
        "pin" => &["nnnn"],
        _ => return None,
    })
}

fn template_chars(c: u8) -> &'static [u8] {
    match c {
        b'V' => b"AEIOU",
        b'C' => b"BCDFGHJKLMNPQRSTVWXYZ",
        b'v' => b"aeiou",
        b'c' => b"bcdfghjklmnpqrstvwxyz",
        b'A' => b"AEIOUBCDFGHJKLMNPQRSTVWXYZ",
        b'a' => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz",
        b'n' => b"0123456789",
        b'o' => b"@&%?,=[]_:-+*$#!'^~;()/.",
        _ => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789!@#$%^&*()",
    }
}

fn derive_password(counter: u32, kind: &str, password: &str, user: &str, site: &str) -> String {
    let Some(tpls) = templates(kind) else {
        return format!("cannot find password template {kind}");
    };
    let mut salt = MASTER_SEED.as_bytes().to_vec();
    salt.extend_from_slice(&(user.len() as u32).to_be_bytes());
    salt.extend_from_slice(user.as_bytes());
    let mut key = [0u8; 64];
    let params = match scrypt::Params::new(15, 8, 2, 64) {
        Ok(p) => p,
        Err(e) => return format!("failed to derive password: {e}"),
    };
    if let Err(e) = scrypt::scrypt(password.as_bytes(), &salt, &params, &mut key) {
        return format!("failed to derive password: {e}");
    }
    let mut msg = MASTER_SEED.as_bytes().to_vec();
    msg.extend_from_slice(&(site.len() as u32).to_be_bytes());
    msg.extend_from_slice(site.as_bytes());
    msg.extend_from_slice(&counter.to_be_bytes());
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key) else {
        return "failed to derive password: bad key".into();
    };
    mac.update(&msg);
    let seed = mac.finalize().into_bytes();
    let tpl = tpls[seed[0] as usize % tpls.len()].as_bytes();
    tpl.iter()
        .enumerate()
        .map(|(i, &c)| {
            let chars = template_chars(c);
            chars[seed[i + 1] as usize % chars.len()] as char
        })
        .collect()
}

fn aes_key(password: &str) -> [u8; 32] {
    let mut key = [0u8; 32];
    let n = password.len().min(32);
    key[..n].copy_from_slice(&password.as_bytes()[..n]);
    key
}

type Enc = cbc::Encryptor<aes::Aes256>;
type Dec = cbc::Decryptor<aes::Aes256>;

fn unsupported(name: &str) -> FuncError {
    FuncError(format!(
        "{name} is not supported by kudo-rs: generating keys and certificates inside templates is not implemented; create them outside the operator (e.g. a Secret) and reference them"
    ))
}

pub(super) fn register(m: &mut FuncMap) {
    m.insert("derivePassword", sig(&[P::Int, P::String, P::String, P::String, P::String]), |_, a| {
        let counter = a_int(a, 0)?;
        if !(0..=u32::MAX as i64).contains(&counter) {
            return Err(FuncError(format!("derivePassword: counter {counter} does not fit uint32")));
        }
        Ok(Value::str(derive_password(counter as u32, a_str(a, 1)?, a_str(a, 2)?, a_str(a, 3)?, a_str(a, 4)?)))
    });
    m.insert("encryptAES", sig(&[P::String, P::String]), |env, a| {
        let (password, plain) = (a_str(a, 0)?, a_str(a, 1)?);
        if plain.is_empty() {
            return Ok(Value::str(""));
        }
        let mut content = plain.as_bytes().to_vec();
        let pad = 16 - content.len() % 16;
        content.extend(std::iter::repeat_n(pad as u8, pad));
        let mut iv = [0u8; 16];
        env.rng.fill_bytes(&mut iv);
        let n = content.len();
        let ct = Enc::new(&aes_key(password).into(), &iv.into())
            .encrypt_padded_mut::<NoPadding>(&mut content, n)
            .map_err(|e| FuncError(format!("encryptAES: {e}")))?
            .to_vec();
        let mut out = iv.to_vec();
        out.extend_from_slice(&ct);
        Ok(Value::str(b64_encode(&out)))
    });
    m.insert("decryptAES", sig(&[P::String, P::String]), |_, a| {
        let (password, c64) = (a_str(a, 0)?, a_str(a, 1)?);
        if c64.is_empty() {
            return Ok(Value::str(""));
        }
        let crypt = b64_decode(c64.as_bytes())
            .map_err(|at| FuncError(format!("illegal base64 data at input byte {at}")))?;
        if crypt.len() < 16 {
            return Err(FuncError(format!(
                "runtime error: slice bounds out of range [:16] with capacity {}",
                crypt.len()
            )));
        }
        let (iv, body) = crypt.split_at(16);
        if body.len() % 16 != 0 {
            return Err(FuncError("crypto/cipher: input not full blocks".into()));
        }
        if body.is_empty() {
            return Err(FuncError("runtime error: index out of range [-1]".into()));
        }
        let mut buf = body.to_vec();
        let iv: [u8; 16] = iv.try_into().map_err(|_| FuncError("decryptAES: bad IV".into()))?;
        let plain = Dec::new(&aes_key(password).into(), &iv.into())
            .decrypt_padded_mut::<NoPadding>(&mut buf)
            .map_err(|e| FuncError(format!("decryptAES: {e}")))?;
        let n = plain.len();
        let pad = plain[n - 1] as usize;
        if pad > n {
            return Err(FuncError(format!(
                "runtime error: slice bounds out of range [:{}] with capacity {n}",
                n as i64 - pad as i64
            )));
        }
        Ok(Value::str(String::from_utf8_lossy(&plain[..n - pad]).into_owned()))
    });
    m.insert("genPrivateKey", sig(&[P::String]), |_, _| Err(unsupported("genPrivateKey")));
    m.insert("genCA", sig(&[P::String, P::Int]), |_, _| Err(unsupported("genCA")));
    m.insert("genSelfSignedCert", sig(&[P::String, P::ListAny, P::ListAny, P::Int]), |_, _| {
        Err(unsupported("genSelfSignedCert"))
    });
    m.insert("genSignedCert", sig(&[P::String, P::ListAny, P::ListAny, P::Int, P::Any]), |_, _| {
        Err(unsupported("genSignedCert"))
    });
    m.insert("buildCustomCert", sig(&[P::String, P::String]), |_, _| Err(unsupported("buildCustomCert")));
}
