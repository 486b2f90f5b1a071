"""Warnings from the command line: said once, as a `WARNING: ...` line on stderr, never as a Python
warning with its file, line number and source line (an unknown model price: test_agent_budget)."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import vdbbench.bench.cli as bench_cli
from vdbbench.cli import main

PKG = Path(__file__).resolve().parents[1] / "python" / "vdbbench"


def test_a_python_warning_under_a_command_is_one_line_in_the_cli_voice(monkeypatch, capsys):
    def noisy(args):
        for _ in range(3):
            warnings.warn("the library says [something] odd", UserWarning)
        warnings.warn("the library says [something] odd", RuntimeWarning)  # elsewhere, same text
        return 0

    monkeypatch.setattr(bench_cli, "cmd_compare", noisy)  # bound when the parser is built
    python_display = warnings.showwarning
    assert main(["compare", "a.json", "b.json"]) == 0
    err = capsys.readouterr().err
    assert err == "WARNING: the library says [something] odd\n"
    assert warnings.showwarning is python_display  # put back after the command


def test_the_package_raises_no_python_warnings():
    """Messages for users go through vdbbench.common.say_warning, not warnings.warn."""
    calls = [
        f"{path.relative_to(PKG)}:{node.lineno}"
        for path in PKG.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "warn"
        and isinstance(node.func.value, ast.Name) and node.func.value.id == "warnings"
    ]
    assert calls == []
