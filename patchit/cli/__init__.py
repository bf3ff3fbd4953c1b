"""The `patchit` command line: each command parses options, calls the library, prints."""

from patchit.cli.main import cli, main

__all__ = ["cli", "main"]
