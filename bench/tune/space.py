"""A declared space of configurations: named parameters, each with its values, and the
constraints a configuration must meet (a predicate, or one of the declarative rules below).

The configurations are the product of the parameters' values in the order declared (the first
parameter varies slowest), less those a constraint excludes; an excluded configuration is kept
with the constraint that excluded it (``Space.excluded``), so a record can say why it was never
tried. A space can also be a plain list of configurations (``Space.of``: Triton's configs)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..measure.door import MeasureError

Config = Mapping[str, Any]


class SpaceError(MeasureError):
    """A space that cannot be searched (no parameter, a parameter without values, every
    configuration excluded, a constraint that raised): one line (a ValueError; exit 2)."""


@dataclass(frozen=True)
class Param:
    """One tunable parameter: its name (the keyword ``build`` takes) and its values, in the
    order they are tried."""

    name: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Constraint:
    """A rule a configuration must meet: ``ok(config)`` true to keep it; ``text`` says the rule
    in words (a record names it for each configuration it excluded)."""

    ok: Callable[[Config], bool]
    text: str


def where(predicate: Callable[[Config], bool], text: str | None = None) -> Constraint:
    """A constraint from any predicate of the configuration (a dict of name -> value)."""
    return Constraint(predicate, text or str(getattr(predicate, "__name__", "a predicate")))


def divides(param: str, n: int) -> Constraint:
    """``param`` divides ``n`` exactly (a tile that covers the problem without a ragged edge)."""
    return Constraint(lambda c: n % int(c[param]) == 0, f"{param} divides {n}")


def at_most(params: str | Sequence[str], limit: float) -> Constraint:
    """The product of ``params`` is at most ``limit`` (threads per block, bytes of shared
    memory or of a tile that must fit a cache)."""
    names = (params,) if isinstance(params, str) else tuple(params)

    def ok(c: Config) -> bool:
        prod = 1.0
        for p in names:
            prod *= c[p]
        return prod <= limit

    return Constraint(ok, f"{' * '.join(names)} <= {limit:g}")


def at_least(params: str | Sequence[str], limit: float) -> Constraint:
    """The product of ``params`` is at least ``limit`` (enough work per program)."""
    names = (params,) if isinstance(params, str) else tuple(params)

    def ok(c: Config) -> bool:
        prod = 1.0
        for p in names:
            prod *= c[p]
        return prod >= limit

    return Constraint(ok, f"{' * '.join(names)} >= {limit:g}")


def ordered(smaller: str, larger: str) -> Constraint:
    """``smaller`` <= ``larger`` (an inner block no larger than the outer one)."""
    return Constraint(lambda c: c[smaller] <= c[larger], f"{smaller} <= {larger}")


@dataclass(frozen=True)
class Space:
    """Parameters and constraints (see the module doc); ``given``: an explicit list of
    configurations instead of a product (``Space.of``)."""

    params: tuple[Param, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    given: tuple[Config, ...] | None = field(default=None)

    @classmethod
    def of(cls, configs: Iterable[Config],
           constraints: Iterable[Constraint | Callable[[Config], bool]] = ()) -> Space:
        """A space that is a list of configurations, tried in that order."""
        got = tuple(dict(c) for c in configs)
        if not got:
            raise SpaceError("the space has no configuration")
        for c in got:
            if not isinstance(c, Mapping) or not all(isinstance(k, str) for k in c):
                raise SpaceError(f"a configuration must be a dict of name -> value, got {c!r}")
        return cls((), _constraints(constraints), got)

    def all_configs(self) -> list[dict[str, Any]]:
        """Every configuration before the constraints, in enumeration order."""
        if self.given is not None:
            return [dict(c) for c in self.given]
        names = [p.name for p in self.params]
        return [dict(zip(names, vs, strict=True))
                for vs in itertools.product(*(p.values for p in self.params))]

    def why_excluded(self, config: Config) -> str | None:
        """The first constraint ``config`` breaks, in words (None: it is in the space)."""
        for rule in self.constraints:
            try:
                kept = bool(rule.ok(config))
            except Exception as e:  # the user's predicate: one line naming it
                raise SpaceError(f"constraint {rule.text!r} raised {type(e).__name__}: {e} "
                                 f"on {label(config)}") from None
            if not kept:
                return rule.text
        return None

    def configs(self) -> list[dict[str, Any]]:
        """The configurations that meet every constraint, in enumeration order."""
        kept = [c for c in self.all_configs() if self.why_excluded(c) is None]
        if not kept:
            raise SpaceError("every configuration of the space breaks a constraint")
        return kept

    def excluded(self) -> list[tuple[dict[str, Any], str]]:
        """The configurations a constraint excluded, each with the rule it broke."""
        out = []
        for c in self.all_configs():
            why = self.why_excluded(c)
            if why is not None:
                out.append((c, why))
        return out


def _constraints(rules: Iterable[Constraint | Callable[[Config], bool]]) -> tuple[Constraint,
                                                                                    ...]:
    out = []
    for r in rules:
        if isinstance(r, Constraint):
            out.append(r)
        elif callable(r):
            out.append(where(r))
        else:
            raise SpaceError(f"a constraint must be a predicate or a Constraint, got {r!r}")
    return tuple(out)


def space(params: Mapping[str, Sequence[Any]],
          where: Iterable[Constraint | Callable[[Config], bool]]
          | Constraint | Callable[[Config], bool] = ()) -> Space:
    """``space({"BLOCK": [16, 32, 64], "UNROLL": [1, 2]}, where=[divides("BLOCK", n)])``: the
    product of the values, first parameter slowest, less what a constraint excludes."""
    if not isinstance(params, Mapping) or not params:
        raise SpaceError("a space needs at least one parameter: {name: [values, ...]}")
    ps = []
    for name, values in params.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise SpaceError(f"parameter name {name!r} is not a Python identifier (build "
                             "takes each as a keyword)")
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise SpaceError(f"parameter {name!r}: give its values as a list, got {values!r}")
        vs = tuple(values)
        if not vs:
            raise SpaceError(f"parameter {name!r} has no values")
        if len(set(map(repr, vs))) != len(vs):
            raise SpaceError(f"parameter {name!r} lists a value twice: {list(vs)!r}")
        ps.append(Param(name, vs))
    rules = where if isinstance(where, Iterable) and not isinstance(where, Constraint) \
        else [where]
    return Space(tuple(ps), _constraints(rules))


def label(config: Config) -> str:
    """A configuration in one short word: ``BM=32,BN=64`` (a case's variant)."""
    return ",".join(f"{k}={v}" for k, v in config.items()) or "default"
