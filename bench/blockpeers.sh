#!/bin/bash
# bench/blockpeers.sh: large files' blocks between nodes. N nodes (default 3) each read one file of
# SIZE MiB (default 256) in order, in 1 MiB read() calls, at once, under augur run (reactive), with
# peers and then each alone. Each node is a mount namespace of its own (a private /dev/shm) with
# its own client of the emulated PFS (augur pfsemu, direct I/O, BW per client, default 100MiB/s)
# mounted at one path, serving peers on 127.0.0.(i+1). Prints per node and mode the reader's
# seconds, the bytes its PFS client served and the blocks from and to peers (augur stat); every
# reader's sha256 is checked. Root, FUSE.
#   make build && bench/blockpeers.sh     or     N=2 SIZE=64 BW=200MiB/s bench/blockpeers.sh
set -e
S=$(realpath "$0")
cd "$(dirname "$S")/.."
A=$PWD/build/augur
export N=${N:-3} SIZE=${SIZE:-256} BW=${BW:-100MiB/s}

if [ "$1" = node ]; then # node I MODE W: one node, inside its namespace
  i=$2; mode=$3; W=$4; d=$W/run/$mode/node$i
  mount -t tmpfs tmpfs /dev/shm
  mkdir -p $d/tier
  $A pfsemu --source $W/src --mount $W/pfs --direct-io --bandwidth $BW --stats-file $d/pfs.json \
    --stats-interval 200ms --ready-file $d/pfs.ready 2>$d/pfs.err &
  pfs=$!
  while [ ! -e $d/pfs.ready ]; do sleep 0.05; done
  export AUGUR_DATASET=$W/pfs AUGUR_POLICY=reactive AUGUR_JOB=blocks-$mode AUGUR_TIERS=$d/tier:$((2 * SIZE))MiB AUGUR_LOG=warn:$d/log
  if [ $mode = peers ]; then
    export AUGUR_NODES=$N AUGUR_NODE_RANK=$i AUGUR_PEERS=$(cat $W/peers) AUGUR_PEER_SECRET=$(cat $W/secret)
  fi
  $A run -- sh -c "python3 $W/reader.py $W/pfs/big.bin $d/ready $W/run/$mode/go >$d/out; while [ ! -e $W/run/$mode/release ]; do sleep 0.05; done"
  $A stat --json --job blocks-$mode >$d/stat.json
  kill $pfs; wait $pfs
  exit 0
fi

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p $W/src $W/pfs
head -c $((SIZE << 20)) /dev/urandom >$W/src/big.bin
want=$(sha256sum $W/src/big.bin | cut -d' ' -f1)
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >$W/secret
for i in $(seq 0 $((N - 1))); do echo "127.0.0.$((i + 1)):$((7400 + i))"; done | paste -sd, >$W/peers
cat >$W/reader.py <<'EOF'
import hashlib, os, sys, time
path, ready, go = sys.argv[1:4]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.01)
t, h = time.time(), hashlib.sha256()
with open(path, "rb", buffering=0) as f:
    while b := f.read(1 << 20):
        h.update(b)
print(h.hexdigest(), "%.2f" % (time.time() - t), flush=True)
EOF
for mode in peers alone; do
  mkdir -p $W/run/$mode
  for i in $(seq 0 $((N - 1))); do unshare --mount --propagation private "$S" node $i $mode $W & done
  for i in $(seq 0 $((N - 1))); do while [ ! -e $W/run/$mode/node$i/ready ]; do sleep 0.05; done; done
  sleep 1
  touch $W/run/$mode/go
  for i in $(seq 0 $((N - 1))); do while [ ! -s $W/run/$mode/node$i/out ]; do sleep 0.05; done; done
  touch $W/run/$mode/release
  wait
  for i in $(seq 0 $((N - 1))); do
    python3 - $W/run/$mode/node$i $mode $want <<'EOF'
import json, sys
d, mode, want = sys.argv[1:4]
p, s = json.load(open(d + "/pfs.json")), json.load(open(d + "/stat.json"))
digest, secs = open(d + "/out").read().split()
M = 2**20
print("%s %s: %s s%s, PFS %.1f MiB, blocks from peers %d (%.1f MiB), to peers %d (%.1f MiB), peer errors %d" % (
    mode, d.rsplit("/", 1)[1], secs, "" if digest == want else " WRONG BYTES", p["read_bytes"] / M,
    s["peer_blocks_in"], s["peer_block_bytes_in"] / M, s["peer_blocks_out"], s["peer_block_bytes_out"] / M, s["peer_errors"]))
EOF
  done
done
