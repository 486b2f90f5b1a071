"""What the command line says on stderr beside a command's own output: warnings, in one voice."""

from __future__ import annotations


def say_warning(message: str, *, markup: bool = False) -> None:
    """One "WARNING: ..." line (or paragraph) on stderr; `markup`: the message holds rich markup.

    For what a user should act on (an unknown model price, an offline fall-back), not Python's
    `warnings`, which print the source file, line and code beside the message.
    """
    from rich.console import Console
    from rich.markup import escape

    text = message if markup else escape(message)
    Console(stderr=True, soft_wrap=True).print(f"[bold yellow]WARNING[/]: {text}", highlight=False)
