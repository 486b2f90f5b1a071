"""`vdbbench agent ...`: run, resume and export optimization sessions (report/compare from report_cli.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from vdbbench.common.errors import UsageError


def register(subparsers) -> None:
    """Add `vdbbench agent` and its subcommands to the `vdbbench` parser."""
    agent = subparsers.add_parser("agent", help="LLM agent sessions that optimize the engine's Rust sources")
    sub = agent.add_subparsers(dest="agent_command", metavar="SUBCOMMAND")
    agent.set_defaults(func=lambda args: (agent.print_help(), 2)[1])

    run = sub.add_parser("run", help="start a session on a task card")
    run.add_argument("--task", required=True, help="task card (TOML), e.g. agent/tasks/optimize-ivf.toml")
    run.add_argument("--run-id", help="name of the run folder (default: time stamp + task name)")
    run.add_argument("--cpus", help="served cards: the servers' cores as a taskset list, e.g. 0-3 (default: the card's)")
    _model_args(run, required=True)
    _common_args(run)
    run.set_defaults(func=cmd_run)

    res = sub.add_parser("resume", help="continue an interrupted or budget-stopped session")
    res.add_argument("run", help="the run folder (or its name under --runs-dir)")
    _model_args(res, required=False)
    _common_args(res)
    res.set_defaults(func=cmd_resume)

    exp = sub.add_parser("export", help="write the winning diff (start -> best) as a patch")
    exp.add_argument("run", help="the run folder (or its name under --runs-dir)")
    exp.add_argument("-o", "--output", required=True, help="patch file to write ('-' for stdout)")
    exp.add_argument("--runs-dir", default="runs")
    exp.set_defaults(func=cmd_export)

    from vdbbench.agent.reports.report_cli import register_report_commands

    register_report_commands(sub)

    from vdbbench.agent import evaluate_entry

    evaluate_entry.register(sub)

    from vdbbench.agent.tournaments.tournament_cli import register_tournament_commands

    register_tournament_commands(sub)


def _model_args(p, required: bool) -> None:
    p.add_argument("--model", required=required, help="model name at the endpoint" + ("" if required else " (default: the session's)"))
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default: the SDK's, or the session's); key from OPENAI_API_KEY")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per model request (default 300)")
    p.add_argument("--max-retries", type=int, default=6, help="retries on time-outs, 429 and 5xx (default 6)")
    p.add_argument("--tool-protocol", choices=("auto", "native", "text"), default="auto",
                   help="native: JSON-schema tool calls; text: actions in fenced blocks, for endpoints "
                        "without tool calling; auto (default): native until the endpoint refuses tools")


def _common_args(p) -> None:
    p.add_argument("--runs-dir", default="runs", help="where sessions live (default ./runs)")
    p.add_argument("--max-iterations", type=int, help="budget: submissions")
    p.add_argument("--max-tool-calls", type=int, help="budget: tool calls")
    p.add_argument("--max-tokens", type=int, help="budget: prompt + completion tokens")
    p.add_argument("--max-cost", type=float, help="budget: USD")
    p.add_argument("--max-wall", help="budget: wall time (seconds, or e.g. 90m, 8h)")
    p.add_argument("--prices", help="price table override (TOML or JSON: {pattern = {prompt, completion}} per 1M tokens)")
    p.add_argument("--quiet", action="store_true", help="one plain line per decision instead of the live view")


def _overrides(args) -> dict:
    return {"iterations": args.max_iterations, "tool_calls": args.max_tool_calls, "tokens": args.max_tokens,
            "cost_usd": args.max_cost, "wall_s": args.max_wall}


def _model(name: str, base_url: str | None, args):
    from vdbbench.agent.session.model import OpenAIModel

    key = os.environ.get("OPENAI_API_KEY")
    if not key and not base_url:
        raise UsageError("set OPENAI_API_KEY (or give --base-url of a local endpoint that needs no key)")
    model = OpenAIModel(name, base_url=base_url, api_key=key, timeout_s=args.timeout, max_retries=args.max_retries)
    if args.tool_protocol == "native":
        return model
    from vdbbench.agent.session.text_protocol import TextProtocolModel

    return TextProtocolModel(model, mode=args.tool_protocol)


def _prices(args, card):
    """The built-in prices, then the card's [prices], then --prices FILE."""
    from vdbbench.agent.session.budget import price_table

    try:
        return price_table({"prices": card.prices}, args.prices or None)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--prices {args.prices}: {exc}") from None


def _view(quiet: bool, budgets, past_events=()):
    """S's live view (rich panel, or one plain line per decision with --quiet), fed every event."""
    from vdbbench.agent.reports.live import LiveView

    view = LiveView(quiet=quiet or not sys.stdout.isatty(), budgets=budgets)
    view.prime(past_events)
    return view


def _run_dir(args) -> Path:
    """The run folder given as a path or as a name under --runs-dir, made absolute once here."""
    p = Path(args.run)
    if not p.exists() and (Path(args.runs_dir) / args.run).exists():
        p = Path(args.runs_dir) / args.run
    if not (p / "journal.jsonl").exists():
        raise UsageError(f"{args.run} is not a session run folder (no journal.jsonl there or under {args.runs_dir})")
    return p.resolve()


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt  # unwinds like Ctrl-C: candidates killed, session_end journaled


def _finish(session) -> int:
    import signal

    signal.signal(signal.SIGTERM, _on_sigterm)
    end = session.run()
    best = end["best"]
    print(f"session ended ({end['reason']}): best {best['qps'] and round(best['qps']):,} QPS, recall@10 "
          f"{best['recall10'] if best['recall10'] is None else round(best['recall10'], 4)}, commit {best['commit'][:12]}; "
          f"journal {session.journal.path}", file=sys.stderr)
    return 1 if end["reason"] == "model_unavailable" else 0


def cmd_run(args) -> int:
    from vdbbench.agent.core.task import TaskError, load_task
    from vdbbench.agent.core.workspace import WorkspaceError
    from vdbbench.agent.session.loop import Session, SessionError

    try:
        card = load_task(args.task)
        if args.cpus is not None:
            from vdbbench.agent.core.task import parse_cpus

            parse_cpus(args.cpus, "--cpus")
            card.evaluation.cpus = args.cpus  # journaled with the card in session_start
    except TaskError as exc:
        raise UsageError(str(exc)) from None
    model = _model(args.model, args.base_url, args)
    from vdbbench.agent.session.budget import Budgets

    try:
        budgets = Budgets.merged(card.budgets, _overrides(args))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    with _view(args.quiet, budgets) as view:
        try:
            session = Session.create(card, model, Path(args.runs_dir).resolve(), args.run_id, _overrides(args), _prices(args, card),
                                     on_event=view.feed)
        except (SessionError, WorkspaceError, ValueError) as exc:
            print(f"vdbbench agent run: {exc}", file=sys.stderr)
            return 1
        print(f"session {session.run_dir}", file=sys.stderr, flush=True)
        return _finish(session)


def cmd_resume(args) -> int:
    import json

    from vdbbench.agent.core.workspace import WorkspaceError
    from vdbbench.agent.session.loop import Session, SessionError

    run_dir = _run_dir(args)
    meta = json.loads((run_dir / "session.json").read_text())
    model = _model(args.model or meta["model"], args.base_url or meta.get("base_url"), args)
    from vdbbench.agent.core.journal import read_events

    with _view(args.quiet, None, read_events(run_dir / "journal.jsonl")) as view:
        try:
            from vdbbench.agent.core.task import load_task

            card = load_task(run_dir / "task.toml", origin=meta.get("card_path"))
            session = Session.resume(run_dir, model, _overrides(args), _prices(args, card),
                                     on_event=view.feed)
        except (SessionError, WorkspaceError, ValueError) as exc:
            print(f"vdbbench agent resume: {exc}", file=sys.stderr)
            return 1
        view.budgets = session.budgets
        return _finish(session)


def cmd_export(args) -> int:
    from vdbbench.agent.core import workspace as wsp

    run_dir = _run_dir(args)
    ws = run_dir / "workspace"
    start = wsp.start_commit(ws)
    patch = wsp.git(ws, "diff", "--binary", start, "HEAD")
    n = int(wsp.git(ws, "rev-list", "--count", f"{start}..HEAD").strip())
    if args.output == "-":
        sys.stdout.write(patch)
    else:
        try:
            Path(args.output).write_text(patch)
        except OSError as exc:
            raise UsageError(f"cannot write {args.output}: {exc.strerror}") from None
        if n == 0:
            print(f"wrote {args.output}: empty, this session has no accepted change yet", file=sys.stderr)
        else:
            print(f"wrote {args.output}: {n} accepted change(s), {len(patch.splitlines())} lines "
                  f"(apply in your checkout with `git apply {args.output}`)", file=sys.stderr)
    return 0
