#!/usr/bin/env python3
"""Another registry client for the OCI tests, written from the published formats only (OCI image
spec, distribution spec, cosign's simple-signing signature format), so that what kudo-rs reads is
checked against what someone else wrote: Python's urllib speaks the distribution API, and the
`cryptography` package makes ECDSA P-256 keys and signatures.

  oci_tools.py keygen DIR                         -> DIR/py.key, DIR/py.pub
  oci_tools.py sign REGISTRY REPO DIGEST KEY [--payload-digest D] [--tamper]
  oci_tools.py push-artifact REGISTRY REPO TAG LAYER_FILE [--config-media-type T] [--artifact-type T]
                [--layer-media-type T]            -> prints the manifest digest
  oci_tools.py push-index REGISTRY REPO TAG MANIFEST_DIGEST MANIFEST_SIZE
  oci_tools.py layout DIR TAG LAYER_FILE          -> an OCI image layout holding a package artifact

The registry's credentials come from $REG_USER/$REG_PASSWORD and its CA from $REG_CA.
"""

import base64
import hashlib
import json
import os
import ssl
import sys
import urllib.request

LAYER = "application/vnd.kudo.package.content.v1.tar+gzip"
CONFIG = "application/vnd.kudo.package.config.v1+json"
ARTIFACT = "application/vnd.kudo.package.v1"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def request(method, url, data=None, headers=None):
    ctx = ssl.create_default_context(cafile=os.environ["REG_CA"])
    auth = base64.b64encode(f"{os.environ['REG_USER']}:{os.environ['REG_PASSWORD']}".encode()).decode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Authorization": "Basic " + auth, **(headers or {})})
    return urllib.request.urlopen(req, context=ctx)


def push_blob(registry, repo, data):
    d = digest(data)
    base = f"https://{registry}"
    with request("POST", f"{base}/v2/{repo}/blobs/uploads/") as r:
        location = r.headers["Location"]
    if location.startswith("/"):
        location = base + location
    sep = "&" if "?" in location else "?"
    with request("PUT", f"{location}{sep}digest={d}", data, {"Content-Type": "application/octet-stream"}):
        pass
    return {"digest": d, "size": len(data)}


def push_manifest(registry, repo, ref, manifest, media_type=MANIFEST):
    body = json.dumps(manifest, separators=(",", ":")).encode()
    with request("PUT", f"https://{registry}/v2/{repo}/manifests/{ref}", body, {"Content-Type": media_type}):
        pass
    return digest(body), len(body)


def keygen(out_dir):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    with open(os.path.join(out_dir, "py.key"), "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with open(os.path.join(out_dir, "py.pub"), "wb") as f:
        f.write(key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


def sign(registry, repo, manifest_digest, key_file, payload_digest=None, tamper=False):
    """A cosign keyed signature of manifest_digest, pushed to the sha256-<hex>.sig tag."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    with open(key_file, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    payload = json.dumps({
        "critical": {
            "identity": {"docker-reference": f"{registry}/{repo}"},
            "image": {"docker-manifest-digest": payload_digest or manifest_digest},
            "type": "cosign container image signature",
        },
        "optional": {"creator": "oci_tools.py"},
    }).encode()
    signature = base64.b64encode(key.sign(payload, ec.ECDSA(hashes.SHA256()))).decode()
    if tamper:
        payload = payload.replace(b"oci_tools.py", b"someone-else")
    layer = push_blob(registry, repo, payload)
    config = json.dumps({"architecture": "", "os": "", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]}}).encode()
    cfg = push_blob(registry, repo, config)
    manifest = {
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **cfg},
        "layers": [{"mediaType": SIMPLE_SIGNING, **layer,
                    "annotations": {"dev.cosignproject.cosign/signature": signature}}],
    }
    tag = manifest_digest.replace(":", "-", 1) + ".sig"
    push_manifest(registry, repo, tag, manifest)


def artifact_manifest(layer_blob, config_blob, config_type, artifact_type, layer_type):
    m = {"schemaVersion": 2, "mediaType": MANIFEST}
    if artifact_type:
        m["artifactType"] = artifact_type
    m["config"] = {"mediaType": config_type, **config_blob}
    m["layers"] = [{"mediaType": layer_type, **layer_blob}]
    m["annotations"] = {"org.opencontainers.image.created": "2024-01-01T00:00:00Z"}
    return m


def flag(args, name, default):
    if name in args:
        i = args.index(name)
        return args[i + 1]
    return default


def push_artifact(registry, repo, tag, layer_file, args):
    with open(layer_file, "rb") as f:
        layer = f.read()
    config_type = flag(args, "--config-media-type", CONFIG)
    config_bytes = b"{}" if config_type == "application/vnd.oci.empty.v1+json" else b'{"pushedBy":"oci_tools.py"}'
    m = artifact_manifest(push_blob(registry, repo, layer), push_blob(registry, repo, config_bytes), config_type,
                          flag(args, "--artifact-type", ARTIFACT) or None, flag(args, "--layer-media-type", LAYER))
    d, _ = push_manifest(registry, repo, tag, m)
    print(d)


def push_index(registry, repo, tag, manifest_digest, size):
    index = {"schemaVersion": 2, "mediaType": INDEX,
             "manifests": [{"mediaType": MANIFEST, "digest": manifest_digest, "size": int(size)}]}
    print(push_manifest(registry, repo, tag, index, INDEX)[0])


def layout(out_dir, tag, layer_file):
    """An OCI image layout (what `skopeo copy oci:DIR:TAG` reads) holding a package artifact."""
    blobs = os.path.join(out_dir, "blobs", "sha256")
    os.makedirs(blobs, exist_ok=True)

    def put(data):
        d = digest(data)
        with open(os.path.join(blobs, d.split(":")[1]), "wb") as f:
            f.write(data)
        return {"digest": d, "size": len(data)}

    with open(layer_file, "rb") as f:
        layer = put(f.read())
    m = artifact_manifest(layer, put(b'{"pushedBy":"oci_tools.py layout"}'), CONFIG, ARTIFACT, LAYER)
    mb = json.dumps(m, separators=(",", ":")).encode()
    desc = {"mediaType": MANIFEST, **put(mb), "annotations": {"org.opencontainers.image.ref.name": tag}}
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [desc]}, f)
    with open(os.path.join(out_dir, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    print(desc["digest"])


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "keygen":
        keygen(args[0])
    elif cmd == "sign":
        sign(args[0], args[1], args[2], args[3], flag(args, "--payload-digest", None), "--tamper" in args)
    elif cmd == "push-artifact":
        push_artifact(args[0], args[1], args[2], args[3], args[4:])
    elif cmd == "push-index":
        push_index(*args[:5])
    elif cmd == "layout":
        layout(args[0], args[1], args[2])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
