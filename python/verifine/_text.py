"""How chat-shaped inputs become the text a rubric reads."""

from __future__ import annotations

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
