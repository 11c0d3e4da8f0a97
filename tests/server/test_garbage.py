"""Generated garbage sent to every RPC never yields INTERNAL or UNKNOWN: bad input is the caller's error.

Requests are built from the message descriptors, so new fields are covered without touching this file.
They are sent by a `grpc.aio` channel on the server's own event loop: a blocking stub's calls cost the
process half as much again (a polling thread of the channel's, and the interpreter passed between threads
twice a call), and the requests are the same.
Strings mix random text with fragments that reach deeper code (names, filters, cron expressions). Each RPC
gets the hypothesis profile's number of requests (tests/conftest.py), `BATCH` to an example, sent at once.
Hypothesis draws one seed per example, from which a plain `random.Random` builds each request with
hypothesis's proportions (each request with its own share of fields set: swarm testing), and prints the
request of a failure.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import math
import random
import struct
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from typing import Any, Generic, TypeVar, cast

import grpc
import pytest
from google.protobuf import message, message_factory
from google.protobuf.descriptor import FieldDescriptor, MethodDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture.providers import GLOBAL_CONSTANTS, _get_local_constants

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.server.config import ServerConfig
from jobmesh.v1 import job_pb2, job_service_pb2, search_service_pb2
from tests.server.conftest import AioServerThread, Api

FORBIDDEN = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}

FRAGMENTS = [
    "",
    "jobs/",
    "jobs/a",
    "jobs/-",
    "jobs/a/runs/b",
    "jobs/a/runs/",
    "jobs//runs/x",
    "a",
    "-",
    "*",
    "display_name",
    "labels",
    "schedule",
    "target",
    "state",
    "queue",
    "priority",
    "retry_policy",
    "state = ACTIVE",
    'labels.team = "x"',
    "labels:team",
    'create_time > "2024-01-01T00:00:00Z"',
    "attempt >= 2",
    'job = "jobs/a"',
    "state = SCHEDULED AND attempt = 1",
    "name desc",
    "create_time",
    "* * * * *",
    "* * * * * *",
    "@hourly",
    "0 3 * * *",
    "61 * * * *",
    "UTC",
    "Europe/Paris",
    "Mars/Base",
    "\x00",
    "é",
    "😀",
    "../../etc/passwd",
    "http://127.0.0.1:1/x",
    "https://",
    "GET",
    "echo",
    "1",
    "0",
    "9999999999999999999",
    "-1",
    '"',
    "'",
    "(",
    ")",
    "AND",
    "OR",
    "NOT",
    # The limits of time, of int32 and int64, and strings that only look like numbers or tokens.
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+05:00",
    "9999-12-31T23:59:59-05:00",
    'create_time > "0001-01-01T00:00:00+05:00"',
    'schedule_time <= "9999-12-31T23:59:59-05:00"',
    "attempt = 2147483648",
    "attempt = -2147483649",
    "attempt = 9223372036854775808",
    "*/99999999999999999999 * * * *",
    "\u00b2",
    "\u0663",
    "1\u00b2",
    "eyJmIjoiIiwiayI6W119",  # a page token of the right shape, for no query
    "W1tbW1tbW1tbW10=",  # nested brackets
]

# Strings: a fragment, any text, or text of this alphabet, a third of the time each.
ALPHABET = 'jobs/runa-z0:=" '
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
FLOAT32_MAX = 3.4028234663852886e38
BIGGEST_FLOATS = (sys.float_info.max, -sys.float_info.max, FLOAT32_MAX, -FLOAT32_MAX)
SPECIAL_FLOATS = (0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, *BIGGEST_FLOATS)
# Hypothesis draws one value in twenty (floats: three in twenty) from constants: its own (limits, odd strings)
# and the literals of the code under test.
CONSTANT_SHARE = 0.05
FLOAT_CONSTANT_SHARE = 0.15
# Hypothesis never runs the same choices twice, so nearly all of its examples were different requests; built
# from seeds, small messages repeat (a one-field request is empty half the time). So each seed takes the first
# of its candidates that no other seed took.
MAX_CANDIDATES = 100
# Requests in one example, sent at once: fifty keep the server's event loop busy, and share hypothesis's work
# for an example (with ten, the file cost a fifth more CPU).
BATCH = 50
# Swarm testing: each request draws how many of its fields are set and how often its strings are fragments,
# so that some requests are sparse and well-formed enough to pass validation and reach the code behind it,
# and others are dense garbage.
SET_SHARES = (0.1, 0.3, 0.5, 0.7, 0.9)
FRAGMENT_SHARES = (1 / 3, 0.75)
# Fields that hold a resource name (`jobs/{job}`, `jobs/{job}/runs/{run}`): half the time one of that shape.
NAME_FIELDS = frozenset({"name", "parent", "job"})
ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789-"
T = TypeVar("T")


class Swarm(random.Random):
    """A request's random source, with its swarm's proportions."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.set_share = self.choice(SET_SHARES)
        self.fragment_share = self.choice(FRAGMENT_SHARES)


Make = Callable[[Swarm], T]


class Fresh(Generic[T]):
    """From a seed, the first value of `make` that no other seed gave (or the last of `MAX_CANDIDATES`): the
    same seed always gives the same value, so a failure replays."""

    def __init__(self, name: str, make: Make[T], key: Callable[[T], bytes]) -> None:
        self._name = name
        self._make = make
        self._key = key
        self._seed_of: dict[bytes, int] = {}

    def __repr__(self) -> str:
        """Hypothesis shows a failure's input as this, called with its seed."""
        return f"{self._name}_from_seed"

    def __call__(self, seed: int) -> T:
        rnd = Swarm(seed)
        for _ in range(MAX_CANDIDATES):
            value = self._make(rnd)
            if self._seed_of.setdefault(self._key(value), seed) == seed:
                return value
        return value


class Batch(Generic[T]):
    """`BATCH` values of `fresh`, of the seeds `seed * BATCH + i`: one hypothesis draw for all of them."""

    def __init__(self, fresh: Fresh[T]) -> None:
        self._fresh = fresh

    def __repr__(self) -> str:
        return f"batch_of_{self._fresh!r}"

    def __call__(self, seed: int) -> list[T]:
        return [self._fresh(seed * BATCH + index) for index in range(BATCH)]


def seeded(name: str, make: Make[T], key: Callable[[T], bytes]) -> st.SearchStrategy[list[T]]:
    """Batches of values of `make` whose seed is hypothesis's one draw per example: drawing every field of a
    request from hypothesis took about half of the test's time, and its own work for each example (a third of
    the rest) is shared by a batch."""
    return st.integers(0, 2**64 - 1).map(Batch(Fresh(name, make, key)))


def _size(rnd: random.Random, average: float, maximum: int) -> int:
    """A geometric count of mean `average` (as hypothesis sizes a collection), at most `maximum`."""
    return min(int(rnd.expovariate(math.log1p(1 / average))), maximum)


def _character(rnd: random.Random) -> str:
    """Of the first 256 code points four times in five, as hypothesis draws them; else of any but the
    surrogates, which UTF-8 cannot carry."""
    if rnd.random() < 0.8:
        return chr(rnd.randrange(256))
    code = rnd.randrange(0x110000 - 0x800)
    return chr(code + 0x800 if code >= 0xD800 else code)


def _any_text(rnd: random.Random) -> str:
    return "".join(_character(rnd) for _ in range(_size(rnd, 5, 40)))


def _alphabet_text(rnd: random.Random) -> str:
    return "".join(rnd.choices(ALPHABET, k=_size(rnd, 5, 30)))


def _fragment(rnd: random.Random) -> str:
    return rnd.choice(FRAGMENTS)


def _text(rnd: Swarm) -> str:
    """A fragment (as often as the swarm says), any text, or text of `ALPHABET`."""
    if rnd.random() < rnd.fragment_share:
        return _fragment(rnd)
    return _any_text(rnd) if rnd.random() < 0.5 else _alphabet_text(rnd)


def _resource_id(rnd: random.Random) -> str:
    if rnd.random() < 0.5:
        return rnd.choice(("a", "-", "hello", "a" * 64, "A", "a_b"))
    return "".join(rnd.choices(ID_ALPHABET, k=_size(rnd, 8, 70)))


def _resource_name(rnd: Swarm) -> str:
    """`jobs/{job}` or `jobs/{job}/runs/{run}` half the time, else any string."""
    if rnd.random() < 0.5:
        return _text(rnd)
    job = f"jobs/{_resource_id(rnd)}"
    return job if rnd.random() < 0.5 else f"{job}/runs/{_resource_id(rnd)}"


def _one_of(*makers: Make[T]) -> Make[T]:
    return lambda rnd: rnd.choice(makers)(rnd)


def _integers(low: int, high: int) -> Make[int]:
    """As hypothesis draws them: half the time within 256 of zero, else of a log-uniform magnitude (the sign
    that fits the bounds)."""
    near = (max(low, -256), min(high, 256))
    bits = max(abs(low), abs(high)).bit_length()

    def draw(rnd: random.Random) -> int:
        if near[0] <= near[1] and rnd.random() < 0.5:
            return rnd.randint(*near)
        magnitude = int(2 ** rnd.uniform(0, bits))
        value = magnitude if rnd.random() < 0.5 else -magnitude
        if not low <= value <= high:
            value = -value
        return min(max(value, low), high)

    return draw


def _sampled(values: Sequence[T]) -> Make[T]:
    return lambda rnd: rnd.choice(values)


def _between(low: int, high: int) -> Callable[[int], bool]:
    return lambda value: low <= value <= high


def _double(rnd: random.Random) -> float:
    kind = rnd.randrange(3)
    if kind == 0:  # any bit pattern: subnormals, NaN payloads, the largest magnitudes
        return cast(float, struct.unpack("<d", rnd.randbytes(8))[0])
    if kind == 1:
        return float(rnd.randint(-1000, 1000))
    return rnd.uniform(-10, 10)


def _single(rnd: random.Random) -> float:
    if rnd.randrange(3) == 0:
        return cast(float, struct.unpack("<f", rnd.randbytes(4))[0])
    return _as_single(_double(rnd))


def _as_single(value: float) -> float:
    try:
        return cast(float, struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def _is_single(value: float) -> bool:
    return math.isnan(value) or _as_single(value) == value


def _floats(draw: Make[float], fits: Callable[[float], bool]) -> Make[float]:
    """`draw`, but one time in twenty a special float and three in twenty a constant, as hypothesis does."""
    special = _sampled([value for value in SPECIAL_FLOATS if fits(value)])
    usual = _with_constants(float, fits, draw, FLOAT_CONSTANT_SHARE)
    return lambda rnd: special(rnd) if rnd.random() < CONSTANT_SHARE else usual(rnd)


def _with_constants(
    kind: type[int | float | bytes | str],
    fits: Callable[[T], bool],
    draw: Make[T],
    share: float = CONSTANT_SHARE,
) -> Make[T]:
    """`draw`, but `share` of the time one of the constants of `kind` that `fit`."""
    pools = [
        fitting
        for pool in (GLOBAL_CONSTANTS.set_for_type(kind), _get_local_constants().set_for_type(kind))
        if (fitting := [value for value in cast(Iterable[T], pool) if fits(value)])
    ]
    if not pools:
        return draw
    return lambda rnd: rnd.choice(rnd.choice(pools)) if rnd.random() < share else draw(rnd)


@functools.cache
def scalars() -> dict[int, Make[Any]]:
    """Each scalar type's values; built at the first request, once the server's modules (whose literals are
    among the constants) are loaded."""
    return {
        FieldDescriptor.TYPE_STRING: _with_constants(str, lambda text: len(text) <= 40, _text),
        FieldDescriptor.TYPE_BYTES: _with_constants(
            bytes, lambda data: len(data) <= 64, lambda rnd: rnd.randbytes(_size(rnd, 5, 64))
        ),
        FieldDescriptor.TYPE_BOOL: lambda rnd: rnd.random() < 0.5,
        FieldDescriptor.TYPE_DOUBLE: _floats(_double, lambda _: True),
        FieldDescriptor.TYPE_FLOAT: _floats(_single, _is_single),
        FieldDescriptor.TYPE_INT32: _with_constants(
            int, _between(*INT32), _one_of(_integers(-3, 1001), _integers(*INT32), _sampled(INT32))
        ),
        FieldDescriptor.TYPE_INT64: _with_constants(
            int,
            _between(*INT64),
            _one_of(
                _integers(-3, 10**11),
                _integers(*INT64),
                _integers(-62135596801, 253402300800),
                _sampled([*INT64, -62135596800, 253402300799, 2**31, -(2**31) - 1]),
            ),
        ),
        FieldDescriptor.TYPE_ENUM: _integers(-2, 12),
    }


Setter = Callable[[message.Message, Swarm], None]


# One builder per message type and depth, made once: the field plans are closures over their values' makers.
@functools.cache
def _builder(desc: Any, depth: int) -> Make[message.Message]:
    """Each field set or not, in the swarm's proportion; messages below depth 4 are left empty."""
    new = message_factory.GetMessageClass(desc)
    setters = [] if depth > 4 else [_setter(field, depth) for field in desc.fields]

    def build(rnd: Swarm) -> message.Message:
        instance = new()
        for setter in setters:
            if rnd.random() < rnd.set_share:
                setter(instance, rnd)
        return instance

    return build


def _setter(field: Any, depth: int) -> Setter:
    """Sets `field`: up to 3 entries of a map or a list, or one value (in a oneof, the last one set wins)."""
    name = field.name
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key = scalars()[field.message_type.fields_by_name["key"].type]
        value = scalars()[field.message_type.fields_by_name["value"].type]
        return lambda instance, rnd: _fill_map(getattr(instance, name), key, value, rnd)
    make: Make[Any]
    if field.message_type:
        make = _builder(field.message_type, depth + 1)
    elif field.type == FieldDescriptor.TYPE_STRING and field.name in NAME_FIELDS:
        make = _resource_name
    else:
        make = scalars()[field.type]
    if field.is_repeated:
        return lambda instance, rnd: getattr(instance, name).extend(
            [make(rnd) for _ in range(_size(rnd, 1.5, 3))]
        )
    if field.message_type:
        return lambda instance, rnd: getattr(instance, name).CopyFrom(make(rnd))
    return lambda instance, rnd: setattr(instance, name, make(rnd))


def _fill_map(target: Any, key: Make[Any], value: Make[Any], rnd: Swarm) -> None:
    for _ in range(_size(rnd, 1.5, 3)):
        target[key(rnd)] = value(rnd)


def _serialized(request: message.Message) -> bytes:
    return request.SerializeToString(deterministic=True)


def messages(desc: Any) -> st.SearchStrategy[list[message.Message]]:
    return seeded(desc.name, _builder(desc, 0), _serialized)


# Every method of the services: a new RPC is covered without touching this file.
SERVICES = {
    "jobs": job_service_pb2.DESCRIPTOR.services_by_name["JobService"],
    "search": search_service_pb2.DESCRIPTOR.services_by_name["SearchService"],
}
METHODS = [method for service in SERVICES.values() for method in service.methods]
RPCS = [method for method in METHODS if not method.server_streaming]
STREAMS = [method for method in METHODS if method.server_streaming]


Request = message.Message | bytes
# What a call ended with: None when it answered (a stream: its first answer, or its end).
Outcome = grpc.aio.AioRpcError | None


class Sender:
    """Sends a batch of requests at once on the server's event loop and waits for them all; the answers are
    left as bytes (nothing here reads them)."""

    def __init__(self, server: AioServerThread, address: str) -> None:
        self._server = server
        self._channel = server.run(self._open(address))

    @staticmethod
    async def _open(address: str) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(address)

    def close(self) -> None:
        self._server.run(self._channel.close())

    def unary(self, method: MethodDescriptor, requests: Sequence[Request]) -> list[Outcome]:
        call: grpc.aio.UnaryUnaryMultiCallable[Request, bytes] = self._channel.unary_unary(
            _path(method), request_serializer=_serialize
        )
        return self._server.run(_all(_answer(call, request) for request in requests))

    def first_answers(self, method: MethodDescriptor, requests: Sequence[Request]) -> list[Outcome]:
        call: grpc.aio.UnaryStreamMultiCallable[Request, bytes] = self._channel.unary_stream(
            _path(method), request_serializer=_serialize
        )
        return self._server.run(_all(_first_answer(call, request) for request in requests))


def _path(method: MethodDescriptor) -> str:
    return f"/{method.containing_service.full_name}/{method.name}"


def _serialize(request: Request) -> bytes:
    return request if isinstance(request, bytes) else request.SerializeToString()


async def _all(outcomes: Iterable[Any]) -> list[Outcome]:
    return list(await asyncio.gather(*outcomes))


async def _answer(call: grpc.aio.UnaryUnaryMultiCallable[Request, bytes], request: Request) -> Outcome:
    try:
        await call(request, timeout=30)
    except grpc.aio.AioRpcError as error:
        return error
    return None


async def _first_answer(call: grpc.aio.UnaryStreamMultiCallable[Request, bytes], request: Request) -> Outcome:
    """The first answer, the end, or an error is enough; the stream is cancelled after it."""
    stream = call(request, timeout=30)
    try:
        await stream.read()
    except grpc.aio.AioRpcError as error:
        return error
    finally:
        stream.cancel()
    return None


@pytest.fixture(scope="module")
def sender(api: Api, grpc_server: AioServerThread) -> Iterator[Sender]:
    sender = Sender(grpc_server, api.address)
    yield sender
    sender.close()


@pytest.fixture(scope="module")
def server_config() -> ServerConfig:
    """No create refused for a late event loop: on a busy machine (the server shares its process with the
    generator) the creates would stop short of the code the garbage is for, and the forged-token test's own
    creates would fail with RESOURCE_EXHAUSTED."""
    return ServerConfig(listen="127.0.0.1:0", max_loop_lag=timedelta(days=1))


def _assert_none_internal(requests: Sequence[Request], outcomes: Sequence[Outcome]) -> None:
    """Fails on the first call of a batch that ended INTERNAL or UNKNOWN."""
    for request, outcome in zip(requests, outcomes, strict=True):
        if outcome is not None:
            code = outcome.code()
            assert code not in FORBIDDEN, f"{code}: {outcome.details()} for {request!r}"


def garbage(api: Api, share: int = 1) -> settings:
    """The profile's count of requests on PostgreSQL, where the probes found the most, a tenth of it on
    SQLite; divided by `share` for the tests of one class of input (forged tokens, frames). An example holds
    `BATCH` requests (or forged tokens)."""
    full = settings().max_examples // share
    count = full if cast(SqlStore, api.store).engine.dialect.name == "postgresql" else max(full // 10, 10)
    return settings(
        max_examples=max(count // BATCH, 1),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )


@pytest.mark.parametrize("method", RPCS, ids=[method.name for method in RPCS])
def test_unary_rpcs_never_fail_internally(api: Api, sender: Sender, method: MethodDescriptor) -> None:
    @garbage(api)
    @given(messages(method.input_type))
    def check(requests: list[message.Message]) -> None:
        _assert_none_internal(requests, sender.unary(method, requests))

    check()


@pytest.mark.parametrize("method", STREAMS, ids=[method.name for method in STREAMS])
def test_streams_never_fail_internally(api: Api, sender: Sender, method: MethodDescriptor) -> None:
    @garbage(api)
    @given(messages(method.input_type))
    def check(requests: list[message.Message]) -> None:
        _assert_none_internal(requests, sender.first_answers(method, requests))

    check()


# JSON a forger may put in a page token: nested values, numbers at the limits, times at the limits.
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**64), 2**64),
        st.floats(allow_nan=False),
        st.sampled_from(FRAGMENTS[-15:]),
        st.text(max_size=30),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=20,
)


def _forge(token: str, values: object) -> str:
    payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    payload["k"] = values
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def test_forged_page_tokens_never_fail_internally(api: Api, sender: Sender) -> None:
    """Tokens with the right fingerprint (it is no secret) and sort values edited at will."""
    immediate = job_pb2.Job(
        schedule=job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate()),
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])),
    )
    for _ in range(2):
        api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=immediate))
    jobs_token = api.search.ListJobs(search_service_pb2.ListJobsRequest(page_size=1)).next_page_token
    runs_token = api.search.ListRuns(
        search_service_pb2.ListRunsRequest(parent="jobs/-", page_size=1)
    ).next_page_token
    assert jobs_token
    assert runs_token
    search = SERVICES["search"]

    @garbage(api, share=5)
    @given(st.lists(json_values, min_size=BATCH, max_size=BATCH))
    def check(batch: list[object]) -> None:
        jobs = [
            search_service_pb2.ListJobsRequest(page_size=1, page_token=_forge(jobs_token, values))
            for values in batch
        ]
        runs = [
            search_service_pb2.ListRunsRequest(
                parent="jobs/-", page_size=1, page_token=_forge(runs_token, values)
            )
            for values in batch
        ]
        _assert_none_internal(jobs, sender.unary(search.methods_by_name["ListJobs"], jobs))
        _assert_none_internal(runs, sender.unary(search.methods_by_name["ListRuns"], runs))

    check()


def _mangled(desc: Any) -> st.SearchStrategy[list[bytes]]:
    """A valid request's bytes, then cut short, a byte changed, or bytes put in: invalid UTF-8 among them."""
    return seeded(f"mangled_{desc.name}", functools.partial(_mangle, _builder(desc, 0)), bytes)


def _mangle(build: Make[message.Message], rnd: Swarm) -> bytes:
    data = bytearray(build(rnd).SerializeToString())
    for _ in range(rnd.randint(1, 3)):
        where = rnd.randint(0, len(data))
        kind = rnd.choice(["cut", "change", "insert"])
        if kind == "cut":
            del data[where:]
        elif kind == "change" and where < len(data):
            data[where] = rnd.randrange(256)
        else:
            data[where:where] = rnd.randbytes(rnd.randint(1, 4))
    return bytes(data)


@pytest.mark.parametrize("method", RPCS, ids=[method.name for method in RPCS])
def test_frames_that_do_not_parse_never_fail_internally(
    api: Api, sender: Sender, method: MethodDescriptor
) -> None:
    @garbage(api, share=5)
    @given(_mangled(method.input_type))
    def check(frames: list[bytes]) -> None:
        _assert_none_internal(frames, sender.unary(method, frames))

    check()
