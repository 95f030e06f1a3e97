#!/usr/bin/env bash
# The test suite with the system tools it uses for real.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

# The system tools the tests use for real (the list: scripts/system-packages.sh). As root, the
# missing ones are installed; otherwise they are named, and the tests that need them skip.
. scripts/system-packages.sh
# shellcheck disable=SC2046
install_system_packages $(missing_system_packages) || true

exec "$VENV/bin/python" -m pytest -q "$@"
