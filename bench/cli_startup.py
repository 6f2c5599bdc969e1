"""How fast the command line answers: ``agent-tools --help`` and ``agent-tools show ID``, medians of
repeated runs, each a new process.

    python bench/cli_startup.py               # 15 runs of each, interleaved
    python bench/cli_startup.py --runs 30
    python bench/cli_startup.py --baseline ../old/.venv/bin/agent-tools   # beside another install
    python bench/cli_startup.py --importtime 5   # also: what show's imports cost, by package

With ``--importtime N``, ``show`` then runs N more times per install under ``python -X importtime``: the
median self-time of each package's modules (a measure that the machine's load inflates far less evenly
than wall time, but names where the time goes).

It starts a dev server and a worker, runs one scripted session for ``show`` to print, then times the two
commands in turn (interleaved, so that the machine's load falls on both alike), and with ``--baseline``
the same commands of another install in the same rounds, with the ratio of each round. Goals: ``--help``
at most 0.3 s and ``show`` at most 0.6 s.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._processes import CLI, dev_server_and_workers, start_worker


def timed(args: list[str], env: dict[str, str], cli: str = CLI) -> float:
    start = time.perf_counter()
    subprocess.run([cli, *args], env=env, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - start


def spread(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"median {statistics.median(values):.3f} s (quartiles {q[0]:.3f}-{q[2]:.3f}, n={len(values)})"


def package(module: str) -> str:
    """Where an import's time is charged: ours and the SDK's by subpackage, others by distribution."""
    parts = module.split(".")
    depth = 3 if parts[:2] == ["agent_tools", "contracts"] else 2 if parts[0] in ("agent_tools", "temporalio") else 1
    return ".".join(parts[:depth])


def import_self_times(args: list[str], env: dict[str, str], cli: str) -> dict[str, float]:
    """Seconds of import self-time by package in one run of ``cli args``."""
    python = str(Path(cli).with_name("python"))
    run = subprocess.run(
        [python, "-X", "importtime", cli, *args], env=env, check=True, capture_output=True, text=True, timeout=120
    )
    totals: collections.Counter[str] = collections.Counter()
    for line in run.stderr.splitlines():
        found = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if found:
            totals[package(found.group(2))] += int(found.group(1)) / 1e6
    return dict(totals)


def print_import_times(runs: list[dict[str, float]], label: str, top: int = 14) -> None:
    keys = {k for r in runs for k in r}
    medians = {k: statistics.median(r.get(k, 0.0) for r in runs) for k in keys}
    total = statistics.median(sum(r.values()) for r in runs)
    print(f"{label}: import self-time of show, median of {len(runs)}: {total:.3f} s")
    for name, seconds in sorted(medians.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {seconds:.3f} s  {100 * seconds / total:4.1f}%  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--port", type=int, default=7399)
    parser.add_argument("--baseline", help="another install's agent-tools, timed in the same rounds")
    parser.add_argument("--importtime", type=int, default=0, metavar="N", help="N runs of show's import profile")
    parser.add_argument("--top", type=int, default=14, help="how many packages the import profile lists")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "AGENT_TOOLS_TEMPORAL_ADDRESS": f"127.0.0.1:{args.port}",
            "AGENT_TOOLS_DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite",
        }
        with dev_server_and_workers(args.port) as workers:
            # Each install runs its own worker and store (a store's schema is its version's), on one server.
            installs = {"ours": (CLI, env)}
            if args.baseline:
                base_env = {**env, "AGENT_TOOLS_DATABASE_URL": f"sqlite:///{tmp}/base.sqlite"}
                base_env["AGENT_TOOLS_TASK_QUEUE"] = "baseline"
                installs["baseline"] = (args.baseline, base_env)
            sessions = {}
            for name, (cli, install_env) in installs.items():
                workers.append(start_worker(install_env, cli))
                time.sleep(4)
                run = subprocess.run(
                    [cli, "run", "--yes", "plan a trip"], env=install_env, capture_output=True, text=True, timeout=300
                )
                found = re.search(r"workflows/(session-[0-9a-f-]+)", run.stdout + run.stderr)
                assert found, (run.stdout + run.stderr)[-3000:]
                sessions[name] = found.group(1)
            commands = {"--help": lambda _: ["--help"], "show ID": lambda sid: ["show", sid]}
            times: dict[str, dict[str, list[float]]] = {n: {c: [] for c in commands} for n in installs}
            for _ in range(args.runs):
                for command, argv in commands.items():
                    for name, (cli, install_env) in installs.items():
                        times[name][command].append(timed(argv(sessions[name]), install_env, cli))
            goals = {"--help": "goal <= 0.3 s", "show ID": "goal <= 0.6 s"}
            for command in commands:
                print(f"agent-tools {command:<8} {spread(times['ours'][command])}   {goals[command]}")
                if args.baseline:
                    base = times["baseline"][command]
                    ratios = [a / b for a, b in zip(times["ours"][command], base, strict=True)]
                    print(f"  baseline {command:<8} {spread(base)}   ratio {spread(ratios).replace(' s', '')}")
            profiles: dict[str, list[dict[str, float]]] = {name: [] for name in installs}
            for _ in range(args.importtime):
                for name, (cli, install_env) in installs.items():
                    profiles[name].append(import_self_times(["show", sessions[name]], install_env, cli))
            for name, runs in profiles.items():
                if runs:
                    print_import_times(runs, name, args.top)


if __name__ == "__main__":
    main()
