"""Conversions between protobuf time types and aware UTC datetimes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf import duration_pb2, timestamp_pb2


def to_datetime(value: timestamp_pb2.Timestamp) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
        seconds=value.seconds, microseconds=value.nanos // 1000
    )


def to_timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value.astimezone(UTC))
    return stamp


def to_timedelta(value: duration_pb2.Duration) -> timedelta:
    return timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)


def to_duration(value: timedelta) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromTimedelta(value)
    return duration


def utcnow() -> datetime:
    return datetime.now(UTC)
