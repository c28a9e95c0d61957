"""The core's failures, in three kinds; every error the core raises is one of them, so a caller that
catches a kind knows what went wrong and whose it is.

- BadInput: what was given cannot be read as Kubernetes reads it (a quantity, a MIG profile name, a
  field of the wrong kind, a LimitRange, an inventory, an AdmissionReview). The user's mistake, to be
  answered as one (the server answers a ReviewError with HTTP 400; the checks deny naming the field).
- CannotSay: gpuport reads the input but cannot say it in other words exactly (a GPU the target map
  lacks, a DRA claim in device-plugin words). Not a mistake: a denial or a note that says what would do.
- Broken: the core broke a promise of its own (an edit outside the parts of a pod it may edit). A
  defect, never to be reported as the user's mistake.
"""


class BadInput(ValueError):
    """What was given cannot be read as Kubernetes reads it; the message says what and where."""


class CannotSay(Exception):
    """Read, but not sayable in the words asked for; the message says what is missing."""


class Broken(RuntimeError):
    """A promise of the core's own was broken: a defect, whatever the input."""
