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
  slurm-wlm munge       # a Slurm cluster on the emulated hosts (bench/hosts/slurm.sh): tests labelled hosts
  openmpi-bin           # mpirun across the emulated hosts (bench/hosts/mpirun_agent.sh): tests labelled hosts
  libopenmpi-dev        # with openmpi-bin's mpicxx present, bench/'s find_package(MPI) fails without the
                        # headers; with them it builds chorus-bench-mpi
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
  # No package's postinst may start its system service (munge, slurmctld, slurmd, prometheus):
  # the tests start daemons of their own. A policy-rc.d that refuses every start (exit 101), which
  # invoke-rc.d and deb-systemd-invoke obey, unless the machine has one; removed afterwards.
  local policy=/usr/sbin/policy-rc.d made="" rc=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# chorus.sh: no service starts while it installs packages\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod 0755 "$policy"
    made=1
  fi
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
  [ -z "$made" ] || $sudo rm -f "$policy"
  return "$rc"
}
