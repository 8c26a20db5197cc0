"""The "chorus" backend across two emulated hosts (bench/hosts/hosts.sh: network namespaces with
their own /dev/shm) of two ranks each, under chorusrun -H: every collective's suite, exact, and
shared memory inside a host only. Exit 77 (a skip) where the machine cannot build hosts. Every run
is `hosts.sh run` (which removes the hosts on exit) under `timeout`.
Usage: hosts_test.py CHORUSRUN HOSTS_SH"""

import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))


def main():
    chorusrun, hosts_sh = sys.argv[1], sys.argv[2]
    check = subprocess.run([hosts_sh, "check"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check.returncode != 0:
        print("skipped: emulated hosts unavailable: " + check.stdout.strip())
        sys.exit(77)
    suites = [os.path.join(here, f) for f in os.environ.get("C10D_HOSTS_SUITES", "test_collectives.py test_p2p.py test_groups.py test_errors.py test_ddp.py test_hosts.py").split()]
    pytest = [sys.executable, "-m", "pytest", "-x", "-q", "--durations=5", "-p", "no:cacheprovider", "--rootdir=" + here,
              "--confcutdir=" + here] + suites
    inner = ('HOSTS=$(echo $CHORUS_HOSTS_ADDRS | sed "s/,/:2,/g"):2; exec %s -np 4 -H $HOSTS --launcher "%s exec {host}" '
             '--timeout 240 -x GLOO_SOCKET_IFNAME=eth0 -- %s' % (chorusrun, hosts_sh, " ".join(pytest)))
    out = subprocess.run(["timeout", "-s", "TERM", "-k", "10", "280", hosts_sh, "run", "2", "--", "sh", "-c", inner],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(out.stdout)
    sys.exit(out.returncode)


if __name__ == "__main__":
    main()
