"""Writes a training config with dotted-key overrides, for the arms of a
comparison that differ from one recipe in a few settings.

    python3 bench/rl/arm_config.py BASE.toml OUT.toml grpo.steps=0 sft.max_seconds=812.5

A value is read as TOML (`0`, `1e-4`, `"text"`, `true`, `[1, 2]`), or is
`@KEY`: BASE's value at that dotted key (`reward.evaluator=@reward.rubric`);
a key that names no table of BASE is created. The output is plain TOML tables."""

import json
import sys
import tomllib


def value(text: str):
    return tomllib.loads(f"v = {text}")["v"]


def copied(config: dict, key: str, item: str):
    node = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise SystemExit(f"arm_config.py: {item!r}: the base has no {key}")
        node = node[part]
    return node


def scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(scalar(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {scalar(x)}" for k, x in v.items()) + " }"
    raise SystemExit(f"arm_config.py: cannot write {v!r}")


def write(table: dict, path: list, out: list) -> None:
    plain = {k: v for k, v in table.items() if not isinstance(v, dict)}
    nested = {k: v for k, v in table.items() if isinstance(v, dict)}
    if path:
        out.append(f"\n[{'.'.join(path)}]")
    for k, v in plain.items():
        out.append(f"{k} = {scalar(v)}")
    for k, v in nested.items():
        write(v, path + [k], out)


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    base, out_path, overrides = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(base, "rb") as f:
        config = tomllib.load(f)
    with open(base, "rb") as f:
        base_config = tomllib.load(f)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep:
            raise SystemExit(f"arm_config.py: {item!r} is not KEY=VALUE")
        *tables, last = key.split(".")
        node = config
        for t in tables:
            node = node.setdefault(t, {})
            if not isinstance(node, dict):
                raise SystemExit(f"arm_config.py: {key}: {t} is not a table")
        node[last] = copied(base_config, text[1:], item) if text.startswith("@") else value(text)
    lines: list = []
    write(config, [], lines)
    with open(out_path, "w") as f:
        f.write("\n".join(lines).lstrip("\n") + "\n")


if __name__ == "__main__":
    main()
