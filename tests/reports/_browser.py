"""Load a report page in headless Chromium (Debian's ``chromium``) and read back what the
page measured of itself.

A copy of the page gets a probe: a first script that records ``window.onerror`` and
``console.error`` messages, and, once the page has loaded, writes them with the
document's scroll width and the viewport's width into an element the dumped DOM holds.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

WIDTH = 1400
_PROBE = """<script>
window.__pv_errors=[];
window.addEventListener('error',function(e){window.__pv_errors.push(String(e.message||e));});
(function(){var ce=console.error;console.error=function(){window.__pv_errors.push([].join.call(arguments,' '));
  return ce.apply(console,arguments);};})();
window.addEventListener('load',function(){var p=document.createElement('pre');p.id='pv-probe';
  var rows=function(){return [].filter.call(document.querySelectorAll('tr[data-kernel]'),
    function(tr){return tr.offsetParent!==null;}).map(function(tr){return tr.dataset.kernel;});};
  var only=document.getElementById('pv-failing'),failing=null;
  if(only){only.checked=true;only.dispatchEvent(new Event('change'));failing=rows();
    only.checked=false;only.dispatchEvent(new Event('change'));}
  var changed=document.getElementById('pv-changed'),changes=null;
  if(changed){changed.checked=true;changed.dispatchEvent(new Event('change'));changes=rows();
    changed.checked=false;changed.dispatchEvent(new Event('change'));}
  var unfold=document.getElementById('pv-unfold'),folded=document.querySelectorAll('td.folded'),unfolded=null;
  if(unfold&&folded.length){unfold.checked=true;unfold.dispatchEvent(new Event('change'));
    unfolded=folded[0].offsetParent!==null;unfold.checked=false;unfold.dispatchEvent(new Event('change'));}
  p.textContent=JSON.stringify({errors:window.__pv_errors,scroll:document.documentElement.scrollWidth,
    rows:rows(),failing:failing,changed:changes,unfolded:unfolded,folded_shown:folded.length?folded[0].offsetParent!==null:null,
    client:document.documentElement.clientWidth,
    tables:[].map.call(document.querySelectorAll('table.matrix'),function(t){return t.getBoundingClientRect().right;})});
  document.body.appendChild(p);});
</script>"""


def chromium() -> str:
    """Chromium's path; the test skips saying why when it is not installed (``make chromium``
    installs Debian's where apt-get may)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("headless Chromium is not installed: run `make chromium` (Debian's chromium package)")
    return found


def _flags(profile: Path) -> list[str]:
    return ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--window-size={WIDTH},1000"]


def load(page: Path, tmp: Path) -> tuple[str, dict[str, Any]]:
    """The DOM Chromium holds once ``page`` (a copy with the probe) has loaded, and the probe's
    record: ``errors``, ``scroll`` (the document's scroll width), ``client`` (the viewport's),
    ``tables`` (each matrix's right edge), ``rows`` (the kernels of the rows shown),
    ``failing`` (those shown with "failing only" ticked), ``changed`` (those shown with the
    version matrix's "changed only" ticked), ``folded_shown`` and ``unfolded``
    (whether a folded cell shows before and with "show folded backends" ticked)."""
    probed = tmp / f"probed-{page.name}"
    probed.write_text(page.read_text().replace("<head>", "<head>" + _PROBE, 1))
    done = subprocess.run([chromium(), *_flags(tmp / "profile"), "--virtual-time-budget=3000", "--dump-dom",
                           probed.as_uri()], capture_output=True, text=True, timeout=180, check=True)
    found = re.search(r'<pre id="pv-probe">(.*?)</pre>', done.stdout, re.S)
    assert found, f"the probe never ran; chromium said: {done.stderr[-800:]}"
    return done.stdout, json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def screenshot(page: Path, shot: Path, tmp: Path, *, height: int = 1000) -> Path:
    """A PNG of ``page`` at WIDTH x ``height``."""
    flags = [f for f in _flags(tmp / "profile") if not f.startswith("--window-size")]
    subprocess.run([chromium(), *flags, f"--window-size={WIDTH},{height}", f"--screenshot={shot}",
                    page.as_uri()], capture_output=True, timeout=180, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return shot
