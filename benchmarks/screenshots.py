"""Screenshots of the planning pages, in light and dark mode, for reviews and the docs.

Starts the real server (`clusterplan serve`) on a fresh SQLite database on a free loopback port, signs a
browser in as an administrator, saves two plans, and writes one full-page PNG per page and colour scheme:

* `builder-estimate`: the plan builder with a layout set by hand (Llama 3 8B on 2×8 H100),
* `builder-planner`: the builder letting the planner choose, ranked by cost per run,
* `plan`: a saved plan (saved from the planner, ranked by cost),
* `compare`: the two saved plans compared,
* `cost`: the cost page.

The browser is Debian's chromium driven by Playwright (the e2e tests' browser; Playwright never downloads one).
Every page has a time limit (`--timeout`, seconds): a page whose charts do not draw in time is still captured,
and reported; the exit status is 1 when a page failed to load or draw.

    .venv/bin/python benchmarks/screenshots.py [OUT] [--page builder-estimate ...] [--scheme light ...]

OUT defaults to out/screenshots/ (git-ignored); files are named PAGE-SCHEME.png. `--docs` writes the two
screenshots the docs and README show into docs/screenshots/ under their names (plan-builder.png,
plan-compare.png), from the same pages in the light scheme.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.web.pages._builder import BuilderState  # noqa: E402
from benchmarks.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

SCHEMES = ("light", "dark")
VIEWPORT = {"width": 1400, "height": 1000}
DEFAULT_OUT = ROOT / "out" / "screenshots"
# `--docs`: the images the docs and README show, written under their own names into docs/screenshots: the page,
# light scheme, and the window (1,440 px wide, as tall as given) rather than the full page
DOCS_OUT = ROOT / "docs" / "screenshots"
DOCS_SHOTS = {"builder-estimate": ("plan-builder", 1500), "compare": ("plan-compare", 1100)}
DEFAULT_TIMEOUT_S = 90.0

ESTIMATE = BuilderState()
PLANNER = BuilderState(mode="planner", rank_by="cost", deadline_days=30.0)
OTHER = BuilderState(tp=4)  # the second plan of the comparison: the same run with another layout


@dataclass
class Plans:
    """The saved plans the `plan` and `compare` pages show (made once, on first use)."""

    first: str = ""
    second: str = ""


def _save_from_builder(http: httpx.Client, state: BuilderState, name: str) -> str:
    """Save a plan as the builder's save form does (its scenario, profile and builder choices); returns its id."""
    built = http.get("/plans/new?" + state.query(), headers={"HX-Request": "true"})
    built.raise_for_status()
    form = {"name": name, "notes": "saved by benchmarks/screenshots.py"}
    for field in ("scenario", "calibration_profile", "builder"):
        found = re.search(
            rf'<input type="hidden" name="{field}" form="save-form" value="([^"]*)"', built.text
        )
        if not found:
            raise RuntimeError(f"the builder offered no {field} to save for {name!r}")
        form[field] = html.unescape(found.group(1))
    json.loads(form["scenario"])  # a scenario the builder could evaluate
    saved = http.post("/plans", data=form, follow_redirects=False)
    if saved.status_code != 303:
        raise RuntimeError(f"saving {name!r} failed: {saved.status_code} {saved.text[:500]}")
    return saved.headers["location"].rsplit("/", 1)[1]


def _plans(http: httpx.Client, plans: Plans) -> Plans:
    if not plans.first:
        plans.first = _save_from_builder(http, PLANNER, "Llama 3 8B, planner, ranked by cost")
        plans.second = _save_from_builder(http, OTHER, "Llama 3 8B, TP4 by hand")
    return plans


# page name → the path to open (given an API client and the saved plans, made only for the pages that need them)
PAGES: dict[str, Callable[[httpx.Client, Plans], str]] = {
    "builder-estimate": lambda http, plans: "/plans/new?" + ESTIMATE.query(),
    "builder-planner": lambda http, plans: "/plans/new?" + PLANNER.query(),
    "plan": lambda http, plans: f"/plans/{_plans(http, plans).first}",
    "compare": lambda http, plans: (
        f"/plans/compare?ids={_plans(http, plans).first}&ids={plans.second}&only_differences=true"
    ),
    "cost": lambda http, plans: "/cost",
}

# every chart on the page drawn, and no htmx request in flight (the scaling and sizing panels load after)
SETTLED = (
    "document.readyState === 'complete' && "
    "Array.from(document.querySelectorAll('.chart[data-figure]')).every(el => el.hasAttribute('data-drawn')) && "
    "document.querySelectorAll('.htmx-request').length === 0 && "
    "document.querySelectorAll('[hx-trigger=\"load\"]').length === 0"
)


def _settle(page: Any, deadline: float) -> bool:
    """Poll until the page has settled or the deadline passes (the CSP forbids wait_for_function's eval)."""
    while time.monotonic() < deadline:
        try:
            if page.evaluate(SETTLED):
                page.wait_for_timeout(300)  # let Plotly finish its transitions
                return True
        except Exception:  # the page may be navigating or swapping; try again
            pass
        page.wait_for_timeout(150)
    return False


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT, help="folder for the PNG files")
    parser.add_argument(
        "--page", action="append", choices=sorted(PAGES), help="a page to capture (repeat; default: all)"
    )
    parser.add_argument(
        "--scheme", action="append", choices=SCHEMES, help="a colour scheme (repeat; default: light and dark)"
    )
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds allowed per page (default 90)"
    )
    parser.add_argument(
        "--chromium", default=CHROMIUM, help="the chromium binary (default /usr/bin/chromium)"
    )
    parser.add_argument(
        "--docs",
        action="store_true",
        help="write the docs' screenshots (docs/screenshots/plan-builder.png, plan-compare.png) instead",
    )
    args = parser.parse_args(argv)
    if args.docs:
        args.out, args.page, args.scheme = DOCS_OUT, list(DOCS_SHOTS), ["light"]
    return args


def _shot(page: Any, target_dir: Path, name: str, scheme: str, docs: bool) -> Path:
    """Where a page's screenshot goes, and the window it is taken in."""
    if docs:
        stem, height = DOCS_SHOTS[name]
        page.set_viewport_size({"width": 1440, "height": height})
        return target_dir / f"{stem}.png"
    page.set_viewport_size(VIEWPORT)
    return target_dir / f"{name}-{scheme}.png"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    pages = list(dict.fromkeys(args.page or PAGES))
    schemes = list(dict.fromkeys(args.scheme or SCHEMES))
    if not Path(args.chromium).exists():
        print(f"chromium not found at {args.chromium} (make system-deps)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    from tests.conftest import start_live_server

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="screenshots-"))
    server = start_live_server(
        f"sqlite:///{tmp / 'screenshots.db'}", tmp, {"CLUSTERPLAN_RATE_LIMIT_PER_MINUTE": "1000000"}
    )
    failed: list[str] = []
    try:
        with (
            httpx.Client(base_url=server.url, headers=server.headers, timeout=args.timeout) as http,
            sync_playwright() as playwright,
        ):
            browser = playwright.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            plans = Plans()
            try:
                for scheme in schemes:
                    context = browser.new_context(viewport=VIEWPORT, color_scheme=scheme)
                    server.sign_in(context)
                    page = context.new_page()
                    page.set_default_timeout(args.timeout * 1000)
                    for name in pages:
                        target = _shot(page, out, name, scheme, args.docs)
                        deadline = time.monotonic() + args.timeout
                        try:
                            page.goto(server.url + PAGES[name](http, plans), wait_until="load")
                            if not _settle(page, deadline):
                                failed.append(f"{name} ({scheme}): not settled within {args.timeout:g} s")
                            page.screenshot(path=str(target), full_page=not args.docs)
                        except Exception as exc:  # report the page, go on with the next
                            failed.append(f"{name} ({scheme}): {type(exc).__name__}: {str(exc)[:300]}")
                            continue
                        print(target)
                    context.close()
            finally:
                browser.close()
    finally:
        server.stop()
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
