"""Labels become the same reference text whichever way they reach a rubric.

`verifine serve` reads OpenRLHF's labels as JSON and turns each into text
(`label_text` in `host/serve/src/protocol.rs`); the local-function adapter
hands the rubric text itself. The expected strings below are what the
server's conversion gives for `json.dumps(label)` (serde_json 1.0.154, as
locked in Cargo.lock): a label must reward the same over HTTP and locally.
"""

import math

import pytest

from verifine._text import label_text
from verifine.openrlhf import make_reward_func

SERVER_TEXT = [
    # Strings pass through unquoted; None and "" are "no reference".
    ("42", "42"),
    ("héllo ☃ \n", "héllo ☃ \n"),
    ("", ""),
    (None, ""),
    # Booleans as JSON, not Python's True/False.
    (True, "true"),
    (False, "false"),
    # Integers that fit i64 or u64 as they are; larger ones become doubles.
    (0, "0"),
    (-7, "-7"),
    (2**64 - 1, "18446744073709551615"),
    (-(2**63), "-9223372036854775808"),
    (2**64, "1.8446744073709552e+19"),
    (-(2**63) - 1, "-9.223372036854776e+18"),
    (2**70, "1.1805916207174113e+21"),
    # Floats keep their `.0`: 1.0 and 1 are different labels.
    (1.0, "1.0"),
    (-0.0, "-0.0"),
    (0.1, "0.1"),
    (100.0, "100.0"),
    (1e15, "1000000000000000.0"),
    (1e16, "1e+16"),
    (1.5e300, "1.5e+300"),
    (1e-05, "0.00001"),
    (1.5e-05, "0.000015"),
    (1e-06, "1e-6"),
    (2.5e-07, "2.5e-7"),
    (5e-324, "5e-324"),
    # serde_json's default parser rounds long floats its own way; the
    # server's last digit wins.
    (2.6864173344886768e-09, "2.6864173344886764e-9"),
    (5.971697858821403e141, "5.971697858821402e+141"),
    # Lists and dicts as compact JSON, keys sorted, non-ASCII kept,
    # control characters escaped as serde_json escapes them.
    ([1e16, 1e-07, 100.0], "[1e+16,1e-7,100.0]"),
    ((1, 2), "[1,2]"),
    ([[1, [2.5, {"k": []}]]], '[[1,[2.5,{"k":[]}]]]'),
    ({"a": 1}, '{"a":1}'),
    (
        {"b": 1, "a": [1.0, None, 'x"\n\x01\x7f/é'], "A": {}},
        '{"A":{},"a":[1.0,null,"x\\"\\n\\u0001\x7f/é"],"b":1}',
    ),
    ({"é": 1, "z": 2, "Z": 3, "😀": 4, "ｚ": 5}, '{"Z":3,"z":2,"é":1,"ｚ":5,"😀":4}'),
    # Non-string keys as json.dumps writes them.
    ({True: 1, None: 2, 1.5: 3, 2: 4}, '{"1.5":3,"2":4,"null":2,"true":1}'),
]


@pytest.mark.parametrize(("label", "text"), SERVER_TEXT, ids=[repr(label)[:40] for label, _ in SERVER_TEXT])
def test_a_label_becomes_the_text_the_server_gives_it(label, text):
    assert label_text(label) == text


@pytest.mark.parametrize("label", [math.nan, math.inf, -math.inf, [1, math.nan], 10**400])
def test_labels_the_server_refuses_as_json_are_refused(label):
    with pytest.raises(ValueError, match="reward server refuses"):
        label_text(label)


@pytest.mark.parametrize("label", [object(), {1, 2}, b"bytes", {(1, 2): 3}])
def test_labels_json_cannot_carry_are_refused_by_type(label):
    with pytest.raises(TypeError, match="is not JSON"):
        label_text(label)


class _RecordingInner:
    """Stands in for the Rust scorer: records the labels it is given."""

    def __init__(self):
        self.labels = None

    def openrlhf(self, queries, prompts, labels):
        self.labels = labels
        n = len(queries)
        return '{"rewards": [0.0], "scores": [0.0], "extra_logs": {}}'.replace("[0.0]", str([0.0] * n))


def test_the_openrlhf_local_function_passes_labels_as_the_server_reads_them():
    reward_func = make_reward_func("math-answer")
    inner = _RecordingInner()
    reward_func.scorer._inner = inner
    labels = [True, None, 1.0, 1, {"b": [1e-05], "a": "é"}, "42"]
    reward_func(["q"] * len(labels), None, labels)
    assert inner.labels == ["true", "", "1.0", "1", '{"a":"é","b":[0.00001]}', "42"]
