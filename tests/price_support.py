"""A user's private cloud price row as the price-visibility tests post it (POST /api/v1/prices)."""

from __future__ import annotations

import uuid
from datetime import date, timedelta
from typing import Any


def private_quote(**overrides: Any) -> dict[str, Any]:
    """An on-demand H100 GPU-hour quote, fresh (3 days old) and far below the built-in ones, so it moves its
    owner's headline price; a unique item name per call. `overrides` replace any field."""
    return {
        "category": "cloud_gpu",
        "item": f"negotiated H100 quote {uuid.uuid4().hex[:8]}",
        "vendor": "QuoteCloud",
        "pricing_model": "on-demand",
        "unit": "GPU-hour",
        "price_usd": 0.5,
        "usd_per_gpu_hour": 0.5,
        "gpu_name": "H100-SXM",
        "gpus_per_unit": 1,
        "price_date": (date.today() - timedelta(days=3)).isoformat(),
        "source": "procurement quote Q-7 (confidential)",
        "includes": "GPU-hour with host share",
    } | overrides
