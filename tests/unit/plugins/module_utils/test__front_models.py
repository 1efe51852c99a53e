# -*- coding: utf-8 -*-
"""One front door routed by model (module_utils/front/_front_models.py, and the routed door render() writes)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.front import _front as f
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_routed as f_routed
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_settings as f_settings
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_models as m

ALICE = "sk-alice-0123456789abcdef"
BOB = "sk-bob-0123456789abcdefgh"


def svc(name, port, argv, clients=None, front_port=8443, key=""):
    return f_settings.plan_service(
        dict(
            name=name,
            port=port,
            front_port=front_port,
            argv=["--max-num-seqs", "8"] + argv,
            engine_key=key,
            clients=clients if clients is not None else [dict(name="alice", key=ALICE)],
        )
    )


def pair(clients=None):
    return [
        svc("chat", 8000, ["--served-model-name", "qwen"], clients, key="sk-engine-chat-0123456789"),
        svc("embed", 8001, ["--runner", "pooling", "--convert", "embed", "--served-model-name", "bge"], clients),
    ]


def test_the_served_names_and_the_runner_come_from_the_plan_argv():
    assert m.served_models({"argv": ["--served-model-name", "a", "b", "--port", "1"]}) == ["a", "b"]
    assert m.served_models({"argv": ["--served-model-name=a"]}) == ["a"]
    assert m.served_models({"argv": [], "model": "/models/x"}) == ["/models/x"]
    assert m.service_kind({"argv": ["--runner", "pooling"]}) == "pooling"
    assert m.service_kind({"argv": ["--convert", "classify"]}) == "pooling"
    assert m.service_kind({"argv": ["--runner", "generate"]}) == "generate"
    assert m.service_kind({"argv": []}) == "generate"


def test_route_plan_maps_models_routes_and_clients():
    plan = m.route_plan(
        [
            {"name": "chat", "models": ["qwen"], "kind": "generate"},
            {"name": "emb", "models": ["bge"], "kind": "pooling"},
        ],
        [{"name": "alice"}, {"name": "bob", "models": ["qwen"]}],
    )
    assert plan["models"] == {"qwen": "chat", "bge": "emb"}
    assert plan["routes"]["emb"] == list(m.POOLING_ROUTES)
    assert "/v1/embeddings" in plan["refused"]["chat"] and "/v1/chat/completions" in plan["refused"]["emb"]
    assert plan["access"] == {"alice": ["bge", "qwen"], "bob": ["qwen"]}


@pytest.mark.parametrize(
    "services, clients, needle",
    [
        ([{"name": "a", "models": ["x"]}, {"name": "b", "models": ["x"]}], [], "served by both a and b"),
        ([{"name": "a", "models": []}], [], "serves no model name"),
        ([{"name": "a", "models": ["has space"]}], [], "cannot be routed"),
        ([{"name": "a", "models": ["x"]}], [{"name": "c", "models": ["y"]}], "limited to y"),
        ([{"name": "a", "models": ["x"]}], [{"name": "c", "models": []}], "non-empty list"),
    ],
)
def test_route_plan_refuses_what_the_proxy_could_not_route(services, clients, needle):
    with pytest.raises(m.RouteError, match=needle):
        m.route_plan(services, clients)


def test_one_service_renders_exactly_as_before():
    one = [svc("chat", 8000, ["--served-model-name", "qwen"])]
    cfg = f.render(dict(tls=False, services=one))["haproxy.cfg"]["content"]
    assert "json_query" not in cfg and "tune.bufsize" not in cfg and "routed" not in cfg
    two_ports = [
        svc("chat", 8000, ["--served-model-name", "qwen"]),
        svc("embed", 8001, ["--runner", "pooling", "--served-model-name", "bge"], front_port=8444),
    ]
    cfg = f.render(dict(tls=False, services=two_ports))["haproxy.cfg"]["content"]
    assert "frontend front_chat" in cfg and "frontend front_embed" in cfg and "json_query" not in cfg


def test_services_sharing_a_port_get_one_door_routed_by_model():
    files = f.render(
        dict(
            tls=False,
            services=pair([dict(name="alice", key=ALICE), dict(name="bob", key=BOB, models=["qwen"])]),
            max_body_bytes=1000,
        )
    )
    cfg = files["haproxy.cfg"]["content"]
    assert cfg.count("\nfrontend ") == 1 and "frontend front_routed_8443" in cfg
    assert "    tune.bufsize %d" % (1000 + f_routed.ROUTED_HEADROOM) in cfg
    assert "req.body,json_query('$.model')" in cfg
    assert "use_backend engine_chat if { var(txn.service) -m str chat }" in cfg
    assert "use_backend engine_embed if { var(txn.service) -m str embed }" in cfg
    # Only the chat engine has a key: set only towards it.
    assert 'map(/usr/local/etc/haproxy/engine.map)]" if { var(txn.service) -m str chat }' in cfg
    assert "var(txn.service) -m str embed" in cfg and "str(embed),map" not in cfg
    assert files["models-routed_8443.map"]["content"].splitlines()[1:] == ["bge embed", "qwen chat"]
    assert files["access-routed_8443.map"]["content"].splitlines()[1:] == [
        "alice|bge ok",
        "alice|qwen ok",
        "bob|qwen ok",
    ]
    assert len(files["clients-routed_8443.map"]["content"].splitlines()) == 3
    refused = [line for line in cfg.splitlines() if "route_not_served" in line]
    assert len(refused) == 2
    assert any(
        "-m str chat } { path -m str /v1/embeddings /v1/score /v1/rerank /pooling /classify }" in r for r in refused
    )
    for line in cfg.splitlines():
        if "model_not_found" in line:
            body = json.loads(line.split("string '", 1)[1].split("'", 1)[0])
            assert body["error"] == {
                "message": body["error"]["message"],
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }
    models = [line for line in cfg.splitlines() if "path -m str /v1/models" in line and "status 200" in line]
    assert len(models) == 2 and '"id": "bge"' not in [x for x in models if "str bob" in x][0]


def test_a_routed_door_refuses_a_model_served_twice_and_a_key_naming_two_clients():
    twice = [svc("a", 8000, ["--served-model-name", "x"]), svc("b", 8001, ["--served-model-name", "x"])]
    with pytest.raises(f_settings.FrontError, match="served by both"):
        f.render(dict(tls=False, services=twice))
    clash = [
        svc("a", 8000, ["--served-model-name", "x"], [dict(name="alice", key=ALICE)]),
        svc("b", 8001, ["--served-model-name", "y"], [dict(name="eve", key=ALICE)]),
    ]
    with pytest.raises(f_settings.FrontError, match="one key names two clients"):
        f.render(dict(tls=False, services=clash))


def test_check_settings_accepts_a_shared_front_port_but_not_a_shared_metrics_port():
    base = dict(enabled=True, tls=False)
    shared = [dict(name="a", port=8000, front_port=8443), dict(name="b", port=8001, front_port=8443)]
    assert f_settings.check_settings(dict(base, services=shared)) == []
    clash = [dict(name="a", port=8000, front_port=8443), dict(name="b", port=8001, front_port=9000, metrics_port=8443)]
    assert any(
        "one port per listener" in p
        for p in f_settings.check_settings(dict(base, services=clash, metrics_sources=["10.0.0.0/8"]))
    )


def test_client_models_must_be_a_list_of_names():
    assert f_settings.client_problems([dict(name="a", key=ALICE, models=["x"])]) == []
    assert "models must be" in f_settings.client_problems([dict(name="a", key=ALICE, models="x")])[0]


def test_a_shared_front_port_may_not_be_an_engine_port():
    shared = [dict(name="a", port=8000, front_port=8443), dict(name="b", port=8443, front_port=8443)]
    assert any(
        "the engine's own port" in p for p in f_settings.check_settings(dict(enabled=True, tls=False, services=shared))
    )
