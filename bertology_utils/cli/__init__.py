"""The ``bertology`` command: ``main`` parses and dispatches, one module per subcommand."""

from bertology_utils.cli.main import main

__all__ = ["main"]
