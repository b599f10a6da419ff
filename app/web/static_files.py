"""Static files with cache headers: vendored libraries carry their version in their path, so a browser may
keep them for a year without asking again (`immutable`, RFC 8246); the project's own CSS and scripts change
with each release under the same name, so browsers revalidate them (`no-cache`) against the ETag and
Last-Modified that Starlette's `StaticFiles` sends, and get a 304 when nothing changed."""

from __future__ import annotations

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

VERSIONED_PREFIX = "vendor/"  # static/vendor/<name>-<version>… (static/vendor/VERSIONS.md)
ONE_YEAR_S = 365 * 24 * 3600


class CachedStaticFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        if response.status_code in (200, 304):
            versioned = path.replace("\\", "/").startswith(VERSIONED_PREFIX)
            response.headers["cache-control"] = (
                f"public, max-age={ONE_YEAR_S}, immutable" if versioned else "no-cache"
            )
        return response
