# syntax=docker/dockerfile:1
# Multi-stage build: wheels are built in a throwaway stage; the runtime image holds only what runs.
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
RUN python -m pip wheel --wheel-dir /wheels .

FROM python:${PYTHON_VERSION}-slim AS runtime
# Security settings (docs/operations.md): behind a TLS proxy, list its address in CLUSTERPLAN_TRUSTED_PROXIES
# (IPs/CIDRs; the default trusts no forwarded header) and set CLUSTERPLAN_HTTPS=true (HSTS, Secure cookies).
# Published over plain HTTP, the container sees the Docker gateway, not loopback, so sign-in needs TLS, or
# CLUSTERPLAN_INSECURE_COOKIES=true on a trusted network (cookies then cross it in clear text).
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CLUSTERPLAN_HOST=0.0.0.0 CLUSTERPLAN_PORT=8000 CLUSTERPLAN_DATA_DIR=/data \
    CLUSTERPLAN_ENVIRONMENT=production \
    CLUSTERPLAN_TRUSTED_PROXIES="" CLUSTERPLAN_HTTPS=false CLUSTERPLAN_INSECURE_COOKIES=false
RUN groupadd --system --gid 10001 clusterplan \
 && useradd --system --uid 10001 --gid clusterplan --home-dir /srv --shell /usr/sbin/nologin clusterplan \
 && mkdir -p /data /srv && chown clusterplan:clusterplan /data
COPY --from=build /wheels /wheels
RUN python -m pip install /wheels/*.whl && rm -rf /wheels
WORKDIR /srv
# migrations/, templates/ and static/ sit beside the installed package's parent, as in the source tree.
COPY --chown=clusterplan:clusterplan migrations ./migrations
COPY --chown=clusterplan:clusterplan templates ./templates
COPY --chown=clusterplan:clusterplan static ./static
ENV CLUSTERPLAN_RESOURCE_DIR=/srv
USER clusterplan
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
  CMD python -c "import urllib.request,os; urllib.request.urlopen(f'http://127.0.0.1:{os.environ[\"CLUSTERPLAN_PORT\"]}/healthz', timeout=4)"
# `serve` applies migrations and seeds the catalog, then starts uvicorn; settings come from CLUSTERPLAN_* variables
# (CLUSTERPLAN_SECRET_KEY is required in production; CLUSTERPLAN_DATABASE_URL for PostgreSQL). While no
# administrator has a password it prints a one-time sign-in link (`docker logs`); or run
# `docker exec -it <container> clusterplan users create admin@example.com --admin`.
CMD ["clusterplan", "serve"]
