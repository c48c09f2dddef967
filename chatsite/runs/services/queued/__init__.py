"""Messages sent while a reply is being written: queued in the chat, started one at a
time, in order, through the one door when the reply in progress ends (completed,
stopped, failed or swept: run_finalize's `queue_waiting` calls queue_start_next), or sent
now (the reply in progress stops at its next token and this message runs next, after it).

A message is checked when queued as the door checks a turn (its Idempotency-Key, its
plan, the tenant's rate: counted then, once), and again, but for the rate, when its turn
comes: by then its sender may have lost access (the credential that queued it, kept on
the row, revoked), or its pool its workers. One its turn
found refused for good (a budget used up) stays in the queue's list, refused, with the
reason, until its owner retries or withdraws it; a refusal that passes within minutes (the
tenant's rate, a busy or restarting pool) leaves it waiting, the reason kept, until the
refusal's retry time (`not_before`).

The queue is rows in Postgres (chats.QueuedMessage): it survives a reload, a web
restart and a worker crash. A message starts under its chat's lock, in the transaction
that admits its run, so none starts twice; a queue whose advance was lost (a process
that died after its run ended) is started again by the sweep (queues_sweep).

One module a job: `add` (queueing a message), `edit` (editing, withdrawing, retrying one),
`send_now` (steering: the message admitted beside the reply it stops, whose text its worker
puts in its prompt once saved, workers.steered; else after the stop), `steering` (a run's end
leaves a steered message to the send-now request waiting for its stop), `advance` (starting
the next, the one sent now, and the sweep), `access` (whether its sender may still send it),
`rows` (what they share: reading and placing the rows)."""
