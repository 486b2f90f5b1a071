"""Type stubs of the compiled engine ``vdbbench._rust_vdb`` (hand-written; keep in sync)."""

from os import PathLike
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Metric = Literal["l2", "ip", "cosine"]
Storage = Literal["f32", "f16", "u8+f16"]
ArrayLike2D = npt.ArrayLike

class VdbError(Exception):
    """Base class of every error raised by the vdbbench engine."""

class InvalidInput(VdbError, ValueError):
    """Wrong dimension, dtype or layout, NaN/inf, k, nprobe or rerank out of range."""

class NotReady(VdbError, RuntimeError):
    """The index cannot do this yet: search or add before train."""

class CorruptFile(VdbError, OSError):
    """A truncated, foreign, unknown-version or checksum-failing index file."""

def simd_level() -> str:
    """The SIMD level searches use now: "scalar", "avx2", "avx512bw", "avx512vnni", "avx512amx" or "neon"."""

def available_simd_levels() -> list[str]:
    """Every SIMD level this CPU can run, scalar first."""

def set_simd_level(level: str | None) -> str:
    """Caps the SIMD level for the whole process (None: the detected level under the
    ``VDBBENCH_SIMD`` environment cap); returns the level now active. Raises InvalidInput for
    an unknown name or a level this CPU lacks."""

def single_query_sharing(policy: str | None = None) -> str:
    """Whether one query per call shares its lists with helper threads, for the whole process:
    "auto" (the default: as the machine allows, not beside other processes' work), "always"
    (whenever a helper is free) or "never"; None only reads it. Returns the policy in force.
    Raises InvalidInput for another name."""

def default_nlist(n: int) -> int:
    """The nlist an index trained on ``n`` vectors uses when given none: round(4 * sqrt(n)),
    within 1..n (at least 1). InvalidInput for n < 0."""

def check_rerank(rerank: int, k: int) -> None:
    """Raises InvalidInput, as a search would, unless ``rerank`` is 0 (the u8 results alone)
    or >= k (k >= 1)."""

def max_threads() -> int:
    """The most threads a call accepts (``threads=``); more raises InvalidInput."""

def supports_reorder(dim: int, metric: str, storage: str) -> bool:
    """Whether an IvfIndex of this dim, metric and storage has the 4-bit prefilter, so that
    ``search(..., reorder=R)`` is accepted: metric "l2", storage "u8+f16", dim a multiple of 4
    in 8..1032. InvalidInput for an unknown metric or storage, or dim < 1."""

def http_bulk_insert(url: str, vectors: np.ndarray, ids: np.ndarray, batch: int = 1000,
                     timeout_s: float = 600.0) -> int:
    """POST /bulk_insert of float32 (n, dim) ``vectors`` with uint64 (n,) ``ids``, ``batch`` rows a
    request, on one kept-alive connection; the sum of the server's ``inserted``. ConnectionError
    when the server cannot be reached, RuntimeError for a non-2xx or off-API answer."""

def http_query(url: str, queries: np.ndarray, order: np.ndarray, top_k: int = 10, clients: int = 4,
               warmup: int = 0, timeout_s: float = 30.0) -> dict:
    """POST /search of float32 ``queries`` rows in uint64 ``order``, ``clients`` requests in flight
    (one thread and connection each), after ``warmup`` rows sent by one client. A dict per position
    of ``order``: ids (m, top_k) int64 (-1 padded), distances (m, top_k) float64, latency_s (m,)
    (NaN where failed); wall_s, errors, first_error, warmup_errors."""

class NullServer:
    """A server on 127.0.0.1 that answers every request at once with ten fixed hits: the client's
    own ceiling."""
    def __init__(self, port: int = 0) -> None: ...
    @property
    def port(self) -> int: ...
    @property
    def url(self) -> str: ...
    def stop(self) -> None: ...

class FlatIndex:
    """Exact (brute-force) search over float32 vectors: the reference.

    Input arrays: float32 C-contiguous arrays are used in place; other real dtypes (float64,
    float16, integers) and layouts are converted once to float32; bool, complex, object and
    string arrays, wrong shapes and NaN/inf raise InvalidInput.
    """

    def __init__(self, dim: int, metric: Metric = "l2") -> None: ...
    def add(self, x: ArrayLike2D) -> None:
        """Appends vectors of shape (n, dim); they get ids ntotal..ntotal+n-1."""
    def search(
        self, queries: ArrayLike2D, k: int = 10, threads: int | None = None
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """(D, I) of shape (nq, k), best first: D is the squared L2 distance for "l2", the
        similarity for "ip"/"cosine"; ties go to the smaller id. 1 <= k <= ntotal."""
    def last_search_stats(self) -> dict[str, float | int | dict[str, dict[str, float]]] | None:
        """Counts and seconds of the last search (see IvfIndex.last_search_stats)."""
    @property
    def ntotal(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def metric(self) -> Metric: ...
    @property
    def is_trained(self) -> bool:
        """Always True: a flat index needs no training."""
    @property
    def bytes(self) -> int:
        """Memory held by the stored vectors."""
    def __len__(self) -> int: ...

class IvfIndex:
    """Inverted-file index: k-means lists, each a contiguous block of ids, u8 codes and f16
    (or f32) vectors.

    storage "f32": exact scan of the probed lists; "f16": half the bytes, scanned with the f32
    query; "u8+f16": u8 codes scanned first (integer L2, or inner product with the offsets
    added back), the best ``rerank`` candidates rescored with their f16 vectors, then cut to k.
    Training with a given ``seed`` gives the same index at any thread count. Search, train and
    add release the interpreter; concurrent searches from several threads are safe (train and
    add wait for them); Ctrl-C raises KeyboardInterrupt. A call that raises leaves the index as
    it was.
    """

    def __init__(
        self,
        dim: int,
        nlist: int | None = None,
        metric: Metric = "l2",
        storage: Storage = "u8+f16",
        seed: int = 0,
    ) -> None:
        """nlist None: round(4 * sqrt(n_train)), clamped to [1, n_train], chosen at train."""
    def train(self, x: ArrayLike2D, threads: int | None = None) -> None:
        """Seeded k-means (k-means++ init, training sets above 256 * nlist subsampled, no
        empty lists) on (n, dim) vectors, and the u8 quantizer for "u8+f16". Needs
        n >= nlist. Refused (InvalidInput) once vectors were added, and for "l2"/"ip" on a
        value beyond +-65504 (the centroids are kept as f16 values)."""
    def add(
        self, x: ArrayLike2D, ids: npt.ArrayLike | None = None, threads: int | None = None
    ) -> None:
        """Adds (n, dim) vectors with ids ntotal..ntotal+n-1, or with ``ids`` (n,) integers
        >= 0. NotReady before train; InvalidInput for a value beyond f16's +-65504 where
        vectors are kept as f16 ("f16", "u8+f16"; "cosine" stores unit rows). Lists are
        filled one after another (in parallel over lists, ``threads`` caps it) and their
        scanned blocks advised onto transparent huge pages on Linux, as after ``load``
        (``VDBBENCH_HUGEPAGES=0`` turns that off)."""
    def search(
        self,
        queries: ArrayLike2D,
        k: int = 10,
        nprobe: int | None = None,
        rerank: int | None = None,
        threads: int | None = None,
        reorder: int | None = None,
        probe_ratio: float | None = None,
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """(D, I) float32 / int64 arrays of shape (nq, k), best first.

        D: squared L2 (as faiss) for "l2", similarity for "ip"/"cosine"; ties go to the
        smaller id; rows with fewer than k hits are padded with id -1 and D = +inf (l2) or
        -inf (ip/cosine).
        nprobe: lists scanned, 1..nlist (None: max(32, ceil(1.6% of nlist)), clamped to
        nlist: 64 of the 4000 lists of a 1M index).
        rerank: "u8+f16" only: u8 candidates rescored with f16 (None: max(64, k), except
        with L2 when every stored vector's u8 codes are exact (integer data such as SIFT) and
        so are the query's: the u8 distance is then the f16 one and the rerank is skipped,
        same results); 0 returns the u8 results alone (distances decoded from the codes);
        0 < rerank < k is refused.
        threads: cap on the threads used (None: all cores). Several queries are spread over
        the threads; a single query whose probed lists hold >= 2048 vectors shares them between
        the calling thread and the others (a helper that has not woken by the time the caller
        is done is skipped, so this never waits on a wake-up). Results do not depend on it.
        reorder: an "l2" "u8+f16" index (dim a multiple of 4): each query's lists are scanned
        first through 4-bit codes (a quarter of the u8 codes' bytes; a product quantizer of 16
        centroids per pair of dims, trained with the index) and only its best ``reorder`` rows
        get their u8 distance (None or 0: the u8 scan alone; 0 < reorder < k is refused, and so
        is a reorder on an index without the prefilter: ``supports_reorder``).
        Results do not depend on how queries are batched. One query per call then runs on the
        calling thread, about twice as fast at equal recall; a batch reads each list's codes
        once for several of its queries (measured 1.15-1.35x the u8 scan on AVX2).
        probe_ratio: "l2" and "cosine": each query probes only those of its nprobe lists whose
        centroid lies within ``probe_ratio`` times the distance of its nearest centroid, and
        at least ceil(nprobe / 4) of them (None or 0: all nprobe; below 1, not finite, or on
        "ip" is refused). A query near one centroid stops early, one between several goes on
        to nprobe, so nprobe becomes a cap: on real SIFT descriptors nprobe 60 with ratio 1.33
        scans ~25% fewer codes than nprobe 48 at the same recall@10.
        Raises InvalidInput (wrong shape/dtype, NaN/inf, k <= 0 or k > ntotal, nprobe,
        rerank, reorder or probe_ratio out of range, threads < 1) or NotReady (before train).
        """
    def last_search_stats(self) -> dict[str, float | int | dict[str, dict[str, float]]] | None:
        """Per-stage figures of the last search, or None before any: ``nq``, ``threads``,
        ``routing_s``, ``prescore_s`` (list scan: u8 codes, or f16/f32 vectors), ``rerank_s``,
        ``topk_s`` (stage seconds are summed over threads; a single query shared between threads
        counts its scan's elapsed time), ``wall_s`` (elapsed),
        ``lists_probed``, ``centroids_scored`` (every centroid per query, or fewer through
        two-level routing), ``codes_scanned``, ``tails_read`` (split u8 codes: tails completed), ``candidates_reranked``, ``bytes_scanned``
        (centroids, scanned rows and reranked rows read: logical bytes, a batch re-reads lists
        from the caches), and ``timers``: seconds of the parts of the stages, summed over threads
        as the stages' are, ``{"routing": {"score", "select", "order"}, "prescore": {"prepare",
        "seed_bounds", "tiles", "tile_offers", "short_runs", "lists", "merge"}}`` (a part the
        search did not take is 0)."""
    def save(self, path: str | PathLike[str]) -> None:
        """Writes the index (versioned format, crc32) through a temporary file renamed into
        place, so a failed save never damages an existing file. OSError on I/O failure."""
    @classmethod
    def load(cls, path: str | PathLike[str]) -> IvfIndex:
        """Reads a file written by ``save``. CorruptFile for a truncated, foreign,
        unknown-version or checksum-failing file; nothing is half-loaded."""
    def list_sizes(self) -> list[int]:
        """Vectors per inverted list (empty before training)."""
    @property
    def ntotal(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def nlist(self) -> int | None:
        """Lists of the trained index; before training the requested nlist (or None)."""
    @property
    def metric(self) -> Metric: ...
    @property
    def storage(self) -> Storage: ...
    @property
    def seed(self) -> int: ...
    @property
    def is_trained(self) -> bool: ...
    @property
    def bytes(self) -> int:
        """Memory of codes, vectors, ids, centroids and quantizer tables."""
    def __len__(self) -> int: ...

class Server:
    """The engine behind the KCORES vector-db-bench HTTP JSON API, served from Rust threads
    (axum on tokio; no interpreter on the request path).

    ``POST /insert {id, vector}`` -> ``{"status": "ok"}``; ``POST /bulk_insert {"vectors":
    [{id, vector}, ...]}`` -> ``{"status": "ok", "inserted": n}``; ``POST /search {vector,
    top_k}`` -> ``{"results": [{id, distance}, ...]}`` best first (distance: squared L2);
    ``POST /build`` builds now and answers the stats; ``GET /stats``; ``GET /health``. Every
    refusal is a 4xx with ``{"error": "..."}`` and the server goes on.

    Inserts are buffered; the index ("l2", "u8+f16") is built once, on the first search or
    ``/build``: k-means on a seeded sample of min(n, max(64 * nlist, 10000)) inserted vectors,
    nlist ``default_nlist(n)`` unless given. Inserts after the build are added to their lists.
    """

    @classmethod
    def start(
        cls,
        host: str = "127.0.0.1",
        port: int = 8080,
        *,
        dim: int | None = None,
        nlist: int | None = None,
        seed: int = 0,
        nprobe: int | None = None,
        rerank: int | None = None,
        reorder: int | None = None,
        probe_ratio: float | None = None,
        threads: int | None = None,
        recall_target: float | None = None,
        index: str | PathLike[str] | None = None,
        max_body_mb: float = 64.0,
        workers: int | None = None,
        search_on: Literal["handler", "blocking"] = "blocking",
        log: bool = False,
    ) -> Server:
        """Listens on host:port (0: any free port) and returns once it does.

        dim: fixed before the first insert (None: the first insert fixes it).
        nprobe / rerank / reorder / probe_ratio: as ``IvfIndex.search`` (reorder and
        probe_ratio 0: off). Defaults for one query per request: reorder 100 where the 4-bit
        prefilter exists, probe_ratio 1.4, nprobe the engine's default (1.6% of the lists, at
        least 32, at most nlist). threads: per request (default 1).
        recall_target: pick nprobe (and reorder / probe ratio where not given) at the build so
        that recall@10 of 500 sampled inserted vectors against their exact neighbours reaches
        it plus 0.005; refused with an ``index`` file that exists. A search whose probed lists
        hold fewer than top_k vectors is repeated over every list (``widened`` in the stats).
        index: start from this saved index when the file exists (ready at once), else save the
        built index there (temporary file renamed into place).
        max_body_mb: larger request bodies get 413. workers: async runtime threads (None: one
        per core). search_on: run a search on tokio's blocking pool (the default) or in the
        async handler itself.
        log: say the build and the chosen settings on stdout.
        Raises InvalidInput for bad settings, OSError when the address cannot be bound or the
        index file read, CorruptFile for a damaged index file."""
    @property
    def port(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def url(self) -> str:
        """``http://host:port``."""
    @property
    def stopped(self) -> bool: ...
    def stats(self) -> dict[str, Any]:
        """What ``GET /stats`` answers: state ("empty", "buffering", "building", "ready"),
        vectors, indexed, buffered, dim, nlist, build (seconds of train, add, tune, save),
        builds, search (the settings), simd, queries, widened, rejected (4xx answers)."""
    def stop(self) -> None:
        """Stops accepting, lets open requests finish (a few seconds at most), stops a build
        in progress. Idempotent."""
    def wait(self, timeout: float | None = None) -> bool:
        """Waits until stopped or ``timeout`` seconds pass; True if stopped. Ctrl-C is seen
        when it returns: wait in short steps."""
    def __enter__(self) -> Server: ...
    def __exit__(self, *exc: object) -> bool: ...
