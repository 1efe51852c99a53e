"""The filters a shared card and a pooling service use, as the roles call them: airgap.vllm.vllm_plan_card
(vllm_plan's configure.yml), vllm_service_kind and vllm_smoke_request (vllm_service's vars), smoke_verdict's kind."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def test_the_card_of_a_service_as_the_plan_role_asks_for_it(render):
    instances = [
        {"name": "chat", "vars": {"vllm_plan_gpus": ["0"], "vllm_plan_model_dir": "/m/chat", "vllm_plan_port": 8000}},
        {"name": "embed", "vars": {"vllm_plan_gpus": ["0"], "vllm_plan_model_dir": "/m/e", "vllm_plan_port": 8001}},
    ]
    card = render("{{ i | airgap.vllm.vllm_plan_card('embed') }}", i=instances)
    assert [c["name"] for c in card] == ["chat", "embed"] and card[1]["options"]["model_dir"] == "/m/e"
    assert render("{{ i | airgap.vllm.vllm_plan_card('chat') }}", i=instances[:1]) == []


def test_a_pooling_services_smoke_request_and_verdict(render):
    plan = {"ledger": {"pooling": {"task": "embed", "encoder_only": True}}}
    assert render("{{ p | airgap.vllm.vllm_service_kind }}", p=plan) == "embed"
    req = render("{{ p | airgap.vllm.vllm_smoke_request('bge-m3', 1024, false) }}", p=plan)
    assert req["kind"] == "embed" and req["path"] == "/v1/embeddings"
    answer = {"data": [{"embedding": [0.5, 0.1]}, {"embedding": [0.2, 0.3]}]}
    assert render("{{ a | airgap.vllm.smoke_verdict(false, 1024, kind=k) }}", a=answer, k=req["kind"])["ok"]
    # The chat verdict stays the default.
    assert not render("{{ a | airgap.vllm.smoke_verdict(false, 1024) }}", a=answer)["ok"]
    assert render("{{ {} | airgap.vllm.vllm_service_kind }}") == "generate"
