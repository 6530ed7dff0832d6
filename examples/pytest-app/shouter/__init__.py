"""shouter: consumes JSON events, upper-cases their ``text`` field, produces them on."""

from shouter.service import Shouter, transform

__all__ = ["Shouter", "transform"]
