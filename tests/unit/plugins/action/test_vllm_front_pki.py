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


def _pem(path):
    with open(path, "rb") as handle:
        return handle.read()


def test_ca_decision_reuses_makes_or_refuses():
    assert P.ca_decision("/d", None, None) == ("make", None)
    assert P.ca_decision("/d", "AA", None) == ("reuse", None)
    assert P.ca_decision("/d", "AA", "AA") == ("reuse", None)
    assert P.ca_decision("/d", None, "AA", replace=True) == ("replace", None)
    assert P.ca_decision("/d", "BB", "AA", replace=True) == ("replace", None)
    verdict, message = P.ca_decision("/d", None, "AA")
    assert verdict == "refuse" and "SHA-256 AA" in message and "no site CA there" in message
    assert "to /d" in message and "vllm_front_pki_replace_ca=true" in message
    verdict, message = P.ca_decision("/d", "BB", "AA")
    assert verdict == "refuse" and "another site CA there (SHA-256 BB)" in message


def test_second_control_node_refuses_then_reuses_the_copied_ca(tmp_path):
    """A host converged from one control node; a second one (or a second clone) without the CA refuses, in check
    mode too, and writes nothing; with the site's directory copied over it reuses the CA and the certificate."""
    first = str(tmp_path / "first")
    made = P.ensure(first, "gpu1", ["10.0.0.5"], 30)
    host_ca = _pem(made["ca_cert"])
    second = str(tmp_path / "second")
    for check in (True, False):
        try:
            P.ensure(second, "gpu1", ["10.0.0.5"], 30, check=check, host_ca=host_ca)
        except ValueError as exc:
            assert made["ca_sha256"] in str(exc) and "no site CA there" in str(exc)
        else:
            raise AssertionError("a control node without the host's CA made one")
        assert not os.path.exists(os.path.join(second, "ca.key"))
    other = P.ensure(str(tmp_path / "other"), "gpu2", ["10.0.0.6"], 30)
    try:
        P.ensure(str(tmp_path / "other"), "gpu1", ["10.0.0.5"], 30, host_ca=host_ca)
    except ValueError as exc:
        assert "another site CA there (SHA-256 %s)" % other["ca_sha256"] in str(exc)
    else:
        raise AssertionError("a control node with another CA issued the host a certificate of it")
    __import__("shutil").copytree(first, second)
    again = P.ensure(second, "gpu1", ["10.0.0.5"], 30, host_ca=host_ca)
    assert not again["changed"] and again["ca_sha256"] == made["ca_sha256"]


def test_replace_ca_on_purpose_keeps_the_old_files(tmp_path):
    d = str(tmp_path / "pki")
    made = P.ensure(d, "gpu1", ["10.0.0.5"], 30)
    other = P.ensure(str(tmp_path / "elsewhere"), "gpu1", ["10.0.0.5"], 30)
    new = P.ensure(d, "gpu1", ["10.0.0.5"], 30, host_ca=_pem(other["ca_cert"]), replace_ca=True)
    assert new["changed"] and new["ca_sha256"] not in (made["ca_sha256"], other["ca_sha256"])
    assert new["reason"] == "signed by another CA"
    with open(new["cert"], "rb") as handle:
        assert (
            P.renewal_reason(
                x509.load_pem_x509_certificate(handle.read()),
                x509.load_pem_x509_certificate(_pem(new["ca_cert"])),
                ["10.0.0.5"],
                30,
            )
            is None
        )
    kept = sorted(n for n in os.listdir(d) if ".replaced-" in n)
    assert [n.split(".replaced-")[0] for n in kept] == ["ca.crt", "ca.key"]


def test_host_ca_pem_from_slurp():
    assert P.host_ca_pem("") is None and P.host_ca_pem(None) is None
    assert P.host_ca_pem(__import__("base64").b64encode(b"PEM\n").decode()) == b"PEM\n"


def test_certificate_of_another_ca_with_the_same_name_is_renewed(tmp_path):
    """Every site CA is named alike: the signature decides, not the issuer's name."""
    one = P.ensure(str(tmp_path / "one"), "gpu1", ["10.0.0.5"], 30)
    two = P.ensure(str(tmp_path / "two"), "gpu1", ["10.0.0.5"], 30)
    cert = x509.load_pem_x509_certificate(_pem(one["cert"]))
    assert P.renewal_reason(cert, x509.load_pem_x509_certificate(_pem(one["ca_cert"])), ["10.0.0.5"], 30) is None
    other_ca = x509.load_pem_x509_certificate(_pem(two["ca_cert"]))
    assert P.renewal_reason(cert, other_ca, ["10.0.0.5"], 30) == "signed by another CA"
