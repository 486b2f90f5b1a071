"""SIFT descriptors (OpenCV, default parameters) and perceptual hashes of photographs.

OpenCV is the optional extra `vdbbench[real]`; `require_cv2` says how to install it.
"""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DIM = 128
INSTALL_HINT = "pip install 'vdbbench[real]'"


class OpenCVMissing(ImportError):
    """OpenCV (cv2) is not installed: the message says how to install it."""


def require_cv2():
    """The cv2 module, or OpenCVMissing naming the extra to install."""
    try:
        import cv2
    except ImportError as exc:
        raise OpenCVMissing(f"building real SIFT descriptors needs OpenCV ({exc}): {INSTALL_HINT}") from None
    return cv2


def read_gray(path: str | Path) -> np.ndarray:
    """The image as 8-bit grey: 16-bit images scaled down, transparent parts on mid-grey."""
    cv2 = require_cv2()
    im = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if im is None:
        raise ValueError(f"{path}: OpenCV cannot read this image")
    if im.dtype != np.uint8:  # 16-bit PNGs
        im = (im.astype(np.float32) / (65535.0 if im.dtype == np.uint16 else im.max() or 1) * 255.0)
        im = np.clip(np.rint(im), 0, 255).astype(np.uint8)
    if im.ndim == 3 and im.shape[2] == 4:  # composite transparent parts on mid-grey
        a = im[:, :, 3:4].astype(np.float32) / 255.0
        im = np.rint(im[:, :, :3].astype(np.float32) * a + 128.0 * (1 - a)).astype(np.uint8)
    if im.ndim == 3:
        im = cv2.cvtColor(im, cv2.COLOR_BGR2GRAY)
    return im


def dhash(path: str | Path, n: int = 16) -> np.ndarray:
    """Perceptual difference hash (n*n bits) of the grey image."""
    cv2 = require_cv2()
    g = cv2.resize(read_gray(path), (n + 1, n), interpolation=cv2.INTER_AREA).astype(np.int16)
    return (g[:, 1:] > g[:, :-1]).ravel()


@dataclass
class Extracted:
    """One image's descriptors (uint8, 0..255) and sizes."""

    desc: np.ndarray  # (count, 128) uint8
    size: tuple[int, int]  # (width, height) of the file
    sift_size: tuple[int, int]  # (width, height) SIFT ran on
    nonint: int  # values OpenCV returned that were not integers in 0..255 (expected: 0)


def extract_one(path: str | Path, max_side: int) -> Extracted:
    """OpenCV SIFT on the grey image, downscaled so that its longer side is at most `max_side`.

    OpenCV's SIFT already follows Lowe/TEXMEX: L2-normalise, clip at 0.2, renormalise, scale by
    512, saturate to 0..255 (values are integers). That is enforced and counted here rather than
    trusted silently.
    """
    cv2 = require_cv2()
    cv2.setNumThreads(1)
    g = read_gray(path)
    h, w = g.shape
    s = min(1.0, max_side / max(h, w))
    if s < 1.0:
        g = cv2.resize(g, (max(1, round(w * s)), max(1, round(h * s))), interpolation=cv2.INTER_AREA)
    _kp, d = cv2.SIFT_create().detectAndCompute(g, None)
    if d is None:
        d = np.zeros((0, DIM), np.float32)
    r = np.clip(np.rint(d), 0, 255)
    return Extracted(r.astype(np.uint8), (w, h), (g.shape[1], g.shape[0]), int(np.count_nonzero(r != d)))


def _extract_job(job: tuple[str, int]) -> Extracted:
    return extract_one(*job)


def extract_all(paths: list[Path], max_side: int, jobs: int) -> list[Extracted]:
    """SIFT of every image, in the order given; `jobs` worker processes (1: in this process).
    The result does not depend on `jobs`."""
    require_cv2()
    order = sorted(range(len(paths)), key=lambda i: -Path(paths[i]).stat().st_size)  # big ones first
    out: list[Extracted | None] = [None] * len(paths)
    if jobs <= 1:
        for i in order:
            out[i] = extract_one(paths[i], max_side)
        return out  # type: ignore[return-value]
    # 'spawn': forking after cv2/faiss started their thread pools can deadlock
    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as ex:
        for i, r in zip(order, ex.map(_extract_job, [(str(paths[i]), max_side) for i in order], chunksize=1)):
            out[i] = r
    return out  # type: ignore[return-value]
