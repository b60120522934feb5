"""LakelogLoadOperator's run time against `lakelog load` of the same files outside Airflow.

The operator runs inside a real Airflow 3 (`dag.test()` in this process, on a
migrated SQLite DB in a temp AIRFLOW_HOME): its time is the task instance's
duration as Airflow records it (start to end of the try), so Airflow's own
scheduling latency is left out, while its task set-up (context, templates,
XCom, the Asset event) is in. The baseline is `lakelog.jobs.load.load`, the
function behind `lakelog load`, called per file into a topic of the same
partitions, in the same process, alternating with the operator run by run, after one operator run
that is not counted (Airflow's first task in a process imports its providers).

Both sides load the same Parquet day files; the operator loads them as one
unit in one transaction (rows spread over the partitions, plus the unit's
record), the baseline file by file with expected offsets into one partition.
There is no target in the issue: the ratio is printed for information.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench import _common

FILES, ROWS = 4, 50_000
FILES_QUICK, ROWS_QUICK = 2, 5_000
RUNS, RUNS_QUICK = 3, 1

DAG_FILE = """
from datetime import datetime
from airflow.sdk import DAG
from lakelog.airflow import LakelogLoadOperator

with DAG(dag_id="bench_load", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False) as dag:
    LakelogLoadOperator(task_id="load", topic="{{ params.topic }}", source="{{ params.source }}", key_column="id",
                        params={"topic": "t", "source": "s"})
"""


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    files, rows, runs = (FILES_QUICK, ROWS_QUICK, RUNS_QUICK) if quick else (FILES, ROWS, RUNS)
    result = _common.Result("airflow_load")
    print(f"== airflow_load: {files} Parquet files of {rows:,} rows, LakelogLoadOperator (dag.test) vs lakelog load, {runs} runs")
    with _common.temp_root(root_parent, keep) as scratch:
        base = Path(scratch)
        source = base / "source"
        source.mkdir()
        for number in range(files):
            ids = [f"{number}-{i}" for i in range(rows)]
            pq.write_table(
                pa.table({"id": ids, "amount": list(range(rows)), "note": ["x" * 40] * rows}), source / f"day-{number}.parquet"
            )
        root = str(base / "lake")
        dag = _airflow_dag(base, root)
        from lakelog import AdminClient, NewTopic
        from lakelog.jobs.load import load

        # A first operator run, not counted: Airflow's first task in a process imports and discovers its providers.
        AdminClient({"lakelog.root": root}).create_topics([NewTopic("warmup", num_partitions=1)])
        _operator_run(dag, "warmup", str(source / "day-0.parquet"), runs)
        operator_s, baseline_s = [], []
        for attempt in range(runs):
            for name in (f"op{attempt}", f"cli{attempt}"):
                AdminClient({"lakelog.root": root}).create_topics([NewTopic(name, num_partitions=1)])
            began = time.perf_counter()
            for path in sorted(source.glob("*.parquet")):
                load(root, f"cli{attempt}", str(path), progress=False)
            baseline_s.append(time.perf_counter() - began)
            operator_s.append(_operator_run(dag, f"op{attempt}", str(source / "*.parquet"), attempt))
        table = [
            ("lakelog load (per file, KIP-27)", _common.median(baseline_s), files * rows / _common.median(baseline_s)),
            ("LakelogLoadOperator (one unit)", _common.median(operator_s), files * rows / _common.median(operator_s)),
        ]
        _common.print_table(("path", "median s", "rows/s"), table)
        result.add("load_operator_vs_lakelog_load", _common.median(operator_s) / _common.median(baseline_s))
    return result


def _airflow_dag(base: Path, root: str):
    """A migrated Airflow home in `base` and the benchmark's DAG, imported from its DAGs folder."""
    home = base / "airflow"
    dags = home / "dags"
    dags.mkdir(parents=True)
    (dags / "bench_load.py").write_text(DAG_FILE)
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_CONN_LAKELOG_DEFAULT": f'{{"conn_type": "lakelog", "extra": {{"root": "{root}"}}}}',
        }
    )
    airflow = str(Path(sys.executable).with_name("airflow"))
    subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True, env=os.environ)
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(str(dags)).get_dag("bench_load")


def _operator_run(dag, topic: str, source: str, attempt: int) -> float:
    from datetime import datetime

    run = dag.test(logical_date=datetime(2026, 2, 1 + attempt, tzinfo=UTC), run_conf={"topic": topic, "source": source})
    (instance,) = run.get_task_instances()
    if instance.state != "success":
        raise RuntimeError(f"the operator's run ended {instance.state}")
    return (instance.end_date - instance.start_date).total_seconds()


if __name__ == "__main__":
    options = _common.parser(__doc__.splitlines()[0]).parse_args()
    run(options.quick, options.root, options.keep)
