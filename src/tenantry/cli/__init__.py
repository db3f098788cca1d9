"""The ``tenantry`` command line: ``main`` (dispatch), ``core`` (the daemon's own
commands), ``daemon`` (start/stop/doctor), ``common`` (what every concept's ``cli.py``
shares) and ``completion``."""
