"""The admission handler: upstream's webhook rules, AdmissionReview shapes, strict mode."""

from __future__ import annotations

from typing import Any

from kuberay.api import webhook
from kuberay.api.features import FeatureGates


def request(obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "abc-123",
            "kind": {"group": "ray.io", "version": "v1", "kind": obj["kind"]},
            "operation": operation,
            "object": obj,
        },
    }


def cluster(name: str = "demo", groups: tuple[str, ...] = ("a",)) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "ray"}]}}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "headGroupSpec": {"template": template},
            "workerGroupSpecs": [
                {"groupName": g, "minReplicas": 0, "maxReplicas": 1, "template": template}
                for g in groups
            ],
        },
    }


def test_valid_object_is_allowed() -> None:
    answer = webhook.review(request(cluster()))
    assert answer == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "abc-123", "allowed": True},
    }


def test_bad_name_is_rejected_like_apierrors_new_invalid() -> None:
    answer = webhook.review(request(cluster(name="a" * 54)))
    response = answer["response"]
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 422
    assert status["reason"] == "Invalid"
    assert status["message"] == (
        f'RayCluster.ray.io "{"a" * 54}" is invalid: metadata.name: Invalid value: '
        f'"{"a" * 54}": RayCluster name should be no more than 53 characters'
    )
    assert status["details"]["causes"][0]["field"] == "metadata.name"


def test_duplicate_worker_groups_are_rejected() -> None:
    status = webhook.review(request(cluster(groups=("a", "b", "a"))))["response"]["status"]
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "a": worker group names must be unique',
            "field": "spec.workerGroupSpecs[2]",
        }
    ]


def test_job_and_service_names() -> None:
    job = {"kind": "RayJob", "metadata": {"name": "Bad"}, "spec": {}}
    status = webhook.review(request(job))["response"]["status"]
    assert (
        "The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label"
        in (status["message"])
    )
    svc = {"kind": "RayService", "metadata": {"name": "s" * 48}, "spec": {}}
    assert webhook.review(request(svc))["response"]["allowed"] is False


def test_other_operations_and_kinds_pass() -> None:
    assert webhook.review(request(cluster(name="BAD"), "DELETE"))["response"]["allowed"]
    other = webhook.review(request({"kind": "Pod", "metadata": {"name": "x"}}))
    assert other["response"]["allowed"] is True
    assert webhook.review({})["response"]["allowed"] is True


def test_strict_mode_runs_controller_validation() -> None:
    obj = cluster()
    obj["spec"]["workerGroupSpecs"][0]["minReplicas"] = -1
    assert webhook.review(request(obj))["response"]["allowed"] is True
    strict = webhook.review(request(obj), strict=True, gates=FeatureGates())["response"]
    assert strict["allowed"] is False
    assert strict["status"]["message"].endswith("worker group a has negative minReplicas -1")


def test_handlers_and_configuration() -> None:
    handlers = webhook.handlers()
    assert sorted(handlers) == [
        "/validate-ray-io-v1-raycluster",
        "/validate-ray-io-v1-rayjob",
        "/validate-ray-io-v1-rayservice",
    ]
    config = webhook.webhook_configuration("kuberay", b"CA", url="https://127.0.0.1:9443/")
    hooks = config["webhooks"]
    assert [h["clientConfig"]["url"] for h in hooks] == [
        f"https://127.0.0.1:9443{p}" for p in webhook.PATHS
    ]
    assert all(h["failurePolicy"] == "Fail" for h in hooks)
    by_service = webhook.webhook_configuration(
        "kuberay", b"CA", service={"name": "kuberay-webhook", "namespace": "ray-system"}
    )
    assert by_service["webhooks"][0]["clientConfig"]["service"]["path"] == (
        "/validate-ray-io-v1-raycluster"
    )
