"""Where things are served."""

#: Prefix of every REST endpoint; bump the version for an incompatible change.
API_PREFIX = "/api/v1"
