"""Generated sections of docs/benchmarks.md (Python side; the Rust side is
benches/common/report.rs). A benchmark owns the text between
`<!-- BEGIN GENERATED name -->` and `<!-- END GENERATED name -->` and rewrites only that."""

import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BENCHMARKS_MD = os.path.join(ROOT, "docs", "benchmarks.md")


def replace_section(name, body, path=BENCHMARKS_MD):
    text = open(path, encoding="utf-8").read()
    begin = f"<!-- BEGIN GENERATED {name} -->"
    end = f"<!-- END GENERATED {name} -->"
    b, e = text.find(begin), text.find(end)
    if b < 0 or e < 0 or e < b:
        raise SystemExit(f"{path}: markers `{begin}` ... `{end}` missing or out of order")
    new = text[: b + len(begin)] + "\n" + body.rstrip() + "\n" + text[e:]
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)
