"""Binding a call's arguments to a signature's parameters, as ``inspect.Signature.bind`` then
``apply_defaults`` do, without their cost (pure Python, paid on every inlined call and every
container method call): ``BindingPlan``, made once per signature."""
from __future__ import annotations

import inspect

__all__ = ["BindingPlan"]


class BindingPlan:
    """A signature's parameters laid out for binding a call without ``Signature.bind`` (pure
    Python, the cost of every inlined call): ``bind`` gives what ``bind`` then
    ``apply_defaults`` give, or None for anything but a call Python accepts whose keywords
    name no positional-only parameter (the caller then asks ``Signature.bind``, which
    raises Python's own ``TypeError``).

    signature:   the signature itself; kinds: parameter name -> kind, in order;
    positional:  the names that positional arguments fill, in order;
    by_keyword:  the names a keyword argument binds (positional-or-keyword, keyword-only);
    var_positional / var_keyword: the ``*args`` / ``**kwargs`` names, or None;
    defaults:    name -> default, for the parameters that have one."""

    __slots__ = ("signature", "kinds", "positional", "by_keyword", "var_positional",
                 "var_keyword", "defaults")

    def __init__(self, signature: inspect.Signature):
        params = signature.parameters.values()
        kind = inspect.Parameter
        self.signature = signature
        self.kinds = {p.name: p.kind for p in params}
        self.positional = tuple(p.name for p in params
                                if p.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD))
        self.by_keyword = frozenset(p.name for p in params
                                    if p.kind in (kind.POSITIONAL_OR_KEYWORD, kind.KEYWORD_ONLY))
        self.var_positional = next((p.name for p in params if p.kind is kind.VAR_POSITIONAL),
                                   None)
        self.var_keyword = next((p.name for p in params if p.kind is kind.VAR_KEYWORD), None)
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}

    def bind(self, args, kwargs) -> dict | None:
        positional = self.positional
        if len(args) > len(positional) and self.var_positional is None:
            return None
        given = dict(zip(positional, args))
        extra: dict = {}
        for name, value in kwargs.items():
            if name in self.by_keyword:
                if name in given:
                    return None
                given[name] = value
            elif name in self.kinds and name not in (self.var_positional, self.var_keyword) \
                    or self.var_keyword is None:
                return None
            else:
                extra[name] = value
        arguments = {}
        for name in self.kinds:
            if name in given:
                arguments[name] = given[name]
            elif name == self.var_positional:
                arguments[name] = tuple(args[len(positional):])
            elif name == self.var_keyword:
                arguments[name] = extra
            elif name in self.defaults:
                arguments[name] = self.defaults[name]
            else:
                return None
        return arguments
