"""The command line's start-up, and a quality-gated produce beside an ungated one, each a fresh `lakelog` process.

Every row is a real command run as a user runs it (the installed `lakelog` entry point, in this interpreter's
environment), rounds alternating so machine load hits the sides alike; p50 of the rounds:

- `python -c pass`: the interpreter alone, the floor every command pays;
- `lakelog --help` (target 0.3 s) and `lakelog topics list` (a small command that opens a root);
- `lakelog produce` of one message to an ungated topic, and to a topic with a two-expectation suite (`enforce`):
  the gated one validates the message with Great Expectations, whose import every fresh process pays.
  Targets: gated/ungated <= 2, and a gated produce within 3 s;
- GX's import as lakelog makes it (lakelog.quality.gx_import) against a plain `import great_expectations`, each
  in a fresh interpreter: the peer for what the gated produce pays on top.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence

from bench import _common

ROUNDS, ROUNDS_QUICK = 5, 2
HELP_TARGET_S = 0.3
GATED_TARGET_S = 3.0
GATED_RATIO_TARGET = 2.0
SUITE = {
    "name": "orders",
    "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "key"}},
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "value.amount_cents", "min_value": 0}},
    ],
}
MESSAGE = json.dumps({"key": "c1", "value": {"amount_cents": 200}}) + "\n"


def _lakelog() -> list[str]:
    found = shutil.which("lakelog", path=os.path.dirname(sys.executable)) or shutil.which("lakelog")
    return [found] if found else [sys.executable, "-m", "lakelog.cli"]


def _timed(argv: Sequence[str], stdin: str | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return seconds


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    rounds = ROUNDS_QUICK if quick else ROUNDS
    with _common.session(
        "cli_startup",
        f"fresh lakelog processes: --help, a small command, a produce ungated and gated; GX's import; p50 of {rounds}",
        root_parent,
        keep,
    ) as (result, root):
        lakelog = _lakelog()
        _timed([*lakelog, "init", "--root", root])
        for topic in ("plain", "orders"):
            _timed([*lakelog, "topics", "create", "--topic", topic, "--root", root])
        suite = os.path.join(root, "orders.json")
        with open(suite, "w") as handle:
            json.dump(SUITE, handle)
        quality_set = _timed(
            [*lakelog, "quality", "set", "--topic", "orders", "--suite", suite, "--mode", "enforce", "--root", root]
        )
        print(f"quality set (validates the suite with GX, once): {quality_set:.2f} s")
        sides = {
            "python -c pass": lambda: _timed([sys.executable, "-c", "pass"]),
            "lakelog --help": lambda: _timed([*lakelog, "--help"]),
            "lakelog topics list": lambda: _timed([*lakelog, "topics", "list", "--root", root]),
            "produce, ungated": lambda: _timed([*lakelog, "produce", "--topic", "plain", "--root", root], MESSAGE),
            "produce, gated": lambda: _timed([*lakelog, "produce", "--topic", "orders", "--root", root], MESSAGE),
            "import great_expectations": lambda: _timed([sys.executable, "-c", "import lakelog.store, great_expectations"]),
            "GX as lakelog imports it": lambda: _timed(
                [
                    sys.executable,
                    "-c",
                    "import lakelog.store; from lakelog.quality.gx_import import import_great_expectations as i; i()",
                ]
            ),
        }
        seconds: dict[str, list[float]] = {name: [] for name in sides}
        for n in range(rounds):
            for name in sides if n % 2 == 0 else reversed(list(sides)):
                seconds[name].append(sides[name]())
        p50 = {name: _common.median(values) for name, values in seconds.items()}
        _common.print_table(
            ["command (a fresh process)", "p50 s", "min s", "max s"],
            [(name, f"{p50[name]:.2f}", f"{min(seconds[name]):.2f}", f"{max(seconds[name]):.2f}") for name in sides],
        )
        floor = p50["python -c pass"]
        result.add("cli_startup lakelog --help / python -c pass", p50["lakelog --help"] / floor)
        result.add("cli_startup lakelog --help seconds", p50["lakelog --help"], HELP_TARGET_S)
        result.add("cli_startup produce gated/ungated", p50["produce, gated"] / p50["produce, ungated"], GATED_RATIO_TARGET)
        result.add("cli_startup produce gated seconds", p50["produce, gated"], GATED_TARGET_S)
        result.add("cli_startup GX import lakelog's/plain", p50["GX as lakelog imports it"] / p50["import great_expectations"])
    return result


if __name__ == "__main__":
    _common.cli(run, __doc__)
