"""strip_fatbin on a synthetic ELF64 with two fatbin containers: only payloads change, headers and offsets stay.

Run: python3 -m pytest tests/gpu/test_strip_fatbin.py
"""

import os
import struct
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import strip_fatbin as S  # noqa: E402


def entry(kind, arch, payload, extra_header=b""):
    """One fatbin entry: a 64-byte header (+ options/name bytes), then its payload."""
    hsize = S.ENTRY.size + len(extra_header)
    head = S.ENTRY.pack(kind, 0x0101, hsize, len(payload), 0, 0, 0, 8, arch, 0, 0, 0x11, 0, 0)
    return head + extra_header + payload


def container(*entries):
    body = b"".join(entries)
    return S.CONTAINER.pack(S.MAGIC, 1, S.CONTAINER.size, len(body)) + body


def elf(section):
    """A minimal little-endian ELF64: header, the .nv_fatbin bytes, .shstrtab, three section headers."""
    names = b"\0.nv_fatbin\0.shstrtab\0"
    fat_off = 64
    str_off = fat_off + len(section)
    sh_off = (str_off + len(names) + 7) // 8 * 8
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, sh_off, 0, 64, 0, 0, 64, 3, 2)
    shdr = struct.Struct("<IIQQQQIIQQ")
    sections = (
        shdr.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        + shdr.pack(1, 1, 2, 0, fat_off, len(section), 0, 0, 8, 0)
        + shdr.pack(12, 3, 0, 0, str_off, len(names), 0, 0, 1, 0)
    )
    body = header + section + names
    return body + bytes(sh_off - len(body)) + sections


SM80, SM90, SM100 = b"\x80" * 40, b"\x90" * 48, b"\xa0" * 24
PTX80, PTX90, PTX100 = b"ptx80" * 8, b"ptx90" * 8, b"ptx100" * 4


def build():
    first = container(  # SASS for the card: its PTX is not needed
        entry(S.KIND_ELF, 80, SM80),
        entry(S.KIND_ELF, 90, SM90, extra_header=b"name\0\0\0\0"),
        entry(S.KIND_ELF, 100, SM100),
        entry(S.KIND_PTX, 90, PTX90, extra_header=bytes(8)),
    )
    second = container(  # no SASS for the card: PTX it can JIT stays, newer PTX goes
        entry(S.KIND_ELF, 80, SM80),
        entry(S.KIND_PTX, 80, PTX80, extra_header=bytes(8)),
        entry(S.KIND_PTX, 100, PTX100, extra_header=bytes(8)),
    )
    return first + bytes(8) + second  # padding between containers is skipped


def test_only_payloads_change_and_the_card_keeps_what_it_loads():
    data = elf(build())
    out, tally = S.strip_elf(data, 90)
    assert len(out) == len(data)
    assert (tally["containers"], tally["kept"], tally["zeroed"]) == (2, 2, 5)
    assert tally["kept_bytes"] == len(SM90) + len(PTX80)
    before = S.parse_entries(data, 64, 64 + len(build()))
    after = S.parse_entries(out, 64, 64 + len(build()))
    assert [(c, [dict(e) for e in es]) for c, es in before] == [(c, [dict(e) for e in es]) for c, es in after]
    kept = {
        (e["kind"], e["arch"])
        for _header, es in after
        for e in es
        if any(out[e["payload_offset"] : e["payload_offset"] + e["payload_size"]])
    }
    assert kept == {("elf", 90), ("ptx", 80)}
    for _header, es in after:
        for e in es:
            # every header (and the bytes between header and payload) is byte for byte the original
            a, b = e["offset"], e["payload_offset"]
            assert out[a:b] == data[a:b]
    diff = [i for i in range(len(data)) if out[i] != data[i]]
    payloads = [
        range(e["payload_offset"], e["payload_offset"] + e["payload_size"])
        for _header, es in after
        for e in es
        if (e["kind"], e["arch"]) not in kept
    ]
    assert all(any(i in r for r in payloads) for i in diff)  # nothing outside a dropped payload changed


def test_a_container_that_runs_past_its_section_is_refused():
    bad = bytearray(container(entry(S.KIND_ELF, 90, SM90)))
    struct.pack_into("<Q", bad, 8, len(bad))  # claims more than it holds
    with pytest.raises(S.FatbinError, match="runs past"):
        S.strip_elf(elf(bytes(bad)), 90)


def test_a_file_without_fatbins_is_refused():
    with pytest.raises(S.FatbinError):
        S.strip_elf(b"not an elf" * 10, 90)
