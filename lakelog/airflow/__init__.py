"""lakelog's Airflow provider: a `lakelog` connection, its hook, operators, a sensor and topic Assets.

    from lakelog.airflow import LakelogLoadOperator
    load = LakelogLoadOperator(task_id="load", topic="orders", source="/landing/{{ ds }}/*.parquet")

Registered with Airflow through the `apache_airflow_provider` entry point
(`lakelog.airflow.get_provider_info`). Names are imported on first use, so
`import lakelog.airflow` does not import Airflow.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LakelogHook": "lakelog.airflow.hooks.lakelog",
    "LakelogConnection": "lakelog.airflow.hooks.lakelog",
    "DEFAULT_CONN_ID": "lakelog.airflow.hooks.lakelog",
    "SparkSubmitHook": "lakelog.airflow.hooks.spark_submit",
    "LakelogLoadOperator": "lakelog.airflow.operators.load",
    "LakelogTransformOperator": "lakelog.airflow.operators.transform",
    "LakelogSweepOperator": "lakelog.airflow.operators.sweep",
    "LakelogSinkOperator": "lakelog.airflow.operators.sink",
    "LakelogSparkSubmitOperator": "lakelog.airflow.operators.spark_submit",
    "LakelogCommittedSensor": "lakelog.airflow.sensors.committed",
    "LakelogCommittedTrigger": "lakelog.airflow.triggers.committed",
    "topic_asset": "lakelog.airflow.assets",
    "topic_asset_uri": "lakelog.airflow.assets",
    "get_provider_info": "lakelog.airflow.get_provider_info",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lakelog.airflow' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(_EXPORTS)


__all__ = sorted(_EXPORTS)
