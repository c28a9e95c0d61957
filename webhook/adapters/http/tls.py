"""The serving TLS context, rebuilt when the certificate files change.

A mounted Secret is updated in place (kubelet swaps a symlink), and `gpuport certs --renew-before`
rewrites the files; either way new connections get the new certificate without a restart, and
connections already open keep theirs. If the new pair cannot be loaded (say the key was written but
not yet the certificate), the last good context stays in use and the next connection tries again.
"""

import logging
import os
import ssl
import threading
from pathlib import Path

log = logging.getLogger("gpuport.tls")

# The API server speaks HTTP/1.1 to webhooks; advertising h2 to a client that then gets HTTP/1.1
# breaks every call ("http2: frame too large").
ALPN = ["http/1.1"]


def server_ssl_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certfile=str(cert_file), keyfile=str(key_file))
    context.set_alpn_protocols(ALPN)
    return context


class ReloadingContext:
    def __init__(self, cert_file: Path, key_file: Path, on_reload=None):
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self._on_reload = on_reload or (lambda ok: None)
        self._lock = threading.Lock()
        self._stamp = self._file_stamp()
        self._context = server_ssl_context(self.cert_file, self.key_file)

    def current(self) -> ssl.SSLContext:
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return self._context
        with self._lock:
            if stamp != self._stamp:
                try:
                    self._context = server_ssl_context(self.cert_file, self.key_file)
                    log.info("serving certificate reloaded from %s", self.cert_file)
                    self._on_reload(True)
                except (OSError, ssl.SSLError) as exc:
                    log.error("serving certificate not reloaded, keeping the previous one: %s", exc)
                    self._on_reload(False)
                # Remember the stamp either way: a half-written pair is retried when it changes again.
                self._stamp = stamp
            return self._context

    def _file_stamp(self) -> tuple[tuple[int, int, int] | None, ...]:
        stamps: list[tuple[int, int, int] | None] = []
        for path in (self.cert_file, self.key_file):
            try:
                st = os.stat(path)
                stamps.append((st.st_ino, st.st_size, st.st_mtime_ns))
            except OSError:
                stamps.append(None)
        return tuple(stamps)
