"""The worker's probe endpoint with hostile requests: NUL and non-UTF-8 bytes, a huge request line, a flood of
headers, other methods and paths. Each gets a clear 4xx (a flood of headers is cut, not read), and the server
goes on answering probes."""

from __future__ import annotations

import asyncio

from agent_tools._health import Health, serving


async def _raw(host: str, port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


async def test_what_is_not_a_probe_is_refused_and_the_server_goes_on() -> None:
    async with serving("127.0.0.1:0", Health()) as (host, port):
        assert (await _raw(host, port, b"GET /nope HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        assert (await _raw(host, port, b"POST /healthz HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert (await _raw(host, port, b"\x00\xff garbage\r\n\r\n")).startswith(b"HTTP/1.1 400")
        assert (await _raw(host, port, b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 431")
        assert (await _raw(host, port, b"GET /healthz HTTP/1.1\r\n" + b"X: y\r\n" * 10_000 + b"\r\n")).startswith(
            b"HTTP/1.1 200"
        )
        assert (await _raw(host, port, b"GET /healthz HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 200")
