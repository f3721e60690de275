#!/usr/bin/env bash
# Installs everything Zest needs to build and test: Debian packages with
# apt-get, then the project virtualenv for zest-import and the PyTorch
# comparisons (scripts/setup-venv.sh: pinned wheels from the package index).
# Idempotent: what is already present is skipped, so a second run is fast
# and never touches the network.
set -euo pipefail

PACKAGES=(
  # Toolchain: LLVM/MLIR 22 (FileCheck and lit come with llvm-22-tools).
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22
  # Build system (g++ also links the executables zestc makes).
  cmake ninja-build ccache make python3 g++
  # CPU runtime: collectives and GEMM.
  libopenmpi-dev openmpi-bin libopenblas-dev libdnnl-dev
  # Benchmarks (bench/): arithmetic on timings, peak memory of zestc.
  bc time
  # The format check make test runs (scripts/check-format.sh).
  clang-format black git
  # The virtualenv of zest-import (scripts/setup-venv.sh).
  python3-venv
  # zest plot's PNGs, and the test that renders its pages: a headless browser
  # (and a font for its text: chromium only recommends one).
  chromium fonts-liberation
  # Zlib/zstd/xml are link dependencies of Debian's LLVM CMake exports.
  zlib1g-dev libzstd-dev libxml2-dev libedit-dev libcurl4-openssl-dev
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# torch, torch-mlir, numpy, safetensors (about 6 GB; about 1.5 minutes on
# this project's machines, once).
"$(dirname "$0")/setup-venv.sh"
