//! Group commit of single submits: concurrent `POST /jobs` requests are validated in
//! parallel, then their prepared jobs are written together, many per write transaction.
//!
//! Each request queues its prepared job on its store's queue and waits for its answer or for
//! the turn to write. The request that gets the turn starts a writer task (so that a client
//! going away cannot cut a write short), which takes every job queued by then and those
//! queued while its transaction waited to begin (up to [`MAX_GROUP`]), writes them in one
//! transaction, and goes on with those queued meanwhile until none is left; then the turn
//! passes on. Per job its idempotency key, its caps, its row, its event and its audit entry;
//! one commit, one wake of the scheduler. Only then is each request answered. One job refused
//! (a cap, a key used with another body) does not fail the others: each is checked inside the
//! transaction against what is committed and what the same transaction took before it, and a
//! refused job writes nothing. A request whose client went away before its job was taken is
//! skipped; once taken, its job is written whole or not at all, like any other.

use std::collections::VecDeque;
use std::sync::{Arc, LazyLock, Mutex as StdMutex, Weak};

use tokio::sync::{oneshot, Mutex, Notify};

use app::model::{Job, RequestMeta};

use super::caps::{PendingCaps, Tally};
use super::idempotency::{self, Claim, IdemKey};
use super::insert::{insert_jobs, Gives, Head, NewJob};
use crate::audit::{self, Actor, BatchRecord};
use crate::http::error::AppError;
use crate::store::{Dialect, Store, WriteTx};

/// The most submits one transaction writes.
pub const MAX_GROUP: usize = 256;

/// A prepared submit waiting for its write.
pub struct Pending {
    pub tenant_id: String,
    pub user_id: String,
    pub actor: Actor,
    pub meta: RequestMeta,
    pub caps: PendingCaps,
    pub key: Option<IdemKey>,
    pub job: Job,
    pub gives: Gives,
    pub priority: i64,
    /// The audit entry's summary.
    pub summary: serde_json::Value,
}

/// What a committed submit answers.
pub enum Outcome {
    /// The job, stored.
    Created(Box<Job>),
    /// The key was used before with the same request: these jobs answer it.
    Replay(Vec<String>),
}

type Reply = Result<Outcome, AppError>;
type Waiting = (Pending, oneshot::Sender<Reply>);

/// One store's queue of submits and the turn to write them.
#[derive(Default)]
struct Queue {
    pending: StdMutex<VecDeque<Waiting>>,
    turn: Arc<Mutex<()>>,
}

/// The queue of each store, found by the store's `scheduling_changed` (shared by its clones).
/// The `Weak` keeps that allocation's address from being reused while the entry exists.
#[allow(clippy::type_complexity)]
static QUEUES: LazyLock<StdMutex<Vec<(Weak<Notify>, Arc<Queue>)>>> =
    LazyLock::new(Default::default);

fn queue_of(store: &Store) -> Arc<Queue> {
    let me = Arc::downgrade(&store.scheduling_changed);
    let mut all = QUEUES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, q)) = all.iter().find(|(w, _)| w.ptr_eq(&me)) {
        return q.clone();
    }
    all.retain(|(w, _)| w.strong_count() > 0);
    let q = Arc::new(Queue::default());
    all.push((me, q.clone()));
    q
}

/// Queues `item` for the next group commit and answers once it is committed (or refused).
pub async fn commit(store: &Store, item: Pending) -> Result<Outcome, AppError> {
    let queue = queue_of(store);
    let (reply, mut answer) = oneshot::channel();
    queue
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push_back((item, reply));
    loop {
        tokio::select! {
            biased;
            r = &mut answer => {
                return r.unwrap_or_else(|_| {
                    tracing::error!("group commit: a submit's writer ended without an answer");
                    Err(AppError::Internal)
                });
            }
            turn = queue.turn.clone().lock_owned() => {
                // Its own task: the writes finish (or fail whole) even if this request is
                // dropped. It writes groups until none is queued, then passes the turn on.
                let (store, queue) = (store.clone(), queue.clone());
                tokio::spawn(async move {
                    loop {
                        let mut group = Vec::new();
                        take(&queue, &mut group);
                        if group.is_empty() {
                            break;
                        }
                        write(&store, &queue, group).await;
                    }
                    drop(turn);
                });
            }
        }
    }
}

/// Moves the oldest queued submits whose requests still wait into `group`, up to
/// [`MAX_GROUP`].
fn take(queue: &Queue, group: &mut Vec<Waiting>) {
    let mut pending = queue.pending.lock().unwrap_or_else(|e| e.into_inner());
    while group.len() < MAX_GROUP {
        let Some(w) = pending.pop_front() else { break };
        if !w.1.is_closed() {
            group.push(w);
        }
    }
}

/// Writes a group, with those queued while its transaction began, and answers each of its
/// requests.
async fn write(store: &Store, queue: &Queue, mut group: Vec<Waiting>) {
    let began = std::time::Instant::now();
    let (begun, tally) = begin(store, &group).await;
    let stored = match begun {
        Ok(tx) => {
            let opened = began.elapsed();
            take(queue, &mut group);
            let items: Vec<&Pending> = group.iter().map(|w| &w.0).collect();
            let stored = store_group(tx, &items, tally).await;
            tracing::debug!(
                jobs = group.len(),
                begin_us = opened.as_micros() as u64,
                us = began.elapsed().as_micros() as u64,
                "group commit of submits"
            );
            stored
        }
        Err(e) => Err(e),
    };
    match stored {
        Ok(answers) => {
            for ((item, reply), answer) in group.into_iter().zip(answers) {
                let _ = reply.send(answer.unwrap_or(Ok(Outcome::Created(Box::new(item.job)))));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, jobs = group.len(), "group commit of submits failed");
            for (_, reply) in group {
                let _ = reply.send(Err(AppError::Internal));
            }
        }
    }
}

/// Begins the group's transaction. On PostgreSQL the group's users' and groups' waiting jobs
/// are read meanwhile (one round trip less inside the transaction, which holds the turn to
/// write); on SQLite, whose write lock decides what is committed, inside it.
async fn begin(store: &Store, group: &[Waiting]) -> (Result<WriteTx, sqlx::Error>, Tally) {
    if store.dialect != Dialect::Postgres {
        return (store.begin_write().await, Tally::default());
    }
    let keys: Vec<(&str, &str, &str)> = group
        .iter()
        .map(|(p, _)| {
            (
                p.tenant_id.as_str(),
                p.user_id.as_str(),
                p.job.group_id.as_str(),
            )
        })
        .collect();
    let (tx, read) = tokio::join!(store.begin_write(), Tally::read(&store.pool, &keys));
    // Not read: the transaction reads them itself.
    (tx, read.unwrap_or_default())
}

/// One transaction for `items`: the answer of each refused or replayed one, `None` for each
/// one stored. `tally` holds the waiting jobs already read (the rest are read inside).
async fn store_group(
    mut tx: WriteTx,
    items: &[&Pending],
    mut tally: Tally,
) -> Result<Vec<Option<Reply>>, sqlx::Error> {
    let now = tx.now();
    if items.iter().any(|p| p.key.is_some()) {
        idempotency::forget_expired(&mut tx, now).await?;
    }
    let mut answers: Vec<Option<Reply>> = Vec::with_capacity(items.len());
    for p in items {
        if let Some(k) = &p.key {
            let ids = [p.job.id.as_str()];
            match idempotency::claim_as(&mut tx, &p.tenant_id, &p.user_id, k, now, &ids).await? {
                Claim::New => {}
                Claim::Replay(ids) => {
                    answers.push(Some(Ok(Outcome::Replay(ids))));
                    continue;
                }
                Claim::Clash => {
                    answers.push(Some(Err(idempotency::clash())));
                    continue;
                }
            }
        }
        if let Err(refused) = tally
            .take(&mut tx, p.caps, &p.tenant_id, &p.user_id, &p.job)
            .await?
        {
            if let Some(k) = &p.key {
                idempotency::release(&mut tx, &p.tenant_id, &p.user_id, k).await?;
            }
            answers.push(Some(Err(refused)));
            continue;
        }
        answers.push(None);
    }
    let stored: Vec<&Pending> = items
        .iter()
        .zip(&answers)
        .filter(|(_, a)| a.is_none())
        .map(|(p, _)| *p)
        .collect();
    if !stored.is_empty() {
        let rows: Vec<NewJob> = stored
            .iter()
            .map(|p| NewJob {
                tenant_id: &p.tenant_id,
                job: &p.job,
                gives: p.gives,
                priority: p.priority,
            })
            .collect();
        // One tenant (the usual group): its head is locked by the insert's statement.
        let tenant = stored[0].tenant_id.as_str();
        let one_tenant = stored.iter().all(|p| p.tenant_id == tenant);
        let head = insert_jobs(
            &mut tx,
            &rows,
            one_tenant.then_some(Head::Chain(tenant, audit::Chain::Api)),
        )
        .await?;
        let records: Vec<BatchRecord> = stored
            .iter()
            .map(|p| BatchRecord {
                tenant_id: p.tenant_id.clone(),
                action: "job.submit",
                target_kind: "job",
                target_id: p.job.id.clone(),
                summary: p.summary.clone(),
            })
            .collect();
        let each: Vec<(&Actor, &RequestMeta, &BatchRecord)> = stored
            .iter()
            .zip(&records)
            .map(|(p, r)| (&p.actor, &p.meta, r))
            .collect();
        audit::append_each_locked(&mut tx, now, audit::Chain::Api, &each, head).await?;
        tx.wake_scheduler();
    }
    tx.commit().await?;
    Ok(answers)
}
