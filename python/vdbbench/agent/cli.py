"""`vdbbench` subcommands of the agent area."""

from __future__ import annotations


def register(subparsers) -> None:
    """Add this area's subcommands to the `vdbbench` parser."""
