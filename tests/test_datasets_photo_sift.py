"""`vdbbench datasets build photo-sift-a`: the real-SIFT recipe on a folder of small generated
textured images (the download step left out), the file and manifest it writes, exact ground
truth against numpy, determinism for a seed, resolving `photo-sift-a` by name from the cache,
and the messages when OpenCV or the sources are missing."""

from __future__ import annotations

import io
import json
import lzma
import shutil
import tarfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from vdbbench.cli import main
from vdbbench.datasets import DatasetError, content_hash, load_dataset
from vdbbench.datasets.photo_sift import fetch, sources
from vdbbench.datasets.photo_sift.sample import waterfill

NBASE, NQUERY = 1500, 60


def _texture(seed: int, h: int = 240, w: int = 320) -> np.ndarray:
    """Multi-scale smoothed noise: blobs and edges at many scales, so SIFT finds ~1,500 keypoints."""
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(seed)
    im = np.zeros((h, w), np.float32)
    for cell, amp in ((4, 1.0), (8, 0.7), (16, 0.5), (32, 0.35), (64, 0.25)):
        small = rng.standard_normal((h // cell + 2, w // cell + 2)).astype(np.float32)
        big = cv2.resize(small, (w + 2 * cell, h + 2 * cell), interpolation=cv2.INTER_CUBIC)
        im += amp * big[cell:cell + h, cell:cell + w]
    return ((im - im.min()) / (im.max() - im.min()) * 255).astype(np.uint8)


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> Path:
    """12 textured images, one of them also saved slightly brighter under another name (a copy
    the perceptual hash must put in the same scene group), one as a colour JPEG in a subfolder."""
    cv2 = pytest.importorskip("cv2", reason="the real extra: pip install 'vdbbench[real]'")
    folder = tmp_path_factory.mktemp("photos")
    for i in range(11):
        cv2.imwrite(str(folder / f"img{i:02d}.png"), _texture(i))
    copy = np.clip(_texture(3).astype(np.int16) + 6, 0, 255).astype(np.uint8)
    cv2.imwrite(str(folder / "img03-copy.png"), copy)
    (folder / "sub").mkdir()
    colour = np.stack([_texture(100), _texture(101), _texture(102)], axis=-1)
    cv2.imwrite(str(folder / "sub" / "colour.jpg"), colour, [cv2.IMWRITE_JPEG_QUALITY, 95])
    return folder


def _build(photos: Path, out: Path, *extra: str) -> int:
    return main(["datasets", "build", "photo-sift-a", "--images", str(photos), "--out", str(out),
                 "--nbase", str(NBASE), "--nquery", str(NQUERY), "--jobs", "1", *extra])


@pytest.fixture(scope="module")
def built(photos, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("built") / "tiny.hdf5"
    assert _build(photos, out) == 0
    return out


def _arrays(path: Path) -> dict:
    with h5py.File(path, "r") as f:
        return {key: f[key][()] for key in ("train", "test", "neighbors", "distances")}


def test_file_has_the_ann_benchmarks_layout(built):
    with h5py.File(built, "r") as f:
        assert set(f.keys()) == {"train", "test", "neighbors", "distances"}
        assert f.attrs["distance"] == "euclidean" and f.attrs["type"] == "dense"
        assert int(f.attrs["dimension"]) == 128 and f.attrs["point_type"] == "float"
        assert int(f.attrs["seed"]) == 20240601
        assert f["train"].shape == (NBASE, 128) and f["test"].shape == (NQUERY, 128)
        assert f["train"].dtype == f["test"].dtype == np.float32
        assert f["neighbors"].shape == f["distances"].shape == (NQUERY, 100)
        assert f["neighbors"].dtype == np.int32 and f["distances"].dtype == np.float32
        train = f["train"][()]
    # SIFT as TEXMEX has it: integers 0..255, norms about 512
    assert np.array_equal(train, np.rint(train)) and train.min() >= 0 and train.max() <= 255
    assert np.all(np.abs(np.linalg.norm(train, axis=1) - 512) < 4)
    assert len(np.unique(train, axis=0)) == NBASE  # exact duplicates dropped


def test_ground_truth_is_exact_against_numpy_brute_force(built):
    a = _arrays(built)
    xb, xq = a["train"].astype(np.int64), a["test"].astype(np.int64)
    d2 = ((xq[:, None, :] - xb[None, :, :]) ** 2).sum(-1)  # exact integers
    ids = np.arange(len(xb))
    for qi in range(len(xq)):
        order = np.lexsort((ids, d2[qi]))[:100]  # by distance, ties to the lower id
        assert np.array_equal(a["neighbors"][qi], order), qi
        assert np.array_equal(a["distances"][qi], np.sqrt(d2[qi, order]).astype(np.float32)), qi


def test_manifest_lists_every_image_its_split_and_counts(built, photos):
    m = json.loads(built.with_name("tiny.manifest.json").read_text())
    a = _arrays(built)
    assert m["content_sha256"] == content_hash(a["train"], a["test"])
    assert m["params"]["seed"] == 20240601 and m["params"]["nbase"] == NBASE and m["params"]["pool"] == "a"
    assert m["sources"] == {"images_folder": str(photos.resolve())}
    assert m["base"]["count"] == NBASE and m["query"]["count"] == NQUERY
    # the near-identical copy was found and shares its original's group (so, its half and side)
    assert [(p[0], p[1]) for p in m["phash_pairs"]] == [("img03-copy.png", "img03.png")]
    # pool a: a part of the 13 images, by whole groups; queries from other scenes than the base
    images = m["images"]
    assert 0 < len(images) < 13 and m["images_listed"] == len(images)
    groups = {side: {im["group"] for im in images if im["split"] == side} for side in ("base", "query")}
    assert groups["base"] and groups["query"] and not groups["base"] & groups["query"]
    keys = {im["key"] for im in images}
    assert ("img03.png" in keys) == ("img03-copy.png" in keys)
    assert sum(im["sampled"] for im in images if im["split"] == "base") == NBASE
    assert sum(im["sampled"] for im in images if im["split"] == "query") == NQUERY
    assert all(0 <= im["sampled"] <= im["extracted"] for im in images)
    assert sum(im["extracted"] for im in images) == m["descriptors_extracted"]


def test_same_seed_same_bytes_other_seed_other_sample(built, photos, tmp_path):
    again = tmp_path / "again.hdf5"
    assert _build(photos, again, "--jobs", "2") == 0  # worker processes: the same result
    first, second = _arrays(built), _arrays(again)
    for key in first:
        assert first[key].tobytes() == second[key].tobytes(), key
    other = tmp_path / "other.hdf5"
    assert _build(photos, other, "--seed", "7") == 0
    assert not np.array_equal(_arrays(other)["train"], first["train"])


def test_photo_sift_a_resolves_by_name_from_the_cache(built, data_dir, capsys):
    with pytest.raises(DatasetError, match="vdbbench datasets build photo-sift-a"):
        load_dataset("photo-sift-a", allow_download=False)
    assert main(["datasets", "info", "photo-sift-a"]) == 0
    assert "vdbbench[real]" in capsys.readouterr().out.replace("\n", " ").replace("│", "")
    cached = data_dir / "real" / "photo-sift-a.hdf5"
    cached.parent.mkdir()
    shutil.copy(built, cached)
    shutil.copy(built.with_name("tiny.manifest.json"), cached.with_name("photo-sift-a.manifest.json"))
    ds = load_dataset("photo-sift-a")
    manifest = json.loads(cached.with_name("photo-sift-a.manifest.json").read_text())
    assert ds.name == "photo-sift-a" and (ds.n, ds.nq, ds.dim, ds.metric) == (NBASE, NQUERY, 128, "l2")
    assert ds.sha256 == manifest["content_sha256"] and not ds.synthetic
    assert np.array_equal(ds.neighbors, _arrays(built)["neighbors"])
    # a file that is not the one its manifest describes is refused
    manifest["content_sha256"] = "0" * 64
    cached.with_name("photo-sift-a.manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DatasetError, match="not the ones its manifest"):
        load_dataset("photo-sift-a")


def test_usage_errors_exit_2(photos, data_dir, tmp_path, capsys):
    # --images or changed parameters would put another set under the registered name
    assert main(["datasets", "build", "photo-sift-a", "--images", str(photos)]) == 2
    assert "give --out" in capsys.readouterr().err
    assert main(["datasets", "build", "photo-sift-a", "--seed", "3"]) == 2
    assert "--seed give --out" in capsys.readouterr().err
    assert main(["datasets", "build", "photo-sift-a", "--nbase", "0", "--out", str(tmp_path / "x.hdf5")]) == 2
    assert "nbase must be >= 1" in capsys.readouterr().err
    # the packages' photographs not unpacked yet: say --setup
    assert main(["datasets", "build", "photo-sift-a", "--work", str(tmp_path / "empty")]) == 2
    assert "--setup" in capsys.readouterr().err
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(photos / "img00.png", one)
    assert main(["datasets", "build", "photo-sift-a", "--images", str(one), "--out", str(tmp_path / "x.hdf5")]) == 2
    assert "at least 2 are needed" in capsys.readouterr().err
    assert not (data_dir / "real").exists()


def test_without_opencv_the_command_says_which_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(__import__("sys").modules, "cv2", None)  # import cv2 -> ImportError
    assert main(["datasets", "build", "photo-sift-a", "--work", str(tmp_path), "--setup"]) == 2
    assert "pip install 'vdbbench[real]'" in capsys.readouterr().err
    assert not (tmp_path / "debs").exists()  # nothing downloaded first


def test_unreachable_sources_are_named_with_what_to_do(monkeypatch, tmp_path):
    """No network and no apt-get: every Debian package is named with its URL and where to put it."""
    def offline(url, dest, **kw):
        raise fetch.DownloadError(f"{url}: network unreachable")

    monkeypatch.setattr(fetch, "download", offline)
    monkeypatch.setattr(fetch.shutil, "which", lambda name: None)
    wheels = tmp_path / "wheels"
    wheels.mkdir(parents=True)
    for spec in sources.WHEELS:  # the wheels are in place (so pip is not asked)
        name, version = spec.split("==")
        with __import__("zipfile").ZipFile(wheels / f"{name.replace('-', '_')}-{version}-py3-none-any.whl", "w"):
            pass
    with pytest.raises(fetch.SourcesUnavailable) as exc:
        fetch.fetch_and_unpack(tmp_path, log=lambda msg: None)
    msg = str(exc.value)
    assert f"{len(sources.DEB_PACKAGES)} of {len(sources.DEB_PACKAGES) + len(sources.WHEELS)} sources" in msg
    for pkg in sources.DEB_PACKAGES:
        assert pkg.url in msg and f"{tmp_path / 'debs'}/{pkg.filename}" in msg
    assert "apt-get: not on this machine" in msg


def _deb(path: Path, members: dict[str, bytes | str]) -> None:
    """A minimal .deb: an ar archive of debian-binary, control.tar.xz and data.tar.xz (str = symlink)."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(body, str):
                info.type, info.linkname = tarfile.SYMTYPE, body
                tar.addfile(info)
            else:
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
    parts = [("debian-binary", b"2.0\n"), ("control.tar.xz", lzma.compress(b"")),
             ("data.tar.xz", lzma.compress(data.getvalue()))]
    with open(path, "wb") as f:
        f.write(b"!<arch>\n")
        for name, body in parts:
            f.write(f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(body):<10}`\n".encode())
            f.write(body + (b"\n" if len(body) % 2 else b""))


def test_deb_unpacking_takes_only_the_wanted_regular_files(tmp_path):
    deb = tmp_path / "x_1_all.deb"
    _deb(deb, {"./usr/share/backgrounds/a.jpg": b"A" * 3, "./usr/share/backgrounds/sub/b.jpg": b"B",
               "./usr/share/backgrounds/c.png": b"C", "./usr/share/backgrounds/link.jpg": "a.jpg",
               "./usr/share/doc/x/README": b"no"})
    n = fetch.unpack_deb(deb, ("./usr/share/backgrounds/*.jpg",), tmp_path / "root")
    got = sorted(p.relative_to(tmp_path / "root").as_posix() for p in (tmp_path / "root").rglob("*") if p.is_file())
    assert n == 2 and got == ["usr/share/backgrounds/a.jpg", "usr/share/backgrounds/sub/b.jpg"]
    assert (tmp_path / "root/usr/share/backgrounds/a.jpg").read_bytes() == b"AAA"
    (tmp_path / "bad.deb").write_bytes(b"not an archive")
    with pytest.raises(ValueError, match="not a Debian package"):
        fetch.unpack_deb(tmp_path / "bad.deb", ("*",), tmp_path / "root2")


def test_waterfill_caps_every_image_at_one_level():
    rng = np.random.default_rng(0)
    counts = np.array([5, 1000, 40, 0, 300, 41])
    q = waterfill(counts, 200, rng)
    assert q.sum() == 200 and np.all(q <= counts)
    capped = q[q < counts]
    assert capped.max() - capped.min() <= 1  # one level T (some T + 1), small images whole
    assert np.array_equal(q[counts <= capped.min()], counts[counts <= capped.min()])
    assert np.array_equal(waterfill(counts, 10_000, rng), counts)


def test_the_1m_cards_transfer_target_is_the_built_set(built, data_dir):
    """The 1M cards name `photo-sift-a`: reported missing (with how to build it) until it is in the
    cache, then loaded from there with its own ground truth."""
    from vdbbench.agent.core.task import load_task
    from vdbbench.agent.evaluation.transfer import TransferMissing, load_data

    card = load_task(Path(__file__).resolve().parents[1] / "agent" / "tasks" / "optimize-ivf-1m.toml")
    spec = next(d for d in card.transfer.datasets if d.title == "real SIFT (photo-sift-a)")
    assert spec.name == "photo-sift-a"
    with pytest.raises(TransferMissing, match="vdbbench datasets build photo-sift-a"):
        load_data(spec, card)
    (data_dir / "real").mkdir()
    shutil.copy(built, data_dir / "real" / "photo-sift-a.hdf5")
    data = load_data(spec, card)
    assert data.base.shape == (NBASE, 128) and data.heldout.queries.shape[0] == NQUERY
    assert np.array_equal(data.heldout.gt_ids, _arrays(built)["neighbors"][:, :data.heldout.gt_ids.shape[1]])
    assert data.dataset["synthetic"] is False and data.dataset["name"] == "photo-sift-a"
