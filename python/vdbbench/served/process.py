"""Servers as child processes: any command that serves the API on a port, a Cargo folder built
and started as the seed harness starts a leaderboard entry (``PORT`` in the environment,
pinned with taskset), and our own ``vdbbench serve``."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vdbbench.served.client import ServedError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The CPUs this process could run on when it started: a run that pins its own client threads
# (--client-cpus) may still start a server on the others.
_USABLE = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset(range(os.cpu_count() or 1))


def parse_cpus(text: str | None) -> set[int] | None:
    """A taskset-style CPU list ("0", "0-1", "0,2-3") as a set; None or "" for no pinning.
    Raises ValueError for a malformed list or CPUs this process could not use when it started."""
    if not text:
        return None
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise ValueError(f"CPU list {text!r}: expected e.g. 0, 0-1 or 0,2-3") from None
    if not cpus or not cpus <= _USABLE:
        raise ValueError(f"CPU list {text!r}: this machine lets us use CPUs {sorted(_USABLE)}")
    return cpus


class ServerProcess:
    """``argv`` run with ``PORT`` set, optionally pinned to ``cpus``; ready once its port takes a
    TCP connection. Its output goes to a log file (``log``), whose tail errors quote."""

    def __init__(self, argv: list[str], *, port: int | None = None, cpus: str | None = None,
                 env: dict | None = None, cwd: str | os.PathLike | None = None, name: str = "server"):
        self.argv = list(argv)
        self.port = port or free_port()
        self.cpus = parse_cpus(cpus)
        self.cpus_text = cpus or None
        self.env = dict(os.environ, **(env or {}), PORT=str(self.port))
        self.cwd = cwd
        self.name = name
        self.log = Path(tempfile.mkdtemp(prefix="vdbbench-server-")) / "server.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def start(self, ready_timeout_s: float = 120.0) -> str:
        cpus = self.cpus
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                self.argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
            )
        deadline = time.monotonic() + ready_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise ServedError(f"{self.name} exited with status {self.proc.returncode} before listening on "
                                  f"port {self.port}; its last lines:\n{self.tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self.url
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise ServedError(f"{self.name} did not listen on port {self.port} within {ready_timeout_s:g} s; "
                                  f"its last lines:\n{self.tail()}")
            time.sleep(0.1)

    def stop(self, grace_s: float = 10.0) -> int | None:
        """SIGTERM to its process group, SIGKILL after ``grace_s``; returns the exit status."""
        p, self.proc = self.proc, None
        if p is None:
            return None
        if p.poll() is None:
            for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    p.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        return p.poll()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def package_name(folder: Path) -> str:
    """The [package] name of a Cargo folder: the binary cargo builds by default."""
    manifest = folder / "Cargo.toml"
    try:
        data = tomllib.loads(manifest.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ServedError(f"{folder} is not a Cargo project a server can be built from: {e}") from None
    bins = data.get("bin") or []
    name = (bins[0].get("name") if len(bins) == 1 else None) or data.get("package", {}).get("name")
    if not name:
        raise ServedError(f"{manifest} names no [package] (or single [[bin]]) to build")
    return name


class CargoServer(ServerProcess):
    """A Cargo folder that serves the API (a leaderboard entry, a model's workspace, a user's own):
    ``build()`` runs ``cargo build --release``, ``start()`` runs the binary with ``PORT`` set,
    pinned to ``cpus`` as the seed harness pins it (taskset)."""

    def __init__(self, folder: str | os.PathLike, *, cpus: str | None = None, port: int | None = None,
                 target_dir: str | os.PathLike | None = None, build_timeout_s: float = 900.0, env: dict | None = None):
        self.folder = Path(folder).resolve()
        if not (self.folder / "Cargo.toml").is_file():
            raise ServedError(f"{self.folder} has no Cargo.toml: a served target is a URL, 'serve', or a Cargo folder")
        self.binary_name = package_name(self.folder)
        if target_dir is None and os.access(self.folder, os.W_OK):
            target_dir = self.folder / "target"  # where `cargo build` in that folder puts it
        elif target_dir is None:  # a read-only folder (a mirror, another user's): a cache of ours
            key = hashlib.sha256(str(self.folder).encode()).hexdigest()[:12]
            data = Path(os.environ.get("VDBBENCH_DATA") or Path.home() / ".cache" / "vdbbench")
            target_dir = data / "servers" / f"{self.folder.name}-{key}" / "target"
        self.target_dir = Path(target_dir)
        self.build_timeout_s = build_timeout_s
        self.build_s: float | None = None
        super().__init__([str(self.binary)], port=port, cpus=cpus, env=env, cwd=self.folder,
                         name=f"server {self.folder.name}")

    @property
    def binary(self) -> Path:
        return self.target_dir / "release" / self.binary_name

    def build(self) -> Path:
        cargo = shutil.which("cargo")
        if cargo is None:
            raise ServedError(f"building {self.folder} needs cargo (a Rust toolchain) on PATH")
        t0 = time.perf_counter()
        try:
            done = subprocess.run(
                [cargo, "build", "--release", "--manifest-path", str(self.folder / "Cargo.toml"),
                 "--target-dir", str(self.target_dir)],
                capture_output=True, text=True, timeout=self.build_timeout_s, stdin=subprocess.DEVNULL,
                cwd=self.folder,  # the folder's own .cargo/config.toml applies, as to `cargo build` run there
            )
        except subprocess.TimeoutExpired:
            raise ServedError(f"cargo build of {self.folder} took over {self.build_timeout_s:g} s") from None
        if done.returncode != 0:
            tail = "\n".join(done.stderr.splitlines()[-30:])
            raise ServedError(f"cargo build of {self.folder} failed (exit {done.returncode}):\n{tail}")
        if not self.binary.is_file():
            raise ServedError(f"cargo build of {self.folder} left no binary at {self.binary}")
        self.build_s = time.perf_counter() - t0
        return self.binary

    def start(self, ready_timeout_s: float = 120.0) -> str:
        if not self.binary.is_file():
            self.build()
        return super().start(ready_timeout_s)


def our_server(args: list[str] | None = None, *, cpus: str | None = None, port: int | None = None) -> ServerProcess:
    """``vdbbench serve`` of this installation as a child process, with extra ``args``."""
    port = port or free_port()
    argv = [sys.executable, "-m", "vdbbench", "serve", "--host", "127.0.0.1", "--port", str(port), *(args or [])]
    return ServerProcess(argv, port=port, cpus=cpus, name="vdbbench serve")
