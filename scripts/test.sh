#!/usr/bin/env bash
# The test suite with the system tools it uses for real. As root, the missing ones are installed
# (apt-get); otherwise they are named, and the tests that need them skip with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

# Prometheus + promtool and node_exporter (exporter and alert-rule tests), poppler (PDF pages),
# Chromium (the app in a browser), CJK fonts (Chinese PDF), systemd-analyze (unit files),
# PostgreSQL (the store's second backend; SOAK_TEST_PG_URL points the tests at a server),
# sshd, ip and socat (the SSH launcher and the cut-link cluster test).
need=()
command -v prometheus >/dev/null || need+=(prometheus)
command -v prometheus-node-exporter >/dev/null || need+=(prometheus-node-exporter)
command -v pdftoppm >/dev/null || need+=(poppler-utils)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need+=(chromium)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v pg_ctlcluster >/dev/null || need+=(postgresql)
[ -d /usr/share/fonts/truetype/wqy ] || need+=(fonts-wqy-microhei)
# A real sshd for the SSH launcher; ip netns + socat for the cut-link cluster test.
command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || need+=(openssh-server openssh-client)
command -v ip >/dev/null || need+=(iproute2)
command -v socat >/dev/null || need+=(socat)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "test: installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "test: missing system packages (their tests skip): ${need[*]}" >&2
    echo "test: install them with: sudo apt-get install ${need[*]}" >&2
  fi
fi

exec "$VENV/bin/python" -m pytest -q "$@"
