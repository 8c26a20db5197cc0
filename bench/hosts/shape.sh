# Sourced by hosts.sh and the benchmarks over it: the shaping options (one parser for all) and the
# tc shaping of one switch port or host interface.
# Tree on each shaped device (its egress): htb root 1: -> 1:1 (the link rate)
#   -> 1:2 (non-TCP, IPv6 and anything unmatched; up to the link rate)
#   -> 1:10.. one class per hash bucket of TCP connections, capped at the flow rate (or the
#      slow rate for a --slow-fraction of the buckets).
# No flow classifier exists here, so the hash is built from u32 hash tables over port bits:
# bucket = (source port bits 1..B + destination port bits 1..B) mod 2^B (B = --port-bits,
# default 6: 64 buckets). Bit 0 is skipped because Linux gives connect()ed sockets even ports.
# Connections can share a bucket, like flows under a cloud's flow hash; connections to one
# listener whose ephemeral ports differ in bits 1..B never do (a rank's connections opened in a
# row usually lie within 128 ports of each other).

# Bits per second of a tc rate ("4gbit", "250mbit", "800kbit", "1000000bit"); fails otherwise.
rate_bits() {
  awk -v r="$1" 'BEGIN {
    if (match(r, /^[0-9]+(\.[0-9]+)?/) == 0) exit 1
    v = substr(r, 1, RLENGTH); u = substr(r, RLENGTH + 1)
    if (u == "gbit") v *= 1e9; else if (u == "mbit") v *= 1e6; else if (u == "kbit") v *= 1e3
    else if (u != "bit") exit 1
    if (v <= 0) exit 1
    printf "%.0f\n", v }'
}

# The shaping options' defaults: link 4 Gbit/s, each flow 1 Gbit/s, slow flows 250 Mbit/s, none
# slow, 64 connection classes (port bits 6).
shape_defaults() { shape_link=4gbit shape_flow=1gbit shape_slow=250mbit shape_fraction=0 shape_bits=6; }

# parse_shaping WHO ARGS...: the one parser of the shaping options, for hosts.sh up and reshape
# and the benchmark scripts. --link R, --flow R, --slow R, --slow-fraction F and --port-bits B set
# shape_link, shape_flow, shape_slow, shape_fraction and shape_bits (options left out keep the
# values the caller set: shape_defaults, or what was recorded); every other argument stays, in
# order, in shape_rest. Rates are tc rates (4gbit, 250mbit); F is in [0, 1]; B is 1..7 (2^B
# connection classes). On a bad value or a missing one it
# prints "WHO: ..." on stderr and returns 2.
parse_shaping() {
  local who="$1"; shift
  shape_rest=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --link | --flow | --slow | --slow-fraction | --port-bits)
        [ $# -ge 2 ] || { echo "$who: $1 needs a value" >&2; return 2; }
        case "$1" in
          --link) shape_link="$2" ;;
          --flow) shape_flow="$2" ;;
          --slow) shape_slow="$2" ;;
          --slow-fraction) shape_fraction="$2" ;;
          --port-bits) shape_bits="$2" ;;
        esac
        shift 2 ;;
      *) shape_rest+=("$1"); shift ;;
    esac
  done
  local opt r
  for opt in link flow slow; do
    r="shape_$opt"; r="${!r}"
    rate_bits "$r" >/dev/null || { echo "$who: --$opt '$r' is not a rate like 4gbit" >&2; return 2; }
  done
  awk -v f="$shape_fraction" 'BEGIN{exit !(f ~ /^[0-9.]+$/ && f >= 0 && f <= 1)}' ||
    { echo "$who: --slow-fraction must be in [0, 1], got '$shape_fraction'" >&2; return 2; }
  [[ "$shape_bits" =~ ^[1-7]$ ]] || { echo "$who: --port-bits must be 1..7, got '$shape_bits'" >&2; return 2; }
}

# Sets the array shape_args to the options that give the current shaping to another command
# (hosts.sh run or up).
shaping_args() {
  shape_args=(--link "$shape_link" --flow "$shape_flow" --slow "$shape_slow" --slow-fraction "$shape_fraction"
    --port-bits "$shape_bits")
}

# Payload GB/s (1e9 bytes) that a rate allows for TCP over 1500-byte MTU Ethernet frames: htb
# counts 1514 bytes per segment carrying 1448 payload bytes (timestamps on).
payload_gbytes() { awk -v b="$(rate_bits "$1")" 'BEGIN { printf "%.4f\n", b / 8 / 1e9 * 1448 / 1514 }'; }

# Bucket k is slow when its scrambled index falls below fraction * buckets (spread over both ports).
bucket_is_slow() {
  awk -v k="$1" -v n="$2" -v f="$3" 'BEGIN { exit !(((k * 37 + 11) % n) < int(f * n + 0.5)) }'
}

# shape_port NETNS DEV LINK FLOW SLOW FRACTION BITS
shape_port() {
  local ns="$1" dev="$2" link="$3" flow="$4" slow="$5" fraction="$6" bits="$7"
  local n=$((1 << bits)) half=$((1 << bits)) batch k rate burst
  batch="$(mktemp)"
  burst_of() { awk -v b="$(rate_bits "$1")" 'BEGIN { x = b / 8 / 500; if (x < 65536) x = 65536; printf "%d\n", x }'; }
  {
    echo "qdisc add dev $dev root handle 1: htb default 2"
    echo "class add dev $dev parent 1: classid 1:1 htb rate $link ceil $link burst $(burst_of "$link") cburst $(burst_of "$link") quantum 65536"
    # A leaf's rate is what htb grants it without asking the parent, so leaves get a share of the
    # link as rate and their cap as ceil: together they can never exceed the link.
    local share; share="$(awk -v b="$(rate_bits "$link")" -v n="$n" 'BEGIN { printf "%dbit\n", b / (n + 1) }')"
    echo "class add dev $dev parent 1:1 classid 1:2 htb rate $share ceil $link burst $(burst_of "$link") cburst $(burst_of "$link") quantum 65536"
    local fast_burst slow_burst
    fast_burst="$(burst_of "$flow")"; slow_burst="$(burst_of "$slow")"
    for ((k = 0; k < n; k++)); do
      rate="$flow"; burst="$fast_burst"
      if bucket_is_slow "$k" "$n" "$fraction"; then rate="$slow"; burst="$slow_burst"; fi
      printf 'class add dev %s parent 1:1 classid 1:%x htb rate %s ceil %s burst %s cburst %s quantum 65536\n' \
        "$dev" $((16 + k)) "$share" "$rate" "$burst" "$burst"
    done
    # Two levels of u32 hash tables: table 100: by source port bits 1..B (a), then table a+1: by
    # destination port bits 1..B (b); entry (a, b) goes to bucket (a + b) mod 2^B. With one port
    # fixed (a listener), distinct bits of the other port always give distinct buckets.
    local mask16=$(((half - 1) << 1)) a b
    echo "filter add dev $dev parent 1: prio 1 handle 100: protocol ip u32 divisor $half"
    for ((a = 0; a < half; a++)); do
      printf 'filter add dev %s parent 1: prio 1 handle %x: protocol ip u32 divisor %d\n' "$dev" $((a + 1)) "$half"
    done
    for ((a = 0; a < half; a++)); do
      for ((b = 0; b < half; b++)); do
        printf 'filter add dev %s parent 1: protocol ip prio 1 u32 ht %x:%x: match u32 0 0 flowid 1:%x\n' \
          "$dev" $((a + 1)) "$b" $((16 + (a + b) % n))
      done
      printf 'filter add dev %s parent 1: protocol ip prio 1 u32 ht 100:%x: match u32 0 0 hashkey mask 0x%08x at 20 link %x:\n' \
        "$dev" "$a" "$mask16" $((a + 1))
    done
    printf 'filter add dev %s parent 1: protocol ip prio 1 u32 ht 800:: match ip protocol 6 0xff hashkey mask 0x%08x at 20 link 100:\n' \
      "$dev" $((mask16 << 16))
  } >"$batch"
  tc -n "$ns" -batch "$batch" || { rm -f "$batch"; return 1; }
  rm -f "$batch"
}
