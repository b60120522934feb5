"""The command line starts without the client: `lakelog --help`, a command's `--help` and a refused command line load
no Arrow, store, client or Great Expectations module, and `import lakelog` loads its names when they are first used.

What each start-up costs is measured by bench/cli_startup.py; here only what is imported, which is what decides it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import lakelog
from lakelog.cli import coordinator, groups
from lakelog.client.admin.groups import ConsumerGroupState
from lakelog.jobs.maintenance import SWEEP_STEPS

# Modules whose import costs a user a second or more, or pulls the whole client in.
HEAVY = ("pyarrow", "deltalake", "botocore", "great_expectations", "duckdb", "pyspark", "lakelog.client", "lakelog.store")


def loaded_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter has loaded after running `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    return sorted(
        {name.split(".")[0] if not name.startswith("lakelog.") else ".".join(name.split(".")[:2]) for name in modules}
        & set(HEAVY)
    )


RUN_CLI = "import contextlib, io\nfrom lakelog.cli import main\nwith contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["topics", "create", "--help"],
        ["groups", "list", "--help"],
        ["coordinator", "sweep", "--help"],
        ["produce"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_the_command_line_parses_and_refuses_without_loading_the_client(argv):
    code = RUN_CLI + f"    try:\n        main({argv!r})\n    except SystemExit:\n        pass"
    assert loaded_after(code) == []


def test_import_lakelog_loads_its_names_when_first_used():
    assert loaded_after("import lakelog, lakelog.errors") == []
    assert "lakelog.client" in loaded_after("from lakelog import Producer")
    assert set(lakelog.__all__) == set(lakelog._HOMES) | {"libversion", "version"}  # one list of names, one map of homes
    assert set(lakelog.__all__) <= set(dir(lakelog))
    for name in lakelog.__all__:
        assert getattr(lakelog, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'Prodcer'"):
        lakelog.Prodcer  # noqa: B018


def test_the_parsers_written_out_choices_are_the_enum_s_and_the_sweep_s():
    assert groups.GROUP_STATES == tuple(dict.fromkeys(state.value.lower() for state in ConsumerGroupState))
    assert coordinator.SWEEP_STEPS == SWEEP_STEPS
