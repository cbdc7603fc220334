#!/usr/bin/env bash
# make demo: a training-style reader over a small generated dataset on an
# emulated shared filesystem, first as it is, then under augur with the
# built-in default configuration (RAM tier under /dev/shm, disk tier under
# the temporary directory).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
augur=$root/build/augur
work=${AUGUR_DEMO_DIR:-/tmp/augur-demo}
nfiles=${AUGUR_DEMO_FILES:-1000}
epochs=${AUGUR_DEMO_EPOCHS:-3}

mkdir -p "$work"
gcc -O2 -Wall -Wextra -Werror -o "$work/reader" "$root/bench/c/reader.c"

if [ ! -d "$work/source" ]; then
  echo "== generating $nfiles files of 64 KiB in 10 classes under $work/source"
  for c in $(seq 0 9); do mkdir -p "$work/source/class$c"; done
  for i in $(seq 1 "$nfiles"); do
    head -c 65536 /dev/urandom > "$work/source/class$((i % 10))/img$i.bin"
  done
fi

dataset=$work/source
pfs_pid=
cleanup() {
  if [ -n "$pfs_pid" ]; then kill -TERM "$pfs_pid" 2>/dev/null; wait "$pfs_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT
if [ "$(id -u)" -eq 0 ] && [ -e /dev/fuse ]; then
  mkdir -p "$work/pfs"
  rm -f "$work/ready"
  "$augur" pfsemu --source "$work/source" --mount "$work/pfs" --open-latency 2ms \
    --read-latency 500us --bandwidth 100MiB/s --ready-file "$work/ready" &
  pfs_pid=$!
  for _ in $(seq 100); do [ -e "$work/ready" ] && break; sleep 0.1; done
  [ -e "$work/ready" ] || { echo "pfsemu did not start"; exit 1; }
  dataset=$work/pfs
  echo "== emulated shared filesystem at $dataset (2 ms open, 0.5 ms read, 100 MiB/s shared)"
else
  echo "== not root or no /dev/fuse: reading the local directory $dataset instead of an emulated PFS"
fi
find "$dataset" -type f | sort > "$work/list"
drop() { [ "$(id -u)" -eq 0 ] && sync && echo 3 > /proc/sys/vm/drop_caches || true; }

echo
echo "== without augur: $epochs epochs, shuffled order"
drop
"$work/reader" -e "$epochs" -s 42 "$work/list" | tee "$work/plain.txt"

echo
echo "== augur warm: copy the dataset into the default tiers (reads the PFS once)"
"$augur" warm --dataset "$dataset"

echo
echo "== with augur: the same reader, the same order"
drop
"$augur" run --dataset "$dataset" --seed 42 -- "$work/reader" -e "$epochs" -s 42 "$work/list" | tee "$work/augur.txt"

echo
echo "== where the files were served from (augur stat)"
"$augur" stat

echo
paste "$work/plain.txt" "$work/augur.txt" | awk '{printf "epoch %s: without %6.3fs   with augur %6.3fs   speed-up %.1fx\n", $2, $8, $16, $8/$16}'
echo
echo "(copies stay in the tiers for the next run; 'augur clean' removes them)"
