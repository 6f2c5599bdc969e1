"""A secured Temporal endpoint for tests: nginx (Debian's package) terminating TLS in front of a dev server,
requiring a client certificate from a throwaway CA and an ``authorization: Bearer <key>`` header, and
passing gRPC on to the server. No tests here."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.support.web import make_certs

SERVER_NAME = "secure.test"  # the name in the server certificate make_certs signs
API_KEY = "test-api-key-0123456789"


@dataclass(frozen=True)
class SecuredTemporal:
    address: str  # 127.0.0.1:<port>; the certificate names SERVER_NAME, so clients set the server name
    ca: Path
    client_cert: Path
    client_key: Path
    api_key: str
    log: Path

    def env(self) -> dict[str, str]:
        """Temporal's standard variables for this endpoint, and nothing of ours."""
        return {
            "TEMPORAL_ADDRESS": self.address,
            "TEMPORAL_NAMESPACE": "default",
            "TEMPORAL_API_KEY": self.api_key,
            "TEMPORAL_TLS": "true",
            "TEMPORAL_TLS_SERVER_NAME": SERVER_NAME,
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(self.ca),
            "TEMPORAL_TLS_CLIENT_CERT_PATH": str(self.client_cert),
            "TEMPORAL_TLS_CLIENT_KEY_PATH": str(self.client_key),
        }

    def profile_toml(self, name: str) -> str:
        """The same endpoint as a profile of Temporal's TOML configuration file."""
        return (
            f'[profile.{name}]\naddress = "{self.address}"\nnamespace = "default"\napi_key = "{self.api_key}"\n'
            f'[profile.{name}.tls]\nserver_name = "{SERVER_NAME}"\nserver_ca_cert_path = "{self.ca}"\n'
            f'client_cert_path = "{self.client_cert}"\nclient_key_path = "{self.client_key}"\n'
        )


def nginx_binary() -> str:
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)
    if found is None:
        pytest.skip("nginx is not installed (apt-get install nginx-light; .ci/run installs it)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_client_cert(tmp: Path, name: str = "client") -> tuple[Path, Path]:
    """A client certificate signed by the CA that make_certs left in ``tmp``."""

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tmp)

    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
    (tmp / "client-ext.cnf").write_text("extendedKeyUsage=clientAuth\n")
    run(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", f"{name}.pem", "-days", "1", "-extfile", "client-ext.cnf",
    )  # fmt: skip
    return tmp / f"{name}.pem", tmp / f"{name}.key"


_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl http2;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_client_certificate {ca};
        ssl_verify_client on;
        # Workers hold long polls open for about a minute: longer than nginx's defaults.
        grpc_read_timeout 300s;
        grpc_send_timeout 300s;
        client_body_timeout 300s;
        keepalive_timeout 300s;
        http2_max_concurrent_streams 512;
        location / {{
            # Refused the way a gRPC server refuses: status 16, UNAUTHENTICATED.
            if ($http_authorization != "Bearer {api_key}") {{
                add_header grpc-status 16 always;
                add_header grpc-message "missing or wrong API key" always;
                add_header content-type application/grpc always;
                return 200 "";
            }}
            grpc_pass grpc://{upstream};
        }}
    }}
}}
"""


@contextmanager
def secured_temporal(tmp: Path, upstream: str) -> Iterator[SecuredTemporal]:
    """nginx on a free port in front of the Temporal server at ``upstream``, until the block ends."""
    binary = nginx_binary()
    ca, cert, key = make_certs(tmp)
    client_cert, client_key = make_client_cert(tmp)
    port = _free_port()
    conf = tmp / "nginx.conf"
    conf.write_text(_CONF.format(dir=tmp, port=port, cert=cert, key=key, ca=ca, api_key=API_KEY, upstream=upstream))
    proc = subprocess.Popen(
        [binary, "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, (tmp / "error.log").read_text()
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "nginx did not listen"
            time.sleep(0.05)
        yield SecuredTemporal(f"127.0.0.1:{port}", ca, client_cert, client_key, API_KEY, tmp / "access.log")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def secured_endpoint(temporal_env: WorkflowEnvironment, tmp_path: Path) -> Iterator[SecuredTemporal]:
    """The mTLS and API-key endpoint in front of a test's dev server, with its certificates under ``tmp_path``."""
    certs = tmp_path / "proxy"
    certs.mkdir()
    with secured_temporal(certs, temporal_env.client.service_client.config.target_host) as endpoint:
        yield endpoint
