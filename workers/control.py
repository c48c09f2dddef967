"""Remote control: `celery -A chatsite control drain` and `celery -A chatsite inspect engine_stats`."""
import threading

from celery.worker.control import control_command, inspect_command


@inspect_command()
def engine_stats(state):
    """This worker's engine figures (the same as its heartbeat)."""
    from workers import runtime

    rt = runtime.current()
    if rt is None:
        return {"engine": None}
    return {"worker": rt.worker_name, **rt.heartbeat.figures(), "active_run_ids": [r.run_id for r in rt.writer.active()]}


@control_command(args=[("deadline", float)], signature="[deadline_seconds=30]")
def drain(state, deadline=30.0):
    """Stop taking work; let in-flight runs finish until the deadline, then hand the
    rest back to the queue, where another worker continues them from their streams.
    The engine stays loaded; stop the process when `engine_stats` shows no runs."""
    from workers import runtime

    rt = runtime.current()
    if rt is None:
        return {"error": "this worker has no engine"}
    consumer = state.consumer
    for queue in list(consumer.task_consumer.queues):
        consumer.cancel_task_queue(queue.name)
    threading.Thread(target=runtime.drain, args=(float(deadline),), name="drain", daemon=True).start()
    return {"ok": f"draining {len(rt.writer.active())} run(s), deadline {deadline:.0f} s"}
