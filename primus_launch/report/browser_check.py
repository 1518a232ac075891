"""Load an HTML report in headless Chromium (offline) and report what the browser saw.

Used by the report tests and ``scripts/screenshot_report.py``.  Chromium is started with
``--headless --no-sandbox`` and the flags that keep it off the network; a probe script injected
into a *copy* of the page records every resource the page requested, every load error, and the
rendered size and element count of every ``<svg>``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

OFFLINE_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-default-apps", "--disable-extensions"]

_PROBE = """<script>
window.__failed = [];
window.addEventListener('error', function (e) {
  var t = e.target || {}; window.__failed.push(String(t.src || t.href || e.message));
}, true);
window.addEventListener('load', function () {
  var res = performance.getEntriesByType('resource').map(function (r) { return r.name; });
  var svgs = Array.prototype.map.call(document.querySelectorAll('svg'), function (s) {
    var b = s.getBoundingClientRect();
    return {label: s.getAttribute('aria-label'), width: b.width, height: b.height,
            shapes: s.querySelectorAll('rect,line,circle,path,polyline,text').length};
  });
  var pre = document.createElement('pre'); pre.id = '__probe';
  pre.textContent = JSON.stringify({resources: res, failed: window.__failed, svgs: svgs});
  document.body.appendChild(pre);
});
</script>"""


def chromium_path() -> Optional[str]:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    exe = chromium_path()
    if exe is None:
        raise FileNotFoundError("chromium not found (Debian package 'chromium')")
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([exe, *OFFLINE_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)


def probe(html_path: str | Path, timeout: float = 60.0) -> dict:
    """Resources requested, load failures and rendered SVGs of the page, as the browser saw them."""
    src = Path(html_path).read_text()
    with tempfile.TemporaryDirectory() as d:
        copy = Path(d) / "page.html"
        copy.write_text(re.sub(r"<head>", "<head>" + _PROBE, src, count=1))
        proc = _run(["--virtual-time-budget=5000", "--dump-dom", copy.as_uri()], timeout)
    m = re.search(r'<pre id="__probe">(.*?)</pre>', proc.stdout, re.S)
    if not m:
        raise RuntimeError(f"chromium produced no probe output (exit {proc.returncode}): {proc.stderr[-2000:]}")
    import html as _html

    return json.loads(_html.unescape(m.group(1)))


def screenshot(html_path: str | Path, png_path: str | Path, width: int = 1240, height: int = 2400,
               timeout: float = 60.0) -> Path:
    out = Path(png_path).resolve()
    proc = _run([f"--window-size={width},{height}", f"--screenshot={out}", "--hide-scrollbars",
                 Path(html_path).resolve().as_uri()], timeout)
    if not out.is_file() or out.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return out
