"""Screenshot an experiment's report as a person sees it, in headless Chromium.

Usage: ``python benchmarks/report_screenshot.py [DIR]`` (default ``demo-out``). Chromium is a
system package (``apt-get install -y chromium``), not a dependency of sdclab. Writes
``DIR/report.png`` (1300 pixels wide, the report's first 2,400) and prints one JSON line: the
screenshot's path and seconds, the report's first section, and the checks of what it shows — the
frontier before any other section, and no 0.000 or 0.0% in its text.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

DIRECTORY = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("demo-out")


def main() -> None:
    report = DIRECTORY / "report.html"
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    missing = (
        f"{report}: no report (run the experiment first: make demo)"
        if not report.is_file()
        else "chromium is not installed (apt-get install -y chromium)"
        if browser is None
        else None
    )
    if missing is not None:  # a figure not measured says why (make bench goes on)
        print(json.dumps({"benchmark": "report_screenshot", "not_run": missing}))
        return
    shot = DIRECTORY / "report.png"
    start = time.perf_counter()
    assert browser is not None
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            f"--screenshot={shot.resolve()}",
            "--window-size=1300,2400",
            report.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
    )
    html = report.read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", " ", html)
    sections = re.findall(r'<h2 id="([^"]+)">', html)
    print(
        json.dumps(
            {
                "benchmark": "report_screenshot",
                "screenshot": str(shot),
                "seconds": round(time.perf_counter() - start, 1),
                "bytes": shot.stat().st_size,
                "first_section": sections[0] if sections else None,
                "frontier_first": bool(sections)
                and sections[0] == "accuracy-and-risk-the-frontier",
                "misleading_zeros": len(
                    re.findall(r"(?<![\d.])-?0\.0%|(?<![\d.])-?0\.000(?!\d)", text)
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
