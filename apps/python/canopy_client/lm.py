"""``CanopyLM``: genlm-backend's ``AsyncLM`` interface, answered by ``canopy serve``."""

import asyncio
import functools
import json
import os
import threading
from urllib.parse import urlsplit

import numpy as np

from . import api
from .arrays import array_converter
from .errors import CanopyProtocolError, server_error
from .http_connection import encode_request
from .loop_thread import LoopThread
from .local_server import LocalServer
from .pool import ConnectionPool
from .tokenizer import CanopyTokenizer
from .turn_batcher import TurnBatcher
from .vocab import genlm_byte_vocab, str_vocab
from .wire import decode_logprobs

try:  # genlm code may check isinstance(lm, AsyncLM): CanopyLM is one when genlm-backend imports
    from genlm.backend.llm import AsyncLM as _AsyncLM
except ImportError:
    _AsyncLM = object


class CanopyLM(_AsyncLM):
    """A language model served by ``canopy serve``, with genlm-backend's ``AsyncLM`` methods.

    Args:
        url: the server, ``http://HOST:PORT`` (a path prefix is kept, for proxies).
        auth_token: sent as ``Authorization: Bearer`` when the server needs one.
        max_connections: keep-alive connections open at most; more concurrent
            requests wait for one.
        array: "auto" (torch tensors when torch imports, else numpy), "numpy", "torch".
        timeout: seconds for one request, queueing for a connection included; None
            waits forever. A request past it raises ``asyncio.TimeoutError``.
        dtype: how rows travel, "float32" or "float16" (half the bytes, ~1e-3
            relative rounding); results are float32 either way.
        max_batch: sequences (or sampled prompts) per request; larger batches are split
            into requests sent concurrently (the server refuses more than its limit,
            1024 by default).
        coalesce: ``next_token_logprobs`` calls made in one turn of the caller's
            event loop (an SMC step's particles) go to the server as one batch
            request (``turn_batcher``), and so do ``next_byte_logprobs`` calls (per
            reduction); False sends each alone.
        cache_salt: a string of this client's own: its queries share cached rows and
            KV only with requests that give the same salt (and, on a server with
            several tokens, the same tenant), so no other client can tell from timing
            what it asked (vLLM's ``cache_salt``). None shares the tenant's cache.

    It is a subclass of genlm-backend's ``AsyncLM`` when genlm-backend imports (the
    same methods either way). Bad input (an empty sequence, an id outside the
    vocabulary) raises ``CanopyRequestError``, a ``ValueError`` as genlm-backend's.

    Every request runs on the client's own event-loop thread (see ``loop_thread``), so
    the async methods work from any event loop and the sync ones from any thread,
    inside a running loop or not. genlm-control takes it where it takes an ``AsyncLM``:
    ``tokenizer`` (encode, decode, eos_token_id, bos_token_id), ``byte_vocab`` (bytes,
    control tokens as their names), ``str_vocab``, the log-prob, sampling and cache
    methods with genlm-backend's names and arguments. ``from_name`` starts a local
    ``canopy serve`` for a model and stops it on ``close``.
    """

    def __init__(self, url="http://127.0.0.1:8080", auth_token=None, max_connections=64,
                 array="auto", timeout=300.0, dtype="float32", max_batch=1024, coalesce=True,
                 cache_salt=None):
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"url must be http://HOST[:PORT], not {url!r}")
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        if dtype not in api.WIRE_DTYPES:
            raise ValueError(f"dtype must be one of {api.WIRE_DTYPES}, not {dtype!r}")
        self._to_array = array_converter(array)
        self._dtype = dtype
        self._cache_salt = api.check_cache_salt(cache_salt)
        self._lora = None  # the active LoRA adapter's name (set_lora)
        self._max_batch = max_batch
        self._timeout = timeout
        self._prefix = parts.path.rstrip("/")
        self._host = parts.netloc
        self._auth = {} if auth_token is None else {"Authorization": f"Bearer {auth_token}"}
        self._pool = ConnectionPool(parts.hostname, parts.port or 80, max_connections)
        self._io = LoopThread(name=f"canopy-client {parts.netloc}")
        self._turns = TurnBatcher(self._rows, self._row) if coalesce else None
        self._byte_turns = {reduce: TurnBatcher(functools.partial(self._byte_answers, reduce),
                                                functools.partial(self._byte_answer, reduce))
                            for reduce in api.BYTE_REDUCTIONS} if coalesce else None
        self._closed = False
        self._lazy_lock = threading.Lock()
        self._model_info = None
        self._byte_vocab = None
        self._special_tokens = None
        self._tokenizer = CanopyTokenizer(self)
        self._str_vocab = None
        self._server = None  # a LocalServer this client started (from_name)

    @classmethod
    def from_name(cls, model, canopy=None, server_args=(), **client_options):
        """A client of a ``canopy serve --model MODEL`` that it starts on a free
        loopback port and stops on ``close`` (genlm-backend's ``from_name``).

        Args:
            model: a model path Canopy reads (an HF directory with config.json,
                model.safetensors and tokenizer.json; a GGUF file; a llama2.c .bin).
            canopy: the ``canopy`` program; default $CANOPY_CLI, else ``canopy`` on PATH.
            server_args: more ``canopy serve`` flags (``("--kv_budget_bytes", "1e9")``).
            client_options: as for ``CanopyLM(...)``.
        """
        server = LocalServer("--model", str(model), *server_args, canopy=canopy).start()
        try:
            lm = cls(server.url, **client_options)
        except BaseException:
            server.stop()
            raise
        lm._server = server
        return lm

    # -- next-token log-probabilities ------------------------------------------------

    async def next_token_logprobs(self, token_ids):
        """Log-probabilities of the token after ``token_ids``: float32 ``[vocab]``.
        Calls made in one turn of the event loop share one request (``coalesce``)."""
        tokens = api.token_list(token_ids)
        row = await (self._turns.submit(tokens) if self._turns else self._row(tokens))
        return self._to_array(row)

    def next_token_logprobs_sync(self, token_ids):
        """``next_token_logprobs``, blocking."""
        rows = self._run(self._score([api.token_list(token_ids)], batch=False))
        return self._to_array(rows[0])

    async def batch_next_token_logprobs(self, token_ids_list):
        """One row per sequence: float32 ``[len(token_ids_list), vocab]``."""
        sequences = [api.token_list(token_ids) for token_ids in token_ids_list]
        return self._to_array(await self._rows(sequences))

    def batch_next_token_logprobs_sync(self, token_ids_list):
        """``batch_next_token_logprobs``, blocking."""
        sequences = [api.token_list(token_ids) for token_ids in token_ids_list]
        return self._to_array(self._run(self._score_batch(sequences)))

    async def prefix_logprobs(self, token_ids):
        """A row after every prefix, in one request: float32 ``[len(token_ids), vocab]``,
        row i the distribution after ``token_ids[:i + 1]`` (scoring a whole text)."""
        tokens = api.token_list(token_ids)
        return self._to_array(await self._run_async(
            self._score([tokens], batch=False, all_positions=True)))

    def next_token_logprobs_uncached(self, token_ids):
        """genlm-backend's uncached call, blocking. Canopy answers it on its usual path:
        a cached row is the row the model computes (within float rounding of a
        batched pass), so the result is the same."""
        return self.next_token_logprobs_sync(token_ids)

    def reset_async_queries(self):
        """genlm-backend drops its queued queries here; this client's wait at most
        until the end of their event-loop turn and are then sent, so there is nothing
        to drop."""

    # -- next-byte distributions -----------------------------------------------------

    async def next_byte_logprobs(self, token_ids, prefix=b"", reduce="sum"):
        """The distribution over the next byte after ``token_ids`` and ``prefix``, the
        bytes of a token being spelled (POST /v1/next_byte; docs/http-api.md has the
        contract): a dict with ``logprobs`` (float64 ``[256]``, -inf for no token),
        ``end_of_token``, ``eos`` (None after a non-empty prefix) and ``log_mass``.
        ``reduce`` is "sum" (a distribution) or "max" (the best token's log-prob).
        The server answers from the cached row and the masses beside it: 256 numbers
        on the wire, not a row. Calls made in one turn of the event loop share one
        request (``coalesce``)."""
        api.check_next_byte_question(prefix, reduce)
        if self._byte_turns:
            return await self._byte_turns[reduce].submit((token_ids, prefix))
        return await self._byte_answer(reduce, (token_ids, prefix))

    def next_byte_logprobs_sync(self, token_ids, prefix=b"", reduce="sum"):
        """``next_byte_logprobs``, blocking (from any thread, inside a running event loop
        too)."""
        return self._run(self._next_bytes([(token_ids, prefix)], False, reduce))[0]

    async def batch_next_byte_logprobs(self, questions, reduce="sum"):
        """``next_byte_logprobs`` for each (token_ids, prefix) pair, in one request
        (requests of at most ``max_batch`` pairs, sent concurrently)."""
        return await self._byte_answers(reduce, list(questions))

    # -- sampling --------------------------------------------------------------------

    async def sample(self, prompt_token_ids, max_tokens, eos_token_ids, temperature=1.0, seed=None):
        """Generated ids after the prompt (a drawn EOS ends them and is left out).

        Temperature 0 is greedy. The same seed gives the same ids; ``None`` a fresh one.
        """
        body = api.sample_body([api.token_list(prompt_token_ids)], False, max_tokens,
                               eos_token_ids, temperature, seed)
        answer = await self._run_async(
            self._post_json("/v1/sample", self._scoped(body)))
        return api.generated_ids(answer["tokens"], body["eos_token_ids"])

    async def batch_sample(self, prompt_token_ids_list, max_tokens, eos_token_ids,
                           temperature=1.0, seed=None):
        """``sample`` for each prompt in one request; prompt i draws from the stream
        ``(seed, i)``, so equal prompts give independent samples."""
        prompts = [api.token_list(prompt) for prompt in prompt_token_ids_list]
        body = api.sample_body(prompts, True, max_tokens, eos_token_ids, temperature, seed)
        return await self._run_async(self._sample_batch(self._scoped(body)))

    # -- LoRA adapters ---------------------------------------------------------------

    # Adapters are the server's, shared by its clients; which one a client's queries run
    # under is the client's own. The server keys its cache by adapter, so switching
    # needs no clearing (genlm-backend's set_lora clears its caches, and a stale one
    # was its bug).

    def add_new_lora(self, lora_path, lora_name="lora_1"):
        """Load the PEFT adapter in directory ``lora_path`` (on the server's machine) as
        ``lora_name`` (POST /v1/adapters; the server needs bearer tokens). It is not
        active until ``set_lora``. A name already loaded, or a directory that is no
        adapter of the model, raises ``CanopyRequestError`` (a ``ValueError``)."""
        self._run(self._post_json("/v1/adapters",
                                  {"name": lora_name, "path": os.fspath(lora_path)}))

    def set_lora(self, lora_path=None, lora_name="lora_1"):
        """Run this client's queries under the loaded adapter ``lora_name`` from now on
        (``lora_path`` is unused, as in genlm-backend). An adapter the server has not
        loaded raises ``ValueError``, as genlm-backend's."""
        if lora_name not in self.loaded_loras():
            raise ValueError(
                f"A LoRA adapter named '{lora_name}' has not been loaded yet. Please call "
                "add_new_lora() first to load and name your LoRA adapters.")
        self._lora = lora_name

    def clear_lora(self):
        """Run this client's queries under the base model from now on."""
        self._lora = None

    def loaded_loras(self):
        """The names of the adapters the server has loaded (from GET /v1/models)."""
        models = self._run(self._get_json("/v1/models"))["data"]
        return [m["id"] for m in models if "parent" in m]

    # -- caches ----------------------------------------------------------------------

    def clear_cache(self):
        """Drop the server's cached rows and KV: this client's tenant's, on a server
        with several tokens; else every client's."""
        self._run(self._post_json("/v1/cache/clear", {}))

    def clear_kv_cache(self):
        """Drop the server's cached KV (as ``clear_cache`` chooses), keeping rows."""
        self._run(self._post_json("/v1/cache/clear", {"kv_only": True}))

    def cache_kv(self, prompt_tokens):
        """Compute and keep the prompt's KV on the server; returns once it is cached."""
        body = {"tokens": api.token_list(prompt_tokens)}
        self._run(self._post_json("/v1/cache/kv", self._scoped(body)))

    # -- model and vocabulary --------------------------------------------------------

    @property
    def model_info(self):
        """``GET /v1/model``: name, architecture, vocab_size, context_length, dtype,
        devices, tokenizer (fetched once: the model is fixed while the server runs; the
        devices are those serving then)."""
        with self._lazy_lock:
            if self._model_info is None:
                self._model_info = self._run(self._get_json("/v1/model"))
            return self._model_info

    @property
    def vocab_size(self):
        return self.model_info["vocab_size"]

    @property
    def byte_vocab(self):
        """Each id's exact bytes as a ``Token`` (a ``bytes`` with ``token_id``); control
        tokens as the tokenizer names them (b"</s>"), as genlm-backend gives them
        (fetched once)."""
        vocab_size = self.vocab_size  # before the lock, which model_info takes too
        with self._lazy_lock:
            if self._byte_vocab is None:
                answer = self._run(self._get_json("/v1/vocab"))
                self._byte_vocab = genlm_byte_vocab(answer, vocab_size)
                self._special_tokens = {i: bytes(self._byte_vocab[i]).decode("utf-8", "replace")
                                        for i, entry in enumerate(answer["vocab"]) if entry is None}
            return self._byte_vocab

    @property
    def special_tokens(self):
        """The control tokens (ids that stand for no bytes): ``{id: name}``, the name as
        the tokenizer spells it ("</s>"), as in ``byte_vocab``."""
        _ = self.byte_vocab  # fetched with it
        return self._special_tokens

    @property
    def str_vocab(self):
        """Each id's text: its bytes as UTF-8, else its token string
        (``tokenizer.convert_ids_to_tokens``), as genlm-backend's ``decode_vocab``."""
        # Both read byte_vocab, which takes the lock: before it, not under it.
        vocab, strings = self.byte_vocab, self._tokenizer.token_strings()
        with self._lazy_lock:
            if self._str_vocab is None:
                self._str_vocab = str_vocab(vocab, strings)
            return self._str_vocab

    @property
    def tokenizer(self):
        """A Hugging Face-like tokenizer for genlm code (``CanopyTokenizer``)."""
        return self._tokenizer

    def tokenize(self, text):
        """The model tokenizer's ids for ``text``, with its special tokens."""
        return self._tokenize(text, True)

    def _tokenize(self, text, add_special_tokens):
        body = {"text": text, "add_special_tokens": bool(add_special_tokens)}
        return self._run(self._post_json("/v1/tokenize", body))["tokens"]

    def detokenize(self, token_ids):
        """The exact bytes ``token_ids`` stand for (not always valid UTF-8)."""
        answer = self._run(self._post_json("/v1/detokenize", {"tokens": api.token_list(token_ids)}))
        return bytes.fromhex(answer["hex"])

    # -- lifetime --------------------------------------------------------------------

    def close(self):
        """Close the connections and stop the client's thread (and the server that
        ``from_name`` started). Requests still in flight end with ``CancelledError``;
        later calls raise ``RuntimeError``."""
        if not self._closed:
            self._closed = True
            self._io.stop(self._pool.close())
            if self._server is not None:
                self._server.stop()

    async def aclose(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc_info):
        self.close()

    # -- running requests on the client's loop ---------------------------------------

    def _run(self, coroutine):
        self._check_open(coroutine)
        return self._io.run(coroutine)

    async def _run_async(self, coroutine):
        self._check_open(coroutine)
        return await self._io.run_async(coroutine)

    def _check_open(self, coroutine):
        if self._closed:
            coroutine.close()  # never started: close it rather than warn it was never awaited
            raise RuntimeError("this CanopyLM is closed")

    async def _row(self, tokens):
        """The row after ``tokens``, asked from the caller's loop."""
        return (await self._run_async(self._score([tokens], batch=False)))[0]

    async def _rows(self, sequences):
        """A row per sequence, asked from the caller's loop."""
        return await self._run_async(self._score_batch(sequences))

    async def _byte_answer(self, reduce, question):
        """The next-byte answer to one (token_ids, prefix), asked from the caller's loop."""
        return (await self._run_async(self._next_bytes([question], False, reduce)))[0]

    async def _byte_answers(self, reduce, questions):
        """Next-byte answers to (token_ids, prefix) pairs, asked from the caller's loop."""
        return await self._run_async(self._next_bytes(questions, True, reduce))

    def _scoped(self, body):
        """``body`` with this client's cache salt and active adapter."""
        return api.scoped(body, self._cache_salt, self._lora)

    # The coroutines below run on the client's loop.

    async def _next_bytes(self, questions, batch, reduce):
        """Answers in requests of at most ``max_batch`` questions, sent concurrently."""
        chunks = ([questions[i:i + self._max_batch]
                   for i in range(0, len(questions), self._max_batch)] if batch else [questions])
        answers = await asyncio.gather(*(
            self._post_json("/v1/next_byte",
                            self._scoped(api.next_byte_body(chunk, batch, reduce)))
            for chunk in chunks))
        return [api.next_byte_answer(result, self._to_array)
                for answer in answers for result in (answer["results"] if batch else [answer])]

    async def _score_batch(self, sequences):
        chunks = [sequences[i:i + self._max_batch]
                  for i in range(0, len(sequences), self._max_batch)] or [[]]
        parts = await asyncio.gather(*(self._score(chunk, batch=True) for chunk in chunks))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    async def _sample_batch(self, body):
        """``/v1/sample`` for ``body["batch"]`` in requests of at most ``max_batch``
        prompts, sent concurrently. The first request keeps ``body``'s seed; request k
        draws with a seed derived from it and k, so every prompt still has a stream of
        its own and the same seed and ``max_batch`` give the same samples."""
        prompts = body["batch"]
        chunks = [dict(body, batch=prompts[i:i + self._max_batch],
                       seed=(body["seed"] + k * _SEED_STRIDE) % 2**64)
                  for k, i in enumerate(range(0, len(prompts), self._max_batch))] or [body]
        answers = await asyncio.gather(*(self._post_json("/v1/sample", chunk) for chunk in chunks))
        return [api.generated_ids(result["tokens"], body["eos_token_ids"])
                for answer in answers for result in answer["results"]]

    async def _score(self, sequences, batch, all_positions=False):
        """Rows for ``sequences``, checked to answer exactly what was asked."""
        body = self._scoped(api.logprobs_body(sequences, batch, all_positions, self._dtype))
        response = await self._call("POST", "/v1/logprobs", body, accept=api.BINARY)
        if response.headers.get("content-type", "").split(";")[0].strip() != api.BINARY:
            raise CanopyProtocolError(
                f"asked for {api.BINARY}, got {response.headers.get('content-type')!r}", response.status)
        answer = decode_logprobs(response.body)
        if answer.sequences != sequences:
            raise CanopyProtocolError("the answer is for other token sequences than the request's")
        expected_rows = sum(map(len, sequences)) if all_positions else len(sequences)
        if answer.ids is not None or answer.rows.shape[0] != expected_rows:
            raise CanopyProtocolError(
                f"expected {expected_rows} dense rows, got {answer.rows.shape[0]} "
                f"{'dense' if answer.ids is None else 'top-k'}")
        return answer.rows

    async def _post_json(self, path, body):
        return _json(await self._call("POST", path, body))

    async def _get_json(self, path):
        return _json(await self._call("GET", path))

    async def _call(self, method, path, body=None, accept=api.JSON):
        headers = {"Accept": accept, **self._auth}
        payload = b""
        if body is not None:
            headers["Content-Type"] = api.JSON
            payload = json.dumps(body, separators=(",", ":")).encode()
        request = encode_request(method, self._prefix + path, self._host, headers, payload)
        response = await asyncio.wait_for(self._send(request), self._timeout)
        if response.status >= 400:
            raise server_error(response.status, response.body)
        if not 200 <= response.status < 300:
            raise CanopyProtocolError(f"unexpected HTTP status {response.status}", response.status)
        return response


    async def _send(self, request):
        """The response to ``request``. A 503 with ``Retry-After`` (one of the server's
        memory budgets is full: ``server_busy``) is asked again after the wait it
        names, at most ``_MAX_RETRY_WAIT`` seconds each time, within the client's
        timeout; any other answer is returned as it is."""
        while True:
            response = await self._pool.request(request)
            wait = _retry_after(response)
            if wait is None:
                return response
            await asyncio.sleep(wait)


_MAX_RETRY_WAIT = 5.0
_SEED_STRIDE = 0x9E3779B97F4A7C15  # 2^64 / golden ratio: the seeds of a split batch's requests


def _retry_after(response):
    """Seconds to wait before asking again, when the answer says to; else None."""
    if response.status != 503 or "retry-after" not in response.headers:
        return None
    try:
        seconds = float(response.headers["retry-after"])
    except ValueError:
        return None  # an HTTP-date: canopy serve never sends one
    return min(max(seconds, 0.0), _MAX_RETRY_WAIT)


def _json(response):
    try:
        return json.loads(response.body)
    except ValueError as error:
        raise CanopyProtocolError(f"answer is not JSON: {error}", response.status) from None
