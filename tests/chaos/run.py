"""A longer chaos run, as a command: rounds of the recorded consume-transform-produce job under the
nemesis, and of the in-process workload, until --duration seconds have passed; each round's history
is checked, and a table of anomaly counts per class is printed at the end. Exit status 1 if any
anomaly was found.

    ./dev sh python tests/chaos/run.py --duration 300
    ./dev sh python tests/chaos/run.py --duration 0 --plant seek-forward   # a test-only build: finds poll-skip

$LAKELOG_TEST_SEED (or --seed) replays a run.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: tests/ holds `chaos`

from chaos.checker import check, found, table  # noqa: E402
from chaos.generator import plan_transactions  # noqa: E402
from chaos.history import read_history  # noqa: E402
from chaos.job import JobChaos, run_job_chaos  # noqa: E402
from chaos.workload import BUGS, run_workload  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=300, help="seconds of rounds (at least one of each kind)")
    parser.add_argument("--records", type=int, default=20_000, help="input records per job round")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--transactions", type=int, default=12, help="transactions per workload round")
    parser.add_argument("--plant", choices=sorted(BUGS), help="run only the workload, with this planted bug")
    parser.add_argument(
        "--seed", type=int, default=int(os.environ.get("LAKELOG_TEST_SEED", random.SystemRandom().randrange(2**32)))
    )
    parser.add_argument("--keep", help="keep each round's root and history under this folder")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"chaos run: LAKELOG_TEST_SEED={args.seed}", flush=True)
    totals: Counter = Counter()
    rounds: Counter = Counter()
    started = time.monotonic()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="lakelog-chaos-"))
    base.mkdir(parents=True, exist_ok=True)
    kinds = ["workload"] if args.plant else ["job", "workload"]
    while not rounds or time.monotonic() - started < args.duration or any(rounds[kind] == 0 for kind in kinds):
        kind = kinds[sum(rounds.values()) % len(kinds)]
        workdir = base / f"{kind}-{rounds[kind]}"
        workdir.mkdir()
        if kind == "job":
            run = run_job_chaos(workdir, rng, JobChaos(records=args.records, workers=args.workers, batch_records=500))
            history, line = run.history, run.summary()
        else:
            (workdir / "root").mkdir()
            (workdir / "history").mkdir()
            run_workload(str(workdir / "root"), str(workdir / "history"), plan_transactions(rng, args.transactions), args.plant)
            history = read_history(workdir / "history")
            line = f"workload: {args.transactions} transactions, planted bug: {args.plant or 'none'}"
        anomalies = found(check(history))
        totals.update(anomalies)
        rounds[kind] += 1
        print(f"round {sum(rounds.values())} ({kind}): {line}; anomalies: {anomalies or 'none'}", flush=True)
        if args.plant:
            break
    print(f"{dict(rounds)} rounds in {time.monotonic() - started:.0f} s, histories under {base}")
    print(table(totals))
    return 1 if totals else 0


if __name__ == "__main__":
    sys.exit(main())
