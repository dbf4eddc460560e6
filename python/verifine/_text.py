"""How chat-shaped inputs become the text a rubric reads."""

from __future__ import annotations

import json
from typing import Any

from verifine._verifine import label_text as _native_label_text


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
    `verifine serve` turns the JSON label of a request into it: the label is
    written as JSON (as a client sends it) and read and converted by the
    server's own code (`label_text` in `host/serve/src/protocol.rs`, through
    the native module): strings as they are, booleans as `true`/`false`,
    numbers, lists and dicts as serde_json prints them. None is "" (no
    reference). The local-function adapters must give the rubric the same
    text the HTTP endpoint would, or a reward changes with the transport.

    Raises ValueError for what the server refuses as JSON (NaN, infinity,
    a number beyond a double's range) and TypeError for what JSON cannot
    carry."""
    if label is None:
        return ""
    if isinstance(label, str):
        return label
    try:
        text = json.dumps(label, allow_nan=False, ensure_ascii=False)
    except ValueError as error:
        raise ValueError(f"verifine: the label {label!r} is not JSON; the reward server refuses it") from error
    except TypeError as error:
        raise TypeError(
            f"verifine: a label of type {type(label).__name__} is not JSON (the reward server takes JSON labels)"
        ) from error
    return _native_label_text(text)
