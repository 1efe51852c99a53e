# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side: the site CA and each host's front door certificate (issue 25, item 2).

Runs on the control node only (the CA key never reaches a host or the bundle medium), with the `cryptography`
package ansible-core itself depends on. The CA is made once per directory; a host's server certificate is made
when missing, when it expires within `renew_days`, when its names differ from the wanted ones, or when the CA
changed. A lock file serialises hosts running in parallel."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import datetime
import fcntl
import hashlib
import ipaddress
import os
import re

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - ansible-core requires it
    HAS_CRYPTOGRAPHY = False

CA_DAYS = 3650
SERVER_DAYS = 397
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _now():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def _write(path, data, mode):
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


def _key_pem(key):
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _not_after(cert):
    value = getattr(cert, "not_valid_after_utc", None)
    return value.replace(tzinfo=None) if value is not None else cert.not_valid_after


def wanted_names(names):
    """(ip addresses, dns names), sorted and unique, from a list of addresses and host names."""
    ips, dns = set(), set()
    for name in names or []:
        text = str(name).strip().strip("[]")
        if not text:
            continue
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            dns.add(text.lower())
            continue
        if not ip.is_unspecified:
            ips.add(ip)
    return sorted(ips, key=lambda i: (i.version, int(i))), sorted(dns)


def cert_names(cert):
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    ips = sorted(san.get_values_for_type(x509.IPAddress), key=lambda i: (i.version, int(i)))
    return ips, sorted(n.lower() for n in san.get_values_for_type(x509.DNSName))


def renewal_reason(cert, ca_cert, names, renew_days, now=None):
    """Why the server certificate must be made again, or None."""
    now = now or _now()
    if cert is None:
        return "no certificate yet"
    left = _not_after(cert) - now
    if left < datetime.timedelta(days=renew_days):
        return "expires in %d days (renewal below %d)" % (max(left.days, 0), renew_days)
    if cert_names(cert) != wanted_names(names):
        return "its names differ from the host's front addresses"
    if cert.issuer != ca_cert.subject or not _signed_by(cert, ca_cert):
        return "signed by another CA"
    return None


def _signed_by(cert, ca_cert):
    """Every site CA has the same subject name: whether ca_cert's key signed cert."""
    try:
        ca_cert.public_key().verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    except InvalidSignature:
        return False
    return True


def ca_fingerprint(pem):
    """SHA-256 of a PEM certificate's DER bytes, as clients show it (AA:BB:...); None for no certificate."""
    if not pem:
        return None
    cert = x509.load_pem_x509_certificate(pem if isinstance(pem, bytes) else pem.encode("ascii"))
    digest = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest().upper()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def ca_decision(directory, local_fp, host_fp, replace=False):
    """('reuse' | 'make' | 'replace', None) or ('refuse', the message): whether this control node may use or make the
    site CA for a host whose front door already serves the CA of fingerprint host_fp (None: it serves none yet).

    The site CA is made once per site; clients trust it. A control node that lacks it (a second clone, a second
    control node, a lost ~/.airgap-vllm) or holds another one must not silently make or use a new CA: the host's
    certificate would be issued again and every client that trusts the old CA would break. Only `replace` (the
    operator's deliberate vllm_front_pki_replace_ca) does that."""
    if host_fp is None or host_fp == local_fp:
        return ("reuse", None) if local_fp else ("make", None)
    if replace:
        return "replace", None
    held = (
        "this control node has another site CA there (SHA-256 %s)" % local_fp
        if local_fp
        else "this control node has no site CA there"
    )
    return "refuse", (
        "the host's front door serves certificates of the site CA with SHA-256 %s, and %s. Making or using another CA "
        "would break every client that trusts the site's CA. Copy the site CA directory (ca.crt, ca.key, the hosts' "
        "certificates) from the control node that made it to %s, or set vllm_front_pki_dir to where it is kept; to "
        "start a new site CA on purpose (every client must then be given the new ca.crt), run once with "
        "-e vllm_front_pki_replace_ca=true" % (host_fp, held, directory)
    )


def host_ca_pem(content_b64):
    """The host's current CA certificate (PEM bytes) from slurp's base64 content; None when it has none."""
    if not content_b64:
        return None
    try:
        pem = base64.b64decode(content_b64)
    except (binascii.Error, TypeError) as exc:
        raise ValueError("the host's CA certificate is not base64: %s" % exc)
    return pem if pem.strip() else None


def ensure_ca(directory, now=None):
    now = now or _now()
    key_path, cert_path = os.path.join(directory, "ca.key"), os.path.join(directory, "ca.crt")
    if os.path.exists(key_path) and os.path.exists(cert_path):
        with open(cert_path, "rb") as handle:
            cert = x509.load_pem_x509_certificate(handle.read())
        with open(key_path, "rb") as handle:
            key = serialization.load_pem_private_key(handle.read(), password=None)
        return key, cert, False
    key = ec.generate_private_key(ec.SECP384R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "airgap.vllm site"),
            x509.NameAttribute(NameOID.COMMON_NAME, "airgap.vllm site CA"),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(key_path, _key_pem(key), 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return key, cert, True


def issue(ca_key, ca_cert, host, names, now=None):
    now = now or _now()
    ips, dns = wanted_names(names)
    if not ips and not dns:
        raise ValueError("no address or name for the certificate of %s" % host)
    key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(i) for i in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, (dns[0] if dns else str(ips[0]))[:64])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(min(now + datetime.timedelta(days=SERVER_DAYS), _not_after(ca_cert)))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def _local_fp(directory):
    path = os.path.join(directory, "ca.crt")
    if not (os.path.exists(path) and os.path.exists(os.path.join(directory, "ca.key"))):
        return None
    with open(path, "rb") as handle:
        return ca_fingerprint(handle.read())


def ensure(directory, host, names, renew_days=30, check=False, now=None, host_ca=None, replace_ca=False):
    """{'changed', 'reason', 'ca_cert', 'cert', 'key', 'not_after', 'names', 'ca_sha256'}: paths on the controller.

    host_ca: the CA certificate (PEM) the host's front door has now, or None; a CA other than this directory's is
    refused (ca_decision) unless replace_ca."""
    directory = os.path.expanduser(directory)
    safe = _SAFE.sub("_", host)
    cert_path = os.path.join(directory, "%s.crt" % safe)
    key_path = os.path.join(directory, "%s.key" % safe)
    out = {"ca_cert": os.path.join(directory, "ca.crt"), "cert": cert_path, "key": key_path}
    verdict, message = ca_decision(directory, _local_fp(directory), ca_fingerprint(host_ca), replace_ca)
    if verdict == "refuse":
        raise ValueError(message)
    if verdict == "replace" and not check:
        for name in ("ca.key", "ca.crt"):
            path = os.path.join(directory, name)
            if os.path.exists(path):
                os.rename(path, path + ".replaced-" + _now().strftime("%Y%m%dT%H%M%SZ"))
    if check and verdict in ("make", "replace"):
        return dict(
            out,
            changed=True,
            reason="no site CA yet (made on the first real run)"
            if verdict == "make"
            else "a new site CA replaces the host's (vllm_front_pki_replace_ca)",
            not_after=None,
        )
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    os.chmod(directory, 0o700)
    with open(os.path.join(directory, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if check:
            with open(out["ca_cert"], "rb") as handle:
                ca_cert = x509.load_pem_x509_certificate(handle.read())
            ca_key, ca_new = None, False
        else:
            ca_key, ca_cert, ca_new = ensure_ca(directory, now)
        cert = None
        if os.path.exists(cert_path) and os.path.exists(key_path):
            with open(cert_path, "rb") as handle:
                cert = x509.load_pem_x509_certificate(handle.read())
        reason = renewal_reason(cert, ca_cert, names, renew_days, now)
        if reason and not check:
            key, cert = issue(ca_key, ca_cert, host, names, now)
            _write(key_path, _key_pem(key), 0o600)
            _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
        if ca_new and not reason:
            reason = "new site CA"
    ips, dns = wanted_names(names)
    return dict(
        out,
        ca_sha256=ca_fingerprint(ca_cert.public_bytes(serialization.Encoding.PEM)),
        changed=bool(reason),
        reason=reason,
        not_after=_not_after(cert).isoformat() + "Z" if cert is not None and not (reason and check) else None,
        names=[str(i) for i in ips] + dns,
    )


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("dir", "host", "names", "renew_days", "host_ca", "replace_ca"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        if not HAS_CRYPTOGRAPHY:
            raise AnsibleActionFail(
                "the cryptography package (an ansible-core dependency) is not importable on the "
                "control node: install it, or give vllm_front_tls_cert and vllm_front_tls_key"
            )
        args = self._task.args
        host = str(args.get("host") or (task_vars or {}).get("inventory_hostname"))
        names = list(args.get("names") or []) + [host]
        try:
            renew = int(args.get("renew_days", 30))
            result.update(
                ensure(
                    str(args.get("dir") or "~/.airgap-vllm/pki"),
                    host,
                    names,
                    renew,
                    check=bool(self._play_context.check_mode),
                    host_ca=host_ca_pem(args.get("host_ca")),
                    replace_ca=boolean(args.get("replace_ca", False), strict=True),
                )
            )
        except (ValueError, TypeError, OSError) as exc:
            raise AnsibleActionFail("site CA in %s: %s" % (args.get("dir"), exc))
        return result
