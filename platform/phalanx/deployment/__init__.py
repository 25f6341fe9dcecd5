"""Deployment on Flower's SuperLink and SuperNodes: TLS, admission, processes, the backend.

Modules, one concept each (import them directly; this package imports nothing):

- :mod:`~phalanx.deployment.certificates`: a local CA and the SuperLink's certificate.
- :mod:`~phalanx.deployment.superlink`, :mod:`~phalanx.deployment.supernode`: the
  ``flower-superlink`` / ``flower-supernode`` commands, started and stopped by pid
  (:mod:`~phalanx.deployment.processes`).
- :mod:`~phalanx.deployment.node_config`: who a SuperNode's ClientApp is.
- :mod:`~phalanx.deployment.control`: Flower's Control API through the ``flwr`` CLI.
- :mod:`~phalanx.deployment.admission`: approved clients' keys registered with the SuperLink.
- :mod:`~phalanx.deployment.roster`: approved, online clients mapped to workers.
- :mod:`~phalanx.deployment.binding`: each signed reply bound to its Flower node.
- :mod:`~phalanx.deployment.flower_app`, :mod:`~phalanx.deployment.server_app`,
  :mod:`~phalanx.deployment.execute`, :mod:`~phalanx.deployment.summary`: the app a
  SuperLink runs for a Phalanx run, and how it records the run.
- :mod:`~phalanx.deployment.backend`: ``run_on_superlink``, what ``flwr run`` does, followed
  to the end.
"""
