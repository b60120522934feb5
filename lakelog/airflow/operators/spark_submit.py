"""LakelogSparkSubmitOperator: run one of lakelog's Spark jobs (or any PySpark application) with spark-submit.

    LakelogSparkSubmitOperator(
        task_id="committed_view",
        application="lakelog.pipelines.materialize_committed_view",
        application_args=["--topic", "orders"],
    )

The job gets the `lakelog` connection's root as `--root` and its storage
options in its environment (`SparkSubmitHook`, which says why this is not
apache-airflow-providers-apache-spark). lakelog's view and status jobs are
safe to retry and to run beside each other: each commits once, decided on the
snapshot it read, so a retry after a kill or a failure neither loses nor
doubles a row.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from lakelog.airflow.hooks.lakelog import DEFAULT_CONN_ID
from lakelog.airflow.hooks.spark_submit import DEFAULT_DRIVER_MEMORY, DEFAULT_MASTER, SparkSubmitHook
from lakelog.airflow.operators._errors import task_errors

logger = logging.getLogger(__name__)


class LakelogSparkSubmitOperator(BaseOperator):
    """Run `application` with spark-submit; returns (XCom) the report the job printed as a JSON line, or None.

    :param application: a module name (`lakelog.pipelines.partition_status`) or a `.py` path.
    :param application_args: the job's arguments (templated); `--root` is added from the connection.
    :param lakelog_conn_id: the `lakelog` connection naming the root; None for a job that needs none.
    :param conf: Spark properties (templated), over `hooks.spark_submit.DEFAULT_CONF`.
    :param master: Spark master URL (default `local[2]`).
    :param driver_memory: the driver's memory (default `1g`).
    :param name: the application's name in Spark (templated).
    :param env_vars: more environment variables for the job.
    :param spark_binary: the spark-submit to run (default `$SPARK_HOME/bin/spark-submit`, else pyspark's).
    """

    template_fields: Sequence[str] = ("application", "application_args", "conf", "name")
    ui_color = "#f7e8cf"

    def __init__(
        self,
        *,
        application: str,
        application_args: Sequence[str] | None = None,
        lakelog_conn_id: str | None = DEFAULT_CONN_ID,
        conf: Mapping[str, Any] | None = None,
        master: str = DEFAULT_MASTER,
        driver_memory: str = DEFAULT_DRIVER_MEMORY,
        name: str | None = None,
        env_vars: Mapping[str, str] | None = None,
        spark_binary: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.application = application
        self.application_args = list(application_args or [])
        self.lakelog_conn_id = lakelog_conn_id
        self.conf = dict(conf or {})
        self.master = master
        self.driver_memory = driver_memory
        self.name = name
        self.env_vars = dict(env_vars or {})
        self.spark_binary = spark_binary
        self._hook: SparkSubmitHook | None = None

    def execute(self, context: Any) -> dict[str, Any] | None:
        self._hook = SparkSubmitHook(
            lakelog_conn_id=self.lakelog_conn_id,
            master=self.master,
            driver_memory=self.driver_memory,
            conf=self.conf,
            name=self.name,
            env_vars=self.env_vars,
            spark_binary=self.spark_binary,
        )
        # A connection that is missing or malformed fails the task at once, in one line.
        with task_errors(f"spark-submit of {self.application}"):
            return self._hook.submit(self.application, self.application_args)

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()


__all__ = ["LakelogSparkSubmitOperator"]
