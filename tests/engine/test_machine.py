"""What paperdag records of the machine a stage ran on (engine/machine.py)."""

from __future__ import annotations

from paperdag.engine import machine

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
stepping\t: 8
flags\t\t: fpu sse sse2 sse4_1 sse4_2 avx avx2 fma avx512f avx512bw amx_tile

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: something else
"""


def test_the_first_processor_is_described_with_the_isa_libraries_dispatch_on() -> None:
    d = machine.parse_cpuinfo(CPUINFO)
    assert d["cpu"] == "Intel(R) Xeon(R) Platinum 8480+" and d["vendor"] == "GenuineIntel"
    assert d["family_model_stepping"] == "6/143/8"
    assert d["isa"] == ["sse4_1", "sse4_2", "avx", "fma", "avx2", "avx512f", "avx512bw", "amx_tile"]
    other = machine.parse_cpuinfo(CPUINFO.replace(" amx_tile", ""))
    assert other["flags_md5"] != d["flags_md5"]


def test_the_id_follows_the_cpu_and_libc_not_the_core_count() -> None:
    d = {**machine.parse_cpuinfo(CPUINFO), "libc": "glibc 2.36", "arch": "x86_64", "cores": 2}
    assert machine.identity(d) == machine.identity({**d, "cores": 64})
    assert machine.identity(d) != machine.identity({**d, "libc": "glibc 2.39"})
    assert machine.identity(d) != machine.identity({**d, "isa": d["isa"][:-1]})
    assert "amx_tile" in machine.summary(d) and machine.summary(None) == "a machine not recorded"


def test_this_machine_is_described() -> None:
    d = machine.describe()
    assert d["cpu"] and d["arch"] and len(machine.this_id()) == 12
