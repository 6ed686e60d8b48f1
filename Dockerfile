# forksync: the GitHub App (`forksync serve`).
#
#   docker build -t forksync .
#   docker run --env-file .env -v forksync-data:/var/lib/forksync -p 8080:8080 forksync
#
# BASE is a Debian bookworm image with Python 3.11 and its venv module: Docker Hub's
# python:3.11-slim-bookworm by default. CI reaches no image registry, so scripts/image
# builds this file with buildah on a bookworm root file system made by debootstrap.
# Debian bookworm ships git 2.39; forksync needs >= 2.38 (merge-tree --write-tree).
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/forksync/bin:$PATH \
    FORKSYNC_DATA_DIR=/var/lib/forksync \
    FORKSYNC_HOST=0.0.0.0 \
    FORKSYNC_PORT=8080

RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && git --version \
 && python3 -c "import subprocess,sys; v=subprocess.check_output(['git','--version']).split()[2].decode(); \
sys.exit(0 if tuple(map(int, v.split('.')[:2])) >= (2, 38) else f'git {v} is older than 2.38')"

WORKDIR /app
# Every dependency and the build backend, pinned by version and sha256 (pip-compile;
# docs/APP.md says how to refresh the lock). Nothing unpinned is downloaded.
COPY requirements.lock ./
RUN python3 -m venv /opt/forksync \
 && /opt/forksync/bin/pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY handlers ./handlers
RUN /opt/forksync/bin/pip install --no-deps --no-build-isolation . \
 && rm -rf build /root/.cache

# The App runs as uid 10001: a private key mounted into the container
# (FORKSYNC_PRIVATE_KEY_FILE) must be readable by that uid.
RUN useradd --system --uid 10001 --home-dir /var/lib/forksync --shell /usr/sbin/nologin forksync \
 && mkdir -p /var/lib/forksync \
 && chown forksync /var/lib/forksync
USER forksync
VOLUME ["/var/lib/forksync"]
EXPOSE 8080

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD python3 -c "import os,urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('FORKSYNC_PORT', '8080'), timeout=4)"

# tini forwards SIGTERM so running jobs get their grace period, then exits cleanly.
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["forksync", "serve"]
STOPSIGNAL SIGTERM
