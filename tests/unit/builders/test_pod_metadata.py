"""Pod naming, labels, annotations and owner references (upstream: common/pod.go)."""

from __future__ import annotations

import copy
from types import MappingProxyType

from kuberay.builders.hashing import spec_hash
from kuberay.builders.options import BuildOptions
from kuberay.builders.pod import build_head_pod, build_worker_pod

from . import samples

OPTS = BuildOptions()


def test_head_pod_generate_name_or_explicit_suffix() -> None:
    rc = samples.cluster("Demo")
    pod = build_head_pod(rc, OPTS)
    assert pod["metadata"]["generateName"] == "demo-head-"
    assert "name" not in pod["metadata"]
    named = build_head_pod(rc, OPTS, name_suffix="x7k2p")
    assert named["metadata"]["name"] == "demo-head-x7k2p"
    assert "generateName" not in named["metadata"]


def test_deterministic_head_pod_name() -> None:
    rc = samples.cluster("Demo")
    pod = build_head_pod(rc, BuildOptions(deterministic_head_pod_name=True), name_suffix="zzzzz")
    assert pod["metadata"]["name"] == "demo-head"


def test_worker_pod_name_and_template_name_dropped() -> None:
    rc = samples.cluster("demo")
    group = rc["spec"]["workerGroupSpecs"][0]
    group["template"]["metadata"] = {"name": "should-not-survive"}
    pod = build_worker_pod(rc, group, OPTS)
    assert pod["metadata"]["generateName"] == "demo-small-group-worker-"
    assert "name" not in pod["metadata"]
    named = build_worker_pod(rc, group, OPTS, name_suffix="abcde")
    assert named["metadata"]["name"] == "demo-small-group-worker-abcde"


def test_namespace_and_owner_reference() -> None:
    rc = samples.cluster()
    rc["spec"]["headGroupSpec"]["template"]["metadata"] = {"namespace": "elsewhere"}
    pod = build_head_pod(rc, OPTS)
    assert pod["metadata"]["namespace"] == "default"
    assert pod["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "name": "raycluster-kuberay",
            "uid": rc["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pod["apiVersion"] == "v1"
    assert pod["kind"] == "Pod"


def test_head_labels() -> None:
    pod = build_head_pod(samples.cluster("demo"), OPTS)
    assert pod["metadata"]["labels"] == {
        "ray.io/is-ray-node": "yes",
        "ray.io/cluster": "demo",
        "ray.io/node-type": "head",
        "ray.io/group": "headgroup",
        "ray.io/identifier": "demo-head",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }


def test_worker_labels_template_and_group_labels_merge_but_keys_protected() -> None:
    rc = samples.cluster("demo")
    group = rc["spec"]["workerGroupSpecs"][0]
    group["template"]["metadata"] = {
        "labels": {
            "team": "a",
            "tier": "template",
            "ray.io/cluster": "hijack",
            "ray.io/group": "hijack",
            "ray.io/node-type": "head",
            "app.kubernetes.io/name": "mine",
        }
    }
    group["labels"] = {"tier": "group", "ray.io/node-type": "nope"}
    labels = build_worker_pod(rc, group, OPTS)["metadata"]["labels"]
    assert labels["ray.io/cluster"] == "demo"
    assert labels["ray.io/group"] == "small-group"
    assert labels["ray.io/node-type"] == "worker"
    assert labels["ray.io/identifier"] == "demo-worker"
    assert labels["team"] == "a"
    assert labels["tier"] == "group"  # group labels win over template labels
    assert labels["app.kubernetes.io/name"] == "mine"  # overridable


def test_identifier_label_is_label_checked() -> None:
    rc = samples.cluster("x" * 60)
    labels = build_head_pod(rc, OPTS)["metadata"]["labels"]
    assert labels["ray.io/identifier"] == ("x" * 60 + "-head")[-63:]


def test_default_pod_labels_and_annotations_only_when_absent() -> None:
    rc = samples.cluster()
    rc["spec"]["headGroupSpec"]["template"]["metadata"] = {
        "labels": {"team": "user"},
        "annotations": {"note": "user"},
    }
    opts = BuildOptions(
        default_pod_labels=MappingProxyType({"team": "operator", "cost-center": "42"}),
        default_pod_annotations=MappingProxyType({"note": "operator", "extra": "yes"}),
    )
    meta = build_head_pod(rc, opts)["metadata"]
    assert meta["labels"]["team"] == "user"
    assert meta["labels"]["cost-center"] == "42"
    assert meta["annotations"]["note"] == "user"
    assert meta["annotations"]["extra"] == "yes"


def test_serve_labels_for_rayservice_clusters() -> None:
    rc = samples.cluster()
    rc["metadata"]["labels"] = {
        "ray.io/originated-from-crd": "RayService",
        "ray.io/originated-from-cr-name": "svc",
    }
    head = build_head_pod(rc, OPTS)
    worker = build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], OPTS)
    assert head["metadata"]["labels"]["ray.io/serve"] == "false"
    assert worker["metadata"]["labels"]["ray.io/serve"] == "true"
    plain = build_head_pod(samples.cluster(), OPTS)
    assert "ray.io/serve" not in plain["metadata"]["labels"]
    # Without the label, the creator comes from the options.
    via_options = build_head_pod(samples.cluster(), BuildOptions(creator_crd="RayService"))
    assert via_options["metadata"]["labels"]["ray.io/serve"] == "false"


def test_multi_host_labels() -> None:
    rc = samples.cluster()
    single = rc["spec"]["workerGroupSpecs"][0]
    labels = build_worker_pod(rc, single, OPTS, replica_index=3)["metadata"]["labels"]
    assert labels["ray.io/worker-group-replica-index"] == "3"
    assert "ray.io/worker-group-replica-name" not in labels
    multi = samples.worker_group("tpu", numOfHosts=4)
    labels = build_worker_pod(
        rc, multi, OPTS, replica_index=1, replica_name="tpu-abcde", host_index=2
    )["metadata"]["labels"]
    assert labels["ray.io/worker-group-replica-index"] == "1"
    assert labels["ray.io/worker-group-replica-name"] == "tpu-abcde"
    assert labels["ray.io/replica-host-index"] == "2"
    off = BuildOptions(multi_host_indexing=False)
    labels = build_worker_pod(rc, multi, off, replica_name="tpu-abcde")["metadata"]["labels"]
    assert not any(k.startswith("ray.io/worker-group-replica") for k in labels)


def test_head_annotations_hash_version_ft() -> None:
    rc = samples.cluster()
    annotations = build_head_pod(rc, OPTS)["metadata"]["annotations"]
    assert annotations["ray.io/upgrade-strategy-recreate-hash"] == spec_hash(rc["spec"])
    assert annotations["ray.io/kuberay-version"] == "v1.7.0"
    assert annotations["ray.io/ft-enabled"] == "false"
    worker = build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], OPTS)
    assert "ray.io/ft-enabled" not in worker["metadata"]["annotations"]
    assert "ray.io/kuberay-version" not in worker["metadata"]["annotations"]


def test_overwrite_container_cmd_annotation_is_copied() -> None:
    rc = samples.cluster()
    rc["metadata"]["annotations"] = {"ray.io/overwrite-container-cmd": "TRUE"}
    for pod in (
        build_head_pod(rc, OPTS),
        build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], OPTS),
    ):
        assert pod["metadata"]["annotations"]["ray.io/overwrite-container-cmd"] == "true"


def test_builders_do_not_mutate_input() -> None:
    rc = samples.autoscaling_cluster("v2")
    rc["spec"]["gcsFaultToleranceOptions"] = {
        "redisAddress": "redis:6379",
        "redisPassword": {"value": "pw"},
    }
    rc["spec"]["authOptions"] = {"mode": "token"}
    before = copy.deepcopy(rc)
    build_head_pod(rc, OPTS)
    build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], OPTS)
    assert rc == before
