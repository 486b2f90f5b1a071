"""Which machine a session segment runs on: journaled with every `session_start`, so that QPS
measured on one node is never compared with QPS measured on another."""

from __future__ import annotations

import os
import platform
import socket
import sys
from typing import Any, Mapping


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what the platform module knows)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model", "Hardware") and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def node_info() -> dict[str, Any]:
    """hostname, CPU model, CPU count, and the Ray node id when this process is a Ray worker."""
    info: dict[str, Any] = {"hostname": socket.gethostname(), "cpu_model": cpu_model(), "cpus": os.cpu_count()}
    ray = sys.modules.get("ray")  # only a process that already imported Ray is on a Ray node
    if ray is not None:
        try:
            if ray.is_initialized():
                info["ray_node_id"] = ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - the node id is a label, never a reason to fail
            pass
    return info


def same_node(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool | None:
    """Whether two journaled nodes are the same machine (hostname and CPU model); None when either
    segment predates node journaling, so nothing can be said."""
    if not a or not b:
        return None
    return a.get("hostname") == b.get("hostname") and a.get("cpu_model") == b.get("cpu_model")


def moved_since_last_segment(events) -> bool:
    """True when this segment (the last `session_start`) runs on another node than the one before:
    the best's QPS from there must be measured again here before anything is judged against it."""
    starts = [e for e in events if e.get("type") == "session_start"]
    return len(starts) >= 2 and same_node(starts[-2].get("node"), starts[-1].get("node")) is False
