"""A stop told to this worker as it is asked (chatsite.runs.stream.log.cancel_ask publishes
the run id): the run is aborted at once, and vLLM hands its last output within the abort,
so its end is written at once (workers.stream_writer). The stream writer also reads every
ask with its next append, so a push that is lost (Redis restarting, this thread
reconnecting) only costs that wait: without the push, a stop waits for the run's next
append, most of a coalescing window (bench.steer --stages)."""
import logging
import threading

from chatsite import redis_keys
from chatsite.redis_client import database, get_redis

log = logging.getLogger(__name__)

RECONNECT_SECONDS = 1.0


class CancelWatch:
    def __init__(self, on_cancel):
        self._on_cancel = on_cancel  # called with a run id, on this watch's thread
        self._stop = threading.Event()
        self.listening = threading.Event()  # set once Redis confirmed the subscription (a later ask reaches it)
        self._thread = threading.Thread(target=self._loop, name="cancel-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * RECONNECT_SECONDS)

    def _loop(self) -> None:
        while not self._stop.is_set():
            pubsub = None
            try:
                r = get_redis()
                pubsub = r.pubsub()
                pubsub.subscribe(redis_keys.cancels_channel(database(r)))
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=RECONNECT_SECONDS)
                    if message is None:
                        continue
                    if message["type"] == "subscribe":
                        self.listening.set()
                    elif message["type"] == "message" and message["data"].isdigit():  # a run id; nothing else is ours
                        self._on_cancel(int(message["data"]))
            except Exception as exc:  # Redis away: the appends still read every ask
                self.listening.clear()
                log.warning("cancel watch: %s; subscribing again in %.0f s", exc, RECONNECT_SECONDS)
                self._stop.wait(RECONNECT_SECONDS)
            finally:
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:
                        pass
