"""Run every benchmark in bench/ and print a summary of their ratio lines.

    python -m bench [--quick] [--root DIR] [--keep] [--only NAME ...]

Exit status is 0 whether targets are met or missed (they are informational);
it is 1 only if a benchmark crashes.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback

from bench import BENCHMARKS, _common


def main(argv: list[str] | None = None) -> int:
    args = _common.parser("Run lakelog's benchmarks (ratios against in-process baselines).")
    args.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these benchmarks")
    options = args.parse_args(argv)
    results = []
    crashed = []
    started = time.perf_counter()
    for name in options.only or BENCHMARKS:
        module = importlib.import_module(f"bench.{name}")
        try:
            results.append(module.run(options.quick, options.root, options.keep))
        except Exception:  # noqa: BLE001 - report and carry on with the others
            traceback.print_exc()
            crashed.append(name)
        print()
    print(f"== summary ({'quick' if options.quick else 'full'} run, {time.perf_counter() - started:.0f} s)")
    for result in results:
        for ratio in result.ratios:
            print(ratio.line())
    for name in crashed:
        print(f"{name}: CRASHED")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
