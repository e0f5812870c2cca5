"""The one place where this package meets fields of reportgen's plug-in contract that the
installed reportgen may not have yet.

reportgen is gaining, on its dataclasses:
    Family(citations=..., capabilities=..., outputs=...)
    ModelDescription(leaves_out=...)
    Network(votes=...)
Until the installed reportgen declares a field, `accepted` leaves it out (and `dropped` names
it, so a test can say so); once it does, the field is passed on unchanged. When every
reportgen this package supports has the fields, replace `accepted(cls, **fields)` by
`cls(**fields)` at its three call sites and delete this module.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass

# The contract's new fields, by the reportgen class that takes them.
NEW_FIELDS = {"Family": ("citations", "capabilities", "outputs"),
              "ModelDescription": ("leaves_out",),
              "Network": ("votes",)}


def known_fields(cls) -> frozenset[str]:
    """The constructor fields of dataclass `cls`."""
    if not is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    return frozenset(f.name for f in fields(cls) if f.init)


def dropped(cls) -> tuple[str, ...]:
    """The contract's new fields of `cls` (or of the reportgen class it extends) the installed
    reportgen does not have yet."""
    new = [n for base in cls.__mro__ for n in NEW_FIELDS.get(base.__name__, ())]
    return tuple(n for n in dict.fromkeys(new) if n not in known_fields(cls))


def accepted(cls, **values):
    """`cls(**values)` without the contract's new fields `cls` does not have yet. Any other
    unknown field is passed on, so a misspelt one still fails."""
    missing = set(dropped(cls))
    return cls(**{k: v for k, v in values.items() if k not in missing})
