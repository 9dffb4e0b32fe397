"""Certificates made at test time (trustme): a CA, a server certificate for 127.0.0.1 and a
client certificate, written as PEM files, and the `tls` blocks that use them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass
class Certificates:
    ca: Path  # the CA that signed both certificates, as clients and the server trust it
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path

    def tls(self, require_client_cert: bool = False, client_ca: bool = True) -> dict:
        """A listener's `tls` section: these files, client certificates checked against the CA."""
        block: dict = {"cert_file": str(self.cert), "key_file": str(self.key)}
        if client_ca:
            block["client_ca_file"] = str(self.ca)
            block["require_client_cert"] = require_client_cert
        return block

    @property
    def client_pair(self) -> tuple[str, str]:
        return str(self.client_cert), str(self.client_key)


def make_certificates(folder: Path, name: str = "tls") -> Certificates:
    """A new CA and its certificates under `folder`/`name` (a second call: a different CA)."""
    where = folder / name
    where.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("agent.support-desk.example")
    found = Certificates(
        ca=where / "ca.pem",
        cert=where / "server.pem",
        key=where / "server.key",
        client_cert=where / "client.pem",
        client_key=where / "client.key",
    )
    ca.cert_pem.write_to_path(str(found.ca))
    server.private_key_pem.write_to_path(str(found.key))
    server.cert_chain_pems[0].write_to_path(str(found.cert))
    for blob in server.cert_chain_pems[1:]:
        blob.write_to_path(str(found.cert), append=True)
    client.private_key_pem.write_to_path(str(found.client_key))
    client.cert_chain_pems[0].write_to_path(str(found.client_cert))
    return found


def install(source: Certificates, target: Certificates) -> None:
    """Replace the server's certificate and key files at `target` by those of `source` (the
    way a renewal rewrites them in place)."""
    target.key.write_bytes(source.key.read_bytes())
    target.cert.write_bytes(source.cert.read_bytes())
