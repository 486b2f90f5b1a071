"""Starting a session and resuming one. A new session builds and measures its start version
(the first best) and the reference line; a resumed one rebuilds its best from the workspace's
session branch and the journal, recovering an accepted commit whose decision a crash kept out of
the journal from the commit's metrics trailer."""

from __future__ import annotations

from types import SimpleNamespace

from vdbbench.agent.core import workspace as wsp
from vdbbench.agent.evaluation import reference
from vdbbench.agent.session.node import moved_since_last_segment
from vdbbench.agent.session.session_api import Best, SessionApi, SessionError

__all__ = ["Best", "SessionError", "baseline", "measure_reference", "restore"]


def restore(session: SessionApi) -> None:
    """Best = the session branch's head; a commit the journal missed (crash) is recovered."""
    facts = session.facts()
    session.journal.iteration = len(facts.decisions)
    head = wsp.head(session.ws)
    known = {d.get("commit") for d in facts.accepted}
    if head not in known and head != wsp.start_commit(session.ws):
        metrics = wsp.commit_metrics(session.ws, head)
        session.journal.iteration += 1
        session.emit("error", where="resume", text=f"commit {head[:12]} was accepted but its decision was not journaled (crash); recovered from the commit")
        session.emit("decision", outcome="accepted", qps=metrics.get("qps"), recall10=metrics.get("recall10"),
                     best_qps_before=metrics.get("best_qps_before"), best_qps_after=metrics.get("qps"), commit=head,
                     message=metrics.get("message", ""), reason="recovered from the workspace history after a crash",
                     diff_stat="")
        facts = session.facts()
    if facts.accepted:
        session.best = Best(head, facts.accepted[-1].get("qps"), facts.accepted[-1].get("recall10"))
    elif facts.baseline_qps is not None:
        session.best = Best(head, facts.baseline_qps, facts.baseline_recall)
    else:
        session.best = Best(head, None, None)
    marker = session.builds / "best" / "COMMIT"
    lib = session.builds / "best" / f"{session.card.entry.leaf}.so"
    if not (lib.exists() and marker.exists() and marker.read_text().strip() == head):
        src = session.run_dir / "best-src"
        wsp.export_tree(session.ws, head, src)
        res = wsp.build(src, session.card, session.target, session.builds / "best")
        session.emit("build", ok=res.ok, seconds=round(res.seconds, 3), stderr_tail=wsp.tail(res.stderr_tail), what="best (resume)")
        if not res.ok:
            raise SessionError(f"the best commit {head[:12]} no longer builds:\n{res.errors}")
        marker.write_text(head)
    if session.best.qps is None or moved_since_last_segment(session.events()):  # QPS never crosses nodes
        report = session.evaluator.run("heldout", lib, None)
        session.emit("evaluation", **report.journal_payload())
        if report.candidate:
            session.best = Best(session.best.commit, report.candidate.qps, report.candidate.recall10)
    _missing_reference(session)


def _missing_reference(session: SessionApi) -> None:
    """The reference line a fault kept out of the journal (the session stopped between its
    baseline and its reference), measured now; a reference that failed is not retried."""
    if session.card.reference.source == "none" or session.facts().reference is not None:
        return
    events = session.events()
    if any(e.get("type") == "error" and e.get("where") == "reference" for e in events):
        return
    baseline = next((e["candidate"] for e in events if e.get("type") == "evaluation" and e.get("split", "heldout") == "heldout"
                     and e.get("best") is None and isinstance(e.get("candidate"), dict) and e["candidate"].get("qps")), None)
    if baseline is None and reference.is_start(session.card):
        return  # no baseline measured on this card's start: nothing to stand for the reference
    measure_reference(session, SimpleNamespace(**baseline) if baseline is not None else None)


def baseline(session: SessionApi):
    """Build the start version as the first best and measure it once; returns its metrics."""
    res = session.build_into(session.builds / "best")
    if not res.ok:
        session.emit("error", where="baseline build", text=res.errors)
        raise SessionError(f"the start version does not build:\n{res.errors}")
    head = wsp.head(session.ws)
    (session.builds / "best" / "COMMIT").write_text(head)
    report = session.evaluator.run("heldout", session.builds / "best" / f"{session.card.entry.leaf}.so", None)
    session.emit("evaluation", **report.journal_payload())
    if report.failure:
        raise SessionError(f"the start version fails under the harness: {report.failure.text}")
    session.best = Best(head, report.candidate.qps, report.candidate.recall10)
    return report.candidate


def measure_reference(session: SessionApi, baseline_metrics) -> None:
    """The project's own engine on this card, once (the start itself when that is the engine)."""
    if session.card.reference.source == "none":
        return
    if reference.is_start(session.card):
        payload = reference.from_baseline(session.card, baseline_metrics)
    else:
        payload = reference.measure(session.card, session.evaluator.data, session.run_dir, session.target, session.emit)
    if payload is not None:
        session.emit("reference", **payload)
