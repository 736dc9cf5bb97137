"""Hypothesis strategies for ray.io objects, derived from the API models.

Generated specs are *schema-valid*: they satisfy the CRD (types, enums, bounds, CEL rules, list
map keys) so the apiserver accepts them, and every field that has a CRD default is always set,
so apiserver defaulting cannot change them; a round trip must return them unchanged. Core
objects (pod templates, Services, ...) come from small fixed families that are valid for the
pinned Kubernetes and contain no defaulted fields either.
"""

from __future__ import annotations

import string
from typing import Any, get_args, get_origin

from hypothesis import strategies as st
from pydantic_core import PydanticUndefined

from kuberay.api import raycluster, rayjob, rayservice
from kuberay.api.raycluster import RayClusterSpec, RayClusterStatus
from kuberay.api.raycronjob import RayCronJobSpec
from kuberay.api.rayjob import RayJobSpec, RayJobStatus
from kuberay.api.rayservice import RayServiceSpec
from kuberay.api.schema import (
    ApiModel,
    ConditionMarker,
    Core,
    DateTime,
    Default,
    Enum,
    Format,
    Minimum,
    MinItems,
    MinLength,
    QuantityMarker,
    Required,
    Rule,
    _split,
)

NAME = st.text(string.ascii_lowercase, min_size=1, max_size=5).map(lambda s: "a" + s)
TEXT = st.text(string.ascii_letters + string.digits + " -_./:", max_size=12)
KEYS = st.text(string.ascii_lowercase, min_size=1, max_size=6)
STR_MAP = st.dictionaries(KEYS, TEXT, max_size=2)
INT32 = st.integers(-(2**31), 2**31 - 1)
QUANTITY = st.one_of(st.sampled_from(["1", "500m", "2Gi", "100Mi", "0", "1.5"]), st.integers(0, 64))
TIME = st.builds(
    "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z".format,
    st.integers(2000, 2030),
    st.integers(1, 12),
    st.integers(1, 28),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
)
LABEL_VALUES = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=8)


def _container(name: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"name": st.just(name), "image": st.sampled_from(["rayproject/ray:2.52.0", "busybox"])},
        optional={
            "env": st.lists(
                st.fixed_dictionaries({"name": st.sampled_from(["A", "B"]), "value": TEXT}),
                max_size=1,
            ),
            "args": st.lists(TEXT, max_size=2),
        },
    )


POD_TEMPLATE = st.fixed_dictionaries(
    {
        "spec": st.fixed_dictionaries(
            {"containers": st.lists(_container("ray"), min_size=1, max_size=1)},
            optional={"restartPolicy": st.sampled_from(["Never", "Always"])},
        )
    },
    optional={
        "metadata": st.fixed_dictionaries(
            {}, optional={"labels": st.dictionaries(KEYS, LABEL_VALUES, max_size=2)}
        )
    },
)
SERVICE = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.fixed_dictionaries({}, optional={"annotations": STR_MAP}),
        "spec": st.fixed_dictionaries(
            {"ports": st.just([{"name": "serve", "port": 8000, "protocol": "TCP"}])}
        ),
    },
)
CORE: dict[str, st.SearchStrategy[Any]] = {
    "io.k8s.api.core.v1.PodTemplateSpec": POD_TEMPLATE,
    "io.k8s.api.core.v1.Service": SERVICE,
    "io.k8s.api.core.v1.EnvVar": st.fixed_dictionaries(
        {"name": KEYS.map(str.upper), "value": TEXT}
    ),
    "io.k8s.api.core.v1.EnvFromSource": st.just({"configMapRef": {"name": "settings"}}),
    "io.k8s.api.core.v1.EnvVarSource": st.just(
        {"secretKeyRef": {"name": "redis", "key": "password"}}
    ),
    "io.k8s.api.core.v1.VolumeMount": st.fixed_dictionaries(
        {"name": NAME, "mountPath": st.just("/data")}
    ),
    "io.k8s.api.core.v1.ResourceRequirements": st.fixed_dictionaries(
        {}, optional={"limits": st.just({"cpu": "1"}), "requests": st.just({"memory": "1Gi"})}
    ),
    "io.k8s.api.core.v1.SecurityContext": st.fixed_dictionaries(
        {}, optional={"runAsNonRoot": st.booleans(), "privileged": st.booleans()}
    ),
    "io.k8s.api.networking.v1.IngressTLS": st.just(
        {"hosts": ["ray.example.com"], "secretName": "tls"}
    ),
    "io.k8s.api.networking.v1.NetworkPolicyIngressRule": st.just(
        {"from": [{"podSelector": {"matchLabels": {"app": "client"}}}]}
    ),
    "io.k8s.api.networking.v1.NetworkPolicyEgressRule": st.just(
        {"to": [{"namespaceSelector": {}}]}
    ),
}
CONDITION = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["Ready", "HeadPodReady", "RayClusterProvisioned"]),
        "status": st.sampled_from(["True", "False", "Unknown"]),
        "reason": st.sampled_from(["Initializing", "HeadPodRunningAndReady"]),
        "message": TEXT,
        "lastTransitionTime": TIME,
    }
)


def _unique_by(key: str, items: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    return st.lists(items, max_size=2, unique_by=lambda d: d[key])


def _value(  # noqa: C901, PLR0912
    annotation: Any, markers: list[Any], owner: type[ApiModel], alias: str
) -> st.SearchStrategy[Any]:
    inner, more = _split(annotation)
    markers = [*more, *markers]
    for m in markers:
        if isinstance(m, Core):
            return CORE[m.name]
        if isinstance(m, QuantityMarker):
            return QUANTITY
        if isinstance(m, DateTime):
            return TIME
        if isinstance(m, ConditionMarker):
            return CONDITION
        if isinstance(m, Enum):
            return st.sampled_from(m.values)
    if any(isinstance(m, Rule) and "kuberay-operator" in m.rule for m in markers):
        return st.sampled_from(["ray.io/kuberay-operator", "kueue.x-k8s.io/multikueue"])
    if isinstance(inner, type) and issubclass(inner, ApiModel):
        return model_strategy(inner)
    origin = get_origin(inner)
    if inner is str:
        minimum = next((m.value for m in markers if isinstance(m, MinLength)), 0)
        if alias == "timeZone":
            return st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"])
        return TEXT if minimum == 0 else TEXT.filter(lambda s: len(s) >= minimum)
    if inner is bool:
        return st.booleans()
    if inner is float:
        return st.sampled_from([0.0, 0.5, 1.0, 2.0])
    if inner is int:
        low = next((m.value for m in markers if isinstance(m, Minimum)), -(2**31))
        if any(isinstance(m, Format) and m.format == "int64" for m in markers):
            return st.integers(max(low, 0), 2**40)
        return st.integers(low, 2**31 - 1)
    if origin is list:
        (item,) = get_args(inner)
        minimum = next((m.value for m in markers if isinstance(m, MinItems)), 0)
        if alias == "conditions":
            return _unique_by("type", CONDITION)
        if alias == "workerGroups":
            return _unique_by("groupName", model_strategy(raycluster.WorkerGroupNetworkPolicy))
        return st.lists(_value(item, [], owner, alias), min_size=minimum, max_size=2)
    if origin is dict:
        _, value = get_args(inner)
        return st.dictionaries(KEYS, _value(value, [], owner, alias), max_size=2)
    raise TypeError(f"no strategy for {owner.__name__}.{alias}: {inner!r}")


_CACHE: dict[type[ApiModel], st.SearchStrategy[dict[str, Any]]] = {}


def _plain_model(model: type[ApiModel]) -> st.SearchStrategy[dict[str, Any]]:
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, info in model.model_fields.items():
        alias = info.alias or name
        markers = _split(info.annotation)[1] + list(info.metadata)
        strategy = _value(info.annotation, list(info.metadata), model, alias)
        always = info.default is PydanticUndefined or any(
            isinstance(m, Default | Required) for m in markers
        )
        (required if always else optional)[alias] = strategy
    return st.fixed_dictionaries(required, optional=optional)


def model_strategy(model: type[ApiModel]) -> st.SearchStrategy[dict[str, Any]]:
    if model not in _CACHE:
        _CACHE[model] = st.deferred(lambda: _special(model))
    return _CACHE[model]


def _special(model: type[ApiModel]) -> st.SearchStrategy[dict[str, Any]]:
    if model is rayjob.DeletionCondition:
        ttl = st.integers(0, 600)
        return st.one_of(
            st.fixed_dictionaries(
                {"jobStatus": st.sampled_from(["SUCCEEDED", "FAILED"]), "ttlSeconds": ttl}
            ),
            st.fixed_dictionaries({"jobDeploymentStatus": st.just("Failed"), "ttlSeconds": ttl}),
        )
    if model is rayjob.DeletionStrategy:
        policy = model_strategy(rayjob.DeletionPolicy)
        rules = st.lists(model_strategy(rayjob.DeletionRule), min_size=1, max_size=2)
        return st.one_of(
            st.fixed_dictionaries({"onSuccess": policy, "onFailure": policy}),
            st.fixed_dictionaries({"deletionRules": rules}),
        )
    if model is rayservice.ClusterUpgradeOptions:
        return st.fixed_dictionaries(
            {
                "maxSurgePercent": st.integers(0, 100),
                "stepSizePercent": st.integers(0, 100),
                "intervalSeconds": st.integers(1, 60),
                "gatewayClassName": NAME,
            }
        )
    if model is RayClusterSpec:
        # Keep generated clusters small: worker groups with unique names.
        return _plain_model(model).map(_unique_groups)
    return _plain_model(model)


def _unique_groups(spec: dict[str, Any]) -> dict[str, Any]:
    groups = spec.get("workerGroupSpecs")
    if groups:
        for i, group in enumerate(groups):
            group["groupName"] = f"{group['groupName']}-{i}"
    return spec


def specs(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    return {
        "RayCluster": model_strategy(RayClusterSpec),
        "RayJob": model_strategy(RayJobSpec),
        "RayService": model_strategy(RayServiceSpec),
        "RayCronJob": model_strategy(RayCronJobSpec).map(_cron_schedule),
    }[kind]


def _cron_schedule(spec: dict[str, Any]) -> dict[str, Any]:
    spec["schedule"] = "*/5 * * * *"
    return spec


def statuses(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    return {
        "RayCluster": model_strategy(RayClusterStatus),
        "RayJob": model_strategy(RayJobStatus),
    }[kind]


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    TEXT,
    st.floats(allow_nan=False, allow_infinity=False),
)
JSON = st.recursive(
    JSON_LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=10,
)


def mutate(value: Any, data: st.DataObject) -> Any:
    """Replace one random node of a JSON value by arbitrary JSON (probably invalid)."""
    if isinstance(value, dict) and value and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(value)))
        return {**value, key: mutate(value[key], data)}
    if isinstance(value, list) and value and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(value) - 1))
        return [*value[:i], mutate(value[i], data), *value[i + 1 :]]
    return data.draw(JSON)


__all__ = ["mutate", "specs", "statuses"]
