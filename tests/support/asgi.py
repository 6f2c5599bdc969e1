"""An ASGI app served by uvicorn on a real 127.0.0.1 socket, for tests that need a real server (httpx's
in-process transport does not stream a response)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import uvicorn


@asynccontextmanager
async def served(app: Any, *, timeout: float) -> AsyncIterator[httpx.AsyncClient]:
    """``app`` on a free port until the block ends; an HTTP client pointed at it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
        await asyncio.sleep(0.01)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=timeout) as http:
            yield http
    finally:
        server.should_exit = True
        await task
