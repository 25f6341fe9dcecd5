"""Deployment on Flower's SuperLink and SuperNodes: TLS, admission, processes, the backend.

Modules, one concept each (import them directly; this package imports nothing):

- :mod:`~phalanx.flower.deployment.certificates`: a local CA and the SuperLink's certificate.
- :mod:`~phalanx.flower.deployment.superlink`, :mod:`~phalanx.flower.deployment.supernode`: the
  ``flower-superlink`` / ``flower-supernode`` commands, started and stopped by pid
  (:mod:`~phalanx.flower.deployment.processes`), on the ports of
  :mod:`~phalanx.flower.deployment.ports` unless told otherwise.
- :mod:`~phalanx.flower.deployment.node_config`: who a SuperNode's ClientApp is.
- :mod:`~phalanx.flower.deployment.control`: Flower's Control API through the ``flwr`` CLI.
- :mod:`~phalanx.flower.deployment.admission`: approved clients' keys registered with the SuperLink.
- :mod:`~phalanx.flower.deployment.binding`: each signed reply bound to its Flower node.
- :mod:`~phalanx.flower.deployment.flower_app`: the Flower app a SuperLink runs for a Phalanx run
  (its ServerApp is :mod:`phalanx.flower.server_app`, its ClientApp :mod:`phalanx_clients.app`).
- :mod:`~phalanx.flower.deployment.backend`: the dispatcher's deployment backend, and
  ``run_on_superlink``, what ``flwr run`` does, followed to the end.
"""
