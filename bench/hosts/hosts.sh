#!/usr/bin/env bash
# Emulated hosts on one machine: each "host" is a network namespace, a mount namespace with its
# own tmpfs on /dev/shm and its own /etc/hosts, and a UTS namespace with its own host name
# (chorus-host<i>), joined by a bridge that lives in a "switch" namespace of its own, so the
# initial network namespace is never changed. Every host resolves every host's name (its
# /etc/hosts lists them all), as launchers that advertise getfqdn(gethostname()) need (torchrun's
# c10d rendezvous). Links and connections are shaped with tc (shape.sh). Needs root, ip netns,
# veth, bridge and tc's htb and u32.
#
#   hosts.sh up H [--link R] [--flow R] [--slow R] [--slow-fraction F] [--port-bits B]
#   hosts.sh exec HOST cmd...     run cmd inside HOST (index 0..H-1, address 10.77.0.x, host name
#                                 chorus-host<i> or namespace name);
#                                 under `run`, also from inside another host (a launcher there)
#   hosts.sh down                 remove everything the last `up` created
#   hosts.sh reshape [--link R] [--flow R] [--slow R] [--slow-fraction F] [--port-bits B]
#                                 change the shaping of the hosts that are up, in place (options
#                                 left out keep their values; connections stay open)
#   hosts.sh run H [up options] -- cmd...   up, run cmd (CHORUS_HOSTS_ADDRS, _NAMES, _TAG, _RUN_PID
#                                 set), down on exit
#   hosts.sh addrs | names        the hosts' addresses | host names (comma separated, in order)
#   hosts.sh status               what is up: tag, "namespace address name" per host, shaping
#   hosts.sh check                exit 0 when this machine can build hosts, else say why (exit 77)
# Rates use tc's units (4gbit, 250mbit). Host i has address 10.77.0.<i+1>/24, reachable only
# from the namespaces made here, and host name chorus-host<i>, which its /etc/hosts (a bind
# mount inside its mount namespace) and every other host's map to that address. The initial
# network namespace, host name and /etc/hosts are never changed; the initial mount namespace
# gets one private bind mount of the state dir (it holds the hosts' mount and UTS namespaces),
# removed by `down`. Only one harness is up at a time (flock on $state_root/lock,
# held for the whole of `run`; `up` refuses while another's state exists).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/shape.sh"

state_root="${CHORUS_HOSTS_STATE:-/run/chorus-hosts}"
lock_file="$state_root/lock"
active_file="$state_root/active"    # the tag of the harness that is up, if any
subnet="10.77.0"
name_prefix="chorus-host"           # host i's host name is chorus-host<i>

die() { echo "hosts.sh: $*" >&2; exit 1; }

# Why this machine cannot build hosts, or nothing when it can.
cannot_build() {
  [ "$(id -u)" -eq 0 ] || { echo "not root (namespaces, veth and tc need root)"; return; }
  command -v ip >/dev/null && ip netns list >/dev/null 2>&1 || { echo "no 'ip netns' (iproute2)"; return; }
  command -v tc >/dev/null || { echo "no 'tc' (iproute2)"; return; }
  command -v nsenter >/dev/null && command -v unshare >/dev/null && command -v flock >/dev/null ||
    { echo "no nsenter/unshare/flock (util-linux)"; return; }
  unshare --mount --propagation private sh -c 'mount -t tmpfs chorus-probe /mnt' 2>/dev/null ||
    { echo "cannot make a mount namespace with its own tmpfs (unshare --mount)"; return; }
  unshare --uts sh -c 'hostname chorus-probe' 2>/dev/null ||
    { echo "cannot make a UTS namespace with its own host name (unshare --uts)"; return; }
  local probe="chorus-hprobe$$"
  if ! ip netns add "$probe" 2>/dev/null; then echo "cannot create a network namespace"; return; fi
  local why=""
  if ! ip -n "$probe" link add p0 type veth peer name p1 2>/dev/null; then
    why="no veth"
  elif ! ip -n "$probe" link add b0 type bridge 2>/dev/null; then
    why="no bridge"
  elif ! tc -n "$probe" qdisc add dev p0 root handle 1: htb default 1 2>/dev/null; then
    why="no htb qdisc"
  elif ! tc -n "$probe" filter add dev p0 parent 1: protocol ip prio 1 u32 \
         match ip protocol 6 0xff flowid 1:1 2>/dev/null; then
    why="no u32 classifier"
  fi
  ip netns del "$probe"
  [ -n "$why" ] && echo "$why"
  return 0
}

lock() { mkdir -p "$state_root"; exec 9>"$lock_file"; flock -w 30 9 || die "another hosts.sh holds $lock_file"; }

active_tag() { [ -f "$active_file" ] && cat "$active_file" || true; }

# Fields of the active harness: tag, dir, host count.
load_active() {
  tag="$(active_tag)"
  [ -n "$tag" ] || die "no emulated hosts are up (run: hosts.sh up H)"
  case "$tag" in chorus-h[0-9]*-) ;; *) die "$active_file holds '$tag', not a tag hosts.sh makes; refusing" ;; esac
  dir="$state_root/$tag"
  [ -f "$dir/hosts" ] || die "$dir/hosts is missing; run hosts.sh down"
  nhosts="$(wc -l <"$dir/hosts")"
}

cmd_up() {
  local n="${1:-}"; shift || true
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 64 ] || die "up: H must be 1..64, got '$n'"
  shape_defaults
  parse_shaping "hosts.sh up" "$@" || exit 1
  [ ${#shape_rest[@]} -eq 0 ] || die "up: unknown option '${shape_rest[0]}'"
  local link="$shape_link" flow="$shape_flow" slow="$shape_slow" fraction="$shape_fraction" bits="$shape_bits"
  local why; why="$(cannot_build)"; [ -z "$why" ] || { echo "hosts.sh: cannot build hosts: $why" >&2; exit 77; }

  [ -z "$(active_tag)" ] || die "emulated hosts '$(active_tag)' are already up; run hosts.sh down first"
  tag="chorus-h$$-"
  dir="$state_root/$tag"
  local sw="${tag}sw" i ns
  for ((i = 0; i < n; i++)); do ip netns list | grep -qw "${tag}$i" && die "namespace ${tag}$i exists; refusing"; done
  ip netns list | grep -qw "$sw" && die "namespace $sw exists; refusing"
  mkdir -p "$dir"
  echo "$tag" >"$active_file"
  created=1
  : >"$dir/hosts"
  printf 'link=%s\nflow=%s\nslow=%s\nfraction=%s\nbits=%s\n' "$link" "$flow" "$slow" "$fraction" "$bits" >"$dir/shaping"
  # Everything below is undone by cmd_down, which reads what was recorded so far.
  echo "$sw" >"$dir/switch"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  # A private bind mount of the state dir holds the hosts' mount namespaces (a bind mount of
  # /proc/<pid>/ns/mnt needs a private parent).
  mount --bind "$dir" "$dir"
  mount --make-private "$dir"
  # Every host's /etc/hosts: loopback and every host's name.
  { echo "127.0.0.1 localhost"
    for ((i = 0; i < n; i++)); do echo "$subnet.$((i + 1)) ${name_prefix}$i"; done; } >"$dir/etc-hosts"
  for ((i = 0; i < n; i++)); do
    ns="${tag}$i"
    echo "$ns $subnet.$((i + 1)) ${name_prefix}$i" >>"$dir/hosts"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "p$i" master br0 up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    touch "$dir/mnt$i"
    unshare --mount="$dir/mnt$i" --propagation private sh -c \
      'mount -t tmpfs -o mode=1777 chorus-shm /dev/shm && mount --bind "$0" /etc/hosts' "$dir/etc-hosts"
    touch "$dir/uts$i"
    unshare --uts="$dir/uts$i" hostname "${name_prefix}$i"
    shape_port "$ns" eth0 "$link" "$flow" "$slow" "$fraction" "$bits"     # host -> switch
    shape_port "$sw" "p$i" "$link" "$flow" "$slow" "$fraction" "$bits"    # switch -> host
  done
  echo "hosts.sh: $n hosts up ($tag): $(cmd_addrs) link=$link flow=$flow slow=$slow slow-fraction=$fraction port-bits=$bits" >&2
}

cmd_down() {
  local tag; tag="$(active_tag)"
  [ -n "$tag" ] || return 0
  case "$tag" in chorus-h[0-9]*-) ;; *) die "$active_file holds '$tag', not a tag hosts.sh makes; refusing" ;; esac
  local dir="$state_root/$tag" ns addr i=0
  if [ -f "$dir/hosts" ]; then
    while read -r ns addr _; do
      case "$ns" in "$tag"[0-9]*) ;; *) echo "hosts.sh: skipping '$ns': not created by $tag" >&2; continue ;; esac
      ip netns del "$ns" 2>/dev/null || true
      umount "$dir/mnt$i" 2>/dev/null || true
      umount "$dir/uts$i" 2>/dev/null || true
      i=$((i + 1))
    done <"$dir/hosts"
  fi
  if [ -f "$dir/switch" ]; then
    ns="$(cat "$dir/switch")"
    [ "$ns" = "${tag}sw" ] && ip netns del "$ns" 2>/dev/null || true
  fi
  umount "$dir" 2>/dev/null || true
  rm -rf "${dir:?}"
  rm -f "$active_file"
}

# The network changes under a running job: every shaped device gets the new tree at once.
cmd_reshape() {
  load_active
  shape_link="$(sed -n 's/^link=//p' "$dir/shaping")"; shape_flow="$(sed -n 's/^flow=//p' "$dir/shaping")"
  shape_slow="$(sed -n 's/^slow=//p' "$dir/shaping")"; shape_fraction="$(sed -n 's/^fraction=//p' "$dir/shaping")"
  shape_bits="$(sed -n 's/^bits=//p' "$dir/shaping")"
  parse_shaping "hosts.sh reshape" "$@" || exit 1
  [ ${#shape_rest[@]} -eq 0 ] || die "reshape: unknown option '${shape_rest[0]}'"
  local link="$shape_link" flow="$shape_flow" slow="$shape_slow" fraction="$shape_fraction" bits="$shape_bits"
  local sw ns addr i=0
  sw="$(cat "$dir/switch")"
  while read -r ns addr _; do
    tc -n "$ns" qdisc del dev eth0 root
    shape_port "$ns" eth0 "$link" "$flow" "$slow" "$fraction" "$bits"
    tc -n "$sw" qdisc del dev "p$i" root
    shape_port "$sw" "p$i" "$link" "$flow" "$slow" "$fraction" "$bits"
    i=$((i + 1))
  done <"$dir/hosts"
  printf 'link=%s\nflow=%s\nslow=%s\nfraction=%s\nbits=%s\n' "$link" "$flow" "$slow" "$fraction" "$bits" >"$dir/shaping"
  echo "hosts.sh: reshaped $tag: link=$link flow=$flow slow=$slow slow-fraction=$fraction port-bits=$bits" >&2
}

# Resolves HOST (index, address, host name or namespace name) to "namespace index".
find_host() {
  local want="$1" ns addr name i=0
  while read -r ns addr name; do
    if [ "$want" = "$i" ] || [ "$want" = "$addr" ] || [ "$want" = "$ns" ] || { [ -n "$name" ] && [ "$want" = "$name" ]; }; then
      echo "$ns $i"; return 0
    fi
    i=$((i + 1))
  done <"$dir/hosts"
  die "no emulated host '$want' (have: $(cmd_addrs))"
}

cmd_exec() {
  [ $# -ge 2 ] || die "usage: hosts.sh exec HOST cmd..."
  load_active
  local found; found="$(find_host "$1")"; shift
  local ns="${found% *}" i="${found#* }"
  # Called inside a host (a launcher started there, e.g. an elastic chorusrun's): the
  # namespace files are not visible from its mount namespace, so go back to the namespaces
  # of `hosts.sh run` first (through /proc, which every host shares).
  local root="${CHORUS_HOSTS_RUN_PID:-}"
  if [ -n "$root" ] && [ "$(readlink /proc/self/ns/mnt)" != "$(readlink "/proc/$root/ns/mnt" 2>/dev/null)" ]; then
    exec nsenter --mount="/proc/$root/ns/mnt" --net="/proc/$root/ns/net" --wd="$PWD" -- \
      nsenter --net="/run/netns/$ns" --mount="$dir/mnt$i" --uts="$dir/uts$i" --wd="$PWD" -- "$@"
  fi
  exec nsenter --net="/run/netns/$ns" --mount="$dir/mnt$i" --uts="$dir/uts$i" --wd="$PWD" -- "$@"
}

cmd_addrs() {
  [ -n "${dir:-}" ] || load_active
  awk '{print $2}' "$dir/hosts" | paste -sd, -
}

cmd_names() {
  [ -n "${dir:-}" ] || load_active
  awk '{print $3}' "$dir/hosts" | paste -sd, -
}

stop_child() {
  kill -TERM "$child" 2>/dev/null || true
  wait "$child" 2>/dev/null || true
  exit "$1"
}

cmd_run() {
  local args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
  [ $# -ge 2 ] || die "usage: hosts.sh run H [up options] -- cmd..."
  shift
  lock
  trap '[ -n "${created:-}" ] && cmd_down' EXIT
  cmd_up "${args[@]}"
  # In the background so a signal reaches this shell at once; a non-interactive shell's
  # background job ignores SIGINT, so both signals are passed on as SIGTERM.
  CHORUS_HOSTS_ADDRS="$(cmd_addrs)" CHORUS_HOSTS_NAMES="$(cmd_names)" CHORUS_HOSTS_TAG="$tag" \
    CHORUS_HOSTS_RUN_PID=$$ "$@" &
  child=$!
  trap 'stop_child 130' INT
  trap 'stop_child 143' TERM
  local rc=0
  wait "$child" || rc=$?
  exit "$rc"
}

what="${1:-}"; shift || true
case "$what" in
  up) lock; trap '[ -n "${created:-}" ] && [ "${up_done:-}" != 1 ] && cmd_down' EXIT; cmd_up "$@"; up_done=1 ;;
  down) lock; cmd_down ;;
  exec) cmd_exec "$@" ;;
  reshape) cmd_reshape "$@" ;;
  run) cmd_run "$@" ;;
  addrs) cmd_addrs ;;
  names) cmd_names ;;
  status) load_active; echo "$tag"; cat "$dir/hosts" "$dir/shaping" ;;
  check) why="$(cannot_build)"; [ -z "$why" ] || { echo "cannot build emulated hosts: $why"; exit 77; } ;;
  *) sed -n '2,29p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
