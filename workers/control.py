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


@control_command(args=[("mode", str), ("deadline", float)], signature="[mode=handoff] [deadline_seconds=30]")
def drain(state, mode="handoff", deadline=30.0):
    """Stop taking work. `handoff` (the default): hand every run in flight at once to
    another worker of the pool, which continues it from its stream; `finish`: let the
    runs finish until the deadline, then hand the rest over (workers.drain). The engine
    stays loaded; stop the process when `engine_stats` shows no runs."""
    from workers import drain as draining, runtime

    rt = runtime.current()
    if rt is None:
        return {"error": "this worker has no engine"}
    try:
        draining.check_mode(mode)
    except ValueError as exc:
        return {"error": str(exc)}
    consumer = state.consumer
    for queue in list(consumer.task_consumer.queues):
        consumer.cancel_task_queue(queue.name)
    in_flight = len(rt.writer.active())  # counted before the drain's thread hands them back (it may be quick)
    threading.Thread(target=draining.drain, args=(rt,), kwargs={"mode": mode, "deadline_seconds": float(deadline)},
                     name="drain", daemon=True).start()
    what = "handing them over now" if mode == draining.HANDOFF else f"deadline {deadline:.0f} s"
    return {"ok": f"draining {in_flight} run(s), {what}"}
