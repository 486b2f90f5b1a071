"""What every `vdbbench run` sets up before measuring: the output folder and the dataset."""

from __future__ import annotations

import datetime as _dt
from dataclasses import replace
from pathlib import Path

from vdbbench.common.errors import UsageError


def int_list(flag: str, text: str, allow_zero: bool = False) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise UsageError(f"{flag} expects comma-separated integers (e.g. 1,2,4), got {text!r}") from None
    low = 0 if allow_zero else 1
    if not values or any(v < low for v in values):
        raise UsageError(f"{flag} expects integers >= {low}, got {text!r}")
    return values



def check_target_recall(value: float) -> None:
    """--target-recall: a recall in (0, 1]."""
    if not 0.0 < value <= 1.0:
        raise UsageError(f"--target-recall expects a value in (0, 1], got {value}")


def out_dir(args) -> Path:
    if args.out:
        return Path(args.out)
    root = Path("vdbbench-results")
    if args.resume:
        partials = sorted(root.glob("*/*.partial.json")) if root.is_dir() else []
        if not partials:
            raise UsageError("--resume: no interrupted run under ./vdbbench-results; pass --out DIR")
        return partials[-1].parent
    return root / _dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"cannot write results to {out}: {exc.strerror or exc}") from None


def check_same_data(out: Path, ds) -> None:
    """Refuses an --out that already holds results (not a resumable run's .partial.json files)
    measured on other data than ``ds`` (another dataset, or another --queries count): this run
    would write its files beside them (or over some of them), a mixture report, plot and gate
    then refuse. A rerun on the same data, and --resume, pass."""
    from vdbbench.bench.results import dataset_sha256, load_result, measured_on

    here = (dataset_sha256(ds), ds.nq)
    others: dict[tuple, list[str]] = {}
    for f in sorted(out.glob("*.json")):
        if f.name.endswith(".partial.json"):
            continue
        try:
            r = load_result(f)
        except ValueError:  # not a result (or a damaged one): not this check's business
            continue
        if measured_on(r) != here:
            others.setdefault((r["dataset"]["name"], r["dataset"]["nq"]), []).append(f.name)
    if others:
        (name, nq), files = next(iter(others.items()))
        what = f"{name} (nq={nq:,})" if name == ds.name else name
        raise UsageError(
            f"{out} already holds results measured on {what} ({', '.join(files)}), not on {ds.name} "
            f"(nq={ds.nq:,}) as this run: their files would be mixed with this run's; pass another --out "
            "(or remove those files)")


def load_dataset(name: str, queries: int | None, console):
    from vdbbench.bench import data

    try:
        console.print(f"loading dataset {name} (with exact ground truth)")
        ds = data.resolve(name)  # the loader shows its own progress for long downloads / ground truth
    except KeyError as exc:
        msg = exc.args[0] if exc.args else name
        if "valid" not in str(msg):
            msg = f"unknown dataset {name!r}: {msg}; valid: {', '.join(data.known_names())}"
        raise UsageError(str(msg)) from None
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(f"cannot load dataset {name!r}: {exc}") from None
    except OSError as exc:  # DownloadError: offline, or a download that did not verify
        raise UsageError(f"cannot load dataset {name!r}: {exc}") from None
    if queries is not None:
        ds = subset_queries(ds, queries)
    return ds


def subset_queries(ds, nq: int):
    if nq >= ds.nq:
        return ds
    return replace(
        ds, test=ds.test[:nq].copy(), neighbors=ds.neighbors[:nq].copy(), distances=ds.distances[:nq].copy(),
        extra={**ds.extra, "queries_used": nq, "queries_total": ds.nq},
    )
