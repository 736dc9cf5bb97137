from __future__ import annotations

import copy
import re

from kuberay.builders.hashing import spec_hash

from . import samples


def test_hash_is_stable_base32hex() -> None:
    spec = samples.cluster()["spec"]
    first = spec_hash(spec)
    assert re.fullmatch(r"[0-9A-V]{32}", first)
    assert spec_hash(copy.deepcopy(spec)) == first
    # Key order of the input does not matter.
    assert spec_hash(dict(reversed(list(spec.items())))) == first


def test_hash_ignores_scaling_scheduling_and_strategy_fields() -> None:
    spec = samples.cluster()["spec"]
    base = spec_hash(spec)
    changed = copy.deepcopy(spec)
    group = changed["workerGroupSpecs"][0]
    group.update(replicas=4, minReplicas=0, maxReplicas=9)
    group["scaleStrategy"] = {"workersToDelete": ["pod-a"]}
    for pod_spec in (
        changed["headGroupSpec"]["template"]["spec"],
        group["template"]["spec"],
    ):
        pod_spec["tolerations"] = [{"key": "kueue", "operator": "Exists"}]
        pod_spec["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    changed["upgradeStrategy"] = {"type": "Recreate"}
    assert spec_hash(changed) == base


def test_hash_treats_empty_and_absent_alike() -> None:
    spec = samples.cluster()["spec"]
    without = copy.deepcopy(spec)
    del without["headGroupSpec"]["rayStartParams"]
    del without["workerGroupSpecs"][0]["scaleStrategy"]
    assert spec_hash(without) == spec_hash(spec)


def test_hash_changes_with_real_spec_changes() -> None:
    spec = samples.cluster()["spec"]
    base = spec_hash(spec)
    image = copy.deepcopy(spec)
    image["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "ray:2.47.0"
    params = copy.deepcopy(spec)
    params["headGroupSpec"]["rayStartParams"] = {"num-cpus": "0"}
    added = copy.deepcopy(spec)
    added["workerGroupSpecs"].append(samples.worker_group("gpu"))
    assert len({base, spec_hash(image), spec_hash(params), spec_hash(added)}) == 4


def test_hash_does_not_mutate_input() -> None:
    spec = samples.cluster()["spec"]
    spec["upgradeStrategy"] = {"type": "Recreate"}
    before = copy.deepcopy(spec)
    spec_hash(spec)
    assert spec == before
