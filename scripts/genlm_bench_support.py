"""What the genlm benchmarks over CanopyLM share (bench_genlm_smc.py, bench_genlm_bytes.py):
genlm's packages made importable, the CPU's name, and counters from the server's /metrics."""
import os
import platform
import re
import subprocess
import sys
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def import_genlm(work, shared):
    """Puts genlm's packages (a copy of SHARED/third_party prepared in WORK, as the genlm
    tests prepare it) and the client on sys.path."""
    path = subprocess.run(["sh", os.path.join(ROOT, "tests/python/genlm/prepare_genlm.sh"),
                           work, shared, sys.executable],
                          check=True, capture_output=True, text=True).stdout.strip()
    sys.path[:0] = path.split(":")


def cpu_name():
    with open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def metric_totals(url, patterns):
    """For each regular expression (its group: a sample's value), the sum of the samples
    of the server's /metrics it matches."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    return tuple(sum(float(v) for v in re.findall(pattern, text, re.M)) for pattern in patterns)


def requests_on(route):
    """The pattern of POST requests answered on ``route`` (any status)."""
    return rf'^canopy_http_requests_total\{{[^}}]*route="{re.escape(route)}"[^}}]*\}} (\S+)'
