#!/usr/bin/env bash
# Installs what minivit needs from Debian's packages: the build toolchain, the libraries it
# links, and the Fashion-MNIST dataset. With --reference it also installs PyTorch (Debian's
# python3-torch), which the test suite uses as an independent reference implementation.
# Safe to run again: it only calls apt-get when something is missing. Uses sudo when not root.
set -euo pipefail

packages=(build-essential cmake pkg-config
          libxtensor-dev libxtensor-blas-dev libopenblas-dev libstb-dev libcli11-dev catch2
          zlib1g-dev libtomlplusplus-dev nlohmann-json3-dev
          dataset-fashion-mnist)
if [[ "${1:-}" == "--reference" ]]; then
  packages+=(python3 python3-numpy python3-torch)
fi

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
