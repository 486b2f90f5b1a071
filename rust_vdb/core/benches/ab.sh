#!/usr/bin/env bash
# A/B of two builds of the kernels bench on a shared machine: runs OLD and NEW alternately,
# four times each, and prints the best ns/row of every case for each side.
# Build each side with `cargo bench -p vdb-core --bench kernels --no-run` and copy the
# executable it names (target/release/deps/kernels-*) aside before changing the sources.
# usage: ab.sh OLD_BIN NEW_BIN [FILTER...] [--samples N --sample-ms MS]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD_BIN NEW_BIN [bench args...]" >&2; exit 2; }
OLD=$1; NEW=$2; shift 2
for _ in 1 2 3 4; do
  for side in OLD NEW; do
    bin=${!side}
    nice -n 10 "$bin" "$@" | grep -E '^[a-z0-9_]+\([a-z0-9+]+\) +[0-9]' | sed "s/^/$side /"
  done
done | awk '{k=$2" "$1; if(!(k in best) || $3<best[k]) best[k]=$3}
            END{for(k in best) printf "%-40s %8.2f\n", k, best[k]}' | sort
