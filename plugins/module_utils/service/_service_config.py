# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a vllm_service configuration is on the host: the paths it writes and the fingerprint of its files.

The role renders its templates on the controller (Ansible's template lookup) and hands the texts here:

- ``expected_paths(...)``: the list airgap.vllm.host_info's ``paths`` option reads (the configuration directory
  and its ``last-good/``, the seccomp profile with ``seccomp: profile``, then every file with its mode and the
  SHA-1 of its text), so one probe tells a converged re-run that nothing is to be written. The secret files
  (API keys, the container environment) are hashed apart (``part``), in a task that shows nothing.
- ``config_fingerprint(...)``: the SHA-256 of the files' SHA-1s the last good record keeps (what ``last-good/``
  holds), from the probe's checksums when converged, else from the writes' results; a re-run whose fingerprint
  matches the record copies nothing to ``last-good/`` again. Its value is stored on the hosts: the formula (the
  order, an empty entry for each missing checksum, joined with commas) must never change.

- ``must_restart(...)``: whether the running service must restart: this run wrote a file of it, or a file of it
  is newer than the unit's running start (a run cut between the write and the restart, issue 46), or systemd has
  not loaded the unit file as written.

Pure functions, no Ansible import (the filters vllm_service_config_expected, vllm_service_config_fingerprint and
vllm_service_must_restart call them).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

PARTS = ('all', 'public', 'secret')


def text_sha1(text):
    """SHA-1 of a text as Ansible's hash('sha1') computes it (UTF-8, undecodable bytes kept as they were read)."""
    if not isinstance(text, bytes):
        text = text.encode('utf-8', 'surrogateescape')
    return hashlib.sha1(text).hexdigest()


def config_files(files, secret=(), part='all'):
    """The files of one part in the order the expected paths and the fingerprint list them.

    files: [{'src', 'dest', 'mode'}] (the role's __vllm_service_files); secret: the srcs of the secret files.
    'public': those not secret, 'secret': the secret ones (each in files' order), 'all': public then secret.
    """
    if part not in PARTS:
        raise ValueError("part must be one of %s, not %r" % (', '.join(PARTS), part))
    secret = list(secret or [])
    public = [f for f in files or [] if f['src'] not in secret]
    hidden = [f for f in files or [] if f['src'] in secret]
    return {'public': public, 'secret': hidden, 'all': public + hidden}[part]


def expected_paths(
    config_dir, files, rendered, secret=(), part='all', seccomp='', seccomp_profile='', seccomp_text=None, expected=None
):
    """The paths the configuration writes, as airgap.vllm.host_info's ``paths`` option takes them.

    config_dir: the service's configuration directory (0700, with last-good/ 0700 below it). rendered: {src: the
    rendered text} of the part's files (a file without one is an error, never skipped). seccomp: the
    vllm_service_seccomp setting; with 'profile' the profile at seccomp_profile (0600, SHA-1 of seccomp_text)
    follows the directories. part 'all' and 'public' start with the directories; 'secret' appends the secret
    files to `expected` (the public part's list, not changed), so their checksums are made where nothing is shown.
    """
    chosen = config_files(files, secret, part)
    if part == 'secret':
        out = list(expected or [])
    else:
        if expected:
            raise ValueError("expected is the public part's list, given only with part='secret'")
        out = [
            {'path': config_dir, 'type': 'directory', 'mode': '0700'},
            {'path': config_dir + '/last-good', 'type': 'directory', 'mode': '0700'},
        ]
        if seccomp == 'profile':
            if not seccomp_profile or seccomp_text is None:
                raise ValueError("seccomp 'profile' needs the profile's path and text")
            out.append({'path': seccomp_profile, 'mode': '0600', 'sha1': text_sha1(seccomp_text)})
    rendered = rendered or {}
    for f in chosen:
        if f['src'] not in rendered:
            raise ValueError("no rendered text for %s (%s)" % (f['src'], f['dest']))
        out.append({'path': f['dest'], 'mode': f['mode'], 'sha1': text_sha1(rendered[f['src']])})
    return out


def _entry(record, key):
    """record[key] as the fingerprint joins it: '' when absent (Jinja's default('')), else its text (join)."""
    record = record or {}
    return '%s' % (record[key],) if key in record else ''


def fingerprint_checksums(
    converged,
    files,
    secret=(),
    seccomp='',
    seccomp_profile='',
    probe_paths=None,
    written=None,
    secret_written=(),
    seccomp_written=None,
):
    """The files' checksums in the fingerprint's order: the public files, the secret ones, the seccomp profile.

    converged: from the probe (probe_paths: host_info's ``paths``, {path: state}); the seccomp slot is '' unless
    seccomp is 'profile'. Otherwise from the writes: `written` is the public files' looped template result
    (its ``results``), secret_written the secret files' write results in the secret files' order, seccomp_written
    the profile's copy result; a result without a checksum (skipped) gives ''. (A converged probe holds every
    path; one it lacks would give '' here where the old Jinja failed.)
    """
    if converged:
        paths = probe_paths or {}
        sums = [_entry(paths.get(f['dest']), 'sha1') for f in config_files(files, secret, 'all')]
        sums.append(_entry(paths.get(seccomp_profile), 'sha1') if seccomp == 'profile' else '')
        return sums
    sums = [_entry(r, 'checksum') for r in (written or {}).get('results') or []]
    sums.extend(_entry(r, 'checksum') for r in secret_written or [])
    sums.append(_entry(seccomp_written, 'checksum'))
    return sums


def config_fingerprint(*args, **kwargs):
    """SHA-256 (hex) of fingerprint_checksums (same arguments) joined with ',' - the value the last good record
    keeps."""
    return hashlib.sha256(','.join(fingerprint_checksums(*args, **kwargs)).encode('utf-8')).hexdigest()


# A file written within this many seconds after the unit's start still counts as read by it: the wall clock behind
# started_at is read a moment apart from the monotonic one (module_utils/common/_unit_wait.run_started_at).
START_SLACK_S = 1.0


def files_newer_than_run(unit, paths):
    """The files of `paths` modified after the unit's current run started (sorted), or all of them when systemd says
    its unit file changed since it was loaded; [] when the unit is not running (starting it reads them all).

    unit: host_info's units[name]; paths: host_info's paths ({path: path_state}) of the configuration's
    expected_paths: its files (the unit, the logging configuration, the secret files, the seccomp profile when there
    is one) are judged, its directories are not (writing last-good/ changes their mtime, not the service)."""
    unit = unit or {}
    started = unit.get('started_at')
    if started is None:
        return []
    files = sorted(path for path, state in (paths or {}).items() if (state or {}).get('type') == 'file')
    if unit.get('needs_daemon_reload'):
        return files
    return [
        path
        for path in files
        if paths[path].get('mtime') is not None and paths[path]['mtime'] > started + START_SLACK_S
    ]


def must_restart(probe, unit_name, written=()):
    """(restart?, why): a write of this run changed a file (`written`: the registered results of the writes), or a
    file of the probe's configuration paths is newer than the running unit's start (files_newer_than_run)."""
    if any((w or {}).get('changed') for w in written):
        return True, 'the configuration changed'
    newer = files_newer_than_run(((probe or {}).get('units') or {}).get(unit_name), (probe or {}).get('paths'))
    if newer:
        return True, 'the service runs an older configuration than %s (a run cut before its restart)' % ', '.join(newer)
    return False, ''
