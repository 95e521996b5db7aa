"""A build step of `make html`: in the pages rendered from the notebooks, point links to
NN-name.ipynb at NN-name.html, so that the pages link to each other.

    python tools/link_html.py out/html
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

NOTEBOOK_LINK = re.compile(r'href="(\d\d-[A-Za-z0-9-]+)\.ipynb(#[^"]*)?"')


def link_html(folder: str | Path) -> list[Path]:
    """Rewrite the notebook links of every *.html in `folder`; returns the files changed."""
    changed = []
    for page in sorted(Path(folder).glob("*.html")):
        text = page.read_text(encoding="utf-8")
        linked = NOTEBOOK_LINK.sub(r'href="\1.html\2"', text)
        if linked != text:
            page.write_text(linked, encoding="utf-8")
            changed.append(page)
    return changed


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print(
            "error: usage: python tools/link_html.py DIR (a folder of rendered notebook pages)",
            file=sys.stderr,
        )
        return 2
    for page in link_html(argv[0]):
        print(f"linked {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
