"""Connections built from Temporal's own client configuration (profile file, TEMPORAL_* variables), our
settings on top, and the one-line errors of bad configuration. No server here: tests/test_secured_temporal.py
goes through a real TLS, client-certificate and API-key endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from agent_tools._connection import connect, resolve
from agent_tools._errors import ConfigurationError
from agent_tools._settings import Settings


def test_nothing_configured_is_the_local_dev_server() -> None:
    target = resolve(Settings(), environ={})
    assert (target.address, target.namespace, target.tls, target.api_key) == ("localhost:7233", "default", False, None)
    assert target.describe() == "address localhost:7233, namespace default, TLS off, the default profile"


def test_temporal_variables_are_read_as_the_sdk_defines_them(tmp_path: Path) -> None:
    for name in ("ca.pem", "c.pem", "c.key"):
        (tmp_path / name).write_text(name)
    env = {
        "TEMPORAL_ADDRESS": "ns.acct.tmprl.cloud:7233",
        "TEMPORAL_NAMESPACE": "ns.acct",
        "TEMPORAL_API_KEY": "k",
        "TEMPORAL_TLS_SERVER_NAME": "srv.example",
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(tmp_path / "ca.pem"),
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(tmp_path / "c.pem"),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(tmp_path / "c.key"),
        "TEMPORAL_GRPC_META_X_TEAM": "agents",
    }
    target = resolve(Settings(), environ=env)
    assert (target.address, target.namespace, target.api_key) == ("ns.acct.tmprl.cloud:7233", "ns.acct", "k")
    assert isinstance(target.tls, TLSConfig)
    assert (target.tls.domain, target.tls.server_root_ca_cert) == ("srv.example", b"ca.pem")
    assert (target.tls.client_cert, target.tls.client_private_key) == (b"c.pem", b"c.key")
    assert target.rpc_metadata == {"x-team": "agents"}
    kwargs = target.connect_kwargs()
    assert kwargs["api_key"] == "k" and kwargs["rpc_metadata"] == {"x-team": "agents"}
    assert "TLS on with a client certificate, an API key" in target.describe()


def test_an_api_key_alone_means_tls_with_the_system_roots() -> None:
    target = resolve(Settings(), environ={"TEMPORAL_ADDRESS": "x:7233", "TEMPORAL_API_KEY": "k"})
    assert target.tls is True
    assert resolve(Settings(), environ={"TEMPORAL_API_KEY": "k", "TEMPORAL_TLS": "false"}).tls is False


def test_our_settings_go_on_top_only_where_given() -> None:
    env = {"TEMPORAL_ADDRESS": "theirs:7233", "TEMPORAL_NAMESPACE": "theirs", "TEMPORAL_API_KEY": "k"}
    ours = resolve(Settings(temporal_address="ours:7233"), environ=env)
    assert (ours.address, ours.namespace, ours.api_key) == ("ours:7233", "theirs", "k")
    both = resolve(Settings(temporal_address="ours:7233", temporal_namespace="mine"), environ=env)
    assert (both.address, both.namespace) == ("ours:7233", "mine")


def test_our_variables_keep_working(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TOOLS_TEMPORAL_ADDRESS", "ours:7233")
    monkeypatch.setenv("AGENT_TOOLS_TEMPORAL_NAMESPACE", "mine")
    target = resolve(Settings(), environ={"TEMPORAL_ADDRESS": "theirs:7233"})
    assert (target.address, target.namespace) == ("ours:7233", "mine")


def test_a_profile_of_the_toml_file(tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text(
        '[profile.default]\naddress = "dev:7233"\n'
        '[profile.prod]\naddress = "prod:7233"\nnamespace = "prod-ns"\napi_key = "pk"\n'
    )
    env = {"TEMPORAL_CONFIG_FILE": str(config)}
    assert resolve(Settings(), environ=env).address == "dev:7233"
    prod = resolve(Settings(), environ={**env, "TEMPORAL_PROFILE": "prod"})
    assert (prod.address, prod.namespace, prod.api_key, prod.tls, prod.profile) == (
        "prod:7233", "prod-ns", "pk", True, "prod",
    )  # fmt: skip
    # The variables go over the file's profile, as in every SDK.
    over = resolve(Settings(), environ={**env, "TEMPORAL_PROFILE": "prod", "TEMPORAL_NAMESPACE": "other"})
    assert (over.address, over.namespace) == ("prod:7233", "other")


def _one_line_error(settings: Settings, env: dict[str, str]) -> str:
    with pytest.raises(ConfigurationError) as caught:
        resolve(settings, environ=env)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message, message
    return message


def test_a_profile_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text('[profile.default]\naddress = "dev:7233"\n')
    message = _one_line_error(Settings(), {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "staging"})
    assert "'staging' not found" in message and str(config) in message


def test_a_file_that_does_not_parse_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text("[profile.default\naddress = 1\n")
    message = _one_line_error(Settings(), {"TEMPORAL_CONFIG_FILE": str(config)})
    assert "TOML parse error" in message and str(config) in message


@pytest.mark.parametrize(
    ("variable", "what"),
    [
        ("TEMPORAL_TLS_CLIENT_CERT_PATH", "TLS client certificate"),
        ("TEMPORAL_TLS_CLIENT_KEY_PATH", "TLS client key"),
        ("TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TLS server CA certificate"),
    ],
)
def test_a_missing_certificate_or_key_file_is_one_line(tmp_path: Path, variable: str, what: str) -> None:
    missing = tmp_path / "nope.pem"
    message = _one_line_error(Settings(), {"TEMPORAL_ADDRESS": "x:7233", variable: str(missing)})
    assert f"cannot read the {what} {missing} (No such file or directory)" in message


async def test_an_unreachable_server_is_one_line_naming_what_was_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TEMPORAL_ADDRESS", "TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE", "TEMPORAL_API_KEY", "TEMPORAL_TLS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "team-ns")
    monkeypatch.setenv("TEMPORAL_API_KEY", "k")
    with pytest.raises(ConfigurationError) as caught:
        await connect(Settings(temporal_address="127.0.0.1:1"))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "cannot reach Temporal (address 127.0.0.1:1, namespace team-ns, TLS on, an API key, the default profile): "
    ), message
    assert "agent-tools dev" in message
