#!/usr/bin/env bash
# The engine's Rust tests built for aarch64 and run under qemu-user emulation on an x86_64
# Debian (bookworm) machine (the NEON table's parity with the scalar twins, and every engine
# test), then the Python extension linked for aarch64. Emulation checks answers, not speed.
# As root, or with sudo:
#   bash tests/aarch64-qemu.sh     # ~2 min on 2 cores once the packages are in (~3 min to install)
# Debian's packages: an aarch64 Rust standard library comes with Debian's rustc (rustc-web), as
# rustup cannot fetch targets here; gcc's aarch64 cross linker; qemu-user; the arm64 C library.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo -n"
need=()
[ -x /usr/bin/rustc ] && [ -d /usr/lib/rustlib/aarch64-unknown-linux-gnu ] || need+=(rustc-web libstd-rust-web-dev:arm64)
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
[ -e /lib/ld-linux-aarch64.so.1 ] || need+=(libc6:arm64)
if [ ${#need[@]} -gt 0 ]; then
    echo "+ apt-get install ${need[*]}"
    dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# The arm64 C library (-L /), not the cross one under /usr/aarch64-linux-gnu: with bookworm's
# libc6-arm64-cross, every new thread hangs under qemu-user (7.2 and 10.0 alike).
export CARGO_TARGET_DIR=target/aarch64 RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /"
echo "+ $RUSTC --version: $($RUSTC --version)"
echo "+ cargo test -p vdb-core --target aarch64-unknown-linux-gnu --release --no-fail-fast   (runner: $CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER)"
test_rc=0
cargo test -p vdb-core --target aarch64-unknown-linux-gnu --release --no-fail-fast || test_rc=$?
# The Python extension builds for aarch64 too (it is linked, not run: no aarch64 Python here).
echo "+ PYO3_CROSS_PYTHON_VERSION=3.10 PYO3_BUILD_EXTENSION_MODULE=1 cargo build -p vdb-py --target aarch64-unknown-linux-gnu --release"
PYO3_CROSS_PYTHON_VERSION=3.10 PYO3_BUILD_EXTENSION_MODULE=1 \
    cargo build -p vdb-py --target aarch64-unknown-linux-gnu --release
exit "$test_rc"
