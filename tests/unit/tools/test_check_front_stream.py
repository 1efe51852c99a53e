"""The front-client's stream check (tests/world/front-client/check_front.py) tells a streaming door from a buffering
one by when the first event arrives, whatever the prefill took and however the client was scheduled."""

import importlib.util
import pathlib

PATH = pathlib.Path(__file__).resolve().parents[2] / "world" / "front-client" / "check_front.py"
spec = importlib.util.spec_from_file_location("check_front", str(PATH))
cf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cf)


def test_a_slow_prefill_then_a_steady_stream_is_streamed():
    # A loaded machine: the first event at 0.77 s, 2,048 tokens over the next 4 s in 2 ms steps.
    times = [0.77 + i * 0.002 for i in range(2048)]
    ok, why = cf.streamed(times, 4.9)
    assert ok, why


def test_a_starved_client_reading_in_bursts_is_still_streamed():
    # What CI saw (475 events in 3 bursts over 0.96 s): the client got the CPU only now and then, and read what had
    # piled up in one go. The first burst came early: the door streamed.
    times = [t + i * 0.00001 for t in (0.77, 1.2, 1.72) for i in range(160)]
    ok, why = cf.streamed(times, 1.8)
    assert ok, why


def test_a_buffered_answer_comes_at_the_end():
    # A buffering proxy: the whole answer after the engine finished (4.9 s), parsed 100 microseconds apart.
    times = [4.7 + i * 0.0001 for i in range(2048)]
    ok, why = cf.streamed(times, 4.95)
    assert not ok and "held back" in why


def test_one_early_burst_is_not_a_stream():
    times = [0.2 + i * 0.00001 for i in range(200)]
    ok, why = cf.streamed(times, 1.0)
    assert not ok and "one burst" in why


def test_too_few_events_are_not_judged_a_stream():
    assert cf.streamed([], 1.0) == (False, "0 events: too few to judge")
    assert not cf.streamed([0.1, 0.9], 1.0)[0]
