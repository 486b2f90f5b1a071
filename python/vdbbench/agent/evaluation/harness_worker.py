"""The candidate process: loads one built extension, builds its index, answers timed searches.

Run by the evaluator as ``python -I harness_worker.py`` in a process group of its own, with an
address-space cap and pinned threads. It imports only the standard library and numpy, keeps
the protocol on private copies of stdin/stdout (whatever the candidate prints goes to stderr),
and sends back ids and the seconds `search` took (wall clock, and the CPU time of the whole
process, all threads included), never the ground truth it does not have.

A timed repeat ("repeat") searches one slice of queries over and over, each pass in a fresh
order drawn from the seed it is given (so candidate and best see the same sequence), until the
passes add up to at least `min_seconds` on the judged clock. Every pass is one `search` call of
the whole slice (the batch shape stays the slice's); each pass's seconds come back one by one,
so the first pass can be told apart from the later ones, with the ids of the first and last.

Frames (both directions): 4-byte big-endian header length, a JSON header, then for each name
in header["arrays"] an 8-byte length and that array in .npy format (no pickles, either way).
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
import time
import traceback


def read_frame(fh):
    import numpy as np

    raw = fh.read(4)
    if len(raw) < 4:
        return None, {}
    (n,) = struct.unpack(">I", raw)
    header = json.loads(fh.read(n).decode("utf-8"))
    arrays = {}
    for name in header.get("arrays", []):
        (m,) = struct.unpack(">Q", fh.read(8))
        arrays[name] = np.load(io.BytesIO(fh.read(m)), allow_pickle=False)
    return header, arrays


def write_frame(fh, header: dict, arrays: dict | None = None) -> None:
    import numpy as np

    arrays = arrays or {}
    header = {**header, "arrays": list(arrays)}
    data = json.dumps(header).encode("utf-8")
    fh.write(struct.pack(">I", len(data)) + data)
    for name in arrays:
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(arrays[name]), allow_pickle=False)
        payload = buf.getvalue()
        fh.write(struct.pack(">Q", len(payload)) + payload)
    fh.flush()


def load_class(path: str, module: str, cls: str):
    from importlib.machinery import ExtensionFileLoader
    from importlib.util import module_from_spec, spec_from_loader

    loader = ExtensionFileLoader(module, path)
    spec = spec_from_loader(module, loader)
    mod = module_from_spec(spec)
    loader.exec_module(mod)
    try:
        return getattr(mod, cls)
    except AttributeError:
        raise AttributeError(f"module {module} has no class {cls!r} (it has: {', '.join(n for n in dir(mod) if not n.startswith('_'))})") from None


def _jsonable_stats(stats):
    try:
        return json.loads(json.dumps(stats, default=float))
    except (TypeError, ValueError):
        return {"repr": repr(stats)[:2000]}


def _ids_of(result):
    import numpy as np

    ids = result[1] if isinstance(result, tuple) and len(result) == 2 else result
    return np.asarray(ids)


def timed_repeat(index, queries, header: dict) -> tuple[dict, dict]:
    """Passes over `queries` in fresh seeded orders until `min_seconds` on the judged clock."""
    import numpy as np

    rng = np.random.default_rng(int(header["seed"]))
    min_seconds = float(header["min_seconds"])
    max_passes = int(header.get("max_passes", 100_000))
    on_cpu = header.get("clock") == "cpu"
    args = header.get("search_args", {})
    passes: list[list[float]] = []  # [cpu seconds, wall seconds] of each pass
    first = last = None
    judged = 0.0
    while True:
        order = rng.permutation(queries.shape[0])
        batch = np.ascontiguousarray(queries[order])
        c0, t0 = time.process_time(), time.perf_counter()
        result = index.search(batch, **args)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        ids = _ids_of(result)
        if ids.ndim != 2 or ids.shape[0] != queries.shape[0]:
            raise ValueError(f"search returned ids of shape {ids.shape}; expected ({queries.shape[0]}, k)")
        back = np.empty_like(ids)
        back[order] = ids  # rows back in the slice's own order
        if first is None:
            first = back
        last = back
        passes.append([cpu, wall])
        judged += cpu if on_cpu else wall
        if judged >= min_seconds or len(passes) >= max_passes:
            break
    reply = {"ok": True, "passes": passes}
    if header.get("stats") and hasattr(index, "last_search_stats"):
        reply["stats"] = _jsonable_stats(index.last_search_stats())
    return reply, {"ids": first, "last_ids": last}


def build_index(cls, header: dict, arrays: dict):
    """The index of a "load": read from header["cache"] when that file exists and the engine can
    load it, else trained and filled from the base vectors (and saved there, when asked and the
    engine can save). Returns (index, reply fields: train_s, add_s, load_s, cache)."""
    cache = header.get("cache")
    can_cache = callable(getattr(cls, "load", None)) and callable(getattr(cls, "save", None))
    if cache and can_cache and os.path.exists(cache):
        t0 = time.perf_counter()
        index = cls.load(cache)
        return index, {"train_s": 0.0, "add_s": 0.0, "load_s": time.perf_counter() - t0, "cache": "hit"}
    index = cls(dim=int(header["dim"]), **header.get("build_args", {}))
    base = arrays["base"]
    t0 = time.perf_counter()
    index.train(base)
    t1 = time.perf_counter()
    index.add(base)
    t2 = time.perf_counter()
    reply = {"train_s": t1 - t0, "add_s": t2 - t1}
    if cache:
        if can_cache:
            tmp = f"{cache}.tmp{os.getpid()}"
            index.save(tmp)
            os.replace(tmp, cache)
            reply["cache"] = "stored"
        else:
            reply["cache"] = "unsupported"
    return index, reply


def main() -> int:
    # Private protocol channels; the candidate's own stdout/stdin become stderr and /dev/null.
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    index = None
    while True:
        header, arrays = read_frame(proto_in)
        if header is None or header.get("cmd") == "exit":
            return 0
        try:
            cmd = header["cmd"]
            if cmd == "load":
                cls = load_class(header["path"], header["module"], header["cls"])
                index, reply = build_index(cls, header, arrays)
                write_frame(proto_out, {"ok": True, **reply, "has_stats": hasattr(index, "last_search_stats")})
            elif cmd == "search":
                queries = arrays["queries"]
                c0, t0 = time.process_time(), time.perf_counter()
                result = index.search(queries, **header.get("search_args", {}))
                seconds = time.perf_counter() - t0
                cpu_seconds = time.process_time() - c0
                ids = result[1] if isinstance(result, tuple) and len(result) == 2 else result
                import numpy as np

                ids = np.asarray(ids)
                reply = {"ok": True, "seconds": seconds, "cpu_seconds": cpu_seconds}
                if header.get("stats") and hasattr(index, "last_search_stats"):
                    reply["stats"] = _jsonable_stats(index.last_search_stats())
                write_frame(proto_out, reply, {"ids": ids})
            elif cmd == "repeat":
                write_frame(proto_out, *timed_repeat(index, arrays["queries"], header))
            else:
                write_frame(proto_out, {"ok": False, "error": f"unknown command {cmd!r}"})
        except BaseException as exc:  # a panic in candidate code arrives as PanicException
            tb = traceback.format_exc(limit=4)
            write_frame(proto_out, {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": tb[-2000:]})
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                return 1


if __name__ == "__main__":
    sys.exit(main())
