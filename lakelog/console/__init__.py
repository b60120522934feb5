"""lakelog's web console: one root at a glance in a browser (`lakelog console`, docs/console.md).

An entry point like the command line: it reads through the client layer's Admin API (lakelog.console.state) and
acts through it (app's actions), and holds no state of its own.
"""

from __future__ import annotations
