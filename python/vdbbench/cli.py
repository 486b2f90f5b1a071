"""The `vdbbench` command: each area registers its own subcommands here."""

from __future__ import annotations

import argparse
import sys
import warnings
from importlib import import_module

# The area CLIs import UsageError from here; it lives on the floor (vdbbench.common), so
# lower layers can raise it without importing the command line.
from vdbbench.common.console import say_warning
from vdbbench.common.errors import UsageError

# Each module named here exposes `register(subparsers)`; the handler it sets with
# `set_defaults(func=...)` returns the process exit code (0 ok, 1 target missed, 2 bad usage).
_AREAS = (
    "vdbbench.bench.cli",
    "vdbbench.datasets.cli",
    "vdbbench.served.serve_cli",
    "vdbbench.agent.cli",
    "vdbbench.pages.cli",
)


def build_parser() -> argparse.ArgumentParser:
    from vdbbench import __version__

    parser = argparse.ArgumentParser(
        prog="vdbbench",
        description="Benchmark and optimize the vdbbench IVF engine against its peers.",
    )
    parser.add_argument("--version", action="version", version=f"vdbbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for area in _AREAS:
        import_module(area).register(sub)
    return parser


def _say_python_warnings_once():
    """A `warnings.showwarning` for a command's run: each Python warning raised under it (a
    library's, or one of ours that slipped through) said once, as the command's own warning line,
    not as `file.py:123: UserWarning` and the source line. The filters still decide what shows."""
    said: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if str(message) not in said:
            said.add(str(message))
            say_warning(str(message))

    return show


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _say_python_warnings_once()
            return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"vdbbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
