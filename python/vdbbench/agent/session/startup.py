"""Starting a session and resuming one. A new session builds and measures its start version
(the first best) and the reference line; a resumed one rebuilds its best from the workspace's
session branch and the journal, recovering an accepted commit whose decision the journal cannot
read (a crash kept it out, or its line was damaged since) from the commit's metrics trailer."""

from __future__ import annotations

from types import SimpleNamespace

from vdbbench.agent.core import workspace as wsp
from vdbbench.agent.evaluation import reference
from vdbbench.agent.session.node import moved_since_last_segment
from vdbbench.agent.session.session_api import Best, SessionApi, SessionError
from vdbbench.common.console import say_warning

__all__ = ["Best", "SessionError", "announce_transfer", "baseline", "check_resumable", "damage_text", "measure_reference", "restore"]


def announce_transfer(session: SessionApi) -> list[dict]:
    """Say at the start, loudly, which of the card's transfer targets this machine cannot run (a
    real SIFT file that is not in the data cache, say), and journal every target's availability
    (`transfer_targets`). Returns the rows."""
    from vdbbench.agent.evaluation import transfer

    card = session.card
    available = transfer.availability(card)
    rows = [{"key": t.key, "label": t.label, "skipped": available.get(t.key)}
            for t in transfer.targets(card, include_here=False)]
    if not rows:
        return rows
    missing = [r for r in rows if r["skipped"]]
    if missing:
        say_warning(f"TRANSFER TARGETS MISSING: {len(missing)} of the {len(rows)} transfer targets of {card.name} are not "
                    "on this machine and will be SKIPPED, so a new best is not checked there:\n"
                    + "\n".join(f"  - {r['label']}: {r['skipped']}" for r in missing)
                    + "\nReal SIFT (photo-sift-a) is built into the data cache by `vdbbench datasets build photo-sift-a --setup`; "
                    "see docs/real-sift.md.")
    session.emit("transfer_targets", targets=rows, missing=len(missing))
    return rows


def check_resumable(session: SessionApi) -> None:
    """Refuse, before anything is written, a resume whose journal and workspace disagree: an
    accepted change the journal can read whose commit is not on the session branch (a journal
    copied or joined from another run, or the branch moved by hand). Resuming would judge every
    later submission against a best the journal does not describe."""
    branch = set(wsp.branch_commits(session.ws))
    stray = [d for d in session.facts().accepted if isinstance(d.get("commit"), str) and d["commit"] not in branch]
    if stray:
        d, head = stray[-1], wsp.head(session.ws)
        raise SessionError(
            f"cannot resume {session.run_dir}: its journal says the change of iteration {d.get('iteration')} (commit "
            f"{d['commit'][:12]}) was accepted, but the workspace's session branch (at {head[:12]}) does not hold it, so "
            "the journal and the workspace are not of one session (a journal copied or joined from another run, or the "
            "branch moved by hand). Nothing was written. If the branch was moved, put it back with `git -C "
            f"{session.ws} update-ref refs/heads/{wsp.SESSION_BRANCH} <the last accepted commit>`; otherwise resume a "
            "copy of the run whose journal.jsonl and workspace/ come from the same session.")


def damage_text(journal) -> str:
    """One line for the user: what of a damaged journal a resume read past (and kept)."""
    lines = journal.damaged_lines
    skipped = f" (line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))} skipped)" if lines else ""
    shown = journal.problems[:5]
    more = f"; and {len(journal.problems) - 5} more" if len(journal.problems) > 5 else ""
    return (f"resuming past damage in {journal.path}{skipped}: {'; '.join(shown)}{more}. Every other event was read; "
            "the file is kept as it is (new events are appended after it).")


def restore(session: SessionApi) -> None:
    """Best = the session branch's head. Every commit on the branch is an accepted change: one
    the journal cannot read (a crash between moving the branch and journaling the decision, or
    the decision's line damaged since) is journaled again from the commit's metrics trailer."""
    head = wsp.head(session.ws)
    known = {d.get("commit") for d in session.facts().accepted}
    recovered = [_recover(session, c) for c in wsp.branch_commits(session.ws) if c not in known]
    if recovered:
        say_warning("recovered from the session branch, as the journal holds no readable decision for them: "
                    + ", ".join(recovered))
    facts = session.facts()
    session.journal.iteration = facts.submissions
    accepted = {d.get("commit"): d for d in facts.accepted}
    if head in accepted:
        session.best = Best(head, accepted[head].get("qps"), accepted[head].get("recall10"))
    elif facts.baseline_qps is not None:
        session.best = Best(head, facts.baseline_qps, facts.baseline_recall)
    else:
        session.best = Best(head, None, None)
    marker = session.builds / "best" / "COMMIT"
    lib = session.builds / "best" / session.card.artifact
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


def _recover(session: SessionApi, commit: str) -> str:
    """Journal the accepted decision of a branch commit the journal cannot read; returns its name."""
    facts = session.facts()
    metrics = wsp.commit_metrics(session.ws, commit)
    it = wsp.commit_iteration(session.ws, commit)
    if it is None or it > facts.submissions:  # after every decision read: the crash before its line
        it = it or facts.submissions + 1
        if session.journal.damaged_lines:
            why = ("was accepted but its decision cannot be read (a crash before it was journaled, or a damaged "
                   "line); recovered from the commit")
        else:
            why = "was accepted but its decision was not journaled (crash); recovered from the commit"
        reason = "recovered from the workspace history after a crash"
    else:  # decisions of later iterations were read: this one's line is damaged
        why = (f"(iteration {it}) was accepted but its decision's line in the journal is damaged; "
               "recovered from the commit")
        reason = "recovered from the workspace history: its decision's journal line was damaged"
    session.journal.iteration = it
    session.emit("error", where="resume", text=f"commit {commit[:12]} {why}")
    session.emit("decision", outcome="accepted", qps=metrics.get("qps"), recall10=metrics.get("recall10"),
                 best_qps_before=metrics.get("best_qps_before"), best_qps_after=metrics.get("qps"), commit=commit,
                 message=metrics.get("message", ""), reason=reason, diff_stat="", recovered=True)
    return f"iteration {it} (commit {commit[:12]})"


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
    report = session.evaluator.run("heldout", session.builds / "best" / session.card.artifact, None)
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
