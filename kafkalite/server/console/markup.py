"""HTML built from escaped parts: every plain ``str`` is escaped, only :class:`Html` is not.

Topic names are restricted by Kafka, but group ids, client ids, record keys, values
and headers are anything a client sent: the console must never let them become markup.
Building pages with :func:`el` makes escaping the default rather than a step to forget.
"""

from __future__ import annotations

import html
import inspect
from collections.abc import Iterable
from urllib.parse import quote

__all__ = ["Html", "el", "esc", "join", "url"]


class Html(str):
    """Markup that is already safe (built by :func:`el` or from a literal)."""

    __slots__ = ()


Child = object  # str (escaped), Html (kept), None (dropped), numbers, or iterables of them


def esc(value: object) -> Html:
    """``value`` as safe markup: Html unchanged, anything else as escaped text."""
    if isinstance(value, Html):
        return value
    return Html(html.escape(str(value), quote=True))


def join(children: Iterable[Child], sep: str = "") -> Html:
    out: list[str] = []
    for c in children:
        if c is None or c is False:
            continue
        if isinstance(c, list | tuple) or inspect.isgenerator(c):
            out.append(join(c))
        else:
            out.append(esc(c))
    return Html(sep.join(out))


def el(tag: str, *children: Child, **attrs: object) -> Html:
    """``<tag attrs>children</tag>``; ``class_`` names ``class``, ``data_x`` names
    ``data-x``, True is a bare attribute and None/False leaves it out."""
    parts = [tag]
    for k, v in attrs.items():
        if v is None or v is False:
            continue
        name = k.rstrip("_").replace("_", "-")
        parts.append(name if v is True else f'{name}="{esc(v)}"')
    head = "<" + " ".join(parts) + ">"
    if tag in ("br", "hr", "input", "meta", "link", "img"):
        return Html(head)
    return Html(f"{head}{join(children)}</{tag}>")


def url(*segments: object, **query: object) -> str:
    """A path from percent-encoded segments, with a query of the non-None values."""
    path = "/" + "/".join(quote(str(s), safe="") for s in segments)
    q = "&".join(
        f"{quote(k, safe='')}={quote(str(v), safe='')}" for k, v in query.items() if v is not None
    )
    return f"{path}?{q}" if q else path
