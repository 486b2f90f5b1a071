"""`vdbbench report RESULTS... -o report.html`: the benchmark page; and the writer of the session
page behind `vdbbench agent report RUN --html` (handed to that command, so that the agent area
never imports pages)."""

from __future__ import annotations

from pathlib import Path

from vdbbench.common.errors import UsageError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "report",
        help="write one self-contained HTML page of result files (interactive Pareto fronts, tables)",
        description="Write one HTML file (plotly.js inlined: no server, no network when viewed) with the "
        "recall/QPS Pareto fronts per mode and thread count (hover a point for its parameters, recall, "
        "QPS and latency), concurrent-client curves when measured, the headline table, build time, "
        "memory, machine and dataset. Results of several datasets get a section each.",
    )
    p.add_argument("results", nargs="+", metavar="RESULTS", help="result JSON files or run folders holding them")
    p.add_argument("-o", "--output", default="report.html", help="HTML file to write (default report.html)")
    p.add_argument("--ours", help="the index the ratios are taken against (default: our engine, when present)")
    p.add_argument("--title", help="page title (default: the datasets' names)")
    p.set_defaults(func=cmd_report)
    agent = subparsers.choices.get("agent")  # registered before this area (vdbbench.cli._AREAS)
    if agent is not None:
        # A default of the `agent` parser reaches the namespace of each of its subcommands.
        agent.set_defaults(write_session_page=write_session_page)


def write_session_page(run, out):
    """The session page of RUN written to OUT (vdbbench.pages.session); returns OUT."""
    from vdbbench.pages.session import write_session_page as write

    return write(run, out)


def cmd_report(args) -> int:
    from vdbbench.pages.bench import PageError, write_benchmark_page

    out = Path(args.output)
    if out.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"-o expects an .html file name, got {out}")
    try:
        write_benchmark_page(args.results, out, ours=args.ours, title=args.title)
    except (PageError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, self-contained: open it in any browser)")
    return 0
