//! The history read back through the store: sample sets written by hand, buckets and averages
//! computed by hand.

use app::model::{Auth, HistoryWindow, Me, Principal};

use super::read::history;
use super::{prune, write, SampleRow, SampleSet, Series};
use crate::store::Store;

// 2026-12-02 17:04:05.123 UTC; minutes as epoch milliseconds.
const NOW: i64 = 1_796_231_045_123;
const M1702: i64 = 1_796_230_920_000;
const M1703: i64 = 1_796_230_980_000;
const M1704: i64 = 1_796_231_040_000;

fn admin(tenant: &str) -> Principal {
    Principal {
        me: Me {
            user_id: format!("{tenant}-admin"),
            username: "admin".into(),
            display_name: "Admin".into(),
            email: None,
            tenant_id: tenant.into(),
            tenant_slug: tenant.into(),
            tenant_name: tenant.into(),
            is_platform_admin: false,
            is_tenant_admin: true,
        },
        auth: Auth::Token {
            token_id: "t".into(),
        },
    }
}

fn group(tenant: &str, in_quota: i64, over_quota: i64) -> SampleRow {
    SampleRow {
        tenant_id: Some(tenant.into()),
        group_id: Some(format!("{tenant}-g")),
        in_quota_milli: in_quota,
        over_quota_milli: over_quota,
        ..SampleRow::new(Series::Group)
    }
}

fn queue(started: i64, p50: i64, tail: i64, waiting: i64) -> SampleRow {
    SampleRow {
        tenant_id: Some("t1".into()),
        group_id: Some("t1-g".into()),
        queue_id: Some("q".into()),
        waiting,
        started,
        wait_p50_ms: (started > 0).then_some(p50),
        wait_p90_ms: (started > 0).then_some(tail),
        wait_p99_ms: (started > 0).then_some(tail),
        ..SampleRow::new(Series::Queue)
    }
}

fn set(at: i64, rows: Vec<SampleRow>) -> SampleSet {
    SampleSet {
        at,
        generated: false,
        rows,
    }
}

async fn store_with_samples() -> Store {
    let store = Store::connect("sqlite::memory:").await.expect("store");
    let sets = [
        // 17:02:00: the group uses 1 GPU; three jobs started (median 10 s, tail 20 s).
        set(
            M1702,
            vec![group("t1", 1000, 0), queue(3, 10_000, 20_000, 0)],
        ),
        // 17:02:30: the group uses nothing (no row); one job started after 50 s; two wait.
        set(M1702 + 30_000, vec![queue(1, 50_000, 50_000, 2)]),
        // 17:03: 2 GPUs in quota, half a GPU over; another tenant's group.
        set(M1703, vec![group("t1", 2000, 500), group("t2", 7000, 0)]),
        // 17:04: 3 GPUs.
        set(M1704, vec![group("t1", 3000, 0)]),
    ];
    let mut tx = store.begin_write().await.expect("tx");
    write(&mut tx, &sets).await.expect("write");
    tx.commit().await.expect("commit");
    store
}

#[tokio::test]
async fn an_hour_averages_each_minute_over_its_sets() {
    let store = store_with_samples().await;
    let h = history(&store, &admin("t1"), HistoryWindow::Hour, NOW)
        .await
        .expect("history");
    assert_eq!(h.buckets.len(), 60);
    assert_eq!(h.buckets[59], M1704);
    assert_eq!(h.buckets[57], M1702);
    let mut samples = vec![0; 60];
    samples[57] = 2;
    samples[58] = 1;
    samples[59] = 1;
    assert_eq!(h.samples, samples);

    assert_eq!(h.groups.len(), 1, "only t1's group: {:?}", h.groups);
    let g = &h.groups[0].points;
    assert!(g[..57].iter().all(Option::is_none), "no sets, no points");
    // 17:02: (1000 + 0) / 2 sets.
    let p = g[57].expect("17:02");
    assert_eq!((p.in_quota_milli, p.over_quota_milli), (500, 0));
    let p = g[58].expect("17:03");
    assert_eq!((p.in_quota_milli, p.over_quota_milli), (2000, 500));
    assert_eq!(g[59].map(|p| p.in_quota_milli), Some(3000));

    let q = h.queues[0].points[57].expect("17:02");
    // Four jobs started: median (3 * 10 s + 1 * 50 s) / 4 = 20 s; the tail is the worst, 50 s;
    // two waiting in one of two sets: one on average.
    assert_eq!(q.started, 4);
    assert_eq!(
        (q.wait_p50_ms, q.wait_p90_ms, q.wait_p99_ms),
        (Some(20_000), Some(50_000), Some(50_000))
    );
    assert_eq!(q.waiting, 1.0);
    // A minute with sets but no row of the queue: zero, and no waits.
    let q = h.queues[0].points[58].expect("17:03");
    assert_eq!((q.started, q.waiting, q.wait_p50_ms), (0, 0.0, None));
}

#[tokio::test]
async fn a_day_puts_the_four_sets_in_one_quarter_hour() {
    let store = store_with_samples().await;
    let h = history(&store, &admin("t1"), HistoryWindow::Day, NOW)
        .await
        .expect("history");
    assert_eq!(h.buckets.len(), 96);
    assert_eq!(h.samples[95], 4, "17:00 to 17:15");
    // (1000 + 0 + 2000 + 3000) / 4 = 1500 in quota; 500 / 4 = 125 over quota.
    let p = h.groups[0].points[95].expect("17:00");
    assert_eq!((p.in_quota_milli, p.over_quota_milli), (1500, 125));
    assert_eq!(h.generated_until, None);

    // The other tenant sees its own group only, at 7000 / 4.
    let h = history(&store, &admin("t2"), HistoryWindow::Day, NOW)
        .await
        .expect("history");
    assert_eq!(h.groups.len(), 1);
    assert_eq!(h.groups[0].group_id, "t2-g");
    assert_eq!(h.groups[0].points[95].map(|p| p.in_quota_milli), Some(1750));
    assert!(h.queues.is_empty(), "t1's queue is not t2's");
}

#[tokio::test]
async fn pruning_removes_the_oldest_sets_a_bounded_number_at_a_time() {
    let store = Store::connect("sqlite::memory:").await.expect("store");
    let sets: Vec<SampleSet> = (0..70)
        .map(|i| set(i * 60_000, vec![group("t1", 1000, 0)]))
        .collect();
    let mut tx = store.begin_write().await.expect("tx");
    write(&mut tx, &sets).await.expect("write");
    // Everything is old: 60 sets (a marker and a row each) go now, 10 next time.
    assert_eq!(prune(&mut tx, 1_000_000_000).await.expect("prune"), 120);
    assert_eq!(prune(&mut tx, 1_000_000_000).await.expect("prune"), 20);
    assert_eq!(prune(&mut tx, 1_000_000_000).await.expect("prune"), 0);
    tx.commit().await.expect("commit");
}
