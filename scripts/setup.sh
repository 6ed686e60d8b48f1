#!/usr/bin/env bash
# Set up everything forksync needs on a fresh machine: a virtualenv with the
# package and its test tools, the npm packages holding GitHub's OpenAPI
# descriptions (the simulator validates every request against them), and
# Debian's chromium (the preview page is tested in a real browser).
# Sourced by scripts/demo and scripts/test; safe to run again.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

command -v git >/dev/null || { echo "setup: git is required (>= 2.38)" >&2; exit 1; }
git_version=$(git --version | awk '{print $3}')
if ! printf '2.38\n%s\n' "$git_version" | sort -V -C; then
  echo "setup: git >= 2.38 is required (found $git_version)" >&2; exit 1
fi
# PostgreSQL's server programs: the test suite starts its own throwaway server
# (tests/pgserver.py). Other engineers' setups may run apt at the same time: wait for
# the lock rather than fail.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null \
      && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
           postgresql >/dev/null \
      || { echo "setup: could not install Debian's postgresql package" >&2; exit 1; }
  else
    echo "setup: PostgreSQL's server programs are needed by the tests: install Debian's" \
         "postgresql package (or set FORKSYNC_PG_BIN to the directory holding initdb)" >&2
    exit 1
  fi
fi
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
stamp=.venv/.forksync-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null
  .venv/bin/python -m pip install --quiet -e '.[test]'
  touch "$stamp"
fi
# Debian's Chromium: the tests render `forksync sync --preview`'s page in a real browser.
if [ "${FORKSYNC_SKIP_BROWSER:-0}" != 1 ] && ! command -v chromium >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt_install() {
      apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends chromium >/dev/null
    }
    # A fresh machine may have no package lists yet: read them once, then try again.
    apt_install || { apt-get -o DPkg::Lock::Timeout=600 update >/dev/null && apt_install; } \
      || { echo "setup: could not install chromium (apt-get install chromium)" >&2; exit 1; }
  else
    echo "setup: chromium is required for the preview tests (apt-get install chromium)" >&2
    exit 1
  fi
fi
if [ "${FORKSYNC_SKIP_NPM:-0}" != 1 ] && [ -f package-lock.json ]; then
  if [ ! -d node_modules/@octokit/openapi ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    command -v npm >/dev/null || { echo "setup: npm is required for the GitHub OpenAPI descriptions" >&2; exit 1; }
    npm ci --no-audit --no-fund --silent
  fi
fi
