"""A round service with the in-process executor (virtual jobs at 200 steps/s), as its own
process: what the SIGKILL/restart loop kills. Usage: inproc_serve.py STATE PORT."""

import signal
import sys
import threading
import time

from builders import cluster

from gpumosaic.run.serve import ServeDescription, Service
from gpumosaic.runtime.executors.contract import InProcessExecutor

config = ServeDescription(state=sys.argv[1], port=int(sys.argv[2]), round_s=0.5, grace_s=0.2)
service = Service(
    config,
    cluster("v100:2"),
    executor_factory=lambda table: InProcessExecutor(table, time.time, lambda j, m: 200.0),
)
service.start()
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
print(service.url, flush=True)
stop.wait()
service.stop()
