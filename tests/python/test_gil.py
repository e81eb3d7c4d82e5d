"""The GIL is released while sessions start and inferences run.

A Python thread counts as fast as it can. We measure its rate while the main thread sleeps (the
idle rate) and while the main thread starts a fleet and runs inferences in C++. Were the GIL held
during that C++ work, the counter would stall for all of it (it can only run in the moments the
main thread is back in Python), far below the threshold; released, it keeps counting.
"""
import threading
import time

import numpy as np

import ortfleet

THRESHOLD = 0.25  # of the idle rate


class Counter(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.count = 0
        self.stop = False

    def run(self):
        while not self.stop:
            self.count += 1


def rate_during(counter, work):
    start_count, start = counter.count, time.perf_counter()
    work()
    return (counter.count - start_count) / (time.perf_counter() - start)


def test_python_threads_keep_running_during_start_and_run(models):
    counter = Counter()
    counter.start()
    try:
        idle = rate_during(counter, lambda: time.sleep(0.5))
        x = {"input": np.random.default_rng(0).uniform(-1, 1, (1, 3, 64, 64)).astype(np.float32)}
        # One thread of ONNX Runtime work, so that a core stays free for the counter on small machines.
        config = {"session": {"intra_op_threads": 1, "thread_spinning": False}}

        def start_and_run():
            with ortfleet.Fleet(models["resnet18"], devices="cpu", strategy="sequential", config=config) as fleet:
                fleet.start()
                fleet.wait()
                for _ in range(10):
                    fleet.run("cpu", x)

        busy_start = time.perf_counter()
        busy = rate_during(counter, start_and_run)
        busy_seconds = time.perf_counter() - busy_start
    finally:
        counter.stop = True
        counter.join()
    ratio = busy / idle
    print(f"counter: {idle:,.0f}/s idle, {busy:,.0f}/s during {busy_seconds:.2f} s of start + run: ratio {ratio:.2f}")
    assert busy_seconds > 0.2, "the C++ work was too short to tell anything"
    assert ratio >= THRESHOLD
