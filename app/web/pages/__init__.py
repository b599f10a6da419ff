"""Page routers; each module exports `router`."""
