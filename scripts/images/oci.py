#!/usr/bin/env python3
"""Write an OCI image archive (oci-layout + index.json + blobs) from a root filesystem tree.

Why our own writer: no Docker engine runs on these machines and no registry is reachable, and the
tools that build images without a daemon (buildah, kaniko, ko) are not in the package registries we
can reach. An image is only a tar layer, a config and a manifest, so a few lines of Python do it.

The archive is reproducible: entries sorted, every mtime 0, owners numeric (uid/gid from the tree
unless --owner is given), gzip without a name or timestamp. The same tree and options give the same
digest. `ctr images import`, `kind load image-archive` and `skopeo copy oci-archive:` accept it.

    oci.py OUT.tar --rootfs DIR --name REF [--name REF…] [--entrypoint JSON] [--cmd JSON]
           [--env K=V… (PATH=… replaces the default)] [--workdir DIR] [--user UID[:GID]] [--label K=V…] [--owner UID:GID]
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import stat
import sys
import tarfile


def layer_tar(rootfs, owner):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = []
        for top, dirs, files in os.walk(rootfs):
            dirs.sort()
            for name in sorted(dirs + files):
                paths.append(os.path.join(top, name))
        for path in sorted(paths, key=lambda p: os.path.relpath(p, rootfs)):
            rel = os.path.relpath(path, rootfs)
            info = tar.gettarinfo(path, arcname=rel)
            info.mtime = 0
            info.uname = info.gname = ""
            if owner is not None:
                info.uid, info.gid = owner
            if info.isreg():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buf.getvalue()


def gz(data):
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as g:
        g.write(data)
    return out.getvalue()


def blob(blobs, data, media_type):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def env_list(pairs):
    """K=V entries in order, a later entry of the same K replacing the earlier one (a program's getenv
    would see the first of two)."""
    out = {}
    for kv in pairs:
        out[kv.split("=", 1)[0]] = kv
    return list(out.values())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--rootfs", required=True)
    p.add_argument("--name", action="append", required=True)
    p.add_argument("--entrypoint", type=json.loads)
    p.add_argument("--cmd", type=json.loads)
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--workdir")
    p.add_argument("--user")
    p.add_argument("--label", action="append", default=[])
    p.add_argument("--owner", help="UID:GID given to every entry (default: as on disk)")
    a = p.parse_args()
    owner = tuple(int(x) for x in a.owner.split(":")) if a.owner else None
    raw = layer_tar(a.rootfs, owner)
    blobs = {}
    layer = blob(blobs, gz(raw), "application/vnd.oci.image.layer.v1.tar+gzip")
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": env_list(["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"] + a.env)},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]},
        "history": [{"created_by": "kudo-rs scripts/images/oci.py"}],
    }
    for key, val in (("Entrypoint", a.entrypoint), ("Cmd", a.cmd), ("WorkingDir", a.workdir), ("User", a.user)):
        if val is not None:
            config["config"][key] = val
    if a.label:
        config["config"]["Labels"] = dict(kv.split("=", 1) for kv in a.label)
    cfg = blob(blobs, json.dumps(config, sort_keys=True).encode(), "application/vnd.oci.image.config.v1+json")
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": cfg, "layers": [layer]}
    man = blob(blobs, json.dumps(manifest, sort_keys=True).encode(), "application/vnd.oci.image.manifest.v1+json")
    index = {"schemaVersion": 2, "manifests": [
        dict(man, annotations={"org.opencontainers.image.ref.name": n, "io.containerd.image.name": n})
        for n in a.name]}
    files = {"oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
             "index.json": json.dumps(index, sort_keys=True).encode()}
    for digest, data in blobs.items():
        files["blobs/sha256/" + digest.split(":")[1]] = data
    tmp = a.out + ".part"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    os.replace(tmp, a.out)
    print(man["digest"])


if __name__ == "__main__":
    sys.exit(main())
