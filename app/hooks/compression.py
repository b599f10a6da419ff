"""gzip for every response a client accepts it for (pages, JSON, static files), bar event streams.

Starlette's `GZipMiddleware` compresses bodies of at least `MINIMUM_BYTES`, adds `Vary: Accept-Encoding`, and
leaves `text/event-stream` alone (a compressor would hold events back until its buffer fills). Level 6 is
zlib's default trade-off: the 4.6 MB Plotly bundle goes to 1.3 MB in about 0.1 s of CPU at level 6, against
about twice that at Starlette's default 9 for 0.3 % less; versioned assets are then cached by the browser
for a year (app/web/static_files.py), so each client pays it once.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.middleware.gzip import GZipMiddleware

# Below about 1 KB the gzip header and the CPU cost outweigh the bytes saved (Starlette's default is 500).
MINIMUM_BYTES = 1000
COMPRESS_LEVEL = 6


def install(app: FastAPI) -> None:
    app.add_middleware(GZipMiddleware, minimum_size=MINIMUM_BYTES, compresslevel=COMPRESS_LEVEL)
