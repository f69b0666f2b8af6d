//! One scheduling cycle of the pure core on large snapshots; prints the figures for
//! BENCHMARKS.md. `cargo bench -p switchyard --bench scheduler` (release profile, one core).
//!
//! The headline snapshot: 10,000 GPUs (1,250 nodes x 8), 1,000 groups in 100 tenants, 100,000
//! pending jobs with mixed fractions and whole GPUs (each with 8 cores and 64 GiB of its 128-core,
//! 1 TiB node), the cluster already full of over-quota work so that reservations must be
//! reclaimed by preemption.

use std::time::Instant;

use switchyard::scheduler::core::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic, no dependency.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn snapshot(pending: usize, nodes: usize, groups: usize) -> Snapshot {
    let mut rng = Rng(0x5eed);
    let pools = vec![
        Pool {
            nodes: (0..nodes / 2)
                .map(|_| Node {
                    devices: (0..8).map(|_| Device { memory_mb: 80_000 }).collect(),
                    // 128 cores and 1 TiB: jobs' CPU and memory are checked too.
                    cpu_milli: 128_000,
                    ram_mb: 1_048_576,
                })
                .collect(),
        },
        Pool {
            nodes: (0..nodes - nodes / 2)
                .map(|_| Node {
                    devices: (0..8).map(|_| Device { memory_mb: 80_000 }).collect(),
                    // 128 cores and 1 TiB: jobs' CPU and memory are checked too.
                    cpu_milli: 128_000,
                    ram_mb: 1_048_576,
                })
                .collect(),
        },
    ];
    let gpus_total = (nodes * 8 * 1000) as u64;
    // Reservations add up to 80% of capacity; limits at 3x the reservation.
    let per_group = (gpus_total * 8 / 10 / groups as u64) as u32 / 125 * 125;
    let policies: Vec<GroupPolicy> = (0..groups)
        .map(|g| GroupPolicy {
            // 10 groups per tenant: priorities compare within a tenant, tenants are merged.
            tenant: (g / 10) as u32,
            reservation: per_group,
            limit: per_group * 3,
            over_quota_weight: 1 + (g % 3) as u32,
            over_quota_allowed: true,
            ..Default::default()
        })
        .collect();
    let queues: Vec<Queue> = (0..groups)
        .map(|g| Queue {
            group: g as u32,
            pools: if g % 2 == 0 { vec![0, 1] } else { vec![1, 0] },
            over_quota: true,
            ..Default::default()
        })
        .collect();
    // Fill the cluster: the first tenth of the groups borrow everything (over-quota), one GPU
    // per job, started long ago — reclaim has victims to find.
    let mut running = Vec::new();
    let mut id = 0u64;
    for (p, pool) in pools.iter().enumerate() {
        for (n, node) in pool.nodes.iter().enumerate() {
            for d in 0..node.devices.len() {
                let g = (id as usize) % (groups / 10).max(1);
                running.push(RunningJob {
                    id,
                    queue: g as u32,
                    priority: 0,
                    preemptible: true,
                    gpus: 1000,
                    memory_mb: 0,
                    cpu_milli: 8_000,
                    ram_mb: 65_536,
                    placement: Placement {
                        pool: p as u32,
                        node: n as u32,
                        slices: vec![(d as u32, 1000)],
                    },
                    started_at: -3_600_000 + id as i64,
                    preempted_for: None,
                    preempted_for_job: None,
                    ..Default::default()
                });
                id += 1;
            }
        }
    }
    let sizes = [125u32, 250, 500, 1000, 1000, 2000, 4000, 8000];
    let pending = (0..pending)
        .map(|i| PendingJob {
            id: 1_000_000 + i as u64,
            queue: rng.below(groups as u64) as u32,
            priority: rng.below(3) as i32,
            preemptible: rng.below(10) != 0,
            may_exceed: true,
            gpus: sizes[rng.below(sizes.len() as u64) as usize],
            memory_mb: 0,
            // Profiles give each job 8 cores and 64 GiB.
            cpu_milli: 8_000,
            ram_mb: 65_536,
            submitted_at: i as i64,
            waiting_since: i as i64,
        })
        .collect();
    Snapshot {
        now: 0,
        min_runtime_ms: 60_000,
        hold_after_ms: Some(300_000),
        reclaimed_for: Vec::new(),
        pools,
        groups: policies,
        queues,
        running,
        pending,
    }
}

fn measure(label: &str, s: &Snapshot, runs: usize) {
    let mut times = Vec::new();
    let mut last = Decisions::default();
    for _ in 0..runs {
        let t = Instant::now();
        last = schedule(s);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{label:<44} median {:>8.2} ms  min {:>8.2} ms  max {:>8.2} ms  | admits {:>6}  preempts {:>5}  waiting {:>6}",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1],
        last.admits.len(),
        last.preempts.len(),
        last.waiting.len()
    );
}

fn main() {
    println!("scheduling core, one cycle, single thread (release build)");
    let big = snapshot(100_000, 1_250, 1_000);
    measure("100k pending, 10k GPUs, 1k groups (full)", &big, 15);
    println!("\ngrowth with pending jobs (10k GPUs, 1k groups, cluster full of borrowed work):");
    for n in [1_000, 10_000, 30_000, 100_000] {
        let s = snapshot(n, 1_250, 1_000);
        measure(&format!("{n} pending"), &s, 15);
    }
    println!("\nempty cluster (no running work, all capacity idle):");
    for n in [1_000, 10_000, 100_000] {
        let mut s = snapshot(n, 1_250, 1_000);
        s.running.clear();
        measure(&format!("{n} pending, idle cluster"), &s, 15);
    }
}
