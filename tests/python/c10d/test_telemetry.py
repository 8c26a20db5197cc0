"""A torch.distributed group's calls in the metrics and the trace (run by telemetry_test.py, which
sets CHORUS_METRICS_PORT and CHORUS_TRACE and reads the trace files afterwards). chorus.torch runs
beside it in the same process: its own trace must still replay."""

import os
import re
import urllib.request

import torch
import torch.distributed as dist


def test_calls_are_counted_and_traced_beside_the_horovod_api():
    import chorus.torch as hvd
    dist.init_process_group("chorus")  # first: its metrics take the port
    hvd.init()  # second: its metrics are off (the port is taken), its trace is its own
    for i in range(5):
        t = torch.ones(1000)
        dist.all_reduce(t)
        hvd.allreduce(torch.ones(100), name=f"hvd.{i}")
    dist.broadcast(torch.ones(10), 0)
    port = int(os.environ["CHORUS_METRICS_PORT"]) + int(os.environ["LOCAL_RANK"])
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()

    def value(pattern):
        m = re.search(pattern + r" (\S+)", text)
        assert m, pattern + " not in:\n" + text
        return float(m.group(1))

    assert value(r'chorus_c10d_calls_total\{rank="%d",call="all_reduce",result="ok"\}' % dist.get_rank()) >= 5
    assert value(r'chorus_c10d_calls_total\{rank="%d",call="broadcast",result="ok"\}' % dist.get_rank()) >= 1
    assert value(r'chorus_c10d_call_seconds_count\{rank="%d",call="all_reduce"\}' % dist.get_rank()) >= 5
    assert value(r'chorus_c10d_bytes_total\{rank="%d",call="all_reduce"\}' % dist.get_rank()) >= 5 * 4000
    dist.barrier()
    hvd.shutdown()
    dist.destroy_process_group()  # the last group: the trace file is closed
