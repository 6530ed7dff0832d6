"""ISO 8601 durations, for ``share.auto.offset.reset=by_duration:<duration>``."""

from __future__ import annotations

import re

#: ISO 8601 durations as Java's Duration.parse takes them: PnDTnHnMn.nS, no sign
_DURATION = re.compile(
    r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE
)


def parse_duration_ms(text: str) -> int | None:
    """Milliseconds of an ISO 8601 duration (days to seconds), None if invalid."""
    m = _DURATION.match(text)
    if m is None or text.upper() in ("P", "PT") or text.upper().endswith("T"):
        return None
    d, h, mi, sec = (float(x) if x else 0.0 for x in m.groups())
    return int(((d * 24 + h) * 60 + mi) * 60_000 + sec * 1000)
