"""Go's strconv.ParseFloat / ParseInt grammar (atof.go readFloat, special, underscoreOK; atoi.go), which KAI
parses its share annotations with. The expected values are Go's, worked out from the grammar and IEEE
rounding (0x1.ccp-1 = (1 + 0xcc/256) / 2)."""

import math

import pytest

from webhook.core.vocabulary.gofloat import GoSyntaxError, parse_float, parse_int


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.5", 0.5),
        ("0x1.ccp-1", 0.8984375),
        ("0X1.CCP-1", 0.8984375),
        ("0x.8p0", 0.5),
        ("0x_1p-2", 0.25),
        ("1e-1", 0.1),
        ("1E-1", 0.1),
        ("+.5", 0.5),
        ("-.5", -0.5),
        ("5.", 5.0),
        ("0_0.5", 0.5),
        ("1_0e-1_0", 1e-9),
        ("1e-400", 0.0),  # underflow is no error in Go
        ("Inf", math.inf),
        ("+inf", math.inf),
        ("-Infinity", -math.inf),
    ],
)
def test_what_go_reads_as_a_number(text, value):
    assert parse_float(text) == value


def test_nan_is_read_unsigned_in_any_case():
    assert math.isnan(parse_float("NaN")) and math.isnan(parse_float("nan"))


@pytest.mark.parametrize(
    "text",
    [
        "",
        ".",
        "_1",
        "1_",
        "1__0",
        "1_.5",
        "0x1",
        "0x1.8",
        "1e",
        "1e+",
        " 0.5",
        "0.5 ",
        "-nan",
        "infin",
        "1e400",
        "0x1p99999",
        "0.5f",
        "½",
        "٠.٥",
        "1,5",
    ],
)
def test_what_go_refuses(text):
    with pytest.raises(GoSyntaxError):
        parse_float(text)


def test_whole_numbers_are_base_ten_without_underscores():
    assert parse_int("2000") == 2000 and parse_int("+5") == 5 and parse_int("-1") == -1
    for text in ("1_000", "0x10", " 5", "5.0", "", "9223372036854775808"):
        with pytest.raises(GoSyntaxError):
            parse_int(text)
