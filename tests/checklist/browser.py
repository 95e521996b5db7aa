"""Headless Chromium for the report tests: find it, or install Debian's `chromium` package when
running as root (as CI does), then screenshot an HTML file with the network switched off, or
measure where its elements are drawn at a given window size (layout)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome")
# every flag that keeps a headless run from reaching the network or a profile outside `profile`
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)


def find_chromium() -> str | None:
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def ensure_chromium() -> str:
    """The path of a Chromium binary; installs Debian's package (apt-get) when missing and root.
    One process at a time looks and installs (pytest-xdist workers may ask together)."""
    path = find_chromium()
    if path:
        return path
    with open(Path(tempfile.gettempdir()) / "leaselab-chromium-install.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        return find_chromium() or _install_chromium()


def _install_chromium() -> str:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError(
            "chromium is not installed and this is not a root Debian system: "
            "install the `chromium` package to run the report rendering test"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ("-o", "DPkg::Lock::Timeout=900")
    subprocess.run(["apt-get", *lock, "update", "-qq"], check=True, env=env, timeout=1800)
    subprocess.run(
        ["apt-get", *lock, "install", "-y", "-qq", "--no-install-recommends", "chromium"],
        check=True,
        env=env,
        timeout=1800,
    )
    path = find_chromium()
    if not path:
        raise RuntimeError("apt-get installed chromium but no chromium binary is on PATH")
    return path


def screenshot(
    html: Path,
    png: Path,
    profile: Path,
    *,
    width: int = 1200,
    height: int = 2400,
    chromium: str | None = None,
) -> subprocess.CompletedProcess:
    """Render `html` headless into `png` (width x height CSS pixels)."""
    chromium = chromium or ensure_chromium()
    command = [
        chromium,
        *FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        f"--screenshot={png}",
        html.resolve().as_uri(),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


# measures, once the page is laid out, each selector's first element: its box in CSS pixels and its
# font size; and the page's own width (wider than the window: a horizontal scroll bar)
_MEASURE = """
<script>
window.addEventListener("load", () => {
  const out = {scrollWidth: document.documentElement.scrollWidth, boxes: {}};
  for (const selector of %s) {
    const e = document.querySelector(selector);
    if (!e) continue;
    const r = e.getBoundingClientRect();
    out.boxes[selector] = {left: r.left, top: r.top, right: r.right, bottom: r.bottom,
                           fontSize: parseFloat(getComputedStyle(e).fontSize),
                           text: e.innerText};
  }
  const pre = document.createElement("pre");
  pre.id = "layout-measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def layout(
    html: Path,
    selectors: list[str],
    profile: Path,
    *,
    width: int,
    height: int,
    chromium: str | None = None,
) -> dict:
    """Where headless Chromium draws `selectors` in `html` in a window of width x height CSS
    pixels: {"scrollWidth": page width, "boxes": {selector: {left, top, right, bottom, fontSize,
    text}}}. The page is measured from a copy with a measuring script added (the report itself
    has none)."""
    chromium = chromium or ensure_chromium()
    page = html.read_text(encoding="utf-8")
    measured = html.with_name(f".measure-{width}-{html.name}")
    measured.write_text(
        page.replace("</body>", _MEASURE % json.dumps(selectors) + "</body>"), encoding="utf-8"
    )
    command = [
        chromium,
        *FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        measured.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    measured.unlink()
    found = re.search(r'<pre id="layout-measured">(.*?)</pre>', done.stdout, re.S)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"chromium did not measure the page: {done.stderr[-2000:]}")
    text = found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
    return json.loads(text.replace("&amp;", "&"))


if (
    __name__ == "__main__"
):  # `python tests/checklist/browser.py`: install (if needed) and print the path
    print(ensure_chromium())
