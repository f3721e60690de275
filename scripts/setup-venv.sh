#!/usr/bin/env bash
# Creates (once) the project virtualenv used by the PyTorch comparisons in
# bench/ and, later, by zest-import: pinned versions from the package index.
# The torch wheel pulls about 5 GB of CUDA libraries, so the environment is
# created once and reused; a second run only checks it.
#   scripts/setup-venv.sh [venv-dir]      (default: .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
# ml_dtypes: torch-mlir's bf16 constants (autocast models) need it;
# tensorboardX (and its protobuf): zest train --log-dir's TensorBoard events.
PINS=(torch==2.15.0 torch-mlir==20261001 numpy==2.4.6 safetensors==0.8.0
      transformers==5.23.0 ml_dtypes==0.6.0 tensorboardX==2.6.5
      protobuf==7.36.2)

# The project's Python packages (zest, zest_import) on the virtualenv's
# path, as an editable install would put them: `import zest` works from
# any script run with its interpreter.
link_sources() {
  local site
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$PWD/python" > "$site/zest-sources.pth"
}

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "${PINS[@]}" <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
then
  link_sources
  echo "setup-venv: $VENV has ${PINS[*]}"
  exit 0
fi
if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv
fi
/usr/bin/python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "${PINS[@]}"
link_sources
echo "setup-venv: created $VENV with ${PINS[*]}"
