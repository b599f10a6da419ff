"""Plotly under our Content-Security-Policy, in a real chromium.

The probe page is served on the live server's origin with exactly the policy the security hook sends,
loads the vendored plotly.min.js, draws a chart, hovers it and records every CSP violation. It also shows
why style-src carries 'unsafe-inline': with style-src 'self' alone, plotly.min.js fails while loading
(it injects its stylesheet through a <style> element) and no chart can be drawn at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.hooks.security import CONTENT_SECURITY_POLICY

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PROBE_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>csp probe</title>
<script src="/csp-probe-listen.js"></script>
<script src="/static/vendor/plotly-cartesian-2.35.2.min.js"></script></head>
<body><div id="chart"></div><script src="/csp-probe.js"></script></body></html>"""

LISTEN_JS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""

PROBE_JS = """
if (window.Plotly) {
  Plotly.newPlot("chart", [{x: [1, 2, 3], y: [2, 1, 3], type: "bar", name: "step time"}],
    {title: {text: "probe"}, width: 600, height: 400}, {displaylogo: false});
}
"""


def _serve_script(body: str) -> Any:
    return lambda route: route.fulfill(status=200, content_type="text/javascript", body=body)


def _probe(browser: Any, base_url: str, policy: str, hover: bool) -> dict[str, Any]:
    scripts = {"/csp-probe-listen.js": LISTEN_JS, "/csp-probe.js": PROBE_JS}
    page = browser.new_page()
    try:
        page.route(
            f"{base_url}/csp-probe",
            lambda route: route.fulfill(
                status=200,
                content_type="text/html",
                body=PROBE_HTML,
                headers={"Content-Security-Policy": policy},
            ),
        )
        for path, body in scripts.items():
            page.route(f"{base_url}{path}", _serve_script(body))
        page.goto(f"{base_url}/csp-probe")
        page.wait_for_load_state("load")
        result: dict[str, Any] = {"plotly": page.evaluate("typeof window.Plotly === 'object'")}
        if hover:
            page.wait_for_selector("#chart .bars .point", timeout=20_000)
            box = page.locator("#chart .bars .point").nth(1).bounding_box()
            assert box is not None
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.wait_for_selector("#chart .hoverlayer .hovertext", timeout=5_000)
            result["modebar_styled"] = page.evaluate(
                "(() => { const m = document.querySelector('.modebar');"
                " return !!m && getComputedStyle(m).position === 'absolute'; })()"
            )
        result["violations"] = page.evaluate("window.cspViolations")
        return result
    finally:
        page.context.close()


def test_plotly_runs_under_our_policy(live_server, browser) -> None:  # type: ignore[no-untyped-def]
    result = _probe(browser, live_server.url, CONTENT_SECURITY_POLICY, hover=True)
    assert result == {"plotly": True, "modebar_styled": True, "violations": []}


def test_plotly_needs_inline_styles(live_server, browser) -> None:  # type: ignore[no-untyped-def]
    strict = CONTENT_SECURITY_POLICY.replace("style-src 'self' 'unsafe-inline'", "style-src 'self'")
    assert strict != CONTENT_SECURITY_POLICY
    result = _probe(browser, live_server.url, strict, hover=False)
    assert result["plotly"] is False
    assert any(v.startswith("style-src") for v in result["violations"]), result


def test_api_docs_render_offline_under_our_policy(live_server, browser) -> None:  # type: ignore[no-untyped-def]
    """/docs draws Swagger UI from the vendored bundle: no CSP violation, and no request leaves the origin."""
    page = browser.new_page()
    try:
        page.add_init_script(LISTEN_JS)
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        response = page.goto(f"{live_server.url}/docs")
        assert response is not None and response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        page.wait_for_selector(".opblock-summary-path[data-path='/api/v1/estimate']", timeout=20_000)
        violations = page.evaluate("window.cspViolations")
    finally:
        page.context.close()
    assert violations == []
    foreign = [url for url in requested if not url.startswith(live_server.url)]
    assert foreign == [], foreign


def test_api_reference_renders_offline_under_our_policy(live_server, browser) -> None:  # type: ignore[no-untyped-def]
    """/redoc draws ReDoc from the vendored bundle: no CSP violation, no console error, no request off the origin."""
    page = browser.new_page()
    try:
        page.add_init_script(LISTEN_JS)
        requested: list[str] = []
        errors: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        response = page.goto(f"{live_server.url}/redoc")
        assert response is not None and response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        page.wait_for_selector("[data-section-id*='operation/']", state="attached", timeout=20_000)
        assert "/api/v1/estimate" in page.content()
        violations = page.evaluate("window.cspViolations")
    finally:
        page.context.close()
    assert violations == [] and errors == [], (violations, errors)
    foreign = [url for url in requested if not url.startswith(live_server.url)]
    assert foreign == [], foreign
