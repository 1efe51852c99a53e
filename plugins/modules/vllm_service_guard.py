#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_service_guard
short_description: Refuse a vLLM service configuration that leaks API keys or leaves loopback; apply seccomp
version_added: 0.1.0
description:
  - Checks the inputs of the R(airgap.vllm.vllm_service,ansible_collections.airgap.vllm.vllm_service_role) role
    before anything is written, and fails listing every problem with its fix.
  - API keys never on a command line - O(argv) may not give C(--api-key) in any spelling vLLM 0.27.1's parser
    accepts (C(--api-key), C(--api_key), C(--api-key=K), C(--api_key=K) and the unambiguous prefixes C(--api-k),
    C(--api-ke)); O(env_names) may not hold C(VLLM_API_KEY); O(docker_options) may not carry C(--env NAME=value).
    Found key values are masked in this task's output.
  - The container gets no more than the plan gives it - every option in O(docker_options) must be allowed by the
    collection's table of Docker 20.10's C(docker run) options (module_utils/service/_container_allowlist.py, a reason each,
    see docs/architecture.md); capabilities, host mounts, host namespaces, devices other than NVIDIA's,
    C(--env-file), C(--privileged), loosening C(--security-opt) values and options Docker 20.10 does not know are
    refused, naming the option and O(allow_docker_options), the way to allow it if it is really wanted.
  - Environment names (O(env), O(extra_env), O(env_names)) must be plain (C([A-Z_][A-Z0-9_]*), no padding), allowed
    (the plan's own, or a prefix the image's software reads, such as C(VLLM_), C(HF_), C(NCCL_); others with
    O(allow_env_names)), and never carry an API key in any spelling.
  - Control characters are refused in every argv item, docker option, environment value and API key; a mapping
    or list where a string belongs is refused, never written as its text. Values are never repeated.
  - The loopback promise - unless O(expose_to_network), refuses C(--network host), any C(--publish)/C(-p)/C(-P)
    in O(docker_options) (the role publishes its own port), C(--host 0.0.0.0) or C(::) (and
    its prefixes) in O(argv), and a non-loopback O(publish_host).
  - Prometheus access - with O(metrics_expose), one more publish of the container port on O(metrics_address), an IP
    address of the host (see O(metrics_expose)).
  - Least privilege - returns O(docker_options) with the seccomp choice applied (O(seccomp=profile) replaces any
    C(seccomp=...) option, such as the planner's C(unconfined) for kernel 4.19 + Docker < 20.10.10, with
    O(seccomp_profile)) and C(--security-opt no-new-privileges) added.
  - The unit's command - with O(image), O(name), O(model_dir) and O(service_dir), returns the whole C(docker run)
    command the systemd unit runs (RV(run_argv)), composed here and nowhere else - the role's publish, the
    container environment file, the logging configuration, the read-only binds (C(:ro,z) when SELinux wants a
    relabel, see O(selinux_relabel)), the model-version label, the API key file and its C(--config), the options
    decided above, the image and O(argv).
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  argv:
    description: Everything after C(vllm serve) (the planner's argv), a list of strings (numbers are taken as text).
    type: raw
    required: true
  docker_options:
    description: Extra C(docker run) options (the planner's docker_options), a list of strings.
    type: raw
    default: []
  env_names:
    description: Names of the container environment variables, when O(env) and O(extra_env) are not given.
    type: raw
    default: []
  env:
    description:
      - The container environment of the plan (the role's C(vllm_service_env)), a mapping of name to string.
        Names and values are checked; values are never repeated.
    type: raw
  extra_env:
    description: The operator's extra environment (the role's C(vllm_service_extra_env)), checked as O(env).
    type: raw
  api_keys:
    description:
      - The API keys (the role's C(vllm_service_api_keys)), a list of one-line strings. A mapping, a string, a number
        or an empty key is refused; keys are never repeated.
    type: raw
  allow_docker_options:
    description: Options (long names, such as C(--cap-add)) the operator allows beyond the table, with any value.
    type: list
    elements: str
    default: []
  allow_env_names:
    description: Environment variable names the operator allows beyond the plan's own and the allowed prefixes.
    type: list
    elements: str
    default: []
  unit_values:
    description:
      - The role's own words of the unit (C(vllm_service_image), C(vllm_service_model_dir), ...) as a mapping of
        variable name to value; each must be a one-line string (a control character would split the unit file).
      - Omitted - the unit's own options (O(name), O(image), O(model_dir), ...) are checked under their option names.
    type: dict
  mount_roots:
    description: Host directories a C(--volume)/C(--mount) may bind, read-only (the model and the service's config directory).
    type: list
    elements: path
    default: []
  publish_host:
    description: Host address the role publishes the container port on.
    type: str
    default: 127.0.0.1
  expose_to_network:
    description: The server is meant to be reachable from the network; turns the loopback checks off.
    type: bool
    default: false
  seccomp:
    description:
      - V(profile) passes O(seccomp_profile) (Docker's default profile with C(clone3) answering ENOSYS).
      - V(unconfined) (opt-in) passes C(seccomp=unconfined), the field manual's old workaround.
      - V(docker_default) passes no seccomp option (Docker's built-in profile).
    type: str
    choices: [profile, unconfined, docker_default]
    default: profile
  seccomp_profile:
    description: Path of the installed profile on the host (needed with O(seccomp=profile)).
    type: path
  docker_security_options:
    description:
      - The engine's C(docker info --format '{{json .SecurityOptions}}'). When it lists no seccomp (an engine
        without seccomp support refuses any profile) no seccomp option is passed, with a warning.
        Omitted - unknown, seccomp assumed.
    type: list
    elements: str
  metrics_expose:
    description:
      - Opt-in Prometheus access to C(/metrics) (the role's C(vllm_service_metrics_expose)). vLLM serves it on the
        API port, so the whole HTTP server becomes reachable on O(metrics_address) - refused without API keys
        (O(has_api_keys)) unless O(expose_to_network).
      - When accepted, C(--publish METRICS_ADDRESS:METRICS_PORT:CONTAINER_PORT) is added to the returned
        O(docker_options), unless the role's own publish (O(publish_host):O(publish_port)) already covers it.
    type: bool
    default: false
  metrics_address:
    description: An IP address of the host to publish the port on for Prometheus (a wildcard only with O(expose_to_network)).
    type: str
    default: ""
  metrics_port:
    description: Host port of that publish.
    type: int
    default: 8000
  publish_port:
    description: Host port of the role's own publish on O(publish_host).
    type: int
    default: 8000
  container_port:
    description:
      - The port vLLM listens on inside the container, for the Prometheus publish (O(metrics_expose)).
      - Omitted - the O(argv)'s C(--port) as vLLM reads it (C(--port 9000) or C(--port=9000), the last given), else
        C(8000) (RV(container_port)).
    type: int
  docker_bin:
    description: The Docker CLI the unit runs (first word of RV(run_argv)).
    type: str
    default: /usr/bin/docker
  name:
    description: The service's name - the container's C(--name) (and the unit's). Needed for RV(run_argv).
    type: str
  image:
    description: The image the unit runs (an image ID or reference). Needed for RV(run_argv).
    type: str
  model_dir:
    description:
      - The model directory on the host, bound read-only at the same path. Needed for RV(run_argv).
      - Its base name is the served model name when O(argv) has no C(--served-model-name).
    type: str
  model_version:
    description: The model version, given to the container as the label C(org.airgap.vllm.model-version); empty - no label.
    type: str
    default: ""
  service_dir:
    description:
      - The service's configuration directory on the host (C(container.env), C(logging.json), C(keys.yaml)). Needed
        for RV(run_argv).
    type: str
  api_keys_container_path:
    description: Where the API key file is bound in the container (read with C(--config)) when there are API keys.
    type: str
    default: /etc/vllm/keys.yaml
  selinux_relabel:
    description:
      - V(always) binds read-only with Docker's C(z) option (C(:ro,z)), V(never) with C(:ro), V(auto) with C(:ro,z)
        only when O(selinux_enabled).
    type: str
    choices: [auto, always, never]
    default: auto
  selinux_enabled:
    description: Whether SELinux is enabled on the host (the role reads it from the host's facts).
    type: bool
    default: false
  has_api_keys:
    description: Whether the service has API keys (C(vllm_service_api_keys) is not empty).
    type: bool
    default: false
extends_documentation_fragment:
  - airgap.vllm.attributes.read_only
seealso:
  - module: airgap.vllm.vllm_launch_plan
"""

EXAMPLES = r"""
- name: Refuse leaking or exposing configurations, decide the seccomp options
  airgap.vllm.vllm_service_guard:
    argv: "{{ vllm_service_argv }}"
    docker_options: "{{ vllm_service_docker_options }}"
    env: "{{ vllm_service_env }}"
    extra_env: "{{ vllm_service_extra_env }}"
    api_keys: "{{ vllm_service_api_keys }}"
    allow_docker_options: [--cap-add]
    mount_roots: ["{{ vllm_service_model_dir }}", /etc/airgap-vllm/vllm]
    publish_host: "{{ vllm_service_host }}"
    seccomp_profile: /etc/airgap-vllm/vllm/seccomp.json
  register: __vllm_service_guard

- name: The same, also composing the unit's docker run command (returned as run_argv)
  airgap.vllm.vllm_service_guard:
    argv: ["/srv/models/qwen3", "--served-model-name", "qwen3"]
    api_keys: "{{ vllm_service_api_keys }}"
    seccomp_profile: /etc/airgap-vllm/vllm/seccomp.json
    docker_bin: /usr/bin/docker
    name: vllm
    image: vllm/vllm-openai:v0.27.1
    model_dir: /srv/models/qwen3
    model_version: "20250101"
    service_dir: /etc/airgap-vllm/vllm
    publish_host: 127.0.0.1
    publish_port: 8000
    selinux_relabel: auto
    selinux_enabled: "{{ ansible_facts['selinux']['status'] == 'enabled' }}"
  register: __vllm_service_guard

- name: The same, with Prometheus access to /metrics on a LAN address (API keys set)
  airgap.vllm.vllm_service_guard:
    argv: "{{ vllm_service_argv }}"
    seccomp: docker_default
    metrics_expose: true
    metrics_address: 10.20.0.15
    metrics_port: 8000
    publish_port: 8000
    container_port: 8000
    has_api_keys: true
"""

RETURN = r"""
docker_options:
  description: The docker run options to use, seccomp and no-new-privileges applied.
  returned: success
  type: list
  elements: str
  sample: ["--publish", "10.20.0.15:8000:8000", "--gpus", "all", "--security-opt",
           "seccomp=/etc/airgap-vllm/vllm/seccomp.json", "--security-opt", "no-new-privileges"]
container_port:
  description:
    - The port vLLM listens on inside the container, the one the unit publishes - O(container_port), else the O(argv)'s
      C(--port) as vLLM reads it (C(--port 9000) or C(--port=9000), the last given), else 8000.
  returned: success
  type: str
  sample: "8000"
served_model_name:
  description: The model name clients ask for - the O(argv)'s C(--served-model-name), else the base name of O(model_dir).
  returned: success
  type: str
  sample: qwen3
run_argv:
  description:
    - The systemd unit's C(docker run) command, one word per item (no shell involved; the role's template quotes each
      word and adds its own C(org.airgap.vllm.service) label after C(run)).
  returned: when O(image), O(name), O(model_dir) and O(service_dir) are given
  type: list
  elements: str
  sample: ["/usr/bin/docker", "run", "--rm", "--name", "vllm", "--publish", "127.0.0.1:8000:8000", "--env-file",
           "/etc/airgap-vllm/vllm/container.env", "--env", "VLLM_LOGGING_CONFIG_PATH=/etc/vllm/logging.json",
           "--volume", "/etc/airgap-vllm/vllm/logging.json:/etc/vllm/logging.json:ro", "--volume",
           "/srv/models/qwen3:/srv/models/qwen3:ro", "--security-opt", "no-new-privileges",
           "vllm/vllm-openai:v0.27.1", "/srv/models/qwen3", "--served-model-name", "qwen3"]
"""

from ansible_collections.airgap.vllm.plugins.module_utils.service._container_allowlist import words
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.service._service_guard import (
    SECCOMP_MODES,
    SELINUX_RELABEL,
    GuardError,
    api_key_args,
    guard,
)


NO_LOG = ("env", "extra_env", "api_keys")


@ansible_module(
    dict(
        argv=dict(type="raw", required=True),
        docker_options=dict(type="raw", default=[]),
        env_names=dict(type="raw", default=[]),
        env=dict(type="raw", no_log=True),
        extra_env=dict(type="raw", no_log=True),
        api_keys=dict(type="raw", no_log=True),
        allow_docker_options=dict(type="list", elements="str", default=[]),
        allow_env_names=dict(type="list", elements="str", default=[]),
        mount_roots=dict(type="list", elements="path", default=[]),
        unit_values=dict(type="dict"),
        publish_host=dict(type="str", default="127.0.0.1"),
        expose_to_network=dict(type="bool", default=False),
        seccomp=dict(type="str", choices=list(SECCOMP_MODES), default="profile"),
        seccomp_profile=dict(type="path"),
        docker_security_options=dict(type="list", elements="str"),
        metrics_expose=dict(type="bool", default=False),
        metrics_address=dict(type="str", default=""),
        metrics_port=dict(type="int", default=8000),
        publish_port=dict(type="int", default=8000),
        container_port=dict(type="int"),
        has_api_keys=dict(type="bool", default=False),
        docker_bin=dict(type="str", default="/usr/bin/docker"),
        name=dict(type="str"),
        image=dict(type="str"),
        model_dir=dict(type="str"),
        model_version=dict(type="str", default=""),
        service_dir=dict(type="str"),
        api_keys_container_path=dict(type="str", default="/etc/vllm/keys.yaml", no_log=False),
        selinux_relabel=dict(type="str", choices=list(SELINUX_RELABEL), default="auto"),
        selinux_enabled=dict(type="bool", default=False),
    ),
)
def main(module):
    p = module.params
    # Environment values are never repeated by the guard; masking them would also mask every "1" of the output.
    module.no_log_values.clear()
    # Keys found on the command line or in api_keys are masked wherever this task's output repeats them.
    module.no_log_values.update(v for _i, _n, values in api_key_args(words(p["argv"], "argv")[0]) for v in values if v)
    module.no_log_values.update(words(p["api_keys"], "api_keys")[0])
    module.no_log_values.discard("")
    invocation = {
        "module_args": dict(
            (k, "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" if k in NO_LOG and v is not None else v) for k, v in p.items()
        )
    }
    env_names = p["env_names"] if p["env"] is None and p["extra_env"] is None else None
    try:
        metrics = {
            "expose": p["metrics_expose"],
            "address": p["metrics_address"],
            "port": p["metrics_port"],
            "publish_port": p["publish_port"],
            "container_port": p["container_port"],
            "has_api_keys": p["has_api_keys"],
        }
        unit_keys = (
            "docker_bin",
            "name",
            "publish_port",
            "service_dir",
            "model_dir",
            "image",
            "model_version",
            "api_keys_container_path",
            "selinux_relabel",
            "selinux_enabled",
        )
        composed = all(p[k] for k in ("name", "image", "model_dir", "service_dir"))
        unit = dict((k, p[k]) for k in unit_keys) if composed else None
        result = guard(
            p["argv"],
            p["docker_options"],
            env_names,
            p["publish_host"],
            p["expose_to_network"],
            p["seccomp"],
            p["seccomp_profile"],
            p["docker_security_options"],
            metrics,
            allow_options=p["allow_docker_options"],
            allow_env=p["allow_env_names"],
            env=p["env"],
            extra_env=p["extra_env"],
            api_keys=p["api_keys"],
            mount_roots=p["mount_roots"],
            unit_values=p["unit_values"],
            unit=unit,
        )
    except GuardError as e:
        module.fail_json(msg=str(e), invocation=invocation)
    for w in result["warnings"]:
        module.warn(w)
    out = dict(
        (k, result[k]) for k in ("docker_options", "container_port", "served_model_name", "run_argv") if k in result
    )
    return dict(changed=False, invocation=invocation, **out)


if __name__ == "__main__":
    main()
