"""Real headless Chromium (Debian's `chromium`) driven by Playwright, for the console's tests.

Playwright's own browser download is not used: CI reaches package registries only, so the
system Chromium is launched by path."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Locator, Page, sync_playwright

CHROMIUM_NAMES = ("chromium", "chromium-browser")
TALLEST = 1300  # px of a picture of part of a page


def chromium_path() -> str:
    for name in CHROMIUM_NAMES:
        if found := shutil.which(name):
            return found
    raise RuntimeError("no chromium on PATH: scripts/test installs Debian's chromium package")


@contextmanager
def browser(loopback_names: tuple[str, ...] = ()) -> Iterator[Browser]:
    """Chromium; the host names in `loopback_names` resolve to 127.0.0.1, as an attacker's
    DNS name does once rebound."""
    args = ["--no-sandbox"]  # CI runs as root, where Chromium's sandbox cannot start.
    if loopback_names:
        rules = ", ".join(f"MAP {name} 127.0.0.1" for name in loopback_names)
        args.append(f"--host-resolver-rules={rules}")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=args
        )
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def new_page(chromium: Browser, javascript: bool = True) -> Iterator[Page]:
    context = chromium.new_context(java_script_enabled=javascript)
    try:
        yield context.new_page()
    finally:
        context.close()


def screenshot(page: Page, name: str, part: Locator | None = None) -> None:
    """With SEXTANT_SCREENSHOTS=DIR, the page (or only `part` of it) as DIR/NAME.png (the
    README's pictures)."""
    folder = os.environ.get("SEXTANT_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1280, "height": 720})
        path = str(Path(folder) / f"{name}.png")
        box = part.bounding_box() if part is not None else None
        if box is not None:  # the part, cut at a screen and a half: a picture, not a scroll
            top = box["y"] + page.evaluate("window.scrollY")  # the box is where it is on screen
            height = min(box["height"], TALLEST)
            clip = {"x": box["x"], "y": top, "width": box["width"], "height": height}
            page.screenshot(path=path, full_page=True, clip=clip)
        else:
            page.screenshot(path=path, full_page=True)
