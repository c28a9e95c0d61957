"""Read and write a bundle as ca.crt, tls.crt and tls.key in a directory (key mode 0600)."""

import os
import tempfile
from pathlib import Path

from certs.issue import Bundle, load_bundle

FILE_NAMES = ("ca.crt", "tls.crt", "tls.key")


def read_bundle(directory: Path) -> Bundle | None:
    paths = [directory / name for name in FILE_NAMES]
    if not all(p.is_file() for p in paths):
        return None
    return load_bundle(*(p.read_bytes() for p in paths))


def write_bundle(directory: Path, bundle: Bundle) -> None:
    """Each file is replaced atomically, CA bundle first and key before certificate, so a server that
    re-reads them meanwhile sees either the old pair or the new one, or fails to load and keeps its own."""
    directory.mkdir(parents=True, exist_ok=True)
    _atomic_write(directory / "ca.crt", bundle.ca_crt, 0o644)
    _atomic_write(directory / "tls.key", bundle.tls_key, 0o600)
    _atomic_write(directory / "tls.crt", bundle.tls_crt, 0o644)


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
