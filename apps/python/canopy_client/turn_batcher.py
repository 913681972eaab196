"""One batch request for the single-sequence queries one turn of an event loop makes.

genlm-control's SMC steps every particle at once (``asyncio.gather``), so each step
asks ``next_token_logprobs`` once per particle within one turn of the caller's loop.
Sent one by one, that is a thread hop and an HTTP request per particle; gathered until
the turn ends (``loop.call_soon`` runs after every callback already due), it is one
of each per step, and the server answers the batch as it would the single queries.

Every query still gets exactly its own answer: when the server refuses the batch's
content (``CanopyRequestError``: an empty sequence, an id outside the vocabulary),
each query is sent again alone, so only the bad one fails, with its own error. Other
failures (the connection, a timeout) reach every query of the batch. A cancelled
query is dropped from its batch's answer; the request itself is cancelled once every
query in it is.

Thread contract: ``submit`` runs on the caller's event loop; each loop has its own
pending batch, so many loops (threads) may submit at once.
"""

import asyncio
import threading

from .errors import CanopyRequestError


class TurnBatcher:
    """Gathers ``submit``ted sequences per event-loop turn into ``score_batch`` calls.

    Args:
        score_batch: ``async (sequences) -> rows`` (one row per sequence, in order).
        score_one: ``async (sequence) -> row``, for the retry of a refused batch.
    """

    def __init__(self, score_batch, score_one):
        self._score_batch = score_batch
        self._score_one = score_one
        self._lock = threading.Lock()
        self._pending = {}  # loop -> [(sequence, future)], until the end of its turn

    async def submit(self, sequence):
        """The row for ``sequence``, asked with the rest of this turn's queries."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        with self._lock:
            batch = self._pending.get(loop)
            if batch is None:
                batch = self._pending[loop] = []
                loop.call_soon(self._flush, loop)
            batch.append((sequence, waiter))
        return await waiter

    def _flush(self, loop):
        with self._lock:
            batch = self._pending.pop(loop)
        task = loop.create_task(self._answer(batch))

        def cancel_when_nobody_waits(_):
            if not task.done() and all(waiter.cancelled() for _, waiter in batch):
                task.cancel()

        for _, waiter in batch:
            waiter.add_done_callback(cancel_when_nobody_waits)

    async def _answer(self, batch):
        try:
            if len(batch) == 1:
                rows = [await self._score_one(batch[0][0])]
            else:
                rows = await self._score_batch([sequence for sequence, _ in batch])
        except CanopyRequestError as error:
            if len(batch) == 1:
                _fail(batch, error)
            else:  # one query's fault: alone, each gets its own answer
                await asyncio.gather(*(self._answer([query]) for query in batch))
            return
        except asyncio.CancelledError:
            for _, waiter in batch:
                waiter.cancel()
            raise
        except Exception as error:
            _fail(batch, error)
            return
        for (_, waiter), row in zip(batch, rows):
            if not waiter.done():
                waiter.set_result(row)


def _fail(batch, error):
    for _, waiter in batch:
        if not waiter.done():
            waiter.set_exception(error)
