"""Application settings: one pydantic-settings class, env prefix CLUSTERPLAN_, optional .env file."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_SECRET_KEY = "development-only-secret-key-change-me"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CLUSTERPLAN_", env_file=".env", extra="ignore")

    environment: Literal["development", "test", "production"] = "development"
    data_dir: Path = Path("data")
    database_url: str = ""  # empty → sqlite:///<data_dir>/clusterplan.db
    secret_key: str = DEFAULT_SECRET_KEY
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    log_level: str = "info"
    # Reverse proxies whose X-Forwarded-For/-Proto/-Host headers are believed: comma-separated IPs or CIDRs.
    # Empty (the default): nobody's, the TCP peer is the client (see app/auth/clientaddr.py).
    trusted_proxies: str = ""
    # The site is served over TLS (directly or by a proxy): HSTS on every response, Secure cookies always.
    https: bool = False
    # Allow non-Secure session cookies over plain HTTP from other machines (a trusted LAN without TLS).
    insecure_cookies: bool = False
    max_request_bytes: int = 2 * 1024 * 1024
    rate_limit_per_minute: int = 600  # docs/constants.md#api-rate-limit
    login_rate_limit_per_minute: int = 10
    # Planner searches, size sweeps and estimate computations one caller may run at once (app/hooks/inflight.py;
    # docs/constants.md#per-caller-cpu-cap).
    cpu_requests_per_caller: int = Field(default=2, ge=0, le=1000)
    price_stale_days: int = 180

    @field_validator("trusted_proxies")
    @classmethod
    def _check_trusted_proxies(cls, value: str) -> str:
        from app.auth.clientaddr import parse_networks

        parse_networks(value)  # raises ValueError naming the bad entry
        return value

    @model_validator(mode="after")
    def _refuse_default_secret(self) -> Settings:
        if self.environment == "production" and self.secret_key == DEFAULT_SECRET_KEY:
            raise ValueError(
                "CLUSTERPLAN_SECRET_KEY is left at its development default; set a long random value "
                "(for example: python -c 'import secrets; print(secrets.token_urlsafe(48))')"
            )
        return self

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'clusterplan.db').as_posix()}"


@lru_cache
def get_settings() -> Settings:
    return Settings()
