//! The model-call limiter shared by every process on a PostgreSQL store (SPEC.md §3 `limits`,
//! [`agentic_engine::limits`]): [`CapacityOp`]s as single atomic statements on `agentic_capacity` (one row per
//! endpoint: next start, tokens paid until, backed off until) and `agentic_capacity_slots` (one row per
//! concurrency slot an endpoint has used: holder and expiry). Each statement has exactly the answer
//! [`agentic_engine::limits::ProcessCapacity::apply`] gives for the same operation on the same state, and is
//! correct under any number of concurrent callers on any number of servers (`docs/store-format.md`,
//! Model rate limits).

use agentic_engine::limits::{CapacityAnswer, CapacityOp};
use tokio_postgres::types::ToSql;

/// `Reserve`: the start is `max(now, next start, tokens paid until, backed off until)`; the row stores start +
/// interval and returns it, so the start is the returned value minus the interval. A new endpoint's start is
/// `now` (the other times are 0). The row lock of `ON CONFLICT DO UPDATE` serialises concurrent reservations,
/// each computing from the row as the one before left it.
const RESERVE_SQL: &str = "INSERT INTO agentic_capacity AS c (key, next_start_ms, tokens_paid_ms, backed_off_ms)
     VALUES ($1, $2::bigint + $3::bigint, 0, 0)
     ON CONFLICT (key) DO UPDATE
     SET next_start_ms = GREATEST(c.next_start_ms, c.tokens_paid_ms, c.backed_off_ms, $2::bigint) + $3::bigint
     RETURNING c.next_start_ms - $3::bigint";

/// `Unreserve`: gives back a start a `Reserve` took (its call was cancelled while waiting) when no later start
/// was taken since, i.e. the next start is still that start plus the interval; else nothing changes (nor does
/// it for an endpoint without a row).
const UNRESERVE_SQL: &str = "UPDATE agentic_capacity SET next_start_ms = $2::bigint
     WHERE key = $1 AND next_start_ms = $2::bigint + $3::bigint";

/// `Peek`: when a call may really start: `max(tokens paid until, backed off until)`.
const PEEK_SQL: &str = "SELECT GREATEST(tokens_paid_ms, backed_off_ms) FROM agentic_capacity WHERE key = $1";

/// `Spend`: tokens paid until = `max(tokens paid until, now) + debt`.
const SPEND_SQL: &str = "INSERT INTO agentic_capacity AS c (key, next_start_ms, tokens_paid_ms, backed_off_ms)
     VALUES ($1, 0, $2::bigint + $3::bigint, 0)
     ON CONFLICT (key) DO UPDATE SET tokens_paid_ms = GREATEST(c.tokens_paid_ms, $2::bigint) + $3::bigint";

/// `BackOff`: backed off until = `max(backed off until, until)`.
const BACK_OFF_SQL: &str = "INSERT INTO agentic_capacity AS c (key, next_start_ms, tokens_paid_ms, backed_off_ms)
     VALUES ($1, 0, 0, $2::bigint)
     ON CONFLICT (key) DO UPDATE SET backed_off_ms = GREATEST(c.backed_off_ms, $2::bigint)";

/// `Hold`: takes the lowest slot below `max` whose expiry has passed (a released slot expires at 0) for
/// `holder` until `expires`. `FOR UPDATE` waits for a concurrent statement changing the row (another `Hold`
/// taking it, a `Release`), then checks the row as that statement left it, and goes on to the next free slot
/// when it is no longer free: concurrent holds take different slots, one after the other, as in the process.
/// (Not `SKIP LOCKED`: a free slot being released by its expired holder would be skipped.) Returns the slot
/// taken (NULL: none) and how many slot rows below `max` the endpoint has: fewer than `max` means slots that
/// were never used have no row yet ([`GROW_SQL`] adds them).
const HOLD_SQL: &str = "WITH taken AS (
         UPDATE agentic_capacity_slots SET holder = $3, expires_ms = $5::bigint
         WHERE key = $1 AND slot = (
             SELECT slot FROM agentic_capacity_slots
             WHERE key = $1 AND slot < $2::integer AND expires_ms <= $4::bigint
             ORDER BY slot LIMIT 1
             FOR UPDATE)
         RETURNING slot)
     SELECT (SELECT slot FROM taken),
            (SELECT count(*) FROM agentic_capacity_slots WHERE key = $1 AND slot < $2::integer)";

/// Adds free slot rows `$2 .. $3` of an endpoint (rows are only ever added from 0 up, so an endpoint's rows
/// are slots `0 .. n`, and `$2` is the `n` a [`HOLD_SQL`] counted). Concurrent additions of the same rows
/// keep the first.
const GROW_SQL: &str = "INSERT INTO agentic_capacity_slots (key, slot, holder, expires_ms)
     SELECT $1, s, NULL, 0 FROM generate_series($2::integer, $3::integer - 1) AS s
     ON CONFLICT (key, slot) DO NOTHING";

/// How many slot rows a [`GROW_SQL`] adds at most: an endpoint with a large `max_concurrency` gets rows for
/// the slots it uses, not all of them.
const GROW_BY: i64 = 16;

/// `Release`: frees the slot when `holder` still holds it (a slot that expired and was taken again is the new
/// holder's).
const RELEASE_SQL: &str = "UPDATE agentic_capacity_slots SET holder = NULL, expires_ms = 0
     WHERE key = $1 AND slot = $2::integer AND holder = $3";

/// Why a capacity operation failed: a parameter PostgreSQL cannot hold, or the database.
pub(crate) enum CapacityError {
    /// A time or slot out of the range of PostgreSQL's `bigint` / `integer`.
    Range(String),
    /// The database failed.
    Pg(tokio_postgres::Error),
}

impl From<tokio_postgres::Error> for CapacityError {
    fn from(e: tokio_postgres::Error) -> Self {
        CapacityError::Pg(e)
    }
}

fn big(what: &str, v: u64) -> Result<i64, CapacityError> {
    i64::try_from(v).map_err(|_| CapacityError::Range(format!("{what} {v} is out of the range of a bigint")))
}

fn int(what: &str, v: u32) -> Result<i32, CapacityError> {
    i32::try_from(v).map_err(|_| CapacityError::Range(format!("{what} {v} is out of the range of an integer")))
}

/// A stored time (never negative: every value written is a sum of non-negative ones).
fn time(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Runs `sql` prepared (once per connection: the pool's statement cache).
async fn query(
    client: &deadpool_postgres::Client,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<tokio_postgres::Row>, CapacityError> {
    let statement = client.prepare_cached(sql).await?;
    Ok(client.query(&statement, params).await?)
}

/// Carries out `op` on the database `client` is connected to. `None` for an operation this store does not
/// know (the engine then limits in the process).
pub(crate) async fn apply(
    client: &deadpool_postgres::Client,
    op: CapacityOp,
) -> Result<Option<CapacityAnswer>, CapacityError> {
    match op {
        CapacityOp::Reserve { key, now_ms, interval_ms } => {
            let (now, interval) = (big("now", now_ms)?, big("interval", interval_ms)?);
            let rows = query(client, RESERVE_SQL, &[&key, &now, &interval]).await?;
            let start = rows.first().map_or(now_ms, |row| time(row.get(0)));
            Ok(Some(CapacityAnswer::Start(start)))
        }
        CapacityOp::Unreserve { key, start_ms, interval_ms } => {
            let (start, interval) = (big("start", start_ms)?, big("interval", interval_ms)?);
            query(client, UNRESERVE_SQL, &[&key, &start, &interval]).await?;
            Ok(Some(CapacityAnswer::Done))
        }
        CapacityOp::Peek { key } => {
            let rows = query(client, PEEK_SQL, &[&key]).await?;
            let ready = rows.first().map_or(0, |row| time(row.get(0)));
            Ok(Some(CapacityAnswer::Start(ready)))
        }
        CapacityOp::Spend { key, now_ms, debt_ms } => {
            let (now, debt) = (big("now", now_ms)?, big("token debt", debt_ms)?);
            query(client, SPEND_SQL, &[&key, &now, &debt]).await?;
            Ok(Some(CapacityAnswer::Done))
        }
        CapacityOp::BackOff { key, until_ms } => {
            let until = big("back-off time", until_ms)?;
            query(client, BACK_OFF_SQL, &[&key, &until]).await?;
            Ok(Some(CapacityAnswer::Done))
        }
        CapacityOp::Hold { key, max, holder, now_ms, expires_ms } => {
            let max = int("max_concurrency", max)?;
            let (now, expires) = (big("now", now_ms)?, big("slot expiry", expires_ms)?);
            // Each round either takes a slot, finds every slot row below `max` busy, or adds rows (which the
            // next round sees): at most max / GROW_BY + 2 rounds.
            loop {
                let rows = query(client, HOLD_SQL, &[&key, &max, &holder, &now, &expires]).await?;
                let (slot, count) =
                    rows.first().map_or((None, i64::from(max)), |row| (row.get::<_, Option<i32>>(0), row.get(1)));
                if let Some(slot) = slot {
                    return Ok(Some(CapacityAnswer::Slot(u32::try_from(slot).ok())));
                }
                if count >= i64::from(max) {
                    return Ok(Some(CapacityAnswer::Slot(None)));
                }
                let from = i32::try_from(count).unwrap_or(max);
                let to = i32::try_from((count + GROW_BY).min(i64::from(max))).unwrap_or(max);
                query(client, GROW_SQL, &[&key, &from, &to]).await?;
            }
        }
        CapacityOp::Release { key, slot, holder } => {
            let slot = int("slot", slot)?;
            query(client, RELEASE_SQL, &[&key, &slot, &holder]).await?;
            Ok(Some(CapacityAnswer::Done))
        }
        _ => Ok(None),
    }
}
