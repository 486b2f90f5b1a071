"""The prompt templates (shipped inside the package, found through importlib.resources; a card may
bring its own folder) and the texts built from them: the system prompt with the task and the
machine (the same all session long, so endpoints can cache it), and the current best, which the
conversation states (first message, verdicts)."""

from __future__ import annotations

import shutil
import string
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vdbbench.agent.core.task import TaskCard
from vdbbench.agent.evaluation import transfer
from vdbbench.agent.evaluation.eval_report import fmt_qps
from vdbbench.agent.session.machine import Machine

if TYPE_CHECKING:
    from vdbbench.agent.evaluation.eval_data import EvalData

TEMPLATES = ("system.md", "task.md", "begin.md", "resume.md", "nudge.md", "final.md")


class PromptsError(RuntimeError):
    """No usable prompt templates."""


def packaged():
    """The templates that ship with vdbbench (a Traversable: a folder in any install)."""
    return resources.files("vdbbench.agent.session") / "prompts"


def for_card(card: TaskCard):
    """The card's own prompts folder when it names one, else the packaged templates."""
    return Path(card.prompts) if card.prompts else packaged()


def keep_with_run(card: TaskCard, run_dir: Path) -> None:
    """A card's own templates are copied into the run folder, so `resume` finds them wherever the
    card has gone since; the packaged ones travel with the package."""
    if card.prompts:
        shutil.copytree(card.prompts, run_dir / "prompts")


def for_run(run_dir: Path):
    """The templates of a session being resumed: its own copy, else the packaged ones."""
    own = run_dir / "prompts"
    return own if (own / "system.md").is_file() else packaged()


def render(prompts, template: str, **values: Any) -> str:
    """`template` from the folder `prompts` with $values filled in; a missing file says which."""
    path = prompts / template
    if not path.is_file():
        if template in TEMPLATES and prompts != packaged():
            path = packaged() / template  # a card's folder may leave templates out
        else:
            raise PromptsError(f"prompt template {template} not found in {prompts}")
    return string.Template(path.read_text(encoding="utf-8")).safe_substitute(values).strip()


def repeat_text(card: TaskCard) -> str:
    """How one timed repeat is sized, read from the card: a duration on the judged clock, one
    `search` call per batch of one held-out slice, dev batches of the same shape."""
    obj = card.objective
    batch = card.batch_queries
    return (f"each timed repeat runs for at least {obj.repeat_seconds:g} s on that clock: `search` on batches of "
            f"{batch:,} held-out queries, cycling through its slice in a fresh order each pass (candidate and best "
            f"see the same sequence); `benchmark` times pairs of {obj.dev_repeat_seconds:g} s repeats on dev batches of "
            f"the same size, at least {obj.dev_repeats}, more until its interval is clear of zero. A repeat's QPS is "
            f"the queries it timed over its time.")


def best_text(card: TaskCard, qps: float | None, recall10: float | None, commit: str) -> str:
    if qps is None:
        return "not measured yet."
    text = f"{fmt_qps(qps)} QPS at recall@10 {recall10:.4f} (commit {commit[:12]})."
    floor = card.objective.recall_floor
    if recall10 is not None and recall10 < floor:
        text += f" NOTE: the current best misses the recall floor ({recall10:.4f} < {floor}); a submission must reach it."
    return text


def data_text(card: TaskCard, data: "EvalData | None" = None) -> str:
    """The data line of the task: the set as loaded (its real size; a replica standing in for an
    unavailable set says so); from the card alone when nothing is loaded, and a size only when
    the card knows it."""
    ds = card.dataset
    ident = (data.dataset or {}) if data is not None else {}
    n = int(data.base.shape[0]) if data is not None else ds.n
    dim = int(data.base.shape[1]) if data is not None else ds.dim
    metric = data.metric if data is not None else ds.metric
    size = f"{n:,} base vectors of dimension {dim}" if n else f"dimension {dim}"
    text = f"`{ds.name}` ({size}, metric {metric})"
    loaded = ident.get("loaded")
    if loaded and loaded != ds.name:
        text += f"; loaded as `{loaded}`" + (" (a generated replica: the real set is not available here)" if ident.get("synthetic") else "")
    return text


def system_prompt(prompts, card: TaskCard, machine: Machine, data: "EvalData | None" = None) -> str:
    """The system message: the standing instructions, then the task with the data and the machine.
    It never changes during a session (the current best is stated in the conversation)."""
    c = card
    build_args = "".join(f", {k}={v!r}" for k, v in c.entry.build_args.items())
    search_args = ", ".join(f"{k}={v!r}" for k, v in c.entry.search_args.items())
    task = render(
        prompts, "task.md", name=c.name, description=c.description,
        editable="\n".join(f"- `{p}`" for p in c.editable), manifest=c.build.manifest,
        module=c.entry.module, cls=c.entry.cls, dim=c.dataset.dim, build_args=build_args,
        search_args=search_args, dataset=c.dataset.name, data=data_text(c, data),
        n=f"{data.base.shape[0]:,}" if data is not None else (f"{c.dataset.n:,}" if c.dataset.n else "?"),
        metric=c.dataset.metric,
        threads=c.objective.threads, recall_floor=c.objective.recall_floor,
        clock=("process's CPU time (all its threads)" if c.objective.clock_kind == "cpu" else "wall clock"),
        margin_pct=f"{c.objective.margin:.0%}", repeats=c.objective.repeats, p_value=c.objective.p_value,
        max_pairs=c.objective.max_pairs,
        tests=(f"`cargo test` of `{c.tests.manifest or c.build.manifest}` must pass" if c.tests.enabled else "none"),
        repeat_text=repeat_text(c), machine=machine.describe(),
        best="stated in the conversation (the first message, then every accepted verdict)",
        hints=(f"## Hints\n{c.hints}" if c.hints else ""),
        transfer=(f"- Transfer targets (where the result must hold too): {transfer.describe(c)}"
                  if c.transfer.datasets or c.transfer.simd else ""),
    )
    return render(prompts, "system.md") + "\n\n" + task
