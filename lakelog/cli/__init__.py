"""The `lakelog` command line (`lakelog ...`, or `python -m lakelog.cli ...`): one module per command group.

`main` (lakelog.cli.main) parses the common options and hands each command to its module: `topics` (init and
topics), `produce`, `consume`, `load`, `transactions`, `groups`, `jars`, `coordinator` (the sweep), `sql` (sql and
spark-sql-init) and `quality`. Each module has `register(commands, common, parser_class)`.
"""

from lakelog.cli.main import EXIT_BAD_INPUT, EXIT_FAILURE, main

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILURE", "main"]
