"""gunicorn's gthread worker with deadlines, so slow or idle clients cannot hold the threads that answer
the API server.

gthread hands a connection to a thread once bytes arrive and reads the request with blocking calls:
a client that trickles its headers or body (slowloris), announces a longer body than it sends, or
never reads the answer keeps that thread for as long as it likes, and a few dozen such connections
starve every other caller. Here every request has two deadlines, enforced by one watchdog thread that
shuts the socket down (the blocked read or write then returns and gunicorn closes the connection):

- READ_DEADLINE to deliver the whole request, headers and body (the body is read before the app
  runs, so the app never waits on the client);
- ANSWER_DEADLINE for the whole exchange, inside the API server's own 5 s limit for a webhook.

A new connection that has not sent anything is parked on the poller at once instead of holding a
thread for gunicorn's default 5 s. Deadlines alone still let a few dozen clients that keep
reconnecting occupy every thread, so reading and answering are split: READERS threads (mostly waiting
on sockets, which costs no CPU) read requests, and only `threads` of them at a time run the app, so
decisions never convoy on the GIL however many connections are being read.
"""

import contextlib
import io
import socket
import threading
import time
from concurrent import futures

from gunicorn.workers import gthread

from webhook.adapters.http.admission_wsgi import arrived
from webhook.core.deciding.review import MAX_BODY_BYTES

READERS = 64  # threads that may be reading a request at once, per worker
READ_DEADLINE = 1.0
ANSWER_DEADLINE = 4.5
IDLE_WAIT = 0.05  # how long a thread waits for the first bytes of a new connection before parking it

gthread.DEFAULT_WORKER_DATA_TIMEOUT = IDLE_WAIT


class DeadlineThreadWorker(gthread.ThreadWorker):
    def get_thread_pool(self):
        return futures.ThreadPoolExecutor(max_workers=max(READERS, self.cfg.threads))

    def init_process(self):
        self._answering = threading.BoundedSemaphore(self.cfg.threads)
        self._deadlines: dict[int, tuple[float, gthread.TConn]] = {}
        self._deadlines_lock = threading.Lock()
        threading.Thread(target=self._watchdog, name="request-deadlines", daemon=True).start()
        super().init_process()

    def handle(self, conn):
        self._set_deadline(conn, READ_DEADLINE)
        try:
            return super().handle(conn)
        finally:
            with self._deadlines_lock:
                self._deadlines.pop(id(conn), None)

    def handle_request(self, req, conn):
        # Still under READ_DEADLINE: take the whole body now (a larger one is left for the app's 413).
        if _announced_length(req) <= MAX_BODY_BYTES:
            req.body = io.BytesIO(req.body.read(MAX_BODY_BYTES + 1))
        self._set_deadline(conn, ANSWER_DEADLINE)
        # The admission's own deadlines count from here, not from when a thread is free to run it: a
        # review that waited for one behind reviews stuck on a frozen API server has less time left,
        # and must be refused in words before the watchdog above cuts its connection (issue 49).
        arrived(time.monotonic())
        with self._answering:
            return super().handle_request(req, conn)

    def _set_deadline(self, conn, seconds: float) -> None:
        with self._deadlines_lock:
            self._deadlines[id(conn)] = (time.monotonic() + seconds, conn)

    def _watchdog(self) -> None:
        while True:
            time.sleep(0.1)
            now = time.monotonic()
            with self._deadlines_lock:
                expired = [key for key, (deadline, _) in self._deadlines.items() if deadline < now]
                connections = [self._deadlines.pop(key)[1] for key in expired]
            for conn in connections:
                # The plain socket's shutdown, not the TLS wrapper's: that one would tear down the
                # TLS state under the thread still blocked in it. Already closed is fine.
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)


def _announced_length(req) -> int:
    """The Content-Length the client announced; 0 when it sent none (chunked or no body)."""
    for name, value in req.headers:
        if name.upper() == "CONTENT-LENGTH":
            return int(value) if value.isdigit() else 0
    return 0
