#!/usr/bin/env bash
# Create .venv and install soak with its dev extra, torch first: the build that fits the machine.
#
# On a machine with an accelerator (nvidia-smi, or an Ascend driver) the configured pip's torch is
# taken. Without one, a CPU build: the configured pip's own torch when it is one (a "+cpu"
# version, or no nvidia-* dependencies: macOS, a local wheel mirror), else the PyTorch CPU index,
# so that public PyPI's multi-GB CUDA build of Linux is never pulled for nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH=${TORCH:-torch==2.13.0}
TORCH_CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
VENV=${VENV:-.venv}

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip)
"${pip[@]}" install -q --upgrade pip

if "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
  echo "setup: torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') already installed"
elif command -v nvidia-smi >/dev/null || [ -d /usr/local/Ascend/driver ]; then
  echo "setup: accelerator found: $TORCH from the configured index"
  "${pip[@]}" install -q "$TORCH"
else
  # Ask the configured index what it would install, without installing it.
  offer=$("${pip[@]}" install --dry-run --no-deps --quiet --ignore-installed --report - "$TORCH" 2>/dev/null \
    | "$VENV/bin/python" -c '
import json, sys
try:
    meta = json.load(sys.stdin)["install"][0]["metadata"]
except (ValueError, LookupError):
    sys.exit(0)
cuda = any(r.startswith("nvidia-") for r in meta.get("requires_dist") or [])
print("cpu" if "+cpu" in meta["version"] or not cuda else "cuda")' || true)
  if [ "$offer" = "cpu" ]; then
    echo "setup: no accelerator; the configured index offers a CPU build of $TORCH"
    "${pip[@]}" install -q "$TORCH"
  else
    echo "setup: no accelerator; $TORCH (CPU build) from $TORCH_CPU_INDEX"
    "${pip[@]}" install -q "$TORCH" --index-url "$TORCH_CPU_INDEX"
  fi
fi
# setuptools prints a banner on every editable install (its editable_wheel's warning, in
# pip's build subprocess, which inherits this filter): noise, not a problem of the setup
PYTHONWARNINGS="ignore::UserWarning:setuptools.command.editable_wheel" "${pip[@]}" install -q -e '.[dev]'

# The Chinese report (soak demo --lang zh, soak report pdf --lang zh) needs a CJK font: none ships
# with soak (5-20 MB). Installed as root where apt-get is; named where it cannot be.
if "$VENV/bin/python" -c 'from soak.report.fonts import register_cjk_font; register_cjk_font()' 2>/dev/null; then
  :
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing fonts-wqy-microhei (a CJK font for the Chinese report)"
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fonts-wqy-microhei >/dev/null; }; then
    echo "setup: fonts-wqy-microhei could not be installed: the Chinese report needs a CJK font" >&2
  fi
else
  echo "setup: no CJK font: the Chinese report (--lang zh) needs one; install it with:" \
    "sudo apt-get install fonts-wqy-microhei (or dnf install wqy-microhei-fonts)" >&2
fi
echo "setup: ready ($VENV/bin/soak)"
