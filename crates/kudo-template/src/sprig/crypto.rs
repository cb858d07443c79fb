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
use crate::func::{FuncEnv, FuncError, FuncMap};
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
            "CvcvnoCvcvCvcv",
            "CvcvCvcvnoCvcv",
            "CvcvCvcvCvcvno",
            "CvccnoCvcvCvcv",
            "CvccCvcvnoCvcv",
            "CvccCvcvCvcvno",
            "CvcvnoCvccCvcv",
            "CvcvCvccnoCvcv",
            "CvcvCvccCvcvno",
            "CvcvnoCvcvCvcc",
            "CvcvCvcvnoCvcc",
            "CvcvCvcvCvccno",
            "CvccnoCvccCvcv",
            "CvccCvccnoCvcv",
            "CvccCvccCvcvno",
            "CvcvnoCvccCvcc",
            "CvcvCvccnoCvcc",
            "CvcvCvccCvccno",
            "CvccnoCvcvCvcc",
            "CvccCvcvnoCvcc",
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

/// A private key of one of the types Sprig generates or accepts.
enum PrivKey {
    Rsa(Box<rsa::RsaPrivateKey>),
    Ec(Box<p256::SecretKey>),
    Ed(Box<ed25519_dalek::SigningKey>),
}

/// A `rand_core` 0.6 generator (what the RustCrypto key crates take), seeded from the render's
/// seeded RNG so key material stays reproducible for a given seed.
fn crypto_rng(env: &mut FuncEnv) -> rand_chacha_03::ChaCha20Rng {
    use rand_chacha_03::rand_core::SeedableRng;
    let mut seed = [0u8; 32];
    env.rng.fill_bytes(&mut seed);
    rand_chacha_03::ChaCha20Rng::from_seed(seed)
}

fn cerr(e: impl std::fmt::Display) -> FuncError {
    FuncError(e.to_string())
}

/// Sprig's `pemBlockForKey` + `pem.EncodeToMemory`.
fn key_pem(k: &PrivKey) -> Result<String, FuncError> {
    use ed25519_dalek::pkcs8::EncodePrivateKey;
    use rsa::pkcs1::EncodeRsaPrivateKey;
    let lf = rsa::pkcs8::LineEnding::LF;
    Ok(match k {
        PrivKey::Rsa(k) => k.to_pkcs1_pem(lf).map_err(cerr)?.to_string(),
        PrivKey::Ec(k) => k.to_sec1_pem(lf).map_err(cerr)?.to_string(),
        PrivKey::Ed(k) => k.to_pkcs8_pem(lf).map_err(cerr)?.to_string(),
    })
}

fn gen_rsa(env: &mut FuncEnv, bits: usize) -> Result<PrivKey, FuncError> {
    let mut rng = crypto_rng(env);
    rsa::RsaPrivateKey::new(&mut rng, bits)
        .map(|k| PrivKey::Rsa(Box::new(k)))
        .map_err(|e| FuncError(format!("failed to generate private key: {e}")))
}

/// Go's `pem.Decode`: the first PEM block in the input (text before it is skipped).
fn pem_decode(input: &str) -> Option<(String, Vec<u8>)> {
    let start = input.find("-----BEGIN ")?;
    let rest = &input[start..];
    let label_end = rest[11..].find("-----")? + 11;
    let label = &rest[11..label_end];
    let end_marker = format!("-----END {label}-----");
    let end = rest.find(&end_marker)? + end_marker.len();
    let (l, der) = x509_cert::der::pem::decode_vec(&rest.as_bytes()[..end]).ok()?;
    Some((l.to_string(), der))
}

/// Sprig's `parsePrivateKeyPEM`.
fn parse_private_key_pem(pem: &str) -> Result<PrivKey, String> {
    use ed25519_dalek::pkcs8::DecodePrivateKey;
    use rsa::pkcs1::DecodeRsaPrivateKey;
    let (label, der) = pem_decode(pem).ok_or("no PEM data in input")?;
    if label == "PRIVATE KEY" {
        if let Ok(k) = rsa::RsaPrivateKey::from_pkcs8_der(&der) {
            return Ok(PrivKey::Rsa(Box::new(k)));
        }
        if let Ok(k) = p256::SecretKey::from_pkcs8_der(&der) {
            return Ok(PrivKey::Ec(Box::new(k)));
        }
        return ed25519_dalek::SigningKey::from_pkcs8_der(&der)
            .map(|k| PrivKey::Ed(Box::new(k)))
            .map_err(|e| format!("decoding PEM as PKCS#8: {e}"));
    }
    let Some(kind) = label.strip_suffix(" PRIVATE KEY") else {
        return Err(format!("no private key data in PEM block of type {label}"));
    };
    match kind {
        "RSA" => rsa::RsaPrivateKey::from_pkcs1_der(&der)
            .map(|k| PrivKey::Rsa(Box::new(k)))
            .map_err(|e| format!("parsing RSA private key from PEM: {e}")),
        "EC" => p256::SecretKey::from_sec1_der(&der)
            .map(|k| PrivKey::Ec(Box::new(k)))
            .map_err(|e| format!("parsing EC private key from PEM: {e}")),
        _ => Err(format!("invalid private key type {label}")),
    }
}

/// Certificate request data shared by the generators (Sprig's `getBaseCertTemplate`).
struct CertSpec {
    cn: String,
    ips: Vec<std::net::IpAddr>,
    dns: Vec<String>,
    days: i64,
    is_ca: bool,
}

fn list_strings(v: &Value, what: &str) -> Result<Vec<String>, FuncError> {
    match v {
        Value::Nil => Ok(vec![]),
        Value::List(l) => l
            .items
            .iter()
            .map(|x| match x {
                Value::String(s) => Ok(s.to_string()),
                other => Err(FuncError(format!(
                    "error processing {what} list: {what} list item {} is not a string",
                    super::sprint(other)
                ))),
            })
            .collect(),
        other => Err(FuncError(format!(
            "error processing {what} list: not a list: {}",
            other.type_name()
        ))),
    }
}

fn cert_spec(a: &[Value], is_ca: bool) -> Result<CertSpec, FuncError> {
    let cn = a_str(a, 0)?.to_string();
    if is_ca {
        return Ok(CertSpec {
            cn,
            ips: vec![],
            dns: vec![],
            days: a_int(a, 1)?,
            is_ca,
        });
    }
    let ips = list_strings(a.get(1).unwrap_or(&Value::Nil), "ip")?
        .into_iter()
        .map(|s| s.parse().map_err(|_| FuncError(format!("error parsing ip: {s}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let dns = list_strings(a.get(2).unwrap_or(&Value::Nil), "dns")?;
    Ok(CertSpec {
        cn,
        ips,
        dns,
        days: a_int(a, 3)?,
        is_ca,
    })
}

fn cn_name(cn: &str) -> Result<x509_cert::name::Name, FuncError> {
    use x509_cert::attr::AttributeTypeAndValue;
    use x509_cert::der::asn1::{PrintableStringRef, SetOfVec, Utf8StringRef};
    use x509_cert::der::{Any, asn1::ObjectIdentifier};
    use x509_cert::name::{RdnSequence, RelativeDistinguishedName};
    let value = match PrintableStringRef::new(cn) {
        Ok(p) => Any::encode_from(&p),
        Err(_) => Any::encode_from(&Utf8StringRef::new(cn).map_err(cerr)?),
    }
    .map_err(cerr)?;
    let atv = AttributeTypeAndValue {
        oid: ObjectIdentifier::new_unwrap("2.5.4.3"),
        value,
    };
    let rdn = RelativeDistinguishedName::from(SetOfVec::try_from(vec![atv]).map_err(cerr)?);
    Ok(RdnSequence(vec![rdn]))
}

/// Builds and signs a certificate for `subject_key`, issued by `issuer` (None: self-signed).
fn make_cert(
    env: &mut FuncEnv,
    spec: &CertSpec,
    subject_key: &PrivKey,
    issuer: Option<(&x509_cert::Certificate, &PrivKey)>,
) -> Result<String, FuncError> {
    use std::time::{Duration, SystemTime};
    use x509_cert::builder::{Builder, CertificateBuilder, Profile};
    use x509_cert::der::EncodePem;
    use x509_cert::der::asn1::{Ia5String, ObjectIdentifier, OctetString};
    use x509_cert::der::referenced::OwnedToRef;
    use x509_cert::ext::pkix::name::GeneralName;
    use x509_cert::ext::pkix::{
        AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages, SubjectAltName,
        SubjectKeyIdentifier,
    };
    use x509_cert::spki::{EncodePublicKey, SubjectPublicKeyInfoOwned};

    let spki_der = match subject_key {
        PrivKey::Rsa(k) => k.to_public_key().to_public_key_der().map_err(cerr)?,
        PrivKey::Ec(k) => k.public_key().to_public_key_der().map_err(cerr)?,
        PrivKey::Ed(k) => k.verifying_key().to_public_key_der().map_err(cerr)?,
    };
    let spki = SubjectPublicKeyInfoOwned::try_from(spki_der.as_bytes()).map_err(cerr)?;
    let mut serial = [0u8; 16];
    env.rng.fill_bytes(&mut serial);
    serial[0] &= 0x7f;
    serial[0] |= 0x01;
    let serial = x509_cert::serial_number::SerialNumber::new(&serial).map_err(cerr)?;
    let now = SystemTime::now();
    let span = Duration::from_secs(spec.days.unsigned_abs().saturating_mul(86_400));
    let not_after = if spec.days >= 0 { now + span } else { now - span };
    let validity = x509_cert::time::Validity {
        not_before: x509_cert::time::Time::try_from(now).map_err(cerr)?,
        not_after: x509_cert::time::Time::try_from(not_after).map_err(cerr)?,
    };
    let subject = cn_name(&spec.cn)?;
    let profile = Profile::Manual {
        issuer: issuer.map(|(c, _)| c.tbs_certificate.subject.clone()),
    };

    let mut usages = KeyUsages::KeyEncipherment | KeyUsages::DigitalSignature;
    if spec.is_ca {
        usages |= KeyUsages::KeyCertSign;
    }
    let eku = ExtendedKeyUsage(vec![
        ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.1"),
        ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.2"),
    ]);
    let mut san = Vec::new();
    for d in &spec.dns {
        san.push(GeneralName::DnsName(Ia5String::new(d).map_err(cerr)?));
    }
    for ip in &spec.ips {
        let bytes = match ip {
            std::net::IpAddr::V4(v) => v.octets().to_vec(),
            std::net::IpAddr::V6(v) => v.octets().to_vec(),
        };
        san.push(GeneralName::IpAddress(OctetString::new(bytes).map_err(cerr)?));
    }
    let ski = SubjectKeyIdentifier::try_from(spki.owned_to_ref()).map_err(cerr)?;
    let aki = match issuer {
        Some((c, _)) => Some(
            AuthorityKeyIdentifier::try_from(c.tbs_certificate.subject_public_key_info.owned_to_ref())
                .map_err(cerr)?,
        ),
        None => None,
    };

    macro_rules! build {
        ($signer:expr, $sig:ty) => {{
            let signer = $signer;
            let mut b =
                CertificateBuilder::new(profile, serial, validity, subject, spki, &signer).map_err(cerr)?;
            b.add_extension(&KeyUsage(usages)).map_err(cerr)?;
            b.add_extension(&eku).map_err(cerr)?;
            b.add_extension(&BasicConstraints {
                ca: spec.is_ca,
                path_len_constraint: None,
            })
            .map_err(cerr)?;
            if spec.is_ca {
                b.add_extension(&ski).map_err(cerr)?;
            }
            if let Some(aki) = &aki {
                b.add_extension(aki).map_err(cerr)?;
            }
            if !san.is_empty() {
                b.add_extension(&SubjectAltName(san)).map_err(cerr)?;
            }
            b.build::<$sig>().map_err(cerr)?
        }};
    }
    let signing_key = issuer.map(|(_, k)| k).unwrap_or(subject_key);
    let cert = match signing_key {
        PrivKey::Rsa(k) => {
            build!(
                rsa::pkcs1v15::SigningKey::<sha2::Sha256>::new((**k).clone()),
                rsa::pkcs1v15::Signature
            )
        }
        PrivKey::Ec(k) => build!(p256::ecdsa::SigningKey::from(&**k), p256::ecdsa::DerSignature),
        PrivKey::Ed(_) => {
            return Err(FuncError(
                "signing with an ed25519 key is not supported by kudo-rs".into(),
            ));
        }
    };
    cert.to_pem(x509_cert::der::pem::LineEnding::LF).map_err(cerr)
}

fn cert_value(cert: String, key: String) -> Value {
    Value::Object(std::rc::Rc::new(Certificate { cert, key }))
}

fn as_certificate(v: &Value) -> Result<Certificate, FuncError> {
    match v {
        Value::Object(o) => o.as_any().downcast_ref::<Certificate>().cloned().ok_or_else(|| {
            FuncError(format!(
                "wrong type for value; expected sprig.certificate; got {}",
                v.type_name()
            ))
        }),
        other => Err(FuncError(format!(
            "wrong type for value; expected sprig.certificate; got {}",
            other.type_name()
        ))),
    }
}

fn parse_cert(pem: &str, what: &str) -> Result<x509_cert::Certificate, FuncError> {
    use x509_cert::der::Decode;
    let (_, der) = pem_decode(pem).ok_or_else(|| FuncError("unable to decode certificate".into()))?;
    x509_cert::Certificate::from_der(&der).map_err(|e| {
        FuncError(format!(
            "error parsing certificate: {what}: x509: malformed certificate ({e})"
        ))
    })
}

pub(super) fn register(m: &mut FuncMap) {
    m.insert(
        "derivePassword",
        sig(&[P::Int, P::String, P::String, P::String, P::String]),
        |_, a| {
            let counter = a_int(a, 0)?;
            if !(0..=u32::MAX as i64).contains(&counter) {
                return Err(FuncError(format!(
                    "derivePassword: counter {counter} does not fit uint32"
                )));
            }
            Ok(Value::str(derive_password(
                counter as u32,
                a_str(a, 1)?,
                a_str(a, 2)?,
                a_str(a, 3)?,
                a_str(a, 4)?,
            )))
        },
    );
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
        let iv: [u8; 16] = iv
            .try_into()
            .map_err(|_| FuncError("decryptAES: bad IV".into()))?;
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
        Ok(Value::str(
            String::from_utf8_lossy(&plain[..n - pad]).into_owned(),
        ))
    });
    m.insert("genPrivateKey", sig(&[P::String]), |env, a| {
        let key = match a_str(a, 0)? {
            "" | "rsa" => gen_rsa(env, 4096),
            "ecdsa" => Ok(PrivKey::Ec(Box::new(p256::SecretKey::random(&mut crypto_rng(env))))),
            "ed25519" => {
                let mut seed = [0u8; 32];
                env.rng.fill_bytes(&mut seed);
                Ok(PrivKey::Ed(Box::new(ed25519_dalek::SigningKey::from_bytes(&seed))))
            }
            "dsa" => Err(FuncError(
                "genPrivateKey \"dsa\" is not supported by kudo-rs: DSA is deprecated; use \"ecdsa\", \"ed25519\" or \"rsa\"".into(),
            )),
            other => return Ok(Value::str(format!("Unknown type {other}"))),
        }?;
        Ok(Value::str(key_pem(&key)?))
    });
    m.insert("genCA", sig(&[P::String, P::Int]), |env, a| {
        let spec = cert_spec(a, true)?;
        let key = gen_rsa(env, 2048)?;
        let cert = make_cert(env, &spec, &key, None)?;
        Ok(cert_value(cert, key_pem(&key)?))
    });
    m.insert(
        "genSelfSignedCert",
        sig(&[P::String, P::ListAny, P::ListAny, P::Int]),
        |env, a| {
            let spec = cert_spec(a, false)?;
            let key = gen_rsa(env, 2048)?;
            let cert = make_cert(env, &spec, &key, None)?;
            Ok(cert_value(cert, key_pem(&key)?))
        },
    );
    m.insert(
        "genSignedCert",
        sig(&[P::String, P::ListAny, P::ListAny, P::Int, P::Any]),
        |env, a| {
            let ca = as_certificate(a.get(4).unwrap_or(&Value::Nil))?;
            let ca_cert = parse_cert(&ca.cert, "decodedSignerCert.Bytes")?;
            let ca_key = parse_private_key_pem(&ca.key)
                .map_err(|e| FuncError(format!("error parsing private key: {e}")))?;
            let spec = cert_spec(a, false)?;
            let key = gen_rsa(env, 2048)?;
            let cert = make_cert(env, &spec, &key, Some((&ca_cert, &ca_key)))?;
            Ok(cert_value(cert, key_pem(&key)?))
        },
    );
    m.insert("buildCustomCert", sig(&[P::String, P::String]), |_, a| {
        let cert = b64_decode(a_str(a, 0)?.as_bytes())
            .map_err(|_| FuncError("unable to decode base64 certificate".into()))?;
        let key = b64_decode(a_str(a, 1)?.as_bytes())
            .map_err(|_| FuncError("unable to decode base64 private key".into()))?;
        let cert = String::from_utf8_lossy(&cert).into_owned();
        let key = String::from_utf8_lossy(&key).into_owned();
        parse_cert(&cert, "decodedCert.Bytes")?;
        parse_private_key_pem(&key).map_err(|e| FuncError(format!("error parsing private key: {e}")))?;
        Ok(cert_value(cert, key))
    });
}
