"""Conversions between protobuf time types and aware UTC datetimes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf import duration_pb2, timestamp_pb2

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_datetime(value: timestamp_pb2.Timestamp) -> datetime:
    return EPOCH + timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)


def to_timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    """The instant as a new `Timestamp`; `set_timestamp` fills a message's own field without one."""
    stamp = timestamp_pb2.Timestamp()
    set_timestamp(stamp, value)
    return stamp


def set_timestamp(target: timestamp_pb2.Timestamp, value: datetime) -> None:
    """Sets `target` to the instant (a naive datetime is taken as local time, as `astimezone` does). By
    arithmetic rather than `FromDatetime`, which builds a time tuple per call, and in place rather than
    through a `Timestamp` copied in: a page of runs has hundreds."""
    since = (value if value.tzinfo is not None else value.astimezone(UTC)) - EPOCH
    target.seconds = since.days * 86_400 + since.seconds
    target.nanos = since.microseconds * 1000


def to_timedelta(value: duration_pb2.Duration) -> timedelta:
    return timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)


def to_duration(value: timedelta) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromTimedelta(value)
    return duration


def utcnow() -> datetime:
    return datetime.now(UTC)
