//! `openssl` as KUDO packages use it in init containers and Pipe tasks: `req -x509 -newkey
//! rsa:BITS|ec … -keyout KEY -out CERT -subj /CN=… -days N` writes a real private key (PKCS#8
//! PEM, as OpenSSL 3 writes it) and a self-signed certificate (OpenSSL's `v3_ca` extensions:
//! subject and authority key identifiers, `CA:TRUE`), `genrsa [-out FILE] [BITS]`, and
//! `rand -hex|-base64 N`. Key material comes from a generator seeded by the container's identity,
//! so a simulation is reproducible; such keys are for the simulated cluster only.

use base64::Engine as _;
use rand_chacha_03::ChaCha20Rng;
use rand_chacha_03::rand_core::{RngCore, SeedableRng};
use sha2::Digest;

use crate::shell::exec::{Flow, Io, Shell};

pub(crate) fn b64_encode(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

pub(crate) fn b64_decode(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

pub(crate) fn openssl(sh: &mut Shell<'_>, io: &Io, a: &[String]) -> Result<i32, Flow> {
    let result = match a.get(1).map(String::as_str) {
        Some("req") => req(sh, &a[2..]),
        Some("genrsa") => genrsa(sh, &a[2..]),
        Some("rand") => rand(sh, &a[2..]),
        Some(other) => {
            sh.eprint(io, format!("kudo-sim: openssl {other}: not simulated: kudo-sim's openssl runs req -x509, genrsa and rand\n"));
            return Ok(127);
        }
        None => {
            sh.eprint(io, "kudo-sim: openssl: not simulated: the interactive prompt\n");
            return Ok(127);
        }
    };
    match result {
        Ok(Output {
            files,
            stdout,
            stderr,
        }) => {
            for (path, data) in files {
                let abs = sh.abs(&path);
                if let Err(e) = sh.write_file(&abs, data.as_bytes(), false) {
                    sh.eprint(io, format!("Can't open \"{path}\" for writing, {e}\n"));
                    return Ok(1);
                }
            }
            sh.eprint(io, stderr);
            sh.print(io, stdout);
            Ok(0)
        }
        Err(Failure::NotSimulated(what)) => {
            sh.eprint(io, format!("kudo-sim: openssl {}: not simulated: {what}\n", a[1]));
            Ok(127)
        }
        Err(Failure::Error(msg)) => {
            sh.eprint(io, format!("{msg}\n"));
            Ok(1)
        }
    }
}

struct Output {
    files: Vec<(String, String)>,
    stdout: String,
    stderr: String,
}

enum Failure {
    NotSimulated(String),
    Error(String),
}

/// A generator for this container's `n`-th draw: the same pod gets the same keys.
fn rng(sh: &mut Shell<'_>, purpose: &str) -> ChaCha20Rng {
    sh.draws += 1;
    let c = sh.ctr;
    let mut h = sha2::Sha256::new();
    h.update(
        format!(
            "kudo-sim/{}/{}/{}/{purpose}/{}",
            c.namespace, c.pod, c.name, sh.draws
        )
        .as_bytes(),
    );
    ChaCha20Rng::from_seed(h.finalize().into())
}

/// The options of a subcommand: `-name [value]`, with the names that take no value.
fn options(args: &[String], flags: &[&str]) -> Result<Vec<(String, Option<String>)>, Failure> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let Some(name) = a.strip_prefix('-') else {
            out.push((String::new(), Some(a.clone())));
            i += 1;
            continue;
        };
        if flags.contains(&name) {
            out.push((name.to_string(), None));
            i += 1;
        } else {
            let v = args
                .get(i + 1)
                .cloned()
                .ok_or_else(|| Failure::Error(format!("req: Option -{name} needs a value")))?;
            out.push((name.to_string(), Some(v)));
            i += 2;
        }
    }
    Ok(out)
}

enum Key {
    Rsa(Box<rsa::RsaPrivateKey>),
    Ec(Box<p256::SecretKey>),
}

impl Key {
    fn pkcs8_pem(&self) -> Result<String, Failure> {
        use rsa::pkcs8::EncodePrivateKey;
        let lf = rsa::pkcs8::LineEnding::LF;
        let pem = match self {
            Key::Rsa(k) => k.to_pkcs8_pem(lf),
            Key::Ec(k) => k.to_pkcs8_pem(lf),
        };
        pem.map(|p| p.to_string())
            .map_err(|e| Failure::Error(e.to_string()))
    }
}

/// `rsa:BITS`, `rsa` (2048), `ec` with `-pkeyopt ec_paramgen_curve:P-256|prime256v1`.
fn new_key(sh: &mut Shell<'_>, spec: &str, pkeyopts: &[String]) -> Result<Key, Failure> {
    let (alg, param) = spec.split_once(':').unwrap_or((spec, ""));
    match alg {
        "rsa" => {
            let bits: usize = if param.is_empty() {
                2048
            } else {
                param
                    .parse()
                    .map_err(|_| Failure::Error(format!("Invalid RSA key size {param}")))?
            };
            if !(512..=16384).contains(&bits) {
                return Err(Failure::Error(format!("Invalid RSA key size {bits}")));
            }
            let mut rng = rng(sh, "rsa");
            rsa::RsaPrivateKey::new(&mut rng, bits)
                .map(|k| Key::Rsa(Box::new(k)))
                .map_err(|e| Failure::Error(format!("Error generating RSA key: {e}")))
        }
        "ec" => {
            let curve = pkeyopts
                .iter()
                .find_map(|o| o.strip_prefix("ec_paramgen_curve:"))
                .unwrap_or(param);
            if !matches!(curve, "P-256" | "prime256v1" | "secp256r1") {
                return Err(Failure::NotSimulated(format!(
                    "the elliptic curve {curve:?} (only P-256 is)"
                )));
            }
            let mut rng = rng(sh, "ec");
            Ok(Key::Ec(Box::new(p256::SecretKey::random(&mut rng))))
        }
        other => Err(Failure::NotSimulated(format!(
            "keys of type {other:?} (rsa and ec are)"
        ))),
    }
}

/// What `req -x509` is asked for.
struct ReqOptions {
    newkey: String,
    pkeyopts: Vec<String>,
    subj: String,
    days: i64,
    keyout: String,
    out: Option<String>,
}

const REQ_FLAGS: [&str; 9] = [
    "x509", "nodes", "noenc", "sha256", "batch", "new", "verbose", "quiet", "utf8",
];
const REQ_VALUES: [&str; 6] = ["newkey", "keyout", "out", "subj", "days", "pkeyopt"];

fn req_options(args: &[String]) -> Result<ReqOptions, Failure> {
    let opts = options(args, &REQ_FLAGS)?;
    let get = |n: &str| {
        opts.iter()
            .rev()
            .find(|(k, _)| k == n)
            .and_then(|(_, v)| v.clone())
    };
    let has = |n: &str| opts.iter().any(|(k, _)| k == n);
    if let Some((k, _)) = opts
        .iter()
        .find(|(k, _)| !REQ_FLAGS.contains(&k.as_str()) && !REQ_VALUES.contains(&k.as_str()))
    {
        return Err(Failure::NotSimulated(format!("the option -{k}")));
    }
    if !has("x509") {
        return Err(Failure::NotSimulated("certificate requests without -x509".into()));
    }
    let Some(newkey) = get("newkey") else {
        return Err(Failure::NotSimulated(
            "signing with an existing key (-key)".into(),
        ));
    };
    if !has("nodes") && !has("noenc") {
        // Without -nodes OpenSSL asks for a pass phrase on the terminal; a container has none.
        return Err(Failure::Error("Enter PEM pass phrase:\nbad password read".into()));
    }
    let Some(subj) = get("subj") else {
        return Err(Failure::Error(
            "req: the subject is read from the terminal without -subj; a container has none".into(),
        ));
    };
    let days = match get("days") {
        None => 30,
        Some(d) => d
            .parse()
            .map_err(|_| Failure::Error(format!("req: Invalid number \"{d}\" for option -days")))?,
    };
    Ok(ReqOptions {
        newkey,
        pkeyopts: opts
            .iter()
            .filter(|(k, _)| k == "pkeyopt")
            .filter_map(|(_, v)| v.clone())
            .collect(),
        subj,
        days,
        keyout: get("keyout").unwrap_or_else(|| "privkey.pem".into()),
        out: get("out"),
    })
}

fn req(sh: &mut Shell<'_>, args: &[String]) -> Result<Output, Failure> {
    let o = req_options(args)?;
    let key = new_key(sh, &o.newkey, &o.pkeyopts)?;
    let mut serial = [0u8; 20];
    rng(sh, "serial").fill_bytes(&mut serial);
    serial[0] &= 0x7f;
    serial[0] |= 0x01;
    let cert = self_signed(&key, &o.subj, o.days, sh.now_ms(), &serial)?;
    let mut files = vec![(o.keyout, key.pkcs8_pem()?)];
    let mut stdout = String::new();
    match o.out {
        Some(out) => files.push((out, cert)),
        None => stdout = cert,
    }
    Ok(Output {
        files,
        stdout,
        stderr: "-----\n".into(),
    })
}

fn genrsa(sh: &mut Shell<'_>, args: &[String]) -> Result<Output, Failure> {
    let opts = options(args, &["quiet", "verbose"])?;
    let out = opts.iter().find(|(k, _)| k == "out").and_then(|(_, v)| v.clone());
    let bits = opts
        .iter()
        .find(|(k, _)| k.is_empty())
        .and_then(|(_, v)| v.clone())
        .unwrap_or_else(|| "2048".into());
    if let Some((k, _)) = opts
        .iter()
        .find(|(k, _)| !matches!(k.as_str(), "" | "out" | "quiet" | "verbose"))
    {
        return Err(Failure::NotSimulated(format!("the option -{k}")));
    }
    let pem = new_key(sh, &format!("rsa:{bits}"), &[])?.pkcs8_pem()?;
    Ok(match out {
        Some(path) => Output {
            files: vec![(path, pem)],
            stdout: String::new(),
            stderr: String::new(),
        },
        None => Output {
            files: Vec::new(),
            stdout: pem,
            stderr: String::new(),
        },
    })
}

fn rand(sh: &mut Shell<'_>, args: &[String]) -> Result<Output, Failure> {
    let (enc, n) = match args {
        [f, n] if f == "-hex" || f == "-base64" => (f.as_str(), n),
        _ => {
            return Err(Failure::NotSimulated(
                "only `rand -hex N` and `rand -base64 N` are".into(),
            ));
        }
    };
    let n: usize = n
        .parse()
        .map_err(|_| Failure::Error(format!("rand: invalid number {n}")))?;
    let mut bytes = vec![0u8; n.min(1 << 20)];
    rng(sh, "rand").fill_bytes(&mut bytes);
    let text = if enc == "-hex" {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    } else {
        b64_encode(&bytes)
    };
    Ok(Output {
        files: Vec::new(),
        stdout: format!("{text}\n"),
        stderr: String::new(),
    })
}

/// `-subj /C=US/O=Org/CN=name` as an X.509 name (UTF8String values, PrintableString for `C`).
fn subject(subj: &str) -> Result<x509_cert::name::Name, Failure> {
    use x509_cert::attr::AttributeTypeAndValue;
    use x509_cert::der::Any;
    use x509_cert::der::asn1::{ObjectIdentifier, PrintableStringRef, SetOfVec, Utf8StringRef};
    use x509_cert::name::{RdnSequence, RelativeDistinguishedName};
    let bad = |m: String| Failure::Error(format!("req: {m}"));
    let Some(body) = subj.strip_prefix('/') else {
        return Err(bad(format!(
            "name is expected to be in the format /type0=value0/type1=value1/type2=... where characters may be escaped by \\. This name is not in that format: '{subj}'"
        )));
    };
    let mut rdns = Vec::new();
    for part in body.split('/').filter(|p| !p.is_empty()) {
        let (t, v) = part
            .split_once('=')
            .ok_or_else(|| bad(format!("Hit end of string before finding the '=' in {part:?}")))?;
        let oid = match t {
            "C" => "2.5.4.6",
            "ST" => "2.5.4.8",
            "L" => "2.5.4.7",
            "O" => "2.5.4.10",
            "OU" => "2.5.4.11",
            "CN" => "2.5.4.3",
            "emailAddress" => "1.2.840.113549.1.9.1",
            other => return Err(Failure::NotSimulated(format!("the name attribute {other}"))),
        };
        let value = if t == "C" {
            Any::encode_from(&PrintableStringRef::new(v).map_err(|e| bad(e.to_string()))?)
        } else {
            Any::encode_from(&Utf8StringRef::new(v).map_err(|e| bad(e.to_string()))?)
        }
        .map_err(|e| bad(e.to_string()))?;
        let atv = AttributeTypeAndValue {
            oid: ObjectIdentifier::new_unwrap(oid),
            value,
        };
        rdns.push(RelativeDistinguishedName::from(
            SetOfVec::try_from(vec![atv]).map_err(|e| bad(e.to_string()))?,
        ));
    }
    Ok(RdnSequence(rdns))
}

/// A self-signed certificate for `key`, valid from `now_ms` for `days`, with OpenSSL's `v3_ca`.
fn self_signed(key: &Key, subj: &str, days: i64, now_ms: i64, serial: &[u8]) -> Result<String, Failure> {
    use std::time::{Duration, UNIX_EPOCH};
    use x509_cert::builder::{Builder, CertificateBuilder, Profile};
    use x509_cert::der::EncodePem;
    use x509_cert::der::referenced::OwnedToRef;
    use x509_cert::ext::pkix::{AuthorityKeyIdentifier, BasicConstraints, SubjectKeyIdentifier};
    use x509_cert::spki::{EncodePublicKey, SubjectPublicKeyInfoOwned};
    let err = |e: &dyn std::fmt::Display| Failure::Error(e.to_string());
    let spki_der = match key {
        Key::Rsa(k) => k.to_public_key().to_public_key_der(),
        Key::Ec(k) => k.public_key().to_public_key_der(),
    }
    .map_err(|e| err(&e))?;
    let spki = SubjectPublicKeyInfoOwned::try_from(spki_der.as_bytes()).map_err(|e| err(&e))?;
    let start = UNIX_EPOCH + Duration::from_millis(u64::try_from(now_ms).unwrap_or(0) / 1000 * 1000);
    let end = start + Duration::from_secs(days.max(0).unsigned_abs().saturating_mul(86_400));
    let validity = x509_cert::time::Validity {
        not_before: x509_cert::time::Time::try_from(start).map_err(|e| err(&e))?,
        not_after: x509_cert::time::Time::try_from(end).map_err(|e| err(&e))?,
    };
    let serial = x509_cert::serial_number::SerialNumber::new(serial).map_err(|e| err(&e))?;
    let name = subject(subj)?;
    let ski = SubjectKeyIdentifier::try_from(spki.owned_to_ref()).map_err(|e| err(&e))?;
    let aki = AuthorityKeyIdentifier::try_from(spki.owned_to_ref()).map_err(|e| err(&e))?;
    macro_rules! build {
        ($signer:expr, $sig:ty) => {{
            let signer = $signer;
            let mut b = CertificateBuilder::new(
                Profile::Manual { issuer: None },
                serial,
                validity,
                name,
                spki,
                &signer,
            )
            .map_err(|e| err(&e))?;
            b.add_extension(&ski).map_err(|e| err(&e))?;
            b.add_extension(&aki).map_err(|e| err(&e))?;
            b.add_extension(&BasicConstraints {
                ca: true,
                path_len_constraint: None,
            })
            .map_err(|e| err(&e))?;
            b.build::<$sig>().map_err(|e| err(&e))?
        }};
    }
    let cert = match key {
        Key::Rsa(k) => build!(
            rsa::pkcs1v15::SigningKey::<sha2::Sha256>::new((**k).clone()),
            rsa::pkcs1v15::Signature
        ),
        Key::Ec(k) => build!(p256::ecdsa::SigningKey::from(&**k), p256::ecdsa::DerSignature),
    };
    cert.to_pem(x509_cert::der::pem::LineEnding::LF)
        .map_err(|e| err(&e))
}
