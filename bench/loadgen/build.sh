#!/usr/bin/env bash
# Build kl_loadgen (the benchmark's C load client) against Debian's librdkafka-dev.
#
#   bash bench/loadgen/build.sh [OUTPUT]      default: ~/.cache/kafkalite-bench/kl_loadgen
#
# The binary goes to a cache directory outside the repository. When the
# librdkafka headers are missing and we are root, Debian's librdkafka-dev is
# installed first (set KL_NO_APT=1 to forbid that); otherwise the build fails
# and the harness falls back to confluent-kafka, labelled as such.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${KAFKALITE_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kafkalite-bench}"
out="${1:-$cache/kl_loadgen}"
mkdir -p "$(dirname "$out")"

if [ ! -f /usr/include/librdkafka/rdkafka.h ]; then
    if [ "${KL_NO_APT:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "build.sh: installing Debian's librdkafka-dev" >&2
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq librdkafka-dev >&2
    else
        echo "build.sh: librdkafka headers missing: apt-get install librdkafka-dev" >&2
        exit 1
    fi
fi

cc="${CC:-gcc}"
libs="$(pkg-config --libs rdkafka 2>/dev/null || echo -lrdkafka)"
tmp="$out.tmp.$$"
"$cc" -O2 -g -Wall -Wextra -std=gnu11 -pthread -o "$tmp" "$here/kl_loadgen.c" $libs
mv -f "$tmp" "$out"
echo "$out"
