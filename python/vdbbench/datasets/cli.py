"""`vdbbench datasets list | fetch NAME | info NAME_OR_PATH | generate NAME [--out PATH] | build photo-sift-a`."""

from __future__ import annotations

import argparse
from pathlib import Path

from vdbbench.common.errors import UsageError


def register(subparsers) -> None:
    """Add this area's subcommands to the `vdbbench` parser."""
    p = subparsers.add_parser(
        "datasets",
        help="list, fetch, inspect and generate data sets",
        description="Registered data sets are downloaded (resumable, retried, size + sha256 + structure "
        "verified before they are kept) into $VDBBENCH_DATA (default ~/.cache/vdbbench); generated sets "
        "are synth-sift-<n> and synth-float-<n> (n like 20k, 100k, 1m); built sets (photo-sift-a: real SIFT "
        "descriptors of photographs) are made here by `vdbbench datasets build`.",
    )
    sub = p.add_subparsers(dest="datasets_command", metavar="ACTION")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    ls = sub.add_parser("list", help="registered and generated data sets, and what is cached")
    ls.set_defaults(func=_list)

    fetch = sub.add_parser("fetch", help="download and verify a registered data set")
    fetch.add_argument("name")
    fetch.add_argument("--no-groundtruth", action="store_true", help="skip checking/computing ground truth")
    fetch.set_defaults(func=_fetch)

    info = sub.add_parser("info", help="shape, metric, identity and ground-truth status of a data set")
    info.add_argument("name", metavar="NAME_OR_PATH")
    info.add_argument("--no-download", action="store_true", help="only use what is cached")
    info.set_defaults(func=_info)

    gen = sub.add_parser("generate", help="generate (and cache) a synth-sift-<n> / synth-float-<n> set")
    gen.add_argument("name", help="e.g. synth-sift-100k, synth-float-1m")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--nq", type=int, help="queries (default 10000 for n >= 1m, else 1000)")
    gen.add_argument("--out", type=Path, help="also write it, with ground truth, as an ann-benchmarks HDF5 file")
    gen.set_defaults(func=_generate)

    from vdbbench.datasets.photo_sift.build import Params

    d = Params()
    build = sub.add_parser(
        "build", help="build a real-descriptor set from photographs (photo-sift-a)",
        description="Builds photo-sift-a: OpenCV SIFT descriptors of the photographs that ship in pinned Debian 12 "
        "packages and PyPI wheels, 500,000 base vectors and 10,000 queries from other photographs (whole scenes "
        "apart), exact top-100 ground truth, an ann-benchmarks HDF5 file and a JSON manifest beside it; the same "
        "bytes for the same seed. --setup downloads the sources (~680 MB, from deb.debian.org, else apt-get "
        "download; wheels with pip download --no-deps) into --work and unpacks only the photographs; nothing is "
        "installed. Needs OpenCV: pip install 'vdbbench[real]'.",
    )
    build.add_argument("name", choices=["photo-sift-a"])
    build.add_argument("--setup", action="store_true", help="download the sources and unpack the photographs first")
    build.add_argument("--work", type=Path, help="work folder for the sources and photographs (default /tmp/photo-sift-work)")
    build.add_argument("--images", type=Path, metavar="DIR",
                       help="use every image under DIR instead of the packages' photographs (each its own scene); needs --out")
    build.add_argument("--out", type=Path, help="the HDF5 file (default: the data cache, where `--dataset photo-sift-a` finds it)")
    build.add_argument("--seed", type=int, default=d.seed, help=f"(default {d.seed})")
    build.add_argument("--nbase", type=int, default=d.nbase, help=f"base vectors (default {d.nbase:,})")
    build.add_argument("--nquery", type=int, default=d.nquery, help=f"query vectors (default {d.nquery:,})")
    build.add_argument("--k", type=int, default=d.k, help=f"ground-truth neighbours per query (default {d.k})")
    build.add_argument("--max-side", type=int, default=d.max_side,
                       help=f"downscale images whose longer side exceeds this (default {d.max_side})")
    build.add_argument("--jobs", type=int, default=d.jobs, help="SIFT worker processes (the result does not depend on it)")
    build.set_defaults(func=_build)


def _console():
    from rich.console import Console

    return Console()


def _usage_for(exc) -> UsageError:
    return UsageError(str(exc))


def _escape(exc) -> str:
    from rich.markup import escape

    return escape(str(exc))


def _list(args: argparse.Namespace) -> int:
    from rich.table import Table

    from vdbbench.datasets import registry as reg

    table = Table(title=f"data sets (cache: {reg.data_dir()})")
    for col in ("name", "metric", "dim", "n", "nq", "source(s)", "cached"):
        table.add_column(col, justify="right" if col in ("dim", "n", "nq") else "left")
    for name, e in reg.registry().items():
        cached = reg.cached_source(e)
        srcs = "\n".join(f"{s.format} {s.approx_size}" for s in e.sources)
        fallback = f"\n(offline: {e.fallback})" if e.fallback else ""
        table.add_row(name, e.metric, str(e.dim), f"{e.n:,}", f"{e.nq:,}", srcs + fallback,
                      cached.filename if cached else "-")
    from vdbbench.datasets.built import BUILT

    for name, b in BUILT.items():
        table.add_row(name, b.metric, str(b.dim), f"{b.n:,}", f"{b.nq:,}", "built here: vdbbench datasets build",
                      b.path.name if b.path.exists() else "-")
    gen_dir = reg.data_dir() / "synth"
    for pattern, metric, dim in (("synth-sift-<n>", "l2", "128"), ("synth-float-<n>", "l2", "64")):
        table.add_row(pattern, metric, dim, "20k, 100k, 1m...", "1k; 10k at >= 1m", "generated", "")
    if gen_dir.exists():
        for f in sorted(gen_dir.glob("synth-*.hdf5")):
            table.add_row(f.name.split("-nq")[0], "l2", "", "", "", "generated", f.name)
    _console().print(table)
    return 0


def _fetch(args: argparse.Namespace) -> int:
    from vdbbench.datasets import registry as reg
    from vdbbench.datasets.download import DownloadError

    try:
        e, source = reg.fetch(args.name)
        size, sha, origin = reg.expected_checksum(e, source)
        _console().print(f"{args.name}: {e.folder / source.filename} ({size:,} bytes, sha256 {sha}, {origin})")
        if not args.no_groundtruth:
            from vdbbench.datasets import load_dataset

            ds = load_dataset(args.name, allow_download=False, offline_fallback=False)
            _console().print(f"ground truth: {ds.extra.get('groundtruth')}")
    except reg.UnknownDataset as exc:
        raise _usage_for(exc) from None
    except (DownloadError, reg.DatasetError, OSError) as exc:  # offline, a damaged cached copy, an unwritable cache
        _console().print(f"[bold red]fetch failed[/]: {_escape(exc)}", highlight=False)
        return 1
    return 0


def _info(args: argparse.Namespace) -> int:
    from rich.table import Table

    from vdbbench.datasets import DatasetError, DownloadError
    from vdbbench.datasets.groundtruth import groundtruth_path
    from vdbbench.datasets.loader import resolve

    from vdbbench.datasets import registry as reg

    from vdbbench.datasets.built import BUILT

    spec = BUILT.get(args.name)
    if spec is not None and not spec.path.exists():
        table = Table(title=args.name, show_header=False)
        for key, value in (("n", f"{spec.n:,}"), ("dim", str(spec.dim)), ("nq", f"{spec.nq:,}"),
                           ("metric", spec.metric), ("built", f"no (would be at {spec.path})"),
                           ("build with", _escape(spec.build_hint))):
            table.add_row(key, value)
        _console().print(table)
        return 0
    entry = reg.registry().get(args.name)
    if entry is not None and args.no_download and reg.cached_source(entry) is None:
        table = Table(title=args.name, show_header=False)
        for key, value in (("n", f"{entry.n:,}"), ("dim", str(entry.dim)), ("nq", f"{entry.nq:,}"),
                           ("metric", entry.metric), ("cached", f"no (would be in {entry.folder})"),
                           ("sources", "\n".join(s.url for s in entry.sources)),
                           ("offline fallback", entry.fallback or "none")):
            table.add_row(key, value)
        _console().print(table)
        return 0
    try:
        ds, gt_folder = resolve(args.name, allow_download=not args.no_download)
    except DownloadError as exc:
        _console().print(f"[bold red]not available[/]: {_escape(exc)}", highlight=False)
        return 1
    except DatasetError as exc:
        raise _usage_for(exc) from None
    except OSError as exc:  # a generated set (or fallback) that cannot be written to the cache
        _console().print(f"[bold red]not available[/]: {_escape(exc)}", highlight=False)
        return 1
    if ds.has_groundtruth:
        gt = f"in the data file: top-{ds.neighbors.shape[1]}"
    else:
        path = groundtruth_path(ds, gt_folder)
        gt = f"cached: {path}" if path.exists() else f"not computed yet (will be cached at {path})"
    table = Table(title=f"{ds.name}", show_header=False)
    rows = [("n", f"{ds.n:,}"), ("dim", str(ds.dim)), ("nq", f"{ds.nq:,}"), ("metric", ds.metric),
            ("synthetic", "yes" if ds.synthetic else "no"), ("sha256", ds.sha256),
            ("source", ds.source), ("cached at", str(ds.extra.get("cached") or ds.extra.get("file") or ds.source)),
            ("ground truth", gt)]
    if "requested" in ds.extra:
        rows.append(("fallback for", f"{ds.extra['requested']}: {ds.extra['fallback_reason']}"))
    for key, value in rows:
        table.add_row(key, value)
    _console().print(table)
    return 0


def _generate(args: argparse.Namespace) -> int:
    from vdbbench.datasets import DatasetError
    from vdbbench.datasets.formats import write_ann_hdf5
    from vdbbench.datasets.groundtruth import ensure_groundtruth
    from vdbbench.datasets.loader import generate, parse_synth_name
    from vdbbench.datasets.registry import data_dir

    if args.nq is not None and args.nq < 1:
        raise UsageError(f"--nq expects an integer >= 1, got {args.nq}")
    if args.seed < 0:
        raise UsageError(f"--seed expects an integer >= 0, got {args.seed}")
    try:
        if not parse_synth_name(args.name):
            raise UsageError(f"{args.name!r} is not a generated name; expected synth-sift-<n> or synth-float-<n> "
                             "(e.g. synth-sift-20k, synth-sift-1m, synth-float-100k)")
        ds = generate(args.name, seed=args.seed, nq=args.nq)
        ensure_groundtruth(ds, data_dir() / "synth")
    except DatasetError as exc:
        raise _usage_for(exc) from None
    except OSError as exc:  # read-only or full cache folder
        raise UsageError(f"cannot write {args.name} to the cache {data_dir()}: {exc}; set VDBBENCH_DATA to a "
                         f"writable folder with room for it") from None
    _console().print(f"{ds.name}: n={ds.n:,} dim={ds.dim} nq={ds.nq:,} sha256 {ds.sha256}\n"
                     f"cached: {ds.extra['cached']}\nground truth: {ds.extra['groundtruth']}", highlight=False)
    if args.out:
        if args.out.is_dir():
            raise UsageError(f"--out {args.out} is a directory; give a file name such as {ds.name}.hdf5")
        try:
            write_ann_hdf5(args.out, ds)
        except OSError as exc:
            raise UsageError(f"cannot write {args.out}: {exc}") from None
        _console().print(f"wrote {args.out} (ann-benchmarks layout, with neighbors and distances)")
    return 0


def _build(args: argparse.Namespace) -> int:
    from vdbbench.datasets import photo_sift
    from vdbbench.datasets.built import BUILT

    params = photo_sift.Params(nbase=args.nbase, nquery=args.nquery, k=args.k, seed=args.seed,
                               max_side=args.max_side, jobs=args.jobs)
    try:
        params.check()
    except ValueError as exc:
        raise UsageError(f"vdbbench datasets build: {exc}") from None
    if args.images is not None and args.setup:
        raise UsageError("--images builds from a folder of one's own photographs: --setup (the packages) does not apply")
    changed = [f"--{name.replace('_', '-')}" for name in ("seed", "nbase", "nquery", "k", "max_side")
               if getattr(params, name) != getattr(photo_sift.Params(), name)]
    if args.out is None and (args.images is not None or changed):
        what = "--images" if args.images is not None else " ".join(changed)
        raise UsageError(f"{args.name} in the data cache is the set built from the packages with the defaults; "
                         f"with {what} give --out FILE.hdf5")
    out = args.out if args.out is not None else BUILT[args.name].path
    if out.is_dir():
        raise UsageError(f"--out {out} is a directory; give a file name such as {out / (args.name + '.hdf5')}")
    console = _console()
    try:
        if args.images is not None:
            manifest = photo_sift.build_from_folder(args.images, out, params)
        else:
            manifest = photo_sift.build_from_packages(args.work or photo_sift.DEFAULT_WORK, out, params,
                                                      setup=args.setup)
    except photo_sift.OpenCVMissing as exc:
        raise UsageError(str(exc)) from None
    except photo_sift.MissingPhotos as exc:
        hint = "" if args.images is not None or args.setup else " (run with --setup once to fetch and unpack them)"
        raise UsageError(f"{exc}{hint}") from None
    except photo_sift.SourcesUnavailable as exc:
        console.print(f"[bold red]sources unavailable[/]: {_escape(exc)}", highlight=False)
        return 1
    except ValueError as exc:  # too few photographs for a split, an unreadable image
        raise UsageError(f"cannot build {args.name}: {exc}") from None
    except OSError as exc:
        console.print(f"[bold red]build failed[/]: {_escape(exc)}", highlight=False)
        return 1
    for line in photo_sift.summary(manifest):  # plain print: long lines stay whole in a log
        print(line)
    print(f"wrote {out} ({out.stat().st_size / 2**20:.0f} MiB) and {photo_sift.manifest_path(out)}\n"
          f"content sha256 {manifest['content_sha256']}", flush=True)
    return 0
