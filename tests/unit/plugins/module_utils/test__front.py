"""The front door (issue 25): routes, client keys as hashes, limits, validation, the rendered haproxy.cfg.

When HAProxy is installed on the test machine, the rendered configuration is also checked by `haproxy -c`."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import shutil
import subprocess

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.front import _front as f
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_haproxy as f_haproxy
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_routes as f_routes
from ansible_collections.airgap.vllm.plugins.module_utils.front import _front_settings as f_settings

ALICE = "sk-alice-0123456789abcdef"
BOB = "sk-bob-0123456789abcdef"


def service(**kw):
    svc = dict(
        name="vllm",
        front_port=8443,
        port=8000,
        argv=["/models/m", "--max-num-seqs", "50"],
        clients=[
            dict(name="alice", key=ALICE, max_concurrent=4, rate_per_minute=60),
            dict(name="bob", key_sha256=hashlib.sha256(BOB.encode()).hexdigest().upper()),
        ],
        engine_key="sk-engine-secret",
    )
    svc.update(kw)
    return svc


def settings(**kw):
    s = dict(
        enabled=True,
        mode="container",
        tls=True,
        addresses=["10.20.0.15"],
        sources=["10.20.0.0/24"],
        services=[service()],
    )
    s.update(kw)
    return s


def rendered(**kw):
    svcs = [f_settings.plan_service(s) for s in kw.pop("services", [service()])]
    return f.render(dict(dict(addresses=["10.20.0.15"], tls=True, services=svcs), **kw))


# ------------------------------------------------------------------ routes


def test_route_tables_disjoint_and_spelled_like_openapi():
    assert not set(f_routes.ALLOWED_ROUTES) & set(f_routes.REFUSED_ROUTES)
    for path in list(f_routes.ALLOWED_ROUTES) + list(f_routes.REFUSED_ROUTES):
        assert path.startswith("/") and "%" not in path and not path.endswith("/")
    assert set(f_routes.ALLOWED_ROUTES) == {
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/models",
        "/v1/responses",
        "/health",
    }
    for route in f_routes.ALLOWED_ROUTES.values():
        assert route["methods"] and route["reason"]
    for path in (
        "/invocations",
        "/tokenize",
        "/detokenize",
        "/version",
        "/load",
        "/ping",
        "/metrics",
        "/docs",
        "/openapi.json",
        "/is_scaling_elastic_ep",
        "/scale_elastic_ep",
        "/generative_scoring",
        "/pause",
    ):
        assert f_routes.REFUSED_ROUTES[path]


def test_only_health_is_keyless():
    assert [p for p, r in f_routes.ALLOWED_ROUTES.items() if r.get("key") is False] == ["/health"]


# ------------------------------------------------------------------ keys


def test_key_hash_is_what_haproxy_computes():
    assert f_settings.key_sha256(ALICE) == hashlib.sha256(ALICE.encode()).hexdigest()
    assert f_settings.key_sha256(ALICE) == f_settings.key_sha256(ALICE).lower()


def test_map_holds_hashes_and_limits_never_keys():
    files = rendered()
    text = files["clients-vllm.map"]["content"]
    assert ALICE not in text and BOB not in text
    assert "%s alice|4|60\n" % f_settings.key_sha256(ALICE) in text
    # bob: key_sha256 lower-cased, default concurrency = the total cap (50), no rate limit
    assert "%s bob|50|%d\n" % (f_settings.key_sha256(BOB), f_haproxy._NO_RATE) in text
    for name, meta in files.items():
        if name != f_haproxy.ENGINE_MAP:
            assert "sk-engine-secret" not in meta["content"], name
    assert files[f_haproxy.ENGINE_MAP] == {
        "content": "# service -> the engine's own API key (root only)\nvllm sk-engine-secret\n",
        "mode": "0600",
        "secret": True,
    }


# ------------------------------------------------------------------ limits


def test_total_cap_from_plan_or_override():
    assert f_settings.plan_service(service())["cap"] == 50
    assert f_settings.plan_service(service(argv=["m", "--max-num-seqs=7"]))["cap"] == 7
    assert f_settings.plan_service(service(max_concurrent=20))["cap"] == 20
    with pytest.raises(f_settings.FrontError, match="--max-num-seqs is unknown"):
        f_settings.plan_service(service(argv=["m"]))


def test_client_limits_capped_and_defaulted():
    svc = f_settings.plan_service(
        service(
            clients=[dict(name="c", key=ALICE, max_concurrent=500)], client_rate_per_minute=30, client_max_concurrent=3
        )
    )
    assert svc["clients"][0]["max_concurrent"] == 50 and svc["clients"][0]["rate_per_minute"] == 30
    svc = f_settings.plan_service(service(clients=[dict(name="c", key=ALICE)], client_max_concurrent=3))
    assert svc["clients"][0]["max_concurrent"] == 3


def test_an_over_limit_request_waits_for_a_closing_stream_before_its_429():
    """docs/performance.md finding 5: settle.lua is loaded, runs only for a request over its client's limit, and the
    count is taken again after it, before the 429 (tests/front_door proves it against a real HAProxy)."""
    files = rendered()
    cfg = files["haproxy.cfg"]["content"]
    assert "    lua-load /usr/local/etc/haproxy/settle.lua" in cfg.split("defaults", 1)[0]
    lines = [line.strip() for line in cfg.splitlines()]
    first = lines.index("http-request set-var(txn.conc_over) sc_trackers(0),sub(txn.client_conc)")
    assert lines[first + 1] == "http-request lua.airgap_settle if !keyless { var(txn.conc_over) -m int gt 0 }"
    assert lines[first + 2] == (
        "http-request set-var(txn.conc_over) sc_trackers(0),sub(txn.client_conc) "
        "if !keyless { var(txn.conc_over) -m int gt 0 }"
    )
    refuse = next(i for i, line in enumerate(lines) if "status 429" in line and "Retry-After 1" in line)
    assert refuse > first + 2
    lua = files["settle.lua"]
    assert lua["mode"] == "0600" and not lua["secret"]
    assert 'core.register_action("airgap_settle", { "http-req" }' in lua["content"]
    assert (
        "while waited < %d and (tonumber(txn.f:sc_trackers(0)) or 0) > limit do" % f_haproxy.SETTLE_MS in lua["content"]
    )


def test_config_has_every_rule():
    cfg = rendered(max_body_bytes=1000, queue_timeout=3, request_timeout=9, stream_timeout=1800)["haproxy.cfg"][
        "content"
    ]
    for needle in (
        "bind 10.20.0.15:8443 ssl crt /usr/local/etc/haproxy/server.pem ssl-min-ver TLSv1.2",
        "acl route_known path -m str /health /v1/chat/completions /v1/completions /v1/models /v1/responses",
        "unless route_known",
        "unless { url_beg / }",
        "req.fhdr_cnt(authorization) eq 1",
        'req.fhdr(authorization) -i -m beg "Bearer "',
        "bytes(7),sha2(256),hex,lower,map(/usr/local/etc/haproxy/clients-vllm.map)",
        "status 401",
        "hdr Allow POST if { path -m str /v1/chat/completions } !{ method POST }",
        "if METH_POST !{ req.hdr_cnt(content-length) eq 1 }",
        "if { req.hdr_val(content-length) gt 1000 }",
        "http-request track-sc0 var(txn.client_name) table clients_vllm",
        "sc_trackers(0),sub(txn.client_conc)",
        "sc_http_req_rate(0),sub(txn.client_rate)",
        "status 429",
        "http-request del-header authorization",
        'set-header Authorization "Bearer %[str(vllm),map(/usr/local/etc/haproxy/engine.map)]"',
        "server engine 127.0.0.1:8000 maxconn 50",
        "timeout queue 3s",
        "timeout http-request 9s",
        "timeout server 1800s",
        "timeout tunnel 1800s",
        "hard-stop-after 1800s",
        "log stdout format raw local0",
        "%HPO",
        "http-error status 503",
    ):
        assert needle in cfg, needle
    assert "hdr(authorization)" not in cfg.split("log-format", 1)[1].split("\n", 1)[0], "never log the key"
    for path in f_routes.REFUSED_ROUTES:
        assert " %s " % path not in cfg and not cfg.count(" %s\n" % path), path


def test_plain_http_and_wildcard_and_metrics():
    svc = service(metrics_port=9443, metrics_tokens=[dict(name="prom", key="prom-token-0123456789")])
    files = rendered(tls=False, addresses=["0.0.0.0", "::"], services=[svc], metrics_sources=["10.9.0.7"])
    cfg = files["haproxy.cfg"]["content"]
    assert "    bind :8443\n" in cfg and "    bind [::]:8443 v4v6\n" in cfg and "ssl crt" not in cfg
    assert "frontend metrics_vllm" in cfg and "bind :9443" in cfg and "unless { src 10.9.0.7/32 }" in cfg
    assert "unless { path -m str /metrics }" in cfg
    assert files["metrics-vllm.map"]["content"].endswith("%s ok\n" % f_settings.key_sha256("prom-token-0123456789"))


def test_no_engine_key_forwards_no_authorization():
    cfg = rendered(services=[service(engine_key="")])["haproxy.cfg"]["content"]
    assert "del-header authorization" in cfg and "set-header Authorization" not in cfg


def test_two_services_by_port():
    files = rendered(
        services=[
            service(),
            service(
                name="coder", front_port=8444, port=8001, clients=[dict(name="ci", key=BOB)], engine_key="sk-coder-key"
            ),
        ]
    )
    cfg = files["haproxy.cfg"]["content"]
    assert "frontend front_coder" in cfg and "bind 10.20.0.15:8444" in cfg and "server engine 127.0.0.1:8001" in cfg
    assert "ci|" in files["clients-coder.map"]["content"] and "ci|" not in files["clients-vllm.map"]["content"]
    assert files[f_haproxy.ENGINE_MAP]["content"].splitlines()[1:] == ["vllm sk-engine-secret", "coder sk-coder-key"]


@pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy not installed")
def test_haproxy_accepts_the_rendered_config(tmp_path):
    svc = service(metrics_port=9443, metrics_tokens=[dict(name="prom", key="prom-token-0123456789")])
    files = rendered(
        tls=False,
        services=[svc, service(name="coder", front_port=8444, port=8001)],
        conf_dir=str(tmp_path),
        addresses=["127.0.0.1"],
    )
    for name, meta in files.items():
        (tmp_path / name).write_text(meta["content"])
    r = subprocess.run(
        ["haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WARNING" not in r.stdout + r.stderr, r.stdout + r.stderr


# ------------------------------------------------------------------ validation


def test_settings_accepted():
    assert f_settings.check_settings(settings()) == []
    assert f_settings.check_settings(dict(enabled=False, tls=True, tls_generate=False)) == []


@pytest.mark.parametrize(
    "kw, needle",
    [
        (dict(tls_generate=False), "no TLS material"),
        (dict(tls_cert="/x.crt"), "go together"),
        (dict(mode="podman"), "container or host"),
        (dict(addresses=["front.example"]), "not an IP address"),
        (dict(sources=["10.0.0.300/8"]), "not an IP address or network"),
        (dict(services=[service(clients=[dict(name="a", key=ALICE), dict(name="a", key=BOB)])]), "one name per client"),
        (dict(services=[service(clients=[dict(name="a")])]), "has no key"),
        (dict(services=[service(clients=[dict(name="a", key="short")])]), "at least 16"),
        (dict(services=[service(clients=[dict(name="a", key=ALICE), dict(name="b", key=ALICE)])]), "same key"),
        (dict(services=[service(clients=[dict(name="a", key_sha256="abc")])]), "64 hex digits"),
        (dict(services=[service(clients=[dict(name="a", key=ALICE, key_sha256="0" * 64)])]), "both key and key_sha256"),
        (dict(services=[service(clients=[dict(name="a b", key=ALICE)])]), "letters, digits"),
        (dict(services=[service(clients=[dict(name="a", key=ALICE, max_concurrent=-1)])]), "at least 0"),
        (dict(services=[service(front_port=8000)]), "the engine's own port"),
        # A shared front port is one door routed by model (test__front_models.py); a metrics port on it is not.
        (
            dict(services=[service(), service(name="b", port=8001, front_port=8444, metrics_port=8443)]),
            "one port per listener",
        ),
        (dict(services=[service(metrics_port=9443)]), "needs vllm_front_metrics_sources"),
        (dict(services=[service(front_port=70000)]), "TCP port"),
    ],
)
def test_settings_refused(kw, needle):
    problems = f_settings.check_settings(settings(**kw))
    assert any(needle in p for p in problems), problems
    assert not any(ALICE in p for p in problems), "a key never in a message"


def test_plain_http_warns():
    assert f_settings.warnings(settings(tls=False)) and f_settings.check_settings(settings(tls=False)) == []
    assert f_settings.warnings(settings()) == []
    assert f_settings.tls_mode(settings()) == "generate"
    assert f_settings.tls_mode(settings(tls_cert="/a", tls_key="/b")) == "files"


@pytest.mark.parametrize(
    "text, ok",
    [
        (
            "HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/\nBuilt with Lua version : Lua 5.3.6",
            True,
        ),
        ("HA-Proxy version 1.8.27 2020/12/12\nBuilt with Lua version : Lua 5.3.5", False),
        ("HAProxy version 2.2.0 2020/07/07\nFeature list : +EPOLL +LUA +OPENSSL", True),
        # settle.lua needs Lua: a build without it cannot load the front door's configuration.
        ("HAProxy version 2.6.12-1 2026/10/17\nFeature list : +EPOLL -LUA +OPENSSL", False),
        ("command not found", False),
    ],
)
def test_version(text, ok):
    assert f_haproxy.version_ok(text)[0] is ok


# ------------------------------------------------------------------ role inputs and the validate play


def test_front_inputs_ports_hashes_and_engine_keys():
    services = [
        dict(name="a", port=8000, settings={}),
        dict(
            name="b",
            port=8001,
            settings=dict(vllm_front_clients=[dict(name="ci", key=BOB)], vllm_service_api_keys=["sk-b-engine"]),
        ),
    ]
    host = dict(
        vllm_front_port=9000,
        vllm_front_clients=[dict(name="alice", key=ALICE)],
        vllm_front_metrics_port=9100,
        vllm_service_api_keys=["sk-a-engine"],
    )
    r = f_settings.front_inputs(services, host, {"a": ["m", "--max-num-seqs", "4"]})
    a, b = r["services"]
    assert (a["front_port"], b["front_port"], a["metrics_port"], b["metrics_port"]) == (9000, 9001, 9100, 9101)
    assert a["clients"] == [dict(name="alice", key_sha256=f_settings.key_sha256(ALICE))]
    assert b["clients"] == [dict(name="ci", key_sha256=f_settings.key_sha256(BOB))]
    assert r["engine_keys"] == {"a": "sk-a-engine", "b": "sk-b-engine"}
    assert r["client_keys"] == {"a": ALICE, "b": BOB}
    assert ALICE not in repr(r["services"]) and BOB not in repr(r["services"])


def test_first_client_key_skips_clients_without_one():
    assert (
        f_settings.first_client_key(
            [dict(name="h", key_sha256="a" * 64), dict(name="n", key=None), dict(name="b", key=BOB)]
        )
        == BOB
    )
    assert f_settings.first_client_key([dict(name="h", key_sha256="a" * 64)]) == ""
    assert f_settings.first_client_key(None) == "" and f_settings.first_client_key([]) == ""


def test_front_problems_for_validate():
    values = dict(
        vllm_front_enabled=True,
        vllm_front_clients=[dict(name="a"), dict(name="a", key=ALICE)],
        vllm_front_tls_generate=False,
        vllm_service_port=8000,
    )
    problems = f_settings.front_problems(values.get)
    texts = " | ".join(t for _var, t in problems)
    assert "no TLS material" in texts and "has no key" in texts and "one name per client" in texts
    assert [v for v, text in problems if "TLS" in text][0].startswith("vllm_front_tls")
    assert f_settings.front_problems(dict(vllm_front_enabled=False).get) == []
    assert f_settings.front_warnings(dict(vllm_front_enabled=True, vllm_front_tls=False).get)
    assert f_settings.front_warnings(dict(vllm_front_enabled="true").get) == []


def test_engine_port_publish_beside_the_front_door_warns():
    assert (
        "vllm_front_metrics_port"
        in f_settings.front_warnings(dict(vllm_front_enabled=True, vllm_service_metrics_expose=True).get)[0]
    )


# ------------------------------------------------------------------ the fleet


def test_draining_health_answers_503_but_requests_still_pass():
    cfg = rendered(draining=True)["haproxy.cfg"]["content"]
    line = [x for x in cfg.splitlines() if "Draining" in x][0]
    assert "status 503" in line and line.endswith("if { path -m str /health }")
    assert "Draining" not in rendered()["haproxy.cfg"]["content"]
    assert "default_backend engine_vllm" in cfg


def test_fleet_balancer_config():
    cfg = f.render_fleet(
        dict(
            addresses=["10.20.0.5"],
            services=[dict(name="vllm", front_port=8443)],
            members=[dict(name="gpu1", address="10.20.0.11"), dict(name="gpu2", address="fd00::12")],
        )
    )
    for needle in (
        "bind 10.20.0.5:8443 ssl crt /usr/local/etc/haproxy/server.pem",
        "balance leastconn",
        "option httpchk GET /health",
        "http-check expect status 200",
        "default-server check inter 2s fall 2 rise 2 ssl verify required ca-file /usr/local/etc/haproxy/ca.crt",
        "server gpu1 10.20.0.11:8443 verifyhost gpu1",
        "server gpu2 [fd00::12]:8443 verifyhost gpu2",
        "option redispatch",
    ):
        assert needle in cfg, needle
    with pytest.raises(f_settings.FrontError, match="no member"):
        f.render_fleet(dict(services=[dict(name="vllm", front_port=8443)]))


def test_the_front_door_and_the_fleet_balancer_share_their_global_and_defaults_sections():
    front = rendered(request_timeout=9, stream_timeout=100)["haproxy.cfg"]["content"].splitlines()
    fleet = f.render_fleet(
        dict(
            request_timeout=9,
            stream_timeout=100,
            services=[dict(name="vllm", front_port=8443)],
            members=[dict(name="gpu1", address="10.20.0.11")],
        )
    ).splitlines()
    for line in (
        "global",
        "    ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets",
        "defaults",
        "    option dontlognull",
        "    timeout http-request 9s",
        "    timeout client 100s",
        "    timeout server 100s",
        "    timeout tunnel 100s",
    ):
        assert line in front and line in fleet, line
    assert "    hard-stop-after 100s" in fleet and "    option http-buffer-request" not in fleet
    assert [x for x in front if x.startswith("    http-error status 503")] == [
        x for x in fleet if x.startswith("    http-error status 503")
    ]


@pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy not installed")
def test_haproxy_accepts_the_fleet_config(tmp_path):
    cfg = f.render_fleet(
        dict(
            addresses=["127.0.0.1"],
            tls=False,
            conf_dir=str(tmp_path),
            services=[dict(name="vllm", front_port=8443), dict(name="b", front_port=8444)],
            members=[dict(name="gpu1", address="127.0.0.1")],
        )
    )
    (tmp_path / "haproxy.cfg").write_text(cfg)
    r = subprocess.run(
        ["haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0 and "WARNING" not in r.stdout + r.stderr, r.stdout + r.stderr


@pytest.mark.parametrize("var", ["vllm_front_sources", "vllm_front_metrics_sources"])
@pytest.mark.parametrize("wide", ["0.0.0.0/0", "::/0"])
def test_a_source_of_every_address_is_refused_with_the_variable_named(var, wide):
    values = dict(vllm_front_enabled=True, vllm_front_clients=[dict(name="a", key=ALICE)], vllm_service_port=8000)
    values[var] = ["10.1.0.0/16", wide]
    texts = [t for _var, t in f_settings.front_problems(values.get)]
    assert [t for t in texts if t.startswith(var + ": %r is every" % wide)], texts
    values[var] = ["10.1.0.0/16", "not-a-net"]
    assert [t for t in (t for _var, t in f_settings.front_problems(values.get)) if "not an IP address or network" in t]


def test_the_configuration_names_its_own_fingerprint_and_any_change_moves_it():
    def cfg(files):
        return files[f_haproxy.CONFIG_FILE]["content"]

    def header(files):
        line = [x for x in cfg(files).splitlines() if f_haproxy.FINGERPRINT_HEADER in x][0]
        return line.split()[-1]

    a = rendered()
    assert header(a) == f_haproxy.config_fingerprint(a) and len(header(a)) == 16
    assert rendered() == a  # deterministic: a converged run changes nothing
    b = rendered(services=[service(clients=[dict(name="bob", key=BOB)])])
    assert header(b) != header(a)  # a revoked client is a new configuration the reload must bring


# ------------------------------------------------------------------ the fleet's members (issue 41 item 3)


def test_fleet_members_given_are_taken_as_they_are():
    given = [dict(name="m1", address="10.9.0.1")]
    assert f.fleet_members(given, ["a"], {"a": {"ansible_host": "a.lan"}}) is given


def test_fleet_members_from_the_group_at_the_first_address_present():
    hostvars = {
        "a": dict(vllm_front_addresses=["10.1.0.1"], ansible_facts={"default_ipv4": {"address": "10.0.0.1"}}),
        "b": dict(vllm_front_addresses=[], ansible_facts={"default_ipv4": {"address": "10.0.0.2"}}, ansible_host="b"),
        "c": dict(ansible_facts={"default_ipv4": {}}, ansible_host="c.lan"),
        "d": dict(ansible_facts={"default_ipv4": {"address": ""}}, ansible_host="d.lan"),
        "e": {},
    }
    got = f.fleet_members([], ["e", "d", "c", "b", "a", "absent"], hostvars)
    assert got == [
        dict(name="e", address="e"),
        dict(name="d", address=""),  # present, even empty: taken
        dict(name="c", address="c.lan"),
        dict(name="b", address="10.0.0.2"),
        dict(name="a", address="10.1.0.1"),
        dict(name="absent", address="absent"),
    ]
    assert f.fleet_members(None, None, {}) == []
    with pytest.raises(f_settings.FrontError, match="host a must be a list"):
        f.fleet_members([], ["a"], {"a": dict(vllm_front_addresses="10.1.0.1")})
