"""What the tools and the startup steps may use of a session (a Protocol, so that neither imports
the loop), and the small values they share with it: the best version and the start-up error."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from vdbbench.agent.core.facts import Facts
    from vdbbench.agent.core.journal import Journal
    from vdbbench.agent.core.task import TaskCard
    from vdbbench.agent.core.workspace import BuildResult, TestResult
    from vdbbench.agent.evaluation.evaluator import Evaluator
    from vdbbench.agent.session.machine import Machine


class SessionError(RuntimeError):
    """The session cannot start or resume (the start version does not build, no journal...)."""


@dataclass
class Best:
    """The best version so far: its commit on the session branch and its held-out figures."""

    commit: str
    qps: float | None
    recall10: float | None


class SessionApi(Protocol):
    """The session as its tools and start-up steps see it (vdbbench.agent.session.loop.Session)."""

    card: "TaskCard"
    run_dir: Path
    ws: Path  # the workspace: the session's own git repository
    builds: Path  # builds/current (the working copy), builds/best
    target: Path  # the session's cargo target folder
    journal: "Journal"
    evaluator: "Evaluator | None"
    machine: "Machine"
    best: Best
    last_profile: str | None  # the last `profile` text, quoted by the strategic review

    def emit(self, type: str, **payload) -> dict: ...

    def events(self) -> list[dict]: ...

    def facts(self) -> "Facts": ...

    def build_into(self, out_dir: Path) -> "BuildResult": ...

    def build_current(self) -> tuple[bool, str, bool]: ...

    def run_tests(self) -> "TestResult": ...

    @property
    def current_lib(self) -> Path: ...

    @property
    def best_lib(self) -> Path: ...

    def submit(self, message: str): ...
