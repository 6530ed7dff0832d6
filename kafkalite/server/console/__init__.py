"""The web console (``kafkalite.console.port``): server-rendered pages over the broker's
state, served on the broker's event loop (docs/operations.md, "Console")."""

from kafkalite.server.console.app import ConsoleApp, ConsoleServer
from kafkalite.server.console.deps import ConsoleDeps

__all__ = ["ConsoleApp", "ConsoleDeps", "ConsoleServer"]
