"""A throw-away CA, a broker certificate and client certificates with chosen CNs
(mTLS principals), made with the openssl CLI as tests/network/test_tls.py does."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

needs_openssl = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="openssl CLI needed to make test certificates"
)


def _run(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path

    def issue(self, name: str, subject: str, *, server: bool = False) -> tuple[Path, Path]:
        """(certificate, key) signed by the CA for ``subject`` (``/CN=alice/O=x``)."""
        key, csr, crt = (self.dir / f"{name}.{ext}" for ext in ("key", "csr", "crt"))
        _run(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(csr),
            "-subj",
            subject,
        )
        ext = self.dir / f"{name}.ext"
        ext.write_text(
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
            if server
            else "basicConstraints=CA:FALSE\n"
        )
        _run(
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(self.ca),
            "-CAkey",
            str(self.dir / "ca.key"),
            "-CAcreateserial",
            "-out",
            str(crt),
            "-days",
            "2",
            "-extfile",
            str(ext),
        )
        return crt, key

    def keystore(self, name: str, subject: str, *, server: bool = False) -> Path:
        crt, key = self.issue(name, subject, server=server)
        store = self.dir / f"{name}.keystore.pem"
        store.write_text(key.read_text() + crt.read_text())
        return store

    def client_ssl(self, cert: tuple[Path, Path]) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        return ctx


def make_pki(d: Path) -> Pki:
    _run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(d / "ca.key"),
        "-out",
        str(d / "ca.crt"),
        "-days",
        "2",
        "-subj",
        "/CN=kafkalite-test-ca",
    )
    return Pki(d, d / "ca.crt")
