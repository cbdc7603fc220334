#!/usr/bin/env bash
# Installs the Debian packages the tests and benchmarks need when they are
# missing (valgrind: make bench-shim's instruction counts).
# The tests exercise real clients (CPython, numpy, PIL, PyTorch, fio,
# coreutils, CPython's own file tests) and observe opens from outside the
# shim with inotify.
set -euo pipefail
pkgs=(python3 python3-numpy python3-pil python3-torch python3-torchvision python3-h5py
      libpython3.11-testsuite fio inotify-tools strace fuse3 libaio1 attr rsync gcc make valgrind)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "test/deps.sh: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
