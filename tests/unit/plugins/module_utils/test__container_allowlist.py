"""Issue 24 #3: the container gets no more than the plan gives it - the allowlist of docker run options and
environment names (_container_allowlist) as the service guard applies it. Test names state what is defended.

The option table is held against Docker 20.10's own `docker run --help` (fixtures/docker-20.10-run-help.txt,
written by Debian's docker.io 20.10.24): every long option there must be decided by the table, with a reason,
and the guard must do what the table says.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import random
import re

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.service import _container_allowlist as A
from ansible_collections.airgap.vllm.plugins.module_utils.service import _container_checks as AC
from ansible_collections.airgap.vllm.plugins.module_utils.service import _container_options as C
from ansible_collections.airgap.vllm.plugins.module_utils.service import _service_guard as g

from .test__service_guard import MODEL, accepted

HELP = os.path.join(os.path.dirname(__file__), "fixtures", "docker-20.10-run-help.txt")
CONF = "/etc/airgap-vllm/vllm"
KEY = "sk-very-secret-0123456789"
PROFILE = "/etc/airgap-vllm/vllm/seccomp.json"


def run(**kw):
    """The service guard with the model and config directories as the bind mounts it may show."""
    return accepted(**dict(dict(mount_roots=[MODEL, CONF]), **kw))


def refused(**kw):
    with pytest.raises(g.GuardError) as err:
        run(**kw)
    return str(err.value)


def help_options():
    """{long name: (shorthand or None, type word or None)} of every option in Docker 20.10's docker run --help."""
    line_re = re.compile(r"^\s{2,}(?:-([A-Za-z]), )?(--[a-z0-9-]+)(?: ([a-z0-9-]+))?(?:\s{2,}\S|\s*$)")
    out = {}
    with open(HELP) as f:
        text = f.read()
    assert "Usage:  docker run [OPTIONS] IMAGE [COMMAND] [ARG...]" in text
    for line in text.splitlines():
        m = line_re.match(line)
        if m:
            out[m.group(2)] = (m.group(1), m.group(3))
    return out


HELP_OPTIONS = help_options()

# A value each option's decision is shown with: (accepted value, refused value or None). Values of the
# "check" options are the interesting ones: what the plan emits / a harmless setting, and what loosens.
CHECK_EXAMPLES = {
    "--cgroupns": ("private", "host"),
    "--device": ("/dev/nvidia0", "/dev/sda"),
    "--env": ("HF_HUB_OFFLINE", "HF_TOKEN=hf_secret"),
    "--gpus": ('"device=0,1"', "all;id"),
    "--ipc": ("private", "host"),
    "--label": ("org.example.team=ml", "org.airgap.vllm.owner=me"),
    "--log-driver": ("journald", "gelf"),
    "--log-opt": ("max-size=100m", "syslog-address=udp://10.0.0.1:514"),
    "--mount": ("type=bind,source=%s,target=/m,readonly" % MODEL, "type=bind,source=/,target=/host"),
    "--network": ("bridge", "container:other"),
    "--oom-kill-disable": ("false", "true"),
    "--oom-score-adj": ("500", "-1000"),
    "--privileged": ("false", "true"),
    "--pull": ("never", "always"),
    "--runtime": ("nvidia", "sysbox-runc"),
    "--security-opt": ("seccomp=unconfined", "apparmor=unconfined"),
    "--storage-opt": ("size=120G", "dm.basesize=20G"),
    "--ulimit": ("memlock=-1", "rtprio=99"),
    "--volume": ("%s:%s:ro" % (MODEL, MODEL), "/:/host"),
}


def _opt(name, value):
    return [name] if value is None else ["%s=%s" % (name, value)]


# ---------------------------------------------------------------- the table against Docker's own list


def test_the_fixture_is_docker_20_10s_full_option_list():
    assert len(HELP_OPTIONS) == 96, sorted(HELP_OPTIONS)
    for name in (
        "--cap-add",
        "--privileged",
        "--volume",
        "--pid",
        "--device",
        "--env-file",
        "--security-opt",
        "--gpus",
    ):
        assert name in HELP_OPTIONS


def test_every_option_docker_20_10_knows_is_decided_by_the_table_and_nothing_else():
    undecided = sorted(set(HELP_OPTIONS) - set(A.DOCKER_RUN_OPTIONS))
    assert not undecided, "options of docker run --help the allowlist does not decide: %s" % undecided
    unknown = sorted(set(A.DOCKER_RUN_OPTIONS) - set(HELP_OPTIONS))
    assert not unknown, "the table names options Docker 20.10 does not have: %s" % unknown


@pytest.mark.parametrize("name", sorted(HELP_OPTIONS))
def test_each_option_has_dockers_shorthand_and_value_kind_a_decision_and_a_reason(name):
    short, kind = HELP_OPTIONS[name]
    spec = A.DOCKER_RUN_OPTIONS[name]
    assert spec[0] == short
    assert spec[1] is (kind is not None), "%s: takes a value in Docker's help: %s" % (name, kind)
    assert spec[2] in A.DECISIONS
    assert isinstance(spec[3], str) and len(spec[3]) > 10
    if spec[2] == A.CHECK:
        assert name in CHECK_EXAMPLES, "a check option needs an accepted and a refused example here"


@pytest.mark.parametrize("name", sorted(HELP_OPTIONS))
def test_the_guard_does_what_the_table_says_for_each_option(name):
    _short, takes_value, decision, reason = A.DOCKER_RUN_OPTIONS[name]
    if decision == A.ALLOW:
        run(docker_options=_opt(name, "1" if takes_value else None))
    elif decision in (A.REFUSE, A.ROLE):
        opt = _opt(name, "x" if takes_value else None)
        err = refused(docker_options=opt)
        assert name in err and A.OPTIONS_VAR in err and reason in err
        run(docker_options=opt, allow_options=[name])  # the operator's way out, option by option
    elif decision == A.EXPOSE:
        opt = _opt(name, "127.0.0.1:9000:8000" if takes_value else None)
        assert A.EXPOSE_VAR in refused(docker_options=opt)
        run(docker_options=opt, expose=True)
    else:
        good, bad = CHECK_EXAMPLES[name]
        spell = (lambda v: [name, v]) if takes_value else (lambda v: ["%s=%s" % (name, v)])
        run(docker_options=spell(good))
        err = refused(docker_options=spell(bad))
        assert name in err
        if name != "--env":
            assert A.OPTIONS_VAR in err
            run(docker_options=spell(bad), allow_options=[name])


def test_every_shorthand_is_read_as_its_long_option():
    for short, name in A.DOCKER_SHORT.items():
        assert AC.parse_docker([short, "v"] if A.DOCKER_RUN_OPTIONS[name][1] else [short])[0][1] == name


# ---------------------------------------------------------------- what the plan emits keeps working


@pytest.mark.parametrize(
    "kernel,docker,offload,tp,gpus,driver",
    [
        ("4.19.90", "20.10.7", 0, 1, (), None),
        ("4.19.90", "18.09.1", 0, 2, (0, 1), None),
        ("5.15.0", "24.0.7", 32, 4, (0, 1, 2, 3), "json-file"),
        ("5.14.0", "26.1.3", 0, 1, (1,), "journald"),
        ("6.8.0", "28.2.2", 8, 2, (), "local"),
    ],
)
def test_everything_the_planner_emits_passes_the_guard(kernel, docker, offload, tp, gpus, driver):
    opts, reasons, extra_env = C.container_options(kernel, docker, offload, tp, gpus, log_driver=driver)
    env, _why = C.plan_env("FLASHINFER", extra_env)
    out = run(docker_options=opts, env=env, extra_env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_TOKEN": "hf_x"})
    assert "seccomp=unconfined" not in out["docker_options"] and "no-new-privileges" in out["docker_options"]
    for label in reasons:  # every planned option has its reason, and the guard has one too
        word = label.split()[0]
        assert word.startswith("(") or A.DOCKER_RUN_OPTIONS[word][3]


def test_the_planners_seccomp_unconfined_is_still_replaced_by_the_profile():
    opts, _r, _e = C.container_options("4.19.90", "20.10.7", 0)
    assert "seccomp=unconfined" in opts
    out = run(docker_options=opts)["docker_options"]
    assert "seccomp=%s" % PROFILE in out and "seccomp=unconfined" not in out
    assert "seccomp=unconfined" in run(docker_options=opts, seccomp="unconfined")["docker_options"]


def test_operator_extras_seen_in_the_shipped_scenarios_pass():
    run(
        docker_options=[
            "--gpus",
            "all",
            "--label",
            "org.example.team=ml",
            "--ulimit",
            "memlock=-1",
            "--log-opt",
            "compress=true",
            "--shm-size",
            "16g",
            "--cap-drop",
            "ALL",
            "--init",
        ]
    )


# ---------------------------------------------------------------- the holes of issue 24


@pytest.mark.parametrize(
    "opts",
    [
        ["--cap-add", "ALL"],
        ["--cap-add=SYS_ADMIN"],
        ["-v", "/:/host"],
        ["--volume=/:/host:ro"],
        ["-v/etc:/etc:ro"],
        ["--pid", "host"],
        ["--pid=container:x"],
        ["--uts", "host"],
        ["--userns", "host"],
        ["--ipc", "host"],
        ["--ipc=container:x"],
        ["--cgroupns", "host"],
        ["--network", "container:x"],
        ["--net", "mynet"],
        ["--device", "/dev/sda"],
        ["--device=/dev/mem:/dev/mem:rwm"],
        ["--device-cgroup-rule", "a *:* rwm"],
        ["--env-file", "/root/.env"],
        ["--security-opt", "label=disable"],
        ["--security-opt", "apparmor=unconfined"],
        ["--security-opt", "systempaths=unconfined"],
        ["--security-opt", "seccomp=/tmp/allow-all.json"],
        ["--security-opt", "no-new-privileges=false"],
        ["--security-opt", "label:type:spc_t"],
        ["--mount", "type=bind,source=/,target=/host"],
        ["--mount", "type=bind,src=%s,dst=/m" % MODEL],
        ["--mount", "type=volume,source=x,target=/x"],
        ["--volume", "%s:/m" % MODEL],
        ["--volume", "%s:/m:rw" % MODEL],
        ["--volume", "%s/../../etc:/x:ro" % MODEL],
        ["--volume", "named:/data:ro"],
        ["--volume", "/anon"],
        ["--volume", "%s:/m:ro,rshared" % MODEL],
        ["--volumes-from", "other"],
        ["--group-add", "docker"],
        ["--cgroup-parent", "/"],
        ["--sysctl", "net.ipv4.ip_forward=1"],
        ["--entrypoint", "/bin/sh"],
        ["--label", "org.airgap.vllm.model-version=forged"],
        ["--label-file", "/tmp/labels"],
        ["--log-opt", "env=HF_TOKEN"],
        ["--log-driver", "splunk"],
        ["--oom-kill-disable"],
        ["--cpu-rt-runtime", "950000"],
        ["--use-api-socket"],
        ["--annotation", "a=b"],
        ["-x"],
        ["--Privileged"],
        ["--rm"],
        ["--name", "sshd"],
        ["--restart", "always"],
        ["-d"],
        ["--runtime", "kata"],
        ["--pull", "always"],
        ["image:tag"],
        ["--"],
    ],
)
def test_options_that_give_the_container_more_than_the_plan_are_refused_naming_the_way_out(opts):
    err = refused(docker_options=["--gpus", "all"] + opts)
    assert "vllm_service_docker_options[2]" in err
    assert A.OPTIONS_VAR in err or "not an option" in err


@pytest.mark.parametrize(
    "opts",
    [
        ["--volume", "%s:%s:ro" % (MODEL, MODEL)],
        ["-v", "%s/tokenizer.json:/t.json:ro,z" % MODEL],
        ["--volume=%s/extra.yaml:/etc/extra.yaml:ro" % CONF],
        ["--mount", "type=tmpfs,target=/scratch,tmpfs-size=1g"],
        ["--mount", "type=bind,src=%s,dst=/m,ro=true,bind-propagation=rprivate" % MODEL],
        ["--device", "/dev/nvidia-uvm"],
        ["--device", "/dev/nvidiactl:/dev/nvidiactl:rw"],
        ["--security-opt", "no-new-privileges"],
        ["--gpus", "count=2"],
        ["--gpus", '"capabilities=compute,utility"'],
        ["--net=bridge"],
        ["--privileged=false"],
        ["-u", "1000:1000"],
        ["-w/workspace"],
        ["--read-only", "--tmpfs", "/tmp"],
        ["--ulimit", "nofile=65536:65536"],
    ],
)
def test_narrow_or_harmless_options_are_accepted(opts):
    run(docker_options=["--gpus", "all"] + opts)


def test_a_bind_mount_needs_the_roots_it_may_show():
    assert "neither the model directory" in refused(docker_options=["-v", "%s:/m:ro" % MODEL], mount_roots=[])


def test_refusals_name_every_option_at_once():
    err = refused(docker_options=["--cap-add", "ALL", "-v", "/:/host", "--pid", "host", "--privileged"])
    for part in ("--cap-add ALL", "-v /:/host", "--pid host", "--privileged"):
        assert part in err


def test_the_operator_can_allow_an_option_on_purpose():
    out = run(docker_options=["--gpus", "all", "--device", "/dev/infiniband/uverbs0"], allow_options=["--device"])
    assert "/dev/infiniband/uverbs0" in out["docker_options"]


@pytest.mark.parametrize(
    "opts",
    [
        ["--label", "a=b\nExecStartPre=/bin/sh"],
        ["--shm-size", "4g\r"],
        ["--ulimit", "nofile=1\x00"],
        ["--label", "a=\x7f"],
        ["--label", "a=\u2028"],
        ["--label", "a=\x85"],
    ],
)
def test_control_characters_in_docker_option_values_are_refused(opts):
    err = refused(docker_options=opts)
    assert "control character" in err and "vllm_service_docker_options[%d]" % (len(opts) - 1) in err


@pytest.mark.parametrize(
    "argv",
    [
        [MODEL, "--served-model-name", "qwen\nExecStartPre=/bin/touch /x"],
        [MODEL, "--max-model-len\t", "8192"],
        [MODEL + "\x00"],
    ],
)
def test_control_characters_in_the_argv_are_refused(argv):
    assert "control character" in refused(argv=argv)


@pytest.mark.parametrize("host", ["127.0.0.1\n", " 127.0.0.1", "127.0.0.1\x00", None, 127001, ["127.0.0.1"]])
def test_a_publish_host_with_padding_control_characters_or_the_wrong_type_is_refused(host):
    assert "vllm_service_host" in refused(publish_host=host)


@pytest.mark.parametrize(
    "values,text",
    [
        (
            {"vllm_service_image": "vllm/vllm-openai:v0.27.1\nExecStartPre=/bin/sh"},
            "vllm_service_image holds the control",
        ),
        ({"vllm_service_model_version": "v1\r"}, "vllm_service_model_version holds the control"),
        ({"vllm_service_model_dir": {"a": 1}}, "vllm_service_model_dir is a mapping"),
        ("x", "must be a mapping"),
    ],
)
def test_the_roles_own_words_of_the_unit_are_one_line_strings(values, text):
    assert text in refused(unit_values=values)
    run(unit_values={"vllm_service_image": "sha256:0123", "vllm_service_model_dir": MODEL})


# ---------------------------------------------------------------- environment


@pytest.mark.parametrize(
    "name",
    [
        "VLLM_API_KEY",
        " VLLM_API_KEY",
        "VLLM_API_KEY ",
        "\tVLLM_API_KEY",
        "VLLM_API_KEY\n",
        "vllm_api_key",
        "VLLM-API-KEY",
        "VLLM_APIKEY",
        "Vllm_Api_Key",
        "OPENAI_API_KEY",
        "X_API_TOKEN",
        "VLLM_API_KEY\u00a0",
    ],
)
def test_api_key_names_are_refused_in_every_spelling_even_when_allowed(name):
    for where in (dict(extra_env={name: "k"}), dict(env={name: "k"}), dict(env_names=[name])):
        err = refused(allow_env=[name], **where)
        assert "vllm_service_api_keys" in err


@pytest.mark.parametrize(
    "value",
    [
        "x\nVLLM_API_KEY=sk-smuggled",
        "x\rVLLM_API_KEY=sk-smuggled",
        "x\x00y",
        "x\x1b[2J",
        "x\x7f",
        "x\u2028VLLM_API_KEY=sk-smuggled",
    ],
)
def test_control_characters_in_env_values_are_refused_and_the_value_never_repeated(value):
    err = refused(extra_env={"VLLM_CPU_KVCACHE_SPACE": value})
    assert "control character" in err and "VLLM_CPU_KVCACHE_SPACE" in err
    assert "sk-smuggled" not in err


@pytest.mark.parametrize("name", ["HF HUB", "HF_HUB_OFFLINE ", "HF-HUB", "1ABC", "", "A=B", "HF_\u0130", "a"])
def test_env_names_that_are_not_plain_are_refused(name):
    assert "not a plain variable name" in refused(extra_env={name: "1"}, allow_env=[name])


@pytest.mark.parametrize("name", ["LD_PRELOAD", "LD_LIBRARY_PATH", "PATH", "PYTHONPATH", "HTTPS_PROXY", "HOME"])
def test_env_names_outside_the_allowlist_need_the_opt_in(name):
    err = refused(extra_env={name: "/x"})
    assert A.ENV_VAR in err and name in err
    run(extra_env={name: "/x"}, allow_env=[name])


def test_the_plans_environment_and_the_documented_prefixes_are_accepted():
    env, _why = C.plan_env("FLASHINFER", {"NVIDIA_VISIBLE_DEVICES": "0,1"})
    extra = dict(("%sSETTING" % prefix, "1") for prefix, _why in A.ENV_PREFIXES)
    extra.update(OMP_NUM_THREADS=8, CUDA_VISIBLE_DEVICES="0", VLLM_CPU_KVCACHE_SPACE="1")
    run(env=env, extra_env=extra)
    for name in env:
        assert A.env_name_reason(name)


@pytest.mark.parametrize(
    "value,kind", [(True, "a boolean"), (None, "null"), ({"a": 1}, "a mapping"), (["a"], "a list")]
)
def test_env_values_that_are_not_strings_are_refused_not_written_as_their_text(value, kind):
    err = refused(extra_env={"HF_HUB_OFFLINE": value})
    assert kind in err and "give a string" in err


@pytest.mark.parametrize("env", ["HF_HUB_OFFLINE=1", ["HF_HUB_OFFLINE"], 3])
def test_an_environment_that_is_not_a_mapping_is_refused(env):
    assert "must be a mapping" in refused(extra_env=env)


# ---------------------------------------------------------------- API keys


@pytest.mark.parametrize(
    "keys,text",
    [
        ({"default": KEY}, "got a mapping"),
        (KEY, "got a string"),
        ([{"key": KEY}], "[0] is a mapping"),
        ([[KEY]], "[0] is a list"),
        ([12345], "[0] is a number"),
        ([None], "[0] is null"),
        ([""], "[0] is empty"),
        ([KEY + "\n"], "control character"),
        ([" " + KEY], "space"),
        ([True], "a boolean"),
    ],
)
def test_api_keys_that_are_not_a_list_of_one_line_strings_are_refused_never_written_as_text(keys, text):
    err = refused(api_keys=keys)
    assert "vllm_service_api_keys" in err and text in err
    assert KEY not in err


def test_valid_api_keys_pass_and_say_whether_there_are_keys():
    metrics = dict(
        expose=True, address="10.20.0.15", port=8000, publish_port=8000, container_port=8000, has_api_keys=False
    )
    assert run(api_keys=[KEY, "sk-two"], metrics=metrics)["docker_options"][:2] == ["--publish", "10.20.0.15:8000:8000"]
    assert "vllm_service_api_keys is empty" in refused(api_keys=[], metrics=metrics)


# ---------------------------------------------------------------- no traceback, whatever the input

JUNK = [
    None,
    0,
    7,
    -1,
    3.5,
    True,
    "",
    "x",
    "\u00e9\u4e2d\U0001f600",
    "\x00",
    [],
    [None],
    [1, 2],
    [[["deep"]]],
    {},
    {"a": {"b": {"c": None}}},
    {1: 2},
    {None: None},
    ["--volume"],
    ["--gpus"],
    ["-"],
    ["-e"],
    ["--env="],
    ["--mount", ""],
    ["--mount", ",,,="],
    ["--security-opt", ""],
    ["--security-opt", ":"],
    ["--oom-score-adj", "x"],
    ["--volume", "::::"],
    ["-v", ""],
    ["--\u00e9"],
    ["-\u00e9"],
    ["--label", "\U0001f600"],
]
PARAMS = [
    "argv",
    "docker_options",
    "env_names",
    "publish_host",
    "env",
    "extra_env",
    "api_keys",
    "allow_options",
    "allow_env",
    "mount_roots",
    "metrics",
    "security_options",
    "unit_values",
]


@pytest.mark.parametrize("param", PARAMS)
def test_junk_in_any_input_is_refused_or_accepted_never_a_traceback(param):
    for junk in JUNK:
        try:
            run(**{param: junk})
        except g.GuardError:
            pass


def test_random_junk_everywhere_never_raises_anything_but_the_guards_error():
    rnd = random.Random(24)
    for _round in range(400):
        kw = dict((p, rnd.choice(JUNK)) for p in rnd.sample(PARAMS, rnd.randint(1, 4)))
        try:
            run(**kw)
        except g.GuardError:
            pass


@pytest.mark.parametrize(
    "opts",
    [
        ["-e", "VLLM_API_KEY"],
        ["--env= VLLM_API_KEY"],
        ["-evllm_api_key"],
        ["--env", "VLLM_API_KEY=sk-smuggled"],
        ["-e", "LD_PRELOAD"],
    ],
)
def test_env_names_given_as_docker_options_follow_the_same_rules(opts):
    err = refused(docker_options=opts)
    assert "vllm_service_api_keys" in err or "vllm_service_extra_env" in err or A.ENV_VAR in err
    assert "sk-smuggled" not in err
