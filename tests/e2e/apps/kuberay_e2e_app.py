"""The Serve application the RayService end-to-end test deploys: answers with the greeting its
runtime environment carries, so a test can tell which config (and which cluster) served it."""

import os
import socket

from ray import serve


@serve.deployment(ray_actor_options={"num_cpus": 0.1})
class Hello:
    def __call__(self, request: object) -> str:
        return f"{os.environ.get('GREETING', 'none')} from {socket.gethostname()}"


# Ray types the decorator as returning the class; without the e2e extra, ray is Any to mypy.
app = Hello.bind()  # type: ignore[attr-defined, unused-ignore]
