"""The gate (chatsite/edge/gate.py): at most N request threads run a hop at once, in the
order they asked; a thread that gives its place back hands it to the next in line."""
import threading
import time

from chatsite.edge.gate import Gate


def _in_threads(targets, gap: float = 0.02) -> None:
    threads = []
    for target in targets:
        threads.append(threading.Thread(target=target))
        threads[-1].start()
        time.sleep(gap)  # they arrive in this order
    for t in threads:
        t.join(10)


def test_at_most_the_limit_run_at_once_in_the_order_they_came():
    gate, lock, running, most, order = Gate(2), threading.Lock(), [0], [0], []

    def hop(i):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            order.append(i)
        time.sleep(0.1)
        with lock:
            running[0] -= 1

    _in_threads([lambda i=i: gate.run(hop, i) for i in range(6)])
    assert most[0] == 2 and order == list(range(6))


def test_a_hop_that_raises_gives_its_place_back():
    gate, done = Gate(1), []

    def boom():
        raise RuntimeError("the view failed")

    try:
        gate.run(boom)
    except RuntimeError:
        pass
    worker = threading.Thread(target=lambda: done.append(gate.run(lambda: "ran")))
    worker.start()
    worker.join(5)
    assert done == ["ran"]
