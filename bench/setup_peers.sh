#!/usr/bin/env bash
# Installs what the benchmark's peers need beyond `scripts/setup --bench`, when missing; idempotent.
#   bench/setup_peers.sh [BUILD]        (default BUILD: build)
#
# 1. OpenBLAS for the PyTorch peer. Debian's libtorch1.13 recommends libopenblas0 as its BLAS; an
#    install without recommends (as scripts/setup does) leaves torch on the netlib reference BLAS,
#    ~20x slower on the Dense layers, which no PyTorch user runs. So that the peer is PyTorch as
#    Debian installs it by default, without changing the machine's BLAS for anything else, the
#    bench runs only the peer's processes with LD_LIBRARY_PATH at Debian's libopenblas0-pthread:
#    the installed one when present, else the package unpacked (apt-get download, dpkg -x) into
#    BUILD/bench-deps/. It needs libgfortran5, installed here when missing.
# 2. Node.js and npm (Debian nodejs, npm) when the commands are missing, then the npm package
#    onnxruntime-node into BUILD/bench-node/node_modules (scripts/setup_ort, which make test uses
#    too).
# Each part that fails is named and skipped; bench/run_bench.py then reports what it lacks.
set -uo pipefail

BUILD="${1:-build}"
HERE="$(cd "$(dirname "$0")" && pwd)"
status=0

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi
apt_updated=0
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup_peers: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [ $apt_updated -eq 0 ]; then $SUDO apt-get update -q && apt_updated=1; fi
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# 1. OpenBLAS
SYS_OB=/usr/lib/x86_64-linux-gnu/openblas-pthread
OB_DIR="$BUILD/bench-deps/openblas"
if [ -e "$SYS_OB/libblas.so.3" ]; then
  echo "setup_peers: OpenBLAS installed in $SYS_OB"
elif [ -e "$OB_DIR/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3" ]; then
  echo "setup_peers: OpenBLAS present in $OB_DIR"
else
  if apt_install libgfortran5 && tmp="$(mktemp -d)" &&
     (cd "$tmp" && apt-get download -q libopenblas0-pthread) &&
     mkdir -p "$OB_DIR" && dpkg -x "$tmp"/libopenblas0-pthread_*.deb "$OB_DIR"; then
    rm -rf "$tmp"
    echo "setup_peers: OpenBLAS unpacked into $OB_DIR"
  else
    echo "setup_peers: failed to get Debian's libopenblas0-pthread; the PyTorch peer will run on" \
         "whatever libblas.so.3 the machine has (BENCHMARKS.md names it)" >&2
    status=1
  fi
fi

# 2. Node.js and onnxruntime-node
if command -v node >/dev/null && command -v npm >/dev/null; then
  :  # any Node.js with npm will do (some images ship one that bundles npm, not Debian's)
elif ! apt_install nodejs npm; then
  echo "setup_peers: failed to install nodejs and npm; ONNX Runtime figures will be missing" >&2
  exit 1
fi
if ! "$HERE/../scripts/setup_ort" "$BUILD"; then
  echo "setup_peers: ONNX Runtime figures will be missing" >&2
  status=1
fi
exit $status
