"""Nothing reaches outside the root: every name that becomes a path is checked, and `Location.child` refuses `..`
(finding 7: `lakelog quality delete ../../outside/app-settings` deleted a file beside the root)."""

from __future__ import annotations

import pytest

from lakelog import catalog
from lakelog.cli import EXIT_BAD_INPUT, main
from lakelog.errors import CorruptRecord, InvalidArgument, InvalidConfig, InvalidTopic
from lakelog.log import open_partition
from lakelog.quality.suites import delete_suite, read_suite, suite_location, write_suite
from lakelog.store import Location, Table
from pyspark_lakelog.options import ReadOptions

ESCAPES = ("../../outside/app-settings", "..", ".", "a/b", "../x", "x/../../y", "", "a\\b")


def beside(root: str, name: str) -> Location:
    """A location in the root's parent folder (or prefix): outside the root."""
    return Location.of(root.rstrip("/").rsplit("/", 1)[0] + "/" + name)


@pytest.mark.roots("local", "s3")
def test_quality_delete_of_a_name_outside_the_root_is_refused_and_deletes_nothing(root, capsys):
    """Finding 7: the CLI's `quality delete ../../outside/app-settings` is InvalidTopic, exit 2, the file kept."""
    outside = beside(root, "outside/app-settings.json")
    outside.io.make_dirs(outside.uri.rsplit("/", 1)[0])
    outside.io.write(outside.uri, b'{"keep": true}')
    code = main(["quality", "delete", "--topic", "../../outside/app-settings", "--root", root])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and err.startswith("lakelog: TOPIC_EXCEPTION: "), err
    assert outside.io.read(outside.uri) == b'{"keep": true}'


@pytest.mark.parametrize("name", ESCAPES)
def test_every_suite_operation_refuses_a_name_that_is_no_topic(root, name):
    """Finding 7: set, show and delete check the topic name before it becomes `<root>/quality/<name>.json`."""
    with pytest.raises(InvalidTopic):
        suite_location(root, name)
    with pytest.raises(InvalidTopic):
        read_suite(root, name)
    with pytest.raises(InvalidTopic):
        delete_suite(root, name)
    with pytest.raises(InvalidTopic):
        write_suite(root, name, '{"name": "s", "expectations": []}')


@pytest.mark.parametrize("name", ESCAPES)
def test_views_and_status_tables_refuse_a_name_that_is_no_topic(root, name):
    """Finding 7: `<root>/views/<name>` and `<root>/status/<name>` are made of topic names only."""
    for path in (catalog.view_path, catalog.status_path):
        with pytest.raises(InvalidTopic):
            path(root, name)


@pytest.mark.parametrize("kind", ["view", "status"])
@pytest.mark.parametrize("name", ["../../outside", "x/../../y", "..", "a/b"])
def test_spark_view_and_status_options_refuse_a_name_that_is_no_topic(root, kind, name):
    """Finding 7: the data source's `view=` / `status=` options are checked as topic names (no Spark needed)."""
    with pytest.raises(InvalidConfig) as refused:
        ReadOptions.parse({"root": root, kind: name})
    assert refused.value.key == kind


@pytest.mark.parametrize("name", ["..", ".", "../x", "a/../b", "a//b", "x/..", "", "/"])
def test_location_child_refuses_dot_dot_dot_and_empty_segments(tmp_path, name):
    """Finding 7: no segment joined to a location climbs out of it or names the location itself."""
    location = Location.of(tmp_path)
    with pytest.raises(InvalidArgument):
        location.child(name)
    with pytest.raises(InvalidArgument):
        location / "ok" / name


def test_location_child_keeps_names_and_multi_segment_paths(tmp_path):
    location = Location.of(tmp_path)
    assert (location / "topics" / "a..b").uri == f"{location.uri}/topics/a..b"
    assert location.child("quality", "results").uri == f"{location.uri}/quality/results"
    assert (location / "a/b/c.parquet").uri == f"{location.uri}/a/b/c.parquet"
    assert (location / "a/**/*.parquet").uri == f"{location.uri}/a/**/*.parquet"
    assert (location / "/_delta_log/").uri == f"{location.uri}/_delta_log"


@pytest.mark.parametrize("path", ["../../outside/app-settings.json", "../1/part-0.parquet", "a/../../b.parquet", ""])
def test_a_table_names_no_file_outside_its_folder(root, topic, path):
    """Finding 7: a Delta path of `add` or `remove` (read, vacuumed) with a `..` segment is damage, never a path."""
    table = open_partition(root, topic(), 0).table
    with pytest.raises(CorruptRecord, match="outside its folder"):
        table.child_uri(path)
    assert table.child_uri("part-0.parquet") == f"{table.uri}/part-0.parquet"
    assert table.child_uri("_delta_log/00000000000000000000.json").startswith(table.uri + "/_delta_log/")


def test_a_table_in_a_folder_whose_name_is_no_topic_s_is_no_view(root):
    """A hand-made `<root>/views/bad name/` table is not listed, so listing and spark-sql-init still work."""
    Table.open_or_create(Location.of(root) / catalog.VIEWS_DIR / "bad name", catalog.VIEW_SCHEMA, {})
    assert catalog.list_views(root) == []
    assert "bad name" not in catalog.spark_sql_register(root)
