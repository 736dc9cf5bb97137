"""Drop-in KubeRay operator in Python: RayCluster, RayJob, RayService and RayCronJob (ray.io/v1)."""

__version__ = "0.1.0"
