"""List queries: filters compiled to SQL, keyset pagination and opaque page tokens.

A page token is urlsafe base64 of JSON `{"f": fingerprint, "k": [sort values of the page's last row]}`. The
fingerprint hashes the resource, its scope, the filter and the order, so a token replayed with another query
is refused rather than silently skipping rows. Sort values are taken from the SQL expressions themselves
(selected as extra columns), so the next page continues exactly where the database's order left off.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    FromClause,
    Integer,
    RowMapping,
    Select,
    and_,
    bindparam,
    func,
    not_,
    or_,
    select,
    true,
    tuple_,
    type_coerce,
    union_all,
)
from sqlalchemy.dialects.postgresql import JSONB

from jobmesh.core.errors import InvalidArgument
from jobmesh.core.filters import Comparison, ListQuery, OrderKey, Wildcard
from jobmesh.core.ports.store import Page

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
# Past this many namespaces a scoped list filters with one IN list instead of a branch per namespace.
MAX_NAMESPACE_BRANCHES = 16

T = TypeVar("T")

_OPERATORS: Mapping[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True, slots=True)
class SortKey:
    expr: ColumnElement[Any]
    descending: bool
    is_time: bool


@dataclass(frozen=True, slots=True)
class Listing:
    """How one resource is listed: its filterable fields, sortable expressions and tie-break ids."""

    kind: str
    fields: Mapping[str, ColumnElement[Any]]
    sortable: Mapping[str, ColumnElement[Any]]
    tiebreak: tuple[ColumnElement[Any], ...]
    labels: ColumnElement[Any]
    namespace: ColumnElement[Any]


def where_clauses(
    listing: Listing, comparisons: Sequence[Comparison], dialect: str
) -> list[ColumnElement[bool]]:
    clauses: list[ColumnElement[bool]] = []
    for comparison in comparisons:
        if comparison.field == "labels":
            clauses.append(_label_clause(listing.labels, comparison, dialect))
        elif isinstance(comparison.value, Wildcard):
            clauses.append(_wildcard_clause(listing.fields[comparison.field], comparison))
        else:
            expr = listing.fields[comparison.field]
            clauses.append(_OPERATORS[comparison.operator](expr, comparison.value))
    return clauses


def _wildcard_clause(expr: ColumnElement[Any], comparison: Comparison) -> ColumnElement[bool]:
    """`*` becomes LIKE's `%`; the pattern's own `%`, `_` and `\\` match themselves."""
    assert isinstance(comparison.value, Wildcard)
    pattern = comparison.value.pattern
    for special in ("\\", "%", "_"):
        pattern = pattern.replace(special, f"\\{special}")
    matches = expr.ilike(pattern.replace("*", "%"), escape="\\")
    return matches if comparison.operator == "=" else not_(matches)


def _label_clause(labels: ColumnElement[Any], comparison: Comparison, dialect: str) -> ColumnElement[bool]:
    """`labels.k = v`, `labels.k != v` (also true when k is absent: = and != split the rows), `labels:k`."""
    key = comparison.label_key or ""
    if dialect == "postgresql":
        document = type_coerce(labels, JSONB)
        if comparison.operator == ":":
            has_key: ColumnElement[bool] = document.has_key(key)
            return has_key
        # `@>` is what the GIN index on labels answers.
        contains = document.contains({key: comparison.value})
        return contains if comparison.operator == "=" else not_(contains)
    path = f'$."{key}"'  # label keys never contain a double quote (see filtering._LABEL_KEY)
    if comparison.operator == ":":
        return func.json_type(labels, path).is_not(None)
    equal = func.coalesce(func.json_extract(labels, path) == comparison.value, False)
    return equal if comparison.operator == "=" else not_(equal)


def sort_keys(listing: Listing, order_by: Sequence[OrderKey]) -> list[SortKey]:
    keys = [_sort_key(listing.sortable[key.field], key.descending) for key in order_by]
    descending = keys[-1].descending if keys else False
    used = {str(key.expr) for key in keys}
    keys += [_sort_key(expr, descending) for expr in listing.tiebreak if str(expr) not in used]
    return keys


def _sort_key(expr: ColumnElement[Any], descending: bool) -> SortKey:
    return SortKey(expr, descending, expr.type.python_type is datetime)


def fetch_page(
    connection: Connection,
    statement: Select[Any],
    *,
    listing: Listing,
    query: ListQuery,
    scope: Sequence[object],
    convert: Callable[[RowMapping], T],
    every_namespace: FromClause | None = None,
) -> Page[T]:
    """Runs `statement` (already filtered) for one page of `query`, ordered by its keys then the ids. With
    `every_namespace` (PostgreSQL: the namespaces in use, a `namespace` column; `statement` then a constant
    that filters nothing), an unscoped query is walked namespace by namespace (`_per_namespace`)."""
    keys = sort_keys(listing, query.order_by)
    fingerprint = _fingerprint(listing.kind, scope, query)
    after = decode_token(query.page_token, fingerprint, keys) if query.page_token else None
    size = query.page_size if 0 < query.page_size <= MAX_PAGE_SIZE else _clamp(query.page_size)
    params: dict[str, Any] = {}
    if query.namespaces is None and every_namespace is not None:
        page_query = _per_namespace(listing, statement, query.order_by, after is not None, every_namespace)
        params = {"page_limit": size + 1, **{f"after_{i}": value for i, value in enumerate(after or ())}}
    else:
        if after is not None:
            statement = statement.where(_after(keys, _bound(keys, after)))
        if query.namespaces is None:
            page_query = _ordered(statement, keys, size + 1)
        else:  # the caller's scope, whatever the filter asks
            page_query = _in_namespaces(listing.namespace, statement, keys, size + 1, query.namespaces)
    rows = connection.execute(page_query, params).mappings().all()
    page = rows[:size]
    token = ""
    if len(rows) > size:
        token = encode_token(fingerprint, [page[-1][f"_k{i}"] for i in range(len(keys))])
    return Page([convert(row) for row in page], token)


def _ordered(statement: Select[Any], keys: Sequence[SortKey], limit: int | BindParameter[int]) -> Select[Any]:
    """The first `limit` rows in the keys' order, each with its sort values as `_k0`, `_k1`, ..."""
    return (
        statement.add_columns(*(key.expr.label(f"_k{i}") for i, key in enumerate(keys)))
        .order_by(*(key.expr.desc() if key.descending else key.expr.asc() for key in keys))
        .limit(limit)
    )


def _in_namespaces(
    namespace: ColumnElement[Any],
    statement: Select[Any],
    keys: Sequence[SortKey],
    limit: int,
    namespaces: frozenset[str],
) -> Select[Any]:
    """`_ordered` within `namespaces`. For a few, one ordered branch per namespace, merged: each branch walks
    a `(namespace, sort keys)` index in order, which PostgreSQL 15 cannot do for an IN list (it sorts every
    matching run instead; see migration 0006)."""
    if len(namespaces) <= 1 or len(namespaces) > MAX_NAMESPACE_BRANCHES:
        return _ordered(statement.where(namespace.in_(sorted(namespaces))), keys, limit)
    branches = [
        select(_ordered(statement.where(namespace == name), keys, limit).subquery())
        for name in sorted(namespaces)
    ]
    merged = union_all(*branches).subquery()
    order = [merged.c[f"_k{i}"] for i in range(len(keys))]
    return (
        select(merged)
        .order_by(*(c.desc() if key.descending else c.asc() for c, key in zip(order, keys, strict=True)))
        .limit(limit)
    )


# `_per_namespace` statements by (listing, statement, order, paged): a LATERAL subquery's column proxies cost
# more to build than the page's rows to read, so each is built once, with its page size and keyset bound.
_PER_NAMESPACE: dict[tuple[str, Select[Any], tuple[OrderKey, ...], bool, FromClause], Select[Any]] = {}
_PER_NAMESPACE_MAX = 512


def _per_namespace(
    listing: Listing,
    statement: Select[Any],
    order_by: tuple[OrderKey, ...],
    paged: bool,
    namespaces: FromClause,
) -> Select[Any]:
    """`_ordered` for each row of `namespaces` in turn (a LATERAL subquery, planned once whatever their
    number), merged: each walks a `(namespace, sort keys)` index in order, and reads one page at most. Bound
    at execution: `page_limit`, and with `paged` the keyset values `after_0`, `after_1`, ..."""
    # The statement and the namespaces themselves (compared by identity), not their ids: an id can be
    # reused once its object is gone.
    cache_key = (listing.kind, statement, order_by, paged, namespaces)
    if (built := _PER_NAMESPACE.get(cache_key)) is not None:
        return built
    keys = sort_keys(listing, order_by)
    limit = bindparam("page_limit", type_=Integer())
    if paged:
        statement = statement.where(
            _after(keys, [bindparam(f"after_{i}", type_=key.expr.type) for i, key in enumerate(keys)])
        )
    within = statement.where(listing.namespace == namespaces.c.namespace)
    branch = _ordered(within, keys, limit).lateral("branch")
    order = [branch.c[f"_k{i}"] for i in range(len(keys))]
    built = (
        select(branch)
        .select_from(namespaces)
        .join(branch, true())
        .order_by(*(c.desc() if key.descending else c.asc() for c, key in zip(order, keys, strict=True)))
        .limit(limit)
    )
    if len(_PER_NAMESPACE) >= _PER_NAMESPACE_MAX:
        _PER_NAMESPACE.clear()
    _PER_NAMESPACE[cache_key] = built
    return built


def _clamp(page_size: int) -> int:
    return DEFAULT_PAGE_SIZE if page_size <= 0 else MAX_PAGE_SIZE


def _bound(keys: Sequence[SortKey], values: Sequence[Any]) -> list[BindParameter[Any]]:
    return [bindparam(None, value, type_=key.expr.type) for key, value in zip(keys, values, strict=True)]


def _after(keys: Sequence[SortKey], binds: Sequence[BindParameter[Any]]) -> ColumnElement[bool]:
    """Rows strictly after the keyset `binds` (one per key) in the keys' order."""
    if all(key.descending == keys[0].descending for key in keys):
        # One row comparison: PostgreSQL turns it into an index range on a matching index.
        left, right = tuple_(*(key.expr for key in keys)), tuple_(*binds)
        return left < right if keys[0].descending else left > right
    branches = []
    for i, key in enumerate(keys):
        beyond = key.expr < binds[i] if key.descending else key.expr > binds[i]
        branches.append(and_(*(keys[j].expr == binds[j] for j in range(i)), beyond))
    return or_(*branches)


def _fingerprint(kind: str, scope: Sequence[object], query: ListQuery) -> str:
    described = [
        kind,
        [str(part) for part in scope],
        [[c.field, c.operator, c.label_key, _plain(c.value)] for c in query.comparisons],
        [[key.field, key.descending] for key in query.order_by],
        query.upcoming_after is None,
    ]
    return hashlib.sha256(json.dumps(described).encode()).hexdigest()[:16]


def _plain(value: object) -> object:
    if isinstance(value, Wildcard):
        return {"like": value.pattern}
    return value.isoformat() if isinstance(value, datetime) else value


def encode_token(fingerprint: str, values: Sequence[Any]) -> str:
    payload = json.dumps({"f": fingerprint, "k": [_plain(value) for value in values]}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def decode_token(token: str, fingerprint: str, keys: Sequence[SortKey]) -> list[Any]:
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        values = payload["k"]
        matches = payload["f"] == fingerprint
    except (binascii.Error, ValueError, TypeError, KeyError, RecursionError):
        raise _bad_token("not a page token from this API") from None
    if not matches:
        raise _bad_token("made for another filter or order_by: start again from the first page")
    if not isinstance(values, list) or len(values) != len(keys):
        raise _bad_token("not a page token from this API")
    return [_decoded(value, key) for value, key in zip(values, keys, strict=True)]


def _decoded(value: object, key: SortKey) -> Any:
    if not isinstance(value, str):
        raise _bad_token("not a page token from this API")
    if not key.is_time:
        return value
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            raise ValueError("no offset")
        return moment.astimezone(UTC)  # OverflowError for a time past year 9999 once in UTC
    except (ValueError, OverflowError):
        raise _bad_token("not a page token from this API") from None


def _bad_token(description: str) -> InvalidArgument:
    return InvalidArgument.single("page_token", description)
