"""The client's own event loop, running on a daemon thread.

Every request of a client runs here, whoever asks: coroutines on any caller's loop
(``await``), plain threads and code already inside a running loop (the sync methods,
which cannot ``asyncio.run`` there). So one connection pool serves them all, and it
outlives the callers' loops: each ``asyncio.run`` makes and closes a loop, and
connections bound to a closed loop could be neither used nor closed.

The cost is one thread hop per request, small beside a network round trip.
"""

import asyncio
import threading


class LoopThread:
    """Runs coroutines on a private event loop; thread-safe."""

    def __init__(self, name):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine):
        """Run ``coroutine`` on the private loop and block until it ends.

        Safe inside a running event loop (that loop waits meanwhile, as any blocking
        call makes it). An interrupt (Ctrl-C) cancels the coroutine rather than
        leaving it running unobserved.
        """
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    async def run_async(self, coroutine):
        """Await ``coroutine`` run on the private loop from the caller's own loop.

        Cancelling the awaiting task cancels the coroutine too.
        """
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self._loop))

    def stop(self, final):
        """Cancel whatever still runs, run the coroutine ``final`` (cleanup), end the thread.

        Cancelled work reaches its callers as ``CancelledError`` instead of leaving
        them waiting forever on a loop that no longer runs.
        """
        async def shut_down():
            current = asyncio.current_task()
            others = [task for task in asyncio.all_tasks() if task is not current]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            await final

        try:
            self.run(shut_down())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
