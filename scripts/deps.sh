# Sourced by chorus.sh: installs the Debian packages Chorus needs when they are missing.
# Everything comes from Debian 12's registry (apt-get); nothing is installed by hand.
CHORUS_DEB_PACKAGES=(
  build-essential cmake pkg-config
  libcaf-dev libasio-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev
  libeigen3-dev         # the autotuner's Gaussian process
  prometheus-cpp-dev prometheus
  iproute2 util-linux   # emulated hosts (ip netns, tc htb/u32, nsenter, unshare, flock): tests labelled hosts
  python3 python3-torch libtorch-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest
  python3-venv python3-pip python3-setuptools python3-wheel   # tests/package: pip install .
)

chorus_install_deps() {
  local missing=() p
  for p in "${CHORUS_DEB_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "chorus.sh: installing missing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
