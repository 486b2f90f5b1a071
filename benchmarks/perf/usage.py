"""What the measurement scripts share: the command line (-h/--help prints the script's docstring)
and, for the paired single-query ones, two builds of the engine loaded on one index file."""
import sys


def help_or_usage(doc: str, required: int = 0) -> None:
    """Print `doc` and exit 0 on -h/--help; print it to stderr and exit 2 when fewer than
    `required` arguments follow the script's name."""
    args = sys.argv[1:]
    if "-h" in args or "--help" in args:
        print(doc.strip())
        sys.exit(0)
    if len(args) < required:
        print(doc.strip(), file=sys.stderr)
        sys.exit(2)


def pair_of_builds(argv: list[str]):
    """For `DATASET INDEX.vdb OLDPKG NPROBE NQ ...`: the first NQ test queries of DATASET, the
    index file loaded by the old build (OLDPKG/oldvdb) and by the installed one, and NPROBE, NQ.
    Returns (queries, {"old": index, "new": index}, nprobe, nq)."""
    import numpy as np

    sys.path.insert(0, argv[3])
    import oldvdb._rust_vdb as old
    import vdbbench._rust_vdb as new
    from vdbbench.datasets.loader import resolve

    ds, _ = resolve(argv[1])
    nprobe, nq = int(argv[4]), int(argv[5])
    q = np.ascontiguousarray(ds.test[:nq], dtype=np.float32)
    return q, {"old": old.IvfIndex.load(argv[2]), "new": new.IvfIndex.load(argv[2])}, nprobe, nq
