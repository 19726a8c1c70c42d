"""A benchmark's store on a place of its own, and removing that place afterwards.

A place is a spec: ``{"backend": "sqlite", "path": ...}``, ``{"backend": "postgres", "url": ...,
"schema": ...}`` or ``{"backend": "redis", "url": ..., "prefix": ...}``.
"""

from __future__ import annotations

from typing import Any

from pausepoint.stores import SessionStore

__all__ = ["drop", "store_at"]


def store_at(spec: dict[str, Any]) -> SessionStore:
    """The store on the place ``spec`` describes."""
    from pausepoint.stores import PostgresSessionStore, RedisSessionStore, SqliteSessionStore

    if spec["backend"] == "sqlite":
        return SqliteSessionStore(spec["path"])
    if spec["backend"] == "postgres":
        return PostgresSessionStore(spec["url"], schema=spec["schema"])
    if spec["backend"] == "redis":
        return RedisSessionStore(spec["url"], prefix=spec["prefix"])
    raise ValueError(f"no such backend {spec['backend']!r} (known: sqlite, postgres, redis)")


async def drop(spec: dict[str, Any]) -> None:
    """Remove what the benchmark left on a PostgreSQL schema or under a Redis prefix."""
    if spec["backend"] == "postgres":
        import asyncpg

        conn = await asyncpg.connect(spec["url"])
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{spec["schema"]}" CASCADE')
        finally:
            await conn.close()
    elif spec["backend"] == "redis":
        import redis.asyncio as aioredis

        async with aioredis.Redis.from_url(spec["url"]) as client:
            keys = [key async for key in client.scan_iter(match=spec["prefix"] + "*")]
            if keys:
                await client.delete(*keys)
