"""A sink in a process of its own, SIGKILLed by itself at a named step (the kill tests): argv is a JSON spec."""

from __future__ import annotations

import json
import os
import signal
import sys

from lakelog.jobs.database.columns import parse_columns
from lakelog.jobs.database.sink import run_sink


def main() -> None:
    spec = json.loads(sys.argv[1])
    if spec["kind"] == "postgres":
        from lakelog.jobs.database.postgres import PostgresTarget

        target = PostgresTarget(spec["dsn"], spec["table"])
    else:
        from lakelog.jobs.database.duckdb_target import DuckdbTarget

        target = DuckdbTarget(spec["dsn"], spec["table"])
    seen = {"n": 0}

    def step(name: str) -> None:
        if name == spec.get("kill_at"):
            seen["n"] += 1
            if seen["n"] == spec.get("kill_on", 1):
                os.kill(os.getpid(), signal.SIGKILL)

    result = run_sink(
        spec["root"], spec["topic"], target, name=spec["name"], columns=parse_columns(spec["columns"]),
        mode=spec["mode"], key=spec.get("key", []), offset_columns=True, batch_records=spec["batch"], step=step,
    )  # fmt: skip
    print(json.dumps({"rows": result.rows, "positions": result.positions, "epoch": result.epoch}))


if __name__ == "__main__":
    main()
