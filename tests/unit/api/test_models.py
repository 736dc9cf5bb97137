"""Models: JSON names, defaults and lossless round trips (hypothesis-generated objects)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuberay.api import validation
from kuberay.api.features import FeatureGates
from kuberay.api.raycluster import RayCluster, RayClusterSpec, RayClusterStatus, WorkerGroupSpec
from kuberay.api.raycronjob import RayCronJobSpec
from kuberay.api.rayjob import RayJobSpec, RayJobStatus
from kuberay.api.rayservice import RayServiceSpec
from kuberay.api.schema import ApiModel

from .strategies import mutate, specs, statuses

SPEC_MODELS: dict[str, type[ApiModel]] = {
    "RayCluster": RayClusterSpec,
    "RayJob": RayJobSpec,
    "RayService": RayServiceSpec,
    "RayCronJob": RayCronJobSpec,
}
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_json_names_follow_upstream() -> None:
    cluster = RayCluster.model_validate(
        {
            "spec": {
                "headGroupSpec": {"template": {}, "rayStartParams": {"a": "b"}},
                "authOptions": {"enableK8sTokenAuth": True},
            },
            "status": {"desiredCPU": "2", "head": {"podIP": "1.2.3.4", "serviceIP": "5.6.7.8"}},
        }
    )
    assert cluster.spec is not None
    assert cluster.spec.head_group_spec.ray_start_params == {"a": "b"}
    assert cluster.spec.auth_options is not None
    assert cluster.spec.auth_options.enable_k8s_token_auth is True
    assert cluster.to_dict()["status"] == {
        "desiredCPU": "2",
        "head": {"podIP": "1.2.3.4", "serviceIP": "5.6.7.8"},
    }
    job = RayJobSpec.model_validate({"runtimeEnvYAML": "a: b", "jobId": "x"})
    assert job.runtime_env_yaml == "a: b"
    assert RayJobStatus.model_validate({"dashboardURL": "u"}).dashboard_url == "u"
    assert (
        RayServiceSpec.model_validate(
            {"serveConfigV2": "s", "rayClusterConfig": {"headGroupSpec": {"template": {}}}}
        ).serve_config_v2
        == "s"
    )


def test_crd_defaults_are_model_defaults_but_not_serialised_when_unset() -> None:
    group = WorkerGroupSpec.model_validate({"groupName": "g", "template": {}})
    assert (group.replicas, group.min_replicas, group.max_replicas) == (0, 0, 2147483647)
    assert (group.num_of_hosts, group.priority) == (1, 0)
    assert group.to_dict() == {"groupName": "g", "template": {}}
    spec = RayJobSpec()
    assert (spec.submission_mode, spec.backoff_limit, spec.ttl_seconds_after_finished) == (
        "K8sJobMode",
        0,
        0,
    )


def test_unknown_fields_are_dropped_like_the_apiserver_prunes_them() -> None:
    spec = RayClusterSpec.model_validate(
        {"headGroupSpec": {"template": {"x": 1}, "bogus": 1}, "bogus": {"a": 1}}
    )
    # Core objects are opaque dicts (pruned by the apiserver's schema, not by the model).
    assert spec.to_dict() == {"headGroupSpec": {"template": {"x": 1}}}


@pytest.mark.parametrize("kind", sorted(SPEC_MODELS))
@FAST
@given(data=st.data())
def test_valid_specs_round_trip_unchanged(kind: str, data: st.DataObject) -> None:
    spec = data.draw(specs(kind))
    assert SPEC_MODELS[kind].model_validate(spec).to_dict() == spec


@pytest.mark.parametrize(
    ("kind", "model"), [("RayCluster", RayClusterStatus), ("RayJob", RayJobStatus)]
)
@FAST
@given(data=st.data())
def test_valid_statuses_round_trip_unchanged(kind: str, model: Any, data: st.DataObject) -> None:
    status = data.draw(statuses(kind))
    assert model.model_validate(status).to_dict() == status


@pytest.mark.parametrize("kind", sorted(SPEC_MODELS))
@FAST
@given(data=st.data(), all_gates=st.booleans())
def test_validation_never_raises(kind: str, data: st.DataObject, all_gates: bool) -> None:
    spec = data.draw(specs(kind))
    gates = FeatureGates.with_all(all_gates)
    obj = {"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": "x"}, "spec": spec}
    result = validation.validate(obj, gates)
    assert result is None or isinstance(result, str)
    broken = mutate(obj, data)
    if isinstance(broken, dict):
        broken["kind"] = kind
        result = validation.validate(broken, gates)
        assert result is None or (isinstance(result, str) and result)


@FAST
@given(junk=st.from_type(object).filter(lambda x: not isinstance(x, dict)))
def test_non_objects_are_rejected_with_a_message(junk: object) -> None:
    for kind in SPEC_MODELS:
        result = validation.VALIDATORS[kind](junk, FeatureGates())  # type: ignore[arg-type]
        assert isinstance(result, str)


def _break(kind: str, spec: dict[str, Any]) -> None:
    """Make a schema-valid spec violate one controller-side rule."""
    if kind == "RayCluster":
        spec["headGroupSpec"]["template"]["spec"]["containers"] = []
    elif kind == "RayJob":
        spec["activeDeadlineSeconds"] = 0
    elif kind == "RayService":
        spec["rayClusterDeletionDelaySeconds"] = -1
    else:
        spec["schedule"] = "not a schedule"


@pytest.mark.parametrize("kind", sorted(SPEC_MODELS))
@FAST
@given(data=st.data())
def test_invalid_specs_give_a_message(kind: str, data: st.DataObject) -> None:
    spec = data.draw(specs(kind))
    _break(kind, spec)
    obj = {"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": "x"}, "spec": spec}
    result = validation.validate(obj, FeatureGates.with_all(True))
    assert isinstance(result, str)
    assert result
