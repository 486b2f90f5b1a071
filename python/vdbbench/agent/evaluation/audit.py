"""Audit of a new best: a static scan of its diff for known ways to game a benchmark, the suspicious-jump test, and the combined verdict with the fresh-query re-evaluation."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from vdbbench.common.recall import RECALL_TARGET

# (rule, severity, pattern on an added line with comments stripped, what it means)
# "flag" findings make the verdict "flagged"; "note" findings are recorded but do not.
_RULES: tuple[tuple[str, str, re.Pattern[str], str], ...] = tuple(
    (rule, sev, re.compile(pat), why)
    for rule, sev, pat, why in (
        ("filesystem", "flag",
         r"\bstd::fs\b|\bfs::(read|write|File|OpenOptions|read_to_string|read_dir|copy|rename|create_dir)|\bFile::(open|create)\b|\bOpenOptions::new\b|\bread_to_string\s*\(|\bmmap\b|\bMmap\b",
         "reads or writes files: the engine gets its data from the harness only"),
        ("outside-path", "flag",
         r"\binclude_(bytes|str)!\s*\(|\"(/[A-Za-z_.~]|~/|\.\./)[^\"]*\"|\bhome_dir\s*\(|\btemp_dir\s*\(",
         "embeds a file at build time or names a path outside the workspace (absolute, home, temp, through ..)"),
        ("environment", "flag",
         r"\benv::(var|vars|var_os|set_var|remove_var|args)\b|\b(option_)?env!\s*\(",
         "reads or changes environment variables or arguments the harness controls"),
        ("process", "flag",
         r"\bstd::process\b|\bprocess::(Command|exit|abort|id)\b|\bCommand::new\b|\blibc::(fork|exec\w*|system|kill|setpriority|sched_setaffinity|dlopen)\b",
         "spawns, signals or exits processes"),
        ("network", "flag",
         r"\bstd::net\b|\bTcp(Stream|Listener)\b|\bUdpSocket\b|\b(reqwest|hyper|ureq|tokio::net)\b",
         "opens network connections"),
        ("thread-pool", "note",
         r"\bThreadPoolBuilder\b",
         "builds its own thread pool (fine when it honours the threads= argument; the harness pins the process)"),
        ("threads", "flag",
         r"\bbuild_global\s*\(|\b(RAYON|OMP|OPENBLAS|MKL)_NUM_THREADS\b|\bsched_setaffinity\b|\bcore_affinity\b|\bset_priority\b",
         "changes the thread settings the harness pins"),
        ("timer", "flag",
         r"\bthread::sleep\b|\bSystemTime\b|\bUNIX_EPOCH\b|\bclock_gettime\b|\brdtsc\b|\bperf_counter\b|\btime\.time\b",
         "touches the clock or sleeps (the harness owns the timing)"),
        ("timer-read", "note",
         r"\bInstant::now\s*\(",
         "reads a monotonic clock (fine for per-stage statistics; must not change results)"),
        ("global-state", "note",
         r"\bstatic\s+mut\b|\bthread_local!|\blazy_static!|\b(OnceLock|OnceCell|LazyLock|Lazy)\s*<[^>]*(Mutex|RwLock|HashMap|BTreeMap|Vec|RefCell)|\bstatic\s+\w+\s*:\s*[^=]*(Mutex|RwLock|HashMap|AtomicPtr)",
         "keeps mutable state across calls in a global (a place to cache answers)"),
        ("query-hash", "flag",
         r"\b(DefaultHasher|SipHasher|FxHasher|AHasher|XxHash\w*|Xxh3|crc32\w*|blake3|sha2|md5)\b|\.hash\s*\(\s*&mut\b|\bhash_slice\b|\bto_bits\s*\(\s*\)\s*\)?\s*\.hash|HashMap\s*<\s*(Vec\s*<\s*(u8|u32|u64|f32)|\[\s*(u8|u32|u64)|u64\s*,\s*\(?\s*Vec)|\bcast_slice::<\s*f32\s*,\s*u8",
         "hashes vector/query contents or keys a map by them (answers cached by query bytes)"),
        ("result-cache", "note",
         r"(?i)\b\w*(cache|memo)\w*\s*[:=].*\b(HashMap|BTreeMap|HashSet|LruCache|lru)\b|\b(HashMap|BTreeMap)\b.*\b\w*(cache|memo)\w*",
         "stores results in a cache keyed across search calls"),
        ("size-threshold", "note",
         r"\b(n|nq|nb|ntotal|n_?queries|num_?queries|n_?base|rows|count|size)\b\s*(>=|<=|>|<)\s*\d[\d_]{3,}\b",
         "switches behaviour at a size threshold (fine for work splitting; check it is not tuned to the test set)"),
        ("magic-size", "flag",
         r"\b(n|nq|nb|ntotal|n_?queries|num_?queries|n_?base|rows|count|size)\b\s*(==|!=)\s*\d[\d_]{3,}\b|\blen\s*\(\s*\)\s*(==|!=)\s*\d[\d_]{3,}\b|\b\d[\d_]{3,}\s*(==|!=)\s*\w+|(^|[{,])\s*\d[\d_]{3,}\s*(\|\s*\d[\d_]*\s*)*=>",
         "special-cases a dataset or query-set size (a magic number of n or nq)"),
        ("unsafe-ffi", "note",
         r"\bextern\s+\"C\"\s*\{|#\[link\(",
         "declares foreign functions"),
    )
)

_ESCALATED_BY_QUERY_HASH = frozenset({"global-state", "result-cache"})
_CARGO_DEP = re.compile(r"^\s*[A-Za-z0-9_-]+\s*=\s*(\"|\{)")


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str  # "flag" or "note"
    where: str  # "path:line" in the new file, or a label such as "re-evaluation"
    text: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.where}: {self.text}"


@dataclass(frozen=True)
class AuditResult:
    """`verdict` is "clean" or "flagged"; `findings` explain it (notes included)."""

    verdict: str
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def flagged(self) -> bool:
        return self.verdict == "flagged"

    def texts(self) -> list[str]:
        """The findings as the journal's `audit.findings` list of strings."""
        return [str(f) for f in self.findings]


def _strip_comment(line: str) -> str:
    """The code part of a Rust line: `//` comments removed (not inside a string literal)."""
    in_str = False
    i = 0
    while i < len(line) - 1:
        c = line[i]
        if c == "\\" and in_str:
            i += 2
            continue
        if c == '"':
            in_str = not in_str
        elif not in_str and line.startswith("//", i):
            return line[:i]
        i += 1
    return line


def _added_lines(diff_text: str):
    """(path, new-file line number, text) of each added line of a unified diff."""
    path = None
    line_no = 0
    for raw in diff_text.splitlines():
        if raw.startswith("+++ "):
            target = raw[4:].strip()
            path = None if target == "/dev/null" else re.sub(r"^b/", "", target.split("\t")[0])
            continue
        if raw.startswith("--- ") or raw.startswith("diff --git") or raw.startswith("index "):
            continue
        m = re.match(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@", raw)
        if m:
            line_no = int(m.group(1))
            continue
        if path is None:
            continue
        if raw.startswith("+"):
            yield path, line_no, raw[1:]
            line_no += 1
        elif raw.startswith(" "):
            line_no += 1


def audit_diff(diff_text: str) -> AuditResult:
    """Scan the added lines of a unified diff for benchmark gaming; any "flag" finding flags it."""
    findings: list[Finding] = []
    in_block_comment = False
    for path, line_no, text in _added_lines(diff_text):
        where = f"{path}:{line_no}"
        name = path.rsplit("/", 1)[-1]
        if name == "build.rs":
            findings.append(Finding("build-script", "flag", where, "adds or changes a build script (runs code at build time)"))
            continue
        if name == "Cargo.toml":
            if _CARGO_DEP.match(text) and not re.match(r"^\s*(name|version|edition|license|publish|resolver|crate-type|opt-level|lto|codegen-units|debug|panic|rust-version)\s*=", text):
                findings.append(Finding("dependency", "flag", where, f"changes the manifest: {text.strip()[:120]}"))
            continue
        if not name.endswith((".rs", ".py", ".c", ".h", ".cpp")):
            continue
        code = text
        if in_block_comment:
            if "*/" in code:
                code = code.split("*/", 1)[1]
                in_block_comment = False
            else:
                continue
        if "/*" in code and "*/" not in code.split("/*", 1)[1]:
            code = code.split("/*", 1)[0]
            in_block_comment = True
        code = _strip_comment(code)
        if not code.strip():
            continue
        for rule, severity, pattern, why in _RULES:
            if pattern.search(code):
                findings.append(Finding(rule, severity, where, f"{why}: `{code.strip()[:120]}`"))
    # State kept across calls is common and legitimate (a pool of thread pools, decoded lists);
    # together with hashing query contents it is the shape of an answer cache, and flags.
    if any(f.rule == "query-hash" for f in findings):
        findings = [Finding(f.rule, "flag", f.where, f.text) if f.rule in _ESCALATED_BY_QUERY_HASH else f for f in findings]
    verdict = "flagged" if any(f.severity == "flag" for f in findings) else "clean"
    return AuditResult(verdict, tuple(findings))


def jump_suspicious(best_before_qps: float | None, new_qps: float | None, factor: float | None) -> bool:
    """True when one step multiplies the best QPS by `factor` or more (None/<= 1: never)."""
    if not factor or factor <= 1 or not best_before_qps or best_before_qps <= 0 or new_qps is None:
        return False
    return new_qps / best_before_qps >= factor


def verdict(
    static_result: AuditResult,
    fresh_eval: Mapping[str, Any] | None,
    accepted_eval: Mapping[str, Any],
    tolerance: float = 0.25,
    recall_floor: float = RECALL_TARGET,
    best_before_qps: float | None = None,
    jump_factor: float | None = None,
    cache_ratio: float | None = None,
    cache_factor: float = 1.5,
    later_recall10: float | None = None,
) -> AuditResult:
    """Combine the static audit with the re-evaluation of the new best on fresh held-out queries.

    Flagged when the static audit flags; when the fresh evaluation is missing; or when on fresh
    queries recall falls under `recall_floor` or QPS falls more than `tolerance` (a fraction)
    under the QPS of seen queries (a speed that only exists for queries seen before is a
    cache): the fresh evaluation's own `seen_qps` (held-out queries timed in turns with the
    fresh ones) when it has one, else what the accepting evaluation measured. A jump over `best_before_qps` of `jump_factor` or more is recorded as a
    finding and audited harder: the fresh-query tolerance is halved for it. (A jump alone does
    not flag: the first real index over a brute-force scan is legitimately worth 10-50x.)

    Repeats cycle through their queries, so two more checks keep answers cached for queries seen
    earlier in a repeat from paying: `cache_ratio` (how much faster the later passes ran than
    the first, over the same ratio for the best) at `cache_factor` or more flags, and so does a
    `later_recall10` (the recall of the last pass) under the floor.
    """
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be a fraction in [0, 1), got {tolerance}")
    findings = list(static_result.findings)
    acc_qps = accepted_eval.get("qps")
    if jump_suspicious(best_before_qps, acc_qps, jump_factor):
        tolerance = tolerance / 2
        findings.append(Finding("jump", "note", "re-evaluation",
                                f"QPS jumped {acc_qps / best_before_qps:.1f}x in one step "
                                f"({best_before_qps:,.0f} -> {acc_qps:,.0f}), at or over the suspicious factor "
                                f"{jump_factor}: fresh queries must hold it within {tolerance:.0%}"))
    if cache_ratio is not None and cache_ratio >= cache_factor:
        findings.append(Finding("cache", "flag", "re-evaluation",
                                f"the later passes over the same queries ran {cache_ratio:.2f}x faster than the first "
                                f"(relative to the best), at or over {cache_factor}: answers cached for seen queries?"))
    if later_recall10 is not None and later_recall10 < recall_floor:
        findings.append(Finding("cache", "flag", "re-evaluation",
                                f"recall@10 of the last pass over the held-out queries is {later_recall10:.4f}, under the "
                                f"floor {recall_floor}, though the first pass met it"))
    if fresh_eval is None:
        findings.append(Finding("re-evaluation", "flag", "re-evaluation", "no fresh-query evaluation was run"))
    else:
        f_qps, f_rec = fresh_eval.get("qps"), fresh_eval.get("recall10")
        if f_rec is None or f_rec < recall_floor:
            findings.append(Finding("re-evaluation", "flag", "re-evaluation",
                                    f"recall@10 on fresh queries is {f_rec}, under the floor {recall_floor}"))
        # Against the same process on held-out queries it had seen, timed in turns with the fresh
        # ones (load hits both alike); without that, against the accepting evaluation.
        seen_qps = fresh_eval.get("seen_qps")
        ref_qps, ref_what = ((seen_qps, "on held-out queries it had answered before, timed in turns with them")
                             if seen_qps else (acc_qps, "measured when it was accepted"))
        if f_qps is None or (ref_qps and f_qps < ref_qps * (1 - tolerance)):
            findings.append(Finding(
                "re-evaluation", "flag", "re-evaluation",
                f"QPS on fresh queries {f_qps if f_qps is None else f'{f_qps:,.0f}'} is more than {tolerance:.0%} under "
                f"the {ref_qps:,.0f} {ref_what} (answers cached for seen queries?)"))
    return AuditResult("flagged" if any(f.severity == "flag" for f in findings) else "clean", tuple(findings))
