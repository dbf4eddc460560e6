"""A faithful Python port of the `math-answer` plugin (plugins/math-answer),
for the reward server's anchor: the same answer extraction, number reading
and weights. `load.sh` checks it gives verifine's rewards on the GSM8K
solutions before it is timed."""

import math

FORMAT_WEIGHT, CORRECT_WEIGHT = 0.1, 0.9
BOXED, HASHES, PREFIX, LAST = "boxed", "hashes", "prefix", "last"


def _first_line(text):
    return next((l for l in text.splitlines() if l.strip()), "")


def _last_boxed(text):
    at = text.rfind("\\boxed{")
    if at < 0:
        return None
    start, depth = at + len("\\boxed{"), 1
    for i, c in enumerate(text[start:]):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start:start + i]
    return None


def _last_answer_prefix(text):
    best = None
    for prefix in ("A:", "Answer:"):
        end = len(text)
        while True:
            at = text.rfind(prefix, 0, end)
            if at < 0:
                break
            line_start = text.rfind("\n", 0, at) + 1
            if not text[line_start:at].strip():
                best = max(best or 0, at + len(prefix))
                break
            end = at
    return None if best is None else text[best:]


def _strip_calculator(text):
    out, rest = [], text
    while True:
        open_ = rest.find("<<")
        if open_ < 0:
            break
        out.append(rest[:open_])
        close = rest.find(">>", open_)
        if close < 0:
            rest = rest[open_:]
            break
        rest = rest[close + 2:]
    out.append(rest)
    return "".join(out)


def _is_sign(text, at):
    j = at
    if j > 0 and text[j - 1] == "$":
        j -= 1
    if j == 0 or text[j - 1] != "-":
        return False
    j -= 1
    return j == 0 or not text[j - 1].isascii() or not text[j - 1].isalnum()


def _number_tokens(text):
    tokens, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        starts = c in "0123456789" or (c == "." and i + 1 < n and text[i + 1] in "0123456789")
        if not starts:
            i += 1
            continue
        negative = _is_sign(text, i)
        start = i - 1 if negative else i
        digits, seen_point = [], False
        while i < n:
            b = text[i]
            if b in "0123456789":
                digits.append(b)
            elif b == "," and not seen_point and all(d in "0123456789" for d in text[i + 1:i + 4]) and len(text[i + 1:i + 4]) == 3 and not (i + 4 < n and text[i + 4] in "0123456789"):
                pass
            elif b == "." and not seen_point and i + 1 < n and text[i + 1] in "0123456789":
                seen_point = True
                digits.append(b)
            else:
                break
            i += 1
        try:
            value = float("".join(digits[:64]))
            tokens.append((-value if negative else value, start, i))
        except ValueError:
            pass
    return tokens


def _braced(text):
    text = text.lstrip()
    if not text.startswith("{"):
        return None
    close = text.find("}", 1)
    return None if close < 0 else (text[1:close], text[close + 1:])


def parse_number(span):
    span = span.strip()
    negative = span.startswith("-")
    body = span.lstrip("-")
    for command in ("\\frac", "\\dfrac", "\\tfrac"):
        if body.startswith(command):
            first = _braced(body[len(command):])
            second = first and _braced(first[1])
            if first and second:
                a, b = parse_number(first[0]), parse_number(second[0])
                if a is not None and b is not None:
                    value = a / b if b else (math.copysign(math.inf, a) if a else math.nan)
                    return -value if negative else value
            break
    tokens = _number_tokens(span)
    if not tokens:
        return None
    if len(tokens) > 1 and span[tokens[0][2]:tokens[1][1]].strip() == "/" and tokens[1][0] != 0:
        return tokens[0][0] / tokens[1][0]
    return tokens[0][0]


def final_answer(text):
    inner = _last_boxed(text)
    if inner is not None:
        value = parse_number(inner)
        return None if value is None else (BOXED, value)
    at = text.rfind("####")
    if at >= 0:
        value = parse_number(_first_line(text[at + 4:]))
        return None if value is None else (HASHES, value)
    rest = _last_answer_prefix(text)
    if rest is not None:
        value = parse_number(_first_line(rest))
        return None if value is None else (PREFIX, value)
    tokens = _number_tokens(_strip_calculator(text))
    return (LAST, tokens[-1][0]) if tokens else None


def reference_answer(reference):
    found = final_answer(reference)
    if found and found[0] != LAST:
        return found[1]
    value = parse_number(reference)
    if value is not None:
        return value
    tokens = _number_tokens(_strip_calculator(reference))
    return tokens[-1][0] if tokens else None


def judge(response, reference):
    """(total, {"format": 0/1, "correct": 0/1}), or None when the reference has no number."""
    expected = reference_answer(reference)
    if expected is None:
        return None
    found = final_answer(response)
    format_ok = bool(found) and found[0] != LAST
    correct = bool(found) and abs(found[1] - expected) <= 1e-6 * max(abs(expected), 1.0)
    total = FORMAT_WEIGHT * format_ok + CORRECT_WEIGHT * correct
    return total, {"format": float(format_ok), "correct": float(correct)}
