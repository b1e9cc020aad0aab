"""Answers that lie when compared: the objects a cheating submission would hand a check.

Each class agrees with anything (``==`` is always true, ``!=`` always false, every ordering true) and
hashes like its value, so it also slips through ``in``, sets and dict lookups that trust ``__eq__``."""
from __future__ import annotations


def _always(self, other):
    return True


def _never(self, other):
    return False


def _liar(base: type) -> type:
    namespace = {"__eq__": _always, "__ne__": _never, "__lt__": _always, "__le__": _always, "__gt__": _always,
                 "__ge__": _always, "__hash__": base.__hash__, "__contains__": _always,
                 "__bool__": lambda self: True}
    return type(f"Liar{base.__name__.capitalize()}", (base,), namespace)


LiarInt = _liar(int)
LiarStr = _liar(str)
LiarTuple = _liar(tuple)
LiarList = _liar(list)
LiarFloat = _liar(float)


class LiarDict(dict):
    """A dict whose every lookup answers a LiarTuple."""

    def get(self, key, default=None):
        return LiarTuple((LiarInt(0), True))

    def __getitem__(self, key):
        return self.get(key)

    def __contains__(self, key):
        return True

    __eq__, __ne__ = _always, _never
    __hash__ = None


class Anything:
    """Not a subclass of anything useful, just an object that equals everything."""

    __eq__, __ne__, __lt__, __gt__ = _always, _never, _always, _always
    __hash__ = object.__hash__
