"""airgap.vllm.vllm_start_failure as vllm_service's tasks/verify.yml calls it: the one reason a start failed, or ''
(composed in _unit_wait.start_failure, not Jinja)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

FAILURE = "{{ health | airgap.vllm.vllm_start_failure(argv, smoke) }}"
INFO = 'vllm:cache_config_info{cache_dtype="fp8",enable_prefix_caching="True"} 1.0'


def test_a_healthy_service_has_no_failure(render):
    got = render(FAILURE, health={"status": 200, "content": INFO}, argv=["--kv-cache-dtype", "fp8"], smoke=None)
    assert got == ""


def test_the_health_waits_message_is_the_reason(render):
    got = render(
        FAILURE, health={"failed": False, "msg": "vllm is failed (exit 1)", "status": None}, argv=[], smoke={"ok": True}
    )
    assert got == "vllm is failed (exit 1)"
