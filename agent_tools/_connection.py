"""Every connection to Temporal (worker, CLI, client, HTTP service, embedded runner) is built here.

Temporal's own client configuration comes first, read by the SDK exactly as the ``temporal`` CLI and every
SDK read it (``temporalio.envconfig``): the profile named by ``TEMPORAL_PROFILE`` (``default`` otherwise)
from the TOML file at ``TEMPORAL_CONFIG_FILE`` (``~/.config/temporalio/temporal.toml`` otherwise), then the
``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*`` and
``TEMPORAL_GRPC_META_*`` variables over it. Our settings go on top where given (``AGENT_TOOLS_TEMPORAL_ADDRESS``,
``AGENT_TOOLS_TEMPORAL_NAMESPACE``); what neither names is ``localhost:7233``, namespace ``default``.

Every failure (a profile that does not exist, a file that does not parse, a certificate that cannot be read,
a server that refuses or cannot be reached) is one :class:`ConfigurationError` line naming what was tried.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, Plugin
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter, DefaultPayloadConverter
from temporalio.envconfig import ClientConfigProfile
from temporalio.service import RPCError, TLSConfig

from agent_tools._errors import ConfigurationError
from agent_tools._settings import Settings

__all__ = ["Target", "compose_data_converter", "connect", "resolve"]

# What the TLS settings of a profile read, for the error that names the one that cannot be read.
_TLS_FILES = {
    "client_cert": "TLS client certificate",
    "client_private_key": "TLS client key",
    "server_root_ca_cert": "TLS server CA certificate",
}


@dataclass(frozen=True)
class Target:
    """Where and how to connect, after Temporal's configuration and our settings are merged."""

    address: str
    namespace: str
    tls: bool | TLSConfig = False
    api_key: str | None = None
    rpc_metadata: Mapping[str, str] = field(default_factory=dict)
    profile: str | None = None  # the profile named by TEMPORAL_PROFILE or --profile; None for the default one

    def describe(self) -> str:
        """What was tried, in one line: address, namespace, TLS on/off, API key, profile."""
        if isinstance(self.tls, TLSConfig):
            tls = "TLS on with a client certificate" if self.tls.client_cert else "TLS on"
        else:
            tls = "TLS on" if self.tls else "TLS off"
        parts = [f"address {self.address}", f"namespace {self.namespace}", tls]
        if self.api_key:
            parts.append("an API key")
        parts.append(f"profile {self.profile}" if self.profile else "the default profile")
        return ", ".join(parts)

    def connect_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``Client.connect`` for this target."""
        kwargs: dict[str, Any] = {"namespace": self.namespace, "tls": self.tls}
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if self.rpc_metadata:
            kwargs["rpc_metadata"] = dict(self.rpc_metadata)
        return kwargs


def resolve(settings: Settings, *, environ: Mapping[str, str] | None = None) -> Target:
    """The target for ``settings``: Temporal's configuration, then our settings where given.

    Raises:
        ConfigurationError: the profile does not exist, the file does not parse, a TLS file cannot be read.
    """
    env = dict(os.environ if environ is None else environ)
    profile_name = env.get("TEMPORAL_PROFILE") or None
    try:
        profile = ClientConfigProfile.load(override_env_vars=env)
    except Exception as exc:  # the SDK's ConfigError is not importable by a public name
        raise ConfigurationError(
            f"Temporal client configuration ({_where(env, profile_name)}): {_one_line(exc)}"
        ) from exc
    given = settings.model_fields_set
    address = settings.temporal_address if "temporal_address" in given else profile.address
    namespace = settings.temporal_namespace if "temporal_namespace" in given else profile.namespace
    return Target(
        address=address or settings.temporal_address,
        namespace=namespace or settings.temporal_namespace,
        tls=_tls(profile, env, profile_name),
        api_key=profile.api_key,
        rpc_metadata=dict(profile.grpc_meta),
        profile=profile_name,
    )


async def connect(
    settings: Settings,
    *,
    plugins: Sequence[Plugin] = (),
    data_converter: DataConverter | None = None,
    local_address: str | None = None,
    **kwargs: Any,
) -> Client:
    """A connected client; ``kwargs`` go to ``Client.connect`` (``runtime``, say).

    Args:
        settings: Our settings, over Temporal's configuration.
        plugins: Client plugins (the worker's :class:`AgentToolsPlugin`).
        data_converter: Instead of the SDK's default (a plugin may replace its payload converter).
        local_address: A dev server this process started: connect there in plain text, with no key, reading
            none of Temporal's configuration (which names the deployment's server, not this one).

    Raises:
        ConfigurationError: one line naming what was tried and why it failed.
    """
    if local_address is not None:
        target = Target(address=local_address, namespace=settings.temporal_namespace)
    else:
        target = resolve(settings)
    if data_converter is not None:
        kwargs["data_converter"] = data_converter
    try:
        return await Client.connect(target.address, plugins=list(plugins), **target.connect_kwargs(), **kwargs)
    except (RuntimeError, RPCError) as exc:
        raise unreachable(target, exc) from exc


def unreachable(target: Target, exc: BaseException) -> ConfigurationError:
    """The error for a server that refused or could not be reached, with what was tried and how to fix it."""
    return ConfigurationError(
        f"cannot reach Temporal ({target.describe()}): {_one_line(exc)}. Start one with `agent-tools dev`, run "
        "with `--embedded`, or point TEMPORAL_ADDRESS (or a profile, TEMPORAL_PROFILE) at yours."
    )


def _tls(profile: ClientConfigProfile, env: Mapping[str, str], profile_name: str | None) -> bool | TLSConfig:
    """The profile's TLS with its files read now, so that a missing one is named before any connection."""
    tls = profile.tls
    if tls is None:
        return profile.api_key is not None  # the SDK's rule: an API key means TLS with the system's roots
    for attr, what in _TLS_FILES.items():
        source = getattr(tls, attr)
        if isinstance(source, Path):
            try:
                source.read_bytes()
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot read the {what} {source} ({exc.strerror}), named by {_where(env, profile_name)}"
                ) from exc
    return tls.to_connect_tls_config()


def _where(env: Mapping[str, str], profile_name: str | None) -> str:
    file = env.get("TEMPORAL_CONFIG_FILE") or "~/.config/temporalio/temporal.toml"
    return f"profile {profile_name or 'default'} of {file} and the TEMPORAL_* variables"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(getattr(exc, "message", None) or exc).split())
    text = text.split(", metadata: MetadataMap")[0]  # the core's gRPC status: the response headers say nothing
    return text[:500] or type(exc).__name__


def compose_data_converter(existing: DataConverter | None) -> DataConverter:
    """The host's data converter with pydantic's payload converter, everything else kept.

    The engine's inputs, results and state are pydantic models; the default JSON converter would hand them
    back as dicts. Codecs and the failure converter are the host's business and stay. A host that brought
    its own payload converter keeps it: it must turn pydantic models into JSON and back given the type
    hints, as ``PydanticPayloadConverter`` does (docs/extending.md).
    """
    if existing is None:
        return DataConverter(payload_converter_class=PydanticPayloadConverter)
    if existing.payload_converter_class in (DefaultPayloadConverter, PydanticPayloadConverter):
        return dataclasses.replace(existing, payload_converter_class=PydanticPayloadConverter)
    warnings.warn(
        f"AgentToolsPlugin keeps the client's payload converter {existing.payload_converter_class.__name__}; "
        "it must convert pydantic models to JSON and back (see docs/extending.md)",
        stacklevel=2,
    )
    return existing
