"""A token service for the distribution registry's `auth: token` mode, for tests: the Docker
registry token protocol (GET REALM?service=S&scope=repository:NAME:ACTIONS with basic auth) answered
with an ES256 JWT whose `x5c` header holds the issuer certificate the registry trusts
(`rootcertbundle`). Wrong or missing credentials get 401. Written from the protocol's published
description; Python's `cryptography` signs.

    token_server.py PORT_FILE KEY CERT ISSUER USER PASSWORD

It listens on 127.0.0.1 on a free port, writes the port to PORT_FILE, and serves until killed.
"""

import base64
import http.server
import json
import sys
import time
import urllib.parse
import uuid

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main(port_file, key_file, cert_file, issuer, user, password):
    with open(key_file, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    with open(cert_file, "rb") as f:
        cert_der = x509.load_pem_x509_certificate(f.read()).public_bytes(serialization.Encoding.DER)
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def token(service, scopes):
        access = []
        for scope in scopes:
            kind, name, actions = scope.split(":", 2)
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        claims = {"iss": issuer, "sub": user, "aud": service, "exp": now + 300, "nbf": now - 10,
                  "iat": now, "jti": str(uuid.uuid4()), "access": access}
        header = {"alg": "ES256", "typ": "JWT", "x5c": [base64.b64encode(cert_der).decode()]}
        signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
        r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            url = urllib.parse.urlparse(self.path)
            query = urllib.parse.parse_qs(url.query)
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"details":"wrong user name or password"}')
                return
            t = token(query.get("service", [""])[0], query.get("scope", []))
            body = json.dumps({"token": t, "access_token": t, "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:7])
