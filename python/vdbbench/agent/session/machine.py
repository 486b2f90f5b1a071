"""The machine a session runs on, read at run time for the task text: CPU model, SIMD flags,
cores and cache sizes (Linux: /proc/cpuinfo and sysfs; elsewhere what `platform` and
`os.cpu_count` say)."""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

from vdbbench.bench.results import cpu_model

# The instruction-set flags a distance kernel can use, in the order they are listed.
SIMD_FLAGS = (
    "sse4_1", "sse4_2", "avx", "f16c", "fma", "bmi2", "avx2", "avx_vnni", "avx512f", "avx512dq", "avx512cd",
    "avx512bw", "avx512vl", "avx512_vnni", "avx512vbmi", "avx512_vbmi2", "avx512_bitalg", "avx512_vpopcntdq",
    "avx512_bf16", "avx512_fp16", "amx_int8", "amx_bf16", "asimd", "asimddp", "sve", "sve2",
)


@dataclass
class Machine:
    cpu: str
    arch: str
    cores: int  # logical CPUs the OS reports
    physical_cores: int | None = None
    simd: list[str] = field(default_factory=list)
    caches: list[str] = field(default_factory=list)  # "L1d 48K per core", "L3 300M shared" ...

    def describe(self) -> str:
        """Lines for the task text."""
        cores = f"{self.cores} logical CPU(s)"
        if self.physical_cores and self.physical_cores != self.cores:
            cores += f" on {self.physical_cores} physical core(s) (hyper-threads share a core)"
        lines = [f"- CPU: {self.cpu} ({self.arch}), {cores}"]
        lines.append("- SIMD: " + (", ".join(self.simd) if self.simd else "none detected (or not readable here)"))
        if self.caches:
            lines.append("- Caches: " + "; ".join(self.caches))
        return "\n".join(lines)


def _cpuinfo_flags(text: str) -> set[str]:
    for line in text.splitlines():
        key = line.split(":", 1)[0].strip().lower()
        if key in ("flags", "features"):
            return set(line.split(":", 1)[1].split())
    return set()


def _size(text: str) -> str:
    """sysfs's "307200K" as "300 MiB", "48K" as "48 KiB"."""
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", text.strip())
    if not m:
        return text.strip()
    kib = int(m.group(1)) * {"": 1 / 1024, "K": 1, "M": 1024, "G": 1024 * 1024}[m.group(2)]
    return f"{kib / 1024:g} MiB" if kib >= 1024 else f"{kib:g} KiB"


def _caches(cpu0: Path) -> list[str]:
    out = []
    for index in sorted(cpu0.glob("cache/index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
            shared = (index / "shared_cpu_list").read_text().strip() if (index / "shared_cpu_list").exists() else ""
        except OSError:
            continue
        name = f"L{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
        if name.endswith("i"):
            continue  # the instruction cache does not bound a search
        scope = "per core" if shared and re.fullmatch(r"\d+", shared) else (f"shared by CPUs {shared}" if shared else "")
        out.append(f"{name} {_size(size)}" + (f" {scope}" if scope else ""))
    return out


def _physical_cores(text: str) -> int | None:
    pairs = set()
    phys = core = None
    for line in text.splitlines() + [""]:
        if not line.strip():
            if phys is not None and core is not None:
                pairs.add((phys, core))
            phys = core = None
            continue
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "physical id":
            phys = value.strip()
        elif key == "core id":
            core = value.strip()
    return len(pairs) or None


def machine(proc: Path = Path("/proc/cpuinfo"), sys_cpu: Path = Path("/sys/devices/system/cpu")) -> Machine:
    """What this machine offers a search kernel; every field degrades to what can be read."""
    try:
        text = proc.read_text()
    except OSError:
        text = ""
    flags = _cpuinfo_flags(text)
    return Machine(
        cpu=cpu_model(),
        arch=platform.machine() or "?",
        cores=os.cpu_count() or 1,
        physical_cores=_physical_cores(text),
        simd=[f for f in SIMD_FLAGS if f in flags],
        caches=_caches(sys_cpu / "cpu0"),
    )
