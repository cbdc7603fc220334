#!/bin/bash
# bench/revalidate.sh: the cost of revalidate = 0 (every open served from a tier compares the
# copy with its source on the shared filesystem) against the default 30s, side by side: 1000
# files of 64 KiB in the RAM tier, read once per run by bench/c/reader.c under augur run, over
# the emulated PFS (augur pfsemu) answering metadata requests in META (default 1ms), with
# the client caching attributes for CT (default 0s: every stat reaches the PFS). Root, FUSE.
#   make build && bench/revalidate.sh     or     CT=1s bench/revalidate.sh
set -e
cd "$(dirname "$0")/.."
A=$PWD/build/augur
META=${META:-1ms}; CT=${CT:-0s}
W=$(mktemp -d); R=$(mktemp -d /dev/shm/augur-revalidate-XXXXXX)
trap 'kill $PFS 2>/dev/null; wait 2>/dev/null; rm -rf "$W" "$R"' EXIT
mkdir -p $W/src/c $W/mnt
for i in $(seq 1000); do head -c 65536 /dev/urandom > $W/src/c/f$i.bin; done
gcc -O2 -o $W/reader bench/c/reader.c
$A pfsemu --source $W/src --mount $W/mnt --meta-latency $META --cache-timeout $CT --ready-file $W/ready > $W/pfs.log 2>&1 &
PFS=$!
while [ ! -e $W/ready ]; do sleep 0.1; done
ls $W/mnt/c/* > $W/list
$A warm --quiet --dataset $W/mnt --tier $R/t:1GiB > /dev/null
for round in 1 2 3; do
  for rv in 30s 0s; do
    out=$(AUGUR_REVALIDATE=$rv $A run --dataset $W/mnt --tier $R/t:1GiB -- $W/reader -e 1 $W/list)
    echo "revalidate=$rv $out"
  done
done
