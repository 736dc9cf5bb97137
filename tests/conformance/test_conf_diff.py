"""The normalisation and diff of the differential suite (pure; no operators needed)."""

from __future__ import annotations

from conf_diff import diff, generic_name, normalize


def test_identities_namespace_suffixes_and_allocations_are_normalised() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "c-head-ab3c9",
            "namespace": "ns-go",
            "uid": "0b7c2f9e-1d2a-4c3b-9e8f-0123456789ab",
            "resourceVersion": "42",
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "ownerReferences": [{"kind": "RayCluster", "name": "c", "uid": "x"}],
            "annotations": {"ray.io/kuberay-version": "v1.6.1"},
        },
        "spec": {
            "nodeName": "kwok-1",
            "containers": [{"name": "ray-head", "resources": {}, "env": []}],
            "volumes": [{"name": "kube-api-access-q8x2z"}],
        },
        "status": {"phase": "Running", "podIP": "10.0.0.7"},
    }
    out = normalize(pod, "ns-go", ["c-head-ab3c9"])
    assert out == {
        "kind": "Pod",
        "metadata": {
            "name": "c-head-<rand>",
            "namespace": "<ns>",
            "ownerReferences": [{"kind": "RayCluster", "name": "c"}],
            "annotations": {"ray.io/kuberay-version": "<kuberay-version>"},
        },
        "spec": {
            "containers": [{"name": "ray-head"}],
            "volumes": [{"name": "kube-api-access-<rand>"}],
        },
        "status": {"phase": "Running"},
    }
    svc = {"kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"nodePort": 31000}]}}
    assert normalize(svc, "x", [])["spec"]["ports"] == [{"nodePort": "<allocated>"}]
    assert generic_name("abc") == "abc"


def test_diff_names_paths_and_matches_named_lists_by_name() -> None:
    ours = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], "x": 1}
    theirs = {"env": [{"name": "B", "value": "3"}], "y": False}
    assert diff(ours, theirs) == [
        'env.A: only ours {"name": "A", "value": "1"}',
        'env.B.value: ours "2", upstream "3" (from 0)',
        "x: only ours 1",
        "y: only upstream false",
    ]
    assert diff([1, 2], [1, 2]) == []
    long_a = "x" * 50 + "ours-tail"
    long_b = "x" * 50 + "theirs-tail"
    assert diff(long_a, long_b) == [
        ': ours "xxxxxxxxxxxxxxxxxxxxours-tail", '
        'upstream "xxxxxxxxxxxxxxxxxxxxtheirs-tail" (from 30)'
    ]
