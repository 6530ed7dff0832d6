"""Suite-wide pytest set-up: ``pytester`` runs the kafkalite plugin in inner pytest sessions."""

pytest_plugins = ["pytester"]
