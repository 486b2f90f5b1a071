"""Which version of a remote file a .part holds: the validator of the response its bytes came from
(a strong ETag, else Last-Modified). A download sends it as If-Range when it asks for the rest, so
a server whose file changed answers with the whole new file instead of splicing its bytes onto the
old ones. It is kept in a small file beside the .part, so a later process resumes with it too."""

from __future__ import annotations

from pathlib import Path


def of_response(headers) -> str | None:
    """The validator a response carries for If-Range, None when it has neither ETag nor Last-Modified."""
    if headers is None:
        return None
    etag = (headers.get("ETag") or "").strip()
    if etag and not etag.startswith("W/"):  # If-Range takes only a strong entity tag
        return etag
    return (headers.get("Last-Modified") or "").strip() or None


def path_beside(part: Path) -> Path:
    return part.with_name(part.name + ".validator")


def read(part: Path) -> str | None:
    """The validator kept beside ``part``, None when there is none or it is not a usable header value."""
    try:
        value = path_beside(part).read_text(encoding="latin-1").strip()
    except OSError:
        return None
    return value if value and value.isprintable() else None


def keep(part: Path, value: str | None) -> None:
    """Remember ``value`` for the bytes in ``part``; None forgets any earlier one."""
    if value is None:
        forget(part)
    else:
        path_beside(part).write_text(value + "\n", encoding="latin-1")


def forget(part: Path) -> None:
    path_beside(part).unlink(missing_ok=True)
