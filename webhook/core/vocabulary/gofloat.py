"""Numbers read as Go's strconv reads them, for annotations a Go scheduler parses (KAI's gpu-fraction with
ParseFloat, its gpu-memory and device count with ParseInt): a value gpuport reads otherwise is charged
otherwise, and one it cannot read at all would be charged nothing while the scheduler gives it a GPU.

The grammar is strconv's (atof.go readFloat, special and underscoreOK; atoi.go ParseInt, base 10): a
sign, decimal digits with an optional point and `e` exponent, or `0x` hexadecimal digits with a
mandatory `p` exponent; underscores only between digits (or after the `0x`); `Inf`, `Infinity` and
`NaN` in any case (a sign only before the infinities). Python's float() and float.fromhex() round a
literal of that grammar to the same double as Go (both round correctly); a finite literal beyond the
largest double is Go's ErrRange, an error here too.
"""

import math
import re

from webhook.core.vocabulary.errors import BadInput

_DECIMAL = re.compile(r"[+-]?(?=[0-9_]*\.?[0-9_]*[0-9])[0-9_]*(?:\.[0-9_]*)?(?:[eE][+-]?[0-9][0-9_]*)?")
_HEX = re.compile(
    r"[+-]?0[xX](?=[0-9a-fA-F_]*\.?[0-9a-fA-F_]*[0-9a-fA-F])[0-9a-fA-F_]*(?:\.[0-9a-fA-F_]*)?"
    r"[pP][+-]?[0-9][0-9_]*"
)
_INT = re.compile(r"[+-]?[0-9]+")
INT64_MAX = 2**63 - 1


class GoSyntaxError(BadInput):
    """strconv's ErrSyntax or ErrRange: the Go program reads no number from the text."""


def parse_float(text: str) -> float:
    """strconv.ParseFloat(text, 64), or GoSyntaxError where Go returns an error."""
    special = _special(text)
    if special is not None:
        return special
    hexadecimal = _HEX.fullmatch(text) is not None
    if not hexadecimal and _DECIMAL.fullmatch(text) is None:
        raise GoSyntaxError(f"{text!r} is not a number as Go's ParseFloat reads it")
    if "_" in text and not _underscores_ok(text):
        raise GoSyntaxError(f"{text!r}: an underscore stands only between digits in Go")
    plain = text.replace("_", "")
    try:
        value = float.fromhex(plain) if hexadecimal else float(plain)
    except OverflowError:
        value = math.inf
    if math.isinf(value):
        raise GoSyntaxError(f"{text!r} is out of range for a 64-bit float")
    return value


def parse_int(text: str) -> int:
    """strconv.ParseInt(text, 10, 64), or GoSyntaxError where Go returns an error (base 10: no
    underscores, no prefix, no spaces)."""
    if _INT.fullmatch(text) is None:
        raise GoSyntaxError(f"{text!r} is not a whole number as Go's ParseInt reads it")
    value = int(text)
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise GoSyntaxError(f"{text!r} is out of range for a 64-bit integer")
    return value


def _special(text: str) -> float | None:
    """strconv's special(): the infinities (signed or not) and NaN (unsigned), in any case; the whole
    text must be the word ("infin" is a syntax error, as Go leaves the "in" unread)."""
    body = text[1:] if text[:1] in "+-" else text
    if body.lower() in ("inf", "infinity"):
        return -math.inf if text.startswith("-") else math.inf
    if text.lower() == "nan":
        return math.nan
    return None


def _underscores_ok(text: str) -> bool:
    """strconv's underscoreOK: every underscore between two digits, a base prefix counting as one."""
    body = text[1:] if text[:1] in "+-" else text
    saw, start, hexadecimal = "^", 0, False
    if len(body) >= 2 and body[0] == "0" and body[1].lower() in "box":
        saw, start, hexadecimal = "0", 2, body[1].lower() == "x"
    for char in body[start:]:
        if char.isdigit() or (hexadecimal and char.lower() in "abcdef"):
            saw = "0"
        elif char == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"
