#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the build and tests need, skipping those already present.
# Usage: scripts/install_deps.sh            (run as root, or with sudo available)
set -euo pipefail

packages=(cmake make g++ pkg-config libeigen3-dev libboost-test-dev libhdf5-dev libcli11-dev
          nlohmann-json3-dev libicu-dev zlib1g-dev python3 python3-pip python3-venv ${ECHO_EXTRA_PACKAGES:-})
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install_deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo_cmd=(sudo)
  else
    echo "install_deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
