"""The seed report in a real browser: headless Chromium renders it to a PNG.

A missing browser fails these tests (the Makefile installs Debian's `chromium` when it
can); nothing here passes unless Chromium ran the page. A copy of the page gets a
small script that records, once laid out, where each heatmap sits and the page's
rendered text (`innerText`: what is visible, not what the source holds); Chromium's
`--dump-dom` returns it, and a screenshot of the same copy at the same window size
gives the pixels to look at. The screenshot is kept and its path printed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import keep
from html_page import Report, parse, seed_report

WIDTH = 1280
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
]  # fmt: skip
PROBE = """<script>
addEventListener("load", () => {
  const box = e => { const r = e.getBoundingClientRect();
    return {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height}; };
  document.documentElement.dataset.probe = JSON.stringify({
    heatmaps: [...document.querySelectorAll("svg.heatmap")].map(box),
    height: document.documentElement.scrollHeight,
    text: document.body.innerText,
  });
});
</script>"""


def chromium() -> str:
    found = os.environ.get("GRADCHECK_CHROMIUM") or next(
        filter(None, map(shutil.which, BROWSERS)), None
    )
    if not found:
        pytest.fail(
            "no Chromium to render the HTML report: `make test` installs it as root "
            "(apt-get install chromium), or set GRADCHECK_CHROMIUM to a Chrome binary"
        )
    return found


def browse(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [chromium(), *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory, artifacts: Path):
    folder = tmp_path_factory.mktemp("browser")
    report: Report = seed_report(folder)
    probed = folder / "probed.html"
    probed.write_text(report.page.replace("</body>", PROBE + "</body>"))
    dom = browse(probed, folder / "profile-dom", f"--window-size={WIDTH},900", "--dump-dom")
    probe = json.loads(parse(dom.stdout).get("data-probe") or "null")
    assert probe, "Chromium dumped the page without running it"
    height = min(int(probe["height"]), 16000)
    shot = keep(artifacts / "seed-report.png")
    browse(
        probed, folder / "profile-shot", f"--window-size={WIDTH},{height}", f"--screenshot={shot}"
    )
    return report, probe, np.asarray(Image.open(shot).convert("RGB"))


def test_browser_draws_every_heatmap(rendered) -> None:
    report, probe, image = rendered
    failing = sum(i["status"] == "failed" for c in report.json["cases"] for i in c["inputs"])
    assert len(probe["heatmaps"]) == 3 * failing
    for box in probe["heatmaps"]:
        assert box["width"] > 20 and box["height"] > 20
        left, top = int(box["x"]), int(box["y"])
        region = image[top : top + int(box["height"]), left : left + int(box["width"])]
        drawn = region.min(axis=2) < 245  # not the white page
        assert drawn.mean() > 0.3, (box, drawn.mean())
        colours = np.unique(region.reshape(-1, 3), axis=0)
        assert len(colours) > 8  # cells, hatching, outlines: not one flat colour


def test_browser_shows_the_top_hint_and_its_fix(rendered) -> None:
    report, probe, _ = rendered
    text = " ".join(probe["text"].split())
    for case in report.json["cases"]:
        top = case["hints"][0]
        assert top["code"] in text and top["message"] in text and top["fix"] in text
