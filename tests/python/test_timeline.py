"""hvd.start_timeline / stop_timeline: rank 0 writes a Chrome-trace JSON holding the ops run
between the two calls (each with its phases), none from before the start or after the stop;
the other ranks write nothing. A second start restarts at the new path; stop without start
does nothing. Registered with CHORUS_TRACE set too: the job-long trace keeps recording."""

import json
import os
import time

import pytest
import torch

import chorus.torch as hvd


def allreduce_named(prefix, count):
    for i in range(count):
        t = torch.full((64,), float(hvd.rank() + i))
        out = hvd.allreduce(t, op=hvd.Sum, name="%s.%d" % (prefix, i))
        assert torch.equal(out, torch.full((64,), float(sum(range(hvd.size())) + hvd.size() * i)))


def load_events(path):
    with open(path) as f:
        doc = json.load(f)  # must parse: chrome://tracing and Perfetto read this object form
    assert isinstance(doc["traceEvents"], list)
    return doc["traceEvents"]


def mentions(events, fragment):
    """Events whose name or arguments mention `fragment` (tensor names also sit in bucket and
    agreed-batch arguments)."""
    return [e for e in events if fragment in e.get("name", "") or fragment in json.dumps(e.get("args", {}))]


def op_spans(events, fragment):
    """(begin, end) counts of the async op spans of the tensors named like `fragment`."""
    ops = [e for e in events if e.get("cat") == "op" and fragment in e.get("name", "")]
    return sum(e["ph"] == "b" for e in ops), sum(e["ph"] == "e" for e in ops)


def test_timeline_holds_the_ops_between_start_and_stop_on_rank_0(tmp_path):
    path = str(tmp_path / "timeline.json")
    hvd.stop_timeline()  # stop without start: a no-op
    allreduce_named("tl.before", 3)
    hvd.start_timeline(path, mark_cycles=True)
    allreduce_named("tl.during", 4)
    hvd.stop_timeline()
    allreduce_named("tl.after", 3)
    hvd.stop_timeline()  # a second stop: a no-op too
    if hvd.rank() != 0:
        assert not os.path.exists(path), "only rank 0 writes the timeline"
        return
    events = load_events(path)
    for i in range(4):
        begins, ends = op_spans(events, "tl.during.%d" % i)
        assert (begins, ends) == (1, 1), "tl.during.%d: %d begin(s), %d end(s)" % (i, begins, ends)
    # Each op's phases, as Horovod's timeline shows them, share the op's async id.
    ids = {e["id"] for e in events if e.get("cat") == "op" and "tl.during.0" in e.get("name", "")}
    phases = {e["name"] for e in events if e.get("cat") == "op" and e.get("id") in ids}
    assert {"NEGOTIATE_ALLREDUCE", "ALLREDUCE"} <= phases, phases
    assert any(e.get("name") == "CYCLE_START" and e.get("ph") == "i" for e in events)
    assert not mentions(events, "tl.before"), mentions(events, "tl.before")[:3]
    assert not mentions(events, "tl.after"), mentions(events, "tl.after")[:3]
    assert not os.path.exists(path + ".chorus-trace"), "the scratch recording is removed"


def test_the_gradient_ops_of_named_gathers_are_named_after_them(tmp_path):
    # As Horovod: the backward allreduce of a named allgather is "<name>.grad" (the same name on
    # every rank, so it is negotiated by name, not as an unnamed transient op).
    path = str(tmp_path / "grads.json")
    hvd.start_timeline(path)
    x = torch.ones(2, 3, requires_grad=True)
    hvd.allgather(x, name="tl.ag").sum().backward()
    outs = hvd.grouped_allgather([x, x], name="tl.gag")
    torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
    hvd.stop_timeline()
    if hvd.rank() != 0:
        return
    events = load_events(path)
    assert op_spans(events, "tl.ag.grad") == (1, 1), mentions(events, "tl.ag")[:6]
    assert op_spans(events, "tl.gag.grad")[0] == 2, mentions(events, "tl.gag")[:6]


def test_a_second_start_restarts_at_the_new_path(tmp_path):
    first, second = str(tmp_path / "first.json"), str(tmp_path / "second.json")
    hvd.start_timeline(first)
    allreduce_named("tl.first", 2)
    hvd.start_timeline(second)
    allreduce_named("tl.second", 2)
    hvd.stop_timeline()
    if hvd.rank() != 0:
        assert not os.path.exists(first) and not os.path.exists(second)
        return
    one, two = load_events(first), load_events(second)
    assert op_spans(one, "tl.first.1") == (1, 1) and not mentions(one, "tl.second")
    assert op_spans(two, "tl.second.1") == (1, 1) and not mentions(two, "tl.first")
    assert not any(e.get("name") == "CYCLE_START" for e in one + two), "mark_cycles defaults to False"


def test_a_path_that_cannot_be_created_is_an_error_naming_it_on_rank_0(tmp_path):
    bad = str(tmp_path / "no" / "such" / "dir" / "timeline.json")
    if hvd.rank() == 0:
        with pytest.raises(RuntimeError, match="no/such/dir/timeline.json"):
            hvd.start_timeline(bad)
    else:
        hvd.start_timeline(bad)  # other ranks record nothing, so nothing can fail
    hvd.stop_timeline()
    allreduce_named("tl.unharmed", 1)  # the job goes on


def test_the_job_long_trace_records_beside_the_timeline(tmp_path):
    trace_dir = os.environ.get("CHORUS_TRACE")
    if not trace_dir:
        pytest.skip("CHORUS_TRACE is not set for this run")
    hvd.start_timeline(str(tmp_path / "beside.json"))
    allreduce_named("tl.beside", 2)
    hvd.stop_timeline()
    trace = os.path.join(trace_dir, "rank-%d.trace" % hvd.rank())
    deadline = time.monotonic() + 5
    while os.path.getsize(trace) <= 36 and time.monotonic() < deadline:  # header only: not flushed yet
        time.sleep(0.05)
    assert os.path.getsize(trace) > 36, "CHORUS_TRACE's recorder stopped recording"
