#!/usr/bin/env bash
# Open MPI's remote-shell agent for the emulated hosts (hosts.sh): mpirun, run inside one host,
# calls it as it would call ssh to start its daemon (orted) on another host, and it runs the
# command inside that host's network, mount and UTS namespaces through `hosts.sh exec`.
#
#   hosts.sh exec 0 mpirun --allow-run-as-root --mca plm_rsh_agent bench/hosts/mpirun_agent.sh \
#       -np 4 --host chorus-host0:2,chorus-host1:2 -x CHORUS_RENDEZVOUS=chorus-host0:29500 ... cmd
#
# Called as `mpirun_agent.sh [ssh options] HOST word...`: ssh's options (with their arguments,
# e.g. from plm_rsh_args) are skipped, HOST is a name hosts.sh knows (chorus-host<i>, index or
# address), and the words are joined by spaces into one command for /bin/sh, as sshd hands them
# to the login shell (Open MPI 4.1 quotes its arguments for that shell). As over ssh, the command
# starts with a login-like environment (HOME, USER, LOGNAME, SHELL, PATH, LANG, TMPDIR), not
# mpirun's: a variable reaches the ranks of other hosts only through mpirun's -x. The one
# exception is CHORUS_HOSTS_RUN_PID, which hosts.sh exec needs there should the daemon start
# further daemons (tree spawn). Works only under `hosts.sh run` or after `hosts.sh up`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() { echo "mpirun_agent.sh: $*" >&2; exit 255; }  # 255: ssh's own failure code

while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    -[BbcDEeFIiJLlmOopQRSWw]) shift; [ $# -gt 0 ] && shift ;;   # an ssh option with an argument
    -*) shift ;;                                                 # a flag (-x, -T, -q, -4, ...)
    *) break ;;
  esac
done
[ $# -ge 2 ] || die "usage: mpirun_agent.sh [ssh options] HOST command..."
host="$1"; shift

login_env=(HOME="${HOME:-/root}" USER="$(id -un)" LOGNAME="$(id -un)" SHELL=/bin/sh
           PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG="${LANG:-C.UTF-8}"
           TMPDIR="${TMPDIR:-/tmp}")
[ -z "${CHORUS_HOSTS_RUN_PID:-}" ] || login_env+=(CHORUS_HOSTS_RUN_PID="$CHORUS_HOSTS_RUN_PID")
exec "$here/hosts.sh" exec "$host" env -i "${login_env[@]}" /bin/sh -c "$*"
