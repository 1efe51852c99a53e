"""The site CA and the host certificates (controller side): made once, renewed near expiry or for new names."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import os
import stat

from cryptography import x509

from ansible_collections.airgap.vllm.plugins.action import vllm_front_pki as P


def test_ca_once_certificate_renewed_for_names_and_expiry(tmp_path):
    d = str(tmp_path / "pki")
    r = P.ensure(d, "gpu1", ["10.0.0.5", "gpu1"], 30)
    assert r["changed"] and r["names"] == ["10.0.0.5", "gpu1"]
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(d, "ca.key")).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(r["key"]).st_mode) == 0o600
    with open(r["cert"], "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    with open(r["ca_cert"], "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    assert cert.issuer == ca.subject
    ca_key = open(os.path.join(d, "ca.key")).read()
    again = P.ensure(d, "gpu1", ["gpu1", "10.0.0.5"], 30)
    assert not again["changed"] and again["reason"] is None
    assert P.ensure(d, "gpu1", ["10.0.0.6", "gpu1"], 30, check=True)["reason"].startswith("its names differ")
    later = datetime.datetime.utcnow() + datetime.timedelta(days=380)
    assert P.ensure(d, "gpu1", ["10.0.0.5", "gpu1"], 30, now=later)["reason"].startswith("expires in")
    assert open(os.path.join(d, "ca.key")).read() == ca_key, "the CA is made once"


def test_check_mode_without_ca_writes_nothing(tmp_path):
    r = P.ensure(str(tmp_path / "none"), "h", ["10.0.0.5"], 30, check=True)
    assert r["changed"] and not os.path.exists(str(tmp_path / "none"))


def test_wanted_names_drop_wildcards():
    assert P.wanted_names(["0.0.0.0", "[fd00::1]", "Host.Example", "10.0.0.1"]) == (
        [__import__("ipaddress").ip_address("10.0.0.1"), __import__("ipaddress").ip_address("fd00::1")],
        ["host.example"],
    )
