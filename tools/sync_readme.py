#!/usr/bin/env python3
"""Regenerate the README's generated parts: the rule catalog table and the sections copied from docs/*.md.

``python tools/sync_readme.py`` rewrites README.md; ``--check`` exits 1 when it is stale (the tests run that).
A docs file contributes the text between ``<!-- README section: start -->`` and ``<!-- README section: end -->``;
the README holds it between ``<!-- section:<doc name> -->`` and ``<!-- /section:<doc name> -->``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cdk_sagemaker_debugger.model.rules.profiler_catalog import catalog_markdown  # noqa: E402

_DOC_SECTION = re.compile(r"<!-- README section: start -->\n(.*?)<!-- README section: end -->", re.DOTALL)


def render(readme: str) -> str:
    readme = re.sub(
        r"(<!-- rule-catalog:start -->\n).*?(\n<!-- rule-catalog:end -->)",
        lambda m: m.group(1) + catalog_markdown() + m.group(2),
        readme,
        flags=re.DOTALL,
    )
    for doc in sorted((ROOT / "docs").glob("*.md")):
        match = _DOC_SECTION.search(doc.read_text())
        if not match:
            continue
        name = doc.stem
        body = match.group(1).strip()
        block = f"<!-- section:{name} -->\n{body}\n<!-- /section:{name} -->"
        pattern = re.compile(rf"<!-- section:{re.escape(name)} -->(?:\n.*?<!-- /section:{re.escape(name)} -->)?", re.DOTALL)
        if not pattern.search(readme):
            raise SystemExit(f"README.md has no <!-- section:{name} --> marker for docs/{doc.name}")
        readme = pattern.sub(lambda _m, b=block: b, readme, count=1)
    return readme


def main() -> int:
    path = ROOT / "README.md"
    current = path.read_text()
    fresh = render(current)
    if "--check" in sys.argv:
        if fresh != current:
            print("README.md is stale: run python tools/sync_readme.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(fresh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
