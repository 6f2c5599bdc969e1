"""Bench: many sessions streaming slowly through one service process, followed over the session routes'
event stream (``GET /sessions/{id}/events``) and over AG-UI (``POST /agui``).

    python bench/sse_streams.py --streams 1,10,20,30,40,60 --rounds 2 [--routes sse,agui] [--profile 30]

Everything runs on this machine, each part a process of its own: the Temporal dev server, one worker, the
service (``agent-tools serve``) and a model: an OpenAI-compatible server that streams ``--words`` words,
``--pace`` seconds apart, each word carrying the wall-clock time it was written (``w3@1764772800.1234``). So
the bench, reading the HTTP stream in its own process, knows for each text delta when the newest word in
it left the model:

* **first token**: from the first word's emission to the first text delta the HTTP client reads, p50/p95
  over the streams of a phase;
* **words**: the share of the reply's words the client saw, the last ones from the step's
  ``assistant_message`` (the publisher sends no delta for them);
* **lag**: for every delta, from its newest word's emission to its arrival (the text is batched on the
  way: the publisher's interval grows to a tenth of the reply's age), p50/p95, and the last word's lag;
* **keeps up**: a phase keeps up when its p95 lag stays under ``--keep-up`` seconds.

The reference, interleaved round by round: the same number of clients reading the model's stream
straight (no Temporal, no service), which says how loaded the machine was. ``--profile N`` records the
service process with py-spy during the phases of N streams (``py-spy`` on PATH or beside the Python).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._processes import cpu_seconds  # noqa: E402 - after the path

KEY = "bench-key-0123456789abcdef"
_STAMP = re.compile(r"@(\d+\.\d+)")


# The model: an OpenAI chat-completions server whose words say when they were written.


def serve_model(port: int, words: int, pace: float) -> None:
    """Serve until killed; each streamed reply is ``words`` words, ``pace`` seconds apart."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            usage = {"prompt_tokens": 10, "completion_tokens": words, "total_tokens": 10 + words}
            if not body.get("stream"):
                reply = {
                    "id": "c1", "object": "chat.completion", "model": "m", "usage": usage,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                }  # fmt: skip
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            for i in range(words):
                self._chunk({"choices": [{"index": 0, "delta": {"content": f" w{i}@{time.time():.4f}"}}]})
                time.sleep(pace)
            self._chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            self._chunk({"choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _chunk(self, data: dict[str, Any]) -> None:
            self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

    class Server(ThreadingHTTPServer):
        request_queue_size = 1024  # the default backlog of 5 resets connections of a burst
        daemon_threads = True

    server = Server(("127.0.0.1", port), Handler)
    server.serve_forever()


# The parts, as processes.


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s")


def _bin(name: str) -> str:
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else (shutil.which(name) or name)


class Stack:
    """Dev server, worker, model and service; stopped in reverse order."""

    def __init__(self, temporal: str, words: int, pace: float, tmp: Path, poll: float, baseline: str) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.model_port, self.service_port = free_port(), free_port()
        quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        me = [sys.executable, __file__, "--serve-model", str(self.model_port), "--words", str(words)]
        self.procs.append(subprocess.Popen([*me, "--pace", str(pace)], **quiet))
        wait_for_port(self.model_port)
        self.env = {
            **os.environ,
            "AGENT_TOOLS_TEMPORAL_ADDRESS": temporal,
            "AGENT_TOOLS_TASK_QUEUE": f"bench-sse-{uuid.uuid4().hex[:8]}",
            "AGENT_TOOLS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp}/store.sqlite",
            "AGENT_TOOLS_MODEL": "openai:gpt-4.1-mini",
            "AGENT_TOOLS_OPENAI_API_KEY": "sk-bench",
            "AGENT_TOOLS_OPENAI_BASE_URL": f"http://127.0.0.1:{self.model_port}/v1",
            "AGENT_TOOLS_WEB__SEARCH_ENGINES": "[]",
            "AGENT_TOOLS_AGENTS_FILE": "",
            "AGENT_TOOLS_SERVICE__API_KEYS": json.dumps([{"key": KEY, "name": "bench"}]),
            "AGENT_TOOLS_SERVICE__POLL_SECONDS": str(poll),
        }
        self.worker = subprocess.Popen([_bin("agent-tools"), "worker"], env=self.env, **quiet)
        self.procs.append(self.worker)
        # Our service, and the baseline's (another install's, on the same server and worker) if given.
        self.services: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
        for name, cli in (("ours", _bin("agent-tools")), ("base", baseline)):
            if not cli:
                continue
            port = free_port()
            proc = subprocess.Popen(
                [cli, "serve", "--port", str(port), "--log-level", "warning"], env=self.env, **quiet
            )
            self.procs.append(proc)
            self.services[name] = (proc, port)
        for _, port in self.services.values():
            wait_for_port(port)
        self.service, self.service_port = self.services["ours"]

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


# One stream, read by the bench.


class Read:
    def __init__(self) -> None:
        self.first: float | None = None  # first delta's arrival minus its first word's emission
        self.lags: list[float] = []  # each delta: arrival minus its newest word's emission
        self.words = 0
        self.finished = False
        self.outcome = "no end"  # how the stream ended, when not as expected
        self.error: str | None = None

    def delta(self, text: str) -> None:
        now = time.time()
        stamps = [float(s) for s in _STAMP.findall(text)]
        if not stamps:
            return
        if self.first is None:
            self.first = now - stamps[0]
        self.lags.append(now - stamps[-1])
        self.words += len(stamps)

    def complete(self, text: str) -> None:
        """The step's whole text: its words past the deltas' arrive now (the last deltas are not sent)."""
        tail = _STAMP.findall(text)[self.words :]
        if tail:
            self.delta(" ".join(f"@{s}" for s in tail))


async def _lines(resp: httpx.Response) -> Any:
    async for line in resp.aiter_lines():
        yield line


async def read_sse(http: httpx.AsyncClient, read: Read) -> None:
    started = await http.post("/sessions", json={"prompt": "stream please"}, headers=_auth())
    sid = started.json()["session_id"]
    async with http.stream("GET", f"/sessions/{sid}/events", headers=_auth()) as resp:
        resp.raise_for_status()
        event = "message"
        async for line in _lines(resp):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data = json.loads(line[5:])
                if event == "end":
                    read.finished = data.get("status") == "COMPLETED"
                    read.outcome = f"end {data.get('status')}"
                    return
                if event == "error":
                    read.error = str(data)
                    return
                if data.get("kind") == "text_delta":
                    read.delta(str(data["data"].get("text", "")))
                elif data.get("kind") == "assistant_message":
                    read.complete(str(data["data"].get("content", "")))
            elif line == "":
                event = "message"


async def read_agui(http: httpx.AsyncClient, read: Read) -> None:
    thread = f"bench-{uuid.uuid4().hex[:12]}"
    body = {
        "threadId": thread, "runId": "r1", "state": {}, "tools": [], "context": [], "forwardedProps": {},
        "messages": [{"id": "u1", "role": "user", "content": "stream please"}],
    }  # fmt: skip
    async with http.stream("POST", "/agui", json=body, headers=_auth()) as resp:
        resp.raise_for_status()
        async for line in _lines(resp):
            if not line.startswith("data:"):
                continue
            data = json.loads(line[5:])
            if data["type"] == "TEXT_MESSAGE_CONTENT":
                read.delta(str(data["delta"]))
            elif data["type"] == "RUN_FINISHED":
                read.finished = data.get("result", {}).get("status") == "COMPLETED"
                read.outcome = f"RUN_FINISHED {data.get('result', {}).get('status')}"
                return
            elif data["type"] == "RUN_ERROR":
                read.error = f"RUN_ERROR {data.get('code')}: {data.get('message')}"
                return


async def read_model(http: httpx.AsyncClient, read: Read) -> None:
    """The reference: the model's stream read straight."""
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "stream please"}]}
    async with http.stream("POST", "/v1/chat/completions", json=body) as resp:
        async for line in _lines(resp):
            if line.startswith("data:") and line != "data: [DONE]":
                for choice in json.loads(line[5:]).get("choices", []):
                    read.delta(str(choice.get("delta", {}).get("content") or ""))
        read.finished = True


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}"}


async def phase(base: str, route: str, n: int, timeout: float) -> list[Read]:
    reader = {"sse": read_sse, "agui": read_agui, "model": read_model}[route]
    limits = httpx.Limits(max_connections=n * 2 + 10, max_keepalive_connections=n * 2 + 10)
    async with httpx.AsyncClient(base_url=base, timeout=timeout, limits=limits) as http:
        reads = [Read() for _ in range(n)]

        async def one(read: Read) -> None:
            try:
                await asyncio.wait_for(reader(http, read), timeout)
            except Exception as exc:
                read.error = f"{type(exc).__name__}: {exc}"[:300]

        await asyncio.gather(*(one(r) for r in reads))
    return reads


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(reads: list[Read], words: int) -> dict[str, Any]:
    firsts = [r.first for r in reads if r.first is not None]
    lags = [lag for r in reads for lag in r.lags]
    lasts = [r.lags[-1] for r in reads if r.lags]
    errors = [r.error or r.outcome for r in reads if r.error or not r.finished]
    return {
        "first_p50": pct(firsts, 0.5),
        "first_p95": pct(firsts, 0.95),
        "lag_p50": pct(lags, 0.5),
        "lag_p95": pct(lags, 0.95),
        "last_p50": pct(lasts, 0.5),
        "finished": sum(r.finished for r in reads),
        "errors": errors,
        "words_seen": statistics.mean([r.words / words for r in reads]) if reads else 0.0,
    }


def temporal_pid() -> int:
    """The dev server this process started (a child named temporal)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, rest = text[text.index("(") + 1 : text.rindex(")")], text.rpartition(")")[2].split()
        if name == "temporal" and int(rest[1]) == os.getpid():
            return int(stat.parent.name)
    return 0


def _ms(v: float) -> str:
    return "-" if v != v else f"{v * 1000:.0f}"


def _profile(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    spy = _bin("py-spy")
    if not Path(spy).exists() and shutil.which(spy) is None:
        print("(py-spy not found: no profile)")
        return None
    cmd = [spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-f", "raw", "-o", str(out), "-s"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", default="1,10,20,30,40,60")
    ap.add_argument("--routes", default="sse,agui")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--words", type=int, default=40)
    ap.add_argument("--pace", type=float, default=0.25, help="seconds between the model's words")
    ap.add_argument("--keep-up", type=float, default=1.0, help="p95 lag (s) under which a phase keeps up")
    ap.add_argument("--baseline", default="", help="another install's agent-tools: its service, interleaved")
    ap.add_argument("--poll", type=float, default=0.1, help="the service's poll_seconds")
    ap.add_argument("--profile", type=int, default=0, help="record the service with py-spy at this many streams")
    ap.add_argument("--serve-model", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_model:
        serve_model(args.serve_model, args.words, args.pace)
        return
    counts = [int(n) for n in args.streams.split(",")]
    routes = [f"{r}@{w}" for r in args.routes.split(",") for w in (("ours", "base") if args.baseline else ("ours",))]
    timeout = args.words * args.pace * 6 + 60
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    from agent_tools._devserver import start_dev_server

    env = await start_dev_server(ui=False)
    with tempfile.TemporaryDirectory(prefix="bench-sse-") as tmp:
        target = env.client.service_client.config.target_host
        stack = Stack(target, args.words, args.pace, Path(tmp), args.poll, args.baseline)
        try:
            model = f"http://127.0.0.1:{stack.model_port}"
            temporal = temporal_pid()
            for _, port in stack.services.values():  # warm: the worker's first workflows, the service's client
                await phase(f"http://127.0.0.1:{port}", "sse", 2, timeout)
            for rnd in range(args.rounds):
                for n in counts:
                    for route in ["model", *routes]:
                        kind, _, which = route.partition("@")
                        proc, port = stack.services[which or "ours"]
                        base = f"http://127.0.0.1:{port}"
                        spy = None
                        if args.profile == n and route != "model":
                            spy = _profile(proc.pid, args.words * args.pace + 5, Path(tmp) / f"{route}-{n}-{rnd}.txt")
                        pids = {"service": proc.pid, "worker": stack.worker.pid, "temporal": temporal}
                        before = {k: cpu_seconds(p, children=True) for k, p in pids.items()}
                        began = time.monotonic()
                        reads = await phase(model if route == "model" else base, kind, n, timeout)
                        took = time.monotonic() - began
                        used = {k: cpu_seconds(p, children=True) - before[k] for k, p in pids.items()}
                        if spy is not None:
                            spy.wait(timeout=120)
                            dest = (
                                Path(tempfile.gettempdir()) / f"sse_streams-{route.replace('@', '-')}-{n}-{rnd}.folded"
                            )
                            shutil.copy(Path(tmp) / f"{route}-{n}-{rnd}.txt", dest)
                            print(f"(profile of the service: {dest})")
                        s = summary(reads, args.words)
                        s.update({f"cpu_{k}": v / took for k, v in used.items()})
                        results.setdefault((route, n), []).append(s)
                        load = os.getloadavg()[0]
                        print(
                            f"round {rnd + 1} {route:9} {n:3} streams: first token p50 {_ms(s['first_p50'])} ms "
                            f"p95 {_ms(s['first_p95'])} ms | lag p50 {_ms(s['lag_p50'])} p95 {_ms(s['lag_p95'])} "
                            f"last {_ms(s['last_p50'])} ms | finished {s['finished']}/{n} "
                            f"words {s['words_seen']:.0%} errors {len(s['errors'])} | load {load:.1f}",
                            flush=True,
                        )
                        if route != "model":
                            print(
                                "    CPU (cores busy over the phase): "
                                + ", ".join(f"{k} {s[f'cpu_{k}']:.2f}" for k in pids)
                                + f"; service per stream {s['cpu_service'] / n * 1000:.0f} ms/s"
                            )
                        for error, count in Counter(s["errors"]).most_common():
                            print(f"    {count} x {error}")
        finally:
            stack.stop()
            await env.shutdown()
    print("\nmedian of the rounds (spread in brackets); keeps up: p95 lag under", f"{args.keep_up:g} s")
    for route in ["model", *routes]:
        kept, broken = 0, False
        for n in counts:
            rows = results.get((route, n), [])

            def med(k: str, rows: list[dict[str, Any]] = rows) -> str:
                vals = [r[k] for r in rows if r[k] == r[k]]
                if not vals:
                    return "-"
                return f"{_ms(statistics.median(vals))} [{_ms(min(vals))}-{_ms(max(vals))}]"

            keeps = bool(rows) and all(r["lag_p95"] < args.keep_up and r["finished"] == n for r in rows)
            broken = broken or not keeps
            kept = n if not broken else kept
            print(
                f"{route:9} {n:3}: first token p50 {med('first_p50')} p95 {med('first_p95')} ms; "
                f"lag p50 {med('lag_p50')} p95 {med('lag_p95')} ms; keeps up: {'yes' if keeps else 'no'}"
            )
            if route != "model" and rows:
                cores = statistics.median([r["cpu_service"] for r in rows])
                print(f"        service CPU {cores:.2f} cores, {cores / n * 1000:.0f} ms per stream-second")
        print(f"{route:9}: keeps up through {kept} streams")


if __name__ == "__main__":
    asyncio.run(main())
