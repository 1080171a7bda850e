#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit, property and integration
# tests. Installs what the tests need on a fresh Debian machine.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v gcc >/dev/null || need+=(gcc libc6-dev)
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc6-dev)
command -v perl >/dev/null || need+=(perl)
command -v python3 >/dev/null || need+=(python3)
command -v unshare >/dev/null || need+=(util-linux)
command -v strace >/dev/null || need+=(strace)
command -v go >/dev/null || need+=(golang-go)
command -v node >/dev/null || need+=(nodejs)
command -v make >/dev/null || need+=(make)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
    else
        echo "test.sh: missing packages: ${need[*]} (install them, or run as root)" >&2
        exit 1
    fi
fi

# Python packages the hunt-report tests validate with.
python3 -c 'import jsonschema, junitparser' 2>/dev/null || python3 -m pip install -q jsonschema junitparser

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings
cargo build --workspace --release
# detrun itself static, as the README builds it (the tests run this one).
./scripts/build.sh
# Integration tests run real programs under ptrace; two at a time keeps a
# 2-core machine responsive while other tests load the second core.
cargo test --workspace --release -- --test-threads=2
