"""One local Spark session for every Spark test (a cold start costs 7-10 s), and topic histories to read."""

from __future__ import annotations


import pytest


@pytest.fixture(scope="session")
def spark():
    """A shared local[2] session, small and quiet: no UI, two shuffle partitions, 2 GiB for the driver."""
    from pyspark_lakelog import local_session

    session = local_session("lakelog-tests")
    yield session
    session.stop()
