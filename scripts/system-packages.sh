# Sourced by scripts/test.sh and .ci/run: the system parts the tests use for real, in one list.
#   Prometheus + promtool and node_exporter (exporter and alert-rule tests, benchmarks),
#   poppler (PDF pages), Chromium (the app in a browser), CJK fonts (Chinese PDF: WenQuanYi,
#   Droid Sans Fallback and Noto Sans CJK),
#   systemd-analyze (unit files), PostgreSQL (the store's second backend),
#   sshd (the SSH launcher), ip netns + socat (the cut-link cluster test), faketime (a node
#   whose clock is off).
# missing_system_packages prints the Debian packages whose command is not here.
missing_system_packages() {
  local need=()
  command -v prometheus >/dev/null || need+=(prometheus)
  command -v prometheus-node-exporter >/dev/null || need+=(prometheus-node-exporter)
  command -v pdftoppm >/dev/null || need+=(poppler-utils)
  command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need+=(chromium)
  command -v systemd-analyze >/dev/null || need+=(systemd)
  command -v pg_ctlcluster >/dev/null || need+=(postgresql)
  [ -d /usr/share/fonts/truetype/wqy ] || need+=(fonts-wqy-microhei)
  # a CJK-only font (no Latin, no digits): the PDF's per-run fonts are tested with it too
  [ -d /usr/share/fonts/truetype/droid ] || need+=(fonts-droid-fallback)
  # an OpenType/CFF CJK font: embedded as TrueType outlines (reportlab cannot embed CFF)
  [ -d /usr/share/fonts/opentype/noto ] || need+=(fonts-noto-cjk)
  command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || need+=(openssh-server openssh-client)
  command -v ip >/dev/null || need+=(iproute2)
  command -v socat >/dev/null || need+=(socat)
  command -v faketime >/dev/null || need+=(faketime)
  echo "${need[@]}"
}

# install_system_packages PKG...: apt-get as root; otherwise name them and return 1.
install_system_packages() {
  [ $# -gt 0 ] || return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing ${*}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  else
    echo "missing system packages (their tests skip): ${*}" >&2
    echo "install them with: sudo apt-get install ${*}" >&2
    return 1
  fi
}
