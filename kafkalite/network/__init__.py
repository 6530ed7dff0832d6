"""The transport (Kafka's ``kafka.network``): listeners, connections, the request channel.

``socket_server`` accepts and bounds connections (``connection_quotas``,
``request_queue``), ``connection`` frames requests and writes responses in
order (``sendmsg``/``sendfile``, TLS), ``request_channel`` decodes a request
and calls its handler. Handlers live above, in ``kafkalite.server.apis``, and
import only ``api_spec`` (``ApiSpec``, ``RequestContext``) and ``responses``
(``FileRange``, ``CloseConnection``) from here. Nothing here imports
``kafkalite.server``: the server builds this layer from its config
(``server/socket_server_config.py``).
"""
