#!/usr/bin/env bash
# Build kl_loadgen, the benchmark's C load client, into a cache directory
# outside the repository.
#
#   bash bench/loadgen/build.sh [--librdkafka debian|npm] [OUTPUT]
#
# OUTPUT is a path (default: in the cache below); one starting with "-" is
# refused, and -h/--help prints this text.
#
# debian (default): link against Debian's librdkafka-dev (librdkafka 2.0.x).
#   When the headers are missing and we are root, librdkafka-dev is installed
#   with apt-get first (KL_NO_APT=1 forbids that).
# npm: build librdkafka from the sources shipped in the npm package
#   @confluentinc/kafka-javascript (deps/librdkafka, librdkafka 2.15.x) as a
#   static library, once, and link it in. Needed for brokers that librdkafka
#   2.0.x cannot parse (tansu's ApiVersions v3 tagged fields).
#
# Cache: $KAFKALITE_BENCH_CACHE, else ~/.cache/kafkalite-bench.
# Prints the path of the binary on success.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${KAFKALITE_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kafkalite-bench}"
flavour=debian
usage() { sed -n '2,19s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
if [ "${1:-}" = --librdkafka ]; then
    flavour="${2:?--librdkafka needs debian or npm}"
    shift 2
fi
# OUTPUT is a path, never an option: `build.sh --help` once compiled the client
# to ./--help.tmp.<pid> and left it in the repository.
case "${1:-}" in
-h | --help)
    usage
    exit 0
    ;;
-*)
    echo "build.sh: refusing option-like OUTPUT '$1' (options: --librdkafka debian|npm;" \
        "write ./$1 for a file of that name)" >&2
    exit 2
    ;;
esac
if [ $# -gt 1 ]; then
    echo "build.sh: one OUTPUT path at most, got: $*" >&2
    exit 2
fi
out="${1:-$cache/kl_loadgen-$flavour}"
mkdir -p -- "$cache" "$(dirname -- "$out")"
cc="${CC:-gcc}"
cflags=(-O2 -g -Wall -Wextra -Wno-ignored-qualifiers -std=gnu11 -pthread)

case "$flavour" in
debian)
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
    libs=(-lrdkafka)
    ;;
npm)
    pkg="@confluentinc/kafka-javascript@${KL_NPM_VERSION:-1.10.1}"
    prefix="$cache/librdkafka-npm-${KL_NPM_VERSION:-1.10.1}"
    if [ ! -f "$prefix/lib/librdkafka.a" ]; then
        command -v npm >/dev/null || { echo "build.sh: npm not found" >&2; exit 1; }
        work="$cache/npm-src"
        rm -rf "$work" && mkdir -p "$work"
        echo "build.sh: fetching $pkg and building its librdkafka (about a minute)" >&2
        (cd "$work" && npm pack --silent "$pkg" >/dev/null 2>&1)
        tar xzf "$work"/*.tgz -C "$work" package/deps/librdkafka
        src="$work/package/deps/librdkafka"
        # No TLS/SASL/zstd/zlib: the benchmark needs plaintext, none and lz4
        # (lz4 and snappy are built in), and no step may download anything.
        (cd "$src" && ./configure --prefix="$prefix" --disable-ssl --disable-gssapi \
            --disable-sasl --disable-curl --disable-zstd --disable-lz4-ext --disable-zlib \
            --enable-static >"$work/configure.log" 2>&1 \
            && make -j"$(nproc)" -C src >"$work/make.log" 2>&1 \
            && make -C src install >"$work/install.log" 2>&1) || {
            echo "build.sh: librdkafka build failed, see $work/*.log" >&2
            exit 1
        }
    fi
    cflags+=(-I"$prefix/include")
    libs=("$prefix/lib/librdkafka.a" -lm -ldl -lpthread -lrt)
    ;;
*)
    echo "build.sh: unknown librdkafka flavour $flavour (debian or npm)" >&2
    exit 2
    ;;
esac

tmp="$out.tmp.$$"
trap 'rm -f -- "$tmp"' EXIT
"$cc" "${cflags[@]}" -o "$tmp" "$here/kl_loadgen.c" "${libs[@]}"
mv -f -- "$tmp" "$out"
echo "$out"
