"""The ray.io API: models, shared names, feature gates, validation and generated CRDs.

Modules: ``raycluster``/``rayjob``/``rayservice``/``raycronjob`` (pydantic models, the single
source of field names, defaults and schema markers), ``constants`` (labels, annotations,
finalizers, env vars, ports, conditions, event reasons), ``features`` (feature gates as an
input value), ``validation`` (controller-side rules with upstream's messages), ``crdgen``
(CRD YAML under ``deploy/crds``), ``openapi`` (core-type schemas from the pinned Kubernetes),
``install`` (server-side apply of the CRDs) and ``webhook`` (optional admission handler).
"""
