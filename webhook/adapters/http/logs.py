"""gpuport's log lines, in one format from the first line to the last.

gunicorn configures only its own loggers. Set up only in the workers (post_worker_init), gpuport's
lines written while a worker loads the app, or while `serve` checks the maps before forking, went
through Python's last-resort handler: the bare message, no time, process, level or logger. `serve`
configures this before anything is read, and the workers inherit it.
"""

import logging

# gunicorn's own error-log layout, with the logger's name: one parser reads every line of the pod.
FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S %z"


def configure(level: str) -> None:
    """gpuport's loggers to stderr at `level`; once per process (forked workers keep the handler)."""
    logger = logging.getLogger("gpuport")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(FORMAT, DATE_FORMAT))
        logger.addHandler(handler)
    logger.setLevel(level.upper())
