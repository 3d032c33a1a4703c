"""The chain of facts a patched snapshot index carries from the indexes it was patched from."""

from __future__ import annotations

from types import SimpleNamespace

from sovereignspec.policy.cache.index import Carried


def test_the_carried_chain_keeps_one_copy_of_each_fact() -> None:
    """carried_fact reads a key from the newest link holding it, so older copies are dropped."""
    oldest = Carried({"a": 0, "b": 1, "c": 3}, frozenset({"n3"}), None)
    newer = Carried({"b": 2}, frozenset({"n2"}), oldest)
    old = SimpleNamespace(wide={"a": 1}, carried=newer)
    chain = Carried.after(old, frozenset({"n1"}))  # type: ignore[arg-type]
    links = []
    link: Carried | None = chain
    while link is not None:
        links.append((link.wide, link.touched))
        link = link.older
    assert links == [({"a": 1}, {"n1"}), ({"b": 2}, {"n2"}), ({"c": 3}, {"n3"})]
