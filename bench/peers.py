"""The published side-by-side: the engine, a bare temporalio loop and Pydantic AI's Temporal integration
doing the same scripted work, in one interleaved run.

    pip install -e ".[bench]"          # Pydantic AI (pydantic-ai-slim[temporal]); without it: a clear skip
    python bench/peers.py              # 10 and 20 turns, one at a time and 50 concurrent, 3 rounds
    python bench/peers.py --quick      # 10 turns, 1 and 10 concurrent
    python bench/peers.py --config 10x50 --rounds 5

Every configuration runs engine, bare, Pydantic AI, engine, bare, Pydantic AI... (``--rounds`` of each,
a fresh worker process each time, as bench/overhead.py does) and prints, per figure, each loop's median
and its ratio to the bare loop's, with the per-round ratios as the spread. Same scripted model steps
(each calls the ``lookup`` tool, then one answers), same tool, same dev server.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.overhead import compile_bytecode, medians, pair_ratios, parse_config, run_config  # noqa: E402

FIGURES = [
    ("throughput", "throughput sessions/s"),
    ("latency_s", "latency per session s"),
    ("cpu_per_session_ms", "worker CPU/session ms"),
    ("rss_mb", "worker peak RSS MB"),
    ("startup_s", "start-up to 1st answer s"),
    ("history_kb", "history KB/session"),
]


def pydantic_ai_missing() -> str | None:
    """Why the Pydantic AI column cannot run, or None."""
    for module in ("pydantic_ai", "pydantic_ai.durable_exec.temporal"):
        try:
            if importlib.util.find_spec(module) is None:
                raise ImportError(module)
        except ImportError:
            return (
                f"{module} is not installed: install the bench extra (pip install -e '.[bench]') "
                "to compare with Pydantic AI's Temporal integration"
            )
    return None


async def driver(configs: list[tuple[int, int]], rounds: int, with_peer: bool) -> None:
    from agent_tools._devserver import start_dev_server

    modes = ["engine", "bare", *(["peer"] if with_peer else [])]
    compile_bytecode()
    env = await start_dev_server(ui=False, log_level="error")
    address = env.client.service_client.config.target_host
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for turns, conc in configs:
                runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
                for _ in range(rounds):
                    for mode in modes:
                        runs[mode].append(await run_config(address, mode, turns, conc, Path(tmp)))
                print_config(turns, conc, runs, rounds)
    finally:
        await env.shutdown()


def print_config(turns: int, conc: int, runs: dict[str, list[dict[str, float]]], rounds: int) -> None:
    label = "one session at a time" if conc == 1 else f"{conc} concurrent sessions"
    print(f"\n{turns} turns, {label}: medians of {rounds} interleaved rounds; ratio to the bare loop (per round)")
    bare = medians(runs["bare"])
    others = [("engine", "ours"), ("peer", "Pydantic AI")]
    header = f"  {'figure':<26}{'bare loop':>10}"
    for mode, name in others:
        if mode in runs:
            header += f"   {name:<30}"
    print(header)
    for key, label in FIGURES:
        line = f"  {label:<26}{bare[key]:>10.2f}"
        for mode, _ in others:
            if mode not in runs:
                continue
            med = medians(runs[mode])[key]
            per_round = pair_ratios(runs[mode], runs["bare"])[key]
            ratio = med / bare[key] if bare[key] else float("nan")
            spread = " ".join(f"{r:.2f}" for r in per_round)
            line += f"   {med:>8.2f} {ratio:>5.2f}x ({spread})".ljust(33)
        print(line)
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--config", action="append", help="TURNSxSESSIONS, e.g. 10x50 (repeatable)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.config:
        configs = [parse_config(parser, c) for c in args.config]
    else:
        configs = [(10, 1), (10, 10)] if args.quick else [(10, 1), (20, 1), (10, 50), (20, 50)]
    missing = pydantic_ai_missing()
    if missing:
        print(f"SKIPPED the Pydantic AI column: {missing}. Engine and bare loop only.", flush=True)
    asyncio.run(driver(configs, args.rounds, with_peer=missing is None))


if __name__ == "__main__":
    from agent_tools._process_exit import run_and_exit

    run_and_exit(main)
