"""A real HTTP server on 127.0.0.1 that speaks OpenAI's ``POST /v1/embeddings`` wire format, for the memory
tests and bench/memory_recall.py (no model is downloaded: the vectors are computed, not learned).

:func:`embed_text` is a bag of concepts: each word maps to a concept (a few synonyms share one, see
``SYNONYMS``), each concept to a fixed pseudo-random unit vector, and a text to the sum of its words' concept
vectors. So "car" is near "Alice drives an automobile" and far from "the coffee machine", which is what a
semantic recall test needs, and the server can answer thousands of texts a second.

``server.mode`` makes it hostile for the hostile-input suite: ``status500``, ``not_json``, ``nan``,
``wrong_count``, ``strings``, ``huge``, ``zero``, ``nested``, ``flood``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

DIMENSIONS = 256
SYNONYMS = {
    "car": "vehicle",
    "cars": "vehicle",
    "automobile": "vehicle",
    "vehicle": "vehicle",
    "auto": "vehicle",
    "coffee": "drink",
    "espresso": "drink",
    "tea": "drink",
    "invoice": "billing",
    "invoices": "billing",
    "billing": "billing",
    "bill": "billing",
    "payment": "billing",
}
_WORD = re.compile(r"\w+")
_cache: dict[str, np.ndarray[Any, Any]] = {}


def _concept(name: str, dimensions: int) -> np.ndarray[Any, Any]:
    key = f"{dimensions}/{name}"
    vector = _cache.get(key)
    if vector is None:
        seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
        vector = np.random.default_rng(seed).standard_normal(dimensions)
        vector /= np.linalg.norm(vector)
        _cache[key] = vector
    return vector


def embed_text(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    words = _WORD.findall(text.casefold()) or ["empty"]
    total = sum((_concept(SYNONYMS.get(w, w), dimensions) for w in words), np.zeros(dimensions))
    return [float(x) for x in total]


class EmbeddingsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = "ok"
        self.requests: list[dict[str, Any]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: EmbeddingsServer
    protocol_version = "HTTP/1.1"  # keep-alive, as a real endpoint behind a pooled client
    # Headers and body go out as two writes; with Nagle on, the body waits for the client's delayed ACK of
    # the headers (40 ms per request on Linux), which would be the bench's, not the engine's, latency.
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        if self.path != "/v1/embeddings":
            return self._send(404, b'{"error": "not found"}')
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = int(body.get("dimensions") or DIMENSIONS)
        mode = self.server.mode
        if mode == "status500":
            return self._send(500, b'{"error": {"message": "overloaded"}}')
        if mode == "not_json":
            return self._send(200, b"<html>surprise</html>")
        vectors: list[Any] = [embed_text(t, dims) for t in texts]
        if mode == "nan":
            vectors = [[float("nan")] * dims for _ in texts]
        elif mode == "wrong_count":
            vectors = vectors + vectors
        elif mode == "strings":
            vectors = [["0.1"] * dims for _ in texts]
        elif mode == "huge":
            vectors = [[0.5] * 5000 for _ in texts]
        elif mode == "zero":
            vectors = [[0.0] * dims for _ in texts]
        elif mode == "flood":
            vectors = [[0.5] * 300_000 for _ in texts]
        elif mode == "nested":
            vectors = [{"values": v} for v in vectors]
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        payload = {"object": "list", "data": data, "model": body.get("model"), "usage": {"prompt_tokens": 1}}
        # allow_nan: Python's json writes NaN literals, as a careless server would.
        self._send(200, json.dumps(payload, allow_nan=True).encode())

    def _send(self, status: int, raw: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@contextmanager
def embeddings_server() -> Iterator[EmbeddingsServer]:
    server = EmbeddingsServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    """Serve until killed, printing the base URL first (bench/memory_recall.py runs it in its own process,
    as a real endpoint would be)."""
    server = EmbeddingsServer()
    print(server.base_url, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
