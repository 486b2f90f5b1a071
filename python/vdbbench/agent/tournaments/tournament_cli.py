"""`vdbbench agent tournament` and `vdbbench agent leaderboard`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vdbbench.common.errors import UsageError


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def register_tournament_commands(sub) -> None:
    t = sub.add_parser(
        "tournament", help="several models x several rollouts of one task, as Ray tasks on a cluster (or one after another)",
        description="Run every rollout of every model in CONFIG as an agent session (a Ray task on the cluster "
                    "at --ray-address, default a local Ray on this machine; without Ray installed, one after "
                    "another here), then write the leaderboard into the runs folder.",
    )
    t.add_argument("config", metavar="CONFIG.toml", help="the tournament: models, task card, rollouts, budgets "
                                                         "(see agent/tournaments/example.toml)")
    t.add_argument("--ray-address", metavar="ADDR", help="Ray cluster to run on, e.g. ray://head:10001 or head:6379 "
                                                         "(default: start a local Ray with this machine's CPUs)")
    t.add_argument("--num-cpus", type=_positive_int, help="CPUs of the local Ray (default: this machine's)")
    t.add_argument("--resume", action="store_true", help="carry on a tournament whose driver died: resume every "
                                                         "unfinished session, start those never started")
    t.add_argument("--local", action="store_true", help="no Ray: run the sessions one after another in this process")
    t.add_argument("--runs-dir", help="where the sessions go (default: the config's runs_dir); on a cluster, "
                                      "a path every node shares")
    t.add_argument("--target", type=float, default=0.95, help="leaderboard target, a fraction of the reference QPS (default 0.95)")
    t.set_defaults(func=cmd_tournament)

    b = sub.add_parser(
        "leaderboard", help="per model over its rollouts: best QPS, reached target, cost to get there, staircases",
        description="Rank models over their rollouts (session folders, or folders of sessions such as a "
                    "tournament's runs folder), from the journals alone. Prints Markdown.",
    )
    b.add_argument("runs", metavar="RUN", nargs="+", help="session folders, or folders holding sessions")
    b.add_argument("--target", type=float, default=0.95,
                   help="a rollout reached the target when its best QPS >= TARGET x the reference (the project's "
                        "engine measured on the same node; default 0.95)")
    b.add_argument("--published", action="store_true",
                   help="also show the public vector-db-bench leaderboard's published rows as reference, labelled with "
                        "their machine (shown anyway when a session is of a served card; never in the medians)")
    b.add_argument("--json", metavar="FILE", help="also write the leaderboard as JSON")
    b.add_argument("--markdown", metavar="FILE", help="also write the Markdown to FILE")
    b.add_argument("-o", "--output", metavar="PNG", default="leaderboard.png",
                   help="the staircases side by side (default leaderboard.png)")
    b.set_defaults(func=cmd_leaderboard)


def _say_left_out(board) -> None:
    from vdbbench.agent.tournaments.leaderboard import left_out

    for line in board.get("manifest_problems", []):
        print(f"leaderboard: {line}", file=sys.stderr)
    for line in left_out(board):
        print(f"leaderboard: left out {line}", file=sys.stderr)


def cmd_leaderboard(args) -> int:
    from vdbbench.agent.reports.report import ReportError
    from vdbbench.agent.tournaments.leaderboard import leaderboard, write_all

    try:
        board = leaderboard(args.runs, target=args.target, published=args.published)
        text = write_all(board, Path(args.output), Path(args.markdown) if args.markdown else None,
                         Path(args.json) if args.json else None)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    sys.stdout.write(text)
    _say_left_out(board)
    return 0


def resume_command(args) -> str:
    """The command that carries this tournament on: the same config, runs folder and cluster."""
    import shlex

    words = ["vdbbench", "agent", "tournament", args.config]
    for flag, value in (("--runs-dir", args.runs_dir), ("--ray-address", args.ray_address),
                        ("--num-cpus", args.num_cpus)):
        if value is not None:
            words += [flag, str(value)]
    words += ["--local"] if args.local else []
    words += ["--target", f"{args.target:g}"] if args.target != 0.95 else []
    return shlex.join(words + ["--resume"])


def cmd_tournament(args) -> int:
    from vdbbench.agent.reports.report import ReportError
    from vdbbench.agent.tournaments import tournament as tmod
    from vdbbench.agent.tournaments.leaderboard import check_target, leaderboard, write_all

    if args.local and args.ray_address:
        raise UsageError("--local and --ray-address exclude each other")
    try:
        check_target(args.target)  # before the sessions, not hours later when the leaderboard is written
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    try:
        t = tmod.load_config(args.config, runs_dir=args.runs_dir)
        results = tmod.run_tournament(t, ray_address=args.ray_address, resume=args.resume, local=args.local,
                                      num_cpus=args.num_cpus)
    except tmod.TournamentError as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        print(f"to carry it on: {resume_command(args)}", file=sys.stderr)
        raise
    runs = Path(t.runs_dir)
    try:
        board = leaderboard([runs], target=args.target)  # every session its manifest names
    except ReportError as exc:
        print(f"leaderboard: {exc}; no leaderboard", file=sys.stderr)
        return 1
    text = write_all(board, runs / "leaderboard.png", runs / "leaderboard.md", runs / "leaderboard.json")
    sys.stdout.write(text)
    _say_left_out(board)
    failed = [r for r in results if r.get("error") or r.get("state") != "finished"]
    print(f"leaderboard: {runs / 'leaderboard.md'} (JSON beside it, staircases in leaderboard.png)"
          + (f"; {len(failed)} session(s) did not finish: `{resume_command(args)}`" if failed else ""),
          file=sys.stderr)
    return 1 if failed else 0
