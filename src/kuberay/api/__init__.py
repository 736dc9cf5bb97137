"""The ray.io API: models, shared names, feature gates, validation and generated CRDs.

Modules: ``raycluster``/``rayjob``/``rayservice``/``raycronjob`` (pydantic models, the single
source of field names, defaults and schema markers), ``constants`` (labels, annotations,
finalizers, env vars, ports, conditions, event reasons), ``features`` (feature gates as an
input value), ``validation`` (controller-side rules with upstream's messages), ``crdgen``
(CRD YAML under ``deploy/crds``), ``openapi`` (core-type schemas from the pinned Kubernetes)
and ``webhook`` (optional admission handler).

Invariant: nothing here talks to a network, a cluster or a subprocess (an import-linter contract
enforces it); code that applies these definitions to a cluster lives in ``devenv`` (CRD install)
and ``cli`` (OpenAPI snapshot refresh). Files are touched only by ``crdgen``'s command (it
writes ``deploy/crds``) and by reading this package's own data.
"""
