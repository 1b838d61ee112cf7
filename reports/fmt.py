"""Numbers as the page shows them: three significant digits and the unit that keeps them short.
Every cell that shows a measured number also carries the exact stored value in data-value."""


def seconds(value):
    if value is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def flops_rate(value):
    """FLOP/s in TFLOP/s, or GFLOP/s below one TFLOP/s (a CPU's figures)."""
    if value is None:
        return "-"
    if abs(value) >= 1e12:
        return f"{value / 1e12:.3g} TFLOP/s"
    return f"{value / 1e9:.3g} GFLOP/s"


def byte_rate(value):
    if value is None:
        return "-"
    if abs(value) >= 1e12:
        return f"{value / 1e12:.3g} TB/s"
    return f"{value / 1e9:.3g} GB/s"


def size(value):
    if value is None:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value} B"


def percent(value, signed=False):
    """A fraction (0.123) as a percentage (12.3 %)."""
    if value is None:
        return "-"
    return f"{value * 100:+.3g} %" if signed else f"{value * 100:.3g} %"


def change(value):
    """A relative change (0.1017) as the triage lines them up: one decimal, signed (+10.2 %)."""
    return "-" if value is None else f"{value * 100:+.1f} %"


def number(value):
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.3g}"


def ratio(value):
    return "-" if value is None else f"{value:.3g}x"


def data_value(value):
    """The exact stored value for a data-value attribute: repr round-trips a float."""
    return "" if value is None else repr(value)
