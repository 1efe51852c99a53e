"""The front-client's stream check (tests/world/front-client/check_front.py) tells a streaming door from a buffering
one by the events' own arrival times, whatever the prefill took."""

import importlib.util
import pathlib

PATH = pathlib.Path(__file__).resolve().parents[2] / "world" / "front-client" / "check_front.py"
spec = importlib.util.spec_from_file_location("check_front", str(PATH))
cf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cf)


def test_a_slow_prefill_then_a_fast_stream_is_streamed():
    # What CI saw on a loaded machine: the first event at 0.77 s, 512 tokens over the next 0.4 s in ~4 ms steps.
    times = [0.77 + i * 0.004 for i in range(100)]
    ok, spread, gaps = cf.streamed(times)
    assert ok and spread >= 0.39 and gaps == 99


def test_a_buffered_answer_is_one_burst():
    # A buffering proxy: everything in one read at the end, parsed a few microseconds apart.
    times = [1.0 + i * 0.00001 for i in range(200)]
    ok, spread, gaps = cf.streamed(times)
    assert not ok and gaps == 0


def test_a_few_chunks_are_not_a_stream():
    # A proxy that flushes only on a full buffer: a handful of bursts, far apart.
    times = [t + i * 0.00001 for t in (0.2, 0.5, 0.8) for i in range(40)]
    ok, _spread, gaps = cf.streamed(times)
    assert not ok and gaps == 2


def test_no_events_is_not_a_stream():
    assert cf.streamed([]) == (False, 0, 0)
