"""CPU package energy from RAPL (Running Average Power Limit) counters, read through Linux's powercap tree.

Each CPU package is a top-level zone /sys/class/powercap/intel-rapl:N named package-N (AMD's Zen packages appear
under the same names through the same driver). Its subzones intel-rapl:N:M (core, uncore, dram) are parts of the
package or beside it and are not added again; psys (the whole platform) is not a package either. A zone's energy_uj
is a cumulative counter in microjoules that wraps at max_energy_range_uj, minutes apart at full power, so a meter
read by the telemetry sampler, many times a second, never misses a wrap. Standard library only.
"""

import re
from pathlib import Path

from .contention import Unavailable

POWERCAP = "/sys/class/powercap"
PACKAGE_ZONE = re.compile(r"intel-rapl:\d+")


def read_counter(path):
    try:
        return int(Path(path).read_text())
    except PermissionError as error:
        # Since Linux 5.10 the energy counters are readable by root only (they leaked what other processes compute).
        raise Unavailable(f"{path} is not readable ({error.strerror}; root only since Linux 5.10)") from error
    except (OSError, ValueError) as error:
        raise Unavailable(f"{path} is not readable ({error})") from error


def package_zones(root=POWERCAP):
    """The package zones under a powercap tree, in order."""
    root = Path(root)
    if not root.is_dir():
        raise Unavailable(f"{root} is not present on this machine")
    zones = []
    for zone in sorted(root.iterdir()):
        try:
            name = (zone / "name").read_text().strip()
        except OSError:
            continue
        if PACKAGE_ZONE.fullmatch(zone.name) and name.startswith("package"):
            zones.append(zone)
    if not zones:
        raise Unavailable(f"{root} has no RAPL package zone (intel-rapl:N named package-N)")
    return zones


class RaplMeter:
    """The packages' energy in joules since the meter was made, summed over the package zones. A counter that
    cannot be read any more ends the meter: joules() is then None and `reason` says why."""

    def __init__(self, root=POWERCAP):
        self.zones = package_zones(root)
        self.ranges = [read_counter(zone / "max_energy_range_uj") for zone in self.zones]
        self.last = [read_counter(zone / "energy_uj") for zone in self.zones]
        self.total_uj, self.reason = 0, None
        self.source = f"RAPL through powercap: {', '.join(zone.name for zone in self.zones)}"

    def joules(self):
        if self.reason:
            return None
        try:
            now = [read_counter(zone / "energy_uj") for zone in self.zones]
        except Unavailable as error:
            self.reason = str(error)
            return None
        # A counter that wrapped reads less than before: the modulo adds its range back.
        self.total_uj += sum((current - last) % span for last, current, span in zip(self.last, now, self.ranges))
        self.last = now
        return self.total_uj / 1e6


def rapl_meter(root=POWERCAP):
    """(RaplMeter, None), or (None, why the CPU packages' energy cannot be read here)."""
    try:
        return RaplMeter(root), None
    except Unavailable as error:
        return None, str(error)
