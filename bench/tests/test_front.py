"""Bench `front`: statistics, the ABBA schedule, the host's haproxy.cfg parsing and the stdlib SSE client against
the CI stand-ins (no docker, no simulated host)."""

import threading

import pytest

import front

CFG = """\
global
    log stdout format raw local0

frontend front_vllm
    bind 10.231.8.10:8443 ssl crt /usr/local/etc/haproxy/server.pem ssl-min-ver TLSv1.2
    default_backend engine_vllm

backend engine_vllm
    server engine 127.0.0.1:8000 maxconn 4

backend health_vllm
    server engine 127.0.0.1:8000 maxconn 8

frontend front_other
    bind [fd00::5]:8444 ssl crt /usr/local/etc/haproxy/server.pem ssl-min-ver TLSv1.2

backend engine_other
    server engine 127.0.0.1:8001 maxconn 16
"""


def test_percentile_interpolates_like_numpy():
    assert front.percentile([], 50) is None
    assert front.percentile([3], 95) == 3.0
    assert front.percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert front.percentile(list(range(1, 101)), 95) == pytest.approx(95.05)


def test_abba_alternates_which_path_goes_first():
    order = front.abba(4)
    assert order == ["direct", "front", "front", "direct", "direct", "front", "front", "direct"]
    assert order.count("direct") == order.count("front") == 4


def test_summarise_and_ratios():
    rounds = [
        {"path": "direct", "ttft": [0.10, 0.20], "tokens": 100, "wall": 1.0, "errors": 0},
        {"path": "direct", "ttft": [0.10, 0.20], "tokens": 100, "wall": 2.0, "errors": 0},
        {"path": "front", "ttft": [0.11, 0.22], "tokens": 100, "wall": 1.0, "errors": 1},
        {"path": "front", "ttft": [0.11, 0.22], "tokens": 100, "wall": 2.0, "errors": 0},
    ]
    s = front.summarise(rounds)
    assert s["direct"]["ttft_p50"] == pytest.approx(0.15) and s["front"]["ttft_p50"] == pytest.approx(0.165)
    assert s["direct"]["tokens_per_s"] == pytest.approx(75.0)  # median of 100 and 50
    assert s["front"]["errors"] == 1 and s["front"]["requests"] == 4 and s["front"]["rounds"] == 2
    assert s["direct"]["ttft_p50_warm"] is None  # rounds without the flags: nothing known to be warm
    q = front.ratios(s)
    assert q["ttft_p50"] == pytest.approx(1.1) and q["tokens_per_s"] == pytest.approx(1.0)
    warm = front.summarise([dict(rounds[0], first=[True, False]), dict(rounds[2], first=[True, False])])
    assert warm["direct"]["ttft_p50_warm"] == pytest.approx(0.20)
    assert front.ratios(warm)["ttft_p50_warm"] == pytest.approx(1.1)
    assert front.ratios({"direct": s["direct"]})["ttft_p50"] is None


def test_parse_front_cfg_reads_one_service():
    assert front.parse_front_cfg(CFG) == ("10.231.8.10", 8443, 8000, 4)
    assert front.parse_front_cfg(CFG, "other") == ("fd00::5", 8444, 8001, 16)
    with pytest.raises(ValueError):
        front.parse_front_cfg(CFG, "missing")


def test_inventory_keys_of_the_simulated_inventory():
    engine, key, name = front.inventory_keys()
    assert engine and key and name
    assert name != "limited"  # a client with limits would measure its limits, not the proxy


def test_prompts_have_unique_heads():
    heads = {front.prompt(1, 8).split(":", maxsplit=1)[0] for _i in range(50)}
    assert len(heads) == 50
    assert len(front.prompt(3, 20).split()) == 21


def test_stdlib_client_through_the_relay():
    engine = front.stand_in_engine()
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    relay = front._Relay(engine.server_address)
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    try:
        for port in (engine.server_address[1], relay.server_address[1]):
            r = front.run_round(
                "http://127.0.0.1:%d/v1" % port, "k", concurrency=2, requests=4, max_tokens=5, use_openai=False
            )
            assert r["errors"] == 0, r["error_samples"]
            assert r["tokens"] == 20 and len(r["ttft"]) == 4 and r["model"] == "stand-in"
            assert sorted(r["first"]) == [False, False, True, True]  # two workers, each opened one connection
            assert all(0 < t < r["wall"] for t in r["ttft"])
    finally:
        relay.shutdown()
        engine.shutdown()


def test_a_failing_request_is_counted_not_raised():
    r = front.run_round(
        "http://127.0.0.1:9/v1", "k", model="m", concurrency=1, requests=2, max_tokens=2, timeout=2, use_openai=False
    )
    assert r["errors"] == 2 and r["tokens"] == 0 and r["ttft"] == [] and r["error_samples"]
