"""``python -m kuberay.devenv.nodeagent CONFIG_JSON``: the process runtime's node agent."""

import sys

from kuberay.devenv.nodeagent.agent import main

sys.exit(main())
