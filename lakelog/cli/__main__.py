"""`python -m lakelog.cli ...`: the `lakelog` command."""

import sys

from lakelog.cli.main import main

sys.exit(main())
