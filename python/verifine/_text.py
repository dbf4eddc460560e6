"""How chat-shaped inputs become the text a rubric reads."""

from __future__ import annotations

import decimal
import json
import math
import re
from typing import Any


def render(value: Any) -> str:
    """A prompt or completion as text: strings as they are; a chat message
    list as `role: content` paragraphs (the reward server renders slime's
    chat prompts the same way)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return str(value.get("content", ""))
    parts = []
    for message in value:
        if isinstance(message, dict):
            parts.append(f"{message.get('role', '')}: {message.get('content', '')}")
        else:
            parts.append(str(message))
    return "\n\n".join(parts)


def completion_text(completion: Any) -> str:
    """What the policy wrote: a string, or the content of the assistant
    messages of a conversational completion."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return "\n\n".join(
        str(m.get("content", "")) if isinstance(m, dict) else str(m)
        for m in completion
        if not isinstance(m, dict) or m.get("role", "assistant") == "assistant"
    )


def label_text(label: Any) -> str:
    """A label (a reference) as the text a rubric reads, exactly as
    `verifine serve` turns the JSON label of a request into it
    (`label_text` in `host/serve/src/protocol.rs`): strings as they are,
    booleans as `true`/`false`, numbers and lists and dicts as serde_json
    prints them (compact, keys sorted, floats shortest with `.0` or
    `e+NN`); None is "" (no reference). The local-function adapters must
    give the rubric the same text the HTTP endpoint would, or a reward
    changes with the transport.

    Raises ValueError for what the server refuses as JSON (NaN, infinity,
    an integer beyond a double's range) and TypeError for what JSON cannot
    carry."""
    if label is None:
        return ""
    if isinstance(label, str):
        return label
    return _json(label)


def _json(value: Any) -> str:
    """`value` as serde_json's compact JSON of the value it would parse
    from Python's `json.dumps(value)`."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return _number_text(int.__repr__(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"verifine: the label {value!r} is not JSON; the reward server refuses it")
        return _number_text(float.__repr__(value))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        # serde_json's map is ordered by key; a key repeated after
        # conversion keeps its last value, as serde_json keeps the last.
        items = {_key(k): v for k, v in value.items()}
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_json(items[k])}" for k in sorted(items)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_json(v) for v in value) + "]"
    raise TypeError(f"verifine: a label of type {type(value).__name__} is not JSON (the reward server takes JSON labels)")


def _key(key: Any) -> str:
    """A dict key as `json.dumps` writes it (the server keeps it as is)."""
    if isinstance(key, str):
        return key
    if key is True or key is False or key is None:
        return _json(key)
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return json.dumps(float(key))
    raise TypeError(f"verifine: a label's dict key of type {type(key).__name__} is not JSON")


_U64_MAX = 2**64 - 1
_POW10 = [float(f"1e{i}") for i in range(309)]
_NUMBER = re.compile(r"(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([-+]?[0-9]+))?")


def _number_text(text: str) -> str:
    """The JSON number `text` (as `json.dumps` writes it) as the server
    prints it after reading it: integers that fit u64 or i64 as they are,
    every other number as the double serde_json's default parser reads.
    That parser is not correctly rounded: it multiplies the first 19 or so
    digits, as an integer, by a power of ten, one rounding each. Copying it
    keeps even the last digit of a long float the server's."""
    match = _NUMBER.fullmatch(text)
    if match is None:
        raise ValueError(f"verifine: the label {text} is not a JSON number; the reward server refuses it")
    sign, integer, fraction, exponent_text = match.groups()
    significand, exponent, long_integer = 0, 0, False
    for digit in map(int, integer):
        if long_integer or significand * 10 + digit > _U64_MAX:
            long_integer = True  # later digits only scale
            exponent += 1
        else:
            significand = significand * 10 + digit
    for digit in map(int, fraction or ""):
        if significand * 10 + digit > _U64_MAX:
            break  # the rest is ignored
        significand = significand * 10 + digit
        exponent -= 1
    if not (long_integer or fraction or exponent_text):
        if not sign:
            return str(significand)
        if significand <= 2**63:
            return str(-significand)
        return _float_text(-float(significand))
    exponent += int(exponent_text or 0)
    value = float(significand)
    while True:
        if abs(exponent) < len(_POW10):
            value = value * _POW10[exponent] if exponent >= 0 else value / _POW10[-exponent]
            break
        if value == 0.0:
            break
        if exponent >= 0:
            value = math.inf
            break
        value /= 1e308
        exponent += 308
    if math.isinf(value):
        raise ValueError(f"verifine: the label {text} is beyond a double's range; the reward server refuses it")
    return _float_text(-value if sign else value)


def _float_text(x: float) -> str:
    """A double as serde_json prints it: the shortest digits that read back
    as `x` (Python's `repr` finds the same), in plain notation for decimal
    exponents -5..=15 (with `.0` when whole), else `d.ddde+N` / `de-N`."""
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign, digit_tuple, exponent = decimal.Decimal(float.__repr__(x)).as_tuple()
    digits = "".join(map(str, digit_tuple))
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    digits = stripped
    point = exponent + len(digits) - 1  # the decimal exponent of the first digit
    minus = "-" if sign else ""
    if -5 <= point <= 15:
        if exponent >= 0:
            return f"{minus}{digits}{'0' * exponent}.0"
        if point >= 0:
            return f"{minus}{digits[:point + 1]}.{digits[point + 1:]}"
        return f"{minus}0.{'0' * (-point - 1)}{digits}"
    mantissa = digits[0] + (f".{digits[1:]}" if len(digits) > 1 else "")
    return f"{minus}{mantissa}e{'+' if point >= 0 else '-'}{abs(point)}"
