"""A longer chaos run, as a command: rounds of the recorded consume-transform-produce job under the
nemesis, of the in-process workload, of the storage-fault workload (store damage between
operations) and of the power-loss workload (a killed client, and what it never synced lost),
until --duration seconds have passed; each round's history is checked, and at the end
a table of anomaly counts per class and one of the storage faults injected by kind and what became
of each (survived, refused as CorruptRecord, harmed, another error) is printed. Exit status 1 if any
anomaly was found or any fault was neither survived nor refused.

    ./dev sh python tests/chaos/run.py --duration 300
    ./dev sh python tests/chaos/run.py --duration 0 --rounds storage            # one storage-fault round
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
from importlib.util import find_spec
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: tests/ holds `chaos`

from chaos.checker import check, fault_outcomes, fault_table, fault_tally, found, table  # noqa: E402
from chaos.generator import plan_transactions  # noqa: E402
from chaos.history import read_history  # noqa: E402
from chaos.job import JobChaos, run_job_chaos  # noqa: E402
from chaos.storage import run_power_loss_workload, run_storage_workload  # noqa: E402
from chaos.workload import BUGS, run_workload  # noqa: E402

ROUNDS = ("job", "workload", "storage", "power")
# The power-loss round needs the journal of tests/chaos/power_loss.py, which names descriptors through /proc.
DEFAULT_ROUNDS = [kind for kind in ROUNDS if kind != "power" or (sys.platform == "linux" and find_spec("chaos.power_loss"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=300, help="seconds of rounds (at least one of each kind)")
    parser.add_argument("--records", type=int, default=20_000, help="input records per job round")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--transactions", type=int, default=12, help="transactions per workload round")
    parser.add_argument("--plant", choices=sorted(BUGS), help="run only the workload, with this planted bug")
    parser.add_argument("--rounds", default=",".join(ROUNDS), help=f"the kinds of round to take turns, of {', '.join(ROUNDS)}")
    parser.add_argument(
        "--seed", type=int, default=int(os.environ.get("LAKELOG_TEST_SEED", random.SystemRandom().randrange(2**32)))
    )
    parser.add_argument("--keep", help="keep each round's root and history under this folder")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"chaos run: LAKELOG_TEST_SEED={args.seed}", flush=True)
    kinds = ["workload"] if args.plant else [kind.strip() for kind in args.rounds.split(",") if kind.strip()]
    if not kinds or set(kinds) - set(ROUNDS):
        parser.error(f"--rounds takes some of {', '.join(ROUNDS)}, not {args.rounds!r}")
    totals: Counter = Counter()
    rounds: Counter = Counter()
    faults: list[dict] = []
    started = time.monotonic()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="lakelog-chaos-"))
    base.mkdir(parents=True, exist_ok=True)
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
            if kind == "storage":
                injected = run_storage_workload(str(workdir / "root"), str(workdir / "history"), rng)
                line = f"storage faults: {', '.join(f'{f.kind} on {f.key}' for f in injected)}"
            elif kind == "power":
                fault = run_power_loss_workload(str(workdir / "root"), str(workdir / "history"), rng, str(workdir / "journal"))
                line = f"power loss: {fault.detail}"
            else:
                plan = plan_transactions(rng, args.transactions)
                run_workload(str(workdir / "root"), str(workdir / "history"), plan, args.plant)
                line = f"workload: {args.transactions} transactions, planted bug: {args.plant or 'none'}"
            history = read_history(workdir / "history")
        result = check(history)
        anomalies = found(result)
        totals.update(anomalies)
        judged = fault_outcomes(history, result)
        faults.extend(judged)
        if judged:
            line += "; " + ", ".join(f"{fault['kind']} {fault['outcome']}" for fault in judged)
        rounds[kind] += 1
        print(f"round {sum(rounds.values())} ({kind}): {line}; anomalies: {anomalies or 'none'}", flush=True)
        if args.plant:
            break
    print(f"{dict(rounds)} rounds in {time.monotonic() - started:.0f} s, histories under {base}")
    print(table(totals))
    if faults:
        print(fault_table(fault_tally(faults)))
    unsafe = [fault for fault in faults if fault["outcome"] not in ("survived", "refused")]
    return 1 if totals or unsafe else 0


if __name__ == "__main__":
    sys.exit(main())
