"""The session workspace: its own git repository, path guards for the model's edits, and builds."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vdbbench.agent.core.task import TaskCard

SESSION_BRANCH = "session"
# Every accepted commit's message ends with this line and a JSON object of its metrics, so a
# resume can recover an accepted change whose decision a crash kept out of the journal.
METRICS_TRAILER = "vdbbench-metrics: "
# Characters of a build's or a test run's output kept in the journal (and of a worker's stderr
# quoted in a verdict): enough for the last error and its context.
TAIL_CAP = 1_500


def tail(text: str, cap: int = TAIL_CAP) -> str:
    """The last `cap` characters of `text`."""
    return text[-cap:]
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "vdbbench agent",
    "GIT_AUTHOR_EMAIL": "agent@vdbbench.invalid",
    "GIT_COMMITTER_NAME": "vdbbench agent",
    "GIT_COMMITTER_EMAIL": "agent@vdbbench.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


class PathRefused(Exception):
    """The model asked for a path it may not touch; the message says why and what is allowed."""


class WorkspaceError(RuntimeError):
    """A git or file-system operation on the session workspace failed."""


def git(cwd: Path, *args: str, check: bool = True, input: bytes | None = None) -> str:
    env = {**os.environ, **_GIT_ENV, "GIT_CONFIG_GLOBAL": os.devnull}
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, input=input, capture_output=True)
    if check and proc.returncode != 0:
        raise WorkspaceError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode(errors="replace")


def _repo_of_card(card: TaskCard) -> Path:
    """The start repository (load_task made it absolute)."""
    return Path(card.start.repo).resolve()


def create_workspace(card: TaskCard, dest: Path) -> str:
    """Fill ``dest`` with the card's start point as a fresh repository; return the first commit.

    The start is read with `git archive` (read-only on the user's repository: no clone, no
    worktree, no hard links into its object store), so the user's checkout and .git are never
    written to.
    """
    src = _repo_of_card(card)
    if not (src / ".git").exists() and not (src / "HEAD").exists():
        raise WorkspaceError(f"start repository {src} is not a git repository")
    rev = card.start.rev
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=src, capture_output=True, text=True)
    if sha.returncode != 0:
        raise WorkspaceError(f"start revision {rev!r} not found in {src}: {sha.stderr.strip()}")
    sha = sha.stdout.strip()
    tree = f"{sha}:{card.start.subdir.strip('/')}" if card.start.subdir else sha
    dest.mkdir(parents=True, exist_ok=False)
    with tempfile.TemporaryFile() as tmp:
        proc = subprocess.run(["git", "archive", "--format=tar", tree], cwd=src, stdout=tmp, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            raise WorkspaceError(f"git archive {tree} failed: {proc.stderr.decode(errors='replace').strip()}")
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(dest, filter="data")
    git(dest, "init", "-q", "-b", SESSION_BRANCH)
    git(dest, "config", "core.autocrlf", "false")
    (dest / ".git" / "info" / "exclude").write_text("target/\n")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "--allow-empty", "-m", f"start: {src.name}@{sha[:12]}{'/' + card.start.subdir if card.start.subdir else ''}")
    return head(dest)


def _tree_walk(root: Path):
    """`os.walk` of a tree, sorted, without its own .git and target folders (top level only: a
    source folder named target deeper down is the tree's)."""
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not (dirpath == str(root) and d in (".git", "target")))
        yield dirpath, sorted(files)


def _touch_all(root: Path) -> None:
    """Stamp every file of a tree (its .git and target folders aside) with the current time."""
    now = time.time()
    for dirpath, files in _tree_walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.utime(p, (now, now))


def head(ws: Path) -> str:
    return git(ws, "rev-parse", "HEAD").strip()


def _specs(card: TaskCard) -> list[str]:
    """The card's editable globs as git pathspecs: only these files ever enter a commit."""
    return [f":(glob){p}" for p in card.editable]


def is_clean(ws: Path, card: TaskCard) -> bool:
    """True when every editable file equals the best commit (HEAD of the session branch)."""
    out = git(ws, "status", "--porcelain", "--untracked-files=all", "--", *_specs(card))
    return out.strip() == ""


def diff_vs_best(ws: Path, card: TaskCard, stat: bool = False) -> str:
    git(ws, "add", "--intent-to-add", "--", *_specs(card), check=False)
    return git(ws, "diff", *(["--stat"] if stat else []), "HEAD", "--", *_specs(card)).strip()


def _add_editable(ws: Path, card: TaskCard) -> None:
    """Stage every change of the editable files. A glob that matches no file, in the working copy
    or the best (a folder the model has not made yet), is left out: git refuses a pathspec that
    matches nothing."""
    specs = [s for s in _specs(card)
             if git(ws, "ls-files", "--cached", "--others", "--exclude-standard", "--", s).strip()]
    if specs:
        git(ws, "add", "-A", "--", *specs)


def commit_editable(ws: Path, card: TaskCard, message: str) -> str:
    _add_editable(ws, card)
    git(ws, "commit", "-q", "-m", message)
    return head(ws)


def revert_to_best(ws: Path, card: TaskCard) -> None:
    """Editable files back to the best commit (other files are never changed by the model)."""
    git(ws, "reset", "-q", "--", *_specs(card), check=False)
    git(ws, "checkout", "-q", "HEAD", "--", *_specs(card), check=False)
    git(ws, "clean", "-q", "-fd", "--", *_specs(card))


# -- path guard --------------------------------------------------------------------------------

def resolve_path(ws: Path, card: TaskCard, rel: str, *, for_write: bool) -> Path:
    """The workspace file the model means, or PathRefused saying why.

    Refused: absolute paths, `..`, anything through a symlink, the .git folder, Cargo.toml,
    build.rs and lock files, and (for writes) anything outside the card's editable globs.
    """
    if not isinstance(rel, str) or rel.strip() == "":
        raise PathRefused("path must be a non-empty string relative to the workspace root")
    rel = rel.strip()
    if "\0" in rel:
        raise PathRefused(f"{rel!r} contains a NUL character; no file name can")
    if rel.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", rel):
        raise PathRefused(f"{rel!r} is absolute; paths are relative to the workspace root")
    parts = [p for p in rel.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PathRefused(f"{rel!r} contains '..'; paths must stay inside the workspace")
    if parts and parts[0] == ".git":
        raise PathRefused(f"{rel!r} is inside .git; the repository is the harness's, not yours")
    norm = "/".join(parts)
    cur = ws
    for p in parts:
        cur = cur / p
        if cur.is_symlink():
            raise PathRefused(f"{rel!r} goes through a symbolic link ({cur.relative_to(ws)}); refused")
        if cur.is_file() and cur != ws.joinpath(*parts):
            raise PathRefused(f"{rel!r} goes through {cur.relative_to(ws).as_posix()}, which is a file, not a folder")
    if for_write and not card.is_editable(norm):
        raise PathRefused(
            f"{rel!r} is not editable in this task; you may write only {', '.join(card.editable)} "
            "(never Cargo.toml, Cargo.lock or build.rs)"
        )
    return ws / norm if norm else ws


# -- builds ------------------------------------------------------------------------------------

@dataclass
class BuildResult:
    ok: bool
    seconds: float
    library: Path | None  # the built extension module, copied out of the target dir
    errors: str  # first compiler errors with file:line (empty when ok)
    stderr_tail: str
    warnings: str = ""  # the first compiler warnings of the crate's own code, capped


def _cargo_env(target_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir), "PYO3_PYTHON": sys.executable,
           "PYO3_BUILD_EXTENSION_MODULE": "1", "CARGO_TERM_COLOR": "never"}
    env.update(extra)
    return env


def _run_limited(cmd: list[str], cwd: Path, env: dict, timeout: float) -> tuple[int | None, str, str]:
    """Run in a new process group; on timeout kill the group. Returns (rc or None, out, err).

    The group is killed too when the wait is interrupted (Ctrl-C, SIGTERM): in a session of its
    own it gets no Ctrl-C from the terminal, and a cargo build or test run left behind would go
    on burning the cores the resumed session's judge times on."""
    import signal

    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        return None, out.decode(errors="replace"), err.decode(errors="replace")
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise


def first_errors(messages: list[dict], limit: int = 3, max_chars: int = 4000,
                 levels: tuple[str, ...] = ("error", "error: internal compiler error")) -> str:
    """The first compiler messages of `levels` (errors by default), rendered as rustc prints them
    (file:line, code, help); a count of the ones left out closes the text."""
    rendered = [m["message"].get("rendered") or m["message"].get("message", "")
                for m in messages if m.get("reason") == "compiler-message"
                and m.get("message", {}).get("level") in levels]
    rendered = list(dict.fromkeys(rendered))  # a crate's lib and its tests report the same error twice
    total = len(rendered)
    text = "\n".join(r.rstrip() for r in rendered[:limit])
    if total > limit:
        text += f"\n... and {total - limit} more {levels[0]}(s)"
    return text[:max_chars]


def first_warnings(messages: list[dict]) -> str:
    """Warnings (unused code, lints), at most five and 3,000 characters, with how many in all."""
    n = sum(1 for m in messages if m.get("reason") == "compiler-message" and m.get("message", {}).get("level") == "warning")
    if n == 0:
        return ""
    return f"{n} warning(s):\n" + first_errors(messages, limit=5, max_chars=3000, levels=("warning",))


# In a cargo target folder: the digest of the tree its last successful build or test run came
# from (none while one runs, or after one failed).
TREE_STAMP = ".vdbbench-last-tree"


def _tree_digest(ws: Path) -> str:
    """What cargo may read of a tree: every file's path and bytes (symlinks by their target),
    .git and target folders aside."""
    h = hashlib.sha256()
    for dirpath, files in _tree_walk(ws):
        for name in files:
            p = os.path.join(dirpath, name)
            h.update(os.path.relpath(p, ws).encode() + b"\0")
            if os.path.islink(p):
                h.update(b"-> " + os.readlink(p).encode())
            else:
                with open(p, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def _claim_target(ws: Path, target_dir: Path) -> str:
    """Before a build or test run of ``ws`` in ``target_dir`` (inside its turn): unless the
    folder's outputs are known to come from these very sources, stamp this tree's files with the
    current time. Returns the tree's digest, for `_stamp_target` once the run succeeded.

    Cargo keys a workspace member's outputs by its path relative to the workspace root, not by
    where the tree lives, and calls them fresh when no source is newer than the last build. A
    tree extracted by `git archive` (files dated at their commit) or a session's edit written
    before another tree's build in the same folder began would look older than that build, and
    cargo would hand back the other tree's library: a syntax error "built" in 0.1 s. The
    stamps make it compile these sources."""
    digest = _tree_digest(ws)
    stamp = target_dir / TREE_STAMP
    try:
        last = stamp.read_text()
    except OSError:
        last = None
    if last != digest:
        _touch_all(ws)
    stamp.unlink(missing_ok=True)
    return digest


def _stamp_target(target_dir: Path, digest: str) -> None:
    """Records that ``target_dir``'s outputs now come from the tree of ``digest``."""
    stamp = target_dir / TREE_STAMP
    tmp = stamp.with_name(stamp.name + ".tmp")
    tmp.write_text(digest)
    os.replace(tmp, stamp)


@contextmanager
def _target_turn(target_dir: Path):
    """Sessions that share a cargo target folder take turns from a build to the copy of its
    library (and through a test run): cargo locks the build, not the file it leaves behind, so
    another session's build could replace the library before this one copies it, and one
    source would be judged with another's binary. No-op where fcntl is missing (Windows)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    target_dir.mkdir(parents=True, exist_ok=True)
    with open(target_dir / ".vdbbench-turn.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build(ws: Path, card: TaskCard, target_dir: Path, out_dir: Path) -> BuildResult:
    """cargo build the extension crate (or a served card's server binary); copy the product to
    ``out_dir/<card.artifact>``."""
    with _target_turn(target_dir):
        digest = _claim_target(ws, target_dir)
        res = _build(ws, card, target_dir, out_dir)
        if res.ok:
            _stamp_target(target_dir, digest)
        return res


def _build(ws: Path, card: TaskCard, target_dir: Path, out_dir: Path) -> BuildResult:
    b = card.build
    manifest = ws / b.manifest
    # Plain JSON: rustc's diagnostics arrive as compiler messages with their rendered text (with
    # json-render-diagnostics cargo prints them to stderr instead, and no warning was ever seen).
    served = card.evaluation.served  # the crate's server binary, not an extension module
    target = ["--bin", card.entry.module] if served else ["--lib"]
    cmd = ["cargo", "build", *target, "--message-format=json", "--manifest-path", str(manifest)]
    cmd += ["--release"] if b.profile == "release" else ["--profile", b.profile]
    if b.package:
        cmd += ["-p", b.package]
    if b.features:
        cmd += ["--features", ",".join(b.features)]
    t0 = time.perf_counter()
    rc, out, err = _run_limited(cmd, ws, _cargo_env(target_dir, b.env), b.timeout_s)
    seconds = time.perf_counter() - t0
    messages = []
    for line in out.splitlines():
        try:
            messages.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    err_tail = err[-3000:]
    if rc is None:
        return BuildResult(False, seconds, None, f"build timed out after {b.timeout_s:.0f} s", err_tail)
    if rc != 0:
        errors = first_errors(messages) or _stderr_errors(err)
        return BuildResult(False, seconds, None, errors, err_tail)
    if served:
        libs = [Path(m["executable"]) for m in messages if m.get("reason") == "compiler-artifact" and m.get("executable")]
        if not libs:
            return BuildResult(False, seconds, None, f"the build produced no binary named {card.entry.module!r}", err_tail)
    else:
        libs = [Path(f) for m in messages if m.get("reason") == "compiler-artifact"
                and "cdylib" in m.get("target", {}).get("kind", []) for f in m.get("filenames", [])
                if f.endswith((".so", ".dylib", ".pyd", ".dll"))]
        if not libs:
            return BuildResult(False, seconds, None, "the build produced no cdylib; the crate must have crate-type = [\"cdylib\"]", err_tail)
    out_dir.mkdir(parents=True, exist_ok=True)
    dest = out_dir / card.artifact
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.copy2(libs[-1], tmp)
    os.replace(tmp, dest)
    return BuildResult(True, seconds, dest, "", err_tail, first_warnings(messages))


def _stderr_errors(err: str, limit: int = 40) -> str:
    lines = err.splitlines()
    idx = [i for i, line in enumerate(lines) if line.startswith("error")]
    if not idx:
        return "\n".join(lines[-limit:])
    return "\n".join(lines[idx[0]: idx[0] + limit])


@dataclass
class TestResult:
    ok: bool
    seconds: float
    summary: str
    failures: str  # failing test names and their assertion text (or the compiler errors)
    output_tail: str
    compiled: bool = True  # False: the crate or its tests did not build, no test ran


def _test_summary(text: str) -> str:
    """All `test result:` lines of a cargo test run added up: "31 passed, 0 failed, 1 ignored (4 test binaries)"."""
    totals = {"passed": 0, "failed": 0, "ignored": 0}
    lines = re.findall(r"^test result: .*$", text, flags=re.M)
    for line in lines:
        for key in totals:
            m = re.search(rf"(\d+) {key}", line)
            totals[key] += int(m.group(1)) if m else 0
    if not lines:
        return "no test summary"
    return ", ".join(f"{v} {k}" for k, v in totals.items()) + f" ({len(lines)} test binaries)"


def run_tests(ws: Path, card: TaskCard, target_dir: Path) -> TestResult:
    """cargo test of the candidate's core crate."""
    t = card.tests
    manifest = ws / (t.manifest or card.build.manifest)
    cmd = ["cargo", "test", "--release", "--message-format=json", "--manifest-path", str(manifest)]
    if t.package:
        cmd += ["-p", t.package]
    env = _cargo_env(target_dir, card.build.env)
    env.pop("PYO3_BUILD_EXTENSION_MODULE", None)
    t0 = time.perf_counter()
    with _target_turn(target_dir):
        digest = _claim_target(ws, target_dir)
        rc, out, err = _run_limited(cmd, ws, env, t.timeout_s)
        if rc == 0:
            _stamp_target(target_dir, digest)
    seconds = time.perf_counter() - t0
    messages, plain = [], []
    for line in out.splitlines():
        try:
            messages.append(json.loads(line))
        except json.JSONDecodeError:
            plain.append(line)
    text = "\n".join(plain)
    summary = _test_summary(text)
    if rc is None:
        return TestResult(False, seconds, f"tests timed out after {t.timeout_s:.0f} s", text[-2000:], text[-3000:])
    if rc == 0:
        return TestResult(True, seconds, summary, "", text[-3000:])
    compile_errors = first_errors(messages)
    if not compile_errors and not re.search(r"^test result: ", text, flags=re.M) and re.search(r"^error", err, flags=re.M):
        compile_errors = _stderr_errors(err)  # cargo's own errors (a manifest, a linker): no test ran
    if compile_errors:
        return TestResult(False, seconds, "the tests did not compile", compile_errors, err[-3000:], compiled=False)
    failed = re.findall(r"^test (\S+) \.\.\. FAILED$", text, flags=re.M)
    blocks = re.findall(r"^---- (\S+) stdout ----\n(.*?)(?=^---- |^failures:$|\Z)", text, flags=re.M | re.S)
    detail = "\n".join(f"{name}:\n{body.strip()[:800]}" for name, body in blocks[:5])
    failures = (f"failed: {', '.join(failed)}\n" if failed else "") + (detail or (text + err)[-2000:])
    return TestResult(False, seconds, summary, failures, text[-3000:])


def prepare_commit(ws: Path, card: TaskCard, message: str) -> str:
    """Stage the editable files and make a commit object on top of HEAD without moving the
    branch (so it can be audited first); `adopt_commit` makes it the best."""
    _add_editable(ws, card)
    tree = git(ws, "write-tree").strip()
    return git(ws, "commit-tree", tree, "-p", "HEAD", "-m", message).strip()


def adopt_commit(ws: Path, sha: str) -> None:
    git(ws, "update-ref", f"refs/heads/{SESSION_BRANCH}", sha)
    git(ws, "reset", "-q")  # index = new HEAD; the working copy already holds these files


def unstage(ws: Path) -> None:
    git(ws, "reset", "-q")


def commit_metrics(ws: Path, rev: str) -> dict:
    """The metrics an accepted commit's message carries after METRICS_TRAILER ({} when none)."""
    metrics: dict = {}
    for line in git(ws, "log", "-1", "--format=%B", rev).splitlines():
        if line.startswith(METRICS_TRAILER):
            metrics = json.loads(line[len(METRICS_TRAILER):])
    return metrics


def branch_commits(ws: Path) -> list[str]:
    """The session branch's commits after the start, oldest first: each one accepted change."""
    start = start_commit(ws)
    return git(ws, "rev-list", "--first-parent", "--reverse", f"{start}..HEAD").split()


def commit_iteration(ws: Path, rev: str) -> int | None:
    """The iteration an accepted commit was submitted at ("iteration N: ..." is its subject)."""
    m = re.match(r"iteration (\d+):", git(ws, "log", "-1", "--format=%s", rev))
    return int(m.group(1)) if m else None


def start_commit(ws: Path) -> str:
    return git(ws, "rev-list", "--max-parents=0", "HEAD").split()[0]


def export_tree(ws: Path, rev: str, dest: Path) -> None:
    """The files of commit ``rev`` in a plain folder (used to rebuild the best on resume)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tempfile.TemporaryFile() as tmp:
        subprocess.run(["git", "archive", "--format=tar", rev], cwd=ws, stdout=tmp, check=True)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(dest, filter="data")
